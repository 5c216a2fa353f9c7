"""The postgres connector: see sink.py."""

from sqlstream.runtime.connectors.postgres.sink import CONNECTOR

__all__ = ["CONNECTOR"]
