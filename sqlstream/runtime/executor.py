"""Runs a dataflow as parallel subtasks with checkpoints, restarts and restore.

The job's settings are Flink's: ``parallelism.default``,
``execution.checkpointing.interval``, ``execution.checkpointing.dir`` (or ``state.checkpoints.dir``),
``state.checkpoints.num-retained``,
``execution.checkpointing.max-concurrent-checkpoints`` / ``.min-pause`` /
``.timeout``, ``state.backend.type`` (hashmap |
rocksdb), ``pipeline.max-parallelism``, ``restart-strategy.type`` (none |
fixed-delay) with ``restart-strategy.fixed-delay.attempts`` / ``.delay``.
Subtasks are threads: Arrow kernels release the GIL, and threads share
batches without serializing them (see benchmarks/threads_vs_processes.py).
``JobExecutor.status()`` is the public view of a running job (per-operator
counters, watermarks, queue fill, checkpoint history) for monitoring.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlstream.core.durations import parse_duration_ms
from sqlstream.core.errors import JobError, PlanError, SqlStreamError
from sqlstream.core.physical import Dataflow, PhysicalNode, SinkSpec, SourceSpec
from sqlstream.core.status import (
    ABORTED,
    CANCELED,
    CREATED,
    FAILED,
    FINISHED,
    RESTARTING,
    RUNNING,
    InputEdge,
    JobStatus,
    OperatorStatus,
    SubtaskStatus,
)
from sqlstream.runtime.checkpoint import storage as chk_storage
from sqlstream.runtime.checkpoint.coordinator import (
    CheckpointCoordinator,
    CheckpointHistory,
    CheckpointStats,
)
from sqlstream.runtime.checkpoint.storage import (
    CheckpointError,
    CheckpointStorage,
    CheckpointWriteError,
    CommitJournal,
    RestorePoint,
)
from sqlstream.runtime.clock import SYSTEM_CLOCK, Clock
from sqlstream.runtime.connectors.base import (
    DEFAULT_BATCH_SIZE,
    SinkContext,
    SinkWriter,
    SourceContext,
    SourceReader,
)
from sqlstream.runtime.connectors.collect import CollectWriter, TableReader
from sqlstream.runtime.elements import Chunk
from sqlstream.runtime.fs import Location, StorageError, is_remote, resolve
from sqlstream.runtime.graph import Chain, build_chains
from sqlstream.runtime.hashing import DEFAULT_MAX_PARALLELISM, key_group_range
from sqlstream.runtime.operators.base import Metrics, Operator, OperatorContext
from sqlstream.runtime.operators.registry import build_operator
from sqlstream.runtime.operators.sink import SinkOperator
from sqlstream.runtime.state import BackendFactory
from sqlstream.runtime.subtask import OutputGate, Subtask, os_failure
from sqlstream.runtime.task import Task

CHANNEL_CAPACITY = 2  # batches in flight per input channel: bounded, so slow sinks backpressure
DEFAULT_CHECKPOINT_TIMEOUT = "10 min"  # Flink's execution.checkpointing.timeout

log = logging.getLogger("sqlstream.checkpoint")


def create_reader(spec: SourceSpec, subtask: int = 0, parallelism: int = 1, batch_size: int = DEFAULT_BATCH_SIZE,
                  clock: Clock = SYSTEM_CLOCK, settings: Mapping[str, str] | None = None) -> SourceReader:
    if spec.values is not None:
        return TableReader(spec.values, batch_size)
    from sqlstream.runtime.connectors.registry import get_connector

    assert spec.table is not None
    connector = get_connector(spec.table.connector)
    assert connector.create_source is not None
    ctx = SourceContext(spec.table, spec.options, spec.columns, subtask, parallelism, batch_size, clock,
                        dict(settings or {}), spec.partition_filter)
    return connector.create_source(ctx)


def create_writer(spec: SinkSpec, collect: Callable[[Chunk], None] | None, subtask: int = 0,
                  parallelism: int = 1, settings: Mapping[str, str] | None = None,
                  clock: Clock = SYSTEM_CLOCK) -> SinkWriter:
    if spec.table is None:
        if collect is None:
            raise JobError("a SELECT needs a client to collect its rows")
        return CollectWriter(collect)
    from sqlstream.runtime.connectors.registry import get_connector

    connector = get_connector(spec.table.connector)
    if connector.create_sink is None:
        raise JobError(f"table '{spec.table.name}' (connector '{spec.table.connector}') cannot be written to")
    return connector.create_sink(SinkContext(spec.table, spec.options, spec.schema, subtask, parallelism, spec.updating,
                                             dict(settings or {}), clock))


@dataclass
class JobResult:
    metrics: dict[str, Metrics] = field(default_factory=dict)
    cancelled: bool = False
    checkpoints: list[CheckpointStats] = field(default_factory=list)
    restarts: int = 0
    checkpoint_dir: Path | None = None
    # what recovery had to report: checkpoints skipped as corrupt, output it could not undo
    restore_warnings: list[str] = field(default_factory=list)
    peak_checkpoints_in_flight: int = 0  # most periodic checkpoints pending at once (one attempt)

    @property
    def late_records_dropped(self) -> int:
        return sum(m.late_records_dropped for m in self.metrics.values())


class JobFailure(Exception):
    def __init__(self, cause: BaseException) -> None:
        super().__init__(str(cause))
        self.cause = cause


def parse_parallelism(key: str, value: str) -> int:
    """A parallelism setting as a positive int: 0 or less would start no subtask and never finish."""
    try:
        n = int(value)
    except ValueError:
        n = 0
    if n < 1:
        raise PlanError(f"'{key}' must be a positive integer, got '{value}'")
    return n


@dataclass
class JobConfig:
    parallelism: int = 1
    max_parallelism: int = DEFAULT_MAX_PARALLELISM
    checkpoint_interval_ms: int | None = None
    checkpoint_dir: Path | None = None
    # a checkpoint root on a store (s3://...): checkpoint_dir is then its local working copy
    checkpoint_uri: str | None = None
    retained: int = 1
    max_concurrent_checkpoints: int = 1
    min_pause_ms: int = 0
    checkpoint_timeout_ms: int = parse_duration_ms(DEFAULT_CHECKPOINT_TIMEOUT)
    backend: str = "hashmap"
    restart_attempts: int = 0
    restart_delay_s: float = 1.0
    batch_size: int = DEFAULT_BATCH_SIZE
    raw: dict[str, str] = field(default_factory=dict)
    # processing time of every part of the job (state TTL, PROCTIME(), idle timeouts, throttles)
    clock: Clock = SYSTEM_CLOCK

    @classmethod
    def from_settings(cls, settings: dict[str, str]) -> JobConfig:
        def get(key: str, default: str | None = None) -> str | None:
            return settings.get(key, default)

        try:
            interval = get("execution.checkpointing.interval")
            # Flink 2's names first, then the older ones it still reads
            chk_dir = get("execution.checkpointing.dir") or get("state.checkpoints.dir")
            strategy = (get("restart-strategy.type") or get("restart-strategy") or "none").lower()
            attempts = int(get("restart-strategy.fixed-delay.attempts", "3")) if strategy in ("fixed-delay", "fixeddelay") else 0
            return cls(
                parallelism=parse_parallelism("parallelism.default", get("parallelism.default", "1")),
                max_parallelism=parse_parallelism("pipeline.max-parallelism",
                                                  get("pipeline.max-parallelism", str(DEFAULT_MAX_PARALLELISM))),
                checkpoint_interval_ms=parse_duration_ms(interval) if interval else None,
                checkpoint_dir=(chk_storage.local_copy(chk_dir) if chk_dir and is_remote(chk_dir)
                                else Path(chk_dir.removeprefix("file://")) if chk_dir else None),
                checkpoint_uri=chk_dir if chk_dir and is_remote(chk_dir) else None,
                retained=int(get("execution.checkpointing.num-retained") or get("state.checkpoints.num-retained", "1")),
                max_concurrent_checkpoints=int(get("execution.checkpointing.max-concurrent-checkpoints", "1")),
                min_pause_ms=parse_duration_ms(get("execution.checkpointing.min-pause", "0 ms")),
                checkpoint_timeout_ms=parse_duration_ms(get("execution.checkpointing.timeout",
                                                            DEFAULT_CHECKPOINT_TIMEOUT)),
                backend=(get("state.backend.type") or get("state.backend") or "hashmap").lower(),
                restart_attempts=attempts,
                restart_delay_s=parse_duration_ms(get("restart-strategy.fixed-delay.delay", "1 s")) / 1000,
                batch_size=int(get("table.exec.batch-size", str(DEFAULT_BATCH_SIZE))),
                raw=dict(settings),
            )
        except ValueError as e:
            raise SqlStreamError(f"invalid job setting: {e}") from None


class JobExecutor:
    def __init__(self, flow: Dataflow, config: JobConfig, collect: Callable[[Chunk], None] | None = None,
                 restore: str | Path | None = None, allow_non_restored_state: bool = False) -> None:
        self.flow = flow
        self.config = config
        self.collect = collect
        self.restore = restore
        self.allow_non_restored_state = allow_non_restored_state
        self.cancel_event = threading.Event()
        self.subtask_metrics: dict[str, list[Metrics]] = {}  # node label -> one Metrics per subtask
        self.coordinator: CheckpointCoordinator | None = None
        self.running = threading.Event()
        self.live_subtasks: list[Subtask] = []  # those of the current attempt
        self.restore_warnings: list[str] = []  # corrupt checkpoints skipped, commits that could not be undone
        self.first_checkpoint_id = 1  # at least: checkpoint ids only grow across restores
        self.chains = build_chains(flow, config.parallelism)
        # one slot per subtask index, as Flink's slot sharing places subtask i of every operator in slot i
        self.backends = BackendFactory(config.backend, config.raw, max(c.parallelism for c in self.chains),
                                       config.clock)
        # for status(): an id of its own (as Flink gives each job one), the state, the checkpoints of all attempts
        self.job_id = uuid.uuid4().hex[:12]
        self.state = CREATED
        self.start_time_ms = time.time_ns() // 1_000_000
        self.restarts = 0
        self.error: str | None = None
        self.checkpoint_history = CheckpointHistory()
        self.remote_root = self._reach_store(config.checkpoint_uri) if config.checkpoint_uri else None
        # where RocksDB keeps its working files (Flink's state.backend.rocksdb.localdir), a path on
        # the machine the subtask runs on; unset, the system's temporary directory
        localdir = config.raw.get("state.backend.rocksdb.localdir")
        self.state_dir: Path | None = Path(localdir) if localdir else None
        # checkpoints without a configured directory go to a temporary one, removed when the job ends:
        # nothing can restore from it afterwards (no one knows its name), so it would only fill /tmp
        self.temporary_checkpoint_dir: Path | None = None
        if config.checkpoint_interval_ms and config.checkpoint_dir is None:
            config.checkpoint_dir = Path(tempfile.mkdtemp(prefix="sqlstream-checkpoints-"))
            self.temporary_checkpoint_dir = config.checkpoint_dir
        elif config.checkpoint_dir is not None:
            # found before the job starts, not at its first checkpoint
            try:
                config.checkpoint_dir.mkdir(parents=True, exist_ok=True)
            except OSError as e:
                raise SqlStreamError(f"checkpoint directory '{config.checkpoint_dir}' (execution.checkpointing.dir) "
                                     f"cannot be created: {e.strerror or e}") from None

    def _reach_store(self, uri: str) -> Location:
        """The checkpoint root on its store, found writable before the job starts."""
        try:
            remote = resolve(uri, self.config.raw)
            remote.make_dirs()
            probe = remote.child(f".probe-{self.job_id}")
            probe.write_bytes(b"")
            probe.delete()
        except StorageError as e:
            raise SqlStreamError(f"checkpoint directory (execution.checkpointing.dir): {e}") from None
        return remote

    # ------------------------------------------------------------ public
    def cancel(self) -> None:
        self.cancel_event.set()

    def savepoint(self, directory: str | Path) -> Future:
        """Trigger a savepoint (canonical state) into ``directory``, a local path or a store's URI
        (written to a local copy, then uploaded); the future yields its path or URI."""
        if not self.running.wait(timeout=30) or self.coordinator is None:
            raise JobError("the job is not running")
        if is_remote(directory):
            try:
                remote = resolve(directory, self.config.raw)
                if remote.exists():
                    raise SqlStreamError(f"savepoint directory {remote.where()} already exists")
            except StorageError as e:
                raise SqlStreamError(f"savepoint: {e}") from None
            local = chk_storage.local_copy(remote.uri)
            shutil.rmtree(local, ignore_errors=True)
            return self.coordinator.trigger_checkpoint(savepoint_dir=local, savepoint_remote=remote)
        return self.coordinator.trigger_checkpoint(savepoint_dir=Path(directory))

    def stop_with_savepoint(self, directory: str | Path, timeout_s: float = 120) -> Path | str:
        """Savepoint, then cancel, with nothing committed past the savepoint.

        Periodic checkpoints (and the final commit of a job that ends meanwhile) are
        suspended first, so a restore from the savepoint replays nothing already committed.
        """
        if not self.running.wait(timeout=30) or self.coordinator is None:
            raise JobError("the job is not running")
        suspend = getattr(self.coordinator, "suspend", None)  # the Ray coordinator keeps its own quiet period
        if suspend is not None:
            suspend()
        try:
            path = self.savepoint(directory).result(timeout=timeout_s)
            # the Ray coordinator's client has no such record: its actors commit on their own
            self._await_notified(getattr(self.coordinator, "latest_completed", None), timeout_s)
            return path
        finally:
            self.cancel()

    def _await_notified(self, checkpoint_id: int | None, timeout_s: float) -> None:
        """Let every running subtask see the savepoint complete (sinks commit it) before cancelling,
        as Flink's stop-with-savepoint does; a subtask that cannot within the timeout leaves its
        pre-committed output to the restore, which commits it then."""
        deadline = time.monotonic() + timeout_s
        while checkpoint_id is not None and time.monotonic() < deadline:
            if all(st.notified >= checkpoint_id or st.finished.is_set() for st in self.live_subtasks):
                return
            time.sleep(0.01)

    def status(self) -> JobStatus:
        """The job now: per operator (in plan order) its subtasks' counters, watermark and queue
        fill, read from the subtasks by physical node id, and the checkpoint history."""
        counters = self._subtask_statuses()
        chain_of = {n.id: c for c in self.chains for n in c.nodes}
        operators = []
        for node in self.flow.nodes:
            chain = chain_of[node.id]
            subtasks = tuple(counters[(chain.uid, i)][node.id] for i in range(chain.parallelism)
                             if (chain.uid, i) in counters)
            operators.append(OperatorStatus(node.id, node.name, node.detail, chain.parallelism,
                                            tuple(InputEdge(e.upstream, e.mode) for e in node.inputs), subtasks))
        checkpoints, completed, failed = self.checkpoint_history.snapshot()
        return JobStatus(self.job_id, self.state, self.start_time_ms, time.time_ns() // 1_000_000, tuple(operators),
                         checkpoints, completed, failed, self.restarts, self.flow.explain(), self.error)

    def _subtask_statuses(self) -> dict[tuple[str, int], dict[int, SubtaskStatus]]:
        """Per (chain uid, subtask index), the subtask's figures by node id: the current attempt's subtasks.

        Read downstream first (chains are in topological order), so that in one status no
        operator has received more records than its upstream operators had sent.
        """
        return {st.key: st.status() for st in reversed(self.live_subtasks)}

    def run(self) -> JobResult:
        self.start_time_ms = time.time_ns() // 1_000_000
        try:
            result = self._run()
        except KeyboardInterrupt:
            self.state = CANCELED  # Ctrl-C: how the CLI and the shell cancel a job
            raise
        except BaseException as e:
            self.state, self.error = FAILED, str(e)
            raise
        finally:
            if self.remote_root is not None and self.config.checkpoint_dir is not None:
                # the checkpoints are on the store: their local working copy is only a cache
                shutil.rmtree(self.config.checkpoint_dir, ignore_errors=True)
            if self.temporary_checkpoint_dir is not None:
                shutil.rmtree(self.temporary_checkpoint_dir, ignore_errors=True)
        self.state = CANCELED if result.cancelled else FINISHED
        return result

    def _run(self) -> JobResult:
        """Attempts until one ends, restarting from the newest checkpoint as the restart strategy allows."""
        restore = self.restore
        checkpoints: list[CheckpointStats] = []
        while True:
            try:
                result = self._attempt(restore)
                self.checkpoint_history.end_in_progress(ABORTED, "the job ended before it completed")
                result.restarts = self.restarts
                result.checkpoints = checkpoints + result.checkpoints
                result.restore_warnings = self.restore_warnings
                return result
            except JobFailure as failure:
                cause = failure.cause
                self.checkpoint_history.end_in_progress(FAILED, f"the job failed: {cause}")
                if self.coordinator is not None:
                    checkpoints += self.coordinator.completed
                # a SqlStreamError other than these is a fault of the job itself: restarting repeats it
                restartable = not isinstance(cause, SqlStreamError) or isinstance(cause, JobError | CheckpointWriteError)
                if self.restarts >= self.config.restart_attempts or not restartable:
                    if isinstance(cause, SqlStreamError):
                        raise cause from None
                    raise JobError(f"job failed: {type(cause).__name__}: {cause}") from cause
                self.restarts += 1
                self.state = RESTARTING
                time.sleep(self.config.restart_delay_s)
                if self._has_completed_checkpoint():
                    restore = self.config.checkpoint_uri or self.config.checkpoint_dir
                if self.cancel_event.is_set():
                    return JobResult(self.summed_metrics(), cancelled=True, restarts=self.restarts,
                                     restore_warnings=self.restore_warnings)

    def _has_completed_checkpoint(self) -> bool:
        """Whether a restart can restore from the job's checkpoint root (its local working copy
        holds every checkpoint this process completed)."""
        root = self.config.checkpoint_dir
        return root is not None and bool(chk_storage.completed_ids(root))

    # ------------------------------------------------------------ one attempt
    def _attempt(self, restore: str | Path | None) -> JobResult:
        config = self.config
        self.subtask_metrics = {}
        storage = (CheckpointStorage(config.checkpoint_dir, config.retained, self.remote_root)
                   if config.checkpoint_dir else None)
        metadata = self._prepare_restore(restore, storage)
        stop = threading.Event()
        failures: list[BaseException] = []
        lock = threading.Lock()

        def on_failure(e: BaseException) -> None:
            with lock:
                failures.append(e)
            stop.set()

        subtasks: dict[str, list[Subtask]] = {}
        keys = [(c.uid, i) for c in self.chains for i in range(c.parallelism)]

        def trigger(n: int, savepoint: bool) -> None:
            for c in self.chains:
                if c.is_source:
                    for st in subtasks[c.uid]:
                        st.control.put(("trigger", n, savepoint))

        def notify(n: int, final: bool) -> None:
            for sts in subtasks.values():
                for st in sts:
                    st.control.put(("complete", n, final))

        first_id = max(self.first_checkpoint_id, (metadata["checkpoint_id"] + 1) if metadata else 1)
        if storage is not None:
            # above every chk-N directory, complete or not: one a killed process left half written
            # must not become the directory of a new checkpoint (its cleanup would remove it in flight)
            first_id = max([first_id, *[i + 1 for i in storage.known_ids()]])
        coordinator = CheckpointCoordinator(
            storage, config.checkpoint_interval_ms, keys, trigger, notify,
            {"max_parallelism": config.max_parallelism, "chains": {c.uid: c.node_uids for c in self.chains}},
            first_id, self.checkpoint_history, max_concurrent=config.max_concurrent_checkpoints,
            min_pause_ms=config.min_pause_ms, timeout_ms=config.checkpoint_timeout_ms,
        )
        self.coordinator = coordinator
        pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="snapshot")
        try:
            for chain in self.chains:
                subtasks[chain.uid] = [
                    self._build_subtask(chain, i, coordinator, pool, on_failure, stop, metadata)
                    for i in range(chain.parallelism)
                ]
            self._wire(subtasks, stop)
        except BaseException:
            pool.shutdown(wait=False)
            raise
        all_subtasks = [st for sts in subtasks.values() for st in sts]
        self.live_subtasks = all_subtasks
        for st in all_subtasks:
            st.start()
        coordinator.start()
        self.state = RUNNING
        self.running.set()
        finalized = False
        close_error: BaseException | None = None
        try:
            while True:
                if failures:
                    raise JobFailure(failures[0])
                if self.cancel_event.is_set():
                    break
                if not finalized and coordinator.all_finished() and not coordinator.suspended:
                    coordinator.stop()
                    coordinator.final_checkpoint()
                    finalized = True
                if all(st.finished.is_set() for st in all_subtasks):
                    if failures:
                        raise JobFailure(failures[0])
                    break
                time.sleep(0.01)
        finally:
            self.running.clear()
            coordinator.stop()
            stop.set()
            for st in all_subtasks:
                st.join(timeout=10)
            pool.shutdown(wait=True)
            close_error = self._close(all_subtasks, coordinator.seal())
            if storage is not None:
                storage.cleanup()  # nothing is in flight now: leftovers of aborted checkpoints go
        if close_error is not None:  # (a failure that ended the attempt already is the one reported)
            raise JobFailure(close_error)
        return JobResult(self.summed_metrics(), cancelled=self.cancel_event.is_set(),
                         checkpoints=list(coordinator.completed), checkpoint_dir=config.checkpoint_dir,
                         peak_checkpoints_in_flight=coordinator.peak_in_flight)

    def _close(self, subtasks: list[Subtask], latest_completed: int | None,
               discard: bool = True) -> BaseException | None:
        """Release the subtasks' readers, operators and state at the end of an attempt; the first
        release that failed (a sink's file that cannot be flushed on a full disk), if any.

        Every release is tried even when one fails, and a failure is returned rather than raised:
        raised here, it would replace the failure that ended the attempt (the disk filling up
        while a subtask wrote) with a bare ``OSError`` from closing its file.  With ``discard``,
        ``latest_completed`` is final (the coordinator is sealed) and sinks abort what they
        pre-committed for later checkpoints; a subtask still running (it did not stop in time)
        is left alone, as its sink may still be writing.
        """
        first: BaseException | None = None

        def attempt(release: Callable[[], None], st: Subtask) -> None:
            nonlocal first
            try:
                release()
            except Exception as e:  # noqa: BLE001 - returned to the caller, see above
                first = first or os_failure(e, f"closing {st.name}")

        for st in subtasks:
            if st.reader is not None:
                attempt(st.reader.close, st)
            for task in st.tasks:
                if discard and not st.is_alive() and isinstance(task.operator, SinkOperator):
                    attempt(lambda op=task.operator: op.discard_uncommitted(latest_completed), st)
                attempt(task.operator.close, st)
                if task.ctx.state is not None:
                    attempt(task.ctx.state.close, st)
        return first

    # ------------------------------------------------------------ restore
    def _prepare_restore(self, restore: str | Path | None, storage: CheckpointStorage | None) -> dict[str, Any] | None:
        """Choose and verify the checkpoint to restore (before anything is built or run), report
        the ones skipped as corrupt, and undo sink commits made after the chosen one."""
        if restore is None:
            return None
        point = chk_storage.restore_point(restore, self.config.raw)
        if point.newest is not None:  # ids of checkpoints skipped as corrupt are not used again
            self.first_checkpoint_id = max(self.first_checkpoint_id, point.newest + 1)
        self.restore_warnings += [w for w in point.skipped if w not in self.restore_warnings]
        self._check_restore(point.metadata)
        if point.root is not None:
            self._undo_commits_after(point, resolve(restore, self.config.raw) if is_remote(restore) else None)
            if storage is not None and point.root.resolve() == storage.root and point.skipped:
                storage.remove_checkpoints_after(point.checkpoint_id)
        return point.metadata

    def _undo_commits_after(self, point: RestorePoint, remote: Location | None) -> None:
        """Rows after the restored checkpoint are written again: what sinks committed of them goes
        (``remote``: the store the checkpoint root was downloaded from, whose journal is kept too)."""
        assert point.root is not None
        k = point.checkpoint_id
        sinks = {uid: node for c in self.chains for node, uid in zip(c.nodes, c.node_uids, strict=True)
                 if node.sink is not None}
        for uid in CommitJournal.sinks(point.root):
            restored = {(index, staged) for (_, index), snap in point.metadata["subtasks"].items()
                        for staged in ((snap.get("operators") or {}).get(uid) or {}).get("pending", {})}
            committables, entries = CommitJournal.committed_after(point.root, uid, k, restored)
            if not committables:
                CommitJournal.forget(point.root, entries, remote)
                continue
            node = sinks.get(uid)
            writer = create_writer(node.sink, self.collect, settings=self.config.raw) if node is not None and node.sink is not None else None
            if writer is not None and writer.rollback(committables):
                CommitJournal.forget(point.root, entries, remote)
                log.warning("undid %d commit(s) of sink %s made after checkpoint %d", len(committables), uid, k)
            else:
                target = node.sink.table.name if node is not None and node.sink and node.sink.table else uid
                message = (f"sink '{target}' cannot undo what it committed after checkpoint {k}: "
                           "rows written after that checkpoint may appear twice")
                log.warning(message)
                self.restore_warnings.append(message)

    def _check_restore(self, metadata: dict[str, Any]) -> None:
        if metadata.get("max_parallelism") != self.config.max_parallelism:
            raise CheckpointError(
                f"the checkpoint was taken with pipeline.max-parallelism {metadata.get('max_parallelism')}, "
                f"the job has {self.config.max_parallelism}; they must be equal to map state back"
            )
        new_chains = {c.uid: c for c in self.chains}
        old_chains: dict[str, list[str]] = metadata.get("chains", {})
        new_nodes = {u for c in self.chains for u in c.node_uids}
        missing = [uid for uids in old_chains.values() for uid in uids if uid not in new_nodes]
        stateful_missing = [
            uid for uid in missing
            if any(snap.get("keyed", {}).get(uid) or snap.get("operators", {}).get(uid) is not None
                   for snap in metadata["subtasks"].values())
        ]
        if stateful_missing and not self.allow_non_restored_state:
            raise CheckpointError(
                f"the checkpoint holds state of {len(stateful_missing)} operator(s) that this job does not have "
                "(the SQL changed?); use --allow-non-restored-state to drop that state"
            )
        for uid, chain in new_chains.items():
            old = [snap for (cu, _), snap in metadata["subtasks"].items() if cu == uid]
            if chain.is_source and old and old[0]["parallelism"] != chain.parallelism:
                raise CheckpointError(
                    f"source {chain.head.detail} ran with parallelism {old[0]['parallelism']} in the checkpoint "
                    f"and {chain.parallelism} now; a source's parallelism cannot change on restore"
                )

    def _restored_for(self, chain: Chain, index: int, metadata: dict[str, Any] | None) -> tuple[dict | None, list[dict]]:
        """(this subtask's own snapshot, every old snapshot of the chain for keyed-state redistribution)."""
        if metadata is None:
            return None, []
        olds = {i: snap for (cu, i), snap in metadata["subtasks"].items() if cu == chain.uid}
        return olds.get(index), [olds[i] for i in sorted(olds)]

    # ------------------------------------------------------------ building
    def _build_subtask(self, chain: Chain, index: int, coordinator: CheckpointCoordinator, pool: ThreadPoolExecutor,
                       on_failure: Callable[[BaseException], None], stop: threading.Event,
                       metadata: dict[str, Any] | None) -> Subtask:
        config = self.config
        own, all_old = self._restored_for(chain, index, metadata)
        p = chain.parallelism
        reader = None
        source_metrics = None
        tasks: list[Task] = []
        channel_inputs: list[int] = []
        for ci in chain.inputs:
            up = next(c for c in self.chains if c.uid == ci.upstream)
            channel_inputs += [ci.input_index] * ci.channels(up.parallelism)
        for pos, (node, uid) in enumerate(zip(chain.nodes, chain.node_uids, strict=True)):
            label = f"#{node.id} {node.name}"
            metrics = Metrics()
            if node.source is not None:
                reader = create_reader(node.source, index, p, config.batch_size, config.clock, config.raw)
                if own is not None and own.get("source") is not None:
                    reader.restore_position(own["source"])
                reader.open()
                source_metrics = metrics
                self._register(label, metrics)
                continue
            operator = self._make_operator(node, uid, index, p, metadata)
            state = None
            if operator.keyed:
                state = self.backends.create(key_group_range(index, p, config.max_parallelism), index,
                                             self.state_dir)
                if config.checkpoint_dir is not None:
                    state.shared_dir = config.checkpoint_dir / "shared"
                handles = [old["keyed"][uid] for old in all_old if old.get("keyed", {}).get(uid)]
                if handles:
                    state.restore_all(handles)
            ctx = OperatorContext(label, index, p, metrics, config.max_parallelism, state, config.raw, config.clock)
            self._register(label, metrics)
            channels = len(channel_inputs) if pos == 0 else 1
            tasks.append(Task(operator, channels, ctx))
        capacity = CHANNEL_CAPACITY * max(len(channel_inputs), 1)
        # a subtask new after rescaling has no snapshot of its own, but its keyed state was restored:
        # an empty snapshot still makes its operators rebuild their timers from that state
        restored = own if own is not None else ({} if metadata is not None else None)
        return Subtask(chain, index, tasks, reader, channel_inputs, coordinator, pool, on_failure, stop,
                       restored, capacity, source_metrics, config.clock)

    def _register(self, label: str, metrics: Metrics) -> None:
        self.subtask_metrics.setdefault(label, []).append(metrics)

    def _make_operator(self, node: PhysicalNode, uid: str, index: int, parallelism: int,
                       metadata: dict[str, Any] | None) -> Operator:
        if node.sink is not None:
            root = self.config.checkpoint_dir
            journal = CommitJournal(root, uid, index, self.remote_root) if root is not None else None
            return SinkOperator(create_writer(node.sink, self.collect, index, parallelism, self.config.raw,
                                              self.config.clock), journal,
                                metadata["checkpoint_id"] if metadata else None)
        return build_operator(node)

    def _wire(self, subtasks: dict[str, list[Subtask]], stop: threading.Event) -> None:
        by_uid = {c.uid: c for c in self.chains}
        for chain in self.chains:
            for consumer_uid, pos in chain.consumers:
                consumer = by_uid[consumer_uid]
                ci = consumer.inputs[pos]
                base = sum(x.channels(by_uid[x.upstream].parallelism) for x in consumer.inputs[:pos])
                targets = [st.inbound for st in subtasks[consumer_uid]]
                for st in subtasks[chain.uid]:
                    st.outputs.append(OutputGate(ci.mode, ci.keys, targets, base + ci.channel(st.index), st.index,
                                                 self.config.max_parallelism, stop, self.config.clock))

    def summed_metrics(self) -> dict[str, Metrics]:
        out: dict[str, Metrics] = {}
        for label, ms in self.subtask_metrics.items():
            total = Metrics()
            for m in ms:
                total.records_in += m.records_in
                total.records_out += m.records_out
                total.late_records_dropped += m.late_records_dropped
                for k, v in m.extra.items():
                    total.extra[k] = total.extra.get(k, 0) + v
                total.commits.extend(m.commits)
            out[label] = total
        return out
