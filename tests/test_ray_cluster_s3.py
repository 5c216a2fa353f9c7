"""Ray scale-out with checkpoints on S3: a local multi-node Ray cluster (``ray.cluster_utils.Cluster``)
whose actors write their snapshots to a real S3 server (moto's, tests/s3_server.py).

The head node has no CPU, so every actor runs on one of the two worker nodes, each
with a temporary directory of its own (as machines have their own disks); each actor
works in a directory there and puts its snapshot files on the store itself, and the
coordinator actor publishes the metadata there.  Removing the node of the coordinator
actor (and of the subtask actors Ray placed there), and deleting its disk, fails the
attempt: the job restores from the store on the remaining node and the committed
output equals the failure-free answer (exactly once).  A savepoint taken on the cluster to S3
restores at another parallelism.

The storage test at the top needs no Ray: it pins the part of the protocol that lets
a coordinator publish files it never saw (their digests travel with the acknowledgement).
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from sqlstream.frontend.session import Session
from sqlstream.runtime.checkpoint import storage as chk_storage
from sqlstream.runtime.checkpoint.storage import (
    CheckpointStorage,
    CorruptCheckpointError,
    file_digest,
)
from sqlstream.runtime.executor import JobConfig
from sqlstream.runtime.fs import resolve
from sqlstream.runtime.ray_executor import CoordinatorActor, _CoordinatorProxy
from tests.conftest import rows
from tests.fault_harness import ROWS, committed, expected_rows, file_job_script
from tests.test_ray import RAY, Background, wait_for

if TYPE_CHECKING:
    from tests.s3_server import S3Server

pytest_plugins = ("tests.s3_server",)

RESTARTS = """
SET 'restart-strategy.type' = 'fixed-delay';
SET 'restart-strategy.fixed-delay.attempts' = '3';
SET 'restart-strategy.fixed-delay.delay' = '200 ms';
"""


def _metadata_keys(server: S3Server, bucket: str, prefix: str) -> list[str]:
    return [k for k in server.keys(bucket, prefix) if k.endswith("/_metadata")]


def test_a_checkpoint_lists_files_its_writers_put_on_the_store(s3_server: S3Server, bucket: str,
                                                                 tmp_path: Path) -> None:
    """The coordinator's copy of the root holds no state file: the digests the writer sent are
    listed, only ``_metadata`` is uploaded, and a restore from the store verifies the file."""
    remote = resolve(f"s3://{bucket}/chk", s3_server.settings)
    writer_dir = tmp_path / "writer"
    writer_dir.mkdir()
    state = writer_dir / "state.bin"
    state.write_bytes(b"keyed state of one subtask")
    remote.child("chk-1", "op-0", "state.bin").upload(state)  # what the subtask's actor does
    storage = CheckpointStorage(tmp_path / "coordinator", 1, remote)
    listed = storage.root / "chk-1" / "op-0" / "state.bin"
    assert not listed.exists()
    storage.complete(1, {"checkpoint_id": 1, "subtasks": {("op", 0): {"keyed": {"op": listed}}}},
                     {listed: file_digest(state)})
    assert s3_server.keys(bucket, "chk/") == ["chk/chk-1/_metadata", "chk/chk-1/op-0/state.bin"]
    point = chk_storage.restore_point(f"s3://{bucket}/chk", s3_server.settings)
    assert point.metadata["subtasks"][("op", 0)]["keyed"]["op"].read_bytes() == b"keyed state of one subtask"
    # a wrong digest from the writer is caught at restore, as a corrupted file would be
    remote.child("chk-2", "op-0", "state.bin").upload(state)
    listed2 = storage.root / "chk-2" / "op-0" / "state.bin"
    size, _ = file_digest(state)
    storage.complete(2, {"checkpoint_id": 2, "subtasks": {("op", 0): {"keyed": {"op": listed2}}}},
                     {listed2: (size, "0" * 64)})
    with pytest.raises(CorruptCheckpointError, match="does not match its sha256"):
        chk_storage.read_checkpoint(chk_storage.download(remote.child("chk-2")))


def test_an_actors_snapshot_reaches_the_store_and_only_live_shared_files_stay_on_its_node(
        s3_server: S3Server, bucket: str, tmp_path: Path) -> None:
    """The actor side (_CoordinatorProxy._upload) and the coordinator side (CoordinatorActor._absolute,
    then publishing) of a checkpoint on a store, without Ray: the restore reads what the actor wrote."""
    uri = f"s3://{bucket}/chk"
    remote = resolve(uri, s3_server.settings)
    proxy = _CoordinatorProxy(None, JobConfig(checkpoint_dir=tmp_path / "node", checkpoint_uri=uri), remote)
    assert proxy.storage is not None
    work = proxy.storage.root

    def snapshot(n: int, ssts: list[str]) -> dict[str, Any]:
        own = work / f"chk-{n}" / "op-0"
        own.mkdir(parents=True)
        (own / "MANIFEST").write_bytes(f"db of {n}".encode())
        shared = work / "shared" / "db1"
        shared.mkdir(parents=True, exist_ok=True)
        for name in ssts:
            if not (shared / name).exists():
                (shared / name).write_bytes(name.encode())
        return {"keyed": {"op": {"private_files": [own / "MANIFEST"],
                                 "shared_files": [shared / name for name in ssts]}}}

    proxy._upload(1, snapshot(1, ["1.sst", "2.sst"]), work, remote)
    relative, written = proxy._upload(2, snapshot(2, ["2.sst", "3.sst"]), work, remote)
    assert s3_server.keys(bucket, "chk/") == ["chk/chk-1/op-0/MANIFEST", "chk/chk-2/op-0/MANIFEST", "chk/shared/db1/1.sst",
                                              "chk/shared/db1/2.sst", "chk/shared/db1/3.sst"]
    # on the node: no snapshot file (the store has them), the shared files the db still holds
    assert sorted(p.relative_to(work).as_posix() for p in work.rglob("*") if p.is_file()) == [
        "shared/db1/2.sst", "shared/db1/3.sst"]
    assert relative["keyed"]["op"]["private_files"] == [Path("chk-2/op-0/MANIFEST")] and set(written) == {
        "chk-2/op-0/MANIFEST", "shared/db1/2.sst", "shared/db1/3.sst"}
    coordinator = CheckpointStorage(tmp_path / "coordinator", 1, remote)
    snap, files = CoordinatorActor._absolute(relative, written, coordinator.root)
    coordinator.complete(2, {"checkpoint_id": 2, "subtasks": {("op", 0): snap}}, files)
    restored = chk_storage.restore_point(uri, s3_server.settings).metadata["subtasks"][("op", 0)]
    assert [p.read_bytes() for p in restored["keyed"]["op"]["shared_files"]] == [b"2.sst", b"3.sst"]
    assert [p.read_bytes() for p in restored["keyed"]["op"]["private_files"]] == [b"db of 2"]


OBJECT_STORE = 80 * 1024 * 1024  # Ray's smallest object store: batches here are small


@dataclass
class LocalCluster:
    """A ``ray.cluster_utils.Cluster`` whose worker nodes each have a temporary directory (TMPDIR)
    of their own, as separate machines have separate disks."""

    ray: Any  # the Cluster
    disks: Path
    disk: dict[str, Path] = field(default_factory=dict)  # node id -> its TMPDIR

    def add_worker(self) -> Any:
        """A worker node of one CPU."""
        directory = self.disks / f"node-{len(self.disk) + 1}"
        directory.mkdir()
        node = self.ray.add_node(num_cpus=1, object_store_memory=OBJECT_STORE, env_vars={"TMPDIR": str(directory)})
        self.disk[node.node_id] = directory
        return node

    def actor_directories(self, node: Any) -> Path:
        """Where the sqlstream actors on ``node`` work (ray_executor.node_directory)."""
        return self.disk[node.node_id] / "sqlstream-ray" / node.node_id[:16]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """A head without CPUs (the driver's node) and two worker nodes of one CPU each."""
    pytest.importorskip("ray", reason="Ray is not installed: pip install 'sqlstream[ray]'")
    import ray
    from ray.cluster_utils import Cluster

    c = LocalCluster(Cluster(initialize_head=True, head_node_args={
        "num_cpus": 0, "object_store_memory": OBJECT_STORE, "include_dashboard": False}),
        tmp_path_factory.mktemp("disks"))
    for _ in range(2):
        c.add_worker()
    ray.init(address=c.ray.address, logging_level="warning")
    c.ray.wait_for_nodes()
    try:
        yield c
    finally:
        ray.shutdown()
        c.ray.shutdown()


@pytest.mark.slow
def test_losing_the_coordinators_node_restores_from_s3_on_the_remaining_one_exactly_once(
        cluster: LocalCluster, s3_server: S3Server, bucket: str, tmp_path: Path) -> None:
    out = tmp_path / "out"
    uri = f"s3://{bucket}/chk"
    script = RAY + s3_server.set_statements() + RESTARTS + file_job_script(out, uri, "rocksdb", 1)  # type: ignore[arg-type]
    job = Background(script)
    executor = job.running_executor(timeout=120)
    wait_for(lambda: _metadata_keys(s3_server, bucket, "chk/"), timeout=60, what="a checkpoint on S3")
    assert not job.done.is_set(), "the job should still be processing when the node goes"
    # the node of the checkpoint coordinator: with it go the checkpoint in flight, the coordinator's
    # working copy and the subtask actors Ray placed there
    victim = next(n for n in cluster.ray.worker_nodes if n.node_id == executor.coordinator_node)
    # the actors there worked on that node's own disk, which goes with the node
    assert any(cluster.actor_directories(victim).iterdir())
    cluster.ray.remove_node(victim, allow_graceful=False)
    shutil.rmtree(cluster.disk[victim.node_id])
    result = job.result(timeout=240).job
    assert result is not None and result.restarts >= 1
    # the last attempt resumed from the checkpoint on S3: its source did not start from the first row
    assert result.metrics["#0 Source"].records_out < ROWS
    assert rows(committed(out)) == expected_rows()
    assert victim.node_id not in {executor.coordinator_node, *executor.actor_nodes.values()}
    # RocksDB's shared files and the subtasks' snapshots reached the store from the actors' nodes
    keys = s3_server.keys(bucket, "chk/")
    assert any(k.startswith("chk/shared/") for k in keys)
    assert _metadata_keys(s3_server, bucket, "chk/")
    # the sink actors' commit journal on the store is pruned with the checkpoints (one entry per
    # checkpoint otherwise): left are those of the last notifications, recorded after the last pruning
    journal = [k for k in keys if k.startswith("chk/commits/") and not k.endswith("/")]
    assert 1 <= len(journal) <= 3 < len(result.checkpoints)
    # the driver's local copy is only a cache, gone with the job, as the actors' node directories are
    assert not chk_storage.local_copy(uri).exists()
    for node in cluster.ray.worker_nodes:
        assert not any(cluster.actor_directories(node).iterdir())
    cluster.add_worker()  # back to two workers for the next test


@pytest.mark.slow
def test_a_savepoint_on_s3_taken_on_the_cluster_restores_at_another_parallelism(
        cluster: LocalCluster, s3_server: S3Server, bucket: str, tmp_path: Path) -> None:
    out = tmp_path / "out"
    settings = RAY + s3_server.set_statements()
    script = settings + file_job_script(out, f"s3://{bucket}/chk", "rocksdb", 2).replace(  # type: ignore[arg-type]
        "'fields.seq.kind' = 'sequence'", "'scan.parallelism' = '1', 'fields.seq.kind' = 'sequence'")
    first = Background(script)
    executor = first.running_executor(timeout=120)
    wait_for(lambda: committed(out).num_rows > 0, timeout=60, what="committed output")
    savepoint = executor.stop_with_savepoint(f"s3://{bucket}/sp", timeout_s=60)
    assert savepoint == f"s3://{bucket}/sp"
    assert first.result().job.cancelled
    assert "sp/_metadata" in s3_server.keys(bucket, "sp/")
    partial = rows(committed(out))
    assert 0 < len(partial) < len(expected_rows())
    # at 3, each new aggregation subtask owns keys of only some old ones: it fetches just their files
    rescaled = script.replace("'parallelism.default' = '2'", "'parallelism.default' = '3'").replace(
        f"s3://{bucket}/chk", f"s3://{bucket}/chk2")
    Session(restore_from=savepoint).execute_script(rescaled)
    assert rows(committed(out)) == expected_rows()
