"""Synthesis worker processes, and the shared-memory hand-off of their assignments.

A synthesis process receives a pickled `PartitionRecipe`, runs it (pure Python constraint
synthesis), and writes the resulting arrays (a, b, c, inputs, aux and the three densities) into
one POSIX shared-memory segment. A recipe whose sparse products are left to the prover
(`synthesis.sparse_products`) returns a `CompiledWitness` instead: only inputs and aux go into the
segment, with the compiled circuit's path, and the prover's backend evaluates a, b, c itself; a
circuit whose generator states its counts up front writes them there in place (`WitnessSegment`,
given to `PartitionRecipe.assignment_into`), so nothing is copied.
Only a small `SharedAssignment` descriptor travels back through the pipe; the prover process maps
the same segment and reads the arrays in place, so gigabytes of a/b/c are never pickled or copied
between processes.

Ownership: the synthesis process creates the segment and closes its mapping; from then on the
daemon owns it and unlinks it when the partition is proven, fails or is cancelled. If the daemon
dies, multiprocessing's resource tracker (shared by all children under `spawn`) unlinks leftovers.
"""

from __future__ import annotations

import io
import logging
import multiprocessing
import os
import pickle
import secrets
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from multiprocessing import shared_memory
from multiprocessing.connection import Connection
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:  # not at import: it imports numba, which a worker may import only after set_thread_env
    from cuzk.engine.providers import WorkerCall
    from cuzk.witness_gen.deferred import DeferredWitness

log = logging.getLogger("cuzk.engine.synthesis")

_FIELDS = ("a", "b", "c", "inputs", "aux", "a_aux_density", "b_input_density", "b_aux_density")
_WITNESS_FIELDS = ("inputs", "aux")
_ALIGN = 64
#: Niceness of the regular synthesis processes, so that the one reserved for CRITICAL work (nice 0),
#: the device processes feeding the GPUs and the daemon's own threads get the CPU first.
SYNTHESIS_NICE = 5


@dataclass(eq=False)
class CompiledWitness:
    """A partition's witness for a prover that evaluates a = A·w, b = B·w, c = C·w itself
    (`ProverBackend.prove_compiled`) from the compiled circuit at `compiled_path`."""

    inputs: np.ndarray  #: (num_inputs, 4) canonical
    aux: np.ndarray  #: (num_aux, 4) canonical
    compiled_path: str
    num_constraints: int
    #: Set when inputs and aux were generated in place in a shared-memory segment (`WitnessSegment`):
    #: the hand-off then passes the segment on instead of copying.
    segment: WitnessSegment | None = None
    #: Gadgets whose aux rows the generator left unwritten, for the prover's device to write
    #: (`cuzk.witness_gen.deferred`); None when aux is complete.
    deferred: DeferredWitness | None = None


@dataclass(frozen=True)
class ArraySpec:
    name: str
    offset: int
    shape: tuple[int, ...]
    dtype: str


@dataclass(frozen=True)
class SharedAssignment:
    """Where one partition's assignment lives in shared memory."""

    shm_name: str
    size: int
    arrays: tuple[ArraySpec, ...]
    #: Set for a `CompiledWitness`: the segment holds inputs and aux only.
    compiled_path: str | None = None
    witness_constraints: int = 0
    #: A `CompiledWitness`'s deferred gadgets (messages, path inputs and rows), pickled with this.
    deferred: DeferredWitness | None = None

    @property
    def num_constraints(self) -> int:
        if self.compiled_path is not None:
            return self.witness_constraints
        return next(a.shape[0] for a in self.arrays if a.name == "a")

    def attach(self) -> AttachedAssignment:
        return AttachedAssignment(self)

    def unlink(self) -> None:
        """Remove the segment (the daemon's job once nobody needs it); missing is fine."""
        try:
            shm = shared_memory.SharedMemory(name=self.shm_name)
        except FileNotFoundError:
            return
        try:
            shm.unlink()
        finally:
            shm.close()


class AttachedAssignment:
    """A mapping of a SharedAssignment whose `assignment` views the shared arrays (no copy)."""

    def __init__(self, shared: SharedAssignment) -> None:
        from cuzk.groth16.assignment import Assignment

        self._shm = shared_memory.SharedMemory(name=shared.shm_name)
        views = {spec.name: np.ndarray(spec.shape, dtype=np.dtype(spec.dtype), buffer=self._shm.buf,
                                       offset=spec.offset) for spec in shared.arrays}
        for v in views.values():
            v.flags.writeable = False
        if shared.compiled_path is not None:
            self.assignment: Any = CompiledWitness(views["inputs"], views["aux"], shared.compiled_path,
                                                   shared.witness_constraints, deferred=shared.deferred)
        else:
            self.assignment = Assignment(**views)

    def close(self) -> None:
        self.assignment = None
        try:
            self._shm.close()
        except BufferError:  # pragma: no cover - a view escaped; the mapping goes with the process
            log.warning("shared assignment %s still referenced; mapping kept", self._shm.name)

    def __enter__(self) -> AttachedAssignment:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


#: Segment names: cuzk_<daemon pid>_<pid of the maker>_<random>, so that segments a killed process left
#: can be told apart from other programs' (benchmarks/e2e/bench_soak.py counts them).
SEGMENT_PREFIX = "cuzk_"


def new_segment(size: int) -> shared_memory.SharedMemory:
    """A new shared-memory segment named after the daemon and the process that makes it."""
    parent = multiprocessing.parent_process()
    daemon = parent.pid if parent is not None else os.getpid()
    return shared_memory.SharedMemory(create=True, size=size,
                                      name=f"{SEGMENT_PREFIX}{daemon}_{os.getpid()}_{secrets.token_hex(6)}")


def unlink_orphans(maker_pid: int, keep: set[str]) -> list[str]:
    """Remove the segments this daemon's process `maker_pid` (dead) made that are not in `keep` (those
    handed over before it died): the one it was filling when it was killed would otherwise stay in
    /dev/shm, holding its memory, until the daemon exits. The names removed."""
    prefix = f"{SEGMENT_PREFIX}{os.getpid()}_{maker_pid}_"
    try:
        names = [n for n in os.listdir("/dev/shm") if n.startswith(prefix) and n not in keep]
    except OSError:  # no /dev/shm (not Linux): nothing to find
        return []
    removed = []
    for name in names:
        try:
            shm = shared_memory.SharedMemory(name=name)
        except FileNotFoundError:
            continue
        try:
            shm.unlink()
            removed.append(name)
        finally:
            shm.close()
    return removed


def _layout(arrays: list[tuple[str, tuple[int, ...], np.dtype]]) -> tuple[tuple[ArraySpec, ...], int]:
    """Where each (name, shape, dtype) goes in one segment (_ALIGN-aligned, in order) and its size."""
    specs, offset = [], 0
    for name, shape, dtype in arrays:
        offset = -(-offset // _ALIGN) * _ALIGN
        specs.append(ArraySpec(name, offset, shape, dtype.str))
        offset += int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    return tuple(specs), max(offset, 1)


class WitnessSegment:
    """A new shared-memory segment laid out for a `CompiledWitness` ((num_inputs, 4) inputs, then
    (num_aux, 4) aux, uint64), for the witness generator to write into in place: the hand-off then
    copies nothing (a 130M-variable witness, 4.2 GB, took ~4 s to copy). Made by the synthesis
    process; `share` closes its mapping and gives the descriptor (the daemon owns the segment from
    then on), `discard` removes it (synthesis failed)."""

    def __init__(self, num_inputs: int, num_aux: int) -> None:
        limbs = np.dtype(np.uint64)
        self.specs, self.size = _layout([("inputs", (num_inputs, 4), limbs), ("aux", (num_aux, 4), limbs)])
        self._shm = new_segment(self.size)
        self.inputs: np.ndarray | None = np.ndarray((num_inputs, 4), limbs, self._shm.buf, self.specs[0].offset)
        self.aux: np.ndarray | None = np.ndarray((num_aux, 4), limbs, self._shm.buf, self.specs[1].offset)

    def _close(self) -> None:
        self.inputs = self.aux = None
        try:
            self._shm.close()
        except BufferError:  # a view escaped: the mapping goes when it does
            log.warning("witness segment %s still referenced; mapping kept", self._shm.name)

    def share(self, compiled_path: str, num_constraints: int,
              deferred: DeferredWitness | None = None) -> SharedAssignment:
        """The descriptor of the filled segment; this process's mapping is closed."""
        self._close()
        return SharedAssignment(self._shm.name, self.size, self.specs, compiled_path, num_constraints, deferred)

    def discard(self) -> None:
        self._close()
        self._shm.unlink()


def export_assignment(asg: Any) -> SharedAssignment:
    """Copy an Assignment (or a CompiledWitness) into a new shared-memory segment and return its
    descriptor; a CompiledWitness generated in a `WitnessSegment` is passed on as it is."""
    witness_only = isinstance(asg, CompiledWitness)
    if witness_only and asg.segment is not None:
        segment, asg.segment = asg.segment, None
        asg.inputs = asg.aux = None  # the segment's views: gone before its mapping closes
        return segment.share(asg.compiled_path, asg.num_constraints, asg.deferred)
    arrays = [(name, np.ascontiguousarray(getattr(asg, name))) for name in
              (_WITNESS_FIELDS if witness_only else _FIELDS)]
    specs, size = _layout([(name, tuple(arr.shape), arr.dtype) for name, arr in arrays])
    shm = new_segment(size)
    try:
        for spec, (_, arr) in zip(specs, arrays, strict=True):
            if arr.nbytes:
                dst = np.ndarray(arr.shape, dtype=arr.dtype, buffer=shm.buf, offset=spec.offset)
                dst[...] = arr
                del dst
    except BaseException:
        shm.close()
        shm.unlink()
        raise
    shm.close()
    if witness_only:
        return SharedAssignment(shm.name, size, specs, asg.compiled_path, asg.num_constraints, asg.deferred)
    return SharedAssignment(shm.name, size, specs)


# -- the child process ------------------------------------------------------------------------------

def _warm_up(calls: Sequence[WorkerCall]) -> None:
    """Run the providers' warm-up calls once (`ProviderRegistry.warm_up_calls`: imports, numba kernels
    from their cache), so a worker that reports ready synthesizes its first real partition at full
    speed; an assignment a call returns goes through the shared-memory export once too."""
    from cuzk.engine.procs import resolve_call

    for ref, args in calls:
        result = resolve_call(ref)(*args)
        if result is not None:
            export_assignment(result).unlink()


class _BufferUnpickler(pickle.Unpickler):
    def __init__(self, data: bytes, buffers: Sequence[Any]) -> None:
        super().__init__(io.BytesIO(data))
        self._buffers = buffers

    def persistent_load(self, pid: Any) -> Any:
        return self._buffers[pid]


@dataclass(frozen=True)
class PickledRecipe:
    """A partition recipe as it reaches a node of the Ray executor (`cuzk.engine.ray_executor`): still
    pickled, its large buffers out of band (persistent ids index `buffers`). It is unpickled where it
    is synthesized, so that the device actor handing it to a synthesis process neither unpickles nor
    pickles it again (the actor's interpreter lock is its lanes')."""

    data: bytes
    buffers: tuple[Any, ...] = ()

    def load(self) -> Any:
        return _BufferUnpickler(self.data, self.buffers).load()

    def assignment_into(self, segment: Callable[[int, int], Any]) -> Any:
        return self.load().assignment_into(segment)


def synthesize_shared(recipe: Any) -> tuple[SharedAssignment, float, float]:
    """Run a partition recipe into a new shared-memory segment: its descriptor and the synthesis's
    start and end (time.monotonic()). What a synthesis process does with a recipe, and what an executor
    whose devices synthesize on their own node runs there (`cuzk.engine.ray_executor`)."""
    start = time.monotonic()
    asg = recipe.assignment_into(WitnessSegment)
    end = time.monotonic()
    shared = export_assignment(asg)
    del asg
    return shared, start, end


def synthesis_worker_main(name: str, control: Connection, threads: int, nice: int = 0,
                          warm_up: Sequence[WorkerCall] = ()) -> None:
    """Entry point of a synthesis process: ("synth", recipe) and ("call", ref, args) requests;
    `nice` lowers its CPU priority by that much (the processes that do not serve CRITICAL work);
    `warm_up`, the calls it runs before it reports ready."""
    from cuzk.engine.procs import resolve_call, set_thread_env

    set_thread_env(threads)
    import os

    if nice > 0:
        try:
            os.nice(nice)
        except OSError as err:  # pragma: no cover - a platform without nice: equal shares then
            log.debug("cannot lower this process's CPU priority: %s", err)

    try:
        _warm_up(warm_up)
    except BaseException as err:  # pragma: no cover - a broken installation
        control.send(("error", f"{type(err).__name__}: {err}"))
        return
    control.send(("ready", {"pid": os.getpid()}))
    while True:
        try:
            msg = control.recv()
        except (EOFError, OSError):
            return
        try:
            if msg[0] == "synth":
                shared, start, end = synthesize_shared(msg[1])
                control.send(("ok", shared, start, end))
            elif msg[0] == "call":
                result = resolve_call(msg[1])(*msg[2])
                control.send(("ok", result))
            else:
                control.send(("error", f"unknown request {msg[0]!r}", ""))
        except BaseException as err:  # every failure goes back to the daemon as a message
            try:
                control.send(("error", f"{type(err).__name__}: {err}", traceback.format_exc()))
            except (OSError, EOFError):
                return
