"""Hive-style partition directories (``dt=2024-03-01/hr=10``) as Flink's filesystem connector
names, splits, reads back and dates them.

Names are escaped as Flink's ``PartitionPathUtils.escapePathName`` does (``%XX`` for the
characters a path cannot hold), and a NULL or empty value is the ``partition.default-name``
directory, read back as NULL.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import datetime
from zoneinfo import ZoneInfo

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from sqlstream.core.evaluator import Predicate
from sqlstream.core.expressions import Expr
from sqlstream.core.types import sql_type_name

# the characters Flink's PartitionPathUtils escapes (besides the control characters)
_ESCAPED = set('"#%\'*/:=?\\\x7f{[]^')


def escape(value: str) -> str:
    """A partition value as a path segment, as Flink escapes it."""
    return "".join(f"%{ord(c):02X}" if c in _ESCAPED or ord(c) < 0x20 else c for c in value)


def unescape(segment: str) -> str:
    return re.sub(r"%([0-9A-Fa-f]{2})", lambda m: chr(int(m.group(1), 16)), segment)


def split_by_partition(batch: pa.RecordBatch, keys: Sequence[str], default_name: str
                       ) -> list[tuple[str, pa.RecordBatch]]:
    """The batch's rows grouped by their partition values (one Arrow group-by, no loop over rows):
    for each partition its relative directory and its rows without the partition columns."""
    indices = pa.array(np.arange(batch.num_rows, dtype=np.int64))
    texts = []
    for k in keys:
        col = batch.column(k)
        text = col.cast(pa.string()) if not pa.types.is_string(col.type) else col
        # NULL and '' name the default partition; a blank ' ' is a directory 'dt= ' (Flink 2.3)
        texts.append(pc.if_else(pc.equal(text, ""), None, text))
    table = pa.table([*texts, indices], names=[*keys, "__row"])
    groups = table.group_by(list(keys), use_threads=False).aggregate([("__row", "list")])
    data_cols = [n for n in batch.schema.names if n not in keys]
    data = batch.select(data_cols)
    out = []
    key_values = [groups.column(k).to_pylist() for k in keys]  # one value per partition, not per row
    rows = groups.column("__row_list")
    for g in range(groups.num_rows):
        path = "/".join(
            f"{escape(k)}={default_name if vals[g] is None else escape(vals[g])}"
            for k, vals in zip(keys, key_values, strict=True)
        )
        # one partition (a batch within one time bucket, the common case) takes no gather
        out.append((path, data if groups.num_rows == 1 else data.take(rows[g].values)))
    return out


def parse_partition(rel_dir: str, keys: Sequence[str]) -> dict[str, str] | None:
    """The raw values of a relative partition directory ``k1=v1/k2=v2``; None if it is not one
    of this table's (another layout, a stray directory)."""
    parts = [p for p in rel_dir.split("/") if p]
    if len(parts) != len(keys):
        return None
    values: dict[str, str] = {}
    for part, key in zip(parts, keys, strict=True):
        name, sep, value = part.partition("=")
        if not sep or unescape(name).lower() != key.lower():
            return None
        values[key] = unescape(value)
    return values


def typed_values(raw: Sequence[dict[str, str]], keys: Sequence[str], schema: pa.Schema, default_name: str
                 ) -> pa.Table:
    """The partitions' values as a table typed per the DDL (the default name is NULL)."""
    cols = []
    for k in keys:
        text = pa.array([r[k] for r in raw], pa.string())
        text = pc.if_else(pc.equal(text, default_name), None, text)
        target = schema.field(k).type
        try:
            cols.append(text.cast(target))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            bad = next(v for v in text.to_pylist() if v is not None and not _casts(v, target))
            raise ValueError(f"partition value {k}={bad!r} is not a {sql_type_name(target)}") from None
    return pa.table(cols, names=list(keys))


def _casts(value: str, target: pa.DataType) -> bool:
    try:
        pa.array([value]).cast(target)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return False
    return True


def prune(values: pa.Table, predicate: Expr | None) -> list[bool]:
    """Which partitions may hold rows the query keeps: ``predicate`` reads the partition columns
    (in PARTITIONED BY order); NULL counts as false, as WHERE does."""
    if predicate is None or values.num_rows == 0:
        return [True] * values.num_rows
    batch = values.combine_chunks().to_batches()[0] if values.num_rows else None
    assert batch is not None
    return Predicate(predicate)(batch).fill_null(False).to_pylist()


class TimeExtractor:
    """A partition's time (epoch ms in ``zone``) from its values, as Flink's default
    PartitionTimeExtractor: the timestamp-pattern with ``$key`` replaced (default: the first
    value), parsed with the formatter; a date alone is its midnight."""

    def __init__(self, keys: Sequence[str], pattern: str | None, formatter: str, zone: str) -> None:
        from sqlstream.runtime.connectors.filesystem.options import java_to_strptime

        self._keys = list(keys)
        self._pattern = pattern
        self._format = java_to_strptime(formatter)
        self._default_formatter = formatter == "yyyy-MM-dd HH:mm:ss"
        self._zone = ZoneInfo(zone)

    def __call__(self, values: dict[str, str]) -> int:
        if self._pattern is None:
            text = values[self._keys[0]]
        else:
            text = self._pattern
            for k in sorted(self._keys, key=len, reverse=True):  # $hour before $h
                text = re.sub(r"\$" + re.escape(k) + r"\b", values[k], text, flags=re.IGNORECASE)
        try:
            parsed = datetime.strptime(text, self._format)
        except ValueError:
            if not self._default_formatter:
                raise ValueError(f"partition time '{text}' does not match the timestamp-formatter") from None
            try:
                parsed = datetime.strptime(text, "%Y-%m-%d")
            except ValueError:
                raise ValueError(f"partition time '{text}' is neither 'yyyy-MM-dd HH:mm:ss' nor "
                                 "'yyyy-MM-dd'") from None
        return int(parsed.replace(tzinfo=self._zone).timestamp() * 1000)
