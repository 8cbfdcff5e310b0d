"""The one interface between the engine and whatever computes proofs (CPU now, CUDA later).

A backend turns (proving key, assignment) into a proof. Keys are made resident explicitly so the
engine can account for the memory and time of loading them; everything device-specific stays
behind this interface (the engine never imports a GPU library).

A backend also proves from a compiled circuit and its witness alone (`prove_compiled`): by default
a, b, c are evaluated on the CPU (`Assignment.from_compiled`), and a backend with a device of its own
(CUDA) evaluates them there instead, so the large per-constraint vectors never exist in host memory.

Generating insecure test parameters (`cuzk params gen`) multiplies one base point by millions of
scalars; `fixed_base_g1` / `fixed_base_g2` do that batch on the backend's device (the CPU default
uses `cuzk.curve.fixed_base`), which is what makes a PoRep-32GiB key (427M G1 and 33M G2 points)
a matter of seconds on a GPU.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from cuzk.curve.fixed_base import g1_fixed_base_into, g2_fixed_base_into
from cuzk.curve.points import G1Point, G2Point
from cuzk.groth16.assignment import Assignment
from cuzk.groth16.keys import ProvingKey
from cuzk.groth16.proof import Proof

if TYPE_CHECKING:
    from cuzk.r1cs.compiled import CompiledCircuit
    from cuzk.witness_gen.deferred import DeferredWitness


@dataclass(frozen=True)
class DeviceInfo:
    name: str
    kind: str  #: "cpu" or "cuda"
    memory_total: int | None = None
    memory_free: int | None = None
    extra: dict[str, str] = field(default_factory=dict)
    #: A device with a memory pool of its own (CUDA): the bytes this process's pool hands to live
    #: arrays, and those it holds from the driver (in use and cached); None where there is no pool.
    pool_used: int | None = None
    pool_held: int | None = None
    #: The card's used memory as its driver counts it (total less free, every process on it); None
    #: where no driver counts it.
    driver_used: int | None = None


class ProverBackend(ABC):
    """What a device worker (`cuzk.engine.device_worker.DeviceWorker`) asks of its backend. The
    abstract methods are the core; the others have defaults that fit a backend without a device
    memory of its own (the CPU's), which a device backend overrides."""

    name: str

    #: Whether the backend takes its device's lock itself (`cuzk.backends.device_lock`), around its
    #: device phase only, at the priority in `priority_scope`; False: the worker holds the lock around
    #: the whole of `prove`.
    locks_device_itself: bool = False

    @abstractmethod
    def devices(self) -> list[DeviceInfo]:
        """What this backend computes on."""

    @abstractmethod
    def load_key(self, pk: ProvingKey, compiled: CompiledCircuit | None = None) -> None:
        """Make `pk` ready for fast proving (decode points / upload them); idempotent. `compiled`: the
        compiled circuit whose a, b, c pk's proofs will compute (`prove_compiled`), which a backend
        planning device memory leaves room for; one that plans nothing ignores it."""

    @abstractmethod
    def unload_key(self, pk: ProvingKey) -> None:
        """Release what `load_key` made resident."""

    @abstractmethod
    def prove(self, pk: ProvingKey, asg: Assignment, *, r: int | None = None, s: int | None = None,
              timings: MutableMapping[str, float] | None = None) -> Proof:
        """One proof; r and s default to fresh randomness."""

    def prove_compiled(self, pk: ProvingKey, compiled: CompiledCircuit, inputs: np.ndarray, aux: np.ndarray, *,
                       r: int | None = None, s: int | None = None, check: bool = True,
                       timings: MutableMapping[str, float] | None = None,
                       deferred: DeferredWitness | None = None) -> Proof:
        """One proof from a compiled circuit and its witness (canonical (n, 4) uint64 limb arrays):
        the same proof as `prove` on `Assignment.from_compiled(compiled, (inputs, aux))`. `check`
        refuses rows with a·b != c (SynthesisError). `deferred`: gadgets whose aux rows the
        generator left unwritten (`cuzk.witness_gen.deferred`), completed here first, on a copy of
        `aux` (`timings["witness"]`). This default evaluates a, b, c on the CPU (`timings["spmv"]`:
        products and check); device backends override it."""
        t = timings if timings is not None else {}
        start = time.perf_counter()
        if deferred is not None:
            aux = np.array(aux, dtype=np.uint64, copy=True)
            deferred.complete_on_host(aux)
            t["witness"] = time.perf_counter() - start
            start = time.perf_counter()
        asg = Assignment.from_compiled(compiled, (inputs, aux), check=check)
        t["spmv"] = time.perf_counter() - start
        return self.prove(pk, asg, r=r, s=s, timings=t)

    def load_compiled(self, compiled: CompiledCircuit, pk: ProvingKey | None = None) -> tuple[bool, ...] | None:
        """Make a compiled circuit's matrices resident beside `pk` where the backend's memory allows;
        which of A, B, C are resident. This default keeps nothing (None): `prove_compiled` reads the
        mapped circuit on every proof."""
        return None

    def memory_plan(self, names: Mapping[ProvingKey, str] | None = None) -> dict[str, Any] | None:
        """The device memory plan, for the status and the daemon's host-memory budget: per key (named
        by `names`) what is resident, streamed and pinned on the host (`cuzk.backends.cuda` documents
        the fields). This default has no plan (None): the daemon then counts a hot key's whole file."""
        return None

    def is_fatal(self, err: BaseException) -> bool:
        """Whether a proof's failure left the backend unusable, so that its process must be restarted
        (a GPU context that keeps failing every call). This default: never, the next proof may run."""
        return False

    def is_transient(self, err: BaseException) -> bool:
        """Whether a proof's failure may pass on another attempt with nothing restarted (device memory
        that ran out: another process's allocation, fragmentation), so the partition is proven again
        rather than failing its job. This default: never."""
        return False

    def prepare_kernels(self) -> dict[str, float]:
        """Load (compile, where no cache holds them) every kernel a proof may use, so that no proof
        pays for it; seconds by kernel group. Called before a device worker reports ready. This
        default has nothing to load."""
        return {}

    # -- parameter generation -----------------------------------------------------------------------

    def fixed_base_g1(self, base: G1Point, scalars: np.ndarray, out: np.ndarray) -> None:
        """out[i] = the blstrs uncompressed encoding of scalars[i]·base (infinity for 0).

        `scalars` are canonical (n, 4) uint64 limbs (each < r); `out` is a writable (n, 96) uint8
        array, e.g. a view of a parameter file being written. Identical bytes on every backend;
        this default computes on the CPU (`cuzk.curve.fixed_base`)."""
        g1_fixed_base_into(base, scalars, out)

    def fixed_base_g2(self, base: G2Point, scalars: np.ndarray, out: np.ndarray) -> None:
        """`fixed_base_g1` in G2: out is (n, 192) uint8."""
        g2_fixed_base_into(base, scalars, out)
