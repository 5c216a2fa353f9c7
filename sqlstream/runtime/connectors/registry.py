"""Look up connectors by the name given in `'connector' = '...'`."""

from __future__ import annotations

import difflib
import importlib

from sqlstream.core.errors import ConnectorError
from sqlstream.runtime.connectors.base import Connector

# connector name -> module defining CONNECTOR; imported on first use
BUILTIN: dict[str, str] = {
    "datagen": "sqlstream.runtime.connectors.datagen",
    "filesystem": "sqlstream.runtime.connectors.filesystem",
    "print": "sqlstream.runtime.connectors.print_sink",
    "blackhole": "sqlstream.runtime.connectors.blackhole",
    "duckdb": "sqlstream.runtime.connectors.duckdb_table",
    "nexmark": "sqlstream.runtime.connectors.nexmark",
    "kafka": "sqlstream.runtime.connectors.kafka",
    "postgres": "sqlstream.runtime.connectors.postgres",
    "jdbc": "sqlstream.runtime.connectors.postgres",  # Flink's name; only PostgreSQL URLs are accepted
}


def get_connector(name: str) -> Connector:
    """The connector called ``name``; a clear error naming the known ones otherwise."""
    if not name:
        raise ConnectorError("table has no 'connector' option; add e.g. WITH ('connector' = 'datagen')")
    module = BUILTIN.get(name.lower())
    if module is None:
        close = difflib.get_close_matches(name.lower(), list(BUILTIN), n=1)
        hint = f" Did you mean '{close[0]}'?" if close else ""
        raise ConnectorError(
            f"unknown connector '{name}'.{hint} Available connectors: {', '.join(sorted(BUILTIN))}"
        )
    return importlib.import_module(module).CONNECTOR


def connector_names() -> list[str]:
    return sorted(BUILTIN)
