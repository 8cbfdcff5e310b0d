"""The device phase within a streaming plan (small cards): the resident phase's sums
(`cuzk.backends.cuda.phase`) with every allocation on the compute stream, so that no two steps'
buffers coexist. The key's vectors that the plan does not keep resident are in pinned host memory in
device form (`cuzk.backends.cuda.residency`); every MSM runs in batches whose working memory fits
(the split MSMs merge their batches' other scalars into few MSMs, `MergedTails`); the streamed
batches go up on a copy stream of their own, each while the batch before it computes, across
vectors (two device buffers, `BaseStream`); the witness goes up only after H has freed a, b, c; and
B's G2 MSM runs after the G1 ones. A proof of higher priority may go through at the resident phase's
two points, after H and after the H MSM, where the memory holds both (`Admission.preemption_point`):
an 80 GB card streams PoRep-32GiB with every vector resident, and its phase's steps leave room for a
WinningPoSt beside them.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, MutableMapping
from typing import Any

import numpy as np

from cuzk.backends.cuda.admission import Admission
from cuzk.backends.cuda.gpu import Gpu
from cuzk.backends.cuda.inputs import CompiledWitness, ProofInputs
from cuzk.backends.cuda.lanes import Lane, Staged, WitnessUpload, witness_uploaded
from cuzk.backends.cuda.msm import AFFINE_WORDS, HostPartial, MergedTails
from cuzk.backends.cuda.phase import fetch_sums, h_step, select
from cuzk.backends.cuda.plan import stream_rows, tail_capacity
from cuzk.backends.cuda.residency import GROUP, QUERIES, DeviceKey
from cuzk.backends.cuda.spmv import DeviceCompiled
from cuzk.groth16.keys import ProvingKey


class BaseStream:
    """The streamed vectors' bases of one proof, batch after batch in the order its MSMs take them,
    through two device buffers in turn (`plan.stream_buffers` counts them). Each batch's upload is
    queued on the bases' copy stream when the batch before it is taken, behind the release of the
    batch that last used its buffer: so each batch goes up while the one before computes, and the
    next vector's first batch while this vector's last does. A vector without a pinned copy is
    converted from the key's bytes (`raw`) on the compute stream when taken instead."""

    def __init__(self, gpu: Gpu, dk: DeviceKey, raw: Mapping[str, np.ndarray], names: tuple[str, ...]) -> None:
        cp = gpu.cp
        self.cp, self.msm, self.dk, self.copy, self.raw = cp, gpu.msm, dk, gpu.bases_copy, raw
        self.compute = cp.cuda.get_current_stream()
        self.batches: list[tuple[str, int, int]] = []
        for name in names:
            n = dk.shape.length(name)
            rows = stream_rows(GROUP[name], dk.plan.batch or n)
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
        return (hi - lo) * AFFINE_WORDS[GROUP[name]] * 4

    def _view(self, j: int) -> Any:
        name, lo, hi = self.batches[j]
        words = AFFINE_WORDS[GROUP[name]]
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
            self.msm.upload_bases(GROUP[name], self.raw[name][lo:hi], out=view)
        return view, ready

    def release(self) -> None:
        """The batch last taken has all its work queued on the compute stream."""
        self.released[(self.taken - 1) % len(self.bufs)] = self.compute.record()

    def close(self) -> None:
        """Wait for the uploads still queued (a proof that failed midway), so that no copy writes into
        the buffers once the pool has given their memory to another allocation."""
        self.copy.synchronize()


class BatchSelect:
    """The scalars of a density-filtered MSM over all inputs (A's: inputs, then aux[mask]), gathered
    for each batch when sliced: rows [lo, hi) of what `phase.select` would make whole. Holds the
    selection's u32 indices (4 bytes an entry)."""

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


def msm_batches(gpu: Gpu, name: str, dk: DeviceKey, raw: np.ndarray, scalars: Any, *, split: bool,
                stream: BaseStream | None = None) -> Any:
    """One of the key's MSMs in the plan's batches on the current stream; a split MSM sums each
    batch's 1s and merges the batches' other scalars (`MergedTails`). A streamed vector's batches
    come from `stream` (`BaseStream`; one of this vector alone when None)."""
    group = GROUP[name]
    n = scalars.shape[0]
    if n == 0:
        return gpu.msm.zero(group)
    bases = dk.bases[name]
    if bases is None and stream is None:
        own = BaseStream(gpu, dk, {name: raw}, (name,))
        try:
            return msm_batches(gpu, name, dk, raw, scalars, split=split, stream=own)
        finally:
            own.close()
    rows = min(n, dk.plan.batch or n) if bases is not None else stream_rows(group, dk.plan.batch or n)
    tails = MergedTails(gpu.msm, group, tail_capacity(min(rows, n)), whole=bases) if split else None
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
            parts.append(gpu.msm.msm(group, view, scalars[lo:hi], bases_ready=ready))
        if bases is None:
            stream.release()
    return tails.finish() if tails is not None else gpu.msm.add(parts)


def device_phase(gpu: Gpu, admission: Admission, pk: ProvingKey, asg: ProofInputs, dk: DeviceKey,
                 prepared: DeviceCompiled | None, staged: Staged, lane: Lane,
                 t: MutableMapping[str, float]) -> dict[str, list[HostPartial]]:
    """`phase.device_phase` within a streaming plan (the module docstring): the same sums, with every
    allocation on the compute stream, the witness uploaded after H, each MSM in the plan's batches
    (`msm_batches`) and the MSMs one after the other, so that no two steps' buffers coexist (only the
    streamed bases' two buffers, `BaseStream`, last from the H MSM to the end)."""
    cp, compute = gpu.cp, gpu.compute
    gaps: list[tuple[Any, Any]] = []  # (yielded, resumed) events on the compute stream
    compiled = isinstance(asg, CompiledWitness)
    wit, host_wit = staged.wit, staged.host_wit
    h, h_begin, h_end = h_step(gpu, pk, asg, prepared, staged, t)
    gpu.sample_peak()
    with compute:
        if not compiled:
            # Allocated on the compute stream, the witness takes the memory b and c held; the copies
            # wait for H, the last kernels to read them.
            wit = {name: cp.empty(v.shape, dtype=cp.bool_ if v.dtype == np.bool_ else cp.uint32)
                   for name, v in host_wit.items()}
            lane.copy.wait_event(h_end)
        upload = lane.upload_witness(host_wit, wit, compiled)
        sums: dict[str, Any] = {}
        streamed = tuple(name for name, _ in QUERIES if dk.bases[name] is None)
        bases: BaseStream | None = None
        try:
            try:
                # Before the streamed bases' buffers are allocated: a proof let through here finds
                # this one holding only H's output and the witness.
                admission.wait_or_yield(h_end, compute, t, gaps)
                msm_h_begin = compute.record()
                if streamed:
                    bases = BaseStream(gpu, dk, {name: getattr(pk, name).raw for name in streamed}, streamed)
                sums["h"] = msm_batches(gpu, "h", dk, pk.h.raw, h[: len(pk.h)], split=False, stream=bases)
                msm_h_end = compute.record()
                compute.synchronize()
                gpu.sample_peak()
                del h
                t["msm_h"] = cp.cuda.get_elapsed_time(msm_h_begin, msm_h_end) / 1e3
                t["h"] = cp.cuda.get_elapsed_time(h_begin, h_end) / 1e3
            finally:
                upload.join()
            return _msms_after_h(gpu, admission, pk, dk, staged, wit, sums, bases, h_begin, h_end, upload, gaps, t)
        finally:
            if bases is not None:
                bases.close()


def _msms_after_h(gpu: Gpu, admission: Admission, pk: ProvingKey, dk: DeviceKey, staged: Staged,
                  wit: dict[str, Any], sums: dict[str, Any], bases: BaseStream | None, h_begin: Any, h_end: Any,
                  upload: WitnessUpload, gaps: list[tuple[Any, Any]],
                  t: MutableMapping[str, float]) -> dict[str, list[HostPartial]]:
    """`device_phase` once the H MSM is done: the selections and the other four MSMs."""
    clock, compute = time.perf_counter, gpu.compute
    with compute:
        witness_uploaded(gpu.cp, compute, upload, staged, h_end, t)
        admission.preemption_point(compute, t, gaps)

        start = clock()
        b_scalars = select(gpu.cp, gpu.kernels, wit["inputs"], wit["b_in_mask"], wit["aux"], wit["b_mask"])
        compute.synchronize()
        t["gather"] = clock() - start
        for name in ("l", "a", "b_g1", "b_g2"):
            if name == "a":
                # A's scalars are gathered batch by batch from the witness: the whole selection
                # would be one more array of the witness's size, allocated once the pool's large
                # blocks have been split by the arrays of H and L (docs/memory.md).
                start = clock()
                scalars = BatchSelect(gpu.cp, wit["inputs"], wit["aux"], wit["a_mask"], gpu.kernels)
                compute.synchronize()
                t["gather"] += clock() - start
            else:  # no other reference to them is held, so each goes back to the pool after its MSM
                scalars = wit["aux"] if name == "l" else b_scalars
            start = clock()
            sums[name] = msm_batches(gpu, name, dk, getattr(pk, name).raw, scalars, split=True, stream=bases)
            compute.synchronize()
            gpu.sample_peak()
            t[f"msm_{name}"] = clock() - start
            del scalars
            if name == "a":
                wit.clear()  # the witness goes back to the pool
        del b_scalars
        return fetch_sums(gpu, sums, h_begin, t, gaps)
