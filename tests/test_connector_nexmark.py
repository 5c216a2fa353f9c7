"""The nexmark connector: schema, determinism, replay, proportions, consistency, throttling."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from sqlstream.core.errors import ConnectorError, SqlStreamError
from sqlstream.core.tables import ColumnDef, TableDef
from sqlstream.core.types import parse_type
from sqlstream.frontend.session import Session
from sqlstream.runtime.clock import SYSTEM_CLOCK, Clock, ManualClock
from sqlstream.runtime.connectors import nexmark
from sqlstream.runtime.connectors.base import SourceContext, SourceReader
from sqlstream.runtime.connectors.registry import get_connector
from sqlstream.runtime.connectors.throttle import MAX_BLOCK_S

NX = get_connector("nexmark")
BID_COLUMNS = {"auction": "BIGINT", "bidder": "BIGINT", "price": "BIGINT", "channel": "STRING",
               "url": "STRING", "dateTime": "TIMESTAMP(3)", "extra": "STRING"}
AUCTION_COLUMNS = {"id": "BIGINT", "itemName": "STRING", "description": "STRING", "initialBid": "BIGINT",
                   "reserve": "BIGINT", "dateTime": "TIMESTAMP(3)", "expires": "TIMESTAMP(3)",
                   "seller": "BIGINT", "category": "BIGINT", "extra": "STRING"}
PERSON_COLUMNS = {"id": "BIGINT", "name": "STRING", "emailAddress": "STRING", "creditCard": "STRING",
                  "city": "STRING", "state": "STRING", "dateTime": "TIMESTAMP(3)", "extra": "STRING"}
COLUMNS = {"bid": BID_COLUMNS, "auction": AUCTION_COLUMNS, "person": PERSON_COLUMNS}
FAST = {"first-event.rate": "1000000000"}


def table(kind: str, columns: dict[str, str] | None = None, **options: str) -> TableDef:
    cols = tuple(ColumnDef(n, parse_type(t)) for n, t in (columns or COLUMNS[kind]).items())
    return TableDef(kind, cols, {"connector": "nexmark", "kind": kind, **options})


def source(t: TableDef, batch_size: int = 1000, subtask: int = 0, parallelism: int = 1,
           clock: Clock = SYSTEM_CLOCK) -> SourceReader:
    opts = NX.validate(t)
    cols = [c.name for c in t.physical_columns]
    return NX.create_source(SourceContext(t, opts, cols, subtask, parallelism, batch_size, clock))


def read_all(reader: SourceReader, opened: bool = False) -> pa.Table:
    if not opened:
        reader.open()
    batches = []
    while not reader.finished:
        b = reader.read_batch()
        if b is not None:
            batches.append(b)
    return pa.Table.from_batches(batches) if batches else pa.table({})


def events(kind: str, n: int, batch_size: int = 1000, **options: str) -> pa.Table:
    return read_all(source(table(kind, **{"events.num": str(n), **FAST, **options}), batch_size))


def timed(kind: str, n: int, **config: int) -> pa.Table:
    """Events at 1000 events/s (1 ms apart), without waiting for the reader's throttle."""
    cfg = nexmark.NexmarkConfig(first_event_rate=1000, **config)
    return pa.Table.from_batches([nexmark.generate(cfg, kind, np.arange(n))])


def test_schema_of_each_kind() -> None:
    for kind, columns in COLUMNS.items():
        t = events(kind, 5000)
        assert t.schema.names == list(columns)
        assert t.schema.types == [parse_type(c) for c in columns.values()]
        assert t.num_rows > 0 and t.column("dateTime").null_count == 0


def test_projection_subset_order_and_case() -> None:
    t = events("bid", 2000).select(["price", "auction"])
    sub = read_all(source(table("bid", {"PRICE": "BIGINT", "Auction": "BIGINT"}, **{"events.num": "2000"}, **FAST)))
    assert sub.schema.names == ["PRICE", "Auction"]
    assert sub.column(0).to_pylist() == t.column("price").to_pylist()
    assert sub.column(1).to_pylist() == t.column("auction").to_pylist()


def test_option_and_column_errors() -> None:
    with pytest.raises(ConnectorError, match="no column 'pricee'.*Did you mean 'price'"):
        NX.validate(table("bid", {"pricee": "BIGINT"}))
    with pytest.raises(ConnectorError, match="must be one of person, auction, bid"):
        NX.validate(TableDef("t", (ColumnDef("price", pa.int64()),), {"connector": "nexmark", "kind": "bids"}))
    with pytest.raises(ConnectorError, match="'next-event.rate' must equal 'first-event.rate'"):
        NX.validate(table("bid", **{"first-event.rate": "10", "next-event.rate": "20"}))
    with pytest.raises(ConnectorError, match="'bid.avg-size'.*not a size"):
        NX.validate(table("bid", **{"bid.avg-size": "lots"}))
    with pytest.raises(ConnectorError, match="cannot be read as DATE"):
        NX.validate(table("bid", {"price": "DATE"}))
    with pytest.raises(ConnectorError, match="requires option 'kind'"):
        NX.validate(TableDef("t", (ColumnDef("price", pa.int64()),), {"connector": "nexmark"}))


def test_ddl_through_a_session() -> None:
    session = Session()
    session.execute_script(
        "CREATE TABLE bid (auction BIGINT, price BIGINT, `dateTime` TIMESTAMP(3), "
        "WATERMARK FOR `dateTime` AS `dateTime` - INTERVAL '4' SECOND) "
        "WITH ('connector' = 'nexmark', 'kind' = 'bid', 'events.num' = '5000', 'first-event.rate' = '1000000000')"
    )
    result = session.execute_script("SELECT COUNT(*) AS n, MIN(auction) AS lo FROM bid")[-1].table
    assert result is not None
    assert result.column("n").to_pylist()[-1] == 4600 and result.column("lo").to_pylist()[-1] == 1000
    with pytest.raises(SqlStreamError, match="Did you mean 'bid.proportion'"):
        session.execute_script("CREATE TABLE b2 (price BIGINT) WITH ('connector' = 'nexmark', 'kind' = 'bid', "
                               "'bid.proportions' = '3')")


def test_deterministic_whatever_the_batch_size() -> None:
    for kind in COLUMNS:
        assert events(kind, 20_000, batch_size=97).equals(events(kind, 20_000, batch_size=4096))
    assert not events("bid", 5000).equals(events("bid", 5000, seed="7"))


def test_replay_from_a_snapshot_gives_exactly_the_remaining_events() -> None:
    t = table("bid", **{"events.num": "30000"}, **FAST)
    expected = read_all(source(t, 700))
    first = source(t, 700)
    first.open()
    head = [first.read_batch() for _ in range(9)]
    position = first.snapshot_position()
    resumed = source(t, 1234)  # a different batch size: the position is in events, not batches
    resumed.restore_position(position)
    rest = read_all(resumed)
    head_rows = sum(b.num_rows for b in head if b is not None)
    assert 0 < head_rows < expected.num_rows
    assert pa.Table.from_batches([b for b in head if b is not None]).equals(expected.slice(0, head_rows))
    assert rest.equals(expected.slice(head_rows))


def test_proportions_are_1_3_46_and_bounded_by_events_num() -> None:
    counts = {kind: events(kind, 100_000).num_rows for kind in COLUMNS}
    assert counts == {"person": 2000, "auction": 6000, "bid": 92_000}
    shuffled = {kind: events(kind, 100_000, **{"out-of-order-group-size": "1000"}).num_rows for kind in COLUMNS}
    assert shuffled == counts  # 1000 is a multiple of 50: every group holds whole epochs
    custom = {kind: events(kind, 10_000, **{"person.proportion": "2", "auction.proportion": "3",
                                            "bid.proportion": "5"}).num_rows for kind in COLUMNS}
    assert custom == {"person": 2000, "auction": 3000, "bid": 5000}


def test_ids_are_sequential_and_times_follow_the_rate() -> None:
    persons = timed("person", 5000, base_time_ms=0)  # 1 ms between events: 50 ms per 50 events
    assert persons.column("id").to_pylist() == list(range(1000, 1100))
    ms = persons.column("dateTime").cast(pa.int64()).to_numpy()
    assert (ms == np.arange(100) * 50).all()
    auctions = events("auction", 5000)
    assert auctions.column("id").to_pylist() == list(range(1000, 1300))
    assert set(auctions.column("category").to_pylist()) == set(range(10, 15))
    assert (auctions.column("expires").cast(pa.int64()).to_numpy()
            > auctions.column("dateTime").cast(pa.int64()).to_numpy()).all()
    assert (auctions.column("reserve").to_numpy() > auctions.column("initialBid").to_numpy()).all()


def test_every_bid_refers_to_auctions_and_persons_per_the_generator() -> None:
    n = 200_000
    bids, auctions, persons = (timed(kind, n) for kind in ("bid", "auction", "person"))
    bid_ms = bids.column("dateTime").cast(pa.int64()).to_numpy()
    auction_time = dict(zip(auctions.column("id").to_pylist(),
                            auctions.column("dateTime").cast(pa.int64()).to_pylist(), strict=True))
    person_time = dict(zip(persons.column("id").to_pylist(),
                           persons.column("dateTime").cast(pa.int64()).to_pylist(), strict=True))
    # at 1 event/ms, event id == ms since base time; ids beyond the newest are the generator's small lead
    # (the reader's own tables are the same: test_deterministic_whatever_the_batch_size, and
    # test_generate_is_what_the_reader_returns)
    base = nexmark.DEFAULT_BASE_TIME_MS
    cfg = nexmark.NexmarkConfig()
    newest_auction = cfg.last_base0_auction_id(bid_ms - base) + nexmark.FIRST_AUCTION_ID
    newest_person = cfg.last_base0_person_id(bid_ms - base) + nexmark.FIRST_PERSON_ID
    auction = bids.column("auction").to_numpy()
    bidder = bids.column("bidder").to_numpy()
    assert (auction <= newest_auction + nexmark.AUCTION_ID_LEAD).all()
    assert (auction >= np.maximum(newest_auction - nexmark.NUM_IN_FLIGHT_AUCTIONS, 1000) - 99).all()
    assert (bidder <= newest_person + nexmark.PERSON_ID_LEAD).all()
    assert (bidder >= newest_person - nexmark.NUM_ACTIVE_PEOPLE - 100).all()
    earlier = [auction_time.get(a, 1 << 62) <= t for a, t in zip(auction.tolist(), bid_ms.tolist(), strict=True)]
    # the rest are the lead: a bid on no hot auction (1 in 2) picks among the 101 newest auctions and
    # the 10 about to be created, so about 1/2 * 10/111 = 4.5% refer to an auction a few events ahead
    assert 0.94 < sum(earlier) / len(earlier) < 0.97
    known = [p in person_time for p in bidder.tolist()]
    assert sum(known) / len(known) > 0.99
    # hot auctions and bidders: about half the bids go to one auction per hundred
    hot = (auction - 1000) % 100 == 0
    assert 0.45 < hot.mean() < 0.6
    assert len({*bids.column("channel").to_pylist()} & set(nexmark.HOT_CHANNELS)) == 4


def test_generate_is_what_the_reader_returns() -> None:
    cfg = nexmark.NexmarkConfig(first_event_rate=1_000_000_000)
    for kind in COLUMNS:
        direct = pa.Table.from_batches([nexmark.generate(cfg, kind, np.arange(7000))])
        assert events(kind, 7000).equals(direct)


def test_subtasks_interleave_chunks_of_the_one_stream() -> None:
    t = table("person", **{"events.num": "10037"}, **FAST)
    whole = read_all(source(t)).column("id").to_pylist()
    parts = [read_all(source(t, subtask=i, parallelism=3)).column("id").to_pylist() for i in range(3)]
    assert all(parts)  # every subtask gets persons, not just one of them
    assert sorted(sum(parts, [])) == whole
    bids = table("bid", **{"events.num": "10037"}, **FAST)
    assert sum(read_all(source(bids, subtask=i, parallelism=4)).num_rows for i in range(4)) == \
        read_all(source(bids)).num_rows


def test_out_of_order_groups_shuffle_ids_and_times() -> None:
    t = timed("bid", 20_000, out_of_order_group_size=100)
    ms = t.column("dateTime").cast(pa.int64()).to_numpy()
    assert (np.diff(ms) < 0).any()
    assert (np.maximum.accumulate(ms) - ms).max() < 100  # disorder is bounded by a group
    in_order = timed("bid", 20_000)
    assert sorted(ms.tolist()) == sorted(in_order.column("dateTime").cast(pa.int64()).to_pylist())


def test_unlimited_rate_keeps_the_event_times() -> None:
    clock = ManualClock()
    reader = source(table("bid", **{"events.num": "50000", "first-event.rate": "1000", "rate.limited": "false"}),
                    clock=clock)
    t = read_all(reader)
    assert clock.sleeps == [] and clock.monotonic() == 0  # 50 s of events at 1000/s, not waited for
    assert t.equals(timed("bid", 50_000))


def test_throttle_keeps_the_rate_and_never_blocks_long() -> None:
    clock = ManualClock()
    reader = source(table("bid", **{"first-event.rate": "20000"}), batch_size=512, clock=clock)
    assert not reader.bounded
    reader.open()
    rows = 0
    while clock.monotonic() < 0.5:
        b = reader.read_batch()
        rows += 0 if b is None else b.num_rows
        clock.advance(5)  # the subtask's other work between reads
    assert max(clock.sleeps, default=0) <= MAX_BLOCK_S
    # 10000 event numbers in 0.5 s, 46 of each 50 a bid; a batch spans 557 of them
    assert 10000 * 46 / 50 - 557 <= rows <= 10000 * 46 / 50


def test_a_rare_kind_reads_a_bounded_span_of_events_per_batch() -> None:
    # a person is 1 event in 50: a batch of 100 persons would span 5000 event numbers; it is cut
    # at 4 batch sizes (400), so the watermark of persons advances as often as that of bids
    reader = source(table("person", **{"events.num": "20000", **FAST}), batch_size=100)
    reader.open()
    spans = []
    while not reader.finished:
        before = reader.snapshot_position()["events"]
        reader.read_batch()
        spans.append(reader.snapshot_position()["events"] - before)
    assert max(spans) == nexmark.MAX_SPAN_BATCHES * 100
    # generated in pieces, the rows are those of one generate() over all the events
    cfg = nexmark.NexmarkConfig(first_event_rate=1_000_000_000)
    direct = pa.Table.from_batches([nexmark.generate(cfg, "person", np.arange(3 * nexmark.GENERATE_PIECE + 7))])
    assert events("person", 3 * nexmark.GENERATE_PIECE + 7, batch_size=100_000).equals(direct)
