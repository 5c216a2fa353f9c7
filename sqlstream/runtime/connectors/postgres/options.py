"""The postgres connector's options, validated at ``CREATE TABLE`` and read as :class:`PostgresOptions`."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal, get_args

import psycopg
from psycopg.conninfo import conninfo_to_dict

from sqlstream.core.connectors import ConnectorOptions, option
from sqlstream.core.errors import ConnectorError

DeliveryGuarantee = Literal["at-least-once", "exactly-once"]

# A gid must stay below PostgreSQL's 200 bytes with '-<subtask>-<32 hex>-<checkpoint id>' added.
_PREFIX = re.compile(r"^[A-Za-z0-9_.:]{1,100}$")


def conninfo(url: str) -> str:
    """A libpq conninfo or URI from the option (Flink's 'jdbc:postgresql://...' loses its 'jdbc:')."""
    return url[len("jdbc:"):] if url.lower().startswith("jdbc:") else url


@dataclass(frozen=True)
class PostgresOptions(ConnectorOptions):
    """What a PostgreSQL source, sink or lookup is configured with; the TTL in milliseconds."""

    url: str = option(
        "url", required=True, description="postgresql://user@host:port/db, jdbc:postgresql://... or a conninfo"
    )
    table_name: str = option("table-name", required=True, description="the PostgreSQL table: 'name' or 'schema.name'")
    username: str | None = option("username", description="user name (overrides the url's)")
    password: str | None = option("password", description="password (overrides the url's)")
    delivery_guarantee: DeliveryGuarantee = option(
        "sink.delivery-guarantee",
        default="at-least-once",
        choices=get_args(DeliveryGuarantee),
        description="at-least-once (commit every batch) or exactly-once (two-phase commit per checkpoint)",
    )
    transaction_id_prefix: str | None = option(
        "sink.transaction-id-prefix",
        description="exactly-once: prefix of the prepared transactions' gids (unique per job)",
    )
    lookup_cache_max_rows: int | None = option(
        "lookup.cache.max-rows", "int", description="lookup: cache up to this many keys (no cache without it)"
    )
    lookup_cache_ttl_ms: int | None = option(
        "lookup.cache.ttl", "duration", description="lookup: a cached key expires this long after it was read"
    )
    lookup_max_retries: int = option(
        "lookup.max-retries", "int", default=3, description="lookup: reconnect this often when the connection fails"
    )

    @property
    def conninfo(self) -> str:
        """The url as libpq takes it."""
        return conninfo(self.url)

    @property
    def table_parts(self) -> tuple[str, ...]:
        """'schema.name' or 'name' as identifier parts."""
        return tuple(self.table_name.split("."))

    @property
    def where(self) -> str:
        """host:port/db of the url, for messages (never the password)."""
        params = conninfo_to_dict(self.conninfo)
        return f"{params.get('host', 'localhost')}:{params.get('port', 5432)}/{params.get('dbname', '')}"

    def check(self, table: str) -> None:
        url = self.url
        info = self.conninfo
        scheme = info.split("://", 1)[0].lower() if "://" in info else None
        if scheme is not None and scheme not in ("postgresql", "postgres"):
            raise ConnectorError(
                f"table '{table}': option 'url' = '{url}' is not a PostgreSQL URL; expected "
                "'postgresql://user@host:port/db', 'jdbc:postgresql://host:port/db' or a conninfo 'host=... dbname=...'"
            )
        try:
            conninfo_to_dict(info)
        except psycopg.ProgrammingError as e:
            raise ConnectorError(
                f"table '{table}': option 'url' is not a valid PostgreSQL URL or conninfo: {e}"
            ) from None
        name = self.table_name
        if not all(part.strip() for part in name.split(".")) or name.count(".") > 1:
            raise ConnectorError(f"table '{table}': option 'table-name' = '{name}' must be 'table' or 'schema.table'")
        prefix = self.transaction_id_prefix
        if self.delivery_guarantee == "exactly-once":
            if not prefix:
                raise ConnectorError(
                    f"table '{table}': 'sink.delivery-guarantee' = 'exactly-once' requires option "
                    "'sink.transaction-id-prefix' (unique per job, e.g. the job name)"
                )
            if not _PREFIX.match(prefix):
                raise ConnectorError(
                    f"table '{table}': option 'sink.transaction-id-prefix' = '{prefix}' must be 1 to 100 letters, "
                    "digits, '_', '.' or ':'"
                )
        max_rows = self.lookup_cache_max_rows
        if max_rows is not None and max_rows < 1:
            raise ConnectorError(
                f"table '{table}': option 'lookup.cache.max-rows' = '{max_rows}' must be at least 1 "
                "(omit it: no cache)"
            )
        if self.lookup_max_retries < 0:
            raise ConnectorError(
                f"table '{table}': option 'lookup.max-retries' = '{self.lookup_max_retries}' must not be negative"
            )
