"""Where checkpoints and savepoints live on disk, and how they are verified before a restore.

Layout of a checkpoint root::

    chk-<n>/<operator uid>-<subtask>/...   state files of one subtask, written asynchronously
    chk-<n>/_metadata                      written last, atomically: only then is chk-<n> complete
    shared/<backend id>/                   files shared by incremental checkpoints (rocksdb SSTs)
    finished/<uid>-<subtask>-<id>/         the final snapshot of a subtask that ended (every later
                                           checkpoint refers to it)
    commits/<sink uid>/<subtask>-<n>       what a sink committed when checkpoint n completed (the
                                           journal that lets recovery fall back to an older checkpoint)

Nothing here is pickle: ``_metadata`` is JSON with a format name, a version
and a sha256 of its own content; operator state, source positions and sink
committables are msgpack (the state codec, data only); keyed state is Arrow
IPC or RocksDB files.  Every file a checkpoint needs is listed in its
metadata with its size and sha256, by a path relative to the checkpoint's
own directory, so a checkpoint root or a savepoint (self-contained: it
copies in what lies outside it) can be moved and restored anywhere, and a
truncated or corrupted file is found before anything runs.  A directory
without ``_metadata`` is an incomplete checkpoint and is never restored from.

A checkpoint root or savepoint may be a URI of an object store (``s3://``,
``gs://``, ``abfs://``, ``hdfs://``, through :mod:`sqlstream.runtime.fs`).  Then
subtasks write into a local working copy of the root (as Flink's RocksDB
backend writes locally and uploads), and publishing a checkpoint uploads the
files its metadata lists that the store does not hold yet, then ``_metadata``
last: a checkpoint on the store is complete exactly when its ``_metadata``
object exists, as on a disk.  Pruning and the commit journal are mirrored to
the store; a restore from a URI downloads the complete checkpoints (or the
savepoint) and the journal into the local copy and verifies them there, with
the same checksums and fallback as on a disk.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import shutil
import tempfile
import threading
from collections import OrderedDict
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow.fs as pafs

from sqlstream.core.errors import SqlStreamError
from sqlstream.runtime.fs import Location, StorageError, is_remote, resolve
from sqlstream.runtime.state.codec import StateCodecError, decode, encode

METADATA = "_metadata"
FORMAT = "sqlstream-checkpoint"
VERSION = 1
STATE_FILE = "operator-state.msgpack"  # a subtask's operator state and source position
SHARED = "shared"
FINISHED = "finished"
COMMITS = "commits"
_CHK = re.compile(r"^chk-(\d+)$")
_FILE_TAG = "$file"

log = logging.getLogger("sqlstream.checkpoint")


class CheckpointError(SqlStreamError):
    """A checkpoint or savepoint is missing, incomplete or does not fit the job."""


class CorruptCheckpointError(CheckpointError):
    """A checkpoint's metadata or one of its files is unreadable, truncated or changed."""


class CheckpointWriteError(CheckpointError):
    """A running job could not put a checkpoint's files or its commit journal on the store: a
    failure of the job the restart strategy handles (a restore from the last completed
    checkpoint), as Flink fails over when a checkpoint cannot be written, not a fault in the job."""


# ------------------------------------------------------------------ file digests

_digests: OrderedDict[tuple[str, int, int, int], str] = OrderedDict()
_digests_lock = threading.Lock()
_DIGESTS_KEPT = 100_000  # most recently used: the files of the retained checkpoints, and then some


def file_digest(path: Path, cached: bool = True) -> tuple[int, str]:
    """(size, sha256) of a file; remembered per (path, size, mtime, inode), so the shared SSTs
    every incremental checkpoint lists are hashed once, not at every checkpoint.  Verification
    before a restore reads every byte again (``cached=False``)."""
    st = os.stat(path)
    key = (str(path), st.st_size, st.st_mtime_ns, st.st_ino)
    with _digests_lock:
        known = _digests.get(key) if cached else None
        if known is not None:
            _digests.move_to_end(key)
    if known is not None:
        return st.st_size, known
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    digest = h.hexdigest()
    with _digests_lock:
        _digests[key] = digest
        if len(_digests) > _DIGESTS_KEPT:
            _digests.popitem(last=False)
    return st.st_size, digest


def files_of(tree: Any) -> Iterator[Path]:
    """Every file a snapshot handle refers to: its Path leaves."""
    if isinstance(tree, Path):
        yield tree
    elif isinstance(tree, dict):
        for v in tree.values():
            yield from files_of(v)
    elif isinstance(tree, list | tuple):
        for v in tree:
            yield from files_of(v)


def map_paths(tree: Any, fn: Any) -> Any:
    """``tree`` (a snapshot handle) with each Path leaf replaced by ``fn(leaf)``."""
    if isinstance(tree, Path):
        return fn(tree)
    if isinstance(tree, dict):
        return {k: map_paths(v, fn) for k, v in tree.items()}
    if isinstance(tree, list | tuple):
        return [map_paths(v, fn) for v in tree]
    return tree


# ------------------------------------------------------------------ subtask state files

def write_subtask_state(directory: Path, operators: dict[str, Any], source: Any) -> Path:
    """Operator state and the source position of one subtask, in the state codec."""
    path = directory / STATE_FILE
    path.write_bytes(encode({"operators": operators, "source": source}))
    return path


# ------------------------------------------------------------------ metadata

def _canonical_json(doc: dict[str, Any]) -> str:
    return json.dumps(doc, sort_keys=True, separators=(",", ":"), allow_nan=False)


def write_metadata(directory: Path, metadata: dict[str, Any], self_contained: bool = False,
                   written: Mapping[Path, tuple[int, str]] | None = None) -> None:
    """Publish ``metadata`` (subtask snapshots whose files are absolute Paths) as ``_metadata``.

    Paths become relative to ``directory``; ``self_contained`` (savepoints)
    first copies every file outside ``directory`` into ``directory/external``.
    ``written`` gives (size, sha256) of files that other machines wrote straight to the store
    (Ray actors): they are not here to be hashed.
    The file is written under a temporary name and renamed: it appears whole or not at all.
    """
    written = written or {}
    directory = directory.resolve()
    subtasks = metadata["subtasks"]
    if self_contained:
        external = directory / "external"

        def bring_in(path: Path) -> Path:
            if path.resolve().is_relative_to(directory):
                return path
            # one folder per content, the name kept: a RocksDB file's name is part of the db
            target = external / file_digest(path)[1][:16] / path.name
            if not target.exists():
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(path, target)
            return target

        subtasks = {k: map_paths(v, bring_in) for k, v in subtasks.items()}
    files: dict[str, dict[str, Any]] = {}

    def relative(path: Path) -> dict[str, str]:
        rel = os.path.relpath(path.resolve(), directory)
        if rel not in files:
            size, digest = written[path] if path in written else file_digest(path)
            files[rel] = {"size": size, "sha256": digest}
        return {_FILE_TAG: rel}

    doc = {k: v for k, v in metadata.items() if k != "subtasks"}
    doc.update(
        format=FORMAT,
        version=VERSION,
        subtasks=[{"chain": uid, "index": index, "snapshot": map_paths(snap, relative)}
                  for (uid, index), snap in sorted(subtasks.items())],
    )
    doc["files"] = files
    body = _canonical_json(doc)
    doc["checksum"] = hashlib.sha256(body.encode()).hexdigest()
    tmp = directory / f".{METADATA}.tmp"
    with tmp.open("w", encoding="utf-8") as f:
        f.write(_canonical_json(doc))
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, directory / METADATA)


def _parse(directory: Path) -> dict[str, Any]:
    """The JSON of ``_metadata`` with its own checksum checked; nothing in it is executed."""
    path = directory / METADATA
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise CorruptCheckpointError(f"cannot read '{path}': {e.strerror}") from None
    try:
        doc = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise CorruptCheckpointError(
            f"'{path}' is not sqlstream checkpoint metadata (not JSON: a foreign, truncated or corrupted file); "
            "nothing from it was loaded"
        ) from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise CheckpointError(f"'{path}' is not sqlstream checkpoint metadata (format is not '{FORMAT}')")
    version = doc.get("version")
    if not isinstance(version, int) or version > VERSION:
        raise CheckpointError(f"'{path}' has format version {version!r}; this sqlstream reads versions up to {VERSION}")
    checksum = doc.pop("checksum", None)
    if checksum != hashlib.sha256(_canonical_json(doc).encode()).hexdigest():
        raise CorruptCheckpointError(f"'{path}' does not match its checksum: it was changed or corrupted")
    return doc


def _verify(directory: Path, doc: dict[str, Any]) -> None:
    """Every listed file exists with its size and sha256."""
    for rel, info in doc["files"].items():
        path = directory / rel
        if not path.is_file():
            raise CorruptCheckpointError(f"checkpoint '{directory}' misses its file '{rel}'")
        size = path.stat().st_size
        if size != info["size"]:
            raise CorruptCheckpointError(
                f"checkpoint '{directory}': file '{rel}' has {size} bytes, {info['size']} were written (truncated?)"
            )
        if file_digest(path, cached=False)[1] != info["sha256"]:
            raise CorruptCheckpointError(f"checkpoint '{directory}': file '{rel}' does not match its sha256 (corrupted)")


def _resolve(doc: dict[str, Any], directory: Path) -> dict[str, Any]:
    """The in-memory metadata: absolute Paths, subtasks by (chain uid, index), their state files read."""
    def absolute(tree: Any) -> Any:
        if isinstance(tree, dict):
            if set(tree) == {_FILE_TAG}:
                return Path(os.path.normpath(directory / tree[_FILE_TAG]))
            return {k: absolute(v) for k, v in tree.items()}
        if isinstance(tree, list):
            return [absolute(v) for v in tree]
        return tree

    metadata = {k: v for k, v in doc.items() if k not in ("subtasks", "files")}
    subtasks: dict[tuple[str, int], Any] = {}
    for entry in doc["subtasks"]:
        snap = absolute(entry["snapshot"])
        state = snap.pop("state", None)
        if state is not None:
            try:
                snap.update(decode(state.read_bytes()))
            except StateCodecError as e:
                raise CorruptCheckpointError(f"checkpoint '{directory}': '{state.name}' is not readable: {e}") from None
        subtasks[(entry["chain"], entry["index"])] = snap
    metadata["subtasks"] = subtasks
    return metadata


def read_checkpoint(directory: Path) -> dict[str, Any]:
    """The verified metadata of one checkpoint or savepoint directory; raises before anything is used."""
    doc = _parse(directory)
    _verify(directory, doc)
    return _resolve(doc, directory)


def referenced_files(directory: Path) -> set[Path]:
    """The files a completed checkpoint's metadata lists (empty if it cannot be read)."""
    try:
        doc = _parse(directory)
    except CheckpointError:
        return set()
    return {Path(os.path.normpath(directory / rel)) for rel in doc["files"]}


@dataclass
class RestorePoint:
    """What a restore reads: the chosen checkpoint, and what was passed over on the way to it."""

    path: Path
    metadata: dict[str, Any]
    root: Path | None = None  # the checkpoint root it was chosen from (None: a directory was named)
    newest: int | None = None  # the newest checkpoint id under root that claimed to be complete
    skipped: list[str] = field(default_factory=list)  # one message per checkpoint that failed verification

    @property
    def checkpoint_id(self) -> int:
        return int(self.metadata["checkpoint_id"])


def restore_point(path: str | Path, settings: Mapping[str, str] | None = None) -> RestorePoint:
    """A named checkpoint/savepoint directory (verified), or under a checkpoint root the newest
    complete checkpoint that verifies: a corrupt or truncated newer one is logged and skipped.
    A URI of a store is downloaded into its local copy first (``settings``: the s3.* keys)."""
    if is_remote(path):
        path = download(resolve(path, settings))
    p = Path(path)
    if not p.exists():
        raise CheckpointError(f"checkpoint or savepoint '{path}' does not exist")
    if (p / METADATA).exists():
        return RestorePoint(p, read_checkpoint(p))
    ids = sorted(completed_ids(p), reverse=True)
    if not ids:
        raise CheckpointError(f"'{path}' holds no completed checkpoint (no {METADATA} file)")
    skipped = []
    for n in ids:
        directory = p / f"chk-{n}"
        try:
            return RestorePoint(directory, read_checkpoint(directory), p, ids[0], skipped)
        except CheckpointError as e:
            message = f"checkpoint {n} skipped: {e}"
            log.warning(message)
            skipped.append(message)
    raise CheckpointError(f"no checkpoint under '{path}' can be restored: " + "; ".join(skipped))


def load(path: str | Path, settings: Mapping[str, str] | None = None) -> tuple[Path, dict[str, Any]]:
    """The (directory, metadata) restore_point chooses."""
    point = restore_point(path, settings)
    return point.path, point.metadata


def completed_ids(root: Path) -> list[int]:
    return checkpoint_ids(root, completed_only=True)


def checkpoint_ids(root: Path, completed_only: bool = False) -> list[int]:
    """The ids of the chk-N directories under ``root`` (complete ones only, if asked)."""
    if not root.is_dir():
        return []
    out = []
    for d in root.iterdir():
        m = _CHK.match(d.name)
        if m and (not completed_only or (d / METADATA).exists()):
            out.append(int(m.group(1)))
    return out


# ------------------------------------------------------------------ checkpoint roots on a store

def local_copy(uri: str) -> Path:
    """The local working copy of a checkpoint root or savepoint on a store: one per URI, so a
    restore from the job's own checkpoint root lands in the directory its storage works in."""
    digest = hashlib.sha256(uri.rstrip("/").encode()).hexdigest()[:16]
    return Path(tempfile.gettempdir()) / "sqlstream-checkpoints" / digest


def _fetch_checkpoint(remote: Location, local: Path) -> None:
    """Download one checkpoint or savepoint directory: ``_metadata`` and the files it lists (a
    file that cannot be read is left out; verification then skips the checkpoint)."""
    local.mkdir(parents=True, exist_ok=True)
    remote.child(METADATA).download(local / METADATA)
    try:
        doc = _parse(local)
    except CheckpointError:
        return
    for rel in doc["files"]:
        target = Path(os.path.normpath(local / rel))
        if target.exists():  # a shared file another checkpoint listed too
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        source = _remote_child(remote, rel)
        try:
            source.download(target)
        except StorageError as e:
            target.unlink(missing_ok=True)
            log.warning("checkpoint file %s not downloaded: %s", source.where(), e)


def _remote_child(remote: Location, rel: str) -> Location:
    """``remote`` joined with a relative path that may climb out of it (``../shared/x``)."""
    parts = remote.path.rstrip("/").split("/")
    uri_parts = remote.uri.rstrip("/").split("/")
    for part in rel.replace(os.sep, "/").split("/"):
        if part == "..":
            parts.pop()
            uri_parts.pop()
        elif part not in ("", "."):
            parts.append(part)
            uri_parts.append(part)
    return Location(remote.fs, "/".join(parts), "/".join(uri_parts), remote.endpoint)


def download(remote: Location) -> Path:
    """The local copy of a checkpoint root (its complete checkpoints and commit journal) or of one
    checkpoint/savepoint directory on a store, fetched afresh; raises if the store has neither."""
    if remote.child(METADATA).exists():
        # a checkpoint of a root lists files of its root (../shared): the root's layout is kept
        parent = remote.uri.rstrip("/").rsplit("/", 1)[0]
        local = local_copy(parent) / remote.name
        shutil.rmtree(local, ignore_errors=True)
        _fetch_checkpoint(remote, local)
        return local
    ids = remote_checkpoint_ids(remote, completed_only=True)
    if not ids and not remote.is_dir():
        raise CheckpointError(f"checkpoint or savepoint {remote.where()} does not exist")
    local = local_copy(remote.uri)
    shutil.rmtree(local, ignore_errors=True)
    local.mkdir(parents=True)
    for n in ids:
        _fetch_checkpoint(remote.child(f"chk-{n}"), local / f"chk-{n}")
    for entry in remote.child(COMMITS).list():
        if entry.type == pafs.FileType.File:
            rel = entry.path.removeprefix(remote.child(COMMITS).path + "/")
            target = local / COMMITS / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            Location(remote.fs, entry.path, f"{remote.uri}/{COMMITS}/{rel}", remote.endpoint).download(target)
    return local


def remote_checkpoint_ids(remote: Location, completed_only: bool = False) -> list[int]:
    """The ids of the chk-N directories of a checkpoint root on a store (complete ones only, if asked)."""
    out = []
    for entry in remote.list(recursive=False):
        m = _CHK.match(entry.path.rstrip("/").rsplit("/", 1)[-1])
        if m and (not completed_only or remote.child(m.group(0), METADATA).exists()):
            out.append(int(m.group(1)))
    return out


def upload_tree(local: Path, remote: Location) -> None:
    """Copy a local directory (a savepoint) to a store, ``_metadata`` last: it appears complete."""
    files = sorted(f for f in local.rglob("*") if f.is_file() and f.name != METADATA)
    for f in [*files, local / METADATA]:
        remote.child(*f.relative_to(local).parts).upload(f)


# ------------------------------------------------------------------ the checkpoint root

class CheckpointStorage:
    """A checkpoint root: local, or (``remote``) the local working copy of one on a store."""

    def __init__(self, root: Path, retained: int = 1, remote: Location | None = None) -> None:
        self.root = Path(root).resolve()
        self.retained = max(1, retained)
        self.remote = remote
        if remote is not None:
            # the store is the truth: what an earlier process left in the local copy is not
            shutil.rmtree(self.root, ignore_errors=True)
        self.root.mkdir(parents=True, exist_ok=True)
        self.lock = threading.Lock()
        self._uploaded: set[str] = set()  # keys under the remote root known to be there

    def known_ids(self) -> list[int]:
        """The ids of every chk-N directory, complete or not, locally and on the store."""
        ids = set(checkpoint_ids(self.root))
        if self.remote is not None:
            ids |= set(remote_checkpoint_ids(self.remote))
        return sorted(ids)

    def _key(self, path: Path) -> str:
        return "/".join(path.resolve().relative_to(self.root).parts)

    def adopt_completed(self) -> None:
        """Fetch the ``_metadata`` of the checkpoints completed on the store (by an earlier attempt,
        elsewhere), so that pruning knows them and what they list: a coordinator on a Ray node
        works in a fresh local copy that holds none of their files."""
        assert self.remote is not None
        for n in remote_checkpoint_ids(self.remote, completed_only=True):
            local = self.checkpoint_dir(n)
            local.mkdir(parents=True, exist_ok=True)
            self.remote.child(f"chk-{n}", METADATA).download(local / METADATA)

    def _upload(self, directory: Path, written: Mapping[Path, Any]) -> None:
        """Put a published checkpoint on the store: its files the store lacks (``written``: put there
        by their writers), then ``_metadata``."""
        assert self.remote is not None
        for rel in _parse(directory)["files"]:
            path = Path(os.path.normpath(directory / rel))
            if not path.resolve().is_relative_to(self.root):
                raise CheckpointError(f"checkpoint file '{path}' lies outside the checkpoint root '{self.root}'")
            key = self._key(path)
            if key not in self._uploaded and path not in written:
                self.remote.child(*key.split("/")).upload(path)
                self._uploaded.add(key)
        self.remote.child(self._key(directory), METADATA).upload(directory / METADATA)

    def _remove(self, path: Path, tree: bool = False) -> None:
        """Delete a file (or ``tree``) of the root, and its copy on the store."""
        if tree:
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)
        if self.remote is not None:
            key = self._key(path)
            target = self.remote.child(*key.split("/"))
            if tree:
                target.delete_dir()
                self._uploaded = {k for k in self._uploaded if not k.startswith(key + "/")}
            else:
                target.delete()
                self._uploaded.discard(key)

    def checkpoint_dir(self, checkpoint_id: int) -> Path:
        return self.root / f"chk-{checkpoint_id}"

    def subtask_dir(self, checkpoint_id: int, uid: str, subtask: int) -> Path:
        d = self.checkpoint_dir(checkpoint_id) / f"{uid}-{subtask}"
        d.mkdir(parents=True, exist_ok=True)
        return d

    def finished_dir(self, uid: str, subtask: int) -> Path:
        """A fresh directory for a subtask's final snapshot: one of an earlier attempt may still be
        referenced by a retained checkpoint, so it is never written over."""
        d = self.root / FINISHED / f"{uid}-{subtask}-{os.urandom(6).hex()}"
        d.mkdir(parents=True)
        return d

    def complete(self, checkpoint_id: int, metadata: dict[str, Any],
                 written: Mapping[Path, tuple[int, str]] | None = None) -> Path:
        """Publish checkpoint ``checkpoint_id`` (atomic rename of its metadata), then prune old ones.

        ``written``: (size, sha256) of the files their writers put on the store themselves.
        """
        directory = self.checkpoint_dir(checkpoint_id)
        directory.mkdir(parents=True, exist_ok=True)
        write_metadata(directory, metadata, written=written)
        if self.remote is not None:
            try:
                self._upload(directory, written or {})
            except StorageError as e:
                raise CheckpointWriteError(f"checkpoint {checkpoint_id} cannot be written to the store: {e}") from None
        self._prune()
        return directory

    def discard(self, checkpoint_id: int) -> None:
        """Remove an aborted or abandoned checkpoint's directory (never a completed one)."""
        directory = self.checkpoint_dir(checkpoint_id)
        if not (directory / METADATA).exists():
            shutil.rmtree(directory, ignore_errors=True)

    def _removable(self, path: Path) -> bool:
        """Only files the checkpoints own (shared and finished ones) are ever deleted by pruning."""
        return path.is_relative_to(self.root / SHARED) or path.is_relative_to(self.root / FINISHED)

    def _prune(self) -> None:
        with self.lock:
            completed = sorted(completed_ids(self.root))
            kept = completed[-self.retained:]
            dropped = completed[: -self.retained]
            if dropped:
                keep: set[Path] = set()
                for n in kept:
                    keep |= referenced_files(self.checkpoint_dir(n))
                for old in dropped:
                    # files of a dropped checkpoint that no retained one lists: an SST gone from the
                    # db by the newest checkpoint never returns to it, so nothing in flight needs it
                    for path in referenced_files(self.checkpoint_dir(old)) - keep:
                        if self._removable(path):
                            self._remove(path)
                    self._remove(self.checkpoint_dir(old), tree=True)
            newest = completed[-1] if completed else None
            # incomplete checkpoints older than the newest complete one will never complete
            for d in self.root.iterdir():
                m = _CHK.match(d.name)
                if m and newest is not None and int(m.group(1)) < newest and not (d / METADATA).exists():
                    shutil.rmtree(d, ignore_errors=True)
            if kept:
                CommitJournal.prune(self.root, kept[0], self.remote)

    def remove_checkpoints_after(self, checkpoint_id: int) -> None:
        """Recovery fell back to ``checkpoint_id``: newer ones failed verification and never will pass."""
        with self.lock:
            for n in completed_ids(self.root):
                if n > checkpoint_id:
                    self._remove(self.checkpoint_dir(n), tree=True)

    def cleanup(self) -> None:
        """The job (or an attempt) ended, nothing is in flight: remove every checkpoint directory
        without metadata, every shared or finished file no retained checkpoint lists, and empty folders."""
        with self.lock:
            keep: set[Path] = set()
            for d in list(self.root.iterdir()):
                if _CHK.match(d.name):
                    if (d / METADATA).exists():
                        keep |= referenced_files(d)
                    else:
                        shutil.rmtree(d, ignore_errors=True)
            for sub in (SHARED, FINISHED, COMMITS):
                base = self.root / sub
                if not base.is_dir():
                    continue
                for f in sorted(base.rglob("*"), reverse=True):  # files before their directories
                    if f.is_file() and f not in keep and sub != COMMITS:
                        f.unlink(missing_ok=True)
                    elif f.is_dir() and not any(f.iterdir()):
                        f.rmdir()
            if self.remote is not None:
                # checkpoints a killed process left half uploaded (no _metadata) will never complete;
                # the attempt is over, so a store that fails now is reported, not raised over its end
                try:
                    complete = set(remote_checkpoint_ids(self.remote, completed_only=True))
                    for n in set(remote_checkpoint_ids(self.remote)) - complete:
                        self.remote.child(f"chk-{n}").delete_dir()
                except StorageError as e:
                    log.warning("incomplete checkpoints on the store not removed: %s", e)


# ------------------------------------------------------------------ the sinks' commit journal

class CommitJournal:
    """What one sink subtask committed at each completed checkpoint, written before the commit.

    Recovery that falls back past a checkpoint (the newer one failed
    verification) reads it to undo the commits of rows the restored job will
    write again: each entry names the checkpoint whose completion committed
    it and, per committable, the checkpoint that staged it.
    """

    def __init__(self, root: Path, uid: str, subtask: int, remote: Location | None = None) -> None:
        self.directory = Path(root) / COMMITS / uid
        self.subtask = subtask
        self.remote = remote.child(COMMITS, uid) if remote is not None else None

    def record(self, notified: int, committables: dict[int, Any]) -> None:
        """Durably note that ``committables`` (by the checkpoint that staged them) are committed
        as of checkpoint ``notified``; a restore committing them again adds to the same entry."""
        self.directory.mkdir(parents=True, exist_ok=True)
        path = self.directory / f"{self.subtask}-{notified}"
        if path.exists():
            committables = {**decode(path.read_bytes())["committables"], **committables}
        tmp = path.with_name(f".{path.name}.tmp")
        with tmp.open("wb") as f:
            f.write(encode({"notified": notified, "committables": committables}))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        if self.remote is not None:  # durable on the store before the commit it announces
            try:
                self.remote.child(path.name).upload(path)
            except StorageError as e:
                raise CheckpointWriteError(f"the commit journal cannot be written to the store: {e}") from None

    @staticmethod
    def forget(root: Path, entries: list[Path], remote: Location | None = None) -> None:
        """Drop journal entries (their commits were undone), here and on the store."""
        for entry in entries:
            entry.unlink(missing_ok=True)
            if remote is not None:
                remote.child(*entry.relative_to(Path(root)).parts).delete()

    @staticmethod
    def committed_after(root: Path, uid: str, checkpoint_id: int,
                        restored: set[tuple[int, int]]) -> tuple[list[Any], list[Path]]:
        """(what was committed after checkpoint ``checkpoint_id`` and is not among its own
        ``restored`` (subtask, staged-by) committables, which its restore commits again; the entries)."""
        directory = Path(root) / COMMITS / uid
        out: list[Any] = []
        entries: list[Path] = []
        for path in sorted(directory.iterdir()) if directory.is_dir() else ():
            if path.name.startswith("."):
                continue
            subtask, notified = (int(x) for x in path.name.rsplit("-", 1))
            if notified <= checkpoint_id:
                continue
            entries.append(path)
            record = decode(path.read_bytes())
            out += [c for staged, c in sorted(record["committables"].items()) if (subtask, staged) not in restored]
        return out, entries

    @staticmethod
    def sinks(root: Path) -> list[str]:
        """The sink uids with journal entries under ``root``."""
        base = Path(root) / COMMITS
        return sorted(d.name for d in base.iterdir() if d.is_dir()) if base.is_dir() else []

    @staticmethod
    def prune(root: Path, oldest_retained: int, remote: Location | None = None) -> None:
        """Entries no recovery can fall back past (at or before the oldest retained checkpoint) go,
        on the store too, also those that sink subtasks on other machines (Ray actors) put there."""
        base = Path(root) / COMMITS
        for path in base.glob("*/*") if base.is_dir() else ():
            name = path.name
            if not name.startswith(".") and int(name.rsplit("-", 1)[1]) <= oldest_retained:
                CommitJournal.forget(root, [path], remote)
        if remote is not None:
            for entry in remote.child(COMMITS).list():
                name = entry.path.rsplit("/", 1)[-1]
                if (entry.type == pafs.FileType.File and not name.startswith(".")
                        and int(name.rsplit("-", 1)[1]) <= oldest_retained):
                    Location(remote.fs, entry.path, entry.path, remote.endpoint).delete()
