"""Keyed state backends."""
