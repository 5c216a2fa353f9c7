"""Every configuration key sqlstream reads (``SET 'key' = 'value'``), typed and validated.

A SET of a misspelt key used to be stored and never read, so the job silently ran without it.
Now a key is either registered here (checked when set, read through :func:`setting`), a known
Flink key that has no effect in sqlstream (accepted with a warning naming it), or refused with
the closest registered key as a suggestion.
"""

from __future__ import annotations

import difflib
import math
import os
import re
import zoneinfo
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from sqlstream.core.durations import parse_duration_ms, parse_memory_size
from sqlstream.core.errors import PlanError


@dataclass(frozen=True)
class ConfigKey:
    """One key: its default (as text) and how its text becomes a value (raising ValueError)."""

    key: str
    default: str | None
    parse: Callable[[str], Any]
    description: str
    # only the default is supported (any other value is refused), so nothing has to read it
    fixed: bool = False


def _int(minimum: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text.strip())
        except ValueError:
            raise ValueError(f"'{text}' is not an integer") from None
        if value < minimum:
            raise ValueError(f"must be at least {minimum}, got {value}")
        return value

    return parse


def _enum(*choices: str, refused: Mapping[str, str] | None = None,
          shown: tuple[str, ...] | None = None) -> Callable[[str], str]:
    def parse(text: str) -> str:
        value = text.strip().lower()
        if refused and value in refused:
            raise ValueError(refused[value])
        if value not in choices:
            # shown as the option's values are written (Flink's enum options are upper case)
            raise ValueError(f"'{text}' is not one of {', '.join(shown or choices)}")
        return value

    return parse


def _bool(text: str) -> bool:
    value = text.strip().lower()
    if value not in ("true", "false"):
        raise ValueError(f"'{text}' is not a boolean (true or false)")
    return value == "true"


def _duration(text: str) -> int:
    return parse_duration_ms(text)


def _memory(text: str) -> int:
    return parse_memory_size(text)


def _ratio(text: str) -> float:
    try:
        value = float(text.strip())
    except ValueError:
        raise ValueError(f"'{text}' is not a number") from None
    if not 0 < value < 1:
        raise ValueError(f"must lie strictly between 0 and 1, got {value}")
    return value


def _number(minimum: float) -> Callable[[str], float]:
    def parse(text: str) -> float:
        try:
            value = float(text.strip())
        except ValueError:
            raise ValueError(f"'{text}' is not a number") from None
        if not math.isfinite(value) or value < minimum:
            raise ValueError(f"must be a number of at least {minimum:g}, got '{text}'")
        return value

    return parse


def _positive_memory(text: str) -> int:
    value = parse_memory_size(text)
    if value <= 0:
        raise ValueError(f"must be larger than 0, got '{text}'")
    return value


def _absolute_path(text: str) -> str:
    if not os.path.isabs(text.strip()):
        raise ValueError(f"'{text}' is not an absolute path")
    return text.strip()


def split_list(text: str) -> list[str]:
    """Flink's list option text: items separated by ';', an item may be quoted with ' or \" (a quote
    inside doubled), as Flink's StructuredOptionsSplitter reads it; unquoted items are trimmed."""
    items: list[str] = []
    item: list[str] = []
    quote: str | None = None
    quoted = False  # the current item was quoted: nothing but blanks may follow its closing quote
    i = 0
    while i < len(text):
        c = text[i]
        if quote is not None:
            if c == quote and text[i + 1:i + 2] == quote:
                item.append(c)
                i += 1
            elif c == quote:
                quote = None
            else:
                item.append(c)
        elif c == ";":
            items.append("".join(item) if quoted else "".join(item).strip())
            item, quoted = [], False
        elif c in "'\"" and not "".join(item).strip() and not quoted:
            quote, quoted, item = c, True, []
        elif quoted:
            if not c.isspace():
                raise ValueError(f"'{text}': illegal quoting at position {i}")
        elif c in "'\"":
            raise ValueError(f"'{text}': illegal quoting at position {i}")
        else:
            item.append(c)
        i += 1
    if quote is not None:
        raise ValueError(f"'{text}': a quote is not closed")
    items.append("".join(item) if quoted else "".join(item).strip())
    return items


def _list(item: Callable[[str], Any]) -> Callable[[str], tuple[Any, ...]]:
    def parse(text: str) -> tuple[Any, ...]:
        values = []
        for n, part in enumerate(split_list(text), 1):
            try:
                values.append(item(part))
            except ValueError as e:
                raise ValueError(f"item {n} of '{text}': {e}") from None
        return tuple(values)

    return parse


def _text(text: str) -> str:
    if not text.strip():
        raise ValueError("must not be empty")
    return text


_GMT_OFFSET = re.compile(r"^GMT([+-])(\d{1,2})(?::?(\d{2}))?$")


def _zone(text: str) -> str:
    """The zone as Arrow names it: an IANA id ('Asia/Tokyo') or a fixed offset ('+08:00').

    Flink takes what java.time.ZoneId.of takes except 'UTC+8' and the three-letter short ids
    ('EST'); a bare offset such as '+08:00' it refuses too (TableConfigValidation)."""
    value = text.strip()
    upper = value.upper()
    hint = ("the zone is an id such as 'America/Los_Angeles' or a custom one such as 'GMT-08:00'")
    if upper in ("UTC", "GMT", "Z", "UT", "ETC/UTC", "ETC/GMT"):
        return "UTC"
    gmt = _GMT_OFFSET.match(upper)
    if gmt is not None:
        sign, hours, minutes = gmt.group(1), int(gmt.group(2)), int(gmt.group(3) or 0)
        if hours > 18 or minutes > 59:
            raise ValueError(f"'{text}': offset out of range; {hint}")
        return "UTC" if hours == minutes == 0 else f"{sign}{hours:02d}:{minutes:02d}"
    if "/" not in value or upper.startswith(("UTC+", "UTC-")):
        raise ValueError(f"'{text}' is not a supported zone: {hint}")
    try:
        zoneinfo.ZoneInfo(value)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        raise ValueError(f"'{text}' is not a known zone: {hint}") from None
    return value


_RESTART = _enum("none", "off", "disable", "fixed-delay", "fixeddelay", refused={
    s: f"restart strategy '{s}' is not supported; use 'none' or 'fixed-delay'"
    for s in ("failure-rate", "failurerate", "exponential-delay", "exponentialdelay")})
_BACKEND = _enum("hashmap", "rocksdb")

# RocksDB's tuning options by Flink's names (RocksDBConfigurableOptions): enums are spelt as RocksDB's
# Java enums (CompactionStyle, CompressionType, InfoLogLevel), in any case as Flink reads them
_BINDING = "the rocksdict binding sqlstream runs RocksDB through"
_COMPACTION_STYLE = _enum("level", "universal", "fifo", refused={
    "none": f"compaction style NONE (no automatic compaction) cannot be set through {_BINDING}; "
            "use LEVEL, UNIVERSAL or FIFO"}, shown=("LEVEL", "UNIVERSAL", "FIFO", "NONE"))
COMPRESSIONS = ("no_compression", "snappy_compression", "zlib_compression", "bzlib2_compression",
                "lz4_compression", "lz4hc_compression", "zstd_compression")
_COMPRESSION = _enum(*COMPRESSIONS, refused={
    "xpress_compression": f"XPRESS_COMPRESSION (Windows only) is not built into {_BINDING}",
    "disable_compression_option": f"DISABLE_COMPRESSION_OPTION cannot be set through {_BINDING}; "
                                  "NO_COMPRESSION stores blocks uncompressed"},
    shown=tuple(c.upper() for c in COMPRESSIONS))
_LOG_LEVELS = ("debug_level", "info_level", "warn_level", "error_level", "fatal_level", "header_level")
_LOG_LEVEL = _enum("info_level", refused={
    level: f"{_BINDING} cannot set RocksDB's information log level: it logs at INFO_LEVEL, Flink's default"
    for level in _LOG_LEVELS if level != "info_level"}, shown=tuple(v.upper() for v in _LOG_LEVELS))
_PREDEFINED = ("default", "spinning_disk_optimized", "spinning_disk_optimized_high_mem", "flash_ssd_optimized")

KEYS: dict[str, ConfigKey] = {k.key: k for k in (
    ConfigKey("parallelism.default", "1", _int(1), "subtasks per operator"),
    ConfigKey("pipeline.max-parallelism", "128", _int(1), "key groups: the upper bound of rescaling"),
    ConfigKey("execution.checkpointing.interval", None, _duration, "checkpoint every this long (unset: never)"),
    ConfigKey("execution.checkpointing.dir", None, _text, "where checkpoints are written"),
    ConfigKey("state.checkpoints.dir", None, _text, "Flink's older name of execution.checkpointing.dir"),
    ConfigKey("execution.checkpointing.num-retained", "1", _int(1), "completed checkpoints kept"),
    ConfigKey("state.checkpoints.num-retained", "1", _int(1),
              "Flink's older name of execution.checkpointing.num-retained"),
    ConfigKey("execution.checkpointing.max-concurrent-checkpoints", "1", _int(1), "checkpoints in flight at once"),
    ConfigKey("execution.checkpointing.min-pause", "0 ms", _duration, "pause between two checkpoints"),
    ConfigKey("execution.checkpointing.timeout", "10 min", _duration, "a checkpoint not complete by then fails"),
    ConfigKey("state.backend.type", "hashmap", _BACKEND, "hashmap (in memory) or rocksdb"),
    ConfigKey("state.backend", "hashmap", _BACKEND, "Flink's older name of state.backend.type"),
    ConfigKey("state.backend.rocksdb.localdir", None, _text,
              "where RocksDB keeps its working files on each machine (unset: the system's temporary "
              "directory; on Ray with checkpoints on a store, each actor's own directory on its node)"),
    ConfigKey("state.backend.rocksdb.memory.managed", "true", _bool,
              "the RocksDB instances of a slot share one block cache and write buffer manager bounded by the "
              "slot's share of taskmanager.memory.managed.size"),
    ConfigKey("state.backend.rocksdb.memory.fixed-per-slot", None, _memory,
              "bound the RocksDB memory of a slot to this size (overrides memory.managed)"),
    ConfigKey("state.backend.rocksdb.memory.write-buffer-ratio", "0.5", _ratio,
              "the share of bounded RocksDB memory that memtables may take"),
    ConfigKey("state.backend.rocksdb.block.cache-size", "8 mb", _memory,
              "the block cache of each column family when RocksDB memory is not bounded"),
    ConfigKey("state.backend.rocksdb.writebuffer.size", "64 mb", _memory,
              "the size of one RocksDB memtable (write buffer)"),
    ConfigKey("state.backend.rocksdb.writebuffer.count", "2", _int(1),
              "the most RocksDB memtables (write buffers) a column family keeps in memory"),
    ConfigKey("state.backend.rocksdb.predefined-options", "DEFAULT",
              _enum(*_PREDEFINED, shown=tuple(p.upper() for p in _PREDEFINED)),
              "a profile of RocksDB options (Flink's PredefinedOptions): the state.backend.rocksdb.* options it sets "
              "apply unless set themselves; SPINNING_DISK_OPTIMIZED: dynamic level sizes, 4 background jobs; "
              "SPINNING_DISK_OPTIMIZED_HIGH_MEM: also 256 mb block cache, 128 kb blocks, 1 gb level base, "
              "256 mb target files, 4 write buffers merged by 3, bloom filter; FLASH_SSD_OPTIMIZED: 4 background "
              "jobs; DEFAULT: none"),
    ConfigKey("state.backend.rocksdb.thread.num", "2", _int(1),
              "the most concurrent background flush and compaction jobs of each RocksDB instance (each operator "
              "subtask's)"),
    ConfigKey("state.backend.rocksdb.files.open", "-1", _int(-1),
              "the most files each RocksDB instance keeps open (-1: no limit)"),
    ConfigKey("state.backend.rocksdb.log.dir", None, _absolute_path,
              "the directory of RocksDB's information log files, named after the db directory (unset: each "
              "db's own directory, deleted with it; Flink's log directory has no counterpart here)"),
    ConfigKey("state.backend.rocksdb.log.max-file-size", "25 mb", _memory,
              "RocksDB starts a new information log file past this size (0: a single file)"),
    ConfigKey("state.backend.rocksdb.log.file-num", "4", _int(1),
              "the most information log files RocksDB keeps"),
    ConfigKey("state.backend.rocksdb.log.level", "INFO_LEVEL", _LOG_LEVEL,
              "RocksDB's information log level: INFO_LEVEL only (the binding cannot set another)", fixed=True),
    ConfigKey("state.backend.rocksdb.compaction.style", "LEVEL", _COMPACTION_STYLE,
              "RocksDB's compaction style: LEVEL, UNIVERSAL or FIFO (FIFO deletes the oldest files, state "
              "included, once they exceed RocksDB's default of 1 gb, as in Flink)"),
    ConfigKey("state.backend.rocksdb.compaction.level.use-dynamic-size", "false", _bool,
              "RocksDB picks the target size of each level dynamically (level_compaction_dynamic_level_bytes)"),
    ConfigKey("state.backend.rocksdb.compaction.level.target-file-size-base", "64 mb", _positive_memory,
              "the target size of a level-1 file in compactions"),
    ConfigKey("state.backend.rocksdb.compaction.level.max-size-level-base", "256 mb", _positive_memory,
              "the upper bound of the total size of the level base's files"),
    ConfigKey("state.backend.rocksdb.compression.per.level", "SNAPPY_COMPRESSION", _list(_COMPRESSION),
              "the compression of each level, a ';'-separated list (the nth for level n-1, the last for the "
              "levels past the list), e.g. 'NO_COMPRESSION;NO_COMPRESSION;LZ4_COMPRESSION'"),
    ConfigKey("state.backend.rocksdb.writebuffer.number-to-merge", "1", _int(1),
              "the fewest memtables merged together before they are written to storage (RocksDB caps it at "
              "writebuffer.count - 1)"),
    ConfigKey("state.backend.rocksdb.block.blocksize", "4 kb", _positive_memory,
              "the approximate size of the user data packed per SST block"),
    ConfigKey("state.backend.rocksdb.block.metadata-blocksize", "4 kb", _positive_memory,
              "the approximate size of partitioned metadata (index) blocks"),
    ConfigKey("state.backend.rocksdb.use-bloom-filter", "true", _bool,
              "every new SST file has a bloom filter. sqlstream's default is true, unlike Flink's false: "
              "its operators' lookups of new keys lean on the filters; 'false' turns them off"),
    ConfigKey("state.backend.rocksdb.bloom-filter.bits-per-key", "10.0", _number(0),
              "the bits per key of the bloom filters (when use-bloom-filter is on)"),
    ConfigKey("state.backend.rocksdb.bloom-filter.block-based-mode", "false", _bool,
              "ask RocksDB for a block-based instead of a full bloom filter, as Flink does; RocksDB 7 and later "
              "(sqlstream's and Flink 2's) ignore it and always build full filters"),
    ConfigKey("taskmanager.memory.managed.size", "128 mb", _memory,
              "the managed memory of the task manager, split evenly between its slots (one per subtask index); "
              "Flink's local execution gives it 128 mb"),
    ConfigKey("restart-strategy.type", "none", _RESTART, "none or fixed-delay"),
    ConfigKey("restart-strategy", "none", _RESTART, "Flink's older name of restart-strategy.type"),
    ConfigKey("restart-strategy.fixed-delay.attempts", "3", _int(0), "restarts before the job fails"),
    ConfigKey("restart-strategy.fixed-delay.delay", "1 s", _duration, "pause before a restart"),
    ConfigKey("table.exec.batch-size", "32768", _int(1), "rows per Arrow batch a source emits (sqlstream)"),
    ConfigKey("table.exec.state.ttl", "0", _duration, "idle keyed state expires after this long (0: never)"),
    ConfigKey("table.exec.source.idle-timeout", "0", _duration,
              "a source split without data this long stops holding the watermark (0: never)"),
    ConfigKey("table.exec.sink.not-null-enforcer", "ERROR", _enum("error", "drop", shown=("ERROR", "DROP")),
              "a NULL into a NOT NULL sink column: ERROR fails the job, DROP drops the row"),
    ConfigKey("table.exec.sink.keyed-shuffle", "AUTO", _enum("auto", "none", "force", shown=("AUTO", "NONE", "FORCE")),
              "shuffle the rows into a sink with a PRIMARY KEY by that key, so that each key's changes reach one "
              "sink subtask in order: AUTO when the sink's parallelism differs from its input's, FORCE whenever the "
              "sink runs in more than one subtask, NONE never"),
    ConfigKey("table.exec.sink.upsert-materialize", "AUTO", _enum("auto", "none", "force", refused={
        "force": "'FORCE' materializes the input of every upsert sink (Flink's SinkUpsertMaterializer), which "
                 "sqlstream does not have; use AUTO or NONE"}, shown=("AUTO", "NONE", "FORCE")),
              "AUTO: an updating query keyed by other columns than its sink's PRIMARY KEY is refused "
              "(see table.exec.sink.require-on-conflict); NONE: its changes are written as they arrive"),
    ConfigKey("table.exec.sink.require-on-conflict", "true", _bool,
              "an updating query keyed by other columns than its sink's PRIMARY KEY needs ON CONFLICT (Flink 2.3); "
              "false: Flink materializes its changes, which sqlstream refuses"),
    ConfigKey("table.dynamic-table-options.enabled", "true", _bool,
              "whether /*+ OPTIONS(...) */ table hints are allowed"),
    ConfigKey("table.local-time-zone", "UTC", _zone,
              "the session zone: TIMESTAMP_LTZ values become wall-clock time (casts, DATE_FORMAT, FROM_UNIXTIME, "
              "LOCALTIMESTAMP) and wall-clock time becomes an instant (UNIX_TIMESTAMP, casts) in it"),
    ConfigKey("execution.runtime-mode", "streaming", _enum("streaming", refused={
        m: f"execution.runtime-mode '{m}' is not supported: sqlstream runs every job in streaming mode"
        for m in ("batch", "automatic")}), "streaming (the only mode)", fixed=True),
    ConfigKey("execution.target", "local", _enum("local", "ray"), "local threads or a Ray cluster (sqlstream)"),
    ConfigKey("ray.address", None, _text, "the Ray cluster to run on (sqlstream)"),
    ConfigKey("state.savepoints.dir", None, _text,
              "where `sqlstream savepoint JOB` without a directory writes (a path or an s3://... URI)"),
    ConfigKey("execution.savepoint.path", None, _text, "the next job restores from this savepoint or checkpoint"),
    ConfigKey("execution.savepoint.ignore-unclaimed-state", "false", _bool,
              "restore even if some saved state belongs to no operator of the job"),
    ConfigKey("s3.endpoint", None, _text, "the S3 endpoint, e.g. 'http://127.0.0.1:9000' (unset: AWS)"),
    ConfigKey("s3.access-key", None, _text, "the S3 access key (unset: the AWS environment's credentials)"),
    ConfigKey("s3.secret-key", None, _text, "the S3 secret key, set together with s3.access-key"),
    ConfigKey("s3.path.style.access", "false", _bool,
              "address buckets as endpoint/bucket (true, e.g. MinIO) instead of bucket.endpoint"),
    ConfigKey("s3.region", None, _text, "the S3 region (unset: AWS_REGION, else us-east-1)"),
    ConfigKey("sql-client.execution.result-mode", "tableau", _enum("tableau", "changelog", "table"),
              "how the shell shows a query's result"),
)}

# Flink keys sqlstream knows but does not act on: accepted, with a warning that says so.
NO_EFFECT: dict[str, str] = {
    "table.exec.mini-batch.enabled": "sqlstream aggregates whole Arrow batches already",
    "table.exec.mini-batch.allow-latency": "sqlstream aggregates whole Arrow batches already",
    "table.exec.mini-batch.size": "sqlstream aggregates whole Arrow batches already",
    "table.optimizer.agg-phase-strategy": "sqlstream plans one-phase aggregations",
    "table.optimizer.distinct-agg.split.enabled": "sqlstream does not split distinct aggregations",
    "table.exec.resource.default-parallelism": "set parallelism.default instead",
    "pipeline.name": "jobs are not named",
    "pipeline.auto-watermark-interval": "watermarks advance with every batch",
    "execution.checkpointing.mode": "checkpoints are always aligned (exactly once)",
    "execution.buffer-timeout": "batches are sent when full or when the source pauses",
    "state.backend.incremental": "rocksdb checkpoints are always incremental, hashmap checkpoints always full",
    "sql-client.execution.max-table-result.rows": "the shell keeps every row",
    "table.display.max-column-width": "the shell shows whole values",
    "table.exec.source.cdc-events-duplicate": "changelog sources are not deduplicated",
    "table.generated-code.max-length": "sqlstream generates no code",
}

NO_EFFECT.update({
    f"state.backend.rocksdb.{key}": "a rescaling restore copies only the key groups a subtask owns into a fresh "
                                    "RocksDB instance: there is no base instance to choose, clip, ingest into or compact"
    for key in ("restore-overlap-fraction-threshold", "use-ingest-db-restore-mode",
                "incremental-restore-async-compact-after-rescale", "rescaling.use-delete-files-in-range")})
NO_EFFECT.update({
    f"state.backend.rocksdb.compaction.filter.{key}": "sqlstream drops expired state (table.exec.state.ttl) by "
                                                      "sweeping it, not with a RocksDB compaction filter"
    for key in ("query-time-after-num-entries", "periodic-compaction-time")})

# Flink keys sqlstream refuses, with the reason (instead of "unknown key").
REFUSED: dict[str, str] = {
    "state.backend.rocksdb.write-batch-size": "sqlstream writes each batch of a state's changes as one RocksDB "
                                              "write batch (a restore: in batches of bounded entries); their "
                                              "size in bytes cannot be bounded",
    "state.backend.rocksdb.options-factory": "a RocksDBOptionsFactory is a Java class; set the "
                                             "state.backend.rocksdb.* options instead",
}

# Families of Flink keys without effect here, by prefix.
NO_EFFECT_PREFIXES: dict[str, str] = {
    "fs.": "Flink file system plugin settings: sqlstream reaches stores through pyarrow.fs, "
           "S3 configured by the s3.* keys",
}


def validate(key: str, value: str) -> str | None:
    """Check ``SET 'key' = 'value'``; returns a warning for a key without effect, else None.

    Raises PlanError for an unknown key (suggesting the closest known one) or a bad value.
    """
    spec = KEYS.get(key)
    if spec is not None:
        try:
            spec.parse(value)
        except ValueError as e:
            raise PlanError(f"invalid value for '{key}': {e}") from None
        return None
    if key in NO_EFFECT:
        return f"'{key}' has no effect in sqlstream ({NO_EFFECT[key]})"
    if key in REFUSED:
        raise PlanError(f"'{key}' is not supported: {REFUSED[key]}")
    prefix = next((p for p in NO_EFFECT_PREFIXES if key.startswith(p)), None)
    if prefix is not None:
        return f"'{key}' has no effect in sqlstream ({NO_EFFECT_PREFIXES[prefix]})"
    close = difflib.get_close_matches(key, [*KEYS, *NO_EFFECT], n=1, cutoff=0.6)
    hint = f"; did you mean '{close[0]}'?" if close else ""
    raise PlanError(f"unknown configuration key '{key}'{hint}")


def setting(settings: Mapping[str, str], key: str) -> Any:
    """The typed value of a registered key: the one set, else the default (None if it has none)."""
    spec = KEYS[key]
    text = settings.get(key, spec.default)
    if text is None:
        return None
    try:
        return spec.parse(text)
    except ValueError as e:
        raise PlanError(f"invalid value for '{key}': {e}") from None
