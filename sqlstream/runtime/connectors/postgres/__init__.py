"""The 'postgres' connector (also registered as 'jdbc'): a PostgreSQL table as source, sink and lookup.

Options follow Flink's JDBC connector: ``url`` (``postgresql://user@host:port/db``,
``postgres://...``, Flink's ``jdbc:postgresql://host:port/db`` or a libpq conninfo
``host=... dbname=...``), ``table-name`` (``name`` or ``schema.name``; names are
quoted, so they match exactly, as written), optional ``username``/``password``
(they override the URL's).  Column names match the PostgreSQL table's exactly
or, failing that, case-insensitively.  Sessions run with ``TimeZone = UTC``, so
TIMESTAMP and TIMESTAMP_LTZ values convert to and from ``timestamp`` and
``timestamptz`` columns without the server's zone getting in.

Sink.  With a key -- the table's ``PRIMARY KEY (...) NOT ENFORCED``, which must
be the primary key or a unique index of the PostgreSQL table, or else the
PostgreSQL table's own primary key -- the sink is an upsert sink, like Flink's:
``+I``/``+U`` rows are ``INSERT ... ON CONFLICT (key) DO UPDATE``, ``-D`` rows
delete by key and ``-U`` rows are dropped (the ``+U`` that follows replaces the
row); the changes of one flush are reduced to the last one per key.  So it takes
updating (changelog) input.  Without a key it appends with ``COPY`` and refuses
``-U``/``-D`` rows, and a query that updates is refused when the job opens the sink.

``sink.delivery-guarantee``:

* ``at-least-once`` (default): every batch is written and committed at once;
  a replay after a failure writes the replayed rows again (harmless for an
  upsert sink, duplicates for an appending one).
* ``exactly-once``: PostgreSQL two-phase commit, one transaction per checkpoint
  and subtask.  :meth:`PostgresSink.prepare_commit` ends it with ``PREPARE
  TRANSACTION '<prefix>-<subtask>-<run>-<checkpoint>'`` and returns that gid as
  the committable; :meth:`PostgresSink.commit` runs ``COMMIT PREPARED`` when the
  checkpoint completes, and again, idempotently, for the committables restored
  from a checkpoint: a gid that is no longer prepared was committed, because
  only gids whose ``PREPARE TRANSACTION`` succeeded become committables.
  ``<run>`` is new for every writer, so gids never collide across restarts.
  The server needs ``max_prepared_transactions`` > 0 (PostgreSQL's default is 0),
  and ``sink.transaction-id-prefix`` must be unique per job.

  Appending sinks insert into the table inside the prepared transaction.  An
  upsert sink cannot: the prepared transaction of checkpoint n keeps the row
  locks of the keys it wrote until it is committed, which happens on the sink's
  own thread when checkpoint n completes; if that thread then writes one of
  those keys for checkpoint n+1 first, it waits for itself forever.  So an
  exactly-once upsert sink reduces a checkpoint's changes in memory, stages them
  at ``prepare_commit`` into ``<table>__sqlstream_stage`` (created next to the
  table, lock-free inserts tagged with the gid) in the prepared transaction, and
  its commit is ``COMMIT PREPARED`` followed by one transaction that applies the
  gid's staged rows to the table and deletes them.  Both steps are idempotent,
  so a crash between them is repaired by committing the restored gid again.

  A writer's first ``write`` or ``prepare_commit`` comes after the runtime has
  committed the committables restored from the checkpoint (SinkOperator does
  that when it is restored, before any record arrives).  At that point every
  gid of this prefix and subtask that is still prepared belongs to a
  predecessor's checkpoint that never completed, so it is rolled back, and
  staged rows of such gids are deleted: their records are replayed.  Doing
  this lazily, rather than in ``open``, is what keeps the restored gids safe.
  (A restore with a different parallelism leaves the gids of dropped subtasks
  prepared; ``ROLLBACK PREPARED`` them by hand.)

Source.  Bounded: ``SELECT`` of the projected columns ordered by the key (or
``ctid`` without one) through a server-side cursor in a read-only
repeatable-read transaction.  Subtask ``i`` of ``n`` reads the rows whose
position in that order is ``i`` modulo ``n``.  The position is the number of
rows returned, so the table must not change while a job reads it (Flink's JDBC
source makes the same assumption).

Lookup (``FOR SYSTEM_TIME AS OF <proctime>`` joins).  :func:`create_lookup`
takes the :class:`~runtime.connectors.base.LookupContext` (the table, its
validated options, the key columns and the columns to return) and returns a
:data:`~runtime.connectors.base.LookupFunction`, ``lookup(keys: list[tuple]) ->
dict[tuple, list[tuple]]``: for each requested key tuple (values in key-column
order) that matches, the matching rows as tuples of Python values of the
requested columns in their order (psycopg's conversions: int, str, Decimal,
datetime, ...); keys that match nothing are absent, and a key with a NULL
never matches.  One query serves up to ``LOOKUP_CHUNK`` keys.  With
``lookup.cache.max-rows`` the answers, misses included, are cached per key
(least recently used out first) for ``lookup.cache.ttl`` after they were read
(no expiry without it) by the shared ``lookup_cache``.  A lost connection is
reopened and the query retried up to ``lookup.max-retries`` times.
"""

from sqlstream.runtime.connectors.base import Connector
from sqlstream.runtime.connectors.postgres.lookup import PostgresLookup, create_lookup
from sqlstream.runtime.connectors.postgres.options import PostgresOptions
from sqlstream.runtime.connectors.postgres.sink import PostgresSink
from sqlstream.runtime.connectors.postgres.source import PostgresSource

CONNECTOR = Connector(
    "postgres",
    options=(),
    options_type=PostgresOptions,
    create_source=PostgresSource,
    create_sink=PostgresSink,
    create_lookup=create_lookup,
    accepts_updates=True,
    description="a PostgreSQL table (exactly-once sink through two-phase commit, upserts by primary key, lookups)",
)

__all__ = ["CONNECTOR", "PostgresLookup", "PostgresOptions", "PostgresSink", "PostgresSource"]
