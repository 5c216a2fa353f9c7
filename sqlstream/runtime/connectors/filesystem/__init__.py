"""The filesystem connector: see sink.py."""

from sqlstream.runtime.connectors.filesystem.sink import CONNECTOR

__all__ = ["CONNECTOR"]
