"""What travels between the engine and its executor: a partition to prove and its result.

A `ProveItem` is a partition's work as the engine hands it over: the provider's picklable recipe
(how to synthesize it: circuit id, payload reference, partition index), its public inputs, priority
and label. The executor synthesizes it where its device is and returns an `ItemResult` (the
192-byte proof, timings). The local executor synthesizes on this host into shared memory and hands
its device process the segment's name, so a 4 GB witness is never copied or pickled; Ray's sends
the recipe to the device's node, so a witness never crosses the network. docs/architecture.md
describes the seam.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from cuzk.backends.device_lock import DEFAULT_PRIORITY


@dataclass(frozen=True)
class ProveItem:
    """One partition for a device: which parameters, how to synthesize it, what to verify against."""

    circuit_id: str
    #: The partition's picklable recipe (`cuzk.engine.providers.PartitionRecipe`).
    recipe: Any
    public_inputs: list[int]
    label: str
    #: The job's priority (`Priority` value): the order in which waiters get a synthesis process, a
    #: prover slot and the device lock.
    priority: int = DEFAULT_PRIORITY
    #: Test circuits' `device_delay_ms`: seconds the device is held before the proof (under the
    #: device lock on the CPU path), to make device contention on purpose.
    hold_s: float = 0.0


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
    #: (start, end) of the partition's synthesis (time.monotonic() of this host), and where it ran;
    #: None when it was not synthesized.
    synth: tuple[float, float] | None = None
    synth_worker: str = ""
    #: The failure left the device unusable (a CUDA error that poisons its context): the executor
    #: restarts the device and the partition is proven elsewhere.
    fatal: bool = False
    #: The failure may pass on another attempt (out of device memory): the partition is proven again
    #: on the next free lane, this device's included, and the device keeps running.
    transient: bool = False
