"""CudaBackend: Groth16 proofs with the H polynomial and all five MSMs on one CUDA device.

The proof is the CPU prover's (cuzk.groth16.prover): the same density selection, the same r and s,
and the same `assemble_proof` on the MSM results, so a proof with fixed r, s is byte-identical to
the CPU backend's. Per proof:

1. all device inputs are allocated at once (a, b, c padded to the domain, the inputs, the aux
   witness and the A/B density masks), then copied on a copy stream of the proof's own (a "lane")
   through a pinned double buffer whose staging copies run on several host threads. This happens
   before the proof takes the device (`_lock`) when the memory plan leaves room for it next to a
   whole reserve for the proof holding the device (or, when none does, the next one to take it), so
   that two prover workers sharing a GPU stage one proof while the other's kernels run; otherwise
   (or when the memory went meanwhile) it happens with the device held, and under a streaming plan
   what it uploads first (a compiled proof's witness, else a, b, c) is then copied into the key's
   pinned buffer before the lock, so that only the copy engine's transfer is left to do with the
   device held (`cuzk.backends.cuda.staging`);
2. the compute stream waits only for a, b, c, computes H (7 NTTs) and the H MSM while another
   thread stages the witness upload;
3. the A and B scalars are selected from the witness on the device (the host only checks sizes);
   the L, A, B_G1 and B_G2 MSMs skip scalars 0, add the bases of scalars 1, and run Pippenger on
   the rest (the split of B is shared by B_G1 and B_G2); with all bases resident, B_G2 runs on a
   stream (and host thread) of its own beside the three G1 MSMs;
4. each phase drops its buffers as soon as it ends (they return to CuPy's pool for the next phase);
   between H and the H MSM, and after the H MSM, a proof of higher priority waiting for the device
   is let through when the memory plan has room for both (`_preemption_point`, docs/daemon.md);
5. the MSMs' window sums are copied to the host, and the proof releases the device before they are
   finished into points there. Read-backs between kernels wait for their stream first
   (`KernelModule.to_host`), so that they never stall the other proof's CUDA calls.

Keys: `load_key` plans the key within the device's memory (`cuzk.backends.cuda.plan`, with
`[gpus] memory_limit` a cap) and converts the five base vectors to device form once. In the plan's
resident mode all stay on the device and a proof runs as above. In its streaming mode (small cards)
the vectors that do not fit are kept in pinned host memory in device form, every MSM runs in
batches whose working memory fits (the split MSMs merge their batches' other scalars into few
MSMs), the streamed batches go up on a copy stream of their own, each while the batch before it
computes, across vectors (two device buffers), the witness goes up only after H has freed
a, b, c, and B's G2 MSM runs after the G1 ones. A key the plan cannot fit is refused when it is
loaded (`DeviceTooSmallError`), and a proof that still meets an out-of-memory error is retried
once with a plan that holds less (`DevicePlan.smaller`), counted in `oom_retries`.

Compiled circuits (`prove_compiled`): only the witness goes up; a, b, c are computed on the device by
the sparse products of kernels/spmv.cu (`cuzk.backends.cuda.spmv`) straight into the H buffers, then
checked there (canonical witness, a·b = c per row). The circuit's matrices stay resident between
proofs when the memory plan allows (`load_compiled`), otherwise each proof uploads one at a time.
"""

from __future__ import annotations

import functools
import gc
import hashlib
import logging
import os
import threading
import time
import traceback
import weakref
from collections.abc import Callable, Mapping, MutableMapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from cuzk.backends.base import DeviceInfo, ProverBackend
from cuzk.backends.cuda.available import cuda_available
from cuzk.backends.cuda.deferred import complete_on_device
from cuzk.backends.cuda.device import MemoryPlan, ahead_fits, memory_info, properties
from cuzk.backends.cuda.fixed_base import DeviceFixedBase
from cuzk.backends.cuda.module import get_module
from cuzk.backends.cuda.msm import AFFINE_WORDS, DeviceMsm, HostPartial, MergedTails
from cuzk.backends.cuda.ntt import DeviceNtt
from cuzk.backends.cuda.plan import (
    CONTEXT_BYTES,
    FR_BYTES,
    DevicePlan,
    DeviceTooSmallError,
    KeyShape,
    Products,
    format_gib,
    plan_device,
    products_fit,
    resident_reserve,
    stream_rows,
    tail_capacity,
)
from cuzk.backends.cuda.poseidon_witness import DevicePoseidonPaths
from cuzk.backends.cuda.runtime import get_cupy, get_cupyx
from cuzk.backends.cuda.sha256_witness import DeviceSha256Witness
from cuzk.backends.cuda.shared_pinned import SharedHostCopy, room_for
from cuzk.backends.cuda.shared_pinned import root as shared_root
from cuzk.backends.cuda.shared_pinned import sweep as sweep_shared_copies
from cuzk.backends.cuda.spmv import DeviceCompiled, DeviceSpmv, largest_matrix_bytes, matrix_bytes
from cuzk.backends.cuda.staging import Filled, HostStaging, Mark, staging_bytes
from cuzk.backends.device_lock import PriorityLock, current_priority
from cuzk.curve.points import G1Point, G2Point
from cuzk.errors import CuzkError
from cuzk.field.constants import FR_GENERATOR, R_MODULUS
from cuzk.field.limbs import as_limb_array
from cuzk.groth16 import prover
from cuzk.groth16.assignment import Assignment
from cuzk.groth16.formats.params_file import vk_to_bytes
from cuzk.groth16.keys import HBasis, ProvingKey
from cuzk.groth16.proof import Proof
from cuzk.r1cs.compiled import PART_ROWS, CompiledCircuit, CompiledMatrix
from cuzk.witness_gen.deferred import DeferredWitness

log = logging.getLogger("cuzk.backends.cuda")

#: cudaError / CUresult codes after which a context is unusable (the same numbers in both APIs):
#: ECC uncorrectable, assert, hardware stack error, illegal instruction, misaligned address,
#: invalid address space, invalid PC, launch failure, illegal address.
STICKY_CUDA_ERRORS = frozenset({214, 700, 710, 714, 715, 716, 717, 718, 719})

_STAGE_BYTES = 64 << 20
#: How often a device phase waiting on H checks for a proof that outranks it: well under a kernel's
#: length, and the check is one uncontended mutex.
PREEMPT_POLL_S = 0.0005
_STAGE_THREADS = 8
_QUERIES = (("h", "g1"), ("l", "g1"), ("a", "g1"), ("b_g1", "g1"), ("b_g2", "g2"))
_GROUP = dict(_QUERIES)


#: Host memory a streaming plan's pinned copies must leave free (pinned pages cannot be swapped or
#: reclaimed, so a host that pins its last gigabytes has its processes killed instead).
HOST_PIN_SPARE = 4 << 30


def _words(v: np.ndarray) -> np.ndarray:
    """Field elements (limb arrays) as the (n, 8) u32 words they go up as."""
    return np.ascontiguousarray(v).view(np.uint32).reshape(-1, 8)


def _host_available() -> int:
    """Host memory that may still be pinned: MemAvailable, bounded by the process's cgroup memory limits
    (a container's, a systemd unit's: pinned pages count against them), less `HOST_PIN_SPARE`."""
    import psutil

    from cuzk.config.host import memory_available

    limit = memory_available(psutil.virtual_memory().available)
    return max(0, (limit.available if limit is not None else 0) - HOST_PIN_SPARE)


def _empty_pinned(backend: Any, specs: list[tuple[tuple[int, ...], np.dtype]], what: str,
                  otherwise: str) -> list[np.ndarray] | None:
    """Empty pinned host arrays of these (shape, dtype)s for `what` on `backend`'s device; None, with a
    warning that says `otherwise` happens, when they would leave the host less than `HOST_PIN_SPARE`
    available or pinned memory cannot be had."""
    need = sum(int(np.prod(shape)) * dtype.itemsize for shape, dtype in specs)
    available = _host_available()
    if need > available:
        log.warning("device %d: %s of %s would not leave this host %s of memory to spare (%s available): they "
                    "stay unpinned, and %s", backend.device_id, format_gib(need), what, format_gib(HOST_PIN_SPARE),
                    format_gib(available + HOST_PIN_SPARE), otherwise)
        return None
    try:
        return [get_cupyx().empty_pinned(shape, dtype=dtype) for shape, dtype in specs]
    except (backend._cp.cuda.runtime.CUDARuntimeError, MemoryError) as err:
        log.warning("device %d: no pinned host memory for %s of %s (%s): %s", backend.device_id, format_gib(need),
                    what, err, otherwise)
        return None


class _BaseStream:
    """The streamed vectors' bases of one proof, batch after batch in the order its MSMs take them,
    through two device buffers in turn (`plan.stream_buffers` counts them). Each batch's upload is
    queued on the bases' copy stream when the batch before it is taken, behind the release of the
    batch that last used its buffer: so each batch goes up while the one before computes, and the
    next vector's first batch while this vector's last does. A vector without a pinned copy is
    converted from the key's bytes (`raw`) on the compute stream when taken instead."""

    def __init__(self, backend: CudaBackend, dk: _DeviceKey, raw: Mapping[str, np.ndarray],
                 names: tuple[str, ...]) -> None:
        cp = backend._cp
        self.cp, self.msm, self.dk, self.copy, self.raw = cp, backend.msm, dk, backend._bases_copy, raw
        self.compute = cp.cuda.get_current_stream()
        self.batches: list[tuple[str, int, int]] = []
        for name in names:
            n = dk.shape.length(name)
            rows = stream_rows(_GROUP[name], dk.plan.batch or n)
            self.batches += [(name, lo, min(n, lo + rows)) for lo in range(0, n, rows)]
        nbytes = max((self._bytes(j) for j in range(len(self.batches))), default=0)
        self.bufs = [cp.empty(nbytes, dtype=cp.uint8) for _ in range(min(2, len(self.batches)))]
        self.copy.wait_event(self.compute.record())  # the buffers' memory may have been in use on this stream
        self.released: list[Any] = [None] * len(self.bufs)
        self.ready: dict[int, Any] = {}
        self.taken = self.queued = 0
        self._queue()

    def _bytes(self, j: int) -> int:
        name, lo, hi = self.batches[j]
        return (hi - lo) * AFFINE_WORDS[_GROUP[name]] * 4

    def _view(self, j: int) -> Any:
        name, lo, hi = self.batches[j]
        words = AFFINE_WORDS[_GROUP[name]]
        return self.bufs[j % len(self.bufs)][: self._bytes(j)].view(self.cp.uint32).reshape(hi - lo, words)

    def _queue(self) -> None:
        """Queue the next batch's upload (none for a vector without a pinned copy)."""
        j = self.queued
        if j >= len(self.batches):
            return
        self.queued += 1
        name, lo, hi = self.batches[j]
        host = self.dk.host.get(name)
        if host is None:
            self.ready[j] = None
            return
        slot = j % len(self.bufs)
        if self.released[slot] is not None:
            self.copy.wait_event(self.released[slot])
        runtime = self.cp.cuda.runtime
        runtime.memcpyAsync(self.bufs[slot].data.ptr, host[lo:hi].ctypes.data, self._bytes(j),
                            runtime.memcpyHostToDevice, self.copy.ptr)
        self.ready[j] = self.copy.record()

    def take(self, name: str, lo: int, hi: int) -> tuple[Any, Any]:
        """The next batch, which must be `name`'s [lo, hi): its bases on the device and the event of
        their upload (None when already there)."""
        j = self.taken
        if j >= len(self.batches) or self.batches[j] != (name, lo, hi):
            got = self.batches[j] if j < len(self.batches) else "none"
            raise ValueError(f"streamed bases taken out of order: {name} [{lo}, {hi}) asked, {got} next")
        self.taken += 1
        if self.queued == j + 1:  # its buffer's last batch, j - 1, has been released
            self._queue()
        view, ready = self._view(j), self.ready.pop(j)
        if self.dk.host.get(name) is None:
            self.msm.upload_bases(_GROUP[name], self.raw[name][lo:hi], out=view)
        return view, ready

    def release(self) -> None:
        """The batch last taken has all its work queued on the compute stream."""
        self.released[(self.taken - 1) % len(self.bufs)] = self.compute.record()

    def close(self) -> None:
        """Wait for the uploads still queued (a proof that failed midway), so that no copy writes into
        the buffers once the pool has given their memory to another allocation."""
        self.copy.synchronize()


class _BatchSelect:
    """The scalars of a density-filtered MSM over all inputs (A's: inputs, then aux[mask]), gathered
    for each batch when sliced: rows [lo, hi) of what `CudaBackend._select` would make whole. Holds
    the selection's u32 indices (4 bytes an entry)."""

    def __init__(self, cp: Any, inputs: Any, aux: Any, mask: Any, kernels: Any) -> None:
        self.cp, self.inputs, self.aux = cp, inputs, aux
        self.index = kernels.flatnonzero(mask).astype(cp.uint32)
        self.shape = (inputs.shape[0] + self.index.shape[0], 8)

    def __getitem__(self, rows: slice) -> Any:
        cp, head = self.cp, self.inputs.shape[0]
        lo, hi = max(0, rows.start or 0), min(self.shape[0], rows.stop)
        out = cp.empty((max(0, hi - lo), 8), dtype=cp.uint32)
        k = max(0, min(hi, head) - lo)
        if k:
            out[:k] = self.inputs[lo:lo + k]
        if hi > max(lo, head):
            cp.take(self.aux, self.index[max(lo, head) - head:hi - head], axis=0, out=out[k:])
        return out


class CudaUnavailableError(CuzkError):
    """CUDA cannot be used here (no CuPy, no device, broken driver)."""


class CudaDeviceError(CuzkError):
    """A CUDA call failed during one job; the job fails, the backend stays usable if the device is."""


@dataclass
class _DeviceKey:
    """A proving key's bases in device form (None for a vector that is streamed per MSM), the
    streamed ones' pinned host copies in device form (None: converted from the key's bytes per
    batch, when pinned memory could not be had), the key's memory plan, and under a streaming plan the
    pinned buffer its proofs copy their inputs into before they take the device (`_prestage`)."""

    plan: DevicePlan
    shape: KeyShape
    bases: dict[str, Any] = field(default_factory=dict)
    host: dict[str, Any] = field(default_factory=dict)
    staging: HostStaging | None = None
    #: The host copies in `host` that this host's device processes share (`shared_pinned`).
    shared: list[SharedHostCopy] = field(default_factory=list)

    def nbytes(self) -> int:
        return sum(int(b.nbytes) for b in self.bases.values() if b is not None)

    def host_bytes(self) -> int:
        return sum(int(b.nbytes) for b in self.host.values() if b is not None)


@dataclass(frozen=True)
class _CompiledWitness:
    """What `prove_compiled` proves from: the witness, the compiled circuit's densities, no a, b, c."""

    compiled: CompiledCircuit
    inputs: np.ndarray
    aux: np.ndarray
    check: bool
    #: Gadgets whose aux rows `aux` leaves unwritten: written on the device at staging.
    deferred: DeferredWitness | None = None

    @property
    def num_constraints(self) -> int:
        return self.compiled.num_constraints

    @property
    def a_aux_density(self) -> np.ndarray:
        return self.compiled.a_aux_density

    @property
    def b_input_density(self) -> np.ndarray:
        return self.compiled.b_input_density

    @property
    def b_aux_density(self) -> np.ndarray:
        return self.compiled.b_aux_density


class _PinnedUploader:
    """Host -> device copies on one stream through two pinned staging buffers: the CPU fills one
    while the DMA engine drains the other, so pageable numpy arrays upload at close to PCIe speed.
    Each staging copy is split over `threads` threads (numpy copies release the GIL): one thread's
    memcpy is far slower than the copy engine (figures: benchmarks/HISTORY.md, "Figures cut from code
    comments")."""

    def __init__(self, cp: Any, stream: Any, chunk: int = _STAGE_BYTES, threads: int = _STAGE_THREADS) -> None:
        self.cp = cp
        self.stream = stream
        self.chunk = chunk
        self._host = [get_cupyx().empty_pinned(chunk, dtype=np.uint8) for _ in range(2)]
        self._done: list[Any] = [None, None]
        self._parts = max(1, min(threads, os.cpu_count() or 1))
        self._pool = ThreadPoolExecutor(max_workers=self._parts, thread_name_prefix="cuzk-stage") \
            if self._parts > 1 else None

    def host_copy(self, dst: np.ndarray, src: np.ndarray) -> None:
        """dst[:] = src (1-D, same dtype) split over the uploader's threads."""
        size = src.shape[0]
        if self._pool is None or size < (1 << 20):
            dst[:size] = src
            return
        bounds = np.linspace(0, size, self._parts + 1).astype(int).tolist()

        def part(k: int) -> None:
            dst[bounds[k]:bounds[k + 1]] = src[bounds[k]:bounds[k + 1]]

        list(self._pool.map(part, range(self._parts)))

    def upload(self, dst: Any, src: np.ndarray) -> None:
        """Queue dst[...] = src on the stream (dst a C-contiguous device array of the same bytes)."""
        flat = np.ascontiguousarray(src).reshape(-1).view(np.uint8)
        if flat.nbytes != dst.nbytes:
            raise ValueError(f"upload size mismatch: {flat.nbytes} host bytes, {dst.nbytes} device bytes")
        runtime = self.cp.cuda.runtime
        for k, off in enumerate(range(0, flat.nbytes, self.chunk)):
            slot = k & 1
            if self._done[slot] is not None:
                self._done[slot].synchronize()
            size = min(self.chunk, flat.nbytes - off)
            self.host_copy(self._host[slot], flat[off:off + size])
            runtime.memcpyAsync(dst.data.ptr + off, self._host[slot].ctypes.data, size,
                                runtime.memcpyHostToDevice, self.stream.ptr)
            self._done[slot] = self.stream.record()


@dataclass
class _Lane:
    """A copy stream and its pinned uploader, taken by one proof for its whole duration: proofs
    staged side by side never share staging buffers or copy queues."""

    copy: Any
    uploader: _PinnedUploader


@dataclass
class _Staged:
    """A proof's device inputs, allocated on its lane's stream and queued for upload there."""

    abc: list[Any]
    wit: dict[str, Any]
    host_wit: dict[str, np.ndarray]
    copy_begin: Any
    abc_done: Any  #: a, b, c are up (compiled: the witness is up)
    queue_s: float  #: host time spent queuing those copies (pinned staging included)


@dataclass
class _WitnessUpload:
    """A witness upload running on a host thread of its own (None: nothing to upload)."""

    thread: threading.Thread | None = None
    done: list[Any] = field(default_factory=list)  #: the lane's event once it is up
    seconds: list[float] = field(default_factory=list)  #: host time the staging copies took
    failures: list[BaseException] = field(default_factory=list)

    def join(self) -> None:
        if self.thread is not None:
            self.thread.join()


class CudaBackend(ProverBackend):
    """Proofs on one CUDA device. The device runs one proof's kernels at a time (`_lock`); the host
    side of a proof (staging its inputs, assembling the result) runs outside that lock, so callers
    on several threads (the engine's prover workers) overlap it with each other's device work."""

    #: The engine's workers need not hold a device lock around `prove`: this backend takes its own
    #: around the device phase only.
    locks_device_itself = True

    name = "cuda"

    def __init__(self, device_id: int = 0, *, memory_margin: int | None = None,
                 memory_limit: int | None = None, memory_share: int = 1) -> None:
        """`memory_limit`: bytes of device memory to plan with and use at most (None: what is free);
        `memory_share`: with no limit, plan with total memory / memory_share (several logical
        devices, each its own process, on this GPU)."""
        reason = cuda_available()
        if reason is not None:
            raise CudaUnavailableError(reason)
        cupy = get_cupy()
        self._cp = cupy
        self.device_id = device_id
        self._device = cupy.cuda.Device(device_id)
        with self._device:
            self.kernels = get_module(device_id)
            self.ntt = DeviceNtt(self.kernels)
            self.msm = DeviceMsm(self.kernels)
            self._compute = cupy.cuda.Stream(non_blocking=True)
            self._g2 = cupy.cuda.Stream(non_blocking=True)  # B's G2 MSM, beside the G1 MSMs
            self._copy = cupy.cuda.Stream(non_blocking=True)
            self._bases_copy = cupy.cuda.Stream(non_blocking=True)  # streamed bases, beside the MSMs
            self._uploader = _PinnedUploader(cupy, self._copy)
        if memory_limit is None and memory_share > 1:
            memory_limit = properties(device_id).total_memory // memory_share
        self.plan = MemoryPlan(device_id, memory_margin, memory_limit)
        self.props = properties(device_id)
        swept = sweep_shared_copies()
        if swept:
            log.info("device %d: removed %d shared host copies that no live process held", device_id, len(swept))
        self._keys: weakref.WeakKeyDictionary[ProvingKey, _DeviceKey] = weakref.WeakKeyDictionary()
        self._spmv: DeviceSpmv | None = None
        self._sha256_witness: DeviceSha256Witness | None = None
        self._poseidon_paths: DevicePoseidonPaths | None = None
        self._fixed_base: DeviceFixedBase | None = None
        #: Compiled circuits by fingerprint (CompiledCircuit holds arrays: it cannot be a dict key itself).
        self._compiled: dict[str, DeviceCompiled] = {}
        self._lock = PriorityLock()  # device work: keys, compiled circuits, a proof's device phase
        self._lanes: list[_Lane] = []  # idle lanes, reused by later proofs
        self._lanes_lock = threading.Lock()  # the lanes and the two byte counts below
        self._running_reserve = 0  # proof_working_bytes of the proof holding the device (0: none)
        self._running_base = 0  # the pool's bytes in use when that proof took the device
        self._ahead_since_begin = 0  # bytes staged ahead by other proofs since then
        # Device bytes that proofs staging ahead are allocating now; once allocated they are in use,
        # so `plan.available()` already lacks them.
        self._ahead_bytes = 0
        #: What proofs that yielded the device mid-phase (`_preemption_point`) may still allocate
        #: when they take it back: kept out of what others stage ahead meanwhile.
        self._suspended = 0
        #: What each proof waiting for the device will still allocate once it has it, by thread.
        self._waiting_need: dict[int, int] = {}
        self.preemptions = 0  # device phases that let a higher-priority proof through mid-phase
        self.preemptions_refused = 0  # ... and that could not, the memory for both not being free
        self.current_job: str | None = None
        self.oom_retries = 0  # proofs retried with a smaller plan after an out-of-memory error
        self.peak_pool = 0  # most bytes CuPy's pool held, sampled at a proof's phase boundaries

    # -- ProverBackend --------------------------------------------------------------------------------

    def devices(self) -> list[DeviceInfo]:
        free, total = memory_info(self.device_id)
        p = self.props
        return [DeviceInfo(name=p.name, kind="cuda", memory_total=total, memory_free=free,
                           extra={"device_id": str(self.device_id), "multiprocessors": str(p.multiprocessors),
                                  "compute_capability": p.compute_capability,
                                  "resident_key_bytes": str(sum(k.nbytes() for k in self._keys.values())),
                                  "resident_compiled_bytes": str(sum(c.nbytes for c in self._compiled.values())),
                                  "current_job": self.current_job or ""})]

    def memory_plan(self, names: Mapping[ProvingKey, str] | None = None) -> dict[str, Any]:
        """The device's plan for the status: the limit, the budget, and per key (named by `names`,
        the device process's circuit ids) what is resident, what is streamed, the working reserve;
        the peak the pool reached, the OOM retries, and the device phases that let a proof of higher
        priority through mid-phase (`preemptions`) or could not for memory (`preemptions_refused`).
        A key's `products` says where its compiled circuit's a, b, c are computed ("device", "host",
        None before one is loaded); with "host", `host_mapped_compiled_bytes` are the compiled file's
        matrices that the host products read."""
        keys = []
        for pk, dk in list(self._keys.items()):
            p = dk.plan
            owned = [c for c in list(self._compiled.values()) if c.owner is pk]
            matrices = sum(c.host_bytes for c in owned)
            staging = dk.staging
            # Where its compiled circuit's a, b, c are computed (prove_compiled's choice); None: none loaded.
            products = None if not owned else "device" if all(
                products_fit(p, dk.shape, largest_matrix_bytes(c.compiled)) for c in owned) else "host"
            keys.append({"circuit_id": (names or {}).get(pk, ""), "mode": p.mode, "resident": list(p.resident),
                         "streamed": list(p.streamed),
                         "resident_bytes": p.resident_bytes(dk.shape), "streamed_bytes": p.streamed_bytes(dk.shape),
                         "host_pinned_bytes": dk.host_bytes() + matrices + (staging.nbytes if staging else 0),
                         "host_pinned_compiled_bytes": matrices,
                         # Of the key's pinned bases, those this host's device processes share (counted once).
                         "host_pinned_shared_bytes": sum(c.nbytes for c in dk.shared),
                         "host_pinned_staging_bytes": staging.nbytes if staging else 0,
                         # Host products read the compiled file's matrices on every proof: pages
                         # the host must keep beside the pinned memory, or read again from disk.
                         "host_mapped_compiled_bytes": sum(matrix_bytes(c.compiled) for c in owned)
                         if products == "host" else 0,
                         "inputs_prestaged": staging.fills if staging else 0,
                         "inputs_prestage_missed": staging.missed if staging else 0,
                         "working_reserve": p.reserve, "products": products,
                         "msm_batch": p.batch, "domain": dk.shape.domain})
        return {"memory_limit": self.plan.limit, "budget": self.plan.budget(), "margin": self.plan.margin,
                "context_reserve": CONTEXT_BYTES if self.plan.limit is not None else None,
                "keys": keys, "peak_pool_bytes": max(self.peak_pool, self.plan.pool_total()),
                "oom_retries": self.oom_retries, "preemptions": self.preemptions,
                "preemptions_refused": self.preemptions_refused}

    def _sample_peak(self) -> None:
        self.peak_pool = max(self.peak_pool, self.plan.pool_total())

    def _plan_key(self, pk: ProvingKey, shape: KeyShape, products: Products | None = None) -> DevicePlan:
        """The key's plan within what the other keys leave: their resident bases are held, and the
        largest reserve of all keys must still fit beside every key's resident bases (proofs of
        different keys take the device one at a time). `products`: the compiled circuit its proofs
        compute, whose a, b, c the plan places (`plan_device`)."""
        others = [dk for other, dk in self._keys.items() if other is not pk]
        held = sum(dk.nbytes() for dk in others)
        budget = self.plan.budget() - held
        limit_note = (f"memory_limit = {format_gib(self.plan.limit)}" if self.plan.limit is not None
                      else f"{format_gib(self.plan.budget() + CONTEXT_BYTES)} free")
        try:
            plan = plan_device(shape, budget, products)
            other_reserve = max((dk.plan.reserve for dk in others), default=0)
            over = plan.resident_bytes(shape) + other_reserve - budget
            if over > 0:
                plan = plan_device(shape, budget - over, products)
        except DeviceTooSmallError as err:
            held_note = f" ({format_gib(held)} held by other keys)" if held else ""
            raise DeviceTooSmallError(f"{err} with {limit_note}{held_note} (a key of {format_gib(shape.key_bytes)}, "
                                      f"domain 2^{shape.domain.bit_length() - 1})") from None
        return plan

    def load_key(self, pk: ProvingKey, device_bases: Mapping[str, Any] | None = None,
                 plan: DevicePlan | None = None, compiled: CompiledCircuit | None = None) -> None:
        """Plan pk within the device's memory and make the plan's vectors resident (the rest are kept
        in pinned host memory and streamed per MSM batch). Raises DeviceTooSmallError, naming the
        memory needed, when no plan fits. `compiled`: the compiled circuit pk's proofs will compute
        their a, b, c from, so the plan leaves them room on the device where that is faster.

        `device_bases` (query name -> (len, words) uint32 array in the form `DeviceMsm.upload_bases`
        makes, on the device or in (pinned) host memory) are adopted as they are instead of converting
        pk's bytes: a key made on the device, such as the benchmarks' tiled synthetic keys, never has
        to exist in host memory in blstrs form. `plan` (tests, benchmarks) replaces the planned one."""
        given = dict(device_bases or {})
        unknown = sorted(set(given) - {name for name, _ in _QUERIES})
        if unknown:
            raise ValueError(f"unknown query names in device_bases: {', '.join(unknown)}")
        for name, group in _QUERIES:
            arr = given.get(name)
            if arr is not None and tuple(arr.shape) != (len(getattr(pk, name)), AFFINE_WORDS[group]):
                raise ValueError(f"device bases for {name} must have shape ({len(getattr(pk, name))}, "
                                 f"{AFFINE_WORDS[group]}), got {tuple(arr.shape)}")
        with self._lock, self._device:
            if pk in self._keys:
                return
            self.plan.release_cached()
            shape = KeyShape.of(pk)
            products = None if compiled is None else Products(
                compiled.num_constraints, largest_matrix_bytes(compiled), matrix_bytes(compiled))
            plan = plan if plan is not None else self._plan_key(pk, shape, products)
            dk = _DeviceKey(plan, shape)
            key_id = hashlib.sha256(vk_to_bytes(pk.vk)).hexdigest()[:20]
            for name, group in _QUERIES:
                raw, ready = getattr(pk, name).raw, given.get(name)
                on_host = isinstance(ready, np.ndarray)
                if name in plan.resident:
                    dk.bases[name] = (self.msm.upload_bases(group, raw) if ready is None
                                      else self._cp.asarray(ready) if on_host else ready)
                else:
                    dk.bases[name] = None
                    dk.host[name] = ready if on_host else self._pinned_bases(group, raw, ready, dk, f"{key_id}-{name}")
            self._cp.cuda.Device().synchronize()
            self._keys[pk] = dk
            if plan.mode == "streaming":
                where = "" if products is None else (
                    f", a, b, c on the {'device' if products_fit(plan, shape, products.largest_matrix) else 'host'}")
                log.info("device %d: key of domain 2^%d planned for streaming within %s: resident %s, streamed %s "
                         "(%s a proof), MSM batches of 2^%d, working reserve %s%s", self.device_id,
                         shape.domain.bit_length() - 1, format_gib(plan.budget), ", ".join(plan.resident) or "none",
                         ", ".join(plan.streamed), format_gib(plan.streamed_bytes(shape)),
                         (plan.batch or 1).bit_length() - 1, format_gib(plan.reserve), where)

    def _pinned_bases(self, group: str, raw: np.ndarray, device: Any = None, dk: _DeviceKey | None = None,
                      shared: str | None = None) -> Any:
        """A streamed vector's bases in device form in pinned host memory (from `device` when given,
        else converted from the key's bytes chunk by chunk on the device); None when pinned memory
        cannot be had, so each batch converts from `raw` instead. With `shared` (the vector's name on
        this host) the copy is the one this host's device processes share (`shared_pinned`), kept
        in `dk.shared`; a private one where it cannot be."""
        n = raw.shape[0]
        shape, dtype = (n, AFFINE_WORDS[group]), np.dtype(np.uint32)

        def fill(host: np.ndarray) -> None:
            step = 1 << 22
            for lo in range(0, n, step):
                hi = min(n, lo + step)
                dev = device[lo:hi] if device is not None else self.msm.upload_bases(group, raw[lo:hi])
                dev.get(out=host[lo:hi])
                del dev

        nbytes = n * AFFINE_WORDS[group] * 4
        if shared is not None and dk is not None and room_for(shared, nbytes):
            joining = (shared_root() / shared / "whole").exists()
            if joining or nbytes <= _host_available():
                runtime = self._cp.cuda.runtime
                try:
                    copy = SharedHostCopy.open(shared, shape, dtype, fill, lambda ptr, size: runtime.hostRegister(
                        ptr, size, 0), runtime.hostUnregister)
                    dk.shared.append(copy)
                    return copy.array
                except (OSError, self._cp.cuda.runtime.CUDARuntimeError) as err:
                    log.warning("device %d: no shared host copy of the %s bases (%s): a copy of its own instead",
                                self.device_id, group, err)
        pinned = _empty_pinned(self, [(shape, dtype)], f"{group} bases",
                               "each proof converts them from the key's bytes")
        if pinned is None:
            return None
        fill(pinned[0])
        return pinned[0]

    def unload_key(self, pk: ProvingKey) -> None:
        with self._lock, self._device:
            dk = self._keys.pop(pk, None)
            # A compiled circuit's residency was planned beside this key: it goes with it (and its pinned
            # matrices with it), and the next proof prepares it again beside what is loaded then.
            for key in [k for k, c in self._compiled.items() if c.owner is pk]:
                del self._compiled[key]
            if dk is not None:
                dk.bases.clear()
                dk.host.clear()
                for copy in dk.shared:
                    copy.release()
                self.plan.release_cached()

    def resident(self, pk: ProvingKey) -> dict[str, bool]:
        """Which of the key's vectors are resident on the device (the rest are streamed)."""
        dk = self._keys.get(pk)
        return {name: dk is not None and dk.bases.get(name) is not None for name, _ in _QUERIES}

    def key_plan(self, pk: ProvingKey) -> DevicePlan | None:
        """The memory plan of a loaded key (None when it is not loaded)."""
        dk = self._keys.get(pk)
        return dk.plan if dk is not None else None

    # -- parameter generation ---------------------------------------------------------------------------

    @property
    def fixed_base(self) -> DeviceFixedBase:
        """The fixed-base multiplication kernels (the "setup" unit, compiled on first use: seconds)."""
        if self._fixed_base is None:
            with self._device:
                self._fixed_base = DeviceFixedBase(get_module(self.device_id, "setup"))
        return self._fixed_base

    def fixed_base_g1(self, base: G1Point, scalars: np.ndarray, out: np.ndarray) -> None:
        """`ProverBackend.fixed_base_g1` on the device (cuzk.backends.cuda.fixed_base): the same bytes."""
        self._fixed_base_on_device("g1", base, scalars, out)

    def fixed_base_g2(self, base: G2Point, scalars: np.ndarray, out: np.ndarray) -> None:
        """`ProverBackend.fixed_base_g2` on the device: the same bytes."""
        self._fixed_base_on_device("g2", base, scalars, out)

    def _fixed_base_on_device(self, group: str, base: G1Point | G2Point, scalars: np.ndarray,
                              out: np.ndarray) -> None:
        with self._lock, self._device:
            try:
                self.fixed_base.run(group, base, scalars, out)
            except (self._cp.cuda.runtime.CUDARuntimeError, self._cp.cuda.driver.CUDADriverError,
                    self._cp.cuda.memory.OutOfMemoryError) as exc:
                raise CudaDeviceError(f"CUDA error on device {self.device_id}: {exc}") from exc

    # -- compiled circuits ------------------------------------------------------------------------------

    @property
    def spmv(self) -> DeviceSpmv:
        """The sparse-product kernels (the "synthesis" unit, compiled on first use: seconds)."""
        if self._spmv is None:
            with self._device:
                self._spmv = DeviceSpmv(get_module(self.device_id, "synthesis"))
        return self._spmv

    @property
    def sha256_witness(self) -> DeviceSha256Witness:
        """The SHA-256 witness kernels (the "witness" unit, compiled on first use: seconds)."""
        if self._sha256_witness is None:
            with self._device:
                self._sha256_witness = DeviceSha256Witness(get_module(self.device_id, "witness"))
        return self._sha256_witness

    @property
    def poseidon_paths(self) -> DevicePoseidonPaths:
        """The Poseidon Merkle-path witness kernels (the "poseidon" unit, compiled on first use: ~40 s
        of NVRTC, then cached on disk)."""
        if self._poseidon_paths is None:
            with self._device:
                self._poseidon_paths = DevicePoseidonPaths(get_module(self.device_id, "poseidon"))
        return self._poseidon_paths

    def prepare_kernels(self) -> dict[str, float]:
        """The units a proof may reach besides "curve" (loaded at construction): compiled circuits'
        products, and the SHA-256 and Poseidon witness kernels of deferred openings. Left to first
        use, a unit's NVRTC compile (the Poseidon unit's takes minutes) would run inside a device
        phase, holding the device lock past a WindowPoSt deadline (benchmarks/HISTORY.md, "kernels
        before ready"). The units compile side by side, one NVRTC thread each; a kernel cache or
        ahead-of-time cubins make this a load."""
        units = {"synthesis": lambda: self.spmv, "witness": lambda: self.sha256_witness,
                 "poseidon": lambda: self.poseidon_paths}

        def timed(load: Any) -> float:
            start = time.perf_counter()
            load()
            return time.perf_counter() - start

        with ThreadPoolExecutor(len(units), thread_name_prefix="cuzk-kernels") as pool:
            futures = {unit: pool.submit(timed, load) for unit, load in units.items()}
            return {unit: f.result() for unit, f in futures.items()}

    @staticmethod
    def _compiled_key(compiled: CompiledCircuit) -> str:
        return compiled.fingerprint or compiled.compute_fingerprint()

    def load_compiled(self, compiled: CompiledCircuit, pk: ProvingKey | None = None) -> tuple[bool, bool, bool]:
        """Make a compiled circuit's A, B, C resident where the memory plan allows, keeping a proof's
        working memory free (`pk`'s when given, else its a, b, c and witness); idempotent. Returns
        which of A, B, C are resident (the others are uploaded by each proof)."""
        key = self._compiled_key(compiled)
        with self._lock, self._device:
            prepared = self._compiled.get(key)
            if prepared is None:
                rows, nvars = compiled.num_constraints, compiled.num_variables
                dk = self._keys.get(pk) if pk is not None else None
                if dk is not None and dk.plan.mode == "streaming":
                    # Beside a streaming plan's working memory, or the products' own (witness, a, b, c).
                    reserve = max(dk.plan.reserve, 32 * (3 * pk.domain_size + nvars) + largest_matrix_bytes(compiled))
                else:
                    reserve = self.proof_working_bytes(pk) if pk is not None else 32 * (3 * rows + nvars)
                self.plan.release_cached()
                resident = self.plan.fits(matrix_bytes(compiled), reserve)
                prepared = self.spmv.prepare(compiled, resident, self._upload_now)
                self._cp.cuda.Device().synchronize()  # the long-row lists were made on the default stream
                # Pinned copies only where proofs will upload them: a plan whose products do not fit
                # computes them on the host, from the compiled file.
                on_device = dk is None or products_fit(dk.plan, dk.shape, largest_matrix_bytes(compiled))
                if not resident and on_device:
                    prepared.host = [self._pinned_matrix(m, name) for m, name in
                                     zip((compiled.a, compiled.b, compiled.c), "ABC", strict=True)]
                if dk is not None and dk.plan.mode == "streaming":
                    self._host_staging(dk, compiled, on_device)
                prepared.owner = pk
                self._compiled[key] = prepared
            return prepared.resident  # type: ignore[return-value]

    def _host_staging(self, dk: _DeviceKey, compiled: CompiledCircuit, on_device: bool) -> None:
        """Give a streaming key the pinned buffer its proofs of `compiled` copy their inputs into
        before they take the device (`cuzk.backends.cuda.staging`): the witness when the products run
        on the device (`on_device`), else the a, b, c the host computed. Kept when the key has one
        large enough; none when it cannot be pinned (proofs then stage with the device held)."""
        nin, naux, rows = compiled.num_inputs, compiled.num_aux, compiled.num_constraints
        sizes = [32 * nin, 32 * naux, naux, naux, nin] if on_device else [32 * rows] * 3
        nbytes = staging_bytes(sizes)
        if dk.staging is not None and dk.staging.nbytes >= nbytes:
            return
        what = "witness" if on_device else "a, b, c"
        arrays = _empty_pinned(self, [((nbytes,), np.dtype(np.uint8))], f"{what} staging",
                               f"each proof copies its {what} with the device held")
        if arrays is not None:
            dk.staging = HostStaging(arrays[0])

    def _pinned_matrix(self, mat: CompiledMatrix, name: str) -> CompiledMatrix | None:
        """A copy of a matrix that each proof uploads, in pinned host memory; None when it cannot be
        pinned (`_empty_pinned`), so proofs upload it from the compiled file."""
        parts = (mat.row_ptr, mat.cols, mat.coeff_idx)
        arrays = _empty_pinned(self, [(a.shape, a.dtype) for a in parts], f"matrix {name}",
                               "each proof uploads it from the compiled file")
        if arrays is None:
            return None
        for dst, src in zip(arrays, parts, strict=True):
            np.copyto(dst, src)
        return CompiledMatrix(*arrays)

    def unload_compiled(self, compiled: CompiledCircuit) -> None:
        """Release what `load_compiled` made resident."""
        with self._lock, self._device:
            if self._compiled.pop(self._compiled_key(compiled), None) is not None:
                self.plan.release_cached()

    def compiled_resident(self, compiled: CompiledCircuit) -> tuple[bool, bool, bool]:
        """Which of a compiled circuit's A, B, C are resident on the device."""
        prepared = self._compiled.get(self._compiled_key(compiled))
        return prepared.resident if prepared is not None else (False, False, False)  # type: ignore[return-value]

    def _upload_now(self, host: np.ndarray, *, pinned: bool = False) -> Any:
        """A device copy of a host array through the pinned uploader (`pinned`: an array in pinned
        memory already, copied as it is, no staging), complete on return. The copy stream first waits
        for the current stream, which may still be using the reused memory."""
        cp = self._cp
        dst = cp.empty(host.shape, dtype=host.dtype)
        self._copy.wait_event(cp.cuda.get_current_stream().record())
        if host.nbytes and pinned:
            dst.set(host, stream=self._copy)
        elif host.nbytes:
            self._uploader.upload(dst, host)
        self._copy.synchronize()
        return dst

    def prove_compiled(self, pk: ProvingKey, compiled: CompiledCircuit, inputs: np.ndarray, aux: np.ndarray, *,
                       r: int | None = None, s: int | None = None, check: bool = True,
                       timings: MutableMapping[str, float] | None = None,
                       deferred: DeferredWitness | None = None) -> Proof:
        """One proof from a compiled circuit and its witness, a, b, c computed on the device (see the
        module docstring); the same proof as `prove` on `Assignment.from_compiled`. `timings` gets
        `prove`'s keys (h2d_abc = 0) plus spmv (device time of the three products) and check (host
        time of the canonical-witness and, with `check`, a·b = c checks). With `deferred` only the
        aux rows the generator wrote go up, and the deferred gadgets' aux are written on the device
        (`cuzk.backends.cuda.deferred`; part of h2d_witness), or on the host (host_witness) when the
        products are computed there."""
        inputs, aux = as_limb_array(inputs, "inputs"), as_limb_array(aux, "aux")
        compiled.check_witness(inputs.shape[0], aux.shape[0])
        if pk not in self._keys:
            self.load_key(pk, compiled=compiled)
        dk = self._keys[pk]
        if not products_fit(dk.plan, dk.shape, largest_matrix_bytes(compiled)):
            # The device cannot hold the witness, a, b, c and a matrix beside this key's resident
            # bases: the products are computed here on the host, and the proof streams from a, b, c.
            t = timings if timings is not None else {}
            start = time.perf_counter()
            if deferred is not None:  # the rows left for the device are written here, before the products
                if not aux.flags.writeable:
                    aux = aux.copy()
                deferred.complete_on_host(aux)
                t["host_witness"] = time.perf_counter() - start

            def host_products() -> tuple[Assignment, Filled | None]:
                return self._host_products(dk, compiled, inputs, aux, check, t)
            return self._guarded(pk, host_products, r, s, t, f"prove: {compiled.num_constraints} constraints "
                                                            f"(compiled {compiled.circuit_id}, products on the host)")
        witness = _CompiledWitness(compiled, inputs, aux, check, deferred)
        return self._guarded(pk, lambda: (witness, None), r, s, timings,
                             f"prove: {compiled.num_constraints} constraints (compiled {compiled.circuit_id})")

    @staticmethod
    def _host_products(dk: _DeviceKey, compiled: CompiledCircuit, inputs: np.ndarray, aux: np.ndarray, check: bool,
                       t: MutableMapping[str, float]) -> tuple[Assignment, Filled | None]:
        """a, b, c computed here, written into the key's pinned staging (`HostStaging.take`, waiting
        for another proof to hand it back, then writing each part of the rows once that proof's
        transfer has read it) when it has one, else into new arrays; the assignment and the buffer it
        holds, which `_prove` hands back once a, b, c are on their way up."""
        start = time.perf_counter()
        rows = compiled.num_constraints
        filled = (dk.staging.take({name: 32 * rows for name in "abc"}, wait=True, in_parts=True)
                  if dk.staging is not None else None)
        t["staging_wait"] = time.perf_counter() - start
        out = None if filled is None else tuple(filled.views[name].view(np.uint64).reshape(rows, 4) for name in "abc")
        ready = None if filled is None else (lambda end: filled.writable(32 * end))
        start = time.perf_counter()
        try:
            asg = Assignment.from_compiled(compiled, (inputs, aux), check=check, out=out,  # type: ignore[arg-type]
                                           ready=ready)
        except BaseException:
            if filled is not None:
                filled.release(None)
            raise
        t["host_products"] = time.perf_counter() - start
        return asg, filled

    def prove(self, pk: ProvingKey, asg: Assignment, *, r: int | None = None, s: int | None = None,
              timings: MutableMapping[str, float] | None = None) -> Proof:
        """One proof. `timings` (seconds) receives the CPU prover's keys (h, msm_h, msm_l, msm_a,
        msm_b_g1, msm_b_g2, select (here only the size checks), assemble) plus h2d_abc, h2d_witness
        (copy-stream time), upload_wait (host time staging copies), gather (the A and B scalars
        selected on the device, and B's 0/1/other split), device (the compute stream's span from the
        first H kernel to the end of the last MSM) and results (device -> host of the sums). h and
        msm_h are device times (CUDA events), the other MSM keys host time around each synchronised
        MSM; with all bases resident msm_b_g2 overlaps msm_l, msm_a and msm_b_g1 (its own stream), so
        the phases add up to more than `device`. finish: host time turning the copied window sums into
        points, after the device is released.
        Also: stage_ahead (host time staging inputs before taking the device; 0 when they were
        staged with the device held), lock_wait (time waiting for another proof's device phase)
        and device_begin (time.monotonic() when this proof took the device)."""
        return self._guarded(pk, lambda: (asg, None), r, s, timings, f"prove: {asg.num_constraints} constraints")

    def _guarded(self, pk: ProvingKey,
                 inputs: Callable[[], tuple[Assignment | _CompiledWitness, Filled | None]],
                 r: int | None, s: int | None, timings: MutableMapping[str, float] | None, job: str) -> Proof:
        """`_prove` with CUDA errors named and one retry on a smaller plan after running out of device
        memory. `inputs()` makes each attempt's assignment and the staging buffer already holding it
        (`_host_products`'; None for the others): the buffer goes back once a, b, c are queued for
        upload, so a retry computes them again."""
        t = timings if timings is not None else {}
        with self._device:
            for attempt in (0, 1):
                try:
                    asg, filled = inputs()
                    try:
                        return self._prove(pk, asg, r, s, t, job, filled)
                    finally:  # an attempt that failed before it queued any upload from the buffer
                        if filled is not None and not filled.released:
                            filled.release(None)
                except self._cp.cuda.memory.OutOfMemoryError as exc:
                    # The failed attempt's frames hold its device arrays, possibly in reference
                    # cycles: cleared and collected, they go back to the pool before the retry allocates.
                    traceback.clear_frames(exc.__traceback__)
                    gc.collect()
                    if attempt or not self._retry_smaller(pk, exc):
                        self.plan.release_cached()  # the failed attempts' blocks, for the next proof
                        raise CudaDeviceError(f"CUDA error on device {self.device_id}: {exc}") from exc
                except (self._cp.cuda.runtime.CUDARuntimeError, self._cp.cuda.driver.CUDADriverError) as exc:
                    raise CudaDeviceError(f"CUDA error on device {self.device_id}: {exc}") from exc
        raise AssertionError("unreachable")

    @staticmethod
    def is_fatal(err: BaseException) -> bool:
        """Whether a proof's failure left this process's CUDA context unusable: the errors CUDA keeps
        returning for every later call (a kernel's illegal address, launch failure, hardware
        exception, uncorrectable ECC). The device's process must then be restarted."""
        cause = err.__cause__ if isinstance(err, CudaDeviceError) else err
        return getattr(cause, "status", None) in STICKY_CUDA_ERRORS

    def is_transient(self, err: BaseException) -> bool:
        """Out of device memory with no smaller plan left to retry with (`_guarded`): another attempt,
        once the memory other work holds has moved, may fit."""
        cause = err.__cause__ if isinstance(err, CudaDeviceError) else err
        return isinstance(cause, self._cp.cuda.memory.OutOfMemoryError)

    def _retry_smaller(self, pk: ProvingKey, exc: BaseException) -> bool:
        """After an out-of-memory error: make the key's plan one that holds less at once (kept for
        later proofs too), counted and logged; False when there is none."""
        with self._lock:
            dk = self._keys.get(pk)
            smaller = dk.plan.smaller(dk.shape) if dk is not None else None
            if dk is None or smaller is None:
                return False
            log.warning("device %d: out of device memory in a proof (%s); retrying it with MSM batches of 2^%d and "
                        "tree groups of %d MiB (was %s, %d MiB)", self.device_id, exc,
                        (smaller.batch or 1).bit_length() - 1, smaller.tree_bytes >> 20,
                        f"2^{dk.plan.batch.bit_length() - 1}" if dk.plan.batch else "whole MSMs",
                        dk.plan.tree_bytes >> 20)
            dk.plan = smaller
            self.oom_retries += 1
            self.plan.release_cached()
        return True

    # -- internals ------------------------------------------------------------------------------------

    @staticmethod
    def proof_working_bytes(pk: ProvingKey) -> int:
        """Device memory a proof needs besides the key in resident mode: a, b, c, the witness scalars,
        MSM buffers (`plan.resident_reserve`)."""
        return resident_reserve(KeyShape.of(pk))

    def _msm(self, group: str, bases: Any, scalars: Any, split: Any = None, use_split: bool = True) -> Any:
        """One MSM over resident bases (resident mode: every vector is; streaming mode's MSMs are
        `_msm_batches`)."""
        if use_split:
            return self.msm.msm_split(group, bases, scalars, split)
        return self.msm.msm(group, bases, scalars)

    def _take_lane(self) -> _Lane:
        with self._lanes_lock:
            if self._lanes:
                return self._lanes.pop()
        copy = self._cp.cuda.Stream(non_blocking=True)
        return _Lane(copy, _PinnedUploader(self._cp, copy))

    def _give_lane(self, lane: _Lane) -> None:
        with self._lanes_lock:
            self._lanes.append(lane)

    @staticmethod
    def _staging_bytes(pk: ProvingKey, asg: Assignment | _CompiledWitness, witness: bool = True) -> int:
        """Device bytes `_stage` allocates: a, b, c over the domain, and with `witness` the witness and
        the masks."""
        wit = (asg.inputs.nbytes + asg.aux.nbytes + asg.a_aux_density.nbytes + asg.b_aux_density.nbytes
               + asg.b_input_density.nbytes)
        return 3 * 32 * pk.domain_size + (wit if witness else 0)

    @staticmethod
    def _witness_at_staging(dk: _DeviceKey, asg: Assignment | _CompiledWitness) -> bool:
        """Whether the witness is allocated with a, b, c: always but in streaming mode, where a proof
        from a, b, c uploads it once H has freed them (a compiled circuit needs it for a, b, c)."""
        return dk.plan.mode != "streaming" or isinstance(asg, _CompiledWitness)

    @staticmethod
    def _host_witness(asg: Assignment | _CompiledWitness) -> dict[str, np.ndarray]:
        """The witness as it goes up: inputs and aux as (n, 8) u32 words, the density masks."""
        return {"inputs": _words(asg.inputs), "aux": _words(asg.aux), "a_mask": asg.a_aux_density,
                "b_mask": asg.b_aux_density, "b_in_mask": asg.b_input_density}

    def _prestage(self, asg: Assignment | _CompiledWitness, dk: _DeviceKey, lane: _Lane) -> Filled | None:
        """What `_stage` uploads first, copied into the key's pinned staging buffer (`HostStaging`)
        before the proof takes the device: a compiled proof's witness (but aux that the device writes,
        the deferred gadgets', which goes up its own way), else a, b, c. None when the key has no
        buffer, another proof holds it, or it is too small."""
        if dk.staging is None:
            return None
        if isinstance(asg, _CompiledWitness):
            arrays = self._host_witness(asg)
            if asg.deferred is not None:
                del arrays["aux"]
        else:
            arrays = {name: v for name, v in zip("abc", (asg.a, asg.b, asg.c), strict=True)}
        return dk.staging.fill(arrays, lane.uploader.host_copy)

    def _stage(self, asg: Assignment | _CompiledWitness, m: int, lane: _Lane, *, witness: bool = True,
               stream: Any = None, pinned: Filled | None = None) -> _Staged:
        """Allocate a proof's device inputs on `stream` (default: the lane's) and queue their upload on
        the lane's stream: a, b, c (compiled circuits: the witness, from which a, b, c are made on the
        device), and with `witness` the witness too. With the lane's stream nothing here touches the
        compute stream, so it can run while another proof's kernels do. What `pinned` holds already
        (`_prestage`) goes up from there by the copy engine alone, and the buffer is handed back once
        that is queued."""
        cp, clock = self._cp, time.perf_counter

        start = clock()
        nc = asg.num_constraints
        marks: list[Mark] | None = None
        alloc = stream if stream is not None else lane.copy
        host_wit = self._host_witness(asg)
        with alloc:
            abc = [cp.zeros((m, 8), dtype=cp.uint32) for _ in range(3)]
            wit = {name: cp.empty(v.shape, dtype=cp.bool_ if v.dtype == np.bool_ else cp.uint32)
                   for name, v in host_wit.items()} if witness else {}
        if alloc is not lane.copy:  # memory that stream freed may still be in use there
            lane.copy.wait_event(alloc.record())
        with lane.copy:
            copy_begin = lane.copy.record()
            if isinstance(asg, _CompiledWitness):
                for name, v in host_wit.items():
                    if name == "aux" and asg.deferred is not None:
                        complete_on_device(asg.deferred, asg.aux, wit[name], self.kernels,
                                           lambda: self.sha256_witness, lambda: self.poseidon_paths)
                    else:
                        self._upload_staged(lane, wit[name], pinned, name, v)
            elif pinned is not None:  # a, b, c (`_prestage` and host products stage all three or none)
                marks = self._upload_staged_abc(lane, abc, pinned, nc)
            else:
                for dst, src in zip(abc, (asg.a, asg.b, asg.c), strict=True):
                    if nc:
                        lane.uploader.upload(dst[:nc], _words(src))
            abc_done = lane.copy.record()
        if pinned is not None:
            pinned.release(abc_done, marks)
        return _Staged(abc, wit, host_wit, copy_begin, abc_done, clock() - start)

    def _upload_staged_abc(self, lane: _Lane, abc: list[Any], pinned: Filled, rows: int) -> list[Mark]:
        """Queue a, b, c's upload from the pinned staging part by part (each part's rows of the three
        together), each part's event recorded: the marks that let the next proof write its own a, b, c
        into those rows while the rest go up (`cuzk.backends.cuda.staging`)."""
        marks: list[Mark] = []
        for lo in range(0, rows, PART_ROWS):
            hi = min(rows, lo + PART_ROWS)
            for name, dst in zip("abc", abc, strict=True):
                self._copy_pinned(lane, dst[lo:hi], pinned.views[name][32 * lo: 32 * hi], name)
            marks.append((32 * hi, lane.copy.record()))
        return marks

    def _upload_staged(self, lane: _Lane, dst: Any, pinned: Filled | None, name: str, host: np.ndarray) -> None:
        """Queue dst = host on the lane's stream: from `pinned`'s copy of it when it has one (the copy
        engine alone), else through the uploader's staging buffers."""
        src = pinned.views.get(name) if pinned is not None else None
        if src is None:
            lane.uploader.upload(dst, host)
            return
        self._copy_pinned(lane, dst, src, name)

    def _copy_pinned(self, lane: _Lane, dst: Any, src: np.ndarray, name: str) -> None:
        """Queue dst = src (pinned host bytes) on the lane's stream: the copy engine alone."""
        if src.nbytes != dst.nbytes:
            raise ValueError(f"staged {name}: {src.nbytes} bytes for {dst.nbytes} on the device")
        if src.nbytes:
            runtime = self._cp.cuda.runtime
            runtime.memcpyAsync(dst.data.ptr, src.ctypes.data, src.nbytes, runtime.memcpyHostToDevice, lane.copy.ptr)

    def _stage_ahead(self, pk: ProvingKey, asg: Assignment | _CompiledWitness, lane: _Lane,
                     witness: bool = True, own_reserve: int = 0) -> tuple[_Staged | None, int]:
        """Stage before taking the device when the memory plan leaves room for it beside what other
        proofs are staging ahead now (what they staged already is in use, out of `plan.available()`)
        and a whole reserve for whichever proof holds the device: the one holding it now (what its
        reserve still lets it take), or, when none does, the next to take it, which may not have
        staged ahead and then allocates its reserve with the device held (`ahead_fits`); returns what
        was staged (None: stage with the device held) and its bytes. `own_reserve` is this proof's
        reserve."""
        need = self._staging_bytes(pk, asg, witness)
        with self._lanes_lock:
            running = self._running_reserve > 0
            grown = self.plan.pool_used() - self._running_base - self._ahead_since_begin if running else 0
            reserve = max(self._running_reserve, own_reserve, self._largest_reserve())
            if not ahead_fits(need, self.plan.available(), ahead_pending=self._ahead_bytes + self._suspended,
                              running_reserve=reserve, running_grown=grown):
                return None, 0
            self._ahead_bytes += need
        try:
            staged = self._stage(asg, pk.domain_size, lane, witness=witness)
            with self._lanes_lock:
                self._ahead_since_begin += need
            return staged, need
        except self._cp.cuda.memory.OutOfMemoryError:
            # The memory went to the proof on the device meanwhile: drop what was allocated (the
            # lane's queued copies end before its next use) and stage with the device held.
            lane.copy.synchronize()
            return None, 0
        finally:
            with self._lanes_lock:
                self._ahead_bytes -= need

    def _largest_reserve(self) -> int:
        """The largest working reserve of the loaded keys' plans."""
        while True:
            try:
                return max((dk.plan.reserve for dk in list(self._keys.values())), default=0)
            except RuntimeError:  # a key was loaded meanwhile (the keys change under `_lock`, not this one)
                continue

    def _prove(self, pk: ProvingKey, asg: Assignment | _CompiledWitness, r: int | None, s: int | None,
               t: MutableMapping[str, float], job: str, filled: Filled | None = None) -> Proof:
        """One attempt at a proof. `filled`: the key's staging buffer, holding `asg`'s a, b, c
        already; handed back once they are queued for upload, or when this attempt fails."""
        clock = time.perf_counter
        m = pk.domain_size
        if asg.num_constraints > m:
            raise prover.KeyMismatchError(f"the circuit has {asg.num_constraints} constraints but the key's "
                                          f"domain holds {m}")
        if pk not in self._keys:
            self.load_key(pk)
        dk = self._keys[pk]
        prepared = None
        if isinstance(asg, _CompiledWitness):
            key = self._compiled_key(asg.compiled)
            if key not in self._compiled:  # checked first: load_compiled waits for the device
                self.load_compiled(asg.compiled, pk)
            prepared = self._compiled[key]
        if pk.h_basis is not HBasis.COEFFICIENTS and pk.odd_coset_shift is None:
            raise prover.KeyMismatchError("an odd-coset proving key needs its coset shift")

        start = clock()
        prover.check_query_sizes(pk, asg)
        t["select"] = clock() - start

        streaming = dk.plan.mode == "streaming"
        witness = self._witness_at_staging(dk, asg)
        # A compiled circuit's matrices that are not resident are uploaded by the proof.
        streamed = matrix_bytes(prepared.compiled) if prepared is not None and not all(prepared.resident) else 0
        reserve = dk.plan.reserve + streamed
        lane = self._take_lane()
        pinned = filled
        try:
            start = clock()
            staged, ahead = self._stage_ahead(pk, asg, lane, witness, reserve) if pinned is None else (None, 0)
            t["stage_ahead"] = clock() - start if staged is not None else 0.0
            if staged is None and streaming and pinned is None:
                start = clock()
                pinned = self._prestage(asg, dk, lane)
                t["prestage"] = clock() - start if pinned is not None else 0.0
            start = clock()
            me = threading.get_ident()
            with self._lanes_lock:  # for a holder deciding whether it can let this proof through
                self._waiting_need[me] = reserve - ahead
            with self._lock.hold(current_priority()):  # served by priority (cuzk.backends.device_lock)
                t["lock_wait"] = clock() - start
                t["device_begin"] = time.monotonic()
                with self._lanes_lock:
                    self._waiting_need.pop(me, None)
                    self._running_reserve = reserve
                    # Inputs this proof staged ahead are in use already: held out of its reserve.
                    self._running_base = self.plan.pool_used() - ahead
                    self._ahead_since_begin = 0
                self.current_job = job
                self.msm.tree_group_bytes = dk.plan.tree_bytes
                try:
                    if streaming:
                        # The last proof's blocks, cached by the pool, go back to the driver first: the
                        # pool carves a request out of any larger free block, so a, b, c and the witness
                        # would land inside the blocks of its tree rounds, and the free rest of those,
                        # counted against the cap, could not serve this proof's own tree rounds
                        # (benchmarks/HISTORY.md, small cards).
                        self.plan.release_cached()
                    if staged is None:
                        # Streaming mode allocates on the compute stream: its MSMs then reuse that memory.
                        staged = self._stage(asg, m, lane, witness=witness,
                                             stream=self._compute if streaming else None, pinned=pinned)
                    phase = self._device_phase_streaming if streaming else self._device_phase
                    fetched = phase(pk, asg, dk, prepared, staged, lane, t)
                    self._sample_peak()
                finally:
                    self.current_job = None
                    with self._lanes_lock:
                        self._running_reserve = 0
        finally:
            if pinned is not None and not pinned.released:  # the proof failed before its witness went up
                lane.copy.synchronize()
                pinned.release(None)
            with self._lanes_lock:
                self._waiting_need.pop(threading.get_ident(), None)
            self._give_lane(lane)

        # The window sums are finished into points on the host after the device is released: ~10 ms
        # of Python integer arithmetic that another proof's kernels need not wait for.
        start = clock()
        g1 = self.msm.finish("g1", fetched["g1"])
        g2 = self.msm.finish("g2", fetched["g2"])
        sums = prover.MsmResults(h=g1[0], l=g1[1], a=g1[2], b_g1=g1[3], b_g2=g2[0])
        t["finish"] = clock() - start
        start = clock()
        proof = prover.assemble_proof(
            pk.vk, sums,
            prover.random_nonzero_scalar() if r is None else r % R_MODULUS,
            prover.random_nonzero_scalar() if s is None else s % R_MODULUS)
        t["assemble"] = clock() - start
        return proof

    def _device_phase(self, pk: ProvingKey, asg: Assignment | _CompiledWitness, dk: _DeviceKey,
                      prepared: DeviceCompiled | None, staged: _Staged, lane: _Lane,
                      t: MutableMapping[str, float]) -> dict[str, list[HostPartial]]:
        """H and the five MSMs on the compute stream (the caller holds the device); their window sums
        copied to the host, by group (G1: H, L, A, B_G1; G2: B_G2), for `DeviceMsm.finish`."""
        cp, clock = self._cp, time.perf_counter
        wit, host_wit = staged.wit, staged.host_wit
        h, h_begin, h_end = self._h_step(pk, asg, prepared, staged, t)
        # While H runs, another thread stages the witness upload.
        upload = self._upload_witness(lane, host_wit, wit, isinstance(asg, _CompiledWitness))
        failures = upload.failures
        gaps: list[tuple[Any, Any]] = []  # (yielded, resumed) events on the compute stream

        with self._compute:
            sums: dict[str, Any] = {}
            try:  # the uploader must be done with the staging buffers before this proof ends
                # The H MSM's host side waits for H (its sort's sizes) either way, so waiting here,
                # able to let a higher-priority proof through, costs the MSM's first launches only.
                self._wait_or_yield(h_end, t, gaps)
                msm_h_begin = self._compute.record()
                h_scalars = h[: len(pk.h)]
                sums["h"] = self._msm("g1", dk.bases["h"], h_scalars, use_split=False)
                msm_h_end = self._compute.record()
                self._compute.synchronize()
                del h, h_scalars
                t["msm_h"] = cp.cuda.get_elapsed_time(msm_h_begin, msm_h_end) / 1e3
                t["h"] = cp.cuda.get_elapsed_time(h_begin, h_end) / 1e3
            finally:
                upload.join()
            self._witness_uploaded(upload, staged, staged.abc_done, t)
            self._shrink_reserve(3 * FR_BYTES * pk.domain_size)
            self._preemption_point(t, gaps)

            start = clock()
            b_scalars = self._select(wit["inputs"], wit["b_in_mask"], wit["aux"], wit["b_mask"])
            b_split = self.msm.split(b_scalars)
            b_ready = self._compute.record()
            self._compute.synchronize()
            t["gather"] = clock() - start
            # B's G2 MSM runs on a stream and host thread of its own while this one runs the G1 MSMs:
            # each MSM alone leaves the device idle at times (host round trips, the small kernels of
            # its last steps). The resident plan counts a G1 and a G2 MSM's working memory at once
            # (plan.resident_reserve); streaming plans run the MSMs one after the other
            # (`_device_phase_streaming`), and so do these while DeviceMsm.profile times phases (its
            # events assume one MSM at a time). The A and B gathers stay on this stream: beside L they
            # pushed the pool's peak past the plan (benchmarks/HISTORY.md).
            beside = (self.msm.profile is None
                      and all(dk.bases[name] is not None for name in ("l", "a", "b_g1", "b_g2")))
            g2_done: list[Any] = []

            def b_g2(scalars: Any, split: Any) -> None:
                try:
                    with self._device, self._g2:
                        self._g2.wait_event(b_ready)
                        begin = clock()
                        sums["b_g2"] = self._msm("g2", dk.bases["b_g2"], scalars, split)
                        g2_done.append(self._g2.record())
                        self._g2.synchronize()
                        t["msm_b_g2"] = clock() - begin
                except BaseException as exc:  # re-raised by the proving thread after join
                    failures.append(exc)

            helper = (threading.Thread(target=b_g2, args=(b_scalars, b_split), name="cuzk-msm-b-g2")
                      if beside else None)
            if helper is not None:
                helper.start()
            try:
                start = clock()
                sums["l"] = self._msm("g1", dk.bases["l"], wit["aux"])
                self._compute.synchronize()
                t["msm_l"] = clock() - start

                start = clock()
                a_scalars = self._select(wit["inputs"], None, wit["aux"], wit["a_mask"])
                wit.clear()  # the witness goes back to the pool
                self._compute.synchronize()
                t["gather"] += clock() - start
                start = clock()
                sums["a"] = self._msm("g1", dk.bases["a"], a_scalars)
                self._compute.synchronize()
                t["msm_a"] = clock() - start
                del a_scalars

                start = clock()
                sums["b_g1"] = self._msm("g1", dk.bases["b_g1"], b_scalars, b_split)
                self._compute.synchronize()
                t["msm_b_g1"] = clock() - start
            finally:
                if helper is not None:
                    helper.join()
            if failures:
                raise failures[0]
            if helper is None:
                b_g2(b_scalars, b_split)
                if failures:
                    raise failures[0]
            self._compute.wait_event(g2_done[0])
            del b_scalars, b_split
            return self._fetch_sums(sums, h_begin, t, gaps)

    def _wait_or_yield(self, event: Any, t: MutableMapping[str, float], gaps: list[tuple[Any, Any]]) -> None:
        """Wait on the host for `event`, or less: until a proof that outranks this one waits for the
        device, which `_preemption_point` then lets through (this proof's queued kernels finish
        first, the stream being shared)."""
        while not event.done and self._lock.outranking_waiter() is None:
            time.sleep(PREEMPT_POLL_S)
        self._preemption_point(t, gaps)

    def _shrink_reserve(self, nbytes: int) -> None:
        """The proof holding the device freed `nbytes` that the rest of its phase never takes again (a, b, c
        once H is done): its reserve is that much smaller from here. Otherwise the freed bytes would
        count as room it may still take, and a point after H would ask the memory for a whole second
        reserve beside it: on a card that holds the key and one reserve with little to spare (an 80 GB
        card and PoRep-32GiB), no CRITICAL proof would ever be let in there."""
        with self._lanes_lock:
            self._running_reserve = max(0, self._running_reserve - nbytes)

    def _preemption_point(self, t: MutableMapping[str, float], gaps: list[tuple[Any, Any]]) -> None:
        """Between two steps of a resident device phase: when a proof of higher priority waits for the
        device, let it through now rather than at this partition's end, then take the device back.
        A WinningPoSt behind a PoRep-32GiB partition then waits for the step in flight (the H MSM,
        the longest) instead of the whole phase. It is let through only when the memory for both is
        free: what it will still allocate, beside what this proof still may (its reserve less its
        growth) and what other yielded proofs may; otherwise it waits for the end of the phase,
        counted in `preemptions_refused`. The time lent is recorded (`yielded`, seconds) and taken
        out of this proof's `device` time (`gaps`)."""
        waiter = self._lock.outranking_waiter()
        if waiter is None:
            return
        with self._lanes_lock:
            reserve = self._running_reserve
            grown = max(0, self.plan.pool_used() - self._running_base - self._ahead_since_begin)
            remaining = reserve - min(reserve, grown)
            need = self._waiting_need.get(waiter, self._largest_reserve())
            if self.plan.available() < remaining + need + self._suspended:
                self.preemptions_refused += 1
                return
            self._suspended += remaining
            self._running_reserve = 0
        job, tree = self.current_job, self.msm.tree_group_bytes
        self.current_job = None
        paused = self._compute.record()
        begin = time.perf_counter()
        try:
            # None: nobody outranks it any more (the waiter left), or the hold is nested: no yield.
            regrant = self._lock.yield_to_waiters()
        finally:
            with self._lanes_lock:
                self._suspended -= remaining
                self._running_reserve = reserve
                # Growth is counted on from here: what others staged meanwhile is not this proof's.
                self._running_base = self.plan.pool_used() - grown
                self._ahead_since_begin = 0
            self.current_job, self.msm.tree_group_bytes = job, tree
        if regrant is None:
            return
        gaps.append((paused, self._compute.record()))
        t["yielded"] = t.get("yielded", 0.0) + time.perf_counter() - begin
        self.preemptions += 1

    def _h_step(self, pk: ProvingKey, asg: Assignment | _CompiledWitness, prepared: DeviceCompiled | None,
                staged: _Staged, t: MutableMapping[str, float]) -> tuple[Any, Any, Any]:
        """Step 2: H on the compute stream from the staged a, b, c (compiled: a, b, c by the sparse
        products first, and the checks, which wait for their results); the staged a, b, c are
        released. Returns h and the events recorded around it."""
        m = pk.domain_size
        log_n = m.bit_length() - 1
        coefficients = pk.h_basis is HBasis.COEFFICIENTS
        shift = FR_GENERATOR if coefficients else pk.odd_coset_shift
        root = pk.domain_root if pk.domain_root is not None else self.ntt.default_root(log_n)
        abc, staged.abc = staged.abc, []  # each phase releases its buffers as soon as it has read them
        with self._compute:
            self._compute.wait_event(staged.abc_done)
            h_begin = self._compute.record()
            if isinstance(asg, _CompiledWitness) and prepared is not None:
                self._evaluate_compiled(asg, prepared, staged.wit, [v[:asg.num_constraints] for v in abc], t)
            # a, b, c are canonical integers and so must h be: the conversions are folded into H's
            # transforms (h_quotient's `canonical`) rather than run as sweeps of their own.
            h = self.ntt.h_quotient(*abc, log_n, root, shift, divide=coefficients, canonical=True)
            del abc
            h_end = self._compute.record()
        staged.wit = {}
        return h, h_begin, h_end

    def _upload_witness(self, lane: _Lane, host_wit: dict[str, np.ndarray], wit: dict[str, Any],
                        skip: bool) -> _WitnessUpload:
        """The witness's upload into `wit` on the lane's stream, from a host thread of its own (the
        staging copies are host work); nothing when `skip` (a compiled circuit's went up at staging)."""
        upload = _WitnessUpload()
        if skip:
            return upload

        def run() -> None:
            try:
                begin = time.perf_counter()
                with self._device:
                    for name, v in host_wit.items():
                        lane.uploader.upload(wit[name], v)
                    upload.done.append(lane.copy.record())
                upload.seconds.append(time.perf_counter() - begin)
            except BaseException as exc:  # re-raised by the proving thread after join
                upload.failures.append(exc)

        upload.thread = threading.Thread(target=run, name="cuzk-witness-upload")
        upload.thread.start()
        return upload

    def _witness_uploaded(self, upload: _WitnessUpload, staged: _Staged, since: Any,
                          t: MutableMapping[str, float]) -> None:
        """After `upload` was joined: raise its failure, make the compute stream wait for the witness,
        and time the uploads (h2d_witness from `since`)."""
        cp = self._cp
        if upload.failures:
            raise upload.failures[0]
        if upload.thread is not None:
            t["upload_wait"] = staged.queue_s + upload.seconds[0]
            self._compute.wait_event(upload.done[0])
            self._compute.synchronize()
            t["h2d_abc"] = cp.cuda.get_elapsed_time(staged.copy_begin, staged.abc_done) / 1e3
            t["h2d_witness"] = cp.cuda.get_elapsed_time(since, upload.done[0]) / 1e3
        else:
            t["upload_wait"] = staged.queue_s
            t["h2d_abc"] = 0.0
            t["h2d_witness"] = cp.cuda.get_elapsed_time(staged.copy_begin, staged.abc_done) / 1e3

    def _fetch_sums(self, sums: dict[str, Any], h_begin: Any, t: MutableMapping[str, float],
                    gaps: list[tuple[Any, Any]] = ()) -> dict[str, Any]:
        """The end of the device phase (the current stream's work done, timed from `h_begin`, less
        the `gaps` it gave the device to other proofs) and the MSMs' window sums copied to the host,
        by group (G1: H, L, A, B_G1; G2: B_G2)."""
        cp, clock = self._cp, time.perf_counter
        msm_end = cp.cuda.get_current_stream().record()
        msm_end.synchronize()
        lent = sum(cp.cuda.get_elapsed_time(a, b) for a, b in gaps)
        t["device"] = (cp.cuda.get_elapsed_time(h_begin, msm_end) - lent) / 1e3
        start = clock()
        fetched = {"g1": self.msm.fetch([sums[k] for k in ("h", "l", "a", "b_g1")]),
                   "g2": self.msm.fetch([sums["b_g2"]])}
        t["results"] = clock() - start
        return fetched

    def _device_phase_streaming(self, pk: ProvingKey, asg: Assignment | _CompiledWitness, dk: _DeviceKey,
                                prepared: DeviceCompiled | None, staged: _Staged, lane: _Lane,
                                t: MutableMapping[str, float]) -> dict[str, list[HostPartial]]:
        """`_device_phase` within a streaming plan (the module docstring): the same sums, with every
        allocation on the compute stream, the witness uploaded after H, each MSM in the plan's batches
        (`_msm_batches`) and the MSMs one after the other, so that no two phases' buffers coexist
        (only the streamed bases' two buffers, `_BaseStream`, last from the H MSM to the end)."""
        cp = self._cp
        compiled = isinstance(asg, _CompiledWitness)
        wit, host_wit = staged.wit, staged.host_wit
        compute = self._compute
        h, h_begin, h_end = self._h_step(pk, asg, prepared, staged, t)
        self._sample_peak()
        with compute:
            if not compiled:
                # Allocated on the compute stream, the witness takes the memory b and c held; the copies
                # wait for H, the last kernels to read them.
                wit = {name: cp.empty(v.shape, dtype=cp.bool_ if v.dtype == np.bool_ else cp.uint32)
                       for name, v in host_wit.items()}
                lane.copy.wait_event(h_end)
            upload = self._upload_witness(lane, host_wit, wit, compiled)
            sums: dict[str, Any] = {}
            streamed = tuple(name for name, _ in _QUERIES if dk.bases[name] is None)
            bases: _BaseStream | None = None
            try:
                try:
                    if streamed:
                        bases = _BaseStream(self, dk, {name: getattr(pk, name).raw for name in streamed}, streamed)
                    sums["h"] = self._msm_batches("h", dk, pk.h.raw, h[: len(pk.h)], split=False, stream=bases)
                    msm_h_end = compute.record()
                    compute.synchronize()
                    self._sample_peak()
                    del h
                    t["msm_h"] = cp.cuda.get_elapsed_time(h_end, msm_h_end) / 1e3
                    t["h"] = cp.cuda.get_elapsed_time(h_begin, h_end) / 1e3
                finally:
                    upload.join()
                return self._msms_after_h(pk, dk, staged, wit, sums, bases, h_begin, h_end, upload, t)
            finally:
                if bases is not None:
                    bases.close()

    def _msms_after_h(self, pk: ProvingKey, dk: _DeviceKey, staged: _Staged, wit: dict[str, Any],
                      sums: dict[str, Any], bases: _BaseStream | None, h_begin: Any, h_end: Any,
                      upload: _WitnessUpload, t: MutableMapping[str, float]) -> dict[str, list[HostPartial]]:
        """`_device_phase_streaming` once the H MSM is done: the selections and the other four MSMs."""
        clock, compute = time.perf_counter, self._compute
        with compute:
            self._witness_uploaded(upload, staged, h_end, t)

            start = clock()
            b_scalars = self._select(wit["inputs"], wit["b_in_mask"], wit["aux"], wit["b_mask"])
            compute.synchronize()
            t["gather"] = clock() - start
            for name in ("l", "a", "b_g1", "b_g2"):
                if name == "a":
                    # A's scalars are gathered batch by batch from the witness: the whole selection
                    # would be one more array of the witness's size, allocated once the pool's large
                    # blocks have been split by the arrays of H and L (docs/memory.md).
                    start = clock()
                    scalars = _BatchSelect(self._cp, wit["inputs"], wit["aux"], wit["a_mask"], self.kernels)
                    compute.synchronize()
                    t["gather"] += clock() - start
                else:  # no other reference to them is held, so each goes back to the pool after its MSM
                    scalars = wit["aux"] if name == "l" else b_scalars
                start = clock()
                sums[name] = self._msm_batches(name, dk, getattr(pk, name).raw, scalars, split=True, stream=bases)
                compute.synchronize()
                self._sample_peak()
                t[f"msm_{name}"] = clock() - start
                del scalars
                if name == "a":
                    wit.clear()  # the witness goes back to the pool
            del b_scalars
            return self._fetch_sums(sums, h_begin, t)

    def _msm_batches(self, name: str, dk: _DeviceKey, raw: np.ndarray, scalars: Any, *, split: bool,
                     stream: _BaseStream | None = None) -> Any:
        """One of the key's MSMs in the plan's batches on the current stream; a split MSM sums each
        batch's 1s and merges the batches' other scalars (`MergedTails`). A streamed vector's batches
        come from `stream` (`_BaseStream`; one of this vector alone when None)."""
        group = _GROUP[name]
        n = scalars.shape[0]
        if n == 0:
            return self.msm.zero(group)
        bases = dk.bases[name]
        if bases is None and stream is None:
            own = _BaseStream(self, dk, {name: raw}, (name,))
            try:
                return self._msm_batches(name, dk, raw, scalars, split=split, stream=own)
            finally:
                own.close()
        rows = min(n, dk.plan.batch or n) if bases is not None else stream_rows(group, dk.plan.batch or n)
        tails = MergedTails(self.msm, group, tail_capacity(min(rows, n)), whole=bases) if split else None
        parts = []
        for lo in range(0, n, rows):
            hi = min(n, lo + rows)
            if bases is not None:
                view, ready = bases[lo:hi], None
            else:
                view, ready = stream.take(name, lo, hi)
            if tails is not None:
                tails.add(lo, view, scalars[lo:hi], ready)
            else:
                parts.append(self.msm.msm(group, view, scalars[lo:hi], bases_ready=ready))
            if bases is None:
                stream.release()
        return tails.finish() if tails is not None else self.msm.add(parts)

    def _select(self, inputs: Any, input_mask: Any, aux: Any, aux_mask: Any) -> Any:
        """The scalars of a density-filtered MSM: inputs[input_mask] (all inputs when None) followed by
        aux[aux_mask], by integer gathers into one array, faster than CuPy's boolean-mask
        indexing (benchmarks/results/cuda-select-h200-2026-11-30.txt), and writing into the output also
        saves the concatenation. The int64 indices (8 bytes per selected entry) live
        only here, after H has released a, b and c (32 bytes per domain point each), so the memory plan
        (`proof_working_bytes`) already covers them."""
        cp = self._cp
        head = inputs if input_mask is None else inputs[self.kernels.flatnonzero(input_mask)]
        index = self.kernels.flatnonzero(aux_mask)
        out = cp.empty((head.shape[0] + index.shape[0], 8), dtype=cp.uint32)
        out[: head.shape[0]] = head
        cp.take(aux, index, axis=0, out=out[head.shape[0]:])
        return out

    def _evaluate_compiled(self, witness: _CompiledWitness, prepared: DeviceCompiled, wit: dict[str, Any],
                           abc: list[Any], t: MutableMapping[str, float]) -> None:
        """a, b, c into `abc` on the compute stream (current), between the checks."""
        cp, clock = self._cp, time.perf_counter
        start = clock()
        self.spmv.check_witness(wit["inputs"], wit["aux"])
        t["check"] = clock() - start
        begin = self._compute.record()
        self.spmv.evaluate(prepared, wit["inputs"], wit["aux"], abc, copy=self._upload_now,
                           pinned_copy=functools.partial(self._upload_now, pinned=True))
        end = self._compute.record()
        start = clock()
        if witness.check:
            self.spmv.check_rows(prepared, *abc)
        end.synchronize()
        t["check"] += clock() - start
        t["spmv"] = cp.cuda.get_elapsed_time(begin, end) / 1e3
