"""The runtime side of connector lookup: the implementation behind a connector name."""

from __future__ import annotations

from sqlstream.core.connectors import connector_spec
from sqlstream.core.errors import ConnectorError
from sqlstream.runtime.connectors.base import Connector


def get_connector(name: str) -> Connector:
    """The connector called ``name`` with its source, sink and lookup factories."""
    spec = connector_spec(name)
    if not isinstance(spec, Connector):
        raise ConnectorError(f"connector '{name}' declares options but no runtime implementation")
    return spec
