"""The one encoding of values in state, snapshots and checkpoints: msgpack, data only.

Checkpoints and savepoints are files a user copies around and hands back to
``--restore``; decoding them must never run code, so nothing here is pickle.
msgpack carries None, bool, int, float, str, bytes, list and dict natively;
every other type that operators keep in state gets an extension type of its
own, so a value decodes to exactly the type it was (a tuple stays a tuple
and hashable, a list stays a mutable list, a Decimal stays a Decimal).  A
value of any other type (a UDAF accumulator that is an instance of a user
class, say) is refused with the type named, never silently mangled; an
IntEnum member (RowKind) is stored as its number.

Tuples are msgpack's own arrays (keys and rows are tuples: the common case
packs in C with no Python call per value) and lists the extension type.

Encoding is deterministic: equal keys built from equal parts give equal
bytes, which the rocksdb backend relies on (its keys are these bytes).
"""

from __future__ import annotations

import datetime as dt
import threading
from decimal import Decimal
from typing import Any
from zoneinfo import ZoneInfo

import msgpack
import numpy as np
import pyarrow as pa

from sqlstream.core.errors import SqlStreamError

_LIST, _SET, _FROZENSET, _DECIMAL = 1, 2, 3, 4
_DATETIME, _DATE, _TIME, _TIMEDELTA = 5, 6, 7, 8
_BIGINT, _NDARRAY, _NPSCALAR, _BATCH, _TABLE = 9, 10, 11, 12, 13


class StateCodecError(SqlStreamError):
    """A value cannot be written to state (unsupported type) or read back (not this encoding)."""


def _ipc(data: pa.RecordBatch | pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, data.schema) as w:
        w.write(data)
    return sink.getvalue().to_pybytes()


def _default(obj: Any) -> msgpack.ExtType:
    """Extension types for everything msgpack does not carry itself ."""
    t = type(obj)
    if t is int:  # ints beyond 64 bits
        return msgpack.ExtType(_BIGINT, str(obj).encode())
    if t is Decimal:
        return msgpack.ExtType(_DECIMAL, str(obj).encode())
    if t is dt.datetime:
        zone = getattr(obj.tzinfo, "key", None)  # a zoneinfo zone keeps its name, others their offset
        return msgpack.ExtType(_DATETIME, encode((obj.isoformat(), zone)))
    if t is dt.date:
        return msgpack.ExtType(_DATE, obj.isoformat().encode())
    if t is dt.time:
        return msgpack.ExtType(_TIME, obj.isoformat().encode())
    if t is dt.timedelta:
        return msgpack.ExtType(_TIMEDELTA, encode((obj.days, obj.seconds, obj.microseconds)))
    if t is set or t is frozenset:
        return msgpack.ExtType(_SET if t is set else _FROZENSET, encode(tuple(obj)))
    if t is np.ndarray:
        if obj.dtype.hasobject:
            raise StateCodecError("a numpy array of Python objects cannot be stored in state")
        return msgpack.ExtType(_NDARRAY, encode((obj.dtype.str, obj.shape, np.ascontiguousarray(obj).tobytes())))
    if isinstance(obj, np.generic) and not isinstance(obj, np.object_):
        return msgpack.ExtType(_NPSCALAR, encode((obj.dtype.str, obj.tobytes())))
    if t is pa.RecordBatch:
        return msgpack.ExtType(_BATCH, _ipc(obj))
    if t is pa.Table:
        return msgpack.ExtType(_TABLE, _ipc(obj))
    raise StateCodecError(
        f"a value of type {t.__module__}.{t.__qualname__} cannot be stored in state or a checkpoint; "
        "state holds plain data (numbers, strings, bytes, dates and times, decimals, tuples, lists, "
        "dicts, sets, numpy arrays, Arrow batches)"
    )


def _ext(code: int, data: bytes) -> Any:
    if code == _LIST:
        return list(decode(data))
    if code == _BIGINT:
        return int(data)
    if code == _DECIMAL:
        return Decimal(data.decode())
    if code == _DATETIME:
        text, zone = decode(data)
        value = dt.datetime.fromisoformat(text)
        return value.astimezone(ZoneInfo(zone)) if zone else value
    if code == _DATE:
        return dt.date.fromisoformat(data.decode())
    if code == _TIME:
        return dt.time.fromisoformat(data.decode())
    if code == _TIMEDELTA:
        return dt.timedelta(*decode(data))
    if code == _SET:
        return set(decode(data))
    if code == _FROZENSET:
        return frozenset(decode(data))
    if code == _NDARRAY:
        dtype, shape, raw = decode(data)
        return np.frombuffer(raw, dtype=np.dtype(dtype)).reshape(shape).copy()
    if code == _NPSCALAR:
        dtype, raw = decode(data)
        return np.frombuffer(raw, dtype=np.dtype(dtype))[0]
    if code == _TABLE:
        return pa.ipc.open_stream(data).read_all()
    if code == _BATCH:
        return next(iter(pa.ipc.open_stream(data)))  # written as exactly one batch
    raise StateCodecError(f"unknown extension type {code} in encoded state (written by a newer sqlstream?)")


_SCALARS = frozenset({int, str, float, bool, type(None), bytes})


def _prep(v: Any) -> Any:
    """``v`` with lists turned into their extension type and other non-msgpack values into
    theirs (tuples and dicts stay, msgpack packs them)."""
    t = type(v)
    if t in _SCALARS:
        return v
    if t is tuple:
        return tuple([_prep(x) for x in v])
    if t is list:
        return msgpack.ExtType(_LIST, encode(tuple(v)))
    if t is dict:
        return {_prep(k): _prep(x) for k, x in v.items()}
    if isinstance(v, int) and not isinstance(v, np.generic):
        return int(v)  # an IntEnum member: its number
    return _default(v)


# packers are not thread-safe and a nested encode (a list's items) runs while the outer packer is
# mid-value: one packer per thread and nesting depth
_local = threading.local()


def encode(value: Any) -> bytes:
    """``value`` as bytes that decode() turns back into an equal value of the same types."""
    packers: list[msgpack.Packer] | None = getattr(_local, "packers", None)
    if packers is None:
        packers = _local.packers = []
        _local.depth = 0
    depth = _local.depth
    if depth == len(packers):
        packers.append(msgpack.Packer(default=_default, use_bin_type=True))
    if type(value) is not tuple or any(type(x) not in _SCALARS for x in value):
        value = _prep(value)  # else a flat tuple of scalars (most keys): packed as it is
    _local.depth = depth + 1
    try:
        return packers[depth].pack(value)
    finally:
        _local.depth = depth


def decode(data: bytes) -> Any:
    """The value encode() wrote; bytes that are not this encoding raise StateCodecError."""
    try:
        return msgpack.unpackb(data, raw=False, strict_map_key=False, ext_hook=_ext, use_list=False)
    except StateCodecError:
        raise
    except (ValueError, TypeError, msgpack.UnpackException) as e:
        raise StateCodecError(f"not encoded state: {e}") from None
