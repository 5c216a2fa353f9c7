"""The 'nexmark' connector: the Nexmark benchmark's auction events, vectorized.

The data model and its parameters follow the Nexmark generator as nexmark-flink
runs it (option names are nexmark-flink's where it has one).  One global
sequence of event numbers 0, 1, 2, ... is the backbone: event number ``n`` gets
the event id ``adjusted(n)`` (``n`` itself unless ``out-of-order-group-size``
shuffles ids within groups), and the event id alone decides

* the kind: ``id % total`` below ``person.proportion`` is a person, below
  ``person + auction`` an auction, else a bid (1:3:46 by default);
* the event time: ``base-time + adjusted(n) / first-event.rate`` seconds;
* the entity ids: the k-th person has id 1000 + k, the k-th auction 1000 + k, so a
  bid at event id ``e`` knows how many persons and auctions exist "now" and picks
  a hot one (the first of the last hundred) or one of the in-flight ones (plus a
  small lead of ids about to be created), exactly as the generator does;
* every random value: a splitmix64 hash of (seed, field, event id).

Because nothing depends on what was generated before, the three tables a query
declares (``'kind' = 'person' | 'auction' | 'bid'``) are three filters over the
same stream and agree on ids and times, a reader restored from a position (the
number of event numbers it has consumed) replays exactly the rest, and
subtasks can split the sequence without talking: subtask ``i`` of ``p`` takes
the chunks ``i, i + p, i + 2p, ...`` of ``total`` consecutive event numbers, so
each subtask sees every kind in the right proportion (single events dealt out
round-robin would give all persons to one subtask when ``p`` divides 50).

nexmark-flink declares one table of ROW columns; sqlstream has no ROW type, so
each kind is its own flat table with the standard columns (declare any subset,
in any order).  Random strings are slices of a seeded 1 MiB pool of letters at
hashed offsets: building a batch's strings is then one gather, not a loop.
"""

from __future__ import annotations

import difflib
import functools
import math
import re
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from numpy.lib.stride_tricks import sliding_window_view

from sqlstream.core.connectors import Option
from sqlstream.core.errors import ConnectorError
from sqlstream.core.tables import TableDef
from sqlstream.core.types import sql_type_name
from sqlstream.runtime.connectors.base import Connector, SourceContext, SourceReader
from sqlstream.runtime.connectors.datagen import _random_u64, _unit_float
from sqlstream.runtime.connectors.throttle import Throttle

# The generator's constants (GeneratorConfig, PersonGenerator, AuctionGenerator, BidGenerator).
FIRST_PERSON_ID = 1000
FIRST_AUCTION_ID = 1000
FIRST_CATEGORY_ID = 10
NUM_CATEGORIES = 5
PERSON_ID_LEAD = 10
AUCTION_ID_LEAD = 10
HOT_SELLER_RATIO = 100  # a hot seller/bidder/auction is the first of the last 100 created
HOT_BIDDER_RATIO = 100
HOT_AUCTION_RATIO = 100
NUM_IN_FLIGHT_AUCTIONS = 100
NUM_ACTIVE_PEOPLE = 1000
OUT_OF_ORDER_MULTIPLIER = 953
HOT_CHANNELS_RATIO = 2
CHANNELS_NUMBER = 10_000
HOT_CHANNELS = ("Google", "Facebook", "Baidu", "Apple")
US_STATES = ("AZ", "CA", "ID", "OR", "WA", "WY")
US_CITIES = ("Phoenix", "Los Angeles", "San Francisco", "Boise", "Portland", "Bend", "Redmond",
             "Seattle", "Kent", "Cheyenne")
FIRST_NAMES = ("Peter", "Paul", "Luke", "John", "Saul", "Vicky", "Kate", "Julie", "Sarah", "Deiter",
               "Walter")
LAST_NAMES = ("Shultz", "Abrams", "Spencer", "White", "Bartels", "Walton", "Smith", "Jones", "Noris")
MIN_STRING_LENGTH = 3
DEFAULT_BASE_TIME_MS = 1_577_836_800_000  # 2020-01-01 00:00:00 UTC: fixed, so runs are identical

_POOL_BYTES = 1 << 20
MAX_AVG_SIZE = _POOL_BYTES // 4  # an extra string is sliced out of the pool
_TS = pa.timestamp("ms")

# Standard columns per kind, as nexmark-flink's views expose them.
SCHEMAS: dict[str, pa.Schema] = {
    "person": pa.schema([
        ("id", pa.int64()), ("name", pa.string()), ("emailAddress", pa.string()),
        ("creditCard", pa.string()), ("city", pa.string()), ("state", pa.string()),
        ("dateTime", _TS), ("extra", pa.string()),
    ]),
    "auction": pa.schema([
        ("id", pa.int64()), ("itemName", pa.string()), ("description", pa.string()),
        ("initialBid", pa.int64()), ("reserve", pa.int64()), ("dateTime", _TS), ("expires", _TS),
        ("seller", pa.int64()), ("category", pa.int64()), ("extra", pa.string()),
    ]),
    "bid": pa.schema([
        ("auction", pa.int64()), ("bidder", pa.int64()), ("price", pa.int64()),
        ("channel", pa.string()), ("url", pa.string()), ("dateTime", _TS), ("extra", pa.string()),
    ]),
}
KINDS = tuple(SCHEMAS)
EVENT_TYPE = {"person": 0, "auction": 1, "bid": 2}

# Random stream per field: field k of a kind draws from streams k * 8 .. k * 8 + 7.
_S_HOT, _S_PICK, _S_HOT2, _S_PICK2, _S_PRICE, _S_PRICE2 = 0, 8, 16, 24, 32, 40
_S_CHANNEL, _S_CHANNEL_PICK, _S_LENGTH = 48, 56, 64
_S_NAME, _S_TEXT1, _S_TEXT2, _S_CARD, _S_CITY, _S_STATE = 72, 80, 88, 96, 104, 112
_S_EXTRA = 120
_S_POOL, _S_URLS = 1 << 20, 1 << 21


_SIZE = re.compile(r"^\s*(\d+)\s*(b|bytes?|kb|k)?\s*$", re.IGNORECASE)


def parse_size(text: str) -> int:
    """A nexmark-flink memory size ('200b', '1kb', '500') in bytes."""
    m = _SIZE.match(text)
    if not m:
        raise ValueError(f"'{text}' is not a size in bytes (e.g. '200b')")
    unit = (m.group(2) or "b").lower()
    return int(m.group(1)) * (1024 if unit.startswith("k") else 1)


@dataclass(frozen=True)
class NexmarkConfig:
    """The generator's parameters (validated), shared by the readers of all three kinds."""

    person_proportion: int = 1
    auction_proportion: int = 3
    bid_proportion: int = 46
    first_event_rate: int = 10_000_000
    hot_auction_ratio: int = 2
    hot_bidders_ratio: int = 4
    hot_sellers_ratio: int = 4
    avg_person_size: int = 200
    avg_auction_size: int = 500
    avg_bid_size: int = 100
    out_of_order_group_size: int = 1
    base_time_ms: int = DEFAULT_BASE_TIME_MS
    seed: int = 0

    @property
    def total_proportion(self) -> int:
        return self.person_proportion + self.auction_proportion + self.bid_proportion

    @property
    def inter_event_delay_us(self) -> float:
        return 1_000_000.0 / self.first_event_rate

    @classmethod
    def from_options(cls, opts: dict[str, Any]) -> NexmarkConfig:
        return cls(
            person_proportion=opts["person.proportion"],
            auction_proportion=opts["auction.proportion"],
            bid_proportion=opts["bid.proportion"],
            first_event_rate=opts["first-event.rate"],
            hot_auction_ratio=opts["bid.hot-ratio.auctions"],
            hot_bidders_ratio=opts["bid.hot-ratio.bidders"],
            hot_sellers_ratio=opts["auction.hot-ratio.sellers"],
            avg_person_size=parse_size(opts["person.avg-size"]),
            avg_auction_size=parse_size(opts["auction.avg-size"]),
            avg_bid_size=parse_size(opts["bid.avg-size"]),
            out_of_order_group_size=opts["out-of-order-group-size"],
            base_time_ms=opts["base-time"],
            seed=opts["seed"],
        )

    # ------------------------------------------------------------ the generator's arithmetic
    def adjusted(self, n: np.ndarray) -> np.ndarray:
        """Event ids of event numbers ``n``: shuffled within groups of out-of-order-group-size."""
        g = self.out_of_order_group_size
        if g == 1:
            return n
        return (n // g) * g + (n * OUT_OF_ORDER_MULTIPLIER) % g

    def timestamp(self, event_id: np.ndarray) -> np.ndarray:
        """Event time (epoch ms) of event ids: the generator's ``timestampForEvent``."""
        us = (event_id.astype(np.float64) * self.inter_event_delay_us).astype(np.int64)
        return self.base_time_ms + us // 1000

    def kind_of(self, event_id: np.ndarray) -> np.ndarray:
        """0 person, 1 auction, 2 bid."""
        rem = event_id % self.total_proportion
        return (rem >= self.person_proportion).astype(np.int8) + (
            rem >= self.person_proportion + self.auction_proportion
        ).astype(np.int8)

    def last_base0_person_id(self, event_id: np.ndarray) -> np.ndarray:
        """Id (base 0) of the newest person at ``event_id``: this event's own if it is a person."""
        epoch, offset = np.divmod(event_id, self.total_proportion)
        offset = np.minimum(offset, self.person_proportion - 1)
        return epoch * self.person_proportion + offset

    def last_base0_auction_id(self, event_id: np.ndarray) -> np.ndarray:
        """Id (base 0) of the newest auction at ``event_id``: this event's own if it is an auction."""
        p, a = self.person_proportion, self.auction_proportion
        epoch, offset = np.divmod(event_id, self.total_proportion)
        before = offset < p  # a person: the last auction of the previous epoch
        epoch = epoch - before
        offset = np.where(before | (offset >= p + a), a - 1, offset - p)
        return epoch * a + offset

    def next_base0_person_id(self, event_id: np.ndarray, u: np.ndarray) -> np.ndarray:
        """A random active person (or one of the next few to be created)."""
        num_people = self.last_base0_person_id(event_id) + 1
        active = np.minimum(num_people, NUM_ACTIVE_PEOPLE)
        pick = (u % (active + PERSON_ID_LEAD).astype(np.uint64)).astype(np.int64)
        return num_people - active + pick

    def next_base0_auction_id(self, event_id: np.ndarray, u: np.ndarray) -> np.ndarray:
        """A random auction likely still in flight (or one of the next few to be created)."""
        max_auction = self.last_base0_auction_id(event_id)
        min_auction = np.maximum(max_auction - NUM_IN_FLIGHT_AUCTIONS, 0)
        span = (max_auction - min_auction + 1 + AUCTION_ID_LEAD).astype(np.uint64)
        return min_auction + (u % span).astype(np.int64)


# ---------------------------------------------------------------------------
# randomness helpers


def _draw(cfg: NexmarkConfig, stream: int, ids: np.ndarray) -> np.ndarray:
    return _random_u64(cfg.seed, stream, ids.astype(np.uint64))


def _below(cfg: NexmarkConfig, stream: int, ids: np.ndarray, bound: int) -> np.ndarray:
    """Java's ``random.nextInt(bound)`` per event: uniform int64 in [0, bound)."""
    return (_draw(cfg, stream, ids) % np.uint64(bound)).astype(np.int64)


def _price(cfg: NexmarkConfig, stream: int, ids: np.ndarray) -> np.ndarray:
    """PriceGenerator: round(10 ** (6 u) * 100), log-uniform from 1.00 to 1,000,000.00."""
    return np.round(np.power(10.0, _unit_float(_draw(cfg, stream, ids)) * 6.0) * 100.0).astype(np.int64)


@dataclass(frozen=True)
class _Pool:
    """Seeded random characters that strings are sliced from, with trimming tables."""

    letters: np.ndarray  # a-z only: nextExactString
    spaced: np.ndarray  # a-z with a space 1 time in 13: nextString
    next_solid: np.ndarray  # first non-space index at or after i in ``spaced``
    prev_solid: np.ndarray  # last non-space index at or before i in ``spaced`` (-1 if none)


_LETTER = (np.arange(256, dtype=np.uint16) * 26 >> 8).astype(np.uint8) + ord("a")


@functools.lru_cache(maxsize=8)
def _pool(seed: int) -> _Pool:
    raw = _random_u64(seed, _S_POOL, np.arange(_POOL_BYTES // 4, dtype=np.uint64)).view(np.uint8)
    letters = _LETTER[raw[: _POOL_BYTES]]
    space = (raw[_POOL_BYTES:].astype(np.uint16) * 13 >> 8) == 0
    spaced = np.where(space, np.uint8(ord(" ")), _LETTER[raw[: _POOL_BYTES][::-1]])
    index = np.arange(_POOL_BYTES, dtype=np.int64)
    solid = spaced != ord(" ")
    next_solid = np.minimum.accumulate(np.where(solid, index, _POOL_BYTES)[::-1])[::-1]
    prev_solid = np.maximum.accumulate(np.where(solid, index, -1))
    return _Pool(letters, spaced, next_solid, prev_solid)


def _slices(source: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> pa.Array:
    """A string array whose i-th value is ``source[starts[i] : starts[i] + lengths[i]]``.

    Rows of the widest length are copied out of a strided view of the pool and
    then compacted with a mask: about twice as fast as gathering byte by byte.
    """
    offsets = np.zeros(len(lengths) + 1, dtype=np.int32)
    np.cumsum(lengths, out=offsets[1:])
    width = int(lengths.max(initial=0))
    if width == 0:
        data = np.empty(0, dtype=np.uint8)
    else:
        rows = sliding_window_view(source, width)[starts]
        data = rows[np.arange(width)[None, :] < lengths[:, None]]
    return pa.Array.from_buffers(pa.string(), len(lengths), [None, pa.py_buffer(offsets), pa.py_buffer(data)])


def _exact_strings(cfg: NexmarkConfig, stream: int, ids: np.ndarray, lengths: np.ndarray, bound: int) -> pa.Array:
    """nextExactString: random lowercase letters, ``lengths[i]`` (at most ``bound``) of them.

    The offset range depends on the fixed bound, not on this batch's lengths, so
    that an event's string does not depend on which batch it falls in.
    """
    pool = _pool(cfg.seed)
    starts = (_draw(cfg, stream, ids) % np.uint64(_POOL_BYTES - bound)).astype(np.int64)
    return _slices(pool.letters, starts, lengths)


def _next_strings(cfg: NexmarkConfig, stream: int, ids: np.ndarray, max_length: int) -> pa.Array:
    """nextString: 3 .. max_length - 1 letters and spaces (1 in 13), trimmed."""
    pool = _pool(cfg.seed)
    lengths = MIN_STRING_LENGTH + _below(cfg, stream, ids, max_length - MIN_STRING_LENGTH)
    starts = (_draw(cfg, stream + 1, ids) % np.uint64(_POOL_BYTES - max_length)).astype(np.int64)
    first = pool.next_solid[starts]
    end = pool.prev_solid[starts + lengths - 1] + 1
    return _slices(pool.spaced, first, np.maximum(end - first, 0))


def _extra(cfg: NexmarkConfig, stream: int, ids: np.ndarray, current: np.ndarray, average: int) -> pa.Array:
    """nextExtra: letters so that ``current`` + their length averages ``average`` bytes."""
    desired = average - current
    delta = np.floor(desired * 0.2 + 0.5).astype(np.int64)  # Math.round
    span = np.maximum(2 * delta, 1).astype(np.uint64)
    extra = (_draw(cfg, stream, ids) % span).astype(np.int64)
    size = np.where(desired > 0, desired - delta + np.where(delta > 0, extra, 0), 0)
    return _exact_strings(cfg, stream + 1, ids, size, average + average // 5 + 1)


def _choice(values: tuple[str, ...], index: np.ndarray) -> pa.Array:
    return pc.take(pa.array(values, pa.string()), pa.array(index))


def _java_reverse_abs(value: int) -> int:
    """``Math.abs(Integer.reverse(value))`` for a non-negative int."""
    reversed_bits = int(f"{value:032b}"[::-1], 2)
    signed = reversed_bits - (1 << 32) if reversed_bits >= 1 << 31 else reversed_bits
    return abs(signed)


@functools.lru_cache(maxsize=8)
def _channels(seed: int) -> tuple[pa.Array, pa.Array]:
    """Channel names and urls: CHANNELS_NUMBER ordinary channels, then the hot ones.

    The generator caches one url per channel number; here each url is a pure
    function of (seed, channel), so all subtasks and replays agree.
    """
    n = CHANNELS_NUMBER + len(HOT_CHANNELS)
    cfg = NexmarkConfig(seed=seed)
    ids = np.arange(n, dtype=np.int64)
    # the three path segments of https://www.nexmark.com/<a>/<b>/<c>/item.htm?query=1
    parts = [
        pc.replace_substring(_next_strings(cfg, _S_URLS + 8 * j, ids, 5), " ", "_").to_pylist()
        for j in range(3)
    ]
    with_id = _below(cfg, _S_URLS + 32, ids, 10) > 0
    names, urls = [], []
    for c in range(n):
        base = f"https://www.nexmark.com/{parts[0][c]}/{parts[1][c]}/{parts[2][c]}/item.htm?query=1"
        if c >= CHANNELS_NUMBER:
            names.append(HOT_CHANNELS[c - CHANNELS_NUMBER])
            urls.append(base)
        else:
            names.append(f"channel-{c}")
            urls.append(base + (f"&channel_id={_java_reverse_abs(c)}" if with_id[c] else ""))
    return pa.array(names, pa.string()), pa.array(urls, pa.string())


# ---------------------------------------------------------------------------
# the three kinds


def _persons(cfg: NexmarkConfig, ids: np.ndarray, ts: np.ndarray, want: set[str]) -> dict[str, pa.Array]:
    out: dict[str, pa.Array] = {"id": pa.array(cfg.last_base0_person_id(ids) + FIRST_PERSON_ID)}
    first = _below(cfg, _S_NAME, ids, len(FIRST_NAMES))
    last = _below(cfg, _S_NAME + 1, ids, len(LAST_NAMES))
    name = pc.binary_join_element_wise(_choice(FIRST_NAMES, first), _choice(LAST_NAMES, last), " ")
    email = pc.binary_join_element_wise(
        _next_strings(cfg, _S_TEXT1, ids, 7), _next_strings(cfg, _S_TEXT2, ids, 5), "@")
    email = pc.binary_join_element_wise(email, "com", ".")
    digits = _below(cfg, _S_CARD, ids, 10_000 ** 4)
    groups = [(digits // 10_000 ** k) % 10_000 for k in range(4)]
    card = pc.binary_join_element_wise(
        *[pc.utf8_lpad(pa.array(g).cast(pa.string()), 4, "0") for g in groups], " ")
    city = _choice(US_CITIES, _below(cfg, _S_CITY, ids, len(US_CITIES)))
    state = _choice(US_STATES, _below(cfg, _S_STATE, ids, len(US_STATES)))
    out.update(name=name, emailAddress=email, creditCard=card, city=city, state=state)
    out["dateTime"] = pa.array(ts, _TS)
    if "extra" in want:
        size = 8 + sum(pc.binary_length(a).to_numpy(zero_copy_only=False).astype(np.int64)
                       for a in (name, email, card, city, state))
        out["extra"] = _extra(cfg, _S_EXTRA, ids, size, cfg.avg_person_size)
    return out


def _auctions(cfg: NexmarkConfig, ids: np.ndarray, ts: np.ndarray, want: set[str]) -> dict[str, pa.Array]:
    out: dict[str, pa.Array] = {"id": pa.array(cfg.last_base0_auction_id(ids) + FIRST_AUCTION_ID)}
    hot = _below(cfg, _S_HOT, ids, cfg.hot_sellers_ratio) > 0
    hot_seller = (cfg.last_base0_person_id(ids) // HOT_SELLER_RATIO) * HOT_SELLER_RATIO
    seller = np.where(hot, hot_seller, cfg.next_base0_person_id(ids, _draw(cfg, _S_PICK, ids)))
    out["seller"] = pa.array(seller + FIRST_PERSON_ID)
    out["category"] = pa.array(FIRST_CATEGORY_ID + _below(cfg, _S_HOT2, ids, NUM_CATEGORIES))
    initial = _price(cfg, _S_PRICE, ids)
    out["initialBid"] = pa.array(initial)
    out["reserve"] = pa.array(initial + _price(cfg, _S_PRICE2, ids))
    out["dateTime"] = pa.array(ts, _TS)
    # Lasts on average twice the time until NUM_IN_FLIGHT_AUCTIONS more auctions exist.
    ahead = NUM_IN_FLIGHT_AUCTIONS * cfg.total_proportion // cfg.auction_proportion
    horizon = cfg.timestamp(ids + ahead) - ts
    span = np.maximum(horizon * 2, 1).astype(np.uint64)
    out["expires"] = pa.array(ts + 1 + (_draw(cfg, _S_LENGTH, ids) % span).astype(np.int64), _TS)
    name = _next_strings(cfg, _S_TEXT1, ids, 20)
    description = _next_strings(cfg, _S_TEXT2, ids, 100)
    out["itemName"], out["description"] = name, description
    if "extra" in want:
        size = 48 + sum(pc.binary_length(a).to_numpy(zero_copy_only=False).astype(np.int64)
                        for a in (name, description))
        out["extra"] = _extra(cfg, _S_EXTRA, ids, size, cfg.avg_auction_size)
    return out


def _bids(cfg: NexmarkConfig, ids: np.ndarray, ts: np.ndarray, want: set[str]) -> dict[str, pa.Array]:
    out: dict[str, pa.Array] = {}
    if "auction" in want:
        hot = _below(cfg, _S_HOT, ids, cfg.hot_auction_ratio) > 0
        hot_auction = (cfg.last_base0_auction_id(ids) // HOT_AUCTION_RATIO) * HOT_AUCTION_RATIO
        auction = np.where(hot, hot_auction, cfg.next_base0_auction_id(ids, _draw(cfg, _S_PICK, ids)))
        out["auction"] = pa.array(auction + FIRST_AUCTION_ID)
    if "bidder" in want:
        hot = _below(cfg, _S_HOT2, ids, cfg.hot_bidders_ratio) > 0
        # the second of the last hundred people, so hot bidders and hot sellers differ
        hot_bidder = (cfg.last_base0_person_id(ids) // HOT_BIDDER_RATIO) * HOT_BIDDER_RATIO + 1
        bidder = np.where(hot, hot_bidder, cfg.next_base0_person_id(ids, _draw(cfg, _S_PICK2, ids)))
        out["bidder"] = pa.array(bidder + FIRST_PERSON_ID)
    if "price" in want:
        out["price"] = pa.array(_price(cfg, _S_PRICE, ids))
    if "channel" in want or "url" in want:
        names, urls = _channels(cfg.seed)
        hot = _below(cfg, _S_CHANNEL, ids, HOT_CHANNELS_RATIO) > 0
        pick = _draw(cfg, _S_CHANNEL_PICK, ids)
        index = pa.array(np.where(hot, CHANNELS_NUMBER + (pick % np.uint64(len(HOT_CHANNELS))).astype(np.int64),
                                  (pick % np.uint64(CHANNELS_NUMBER)).astype(np.int64)))
        out["channel"] = pc.take(names, index)
        out["url"] = pc.take(urls, index)
    out["dateTime"] = pa.array(ts, _TS)
    if "extra" in want:
        out["extra"] = _extra(cfg, _S_EXTRA, ids, np.full(len(ids), 32, np.int64), cfg.avg_bid_size)
    return out


_GENERATE = {"person": _persons, "auction": _auctions, "bid": _bids}


def generate(cfg: NexmarkConfig, kind: str, event_numbers: np.ndarray,
             columns: list[str] | None = None) -> pa.RecordBatch:
    """The ``kind`` events among ``event_numbers``, as a batch of the standard columns.

    A pure function of (configuration, event numbers): the reader, the tests and
    the benchmark's file export all generate through it.
    """
    schema = SCHEMAS[kind]
    names = list(schema.names) if columns is None else columns
    ids = cfg.adjusted(event_numbers.astype(np.int64))
    ids = ids[cfg.kind_of(ids) == EVENT_TYPE[kind]]
    arrays = _GENERATE[kind](cfg, ids, cfg.timestamp(ids), set(names))
    return pa.RecordBatch.from_arrays([arrays[c] for c in names], schema=pa.schema([schema.field(c) for c in names]))


# ---------------------------------------------------------------------------
# the reader


# event numbers generated at once by a reader (arrays of 0.5 MB each)
GENERATE_PIECE = 1 << 16
# a reader's batch spans at most this many batch sizes of event numbers
MAX_SPAN_BATCHES = 4


def chunk_event_numbers(local: np.ndarray, chunk: int, index: int, parallelism: int) -> np.ndarray:
    """Global event numbers of a subtask's local positions: it owns chunks index, index + p, ..."""
    c, j = np.divmod(local, chunk)
    return (c * parallelism + index) * chunk + j


def subtask_event_count(total: int, chunk: int, index: int, parallelism: int) -> int:
    """How many of the event numbers 0 .. total - 1 subtask ``index`` owns."""
    full, rem = divmod(total, chunk)
    owned = max(0, (full - index + parallelism - 1) // parallelism) * chunk
    return owned + (rem if full % parallelism == index else 0)


def _column_map(table: TableDef, kind: str) -> dict[str, str]:
    """Declared physical column -> standard column name (matched case-insensitively)."""
    standard = {n.lower(): n for n in SCHEMAS[kind].names}
    out = {}
    for c in table.physical_columns:
        name = standard.get(c.name.lower())
        if name is None:
            close = difflib.get_close_matches(c.name, list(SCHEMAS[kind].names), n=1)
            hint = f" Did you mean '{close[0]}'?" if close else ""
            raise ConnectorError(
                f"table '{table.name}': nexmark {kind} events have no column '{c.name}'.{hint} "
                f"Columns: {', '.join(SCHEMAS[kind].names)}"
            )
        std = SCHEMAS[kind].field(name).type
        if c.type != std and not pa.types.is_string(c.type) and not pa.types.is_large_string(c.type):
            try:
                pa.array([], std).cast(c.type)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                raise ConnectorError(
                    f"table '{table.name}': column '{c.name}' is {sql_type_name(std)} in nexmark {kind} "
                    f"events and cannot be read as {sql_type_name(c.type)}"
                ) from None
        out[c.name] = name
    return out


class NexmarkSource(SourceReader):
    """One subtask's share of one kind of events; see the module docstring."""

    def __init__(self, ctx: SourceContext) -> None:
        self._ctx = ctx
        opts = ctx.options
        self._kind: str = opts["kind"]
        self._cfg = NexmarkConfig.from_options(opts)
        mapping = _column_map(ctx.table, self._kind)
        self._columns = [mapping[c] for c in ctx.columns]
        self._schema = ctx.schema
        self._chunk = self._cfg.total_proportion
        p, i = ctx.parallelism, ctx.subtask_index
        total = opts.get("events.num")
        self._limit = subtask_event_count(total, self._chunk, i, p) if total else None
        self.bounded = self._limit is not None
        self._rate = self._cfg.first_event_rate / p  # event numbers per second for this subtask
        self._limited: bool = opts["rate.limited"]
        # event numbers read per batch: enough for about batch_size rows of this kind, but at most
        # MAX_SPAN_BATCHES batches' worth, so that a rare kind (persons: 1 event in 50) still moves
        # its event time, and so its watermark, in steps like the other kinds do
        share = getattr(self._cfg, f"{self._kind}_proportion") / self._chunk
        self._step = max(1, min(math.ceil(ctx.batch_size / share), MAX_SPAN_BATCHES * ctx.batch_size))
        self._events = 0  # event numbers consumed so far by this subtask
        self._throttle = Throttle(self._rate, self._step, ctx.clock)

    def open(self) -> None:
        _pool(self._cfg.seed)  # built now (once per process and seed), not during the first read
        self._throttle.start(self._events)

    @property
    def finished(self) -> bool:
        return self._limit is not None and self._events >= self._limit

    def read_batch(self) -> pa.RecordBatch | None:
        if self.finished:
            return None
        allowed = self._throttle.wait(self._events) if self._limited else self._step
        if allowed <= 0:
            return None
        n = min(allowed, self._step)
        if self._limit is not None:
            n = min(n, self._limit - self._events)
        # a rare kind (persons: 1 event in 50) takes many event numbers per batch: generate them in
        # pieces, so that the arrays of all those numbers never exist at once (peak memory)
        pieces = []
        for first in range(self._events, self._events + n, GENERATE_PIECE):
            local = np.arange(first, min(first + GENERATE_PIECE, self._events + n), dtype=np.int64)
            numbers = chunk_event_numbers(local, self._chunk, self._ctx.subtask_index, self._ctx.parallelism)
            piece = generate(self._cfg, self._kind, numbers, self._columns)
            if piece.num_rows:
                pieces.append(piece)
        self._events += n
        if not pieces:  # a throttled trickle of event numbers held none of this kind
            return None
        batch = pieces[0] if len(pieces) == 1 else pa.Table.from_batches(pieces).combine_chunks().to_batches()[0]
        arrays = [a if a.type == t else a.cast(t) for a, t in zip(batch.columns, self._schema.types, strict=True)]
        return pa.RecordBatch.from_arrays(arrays, schema=self._schema)

    def snapshot_position(self) -> Any:
        return {"events": self._events}

    def restore_position(self, position: Any) -> None:
        self._events = int(position.get("events", 0))


OPTIONS = (
    Option("kind", required=True, choices=KINDS,
           description="which events the table holds: 'person', 'auction' or 'bid'"),
    Option("events.num", "int", description="events to generate over all three kinds (bounded when set)"),
    Option("first-event.rate", "int", default=10_000_000,
           description="events per second over all subtasks; also spaces the event times"),
    Option("next-event.rate", "int", default=10_000_000, description="must equal first-event.rate"),
    Option("rate.limited", "bool", default=True,
           description="throttle to first-event.rate; 'false' emits at full speed (event times still follow the rate)"),
    Option("person.proportion", "int", default=1),
    Option("auction.proportion", "int", default=3),
    Option("bid.proportion", "int", default=46),
    Option("bid.hot-ratio.auctions", "int", default=2, description="1 - 1/r of bids are for a hot auction"),
    Option("bid.hot-ratio.bidders", "int", default=4, description="1 - 1/r of bids are by a hot bidder"),
    Option("auction.hot-ratio.sellers", "int", default=4, description="1 - 1/r of auctions are by a hot seller"),
    Option("person.avg-size", default="200b"),
    Option("auction.avg-size", default="500b"),
    Option("bid.avg-size", default="100b"),
    Option("out-of-order-group-size", "int", default=1,
           description="event ids (and so times) are shuffled within groups of this many events"),
    Option("base-time", "int", default=DEFAULT_BASE_TIME_MS, description="event time of event 0, epoch ms"),
    Option("seed", "int", default=0, description="seed of the random values (the same for all three kinds)"),
)


def _validate(table: TableDef, given: dict[str, str]) -> None:
    """Checks across options and columns, after each option was typed on its own."""
    opts = {o.key: o.convert(given[o.key], table.name) if o.key in given else o.default for o in OPTIONS}
    for key in ("person.proportion", "auction.proportion", "bid.proportion"):
        if opts[key] < 0:
            raise ConnectorError(f"table '{table.name}': option '{key}' = {opts[key]} must not be negative")
    if opts["person.proportion"] < 1 or opts["auction.proportion"] < 1:
        raise ConnectorError(
            f"table '{table.name}': 'person.proportion' and 'auction.proportion' must be at least 1 "
            "(bids and auctions refer to persons and auctions)"
        )
    for key in ("first-event.rate", "next-event.rate", "bid.hot-ratio.auctions", "bid.hot-ratio.bidders",
                "auction.hot-ratio.sellers", "out-of-order-group-size"):
        if opts[key] < 1:
            raise ConnectorError(f"table '{table.name}': option '{key}' = {opts[key]} must be positive")
    if opts["next-event.rate"] != opts["first-event.rate"] and "next-event.rate" in given:
        raise ConnectorError(
            f"table '{table.name}': 'next-event.rate' must equal 'first-event.rate': like nexmark-flink's "
            "generator, this one has a constant rate (no rate shapes)"
        )
    if opts["events.num"] is not None and opts["events.num"] < 0:
        raise ConnectorError(f"table '{table.name}': option 'events.num' must not be negative")
    for key in ("person.avg-size", "auction.avg-size", "bid.avg-size"):
        try:
            size = parse_size(opts[key])
        except ValueError as e:
            raise ConnectorError(f"table '{table.name}': option '{key}': {e}") from None
        if size > MAX_AVG_SIZE:
            raise ConnectorError(f"table '{table.name}': option '{key}' is above the maximum of {MAX_AVG_SIZE} bytes")
    _column_map(table, opts["kind"])



CONNECTOR = Connector(
    "nexmark",
    options=OPTIONS,
    create_source=NexmarkSource,
    validate_extra=_validate,
    description="the Nexmark benchmark's person, auction and bid events",
)
