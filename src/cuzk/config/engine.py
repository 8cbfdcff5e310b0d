"""The sections the engine reads: parameters ([srs]), the host memory budget ([memory]), the devices
([gpus]), scheduling ([scheduler]), synthesis ([synthesis]), the pipeline ([pipeline]), test circuits
([debug]) and where the devices are ([executor]). Keys the Rust daemon never had are marked "cuzk-py"."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from cuzk.config.host import memory_available
from cuzk.config.values import GIB, ConfigError, expect, mem_available, parse_size

BACKENDS = ("auto", "cpu", "cuda")
COMPILED_MODES = ("off", "use", "build")
SPARSE_PRODUCTS = ("auto", "synthesis", "prover")
DEVICE_WITNESS = ("off", "on", "deadlines")
EXECUTOR_KINDS = ("local", "ray")
DEVICE_MODES = ("latency", "throughput")


@dataclass
class SrsConfig:
    #: Directory of the `.params`/`.vk` files (test-circuit parameters are generated here).
    param_cache: str = "/data/zk/params"
    #: Circuit ids to make hot at startup (docs/compatibility.md §2).
    preload: list[str] = field(default_factory=list)


@dataclass
class MemoryConfig:
    #: Bytes, or None for "auto" = MemAvailable (or less, under a cgroup memory limit) - safety_margin.
    total_budget: int | None = None
    safety_margin: int = 5 * GIB
    #: Seconds an SRS entry must be unused before budget pressure may evict it.
    eviction_min_idle: float = 300.0
    #: Deprecated (replaced by total_budget; docs/compatibility.md §2): accepted with a warning, no effect.
    pinned_budget: int | None = None
    working_memory_budget: int | None = None

    def resolve_budget(self) -> int:
        """The budget in bytes (`resolve`)."""
        return self.resolve()[0]

    def resolve(self) -> tuple[int, str]:
        """The budget in bytes and where it comes from: explicit, or what this process may still take
        (MemAvailable, bounded by its cgroups' memory limits: `cuzk.config.host`) less the margin,
        never below zero."""
        if self.total_budget is not None:
            return self.total_budget, "memory.total_budget"
        available = memory_available(mem_available())
        if available is None:
            raise ConfigError("memory.total_budget = \"auto\" needs /proc/meminfo (MemAvailable); "
                              "set an explicit size instead")
        return max(0, available.available - self.safety_margin), f"auto: {available.describe()} - safety_margin"


@dataclass
class GpusConfig:
    #: Device ordinals; empty = every GPU found (none found: one CPU prover device).
    devices: list[int] = field(default_factory=list)
    #: Threads of each prover process (numba kernels and MSM pool); 0 = all cores.
    gpu_threads: int = 0
    #: Prover workers per device; they share one lock held only around device work.
    gpu_workers_per_device: int = 2
    #: cuzk-py: "auto" (CUDA when GPUs and the CUDA backend are present, else CPU), "cpu" or "cuda".
    backend: str = "auto"
    #: cuzk-py: device memory cuzk plans with and may use, per GPU: "auto" (the card's free memory less
    #: a margin) or a size such as "16GiB" (a cap, enforced: for cards shared with other work, or to
    #: emulate a smaller card); a list gives one value per entry of `devices`. docs/memory.md.
    memory_limit: str | int | list[str | int] = "auto"
    #: cuzk-py: emulated CUDA cards, a development and test device (docs/gpu.md): their memory sizes,
    #: e.g. ["4GiB", "2GiB"] for cards 0 and 1; needs backend = "cuda", and `auto` never picks them.
    emulate: list[int] = field(default_factory=list)

    def memory_limit_for(self, index: int) -> int | None:
        """The limit in bytes of the index-th device (None: "auto")."""
        value = self.memory_limit[index] if isinstance(self.memory_limit, list) else self.memory_limit
        return None if value == "auto" else int(value)


@dataclass
class SchedulerConfig:
    #: Jobs of one circuit collected into a batch before planning (1 = no batching).
    max_batch_size: int = 1
    #: How long the first job of a batch waits for others.
    max_batch_wait_ms: int = 10000
    #: Serve NORMAL jobs grouped by circuit (fewer SRS switches), bounded so no job starves.
    #: Default false, so that NORMAL stays strictly FIFO unless asked (docs/compatibility.md §2).
    sort_by_type: bool = False
    #: cuzk-py: how partitions go to several devices: "latency" (every free device takes the next
    #: partition, so one proof's partitions run side by side) or "throughput" (a NORMAL or LOW job
    #: stays on the device that took its first partition; CRITICAL and HIGH jobs always spread).
    device_mode: str = "latency"


@dataclass
class SynthesisConfig:
    #: Threads each synthesis process may use for vector kernels; 0 = cores / synthesis processes.
    threads: int = 0
    #: Deprecated (the budget decides; docs/compatibility.md §2): accepted with a warning, no effect.
    partition_workers: int | None = None
    #: cuzk-py: compiled circuits under <srs.param_cache>/compiled/ (docs/compiled-circuits.md): "use" them
    #: when present, also "build" one in the background on a circuit's first job, or "off".
    compiled: str = "use"
    #: cuzk-py: where a compiled circuit's a = A·w, b = B·w, c = C·w are computed: in the "synthesis"
    #: processes (numba), by the "prover" (its backend: on the GPU with CUDA, so a, b, c never exist in
    #: host memory), or "auto" (the prover when every device is a GPU).
    sparse_products: str = "auto"
    #: cuzk-py: "on": with the products on the prover and every device a GPU, the bulk of a witness
    #: whose circuit defers it (SHA-256 gadgets, Merkle paths: 92-99%) is written on the GPU, the
    #: synthesis process writing the rest (a tenth of the CPU time, ~3% more GPU time a partition: for
    #: hosts whose CPUs cannot keep the GPUs fed; docs/compiled-circuits.md); "deadlines": the same for
    #: HIGH and CRITICAL jobs only (WindowPoSt, WinningPoSt), whose latency is the CPU's time, while
    #: throughput work keeps the GPU for its MSMs; "off": the synthesis process writes whole witnesses.
    device_witness: str = "deadlines"


@dataclass
class PipelineConfig:
    #: true: partitions flow through synthesis and proving independently, jobs overlap;
    #: false: one job at a time (all its partitions synthesized, then proven), no overlap.
    enabled: bool = True
    #: Jobs that may be in the pipeline beyond one per lane of the devices (a lane per prover worker
    #: and those synthesizing ahead of them; CRITICAL jobs are exempt).
    synthesis_lookahead: int = 1
    #: Jobs planned (payload parsed, parameters loaded) at once.
    synthesis_concurrency: int = 1
    #: Synthesis processes: min(this, cores); 0 means the default.
    max_parallel_synthesis: int = 18
    #: Partitions of one job in synthesis at once; 0 = no limit.
    slot_size: int = 0
    #: Partitions being synthesized or synthesized and waiting for a prover before no more are
    #: taken; 0 = no limit.
    max_gpu_queue_depth: int = 0
    #: cuzk-py: verify every partition proof before the job completes.
    verify_proofs: bool = True


@dataclass
class DebugConfig:
    #: cuzk-py: accept test-circuit requests (PROOF_KIND_UNSPECIFIED with a JSON description) and
    #: generate INSECURE parameters for them. Never enable on a production daemon.
    test_circuits: bool = False


@dataclass
class ExecutorConfig:
    #: cuzk-py: where the devices are (docs/ray.md): "local" (a process per device on this host) or
    #: "ray" (an actor per device on every node of a Ray cluster that offers the `GPU` resource, or
    #: the `cuzk_device` custom resource for CPU devices; needs `pip install cuzk[ray]`).
    kind: str = "local"
    #: cuzk-py: with kind = "ray", the cluster to join: "auto" (the cluster this host runs, as `ray
    #: start` left it), "host:port" of its GCS, or a "ray://host:port" client address.
    address: str = "auto"
    #: cuzk-py: with kind = "ray", prover lanes per device beyond `gpus.gpu_workers_per_device`. Every
    #: lane synthesizes its partition in a synthesis process of its own on the device's node, then
    #: proves it: the extra lanes synthesize while the others' partitions are on the device, so that
    #: the device does not wait for synthesis. Each costs the node one more witness in host memory
    #: (4.2 GB for PoRep-32GiB; docs/ray.md).
    synthesis_ahead: int = 2


def memory_limit_value(value: Any, what: str) -> int | str | list[int | str]:
    """"auto", a size, or a list of them (one per device): sizes as bytes, at least 1 GiB."""
    if isinstance(value, list):
        if not value:
            raise ConfigError(f"{what}: an empty list; use \"auto\" or one value per device")
        return [memory_limit_value(v, f"{what}[{k}]") for k, v in enumerate(value)]  # type: ignore[misc]
    if isinstance(value, str) and value.strip().lower() == "auto":
        return "auto"
    size = parse_size(value, what=what)
    if size < 1 << 30:
        raise ConfigError(f"{what}: {value!r} is below 1GiB, too little for any proving key beside a CUDA context")
    return size


def ray_address(value: Any, what: str) -> str:
    """"auto", "host:port" (a GCS address) or "ray://host:port" (Ray Client)."""
    expect(str, value, what, "a string")
    text = value.strip()
    if text.lower() == "auto":
        return "auto"
    body = text.removeprefix("ray://")
    host, sep, port = body.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536 or "/" in body:
        raise ConfigError(f"{what}: {value!r} is not a Ray address (use \"auto\", \"host:port\" or "
                          "\"ray://host:port\")")
    return text
