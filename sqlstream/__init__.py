"""sqlstream: a streaming SQL engine in Python in the line of Apache Flink's SQL layer.

The Python Table API is exported here (``from sqlstream import TableEnvironment, col``).
It is imported on first use: the runtime imports ``sqlstream.core.errors``, and an eager
import of the Table API would import the runtime back while it is half initialized.
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"

_TABLE_API = (
    "EnvironmentSettings", "Row", "Session", "Slide", "Table", "TableEnvironment", "TableResult", "Tumble",
    "call", "call_sql", "col", "lit",
)
__all__ = ["__version__", *_TABLE_API]


def __getattr__(name: str) -> Any:
    if name in _TABLE_API:
        from sqlstream.frontend import table_api

        return getattr(table_api, name)
    raise AttributeError(f"module 'sqlstream' has no attribute '{name}'")
