"""The kafka connector: see sink.py."""

from sqlstream.runtime.connectors.kafka.sink import CONNECTOR

__all__ = ["CONNECTOR"]
