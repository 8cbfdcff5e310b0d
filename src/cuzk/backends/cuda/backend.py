"""CudaBackend: Groth16 proofs with the H polynomial and all five MSMs on one CUDA device.

The proof is the CPU prover's (cuzk.groth16.prover): the same density selection, the same H
reduction (`prover.reduction`), the same r and s, and the same `assemble_proof` on the MSM results,
so a proof with fixed r, s is byte-identical to the CPU backend's. Per proof:

1. its inputs go up on a lane of its own (`cuzk.backends.cuda.lanes`), before it takes the device
   where the memory plan leaves room (`cuzk.backends.cuda.admission`), else with the device held;
2. with the device held (`Admission.hold`), the device phase computes H and the five MSMs
   (`cuzk.backends.cuda.phase` when the key's bases are all resident, `cuzk.backends.cuda.streaming`
   under a streaming plan), letting a proof of higher priority through between its steps when the
   memory holds both, and copies the MSMs' window sums to the host;
3. the proof releases the device before those sums are finished into points here.

This module is the `ProverBackend` over the parts that own the state: the device, its kernels and
shared streams (`cuzk.backends.cuda.gpu`), the resident keys and compiled circuits
(`cuzk.backends.cuda.residency`), the lanes, and the admission. A proof that meets an out-of-memory
error is retried once with a plan that holds less (`DeviceKeys.retry_smaller`).

Compiled circuits (`prove_compiled`): only the witness goes up; a, b, c are computed on the device by
the sparse products (`cuzk.backends.cuda.spmv`), or on the host when the plan leaves the device no
room for them beside the key (`inputs.host_products`).
"""

from __future__ import annotations

import gc
import logging
import time
import traceback
from collections.abc import Callable, Mapping, MutableMapping
from typing import Any

import numpy as np

import cuzk.backends.cuda.phase as phase
import cuzk.backends.cuda.streaming as streaming_phase
from cuzk.backends.base import DeviceInfo, ProverBackend
from cuzk.backends.cuda.admission import Admission
from cuzk.backends.cuda.available import cuda_available
from cuzk.backends.cuda.device import memory_usage
from cuzk.backends.cuda.fixed_base import DeviceFixedBase
from cuzk.backends.cuda.gpu import Gpu
from cuzk.backends.cuda.inputs import CompiledWitness, ProofInputs, host_products, staging_bytes
from cuzk.backends.cuda.lanes import Lane, Lanes, Staged
from cuzk.backends.cuda.plan import CONTEXT_BYTES, DevicePlan, KeyShape, products_fit, resident_reserve
from cuzk.backends.cuda.poseidon_witness import DevicePoseidonPaths
from cuzk.backends.cuda.residency import QUERIES, DeviceKeys, compiled_key
from cuzk.backends.cuda.sha256_witness import DeviceSha256Witness
from cuzk.backends.cuda.shared_pinned import sweep as sweep_shared_copies
from cuzk.backends.cuda.spmv import DeviceSpmv, largest_matrix_bytes, matrix_bytes
from cuzk.backends.cuda.staging import Filled
from cuzk.curve.points import G1Point, G2Point
from cuzk.errors import CuzkError
from cuzk.field.constants import R_MODULUS
from cuzk.field.limbs import as_limb_array
from cuzk.groth16 import prover
from cuzk.groth16.assignment import Assignment
from cuzk.groth16.keys import ProvingKey
from cuzk.groth16.proof import Proof
from cuzk.r1cs.compiled import CompiledCircuit
from cuzk.witness_gen.deferred import DeferredWitness

#: cudaError / CUresult codes after which a context is unusable (the same numbers in both APIs):
#: ECC uncorrectable, assert, hardware stack error, illegal instruction, misaligned address,
#: invalid address space, invalid PC, launch failure, illegal address.
STICKY_CUDA_ERRORS = frozenset({214, 700, 710, 714, 715, 716, 717, 718, 719})


class CudaUnavailableError(CuzkError):
    """CUDA cannot be used here (no CuPy, no device, broken driver)."""


class CudaDeviceError(CuzkError):
    """A CUDA call failed during one job; the job fails, the backend stays usable if the device is."""


class CudaBackend(ProverBackend):
    """Proofs on one CUDA device. The device runs one proof's kernels at a time (`admission.lock`);
    the host side of a proof (staging its inputs, assembling the result) runs outside that lock, so
    callers on several threads (the engine's prover workers) overlap it with each other's device work."""

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
        self.gpu = Gpu(device_id, memory_margin, memory_limit, memory_share)
        self._cp, self._device, self.device_id = self.gpu.cp, self.gpu.device, device_id
        self.kernels, self.ntt, self.msm = self.gpu.kernels, self.gpu.ntt, self.gpu.msm
        self.plan, self.props = self.gpu.memory, self.gpu.props
        self.admission = Admission(self.gpu.memory, lambda: self.keys.largest_reserve())
        self.keys = DeviceKeys(self.gpu, self.admission.lock)
        self.lanes = Lanes(self.gpu)
        swept = sweep_shared_copies()
        if swept:
            logging.getLogger("cuzk.backends.cuda").info(
                "device %d: removed %d shared host copies that no live process held", device_id, len(swept))

    # Counts and units of the parts, as the status and callers read them.

    @property
    def current_job(self) -> str | None:
        return self.admission.current_job

    @property
    def preemptions(self) -> int:
        return self.admission.preemptions

    @property
    def preemptions_refused(self) -> int:
        return self.admission.preemptions_refused

    @property
    def oom_retries(self) -> int:
        return self.keys.oom_retries

    @property
    def peak_pool(self) -> int:
        return self.gpu.peak_pool

    @property
    def spmv(self) -> DeviceSpmv:
        return self.gpu.spmv

    @property
    def sha256_witness(self) -> DeviceSha256Witness:
        return self.gpu.sha256_witness

    @property
    def poseidon_paths(self) -> DevicePoseidonPaths:
        return self.gpu.poseidon_paths

    @property
    def fixed_base(self) -> DeviceFixedBase:
        return self.gpu.fixed_base

    def prepare_kernels(self) -> dict[str, float]:
        """`Gpu.prepare_kernels`: the units a proof may reach, compiled ahead; seconds by unit."""
        return self.gpu.prepare_kernels()

    # -- ProverBackend --------------------------------------------------------------------------------

    def devices(self) -> list[DeviceInfo]:
        usage = memory_usage(self.device_id)
        p = self.props
        loaded, compiled = self.keys.loaded, self.keys.compiled
        return [DeviceInfo(name=p.name, kind="cuda", memory_total=usage.total, memory_free=usage.free,
                           pool_used=usage.pool_used, pool_held=usage.pool_held, driver_used=usage.driver_used,
                           extra={"device_id": str(self.device_id), "multiprocessors": str(p.multiprocessors),
                                  "compute_capability": p.compute_capability,
                                  "resident_key_bytes": str(sum(k.nbytes() for k in loaded.values())),
                                  "resident_compiled_bytes": str(sum(c.nbytes for c in compiled.values())),
                                  "current_job": self.current_job or ""})]

    def memory_plan(self, names: Mapping[ProvingKey, str] | None = None) -> dict[str, Any]:
        """The device's plan for the status: the limit, the budget, and per key (named by `names`,
        the device process's circuit ids) what is resident, what is streamed, the working reserve;
        the peak the pool reached, the OOM retries, and the device phases that let a proof of higher
        priority through mid-phase (`preemptions`) or could not for memory (`preemptions_refused`).
        A key's `products` says where its compiled circuit's a, b, c are computed ("device", "host",
        None before one is loaded); with "host", `host_mapped_compiled_bytes` are the compiled file's
        matrices that the host products read."""
        return {"memory_limit": self.plan.limit, "budget": self.plan.budget(), "margin": self.plan.margin,
                "context_reserve": CONTEXT_BYTES if self.plan.limit is not None else None,
                "keys": self.keys.status(names), "peak_pool_bytes": max(self.peak_pool, self.plan.pool_total()),
                "oom_retries": self.oom_retries, "preemptions": self.preemptions,
                "preemptions_refused": self.preemptions_refused}

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
        self.keys.load_key(pk, device_bases, plan, compiled)

    def unload_key(self, pk: ProvingKey) -> None:
        self.keys.unload_key(pk)

    def resident(self, pk: ProvingKey) -> dict[str, bool]:
        """Which of the key's vectors are resident on the device (the rest are streamed)."""
        dk = self.keys.loaded.get(pk)
        return {name: dk is not None and dk.bases.get(name) is not None for name, _ in QUERIES}

    def key_plan(self, pk: ProvingKey) -> DevicePlan | None:
        """The memory plan of a loaded key (None when it is not loaded)."""
        dk = self.keys.loaded.get(pk)
        return dk.plan if dk is not None else None

    # -- parameter generation ---------------------------------------------------------------------------

    def fixed_base_g1(self, base: G1Point, scalars: np.ndarray, out: np.ndarray) -> None:
        """`ProverBackend.fixed_base_g1` on the device (cuzk.backends.cuda.fixed_base): the same bytes."""
        self._fixed_base_on_device("g1", base, scalars, out)

    def fixed_base_g2(self, base: G2Point, scalars: np.ndarray, out: np.ndarray) -> None:
        """`ProverBackend.fixed_base_g2` on the device: the same bytes."""
        self._fixed_base_on_device("g2", base, scalars, out)

    def _fixed_base_on_device(self, group: str, base: G1Point | G2Point, scalars: np.ndarray,
                              out: np.ndarray) -> None:
        with self.admission.lock, self._device:
            try:
                self.fixed_base.run(group, base, scalars, out)
            except (self._cp.cuda.runtime.CUDARuntimeError, self._cp.cuda.driver.CUDADriverError,
                    self._cp.cuda.memory.OutOfMemoryError) as exc:
                raise CudaDeviceError(f"CUDA error on device {self.device_id}: {exc}") from exc

    # -- compiled circuits ------------------------------------------------------------------------------

    def load_compiled(self, compiled: CompiledCircuit, pk: ProvingKey | None = None) -> tuple[bool, bool, bool]:
        """Make a compiled circuit's A, B, C resident where the memory plan allows, keeping a proof's
        working memory free (`pk`'s when given, else its a, b, c and witness); idempotent. Returns
        which of A, B, C are resident (the others are uploaded by each proof)."""
        return self.keys.load_compiled(compiled, pk, self.gpu.upload_now).resident  # type: ignore[return-value]

    def unload_compiled(self, compiled: CompiledCircuit) -> None:
        """Release what `load_compiled` made resident."""
        self.keys.unload_compiled(compiled)

    def compiled_resident(self, compiled: CompiledCircuit) -> tuple[bool, bool, bool]:
        """Which of a compiled circuit's A, B, C are resident on the device."""
        prepared = self.keys.compiled.get(compiled_key(compiled))
        return prepared.resident if prepared is not None else (False, False, False)  # type: ignore[return-value]

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
        if pk not in self.keys.loaded:
            self.load_key(pk, compiled=compiled)
        dk = self.keys.loaded[pk]
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

            def products() -> tuple[Assignment, Filled | None]:
                return host_products(dk.staging, compiled, inputs, aux, check, t)
            return self._guarded(pk, products, r, s, t, f"prove: {compiled.num_constraints} constraints "
                                                       f"(compiled {compiled.circuit_id}, products on the host)")
        witness = CompiledWitness(compiled, inputs, aux, check, deferred)
        return self._guarded(pk, lambda: (witness, None), r, s, timings,
                             f"prove: {compiled.num_constraints} constraints (compiled {compiled.circuit_id})")

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
        staged with the device held), lock_wait (time waiting for another proof's device phase),
        device_begin (time.monotonic() when this proof took the device) and yielded (time lent to
        proofs of higher priority mid-phase)."""
        return self._guarded(pk, lambda: (asg, None), r, s, timings, f"prove: {asg.num_constraints} constraints")

    def _guarded(self, pk: ProvingKey, inputs: Callable[[], tuple[ProofInputs, Filled | None]],
                 r: int | None, s: int | None, timings: MutableMapping[str, float] | None, job: str) -> Proof:
        """`_prove` with CUDA errors named and one retry on a smaller plan after running out of device
        memory. `inputs()` makes each attempt's assignment and the staging buffer already holding it
        (`host_products`'; None for the others): the buffer goes back once a, b, c are queued for
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
                    if attempt or not self.keys.retry_smaller(pk, exc):
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

    @staticmethod
    def proof_working_bytes(pk: ProvingKey) -> int:
        """Device memory a proof needs besides the key in resident mode: a, b, c, the witness scalars,
        MSM buffers (`plan.resident_reserve`)."""
        return resident_reserve(KeyShape.of(pk))

    # -- one proof ------------------------------------------------------------------------------------

    def _stage_ahead(self, pk: ProvingKey, asg: ProofInputs, lane: Lane, witness: bool,
                     own_reserve: int) -> tuple[Staged | None, int]:
        """The lane's staging before the proof takes the device, where `Admission.stage_ahead` lets it."""

        def stage() -> Staged | None:
            try:
                return lane.stage(asg, pk.domain_size, witness=witness)
            except self._cp.cuda.memory.OutOfMemoryError:
                # The memory went to the proof on the device meanwhile: drop what was allocated (the
                # lane's queued copies end before its next use) and stage with the device held.
                lane.copy.synchronize()
                return None

        return self.admission.stage_ahead(staging_bytes(pk, asg, witness), own_reserve, stage)

    def _prove(self, pk: ProvingKey, asg: ProofInputs, r: int | None, s: int | None,
               t: MutableMapping[str, float], job: str, filled: Filled | None = None) -> Proof:
        """One attempt at a proof. `filled`: the key's staging buffer, holding `asg`'s a, b, c
        already; handed back once they are queued for upload, or when this attempt fails."""
        clock = time.perf_counter
        m = pk.domain_size
        if asg.num_constraints > m:
            raise prover.KeyMismatchError(f"the circuit has {asg.num_constraints} constraints but the key's "
                                          f"domain holds {m}")
        if pk not in self.keys.loaded:
            self.load_key(pk)
        dk = self.keys.loaded[pk]
        prepared = None
        if isinstance(asg, CompiledWitness):
            key = compiled_key(asg.compiled)
            if key not in self.keys.compiled:  # checked first: load_compiled waits for the device
                self.load_compiled(asg.compiled, pk)
            prepared = self.keys.compiled[key]
        prover.reduction(pk)  # a key the reduction refuses fails here, before anything goes up

        start = clock()
        prover.check_query_sizes(pk, asg)
        t["select"] = clock() - start

        streaming = dk.plan.mode == "streaming"
        # The witness is allocated with a, b, c but in streaming mode, where a proof from a, b, c
        # uploads it once H has freed them (a compiled circuit needs it for a, b, c).
        witness = not streaming or isinstance(asg, CompiledWitness)
        # A compiled circuit's matrices that are not resident are uploaded by the proof.
        streamed = matrix_bytes(prepared.compiled) if prepared is not None and not all(prepared.resident) else 0
        reserve = dk.plan.reserve + streamed
        lane = self.lanes.take()
        pinned = filled
        try:
            start = clock()
            staged, ahead = self._stage_ahead(pk, asg, lane, witness, reserve) if pinned is None else (None, 0)
            t["stage_ahead"] = clock() - start if staged is not None else 0.0
            if staged is None and streaming and pinned is None:
                start = clock()
                pinned = lane.prestage(asg, dk.staging)
                t["prestage"] = clock() - start if pinned is not None else 0.0
            start = clock()

            def resume() -> None:  # what this proof sets on the device, again after lending it
                self.msm.tree_group_bytes = dk.plan.tree_bytes
                if streaming:
                    # The blocks the pool cached for the proof before (or the one let through
                    # mid-phase) go back to the driver first: the pool carves a request out of any
                    # larger free block, so this proof's arrays would land inside the blocks of the
                    # other's tree rounds, and the free rest of those, counted against the cap,
                    # could not serve this proof's own tree rounds (benchmarks/HISTORY.md, small cards).
                    self.plan.release_cached()

            with self.admission.hold(reserve, ahead, job, resume):
                t["lock_wait"] = clock() - start
                t["device_begin"] = time.monotonic()
                if staged is None:
                    # Streaming mode allocates on the compute stream: its MSMs then reuse that memory.
                    staged = lane.stage(asg, m, witness=witness, stream=self.gpu.compute if streaming else None,
                                        pinned=pinned)
                if streaming:
                    fetched = streaming_phase.device_phase(self.gpu, self.admission, pk, asg, dk, prepared, staged,
                                                           lane, t)
                else:
                    fetched = phase.device_phase(self.gpu, self.admission, pk, asg, dk, prepared, staged, lane, t)
                self.gpu.sample_peak()
        finally:
            if pinned is not None and not pinned.released:  # the proof failed before its witness went up
                lane.copy.synchronize()
                pinned.release(None)
            self.lanes.give(lane)

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
