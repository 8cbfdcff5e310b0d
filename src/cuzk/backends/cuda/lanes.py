"""Lanes: a copy stream and its pinned uploader, taken by one proof for its whole duration, so that
proofs staged side by side never share staging buffers or copy queues.

A proof's device inputs (a, b, c padded to the domain, the inputs, the aux witness and the A/B
density masks) are allocated at once and copied on its lane through a pinned double buffer whose
staging copies run on several host threads (`cuzk.backends.cuda.uploader`). Where the proof may,
this happens before it takes the device (`cuzk.backends.cuda.admission`), so that two prover
workers sharing a GPU stage one proof while the other's kernels run. Under a streaming plan what a
lane uploads first (a compiled proof's witness, else a, b, c) is copied into the key's pinned
buffer before the device is taken (`Lane.prestage`, `cuzk.backends.cuda.staging`), so that only the
copy engine's transfer is left to do with the device held.
"""

from __future__ import annotations

import threading
import time
from collections.abc import MutableMapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from cuzk.backends.cuda.deferred import complete_on_device
from cuzk.backends.cuda.inputs import CompiledWitness, ProofInputs, host_witness, words
from cuzk.backends.cuda.staging import Filled, HostStaging, Mark
from cuzk.backends.cuda.uploader import PinnedUploader
from cuzk.r1cs.compiled import PART_ROWS

if TYPE_CHECKING:
    from cuzk.backends.cuda.gpu import Gpu


@dataclass
class Staged:
    """A proof's device inputs, allocated on its lane's stream and queued for upload there."""

    abc: list[Any]
    wit: dict[str, Any]
    host_wit: dict[str, np.ndarray]
    copy_begin: Any
    abc_done: Any  #: a, b, c are up (compiled: the witness is up)
    queue_s: float  #: host time spent queuing those copies (pinned staging included)


@dataclass
class WitnessUpload:
    """A witness upload running on a host thread of its own (None: nothing to upload)."""

    thread: threading.Thread | None = None
    done: list[Any] = field(default_factory=list)  #: the lane's event once it is up
    seconds: list[float] = field(default_factory=list)  #: host time the staging copies took
    failures: list[BaseException] = field(default_factory=list)

    def join(self) -> None:
        if self.thread is not None:
            self.thread.join()


class Lane:
    """A copy stream (`copy`) and its pinned uploader on `gpu` (of which `stage` reads `cp`, and for
    deferred witness rows the kernels)."""

    def __init__(self, gpu: Gpu, copy: Any, uploader: PinnedUploader) -> None:
        self.gpu, self.copy, self.uploader = gpu, copy, uploader

    def prestage(self, asg: ProofInputs, staging: HostStaging | None) -> Filled | None:
        """What `stage` uploads first, copied into a key's pinned `staging` buffer before the proof
        takes the device: a compiled proof's witness (but aux that the device writes, the deferred
        gadgets', which goes up its own way), else a, b, c. None when the key has no buffer, another
        proof holds it, or it is too small."""
        if staging is None:
            return None
        if isinstance(asg, CompiledWitness):
            arrays = host_witness(asg)
            if asg.deferred is not None:
                del arrays["aux"]
        else:
            arrays = {name: v for name, v in zip("abc", (asg.a, asg.b, asg.c), strict=True)}
        return staging.fill(arrays, self.uploader.host_copy)

    def stage(self, asg: ProofInputs, m: int, *, witness: bool = True, stream: Any = None,
              pinned: Filled | None = None) -> Staged:
        """Allocate a proof's device inputs on `stream` (default: the lane's) and queue their upload on
        the lane's stream: a, b, c (compiled circuits: the witness, from which a, b, c are made on the
        device), and with `witness` the witness too. With the lane's stream nothing here touches the
        compute stream, so it can run while another proof's kernels do. What `pinned` holds already
        (`prestage`) goes up from there by the copy engine alone, and the buffer is handed back once
        that is queued."""
        cp, clock, gpu = self.gpu.cp, time.perf_counter, self.gpu

        start = clock()
        nc = asg.num_constraints
        marks: list[Mark] | None = None
        alloc = stream if stream is not None else self.copy
        host_wit = host_witness(asg)
        with alloc:
            abc = [cp.zeros((m, 8), dtype=cp.uint32) for _ in range(3)]
            wit = {name: cp.empty(v.shape, dtype=cp.bool_ if v.dtype == np.bool_ else cp.uint32)
                   for name, v in host_wit.items()} if witness else {}
        if alloc is not self.copy:  # memory that stream freed may still be in use there
            self.copy.wait_event(alloc.record())
        with self.copy:
            copy_begin = self.copy.record()
            if isinstance(asg, CompiledWitness):
                for name, v in host_wit.items():
                    if name == "aux" and asg.deferred is not None:
                        complete_on_device(asg.deferred, asg.aux, wit[name], gpu.kernels,
                                           lambda: gpu.sha256_witness, lambda: gpu.poseidon_paths)
                    else:
                        self._upload_staged(wit[name], pinned, name, v)
            elif pinned is not None:  # a, b, c (`prestage` and host products stage all three or none)
                marks = self._upload_staged_abc(abc, pinned, nc)
            else:
                for dst, src in zip(abc, (asg.a, asg.b, asg.c), strict=True):
                    if nc:
                        self.uploader.upload(dst[:nc], words(src))
            abc_done = self.copy.record()
        if pinned is not None:
            pinned.release(abc_done, marks)
        return Staged(abc, wit, host_wit, copy_begin, abc_done, clock() - start)

    def _upload_staged_abc(self, abc: list[Any], pinned: Filled, rows: int) -> list[Mark]:
        """Queue a, b, c's upload from the pinned staging part by part (each part's rows of the three
        together), each part's event recorded: the marks that let the next proof write its own a, b, c
        into those rows while the rest go up (`cuzk.backends.cuda.staging`)."""
        marks: list[Mark] = []
        for lo in range(0, rows, PART_ROWS):
            hi = min(rows, lo + PART_ROWS)
            for name, dst in zip("abc", abc, strict=True):
                self._copy_pinned(dst[lo:hi], pinned.views[name][32 * lo: 32 * hi], name)
            marks.append((32 * hi, self.copy.record()))
        return marks

    def _upload_staged(self, dst: Any, pinned: Filled | None, name: str, host: np.ndarray) -> None:
        """Queue dst = host on the lane's stream: from `pinned`'s copy of it when it has one (the copy
        engine alone), else through the uploader's staging buffers."""
        src = pinned.views.get(name) if pinned is not None else None
        if src is None:
            self.uploader.upload(dst, host)
            return
        self._copy_pinned(dst, src, name)

    def _copy_pinned(self, dst: Any, src: np.ndarray, name: str) -> None:
        """Queue dst = src (pinned host bytes) on the lane's stream: the copy engine alone."""
        if src.nbytes != dst.nbytes:
            raise ValueError(f"staged {name}: {src.nbytes} bytes for {dst.nbytes} on the device")
        if src.nbytes:
            runtime = self.gpu.cp.cuda.runtime
            runtime.memcpyAsync(dst.data.ptr, src.ctypes.data, src.nbytes, runtime.memcpyHostToDevice, self.copy.ptr)

    def upload_witness(self, host_wit: dict[str, np.ndarray], wit: dict[str, Any], skip: bool) -> WitnessUpload:
        """The witness's upload into `wit` on the lane's stream, from a host thread of its own (the
        staging copies are host work); nothing when `skip` (a compiled circuit's went up at staging)."""
        upload = WitnessUpload()
        if skip:
            return upload

        def run() -> None:
            try:
                begin = time.perf_counter()
                with self.gpu.device:
                    for name, v in host_wit.items():
                        self.uploader.upload(wit[name], v)
                    upload.done.append(self.copy.record())
                upload.seconds.append(time.perf_counter() - begin)
            except BaseException as exc:  # re-raised by the proving thread after join
                upload.failures.append(exc)

        upload.thread = threading.Thread(target=run, name="cuzk-witness-upload")
        upload.thread.start()
        return upload


def witness_uploaded(cp: Any, compute: Any, upload: WitnessUpload, staged: Staged, since: Any,
                     t: MutableMapping[str, float]) -> None:
    """After `upload` was joined: raise its failure, make the `compute` stream wait for the witness,
    and time the uploads (h2d_witness from `since`)."""
    if upload.failures:
        raise upload.failures[0]
    if upload.thread is not None:
        t["upload_wait"] = staged.queue_s + upload.seconds[0]
        compute.wait_event(upload.done[0])
        compute.synchronize()
        t["h2d_abc"] = cp.cuda.get_elapsed_time(staged.copy_begin, staged.abc_done) / 1e3
        t["h2d_witness"] = cp.cuda.get_elapsed_time(since, upload.done[0]) / 1e3
    else:
        t["upload_wait"] = staged.queue_s
        t["h2d_abc"] = 0.0
        t["h2d_witness"] = cp.cuda.get_elapsed_time(staged.copy_begin, staged.abc_done) / 1e3


class Lanes:
    """The idle lanes of `gpu`, reused by later proofs (a proof takes one for its whole duration)."""

    def __init__(self, gpu: Gpu) -> None:
        self.gpu = gpu
        self.idle: list[Lane] = []
        self._lock = threading.Lock()

    def take(self) -> Lane:
        with self._lock:
            if self.idle:
                return self.idle.pop()
        copy = self.gpu.cp.cuda.Stream(non_blocking=True)
        return Lane(self.gpu, copy, PinnedUploader(self.gpu.cp, copy))

    def give(self, lane: Lane) -> None:
        with self._lock:
            self.idle.append(lane)
