"""Connectors: one module each, with its source, its sink and its option schema."""
