"""The job manager's Prometheus endpoint (``GET /metrics``): its jobs' figures in the text format.

Nothing is counted twice: every figure comes from the statuses the job processes publish
(``status.json``, see ``sqlstream.core.status``), read when Prometheus scrapes, through
the same records the REST API and the web page use.  Running totals are counters
(records, busy and backpressured seconds, checkpoints); rates between the two newest
statuses, watermarks and the latest checkpoint are gauges.  Labels: ``job_id`` (the one
id of a job everywhere), ``job_name``, and per operator ``operator_id`` (the physical
node id) and ``operator`` (its kind, as in EXPLAIN).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.core import CollectorRegistry, CounterMetricFamily, GaugeMetricFamily, Metric

from sqlstream.runtime.elements import MAX_WATERMARK

if TYPE_CHECKING:
    from sqlstream.frontend.jobmanager import JobManager

CONTENT_TYPE = CONTENT_TYPE_LATEST
JOB = ["job_id", "job_name"]
OPERATOR = ["job_id", "job_name", "operator_id", "operator"]
STATES = ("RUNNING", "FINISHED", "FAILED", "CANCELED")


class JobManagerCollector:
    """Collects the job manager's jobs on each scrape (a custom collector: no state of its own to drift)."""

    def __init__(self, manager: JobManager) -> None:
        self.manager = manager

    def collect(self) -> Iterator[Metric]:
        from sqlstream.frontend.jobmanager import (  # (it imports this module)
            RUNNING,
            operator_rates,
        )

        jobs = self.manager.list()
        by_state = GaugeMetricFamily("sqlstream_jobs", "Jobs of the job manager by state", labels=["state"])
        for state in STATES:
            by_state.add_metric([state], sum(1 for j in jobs if j.state == state))
        yield by_state

        info = GaugeMetricFamily("sqlstream_job_info", "A job of the job manager (1), with its state",
                                 labels=[*JOB, "state"])
        uptime = GaugeMetricFamily("sqlstream_job_uptime_seconds", "Time since the job was submitted", labels=JOB)
        restarts = CounterMetricFamily("sqlstream_job_restarts", "Restarts from a checkpoint", labels=JOB)
        checkpoints = CounterMetricFamily("sqlstream_job_checkpoints", "Checkpoints by outcome",
                                          labels=[*JOB, "outcome"])
        cp_duration = GaugeMetricFamily("sqlstream_job_last_checkpoint_duration_seconds",
                                        "Duration of the latest completed checkpoint", labels=JOB)
        cp_size = GaugeMetricFamily("sqlstream_job_last_checkpoint_size_bytes",
                                    "Size of the latest completed checkpoint", labels=JOB)
        cp_id = GaugeMetricFamily("sqlstream_job_last_checkpoint_id", "Id of the latest completed checkpoint",
                                  labels=JOB)
        per_op = {
            "in": CounterMetricFamily("sqlstream_operator_records_in", "Records the operator received",
                                      labels=OPERATOR),
            "out": CounterMetricFamily("sqlstream_operator_records_out", "Records the operator emitted",
                                       labels=OPERATOR),
            "late": CounterMetricFamily("sqlstream_operator_late_records_dropped",
                                        "Records dropped as later than the watermark", labels=OPERATOR),
            "in_rate": GaugeMetricFamily("sqlstream_operator_records_in_per_second",
                                         "Records received per second, between the two latest statuses",
                                         labels=OPERATOR),
            "out_rate": GaugeMetricFamily("sqlstream_operator_records_out_per_second",
                                          "Records emitted per second, between the two latest statuses",
                                          labels=OPERATOR),
            "busy": CounterMetricFamily("sqlstream_operator_busy_seconds",
                                        "Time spent in the operator's code, summed over its subtasks",
                                        labels=OPERATOR),
            "blocked": CounterMetricFamily("sqlstream_operator_backpressured_seconds",
                                           "Time blocked on a full output channel, summed over its subtasks",
                                           labels=OPERATOR),
            "busy_rate": GaugeMetricFamily("sqlstream_operator_busy_time_ms_per_second",
                                           "Busy ms per second of the busiest subtask (0-1000)", labels=OPERATOR),
            "blocked_rate": GaugeMetricFamily("sqlstream_operator_backpressured_time_ms_per_second",
                                              "Backpressured ms per second of the most blocked subtask (0-1000)",
                                              labels=OPERATOR),
            "watermark": GaugeMetricFamily("sqlstream_operator_watermark_milliseconds",
                                           "The operator's current watermark (epoch ms)", labels=OPERATOR),
            "lag": GaugeMetricFamily("sqlstream_operator_watermark_lag_milliseconds",
                                     "Wall clock minus the operator's watermark", labels=OPERATOR),
        }
        for job in jobs:
            labels = [job.id, job.name]
            info.add_metric([*labels, job.state], 1)
            summary = job.summary()
            uptime.add_metric(labels, summary["uptime_s"])
            previous, status = job.samples()
            if status is None:
                continue
            restarts.add_metric(labels, status.restarts)
            checkpoints.add_metric([*labels, "completed"], status.completed_checkpoints)
            checkpoints.add_metric([*labels, "failed"], status.failed_checkpoints)
            latest = status.latest_checkpoint
            if latest is not None:
                cp_id.add_metric(labels, latest.id)
                cp_duration.add_metric(labels, (latest.duration_ms or 0) / 1000)
                cp_size.add_metric(labels, latest.size_bytes or 0)
            if job.state != RUNNING:
                continue  # an ended job's operators are history: the REST API keeps them
            for op, rates in zip(status.operators, operator_rates(previous, status), strict=True):
                op_labels = [*labels, str(op.node_id), op.kind]
                per_op["in"].add_metric(op_labels, op.records_in)
                per_op["out"].add_metric(op_labels, op.records_out)
                per_op["late"].add_metric(op_labels, op.late_records_dropped)
                per_op["in_rate"].add_metric(op_labels, rates["records_in_per_s"])
                per_op["out_rate"].add_metric(op_labels, rates["records_out_per_s"])
                per_op["busy"].add_metric(op_labels, op.busy_ms / 1000)
                per_op["blocked"].add_metric(op_labels, op.backpressured_ms / 1000)
                per_op["busy_rate"].add_metric(op_labels, rates["busy_ms_per_s"])
                per_op["blocked_rate"].add_metric(op_labels, rates["backpressured_ms_per_s"])
                if op.watermark is not None and op.watermark != MAX_WATERMARK:
                    per_op["watermark"].add_metric(op_labels, op.watermark)
                if rates["watermark_lag_ms"] is not None:
                    per_op["lag"].add_metric(op_labels, rates["watermark_lag_ms"])
        yield from (info, uptime, restarts, checkpoints, cp_id, cp_duration, cp_size)
        yield from per_op.values()


def registry_for(manager: JobManager) -> CollectorRegistry:
    """A registry of its own (not the process-global one): only the jobs' figures, nothing else."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(JobManagerCollector(manager))  # type: ignore[arg-type]
    return registry


def exposition(registry: CollectorRegistry) -> bytes:
    """The registry in Prometheus' text format."""
    return generate_latest(registry)
