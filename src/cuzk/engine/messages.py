"""What travels between the daemon's executor and a device worker: a partition to prove and its
result.

A `ProveItem` names its assignment by shared-memory segment (`SharedAssignment`): the local
executor's device processes map the arrays a synthesis process wrote on the same host, so a 4 GB
witness is never copied or pickled. An executor whose devices are on other hosts cannot send those
names; it sends the partition's recipe instead (the provider's picklable description of how to
synthesize it: circuit id, payload reference, partition index), lets the device's own host
synthesize it, and gets back an `ItemResult` (the 192-byte proof, timings), which is what crosses
the network. docs/architecture.md describes the seam.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from cuzk.backends.device_lock import DEFAULT_PRIORITY
from cuzk.engine.synthesis import SharedAssignment


@dataclass(frozen=True)
class ProveItem:
    """One partition for a device: which parameters, where its assignment is, what to verify against."""

    circuit_id: str
    #: Where a synthesis process on this host left the assignment (the local executor); None when the
    #: device synthesizes the partition itself from `recipe` (`Executor.synthesizes`).
    shared: SharedAssignment | None
    public_inputs: list[int]
    label: str
    #: The job's priority (`Priority` value): the order in which waiters get the device lock.
    priority: int = DEFAULT_PRIORITY
    #: Test circuits' `device_delay_ms`: seconds the device is held before the proof (under the
    #: device lock on the CPU path), to make device contention on purpose.
    hold_s: float = 0.0
    #: The partition's picklable recipe (`cuzk.engine.providers.PartitionRecipe`), for an executor
    #: whose devices synthesize on their own node; None with `shared`.
    recipe: Any = None


@dataclass
class ItemResult:
    ok: bool
    proof: bytes = b""
    error: str = ""
    lock_wait_start: float = 0.0
    device_start: float = 0.0
    device_end: float = 0.0
    verify_s: float = 0.0
    #: The backend's own timing of the prove's sub-phases (seconds), for bench's breakdown.
    phases: dict[str, float] = field(default_factory=dict)
    #: (start, end) of the partition's synthesis on the device's node (time.monotonic() of this host),
    #: when the executor synthesizes there (`ProveItem.recipe`); None otherwise.
    synth: tuple[float, float] | None = None
    #: The failure left the device unusable (a CUDA error that poisons its context): the executor
    #: restarts the device and the partition is proven elsewhere.
    fatal: bool = False
    #: The failure may pass on another attempt (out of device memory): the partition is proven again
    #: on the next free lane, this device's included, and the device keeps running.
    transient: bool = False
