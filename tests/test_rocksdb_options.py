"""RocksDB's tuning options by Flink's names (state.backend.rocksdb.*): checked when set, and in
effect on every db and column family, as RocksDB itself reports them.

RocksDB writes the options it runs with into the db directory (``OPTIONS-<n>``, a section per
column family and per table factory); the bloom filter's bits per key show in the size of the
filter blocks RocksDB wrote.
"""

from __future__ import annotations

import re
from pathlib import Path

import pyarrow as pa
import pytest

from sqlstream.core.config import split_list
from sqlstream.core.errors import PlanError
from sqlstream.frontend.session import Session
from sqlstream.runtime.operators.join_rocksdb import HEADS_STATE, ROWS_STATES, RocksDBInnerJoin
from sqlstream.runtime.state import BackendFactory, StateBackend
from sqlstream.runtime.state.rocksdb import RocksDBStateBackend
from tests.conftest import apply_changelog, rows

R = "state.backend.rocksdb."
KB, MB = 1 << 10, 1 << 20


@pytest.fixture
def backend():
    """``backend(settings)``: a rocksdb backend of a job with these settings, with one state 's'
    written to (so that its column family exists), closed after the test."""
    made: list[StateBackend] = []

    def make(settings: dict[str, str]) -> RocksDBStateBackend:
        made.append(b := BackendFactory("rocksdb", settings, 1).create(range(128), 0))
        assert isinstance(b, RocksDBStateBackend)
        b.state("s").put(3, ("k",), 1)
        return b

    yield make
    for b in made:
        b.close()


def options_file(b: RocksDBStateBackend, db: Path | None = None) -> str:
    """The latest OPTIONS file RocksDB wrote: the options it runs with."""
    path = db or b.db_path
    return max(path.glob("OPTIONS-*"), key=lambda p: int(p.name.split("-")[1])).read_text()


def section(text: str, title: str) -> dict[str, str]:
    """The ``name=value`` lines of one section of an OPTIONS file (``DBOptions``, ``CFOptions "x"``...)."""
    body = text.split(f"[{title}]\n")[1].split("\n[")[0]
    return dict(line.strip().split("=", 1) for line in body.splitlines() if "=" in line)


# the column families of a backend with state 's': RocksDB's own and the state's
FAMILIES = ('"default"', '"state\\:s"')


def families(b: RocksDBStateBackend, db: Path | None = None) -> list[dict[str, str]]:
    """Each column family's options, its block-based table's merged in."""
    text = options_file(b, db)
    return [section(text, f"CFOptions {f}") | section(text, f"TableOptions/BlockBasedTable {f}") for f in FAMILIES]


def test_without_settings_the_options_are_flinks_defaults_with_sqlstreams_bloom_filters(backend) -> None:
    b = backend({})
    db = section(options_file(b), "DBOptions")
    assert db["max_background_jobs"] == "2" and db["max_open_files"] == "-1"
    assert db["max_log_file_size"] == str(25 * MB) and db["keep_log_file_num"] == "4"
    assert db["info_log_level"] == "INFO_LEVEL"
    for cf in families(b):
        assert cf["compaction_style"] == "kCompactionStyleLevel"
        assert cf["compression_per_level"] == "kSnappyCompression"
        assert cf["level_compaction_dynamic_level_bytes"] == "false"
        assert cf["target_file_size_base"] == str(64 * MB)
        assert cf["max_bytes_for_level_base"] == str(256 * MB)
        assert cf["min_write_buffer_number_to_merge"] == "1"
        assert cf["block_size"] == str(4 * KB) and cf["metadata_block_size"] == str(4 * KB)
        assert cf["filter_policy"] == "bloomfilter"  # Flink's default is none; sqlstream's operators lean on it


def test_the_options_set_reach_every_column_family(backend) -> None:
    b = backend({R + "compaction.level.use-dynamic-size": "true",
                 R + "compaction.level.target-file-size-base": "8 mb",
                 R + "compaction.level.max-size-level-base": "32mb",
                 R + "compression.per.level": "NO_COMPRESSION;no_compression; LZ4_COMPRESSION;'ZSTD_COMPRESSION'",
                 R + "writebuffer.count": "4",
                 R + "writebuffer.number-to-merge": "3",
                 R + "block.blocksize": "16 kb",
                 R + "block.metadata-blocksize": "8 kb",
                 R + "use-bloom-filter": "false"})
    for cf in families(b):
        assert cf["level_compaction_dynamic_level_bytes"] == "true"
        assert cf["target_file_size_base"] == str(8 * MB)
        assert cf["max_bytes_for_level_base"] == str(32 * MB)
        assert cf["compression_per_level"] == "kNoCompression:kNoCompression:kLZ4Compression:kZSTD"
        assert cf["max_write_buffer_number"] == "4" and cf["min_write_buffer_number_to_merge"] == "3"
        assert cf["block_size"] == str(16 * KB) and cf["metadata_block_size"] == str(8 * KB)
        assert cf["filter_policy"] == "nullptr"  # 'false' turns sqlstream's bloom filters off
    universal = backend({R + "compaction.style": "Universal"})
    assert all(cf["compaction_style"] == "kCompactionStyleUniversal" for cf in families(universal))
    fifo = backend({R + "compaction.style": "fifo", R + "compression.per.level": "ZLIB_COMPRESSION;BZLIB2_COMPRESSION;"
                                                                                  "LZ4HC_COMPRESSION;SNAPPY_COMPRESSION"})
    for cf in families(fifo):
        assert cf["compaction_style"] == "kCompactionStyleFIFO"
        assert cf["compression_per_level"] == "kZlibCompression:kBZip2Compression:kLZ4HCCompression:kSnappyCompression"


def test_db_options_and_the_log_directory(backend, tmp_path: Path) -> None:
    logs = tmp_path / "rocksdb-logs"
    logs.mkdir()
    b = backend({R + "thread.num": "3", R + "files.open": "500", R + "log.dir": str(logs),
                 R + "log.max-file-size": "1 mb", R + "log.file-num": "7", R + "log.level": "info_level"})
    db = section(options_file(b), "DBOptions")
    assert db["max_background_jobs"] == "3" and db["max_open_files"] == "500"
    assert db["max_log_file_size"] == str(MB) and db["keep_log_file_num"] == "7"
    assert db["db_log_dir"] == str(logs)
    # RocksDB names the log after the db directory it belongs to, as Flink describes
    assert [p.name for p in logs.iterdir() if p.name.endswith("_LOG")] and not (b.db_path / "LOG").exists()


def filter_bytes_per_key(b: RocksDBStateBackend, n: int = 20_000) -> float:
    """The bloom filter bytes RocksDB wrote per key for ``n`` keys flushed to one SST file."""
    st = b.state("f")
    for i in range(n):
        st.put(i % 128, (i,), i)
    st.cf.flush()  # type: ignore[attr-defined]
    props = st.cf.property_value("rocksdb.aggregated-table-properties")  # type: ignore[attr-defined]
    return int(re.search(r"filter block size=(\d+)", props).group(1)) / n  # type: ignore[union-attr]


def test_bloom_filter_bits_per_key_and_switching_filters_off(backend) -> None:
    assert filter_bytes_per_key(backend({})) == pytest.approx(10 / 8, rel=0.1)  # 10 bits per key
    assert filter_bytes_per_key(backend({R + "bloom-filter.bits-per-key": "20"})) == pytest.approx(20 / 8, rel=0.1)
    assert filter_bytes_per_key(backend({R + "bloom-filter.bits-per-key": "4.5",
                                         R + "bloom-filter.block-based-mode": "true"})) == pytest.approx(4.5 / 8, rel=0.1)
    assert filter_bytes_per_key(backend({R + "use-bloom-filter": "false",
                                         R + "bloom-filter.bits-per-key": "20"})) == 0


def test_a_predefined_profile_sets_its_options_unless_they_are_set(backend) -> None:
    b = backend({R + "predefined-options": "SPINNING_DISK_OPTIMIZED_HIGH_MEM", R + "block.blocksize": "32 kb",
                 R + "memory.managed": "false"})
    assert section(options_file(b), "DBOptions")["max_background_jobs"] == "4"
    for cf in families(b):
        assert cf["level_compaction_dynamic_level_bytes"] == "true"
        assert cf["max_bytes_for_level_base"] == str(1 << 30)
        assert cf["target_file_size_base"] == str(256 * MB)
        assert cf["max_write_buffer_number"] == "4" and cf["min_write_buffer_number_to_merge"] == "3"
        assert cf["block_size"] == str(32 * KB)  # set: wins over the profile's 128 kb
        assert cf["filter_policy"] == "bloomfilter"
    assert b.state("s").cf.property_int_value("rocksdb.block-cache-capacity") == 256 * MB  # type: ignore[attr-defined]
    ssd = backend({R + "predefined-options": "flash_ssd_optimized", R + "thread.num": "1"})
    assert section(options_file(ssd), "DBOptions")["max_background_jobs"] == "1"
    assert families(ssd)[1]["level_compaction_dynamic_level_bytes"] == "false"


def test_the_options_hold_after_a_restore_and_in_a_savepoints_scan(backend, tmp_path: Path) -> None:
    settings = {R + "compression.per.level": "NO_COMPRESSION;LZ4_COMPRESSION", R + "block.blocksize": "8 kb"}
    b = backend(settings)
    handle = b.snapshot(1)(tmp_path / "chk-1")
    again = backend(settings)
    again.restore([handle])  # the same key groups: the checkpoint's db becomes the backend's
    assert again.state("s").get(3, ("k",)) == 1
    for cf in families(again):
        assert cf["compression_per_level"] == "kNoCompression:kLZ4Compression" and cf["block_size"] == str(8 * KB)
    saved = b.snapshot(2, canonical=True)(tmp_path / "sp")  # the frozen db opened read-only
    assert saved["format"] == "canonical"


VALID = [
    ("predefined-options", "SPINNING_DISK_OPTIMIZED"), ("predefined-options", "default"),
    ("thread.num", "4"), ("files.open", "-1"), ("files.open", "1000"),
    ("log.dir", "/var/log/rocksdb"), ("log.max-file-size", "0"), ("log.file-num", "10"), ("log.level", "INFO_LEVEL"),
    ("compaction.style", "LEVEL"), ("compaction.style", "universal"), ("compaction.style", "FIFO"),
    ("compaction.level.use-dynamic-size", "true"), ("compaction.level.target-file-size-base", "32 mb"),
    ("compaction.level.max-size-level-base", "1gb"),
    ("compression.per.level", "NO_COMPRESSION;NO_COMPRESSION;LZ4_COMPRESSION"),
    ("compression.per.level", "zstd_compression"), ("compression.per.level", "'NO_COMPRESSION';\"LZ4_COMPRESSION\""),
    ("writebuffer.number-to-merge", "2"), ("block.blocksize", "16kb"), ("block.metadata-blocksize", "8 kb"),
    ("use-bloom-filter", "false"), ("bloom-filter.bits-per-key", "7.5"), ("bloom-filter.block-based-mode", "true"),
]


def sql_text(value: str) -> str:
    return value.replace("'", "''")


@pytest.mark.parametrize(("key", "value"), VALID)
def test_valid_values_are_accepted(key: str, value: str) -> None:
    session = Session()
    result = session.execute_script(f"SET '{R}{key}' = '{sql_text(value)}'")[0]
    assert "WARNING" not in (result.message or "") and session.config[R + key] == value


@pytest.mark.parametrize(("key", "value", "message"), [
    ("predefined-options", "FAST", "'FAST' is not one of DEFAULT, SPINNING_DISK_OPTIMIZED"),
    ("thread.num", "0", "must be at least 1"),
    ("files.open", "many", "'many' is not an integer"),
    ("log.dir", "logs", "'logs' is not an absolute path"),
    ("log.max-file-size", "big", "'big' is not a memory size"),
    ("log.file-num", "0", "must be at least 1"),
    ("log.level", "DEBUG_LEVEL", "cannot set RocksDB's information log level"),
    ("log.level", "LOUD", "'LOUD' is not one of DEBUG_LEVEL, INFO_LEVEL"),
    ("compaction.style", "TIERED", "'TIERED' is not one of LEVEL, UNIVERSAL, FIFO, NONE"),
    ("compaction.style", "NONE", "compaction style NONE .* cannot be set through the rocksdict binding"),
    ("compaction.level.use-dynamic-size", "yes", "'yes' is not a boolean"),
    ("compaction.level.target-file-size-base", "0 mb", "must be larger than 0"),
    ("compaction.level.max-size-level-base", "1 parsec", "is not a memory size"),
    ("compression.per.level", "NO_COMPRESSION;GZIP", "item 2 of 'NO_COMPRESSION;GZIP': 'GZIP' is not one of "
                                                     "NO_COMPRESSION, SNAPPY_COMPRESSION"),
    ("compression.per.level", "LZ4", "'LZ4' is not one of"),
    ("compression.per.level", "NO_COMPRESSION;", "item 2 .* '' is not one of"),
    ("compression.per.level", "XPRESS_COMPRESSION", "Windows only"),
    ("compression.per.level", "DISABLE_COMPRESSION_OPTION", "cannot be set through the rocksdict binding"),
    ("compression.per.level", "'LZ4_COMPRESSION", "a quote is not closed"),
    ("writebuffer.number-to-merge", "0", "must be at least 1"),
    ("block.blocksize", "-4kb", "is not a memory size"),
    ("block.metadata-blocksize", "0", "must be larger than 0"),
    ("use-bloom-filter", "on", "'on' is not a boolean"),
    ("bloom-filter.bits-per-key", "ten", "'ten' is not a number"),
    ("bloom-filter.bits-per-key", "-1", "at least 0"),
    ("bloom-filter.block-based-mode", "1", "'1' is not a boolean"),
])
def test_invalid_values_are_refused_when_set(key: str, value: str, message: str) -> None:
    session = Session()
    with pytest.raises(PlanError, match=f"invalid value for '{re.escape(R + key)}': .*{message}"):
        session.execute_script(f"SET '{R}{key}' = '{sql_text(value)}'")
    assert R + key not in session.config


@pytest.mark.parametrize(("key", "message"), [
    ("write-batch-size", "is not supported: sqlstream writes each batch of a state's changes as one RocksDB write"),
    ("options-factory", "is not supported: a RocksDBOptionsFactory is a Java class"),
])
def test_options_the_binding_cannot_honour_are_refused_with_the_reason(key: str, message: str) -> None:
    with pytest.raises(PlanError, match=f"'{re.escape(R + key)}' {message}"):
        Session().execute_script(f"SET '{R}{key}' = '2 mb'")


@pytest.mark.parametrize(("key", "reason"), [
    ("use-ingest-db-restore-mode", "a rescaling restore copies only the key groups a subtask owns"),
    ("rescaling.use-delete-files-in-range", "a rescaling restore copies only the key groups"),
    ("restore-overlap-fraction-threshold", "a rescaling restore copies only the key groups"),
    ("incremental-restore-async-compact-after-rescale", "a rescaling restore copies only the key groups"),
    ("compaction.filter.periodic-compaction-time", "not with a RocksDB compaction filter"),
    ("compaction.filter.query-time-after-num-entries", "not with a RocksDB compaction filter"),
])
def test_restore_and_compaction_filter_options_have_no_effect_and_say_why(key: str, reason: str) -> None:
    result = Session().execute_script(f"SET '{R}{key}' = 'true'")[0]
    assert f"[WARNING] '{R}{key}' has no effect in sqlstream" in result.message and reason in result.message


@pytest.mark.parametrize(("text", "items"), [
    # Flink's own examples (StructuredOptionsSplitter), then blanks around items
    ("'A;B';C", ["A;B", "C"]), ("\"AB'D\";B;C", ["AB'D", "B", "C"]), ("\"AB'\"\"D;B\";C", ["AB'\"D;B", "C"]),
    (" A ; B ", ["A", "B"]), ("'A' ; 'B'", ["A", "B"]), ("A;", ["A", ""]),
])
def test_list_values_are_split_as_flink_splits_them(text: str, items: list[str]) -> None:
    assert split_list(text) == items


@pytest.mark.parametrize("text", ["A'B", "'A'B", "'A"])
def test_badly_quoted_list_values_are_refused(text: str) -> None:
    with pytest.raises(ValueError, match="quot"):
        split_list(text)


def test_a_misspelt_option_is_refused_with_did_you_mean() -> None:
    with pytest.raises(PlanError, match=f"did you mean '{re.escape(R)}use-bloom-filter'"):
        Session().execute_script(f"SET '{R}use-blom-filter' = 'true'")
    with pytest.raises(PlanError, match=f"did you mean '{re.escape(R)}compression.per.level'"):
        Session().execute_script(f"SET '{R}compression.per-level' = 'NO_COMPRESSION'")


JOB = """
SET 'state.backend.type' = 'rocksdb';
SET 'parallelism.default' = '2';
{options}
CREATE TABLE gen (seq BIGINT) WITH ('connector' = 'datagen', 'number-of-rows' = '4000',
    'fields.seq.kind' = 'sequence', 'fields.seq.start' = '0', 'fields.seq.end' = '3999');
SELECT k, COUNT(*) AS n, SUM(seq) AS total FROM (SELECT seq % 7 AS k, seq FROM gen) GROUP BY k;
"""


def test_a_job_with_options_set_gives_the_same_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    created: list[RocksDBStateBackend] = []
    create = BackendFactory.create

    def recording(self: BackendFactory, key_groups: range, slot: int, local_dir: Path | None = None) -> StateBackend:
        made = create(self, key_groups, slot, local_dir)
        created.append(made)  # type: ignore[arg-type]
        return made

    monkeypatch.setattr(BackendFactory, "create", recording)
    plain = rows(apply_changelog(Session().execute_script(JOB.format(options=""))[-1].table))
    tuned = rows(apply_changelog(Session().execute_script(JOB.format(options=f"""
SET '{R}compression.per.level' = 'NO_COMPRESSION;LZ4_COMPRESSION';
SET '{R}use-bloom-filter' = 'false';
SET '{R}block.blocksize' = '1 kb';
SET '{R}compaction.style' = 'UNIVERSAL';
SET '{R}writebuffer.size' = '64 kb';
SET '{R}thread.num' = '1';
"""))[-1].table))
    expected = [(k, len(range(k, 4000, 7)), sum(range(k, 4000, 7))) for k in range(7)]
    assert plain == tuned == expected
    tuned_backends = [b for b in created if b.tuning.compaction_style == "universal"]
    assert len(tuned_backends) == 2 and all(not b.tuning.bloom_filter and b.tuning.block_size == KB
                                            for b in tuned_backends)


@pytest.mark.parametrize(("style", "trigger"), [("LEVEL", "12"), ("UNIVERSAL", "4")])
def test_the_joins_level0_triggers_apply_under_the_level_style_only(backend, style: str, trigger: str) -> None:
    # the rocksdb join compacts its column families later under LEVEL (its own tuning); a style the
    # user chose runs with RocksDB's triggers
    b = backend({R + "compaction.style": style})
    schema = pa.schema([("k", pa.int64()), ("v", pa.int64())])
    RocksDBInnerJoin(("l", "r"), ((0,), (0,)), None, (schema, schema),
                     pa.schema([("k", pa.int64()), ("v", pa.int64()), ("k0", pa.int64()), ("v0", pa.int64())]),
                     (None, None), 128, b)
    text = options_file(b)
    for family in (HEADS_STATE, *ROWS_STATES):
        assert section(text, f'CFOptions "state\\:{family}"')["level0_file_num_compaction_trigger"] == trigger
