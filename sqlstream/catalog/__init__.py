"""Catalog: tables, views and functions known to a session."""
