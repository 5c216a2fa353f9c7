"""Runs the same dataflow on a Ray cluster: one actor per subtask, the checkpoint coordinator as an actor.

Chosen by ``SET 'execution.target' = 'ray'`` (``'ray.address'`` names a
cluster; without it a local Ray is started for the job) or
``sqlstream run job.sql --target ray [--address ADDR]``.  Ray is optional
(``pip install 'sqlstream[ray]'``) and imported only here.

What runs where, and why:

* Each subtask is a :class:`SubtaskActor` hosting the very :class:`Subtask`
  the local runtime runs, built by :class:`JobExecutor`'s own builder, so
  barrier alignment, snapshots, restore with key-group rescaling and the
  two-phase-commit sinks are the same code on both targets.  The actor's
  ``push(channel, seq, element)`` method feeds the subtask's bounded inbound
  queue.
* :class:`RayOutputGate` is :class:`OutputGate` with Ray as its transport:
  one ``push.remote`` per element and at most ``MAX_IN_FLIGHT``
  unacknowledged pushes per channel.  ``push`` returns only once the element
  is in the bounded queue, so a slow consumer backpressures its producers
  exactly as the local bounded queues do.  Arrow batches above Ray's inline
  limit travel through the object store (zero-copy on the receiving side);
  slices are compacted first because pickling a slice ships its whole
  buffers.
* Actors are threaded (pushes, control messages and polls are served while
  the subtask thread runs), and Ray does not keep the order of calls on a
  threaded actor, so every push carries a per-channel sequence number and
  the receiver admits pushes in that order: a barrier can never overtake
  the rows before it.
* :class:`CoordinatorActor` hosts the :class:`CheckpointCoordinator`:
  periodic triggers, acknowledgements, the atomic ``_metadata``, completion
  notices (sinks commit) and the final checkpoint of a bounded job.
* A failed subtask or a dead actor (``ray.kill``, a lost node) fails the
  attempt; every actor is then replaced and :meth:`JobExecutor.run`'s
  restart strategy restores all of them from the newest completed
  checkpoint, as Flink's full-restart failover does.

Checkpoints and savepoints are written by the actors themselves.  A local
``state.checkpoints.dir`` must be a path every node sees (a shared mount).  A
store's URI (``s3://``, ``gs://``..., with the job's ``s3.*`` settings) needs
nothing shared: each actor works in a directory of its own node (its state
files, RocksDB's db) and puts every snapshot file on the store itself before
it acknowledges, with the file's size and sha256; the coordinator actor then
publishes ``_metadata`` (listing those digests, it reads no state file) on the
store, prunes there, and a restore downloads into each new actor, on whatever
node it runs, just the files of its own chain.  So losing a node loses nothing
a restore needs.  The nodes must be able to import sqlstream (installed
there, or through a Ray runtime environment).
"""

from __future__ import annotations

import copy
import dataclasses
import queue
import shutil
import tempfile
import threading
import time
import uuid
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

from sqlstream.core.errors import JobError, SqlStreamError
from sqlstream.core.physical import Dataflow
from sqlstream.core.status import RUNNING, CheckpointStatus, SubtaskStatus
from sqlstream.runtime.checkpoint import storage as chk_storage
from sqlstream.runtime.checkpoint.coordinator import (
    CheckpointCoordinator,
    CheckpointStats,
    SubtaskKey,
)
from sqlstream.runtime.checkpoint.storage import (
    SHARED,
    CheckpointError,
    CheckpointStorage,
    file_digest,
    files_of,
    map_paths,
)
from sqlstream.runtime.elements import Chunk, Element
from sqlstream.runtime.executor import JobConfig, JobExecutor, JobFailure, JobResult
from sqlstream.runtime.fs import Location, is_remote, resolve
from sqlstream.runtime.hashing import key_group_range
from sqlstream.runtime.operators.base import Metrics
from sqlstream.runtime.subtask import POLL_S, Cancelled, OutputGate, Subtask

MAX_IN_FLIGHT = 2  # unacknowledged pushes per channel, as CHANNEL_CAPACITY bounds the local queues
COLLECT_BUFFER = 16  # chunks a collect sink holds for the driver before it blocks (backpressure)
COLLECT_POLL_S = 0.1
EXTRA_THREADS = 8  # actor threads beyond the pushes: run, control, poll, metrics, close
METRICS_REFRESH_S = 1.0
CLOSE_TIMEOUT_S = 15.0

INSTALL_HINT = "pip install 'sqlstream[ray]' (or pip install 'ray>=2.9')"


def import_ray() -> Any:
    """The ray module, or an error that says how to install it (Ray is an optional extra)."""
    try:
        import ray
    except ImportError:
        raise SqlStreamError(f"execution.target 'ray' needs Ray, which is not installed: {INSTALL_HINT}") from None
    return ray


def node_directory(role: str) -> Path:
    """A fresh working directory on this actor's node (snapshots before upload, RocksDB's db,
    downloaded restore files): per node, as nothing in it is seen by the other nodes."""
    import ray

    node = ray.get_runtime_context().get_node_id()[:16]
    d = Path(tempfile.gettempdir()) / "sqlstream-ray" / node / f"{role}-{uuid.uuid4().hex[:12]}"
    d.mkdir(parents=True)
    return d


def _compact(element: Element) -> Element:
    """A chunk whose batch is a slice of larger buffers, copied down to its rows before sending.

    Pickling (and so Ray) serializes a sliced Arrow array with all of its
    buffers, so each hash-partitioned slice would otherwise carry the whole
    batch to every consumer.
    """
    if not isinstance(element, Chunk):
        return element
    batch, kinds = element.batch, element.kinds
    slack = 4096
    if batch.get_total_buffer_size() > 2 * batch.nbytes + slack:
        batch = pa.concat_batches([batch])
    if kinds is not None and kinds.get_total_buffer_size() > 2 * kinds.nbytes + slack:
        kinds = pa.concat_arrays([kinds])
    if batch is element.batch and kinds is element.kinds:
        return element
    return Chunk(batch, kinds, element.split)


@dataclass
class RayOutputGate(OutputGate):
    """An OutputGate whose targets are the consumer's subtask actors (see the module docstring)."""

    targets: list[Any]  # actor handles of the consumer chain's subtasks, by subtask index
    _seq: list[int] = field(init=False, default_factory=list)
    _in_flight: list[deque] = field(init=False, default_factory=list)

    def __post_init__(self) -> None:
        self._seq = [0] * len(self.targets)
        self._in_flight = [deque() for _ in self.targets]

    def _put(self, target: int, element: Element) -> None:
        import ray

        pending = self._in_flight[target]
        waiting_since = time.monotonic()
        try:
            while len(pending) >= MAX_IN_FLIGHT:
                # pushes to one channel are admitted in order, so the oldest completes first
                done, _ = ray.wait([pending[0]], timeout=POLL_S)
                if done:
                    ray.get(pending.popleft())  # raises if the consumer died: this subtask fails too
                elif self.stop.is_set():
                    raise Cancelled
        finally:
            self.backpressured_s += time.monotonic() - waiting_since
        pending.append(self.targets[target].push.remote(self.channel, self._seq[target], _compact(element)))
        self._seq[target] += 1


class _CoordinatorProxy:
    """What a Subtask asks of its coordinator, forwarded to the coordinator actor.

    The calls block: an acknowledgement counts only once the coordinator has
    it, and a coordinator that died fails the subtask instead of being
    silently ignored.

    With checkpoints on a store (``remote``), a snapshot is written under the
    actor's node directory ``work`` and uploaded here, file by file, before it
    is acknowledged with its paths relative to the checkpoint root (or the
    savepoint) and each file's (size, sha256).  The local copies then go,
    except RocksDB's shared files that the db still holds: the next
    incremental checkpoint lists them again (and does not upload them again).
    """

    def __init__(self, actor: Any, config: JobConfig, remote: Location | None) -> None:
        self.actor = actor
        self.settings = config.raw
        self.remote = remote
        # Subtask._finish writes the final snapshot under storage.root (the node directory, with a store)
        self.storage = CheckpointStorage(config.checkpoint_dir, config.retained) if config.checkpoint_dir else None
        # checkpoint id -> (local base, its place on the store, the snapshot's directory under base)
        self.targets: dict[int, tuple[Path, Location, Path]] = {}
        self.uploaded: set[str] = set()  # keys of shared files put on the store (never written again)
        self.shared_held: set[Path] = set()  # local shared files the newest acknowledged snapshot lists
        self.newest_acked = 0
        self.lock = threading.Lock()

    def directory_for(self, checkpoint_id: int, uid: str, subtask: int) -> Path:
        """Where the snapshot is written: on the store's way (see the class), or a shared path."""
        import ray

        kind, where, rel = ray.get(self.actor.target_for.remote(checkpoint_id, uid, subtask))
        if kind == "store":
            root = self.remote if self.remote is not None and where == self.remote.uri else None
            if root is not None and self.storage is not None:
                base = self.storage.root
            else:  # a savepoint's local copy, removed once uploaded
                base = Path(tempfile.gettempdir()) / "sqlstream-ray" / f"savepoint-{uuid.uuid4().hex[:12]}"
            directory = base / rel
            with self.lock:
                self.targets[checkpoint_id] = (base, root or resolve(where, self.settings), directory)
        else:
            directory = Path(where)  # a shared directory: made on the coordinator's node, written from this one
        directory.mkdir(parents=True, exist_ok=True)
        return directory

    def acknowledge(self, checkpoint_id: int, key: SubtaskKey, snapshot: Any) -> None:
        import ray

        with self.lock:
            target = self.targets.pop(checkpoint_id, None)
        written: dict[str, tuple[int, str]] = {}
        if target is not None:
            base, remote, directory = target
            snapshot, written = self._upload(checkpoint_id, snapshot, base, remote)
            # on the store now: a savepoint's local copy goes whole, a checkpoint's own directory too
            shutil.rmtree(directory.parent if base == self.storage_root() else base, ignore_errors=True)
        ray.get(self.actor.acknowledge.remote(checkpoint_id, key, snapshot, written))

    def subtask_finished(self, key: SubtaskKey, snapshot: Any) -> None:
        import ray

        written: dict[str, tuple[int, str]] = {}
        if self.remote is not None and self.storage is not None:
            snapshot, written = self._upload(None, snapshot, self.storage.root, self.remote)
        ray.get(self.actor.subtask_finished.remote(key, snapshot, written))

    def storage_root(self) -> Path | None:
        return self.storage.root if self.storage is not None else None

    def _upload(self, checkpoint_id: int | None, snapshot: Any, base: Path,
                remote: Location) -> tuple[Any, dict[str, tuple[int, str]]]:
        """Put the snapshot's files on the store under ``remote`` (as they lie under ``base``);
        the snapshot with paths relative to ``base``, and (size, sha256) per relative path."""
        written: dict[str, tuple[int, str]] = {}
        shared: set[Path] = set()
        for path in files_of(snapshot):
            if not path.is_relative_to(base):
                raise CheckpointError(f"snapshot file '{path}' lies outside '{base}', what is put on {remote.where()}")
            rel = path.relative_to(base)
            key = rel.as_posix()
            is_shared = rel.parts[0] == SHARED
            if key not in written:
                written[key] = file_digest(path)  # hashed already, when the snapshot was written
                if not (is_shared and key in self.uploaded):
                    remote.child(*rel.parts).upload(path)
                if is_shared:
                    shared.add(path)
                    self.uploaded.add(key)
        for key in written:
            if not key.startswith(SHARED + "/"):
                (base / key).unlink(missing_ok=True)  # on the store now; a restore downloads it
        if checkpoint_id is not None:
            with self.lock:
                if checkpoint_id > self.newest_acked:
                    # shared files a newer snapshot no longer lists are gone from the db for good
                    for path in self.shared_held - shared:
                        path.unlink(missing_ok=True)
                    self.shared_held, self.newest_acked = shared, checkpoint_id
        return map_paths(snapshot, lambda p: p.relative_to(base)), written


class SubtaskActor:
    """One parallel instance of an operator chain, in its own Ray worker process."""

    def __init__(self, flow: Dataflow, config: JobConfig, coordinator: Any, collect: bool) -> None:
        self.stop = threading.Event()
        self.failure: BaseException | None = None
        self.coordinator = coordinator
        self.collected: queue.Queue[Chunk] = queue.Queue(COLLECT_BUFFER)
        # checkpoints on a store: this node's own working copy of the root (see _CoordinatorProxy)
        self.work = node_directory("subtask") if config.checkpoint_uri else None
        if self.work is not None:
            config = dataclasses.replace(config, checkpoint_dir=self.work)
        # the local executor is the one place that knows how to build a subtask (readers, operators,
        # restored keyed state); here it builds just this actor's one.  With a store it checks that
        # this node reaches the store, and its sinks write their commit journal there.
        self.builder = JobExecutor(flow, config, self._collect if collect else None)
        if self.work is not None and self.builder.state_dir is None:
            self.builder.state_dir = self.work / "db"  # nothing of this actor outlives it on the node
        self.pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="snapshot")
        self.subtask: Subtask | None = None
        self.turn = threading.Condition()
        self.next_seq: dict[int, int] = {}  # channel -> sequence number of the next push to admit

    def build(self, chain_uid: str, index: int, metadata: dict[str, Any] | None,
              restored_from: list[tuple[str, str]]) -> str:
        """Build the subtask (restored from ``metadata``); returns the id of this actor's node.

        ``restored_from`` pairs each local copy the driver verified a restore in with the store's
        URI it came from: the files of ``metadata`` under one are downloaded onto this node first.
        """
        import ray

        chain = next(c for c in self.builder.chains if c.uid == chain_uid)
        proxy = _CoordinatorProxy(self.coordinator, self.builder.config, self.builder.remote_root)
        if metadata is not None and restored_from:
            metadata = self._fetch(self._relevant(metadata, index, chain.parallelism), restored_from)
        self.subtask = self.builder._build_subtask(
            chain, index, proxy, self.pool, self._on_failure, self.stop, metadata)  # type: ignore[arg-type]
        return ray.get_runtime_context().get_node_id()

    def _relevant(self, metadata: dict[str, Any], index: int, parallelism: int) -> dict[str, Any]:
        """``metadata`` without the keyed state of old subtasks whose key groups this subtask does
        not own (after rescaling, only some hold any of its keys): their files are not downloaded."""
        max_p = self.builder.config.max_parallelism
        mine = key_group_range(index, parallelism, max_p)

        def overlaps(old: int, snap: dict[str, Any]) -> bool:
            theirs = key_group_range(old, snap.get("parallelism", parallelism), max_p)
            return theirs.start < mine.stop and mine.start < theirs.stop

        return {**metadata, "subtasks": {
            (uid, i): snap if i == index or overlaps(i, snap) else {**snap, "keyed": {}}
            for (uid, i), snap in metadata["subtasks"].items()}}

    def _fetch(self, metadata: dict[str, Any], restored_from: list[tuple[str, str]]) -> dict[str, Any]:
        """``metadata`` with its files downloaded from the store into this node's directory."""
        work = self.work or node_directory("restore")
        self.work = work
        stores = [(Path(local), resolve(uri, self.builder.config.raw), work / "restored" / str(i))
                  for i, (local, uri) in enumerate(restored_from)]

        def fetch(path: Path) -> Path:
            for local, remote, target_base in stores:
                if path.is_relative_to(local):
                    rel = path.relative_to(local)
                    target = target_base / rel
                    if not target.exists():
                        target.parent.mkdir(parents=True, exist_ok=True)
                        remote.child(*rel.parts).download(target)
                    return target
            return path  # a local (shared) path

        return {**metadata, "subtasks": {k: map_paths(v, fetch) for k, v in metadata["subtasks"].items()}}

    def connect(self, gates: list[tuple[str, tuple[int, ...], list[Any], int]]) -> None:
        """Add one output gate per consumer edge: (mode, keys, consumer actors, channel there)."""
        st = self._subtask()
        for mode, keys, targets, channel in gates:
            st.outputs.append(RayOutputGate(mode, keys, targets, channel, st.index,
                                            self.builder.config.max_parallelism, self.stop))

    def push(self, channel: int, seq: int, element: Element) -> None:
        """Admit one element of ``channel`` into the inbound queue, in sequence order; blocks while full."""
        inbound = self._subtask().inbound
        with self.turn:
            while self.next_seq.get(channel, 0) != seq:
                if self.stop.is_set():
                    return
                self.turn.wait(POLL_S)
        while True:
            try:
                inbound.put((channel, element), timeout=POLL_S)
                break
            except queue.Full:
                if self.stop.is_set():
                    return
        with self.turn:
            self.next_seq[channel] = seq + 1
            self.turn.notify_all()

    def control(self, message: tuple) -> None:
        """A coordinator message: ("trigger", n, savepoint) for sources, ("complete", n, final)."""
        self._subtask().control.put(message)

    def run(self) -> None:
        """Run the subtask to its end; raises what failed it.  The driver waits on this call, so a
        dead actor shows up as this call failing."""
        st = self._subtask()
        st.start()
        st.finished.wait()
        if self.failure is not None:
            raise self.failure

    def poll(self, wait_s: float) -> list[Chunk]:
        """Rows a collect sink produced (a SELECT's result), in order, for the driver's client."""
        out: list[Chunk] = []
        try:
            out.append(self.collected.get(timeout=wait_s) if wait_s > 0 else self.collected.get_nowait())
        except queue.Empty:
            return out
        while len(out) < COLLECT_BUFFER:
            try:
                out.append(self.collected.get_nowait())
            except queue.Empty:
                break
        return out

    def metrics(self) -> dict[str, Metrics]:
        return {label: Metrics(m.records_in, m.records_out, m.late_records_dropped, dict(m.extra),
                               copy.copy(m.commits))
                for label, ms in self.builder.subtask_metrics.items() for m in ms}

    def status(self) -> dict[int, SubtaskStatus]:
        """The subtask's figures by node id (Subtask.status), for the driver's JobExecutor.status()."""
        return self._subtask().status()

    def close(self, latest_completed: int | None, discard: bool) -> None:
        """Stop the subtask and release its readers, operators and state (sinks drop unstaged files).

        With ``discard``, the coordinator was sealed at ``latest_completed`` and sinks abort
        what they pre-committed for later checkpoints (JobExecutor._close).
        """
        self.stop.set()
        st = self.subtask
        if st is None:
            if self.work is not None:
                shutil.rmtree(self.work, ignore_errors=True)
            return
        if st.is_alive():
            st.join(timeout=10)
        self.pool.shutdown(wait=True)
        error = self.builder._close([st], latest_completed, discard)
        if self.work is not None:
            shutil.rmtree(self.work, ignore_errors=True)
        if error is not None:
            raise error

    def _subtask(self) -> Subtask:
        assert self.subtask is not None, "build() first"
        return self.subtask

    def _on_failure(self, e: BaseException) -> None:
        if self.failure is None:
            self.failure = e
        self.stop.set()

    def _collect(self, chunk: Chunk) -> None:
        element = _compact(chunk)
        assert isinstance(element, Chunk)
        while True:
            try:
                self.collected.put(element, timeout=POLL_S)
                return
            except queue.Full:
                if self.stop.is_set():
                    raise Cancelled from None


class CoordinatorActor:
    """The checkpoint coordinator of one attempt, in its own actor; drives the barrier protocol.

    It triggers periodic checkpoints itself rather than through
    CheckpointCoordinator's loop, to keep them away from savepoints: none is
    triggered while a savepoint is pending nor for one interval after it
    completed, and once stopped (the driver's cancel) no checkpoint is
    triggered or announced as complete.  So "savepoint, then cancel" (how the
    CLI and the job manager stop a job) commits nothing past the savepoint,
    rows that a restore from the savepoint would otherwise emit again.
    """

    def __init__(self, root: str | None, retained: int, interval_ms: int | None, keys: list[SubtaskKey],
                 job_info: dict[str, Any], first_id: int, max_concurrent: int = 1, min_pause_ms: int = 0,
                 timeout_ms: int | None = None, store: str | None = None,
                 settings: dict[str, str] | None = None) -> None:
        self.settings = settings or {}
        # checkpoints on a store (URI ``store``): published there from a working copy on this node,
        # which starts with the metadata of those completed before (pruning needs what they list)
        self.work: Path | None = None
        storage: CheckpointStorage | None = None
        if store:
            self.work = node_directory("coordinator")
            storage = CheckpointStorage(self.work, retained, resolve(store, self.settings))
            storage.adopt_completed()
        elif root:
            storage = CheckpointStorage(Path(root), retained)
        self.subtasks: dict[SubtaskKey, Any] = {}
        self.sources: list[SubtaskKey] = []
        self.coordinator = CheckpointCoordinator(storage, None, keys, self._trigger, self._notify, job_info, first_id,
                                                 max_concurrent=max_concurrent, min_pause_ms=min_pause_ms,
                                                 timeout_ms=timeout_ms)
        self.interval_s = interval_ms / 1000 if interval_ms and storage is not None else None
        self.lock = threading.Lock()
        self.finalized = False
        self.savepoints_pending = 0
        self.suspended = False  # stop-with-savepoint: no periodic checkpoint, no final commit
        self.quiet_until = 0.0  # monotonic time before which no periodic checkpoint is triggered
        self.stopped = threading.Event()

    def attach(self, subtasks: dict[SubtaskKey, Any], sources: list[SubtaskKey]) -> str:
        """The subtask actors (created after this one, since they need its handle); returns the id
        of this actor's node."""
        import ray

        self.subtasks = subtasks
        self.sources = sources
        return ray.get_runtime_context().get_node_id()

    def start(self) -> None:
        if self.interval_s is not None:
            threading.Thread(target=self._loop, name="checkpoint-trigger", daemon=True).start()

    def _loop(self) -> None:
        assert self.interval_s is not None
        while not self.stopped.wait(min(self.interval_s, 0.01)):
            self.coordinator.abort_expired()
            with self.lock:
                if self.finalized:
                    return
                quiet = self.suspended or self.savepoints_pending > 0 or time.monotonic() < self.quiet_until
            if not quiet and self.coordinator.may_trigger(self.interval_s):
                self.coordinator.trigger_checkpoint()

    def serve(self) -> None:
        """Returns when stopped; the driver waits on it, so a dead coordinator shows up as this call failing."""
        self.stopped.wait()

    def stop(self) -> None:
        self.stopped.set()

    def seal(self) -> int | None:
        """No checkpoint completes from now on; the latest completed one (CheckpointCoordinator.seal).
        The working copy on this node goes: everything published is on the store."""
        latest = self.coordinator.seal()
        if self.work is not None:
            shutil.rmtree(self.work, ignore_errors=True)
        return latest

    def suspend(self) -> None:
        """Before a stop-with-savepoint: take no more checkpoints, and no final one if the job ends meanwhile."""
        with self.lock:
            self.suspended = True

    def target_for(self, checkpoint_id: int, uid: str, subtask: int) -> tuple[str, str, str]:
        """Where a subtask writes its snapshot: ("store", URI of the checkpoint root or savepoint,
        the snapshot's path under it), or ("path", a directory every node sees, "")."""
        coordinator = self.coordinator
        pending = coordinator.pending.get(checkpoint_id)
        if pending is not None and pending.savepoint_dir is not None:
            if pending.savepoint_remote is not None:
                return "store", pending.savepoint_remote.uri, f"{uid}-{subtask}"
        elif coordinator.storage is not None and coordinator.storage.remote is not None:
            return "store", coordinator.storage.remote.uri, f"chk-{checkpoint_id}/{uid}-{subtask}"
        return "path", str(coordinator.directory_for(checkpoint_id, uid, subtask)), ""

    def acknowledge(self, checkpoint_id: int, key: SubtaskKey, snapshot: Any,
                    written: dict[str, tuple[int, str]]) -> None:
        """A subtask's snapshot; with ``written``, its files are on the store, its paths relative to
        the checkpoint root or savepoint (see _CoordinatorProxy)."""
        pending = self.coordinator.pending.get(checkpoint_id)
        base = pending.savepoint_dir if pending is not None and pending.savepoint_dir is not None else self._root()
        snapshot, files = self._absolute(snapshot, written, base)
        self.coordinator.acknowledge(checkpoint_id, key, snapshot, files)

    def subtask_finished(self, key: SubtaskKey, snapshot: Any, written: dict[str, tuple[int, str]]) -> None:
        """Record a finished subtask; once all have finished, publish the final checkpoint (sinks commit)."""
        snapshot, files = self._absolute(snapshot, written, self._root())
        self.coordinator.subtask_finished(key, snapshot, files)
        with self.lock:
            final = not self.finalized and not self.suspended and self.coordinator.all_finished()
            self.finalized = self.finalized or final
        if final:
            self.coordinator.final_checkpoint()

    def trigger(self, savepoint_dir: str | None, savepoint_uri: str | None = None) -> Path | str:
        """Take a checkpoint (or a savepoint into ``savepoint_dir``, the local copy here of
        ``savepoint_uri`` on a store, if given) now; returns its path or URI when complete."""
        with self.lock:
            self.savepoints_pending += 1
        try:
            remote = resolve(savepoint_uri, self.settings) if savepoint_uri else None
            return self.coordinator.trigger_checkpoint(Path(savepoint_dir) if savepoint_dir else None, remote).result()
        finally:
            with self.lock:
                self.savepoints_pending -= 1
                self.quiet_until = time.monotonic() + (self.interval_s or 0.0)

    def completed(self, since: int) -> list[CheckpointStats]:
        return self.coordinator.completed[since:]

    def history(self) -> tuple[CheckpointStatus, ...]:
        """The attempt's recent checkpoints, which the driver merges into the job's history."""
        return self.coordinator.history.snapshot()[0]

    def _root(self) -> Path | None:
        storage = self.coordinator.storage
        return storage.root if storage is not None else None

    @staticmethod
    def _absolute(snapshot: Any, written: dict[str, tuple[int, str]],
                  base: Path | None) -> tuple[Any, dict[Path, tuple[int, str]]]:
        """A snapshot acknowledged with paths relative to ``base`` (written to the store), as the
        coordinator lists it: under its own copy of the root or savepoint."""
        if not written or base is None:
            return snapshot, {}
        return (map_paths(snapshot, lambda p: p if p.is_absolute() else base / p),
                {base / rel: (size, digest) for rel, (size, digest) in written.items()})

    def _trigger(self, checkpoint_id: int, savepoint: bool) -> None:
        if self.stopped.is_set():
            return
        for key in self.sources:
            self.subtasks[key].control.remote(("trigger", checkpoint_id, savepoint))

    def _notify(self, checkpoint_id: int, final: bool) -> None:
        if self.stopped.is_set():
            return  # cancelled: sinks commit nothing more (a restore commits what the checkpoint staged)
        for handle in self.subtasks.values():
            handle.control.remote(("complete", checkpoint_id, final))


class _CoordinatorClient:
    """The driver's side of the coordinator actor, where JobExecutor expects a CheckpointCoordinator.

    ``completed`` is a copy refreshed by the driver, so it survives the
    coordinator actor's death (the restart loop reads it after a failure).
    """

    def __init__(self, actor: Any) -> None:
        self.actor = actor
        self.completed: list[CheckpointStats] = []

    def suspend(self) -> None:
        import ray

        # waited for: Ray may reorder calls on a threaded actor, and this must precede the savepoint
        ray.get(self.actor.suspend.remote())

    def trigger_checkpoint(self, savepoint_dir: Path | None = None, savepoint_remote: Location | None = None) -> Future:
        return self.actor.trigger.remote(str(savepoint_dir) if savepoint_dir else None,
                                         savepoint_remote.uri if savepoint_remote is not None else None).future()


class RayJobExecutor(JobExecutor):
    """A JobExecutor whose subtasks are Ray actors; the restart loop and restore checks are inherited."""

    def __init__(self, flow: Dataflow, config: JobConfig, collect: Any = None,
                 restore: str | Path | None = None, allow_non_restored_state: bool = False) -> None:
        self.ray = import_ray()
        super().__init__(flow, config, collect, restore, allow_non_restored_state)
        # the current attempt's actors, by (chain uid, subtask index)
        self.actors: dict[SubtaskKey, Any] = {}
        self._actor_metrics: dict[SubtaskKey, dict[str, Metrics]] = {}
        self._actor_status: dict[SubtaskKey, dict[int, SubtaskStatus]] = {}
        self.actor_nodes: dict[SubtaskKey, str] = {}  # the Ray node id each current actor runs on
        self.coordinator_node = ""  # and the coordinator actor's

    def cancel(self) -> None:
        """Stop the coordinator first, so no checkpoint completes (and commits) once cancel was asked."""
        super().cancel()  # first: the driver then takes the coordinator's stop for the cancel it is
        client = self.coordinator
        if isinstance(client, _CoordinatorClient):
            client.actor.stop.remote()

    def run(self) -> JobResult:
        if not self.ray.is_initialized():
            # connects to 'ray.address', or starts a local Ray; kept for the process's next Ray jobs
            # (starting a local Ray takes seconds), and ray.init's exit hook shuts it down
            self.ray.init(address=self.config.raw.get("ray.address") or None, include_dashboard=False,
                          logging_level="warning")
        return super().run()

    # ------------------------------------------------------------ one attempt
    def _attempt(self, restore: str | Path | None) -> JobResult:
        ray = self.ray
        config = self.config
        self.subtask_metrics = {}
        self._actor_metrics = {}
        self._actor_status = {}
        storage = (CheckpointStorage(config.checkpoint_dir, config.retained, self.remote_root)
                   if config.checkpoint_dir else None)
        metadata = self._prepare_restore(restore, storage)
        first_id = max(self.first_checkpoint_id, (metadata["checkpoint_id"] + 1) if metadata else 1)
        if storage is not None:
            first_id = max([first_id, *[i + 1 for i in storage.known_ids()]])  # as JobExecutor
        keys = [(c.uid, i) for c in self.chains for i in range(c.parallelism)]
        job_info = {"max_parallelism": config.max_parallelism, "chains": {c.uid: c.node_uids for c in self.chains}}
        coordinator_cls = ray.remote(CoordinatorActor)
        subtask_cls = ray.remote(SubtaskActor)
        coordinator = coordinator_cls.options(max_concurrency=2 * len(keys) + EXTRA_THREADS).remote(
            str(config.checkpoint_dir) if config.checkpoint_dir else None, config.retained,
            config.checkpoint_interval_ms, keys, job_info, first_id, config.max_concurrent_checkpoints,
            config.min_pause_ms, config.checkpoint_timeout_ms, config.checkpoint_uri, config.raw)
        client = _CoordinatorClient(coordinator)
        self.coordinator = client  # type: ignore[assignment]
        actors: dict[SubtaskKey, Any] = {}
        self.actors = actors
        by_uid = {c.uid: c for c in self.chains}
        collector: Any = None
        try:
            flow_ref, config_ref = ray.put(self.flow), ray.put(config)
            for chain in self.chains:
                sink = chain.nodes[-1].sink
                collect = sink is not None and sink.table is None
                channels = sum(ci.channels(by_uid[ci.upstream].parallelism) for ci in chain.inputs)
                for i in range(chain.parallelism):
                    actors[(chain.uid, i)] = subtask_cls.options(
                        max_concurrency=channels * MAX_IN_FLIGHT + EXTRA_THREADS,
                    ).remote(flow_ref, config_ref, coordinator, collect)
                if collect:
                    collector = actors[(chain.uid, 0)]
            restored_from = _restored_from(restore)
            nodes = self._get([actors[(uid, i)].build.remote(uid, i, _chain_metadata(metadata, uid), restored_from)
                               for uid, i in keys], "building the subtasks", build=True)
            self.actor_nodes = dict(zip(keys, nodes, strict=True))
            self.coordinator_node = self._get(
                [coordinator.attach.remote(actors, [k for k in keys if by_uid[k[0]].is_source])], "the coordinator")[0]
            self._get([actors[k].connect.remote(gates) for k, gates in self._gates(actors).items()], "wiring")
            running = {actors[k].run.remote(): k for k in keys}
            served = coordinator.serve.remote()
            self._get([coordinator.start.remote()], "the coordinator")
            self.state = RUNNING
            self.running.set()
            self._supervise(running, served, collector, client)
        finally:
            self.running.clear()
            self._teardown(coordinator, client, actors)
            if storage is not None:
                storage.cleanup()  # the actors are gone: leftovers of aborted checkpoints go
        return JobResult(self.summed_metrics(), cancelled=self.cancel_event.is_set(),
                         checkpoints=list(client.completed), checkpoint_dir=config.checkpoint_dir)

    def _supervise(self, running: dict[Any, SubtaskKey], served: Any, collector: Any,
                   client: _CoordinatorClient) -> None:
        """Wait for every subtask to finish, handing collected rows to the client; fail on any death."""
        ray = self.ray
        polled = collector.poll.remote(COLLECT_POLL_S) if collector is not None else None
        next_refresh = time.monotonic() + METRICS_REFRESH_S
        while running and not self.cancel_event.is_set():
            refs = [*running, served, *([polled] if polled is not None else [])]
            ready, _ = ray.wait(refs, num_returns=1, timeout=POLL_S)
            for ref in ready:
                if ref == polled:
                    self._deliver(self._get([ref], "the collect sink")[0])
                    polled = collector.poll.remote(COLLECT_POLL_S)
                elif ref == served:
                    self._get([ref], f"the checkpoint coordinator on node {self.coordinator_node[:12]}")
                    if self.cancel_event.is_set():
                        return  # cancel() stopped it
                    raise JobFailure(JobError("the checkpoint coordinator stopped while the job was running"))
                else:
                    key = running.pop(ref)
                    self._get([ref], f"subtask {self._name(key)} on node {self.actor_nodes.get(key, '?')[:12]}")
            if time.monotonic() >= next_refresh:
                self._refresh(client)
                next_refresh = time.monotonic() + METRICS_REFRESH_S
        if self.cancel_event.is_set() or collector is None:
            return
        if polled is not None:
            self._deliver(self._get([polled], "the collect sink")[0])
        while chunks := self._get([collector.poll.remote(0)], "the collect sink")[0]:
            self._deliver(chunks)

    def _has_completed_checkpoint(self) -> bool:
        """The coordinator actor published on a store this driver does not work in: ask the store."""
        if self.remote_root is not None:
            return bool(chk_storage.remote_checkpoint_ids(self.remote_root, completed_only=True))
        return super()._has_completed_checkpoint()

    def _name(self, key: SubtaskKey) -> str:
        """A subtask's readable name, as its thread is named locally: the chain's operators and its index."""
        chain = next(c for c in self.chains if c.uid == key[0])
        return f"{chain.name} ({key[1] + 1}/{chain.parallelism})"

    def _deliver(self, chunks: list[Chunk]) -> None:
        assert self.collect is not None
        for chunk in chunks:
            self.collect(chunk)

    def _gates(self, actors: dict[SubtaskKey, Any]) -> dict[SubtaskKey, list[tuple[str, tuple[int, ...], list[Any], int]]]:
        """Per producing subtask, its output edges, with channels numbered as JobExecutor._wire does."""
        by_uid = {c.uid: c for c in self.chains}
        gates: dict[SubtaskKey, list[tuple[str, tuple[int, ...], list[Any], int]]] = {}
        for chain in self.chains:
            for consumer_uid, pos in chain.consumers:
                consumer = by_uid[consumer_uid]
                ci = consumer.inputs[pos]
                base = sum(x.channels(by_uid[x.upstream].parallelism) for x in consumer.inputs[:pos])
                targets = [actors[(consumer_uid, j)] for j in range(consumer.parallelism)]
                for i in range(chain.parallelism):
                    gates.setdefault((chain.uid, i), []).append((ci.mode, ci.keys, targets, base + ci.channel(i)))
        return gates

    def _get(self, refs: list[Any], what: str, build: bool = False) -> list[Any]:
        """ray.get, with failures turned into what JobExecutor.run's restart strategy understands.

        An exception raised inside an actor comes back as itself (a SQL or
        connector error keeps its message); one raised while building the
        subtasks is raised as is, as the local executor does.  A dead actor
        is a JobError, which the restart strategy restarts from.
        """
        ray = self.ray
        try:
            return ray.get(refs)
        except ray.exceptions.RayTaskError as e:
            cause = e.cause if isinstance(e.cause, BaseException) else e
            if build:
                raise cause from None
            raise JobFailure(cause) from None
        except ray.exceptions.RayError as e:
            first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            raise JobFailure(JobError(f"{what}: a Ray actor was lost ({type(e).__name__}: {first})")) from None

    def _subtask_statuses(self) -> dict[SubtaskKey, dict[int, SubtaskStatus]]:
        """The actors' figures as of the last refresh (every METRICS_REFRESH_S)."""
        return dict(self._actor_status)

    def _refresh(self, client: _CoordinatorClient) -> None:
        """Copy live metrics, status and checkpoints from the actors (for status(), the result)."""
        ray = self.ray
        refs = {actor.metrics.remote(): key for key, actor in self.actors.items()}
        status_refs = {actor.status.remote(): key for key, actor in self.actors.items()}
        stats = client.actor.completed.remote(len(client.completed))
        history = client.actor.history.remote()
        ready, _ = ray.wait([*refs, *status_refs, stats, history], num_returns=2 * len(refs) + 2, timeout=5)
        for ref in ready:
            try:
                value = ray.get(ref)
            except ray.exceptions.RayError:
                continue  # a dead actor keeps its last known figures
            if ref == stats:
                client.completed.extend(value)
            elif ref == history:
                self.checkpoint_history.merge(value)
            elif ref in status_refs:
                self._actor_status[status_refs[ref]] = value
            else:
                self._actor_metrics[refs[ref]] = value
        merged: dict[str, list[Metrics]] = {}
        for per_label in self._actor_metrics.values():
            for label, m in per_label.items():
                merged.setdefault(label, []).append(m)
        self.subtask_metrics = merged

    def _teardown(self, coordinator: Any, client: _CoordinatorClient, actors: dict[SubtaskKey, Any]) -> None:
        """Final figures, then stop triggers, close every subtask (within a timeout) and kill the actors."""
        ray = self.ray
        self._refresh(client)
        coordinator.stop.remote()
        try:
            latest, discard = ray.get(coordinator.seal.remote(), timeout=CLOSE_TIMEOUT_S), True
        except ray.exceptions.RayError:
            latest, discard = None, False  # the coordinator is gone: what completed is unknown, abort nothing
        closing = [actor.close.remote(latest, discard) for actor in actors.values()]
        if closing:
            ray.wait(closing, num_returns=len(closing), timeout=CLOSE_TIMEOUT_S)
        for actor in [*actors.values(), coordinator]:
            ray.kill(actor)


def _restored_from(restore: str | Path | None) -> list[tuple[str, str]]:
    """(local copy, URI) pairs a restore from a store was downloaded into by the driver (see
    storage.download: a checkpoint root or savepoint into its own copy, one checkpoint of a root
    into the root's), for the actors to download the same files on their nodes."""
    if restore is None or not is_remote(restore):
        return []
    uri = str(restore).rstrip("/")
    parent = uri.rsplit("/", 1)[0]
    return [(str(chk_storage.local_copy(uri)), uri), (str(chk_storage.local_copy(parent)), parent)]


def _chain_metadata(metadata: dict[str, Any] | None, uid: str) -> dict[str, Any] | None:
    """The part of a checkpoint's metadata one chain's subtasks restore from (their own chain's snapshots)."""
    if metadata is None:
        return None
    return {**metadata, "subtasks": {k: v for k, v in metadata["subtasks"].items() if k[0] == uid}}
