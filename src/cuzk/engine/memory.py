"""The memory budget: every large allocation is reserved first, so load queues instead of OOMing.

One logical budget (bytes) covers the worker processes' baseline, SRS entries and per-partition
working sets. A `Reservation` is taken before the memory is allocated and released (possibly in
parts) when it is freed. `try_reserve` never blocks; when it fails it first asks the evictor (the
SRS manager) to free idle entries. Callers that must wait poll `try_reserve` from their own loop,
woken by `wait_for_release`, so that a waiting higher-priority item can overtake (backpressure
without a fairness hole).

Per-partition sizes come from the circuit's measured shape (`PartitionEstimate.from_shape`): the
CPU prover's costs per constraint, per variable and per domain element were measured on this code
base (see the constants) and are deliberately rounded up.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from cuzk.errors import CuzkError
from cuzk.r1cs import CircuitShape

#: Python ints and lists of the proving constraint system: measured ~200 B per constraint.
SYNTH_BYTES_PER_CONSTRAINT = 320
SYNTH_BYTES_PER_VARIABLE = 120
#: Prover working set (NTT buffers, native scalar objects): measured ~620 B per domain element.
PROVE_BYTES_PER_DOMAIN_ELEMENT = 800
PROVE_BYTES_PER_VARIABLE = 256
#: Compiled path, synthesis side, for circuits without a batched generator: WitnessCS's Python ints.
COMPILED_WITNESS_BYTES_PER_VARIABLE = 120
#: The same with the circuit's batched generator: the witness as (·, 4) uint64 limbs plus the
#: generator's temporaries (the largest circuit measured peaked at 39 B per variable, beyond the
#: file's mapped pages; docs/memory.md §3), rounded up.
BATCHED_WITNESS_BYTES_PER_VARIABLE = 64
#: a, b, c as (·, 4) uint64 limbs, where the sparse products are evaluated on the host.
PRODUCTS_BYTES_PER_CONSTRAINT = 3 * 32
#: A GPU prover fed the witness alone: its host side holds density masks and fixed pinned staging.
DEVICE_PROVE_HOST_BYTES_PER_VARIABLE = 16
DEVICE_PROVE_HOST_FIXED = 1 << 30
PAGE = 4096


class BudgetError(CuzkError):
    """A request for more memory than the whole budget can ever give."""


def _pages(n: int) -> int:
    return -(-n // PAGE) * PAGE


@dataclass(frozen=True)
class PartitionEstimate:
    """Bytes one partition needs: while synthesizing (freed after), in shared memory, while proving."""

    synthesis: int
    shared: int
    proving: int

    @property
    def total(self) -> int:
        return self.synthesis + self.shared + self.proving

    @classmethod
    def from_shape(cls, shape: CircuitShape) -> PartitionEstimate:
        n = shape.num_constraints
        variables = shape.num_inputs + shape.num_aux
        domain = 1 << max(0, (max(n, 1) - 1).bit_length())
        return cls(
            synthesis=n * SYNTH_BYTES_PER_CONSTRAINT + variables * SYNTH_BYTES_PER_VARIABLE,
            shared=shared_bytes(n, shape.num_inputs, shape.num_aux),
            proving=domain * PROVE_BYTES_PER_DOMAIN_ELEMENT + variables * PROVE_BYTES_PER_VARIABLE,
        )

    @classmethod
    def compiled(cls, shape: CircuitShape, *, products_on_prover: bool, device_prover: bool,
                 batched_witness: bool = False, aux_copy: bool = False) -> PartitionEstimate:
        """The compiled path (`cuzk.r1cs.compiled`): no constraint system in memory. The witness comes
        from the circuit's generator; a, b, c are the sparse products, evaluated in the synthesis
        process or (`products_on_prover`) by the prover's backend; a `device_prover` (GPU) keeps
        a, b, c, the NTTs and the MSMs in device memory, so only its host-side staging counts here.
        `batched_witness`: the circuit has a batched witness generator (`witness_arrays`), which needs
        far less than WitnessCS. A 130M-row circuit on a GPU: 8.3 GB (synthesis) + 4.2 GB (shared) +
        3.2 GB (proving), against 215 GB for the constraint-system path on the CPU (docs/memory.md §3).
        `aux_copy`: the prover completes a deferred witness on the host, on a copy of the aux (a GPU
        whose plan computes the products on the host), held while it proves."""
        n = shape.num_constraints
        variables = shape.num_inputs + shape.num_aux
        domain = 1 << max(0, (max(n, 1) - 1).bit_length())
        synthesis = variables * (BATCHED_WITNESS_BYTES_PER_VARIABLE if batched_witness
                                 else COMPILED_WITNESS_BYTES_PER_VARIABLE)
        if products_on_prover:
            shared = _pages(32 * variables + 64)
        else:
            synthesis += n * PRODUCTS_BYTES_PER_CONSTRAINT
            shared = shared_bytes(n, shape.num_inputs, shape.num_aux)
        if device_prover:
            proving = variables * DEVICE_PROVE_HOST_BYTES_PER_VARIABLE + DEVICE_PROVE_HOST_FIXED
            if aux_copy:
                proving += 32 * shape.num_aux
        else:
            proving = domain * PROVE_BYTES_PER_DOMAIN_ELEMENT + variables * PROVE_BYTES_PER_VARIABLE
            if products_on_prover:
                proving += n * PRODUCTS_BYTES_PER_CONSTRAINT
        return cls(synthesis=synthesis, shared=shared, proving=proving)

    def at_least(self, total: int) -> PartitionEstimate:
        """The same estimate with the proving part raised so the total is at least `total`."""
        return PartitionEstimate(self.synthesis, self.shared, self.proving + max(0, total - self.total))


def shared_bytes(constraints: int, inputs: int, aux: int) -> int:
    """Size of one assignment in shared memory: a, b, c, inputs, aux as 32-byte elements, 3 densities."""
    return _pages(32 * (3 * constraints + inputs + aux) + inputs + 2 * aux + 64)


class Reservation:
    """Bytes held against the budget; release all or part, once. Safe to release twice."""

    def __init__(self, budget: MemoryBudget, rid: int, nbytes: int, label: str) -> None:
        self._budget = budget
        self.id = rid
        self.nbytes = nbytes
        self.label = label

    def release(self, nbytes: int | None = None) -> int:
        """Give back `nbytes` (default: all that is left); returns what was actually released."""
        return self._budget._release(self, self.nbytes if nbytes is None else min(nbytes, self.nbytes))

    def __enter__(self) -> Reservation:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


class MemoryBudget:
    """A byte budget with labelled reservations and an evictor hook."""

    def __init__(self, total: int) -> None:
        if total <= 0:
            raise BudgetError(f"the memory budget must be positive, got {total} bytes")
        self.total = total
        self._used = 0
        self._lock = threading.Condition()
        self._ids = itertools.count(1)
        self._held: dict[int, Reservation] = {}
        self.evictor: Callable[[int], int] | None = None
        self._listeners: list[Callable[[], None]] = []
        self.peak = 0
        #: Bytes held for the daemon's lifetime (worker processes' baseline): never available to work.
        self.permanent = 0

    # -- queries -------------------------------------------------------------------------------------
    @property
    def used(self) -> int:
        return self._used

    @property
    def available(self) -> int:
        return self.total - self._used

    def by_label(self) -> dict[str, int]:
        """Bytes held per label prefix (the part before ':'), for status pages."""
        with self._lock:
            out: dict[str, int] = {}
            for r in self._held.values():
                key = r.label.split(":", 1)[0]
                out[key] = out.get(key, 0) + r.nbytes
            return out

    @property
    def usable(self) -> int:
        """The most any single reservation can ever get: the budget less the permanent part."""
        return self.total - self.permanent

    def add_release_listener(self, fn: Callable[[], None]) -> None:
        """`fn` runs (outside the lock) after every release: waiting dispatchers re-check."""
        self._listeners.append(fn)

    # -- reserving -----------------------------------------------------------------------------------
    def _take(self, nbytes: int, label: str) -> Reservation | None:
        with self._lock:
            if self._used + nbytes > self.total:
                return None
            self._used += nbytes
            self.peak = max(self.peak, self._used)
            r = Reservation(self, next(self._ids), nbytes, label)
            self._held[r.id] = r
            return r

    def try_reserve(self, nbytes: int, label: str, *, evict: bool = True) -> Reservation | None:
        """Reserve now or return None; on shortage, ask the evictor once and retry."""
        if nbytes < 0:
            raise ValueError("cannot reserve a negative size")
        if nbytes > self.usable:
            raise BudgetError(f"{label} needs {nbytes:,} bytes but the memory budget can never give more than "
                              f"{self.usable:,} (budget {self.total:,} less {self.permanent:,} held by the daemon's "
                              "processes)")
        got = self._take(nbytes, label)
        if got is None and evict and self.evictor is not None:
            shortfall = nbytes - self.available
            if shortfall > 0 and self.evictor(shortfall) > 0:
                got = self._take(nbytes, label)
        return got

    def try_grow(self, r: Reservation, nbytes: int) -> bool:
        """Add `nbytes` to `r` now if they are free, without the evictor (its own caller may be it)."""
        if nbytes < 0:
            raise ValueError("cannot grow by a negative size")
        with self._lock:
            if self._used + nbytes > self.total:
                return False
            r.nbytes += nbytes
            self._used += nbytes
            self.peak = max(self.peak, self._used)
            self._held[r.id] = r
            return True

    def reserve(self, nbytes: int, label: str, *, timeout: float | None = None,
                cancelled: Callable[[], bool] | None = None, poll: float = 0.25) -> Reservation | None:
        """Block until reserved; None if `timeout` runs out or `cancelled()` becomes true."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            got = self.try_reserve(nbytes, label)
            if got is not None:
                return got
            if cancelled is not None and cancelled():
                return None
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                return None
            self.wait_for_release(poll if left is None else min(poll, left))

    def reserve_permanent(self, nbytes: int, label: str) -> Reservation:
        """Hold bytes for the daemon's lifetime (e.g. a worker process's baseline); fails loudly."""
        got = self._take(nbytes, label)
        if got is None:
            raise BudgetError(f"the memory budget ({self.total:,} bytes) cannot hold {label} ({nbytes:,} bytes; "
                              f"{self.available:,} left): raise memory.total_budget")
        with self._lock:
            self.permanent += nbytes
        return got

    def wait_for_release(self, timeout: float) -> None:
        with self._lock:
            self._lock.wait(timeout)

    def _release(self, r: Reservation, nbytes: int) -> int:
        with self._lock:
            if r.id not in self._held or nbytes <= 0:
                return 0
            r.nbytes -= nbytes
            self._used -= nbytes
            if r.nbytes == 0:
                del self._held[r.id]
            self._lock.notify_all()
        for fn in self._listeners:
            fn()
        return nbytes
