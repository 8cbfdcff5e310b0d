"""The device phase of a proof whose bases are all resident, and the steps it shares with the
streaming one (`cuzk.backends.cuda.streaming`): functions over the device (`Gpu`), the key
(`DeviceKey`, read only), the staged inputs and the lane; the caller holds the device.

1. the compute stream waits only for a, b, c (compiled circuits: a, b, c are computed first by the
   sparse products of kernels/spmv.cu, `cuzk.backends.cuda.spmv`, straight into the H buffers, then
   checked there: canonical witness, a·b = c per row), computes H (6 NTTs, the key's `Reduction`)
   and the H MSM while another thread stages the witness upload; the other MSMs wait for H, since
   beside H's transforms an MSM takes as long as after them (the transforms' kernels fill the device:
   benchmarks/results/cuda-overlap-h100-2026-12-07.json);
2. the A and B scalars are selected from the witness on the device (the host only checks sizes);
   the L, A, B_G1 and B_G2 MSMs skip scalars 0, add the bases of scalars 1, and run Pippenger on
   the rest (the split of B is shared by B_G1 and B_G2); B_G2 runs on a stream (and host thread)
   of its own beside the three G1 MSMs;
3. each step drops its buffers as soon as it ends (they return to CuPy's pool for the next one);
   between H and the H MSM, and after the H MSM, a proof of higher priority waiting for the device
   is let through when the memory plan has room for both (`Admission.preemption_point`);
4. the MSMs' window sums are copied to the host (`fetch_sums`); the caller finishes them into
   points after it released the device. Read-backs between kernels wait for their stream first
   (`KernelModule.to_host`), so that they never stall the other proof's CUDA calls.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import MutableMapping
from typing import Any

from cuzk.backends.cuda.admission import Admission
from cuzk.backends.cuda.gpu import Gpu
from cuzk.backends.cuda.inputs import CompiledWitness, ProofInputs
from cuzk.backends.cuda.lanes import Lane, Staged, witness_uploaded
from cuzk.backends.cuda.msm import HostPartial
from cuzk.backends.cuda.plan import FR_BYTES
from cuzk.backends.cuda.residency import DeviceKey
from cuzk.backends.cuda.spmv import DeviceCompiled
from cuzk.groth16 import prover
from cuzk.groth16.keys import ProvingKey


def msm(gpu: Gpu, group: str, bases: Any, scalars: Any, split: Any = None, use_split: bool = True) -> Any:
    """One MSM over resident bases (resident mode: every vector is; streaming mode's MSMs are
    `streaming.msm_batches`)."""
    if use_split:
        return gpu.msm.msm_split(group, bases, scalars, split)
    return gpu.msm.msm(group, bases, scalars)


def select(cp: Any, kernels: Any, inputs: Any, input_mask: Any, aux: Any, aux_mask: Any) -> Any:
    """The scalars of a density-filtered MSM: inputs[input_mask] (all inputs when None) followed by
    aux[aux_mask], by integer gathers into one array, faster than CuPy's boolean-mask
    indexing (benchmarks/results/cuda-select-h200-2026-11-30.txt), and writing into the output also
    saves the concatenation. The int64 indices (8 bytes per selected entry) live
    only here, after H has released a, b and c (32 bytes per domain point each), so the memory plan
    (`plan.resident_reserve`) already covers them."""
    head = inputs if input_mask is None else inputs[kernels.flatnonzero(input_mask)]
    index = kernels.flatnonzero(aux_mask)
    out = cp.empty((head.shape[0] + index.shape[0], 8), dtype=cp.uint32)
    out[: head.shape[0]] = head
    cp.take(aux, index, axis=0, out=out[head.shape[0]:])
    return out


def h_step(gpu: Gpu, pk: ProvingKey, asg: ProofInputs, prepared: DeviceCompiled | None, staged: Staged,
           t: MutableMapping[str, float]) -> tuple[Any, Any, Any]:
    """H on the compute stream from the staged a, b, c (compiled: a, b, c by the sparse products
    first, and the checks, which wait for their results); the staged a, b, c are released. Returns
    h and the events recorded around it."""
    m = pk.domain_size
    log_n = m.bit_length() - 1
    red = prover.reduction(pk)
    root = pk.domain_root if pk.domain_root is not None else gpu.ntt.default_root(log_n)
    abc, staged.abc = staged.abc, []  # each phase releases its buffers as soon as it has read them
    compute = gpu.compute
    with compute:
        compute.wait_event(staged.abc_done)
        h_begin = compute.record()
        if isinstance(asg, CompiledWitness) and prepared is not None:
            evaluate_compiled(gpu, asg, prepared, staged.wit, [v[:asg.num_constraints] for v in abc], t)
        # a, b, c are canonical integers and so must h be: the conversions are folded into H's
        # transforms (h_quotient's `canonical`) rather than run as sweeps of their own.
        h = gpu.ntt.h_quotient(*abc, log_n, root, red.shift, divide=red.divide, canonical=True)
        del abc
        h_end = compute.record()
    staged.wit = {}
    return h, h_begin, h_end


def evaluate_compiled(gpu: Gpu, witness: CompiledWitness, prepared: DeviceCompiled, wit: dict[str, Any],
                      abc: list[Any], t: MutableMapping[str, float]) -> None:
    """a, b, c into `abc` on the compute stream (current), between the checks."""
    clock = time.perf_counter
    start = clock()
    gpu.spmv.check_witness(wit["inputs"], wit["aux"])
    t["check"] = clock() - start
    begin = gpu.compute.record()
    gpu.spmv.evaluate(prepared, wit["inputs"], wit["aux"], abc, copy=gpu.upload_now,
                      pinned_copy=functools.partial(gpu.upload_now, pinned=True))
    end = gpu.compute.record()
    start = clock()
    if witness.check:
        gpu.spmv.check_rows(prepared, *abc)
    end.synchronize()
    t["check"] += clock() - start
    t["spmv"] = gpu.cp.cuda.get_elapsed_time(begin, end) / 1e3


def fetch_sums(gpu: Gpu, sums: dict[str, Any], h_begin: Any, t: MutableMapping[str, float],
               gaps: list[tuple[Any, Any]] = ()) -> dict[str, list[HostPartial]]:
    """The end of the device phase (the current stream's work done, timed from `h_begin`, less
    the `gaps` it gave the device to other proofs) and the MSMs' window sums copied to the host,
    by group (G1: H, L, A, B_G1; G2: B_G2), for `DeviceMsm.finish`."""
    cp, clock = gpu.cp, time.perf_counter
    msm_end = cp.cuda.get_current_stream().record()
    msm_end.synchronize()
    lent = sum(cp.cuda.get_elapsed_time(a, b) for a, b in gaps)
    t["device"] = (cp.cuda.get_elapsed_time(h_begin, msm_end) - lent) / 1e3
    start = clock()
    fetched = {"g1": gpu.msm.fetch([sums[k] for k in ("h", "l", "a", "b_g1")]),
               "g2": gpu.msm.fetch([sums["b_g2"]])}
    t["results"] = clock() - start
    return fetched


def device_phase(gpu: Gpu, admission: Admission, pk: ProvingKey, asg: ProofInputs, dk: DeviceKey,
                 prepared: DeviceCompiled | None, staged: Staged, lane: Lane,
                 t: MutableMapping[str, float]) -> dict[str, list[HostPartial]]:
    """H and the five MSMs on the compute stream (the caller holds the device through `admission`);
    their window sums copied to the host, by group (G1: H, L, A, B_G1; G2: B_G2)."""
    cp, clock, compute = gpu.cp, time.perf_counter, gpu.compute
    wit, host_wit = staged.wit, staged.host_wit
    h, h_begin, h_end = h_step(gpu, pk, asg, prepared, staged, t)
    # While H runs, another thread stages the witness upload.
    upload = lane.upload_witness(host_wit, wit, isinstance(asg, CompiledWitness))
    failures = upload.failures
    gaps: list[tuple[Any, Any]] = []  # (yielded, resumed) events on the compute stream

    with compute:
        sums: dict[str, Any] = {}
        try:  # the uploader must be done with the staging buffers before this proof ends
            # The H MSM's host side waits for H (its sort's sizes) either way, so waiting here,
            # able to let a higher-priority proof through, costs the MSM's first launches only.
            admission.wait_or_yield(h_end, compute, t, gaps)
            msm_h_begin = compute.record()
            h_scalars = h[: len(pk.h)]
            sums["h"] = msm(gpu, "g1", dk.bases["h"], h_scalars, use_split=False)
            msm_h_end = compute.record()
            compute.synchronize()
            del h, h_scalars
            t["msm_h"] = cp.cuda.get_elapsed_time(msm_h_begin, msm_h_end) / 1e3
            t["h"] = cp.cuda.get_elapsed_time(h_begin, h_end) / 1e3
        finally:
            upload.join()
        witness_uploaded(cp, compute, upload, staged, staged.abc_done, t)
        admission.shrink_reserve(3 * FR_BYTES * pk.domain_size)
        admission.preemption_point(compute, t, gaps)

        start = clock()
        b_scalars = select(cp, gpu.kernels, wit["inputs"], wit["b_in_mask"], wit["aux"], wit["b_mask"])
        b_split = gpu.msm.split(b_scalars)
        b_ready = compute.record()
        compute.synchronize()
        t["gather"] = clock() - start
        # B's G2 MSM runs on a stream and host thread of its own while this one runs the G1 MSMs:
        # each MSM alone leaves the device idle at times (host round trips, the small kernels of
        # its last steps). The resident plan counts a G1 and a G2 MSM's working memory at once
        # (plan.resident_reserve); streaming plans run the MSMs one after the other
        # (`streaming.device_phase`), and so do these while DeviceMsm.profile times phases (its
        # events assume one MSM at a time). The A and B gathers stay on this stream: beside L they
        # pushed the pool's peak past the plan (benchmarks/HISTORY.md).
        beside = gpu.msm.profile is None and all(dk.bases[name] is not None for name in ("l", "a", "b_g1", "b_g2"))
        g2_done: list[Any] = []

        def b_g2(scalars: Any, split: Any) -> None:
            try:
                with gpu.device, gpu.g2:
                    gpu.g2.wait_event(b_ready)
                    begin = clock()
                    sums["b_g2"] = msm(gpu, "g2", dk.bases["b_g2"], scalars, split)
                    g2_done.append(gpu.g2.record())
                    gpu.g2.synchronize()
                    t["msm_b_g2"] = clock() - begin
            except BaseException as exc:  # re-raised by the proving thread after join
                failures.append(exc)

        helper = threading.Thread(target=b_g2, args=(b_scalars, b_split), name="cuzk-msm-b-g2") if beside else None
        if helper is not None:
            helper.start()
        try:
            start = clock()
            sums["l"] = msm(gpu, "g1", dk.bases["l"], wit["aux"])
            compute.synchronize()
            t["msm_l"] = clock() - start

            start = clock()
            a_scalars = select(cp, gpu.kernels, wit["inputs"], None, wit["aux"], wit["a_mask"])
            wit.clear()  # the witness goes back to the pool
            compute.synchronize()
            t["gather"] += clock() - start
            start = clock()
            sums["a"] = msm(gpu, "g1", dk.bases["a"], a_scalars)
            compute.synchronize()
            t["msm_a"] = clock() - start
            del a_scalars

            start = clock()
            sums["b_g1"] = msm(gpu, "g1", dk.bases["b_g1"], b_scalars, b_split)
            compute.synchronize()
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
        compute.wait_event(g2_done[0])
        del b_scalars, b_split
        return fetch_sums(gpu, sums, h_begin, t, gaps)
