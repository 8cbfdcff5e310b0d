"""Prometheus metrics: the same text for HTTP `/metrics` and the GetMetrics RPC.

Names and label values are the Rust daemon's where the exposition format allows (what differs and
why: docs/compatibility.md §6): `cuzk_proofs_completed_total`, `cuzk_proofs_failed_total`,
`cuzk_uptime_seconds`, `cuzk_queue_depth`, `cuzk_running_jobs`, `cuzk_gpu_workers`, the histogram
`cuzk_proof_duration_seconds`, and per kind `cuzk_proofs_completed_by_kind_total{proof_kind}` and
`cuzk_proofs_failed_by_kind_total{proof_kind}`. Label values: each kind's `ProofKind.metric_label`
(the list: docs/compatibility.md §4).

Gauges are computed at scrape time from an engine snapshot, so they can never drift from the
state they describe.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import prometheus_client
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric

from cuzk.engine.jobs import ProofKind

prometheus_client.disable_created_metrics()

DURATION_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800)
STAGE_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120)
STAGES = ("synthesis", "device_wait", "device", "verify")


@dataclass
class GaugeSnapshot:
    uptime_seconds: float = 0.0
    queue_depth: int = 0
    running_jobs: int = 0
    gpu_workers: int = 0
    busy_gpu_workers: int = 0
    synthesis_workers: int = 0
    busy_synthesis_workers: int = 0
    jobs_by_state: dict[str, int] = field(default_factory=dict)
    memory_budget_bytes: int = 0
    memory_reserved_bytes: int = 0
    memory_reserved_by_purpose: dict[str, int] = field(default_factory=dict)
    process_rss_bytes: int = 0
    srs_bytes_by_tier: dict[str, int] = field(default_factory=dict)
    srs_entries_by_tier: dict[str, int] = field(default_factory=dict)
    shared_segments: int = 0
    shared_bytes: int = 0
    #: Per GPU (label "device"): the memory plan's budget, the pool's peak, out-of-memory retries.
    device_memory_budget_bytes: dict[str, int] = field(default_factory=dict)
    device_memory_peak_bytes: dict[str, int] = field(default_factory=dict)
    device_oom_retries: dict[str, int] = field(default_factory=dict)
    #: Per GPU: device phases that let a higher-priority proof through mid-phase, and that could not.
    device_preemptions: dict[str, int] = field(default_factory=dict)
    device_preemptions_refused: dict[str, int] = field(default_factory=dict)
    #: Per device: partitions proven and the seconds it was held for them.
    device_partitions: dict[str, int] = field(default_factory=dict)
    device_busy_seconds: dict[str, float] = field(default_factory=dict)
    device_can_prove: dict[str, float] = field(default_factory=dict)
    #: Devices on other hosts (the Ray executor): (device label, node, state there).
    device_nodes: list[tuple[str, str, str]] = field(default_factory=list)


class _Gauges:
    def __init__(self, snapshot: Callable[[], GaugeSnapshot]) -> None:
        self._snapshot = snapshot

    def describe(self) -> list[Metric]:
        """Nothing to pre-register: the engine may not be fully built when the registry is."""
        return []

    def collect(self) -> Iterator[Metric]:
        s = self._snapshot()

        def gauge(name: str, doc: str, value: float) -> GaugeMetricFamily:
            return GaugeMetricFamily(name, doc, value=value)

        def labelled(name: str, doc: str, label: str, values: dict[str, int] | dict[str, float]) -> GaugeMetricFamily:
            g = GaugeMetricFamily(name, doc, labels=[label])
            for key, value in sorted(values.items()):
                g.add_metric([key], value)
            return g

        yield gauge("cuzk_uptime_seconds", "Daemon uptime", s.uptime_seconds)
        yield gauge("cuzk_queue_depth", "Jobs waiting in the scheduler (and batch collector)", s.queue_depth)
        yield gauge("cuzk_running_jobs", "Jobs planning, synthesizing or proving", s.running_jobs)
        yield gauge("cuzk_gpu_workers", "Prover workers (GPU workers, or CPU prover workers without a GPU)",
                    s.gpu_workers)
        yield gauge("cuzk_gpu_workers_busy", "Prover workers with a partition", s.busy_gpu_workers)
        yield gauge("cuzk_synthesis_workers", "Synthesis worker processes", s.synthesis_workers)
        yield gauge("cuzk_synthesis_workers_busy", "Synthesis worker processes with work", s.busy_synthesis_workers)
        yield labelled("cuzk_jobs", "Known jobs by state (finished ones until pruned)", "state", s.jobs_by_state)
        yield gauge("cuzk_memory_budget_bytes", "The memory budget", s.memory_budget_bytes)
        yield gauge("cuzk_memory_reserved_bytes", "Bytes reserved against the budget", s.memory_reserved_bytes)
        yield labelled("cuzk_memory_reserved_by_purpose_bytes", "Reserved bytes by purpose", "purpose",
                       s.memory_reserved_by_purpose)
        yield gauge("cuzk_process_rss_bytes", "Resident memory of the daemon and its workers", s.process_rss_bytes)
        yield labelled("cuzk_srs_bytes", "Bytes held by SRS entries by tier", "tier", s.srs_bytes_by_tier)
        yield labelled("cuzk_srs_entries", "SRS entries by tier", "tier", s.srs_entries_by_tier)
        yield gauge("cuzk_shared_assignment_segments", "Shared-memory assignments alive", s.shared_segments)
        yield gauge("cuzk_shared_assignment_bytes", "Bytes in shared-memory assignments", s.shared_bytes)
        yield labelled("cuzk_device_memory_budget_bytes", "Device memory the GPU's memory plan may use", "device",
                       s.device_memory_budget_bytes)
        yield labelled("cuzk_device_memory_peak_bytes", "Most device memory cuzk's pool held on the GPU", "device",
                       s.device_memory_peak_bytes)
        yield labelled("cuzk_device_partitions", "Partitions proven on the device (since the daemon started)", "device",
                       s.device_partitions)
        yield labelled("cuzk_device_busy_seconds", "Seconds the device was held by partitions it proved", "device",
                       s.device_busy_seconds)
        yield labelled("cuzk_device_can_prove", "1 while the device takes partitions, 0 while it is dead and its "
                       "restart failed (its partitions go to the other devices)", "device", s.device_can_prove)
        yield labelled("cuzk_device_oom_retries", "Proofs retried with a smaller memory plan after a device "
                       "out-of-memory error (since the device process started)", "device", s.device_oom_retries)
        yield labelled("cuzk_device_preemptions", "Partitions that let a higher-priority proof use the device "
                       "between two of their steps (since the device process started)", "device",
                       s.device_preemptions)
        yield labelled("cuzk_device_preemptions_refused", "Times such a partition kept the device because the "
                       "memory for both proofs was not free", "device", s.device_preemptions_refused)
        if s.device_nodes:  # only executors whose devices are on other hosts have them
            placed = GaugeMetricFamily("cuzk_device_node", "A device's node and its state there (1 per device)",
                                       labels=["device", "node", "state"])
            for device, node, state in s.device_nodes:
                placed.add_metric([device, node, state], 1)
            yield placed


class EngineMetrics:
    """Counters and histograms the engine updates, plus scrape-time gauges."""

    def __init__(self, snapshot: Callable[[], GaugeSnapshot]) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.completed = Counter("cuzk_proofs_completed", "Total proofs completed", registry=r)
        self.failed = Counter("cuzk_proofs_failed", "Total proofs failed", registry=r)
        self.completed_by_kind = Counter("cuzk_proofs_completed_by_kind", "Proofs completed per kind",
                                         ["proof_kind"], registry=r)
        self.failed_by_kind = Counter("cuzk_proofs_failed_by_kind", "Proofs failed per kind", ["proof_kind"],
                                      registry=r)
        self.cancelled_by_kind = Counter("cuzk_proofs_cancelled_by_kind", "Jobs cancelled per kind", ["proof_kind"],
                                         registry=r)
        self.duration = Histogram("cuzk_proof_duration_seconds", "Submit-to-result time of completed proofs",
                                  ["proof_kind"], buckets=DURATION_BUCKETS, registry=r)
        self.stage = Histogram("cuzk_partition_stage_seconds", "Time per partition in each pipeline stage",
                               ["stage"], buckets=STAGE_BUCKETS, registry=r)
        self.await_timeouts = Counter("cuzk_await_timeouts", "AwaitProof calls that returned TIMEOUT", registry=r)
        self.deduplicated = Counter("cuzk_requests_deduplicated", "Submissions answered with an existing job",
                                    registry=r)
        self.partitions_requeued = Counter("cuzk_partitions_requeued", "Partitions given to another device after "
                                           "theirs died or became unusable", registry=r)
        self.worker_restarts = Counter("cuzk_worker_restarts", "Worker processes restarted after dying", ["pool"],
                                       registry=r)
        self.srs_evictions = Counter("cuzk_srs_evictions", "SRS entries evicted (on request or pressure)",
                                     registry=r)
        for kind in ProofKind:
            for family in (self.completed_by_kind, self.failed_by_kind, self.cancelled_by_kind):
                family.labels(kind.metric_label)
        for stage in STAGES:
            self.stage.labels(stage)
        for pool in ("synthesis", "device"):
            self.worker_restarts.labels(pool)
        r.register(_Gauges(snapshot))

    def text(self) -> str:
        return generate_latest(self.registry).decode()
