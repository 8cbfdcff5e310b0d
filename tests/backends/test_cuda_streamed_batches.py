"""The streamed bases' pipeline of a streaming plan (`CudaBackend._msm_batches`), with stand-ins for
CuPy's streams, events and copies: the order in which each batch's bases go up and its MSM runs, and
the buffers it takes, which the memory plan (`plan.streaming_phases`) counts. No GPU needed."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from cuzk.backends.cuda.backend import CudaBackend
from cuzk.backends.cuda.msm import AFFINE_WORDS


class _Recorder:
    """Every stream operation, copy and MSM in the order the host queued them."""

    def __init__(self) -> None:
        self.ops: list[tuple[Any, ...]] = []
        self.events = 0

    def event(self, stream: str) -> tuple[str, int]:
        self.events += 1
        return (stream, self.events)


class _Stream:
    def __init__(self, rec: _Recorder, name: str) -> None:
        self.rec, self.name, self.ptr = rec, name, id(self)

    def record(self) -> tuple[str, int]:
        ev = self.rec.event(self.name)
        self.rec.ops.append(("record", self.name, ev))
        return ev

    def wait_event(self, ev: tuple[str, int]) -> None:
        self.rec.ops.append(("wait", self.name, ev))


class _Buffer:
    """A device buffer: its pointer names it; a slice of it is what an MSM is handed."""

    def __init__(self, rows: int, words: int, ident: int) -> None:
        self.shape, self.data = (rows, words), SimpleNamespace(ptr=ident)

    def __getitem__(self, rows: slice) -> tuple[int, int]:
        return (self.data.ptr, rows.stop)


def _backend(batch: int, n: int, group: str = "g1") -> tuple[Any, Any, np.ndarray, _Recorder, list[_Buffer], Any]:
    rec, buffers = _Recorder(), []
    compute, copy = _Stream(rec, "compute"), _Stream(rec, "copy")
    host = np.zeros((n, AFFINE_WORDS[group]), dtype=np.uint32)

    def empty(shape: tuple[int, int], dtype: Any) -> _Buffer:
        buffers.append(_Buffer(*shape, ident=len(buffers)))
        return buffers[-1]

    def memcpy(dst: int, src: int, nbytes: int, kind: int, stream: int) -> None:
        assert stream == copy.ptr
        lo = (src - host.ctypes.data) // (4 * AFFINE_WORDS[group])
        rec.ops.append(("upload", dst, lo, nbytes))

    def msm(group_: str, bases: tuple[int, int], scalars: Any) -> str:
        rec.ops.append(("msm", bases[0], scalars.start))
        return f"part {scalars.start}"

    cp = SimpleNamespace(uint32=np.uint32, empty=empty,
                         cuda=SimpleNamespace(get_current_stream=lambda: compute,
                                              runtime=SimpleNamespace(memcpyAsync=memcpy, memcpyHostToDevice=1)))
    fake = SimpleNamespace(_cp=cp, _bases_copy=copy,
                           msm=SimpleNamespace(msm=msm, msm_split=msm, add=list, zero=lambda g: "zero"))
    dk = SimpleNamespace(plan=SimpleNamespace(batch=batch), bases={"l": None}, host={"l": host})

    class _Scalars:
        shape = (n, 8)

        def __getitem__(self, rows: slice) -> slice:
            return rows

    return fake, dk, host, rec, buffers, _Scalars()


def _run(batch: int, n: int) -> tuple[list[Any], _Recorder, list[_Buffer]]:
    fake, dk, host, rec, buffers, scalars = _backend(batch, n)
    parts = CudaBackend._msm_batches(fake, "l", dk, host, scalars, split=True)
    return parts, rec, buffers


@pytest.mark.parametrize("n", [100, 256])
def test_a_vector_in_one_batch_goes_up_into_one_buffer(n: int) -> None:
    parts, rec, buffers = _run(256, n)
    assert len(buffers) == 1 and buffers[0].shape[0] == n  # what plan.streaming_phases counts
    uploads = [op for op in rec.ops if op[0] == "upload"]
    assert uploads == [("upload", 0, 0, n * AFFINE_WORDS["g1"] * 4)]
    # Nothing of the MSM overlaps its only upload: the compute stream waits for it first.
    done = next(op[2] for op in rec.ops if op[:2] == ("record", "copy"))
    assert rec.ops.index(("wait", "compute", done)) < rec.ops.index(("msm", 0, 0))
    assert parts == ["part 0"]


def test_batches_go_up_one_ahead_into_two_buffers_in_turn() -> None:
    batch, n = 64, 5 * 64 + 10
    parts, rec, buffers = _run(batch, n)
    assert len(buffers) == 2 and all(b.shape[0] == batch for b in buffers)
    ops = rec.ops
    uploads = {op[2]: ops.index(op) for op in ops if op[0] == "upload"}
    msms = {op[2]: ops.index(op) for op in ops if op[0] == "msm"}
    starts = list(range(0, n, batch))
    assert sorted(uploads) == sorted(msms) == starts
    for i, lo in enumerate(starts):
        buf = next(op[1] for op in ops if op[0] == "upload" and op[2] == lo)
        assert buf == i % 2 and ("msm", buf, lo) in ops
        # The compute stream waits for this batch's upload, recorded on the copy stream right after it.
        uploaded = ops[uploads[lo] + 1]
        assert uploaded[:2] == ("record", "copy")
        assert ops.index(("wait", "compute", uploaded[2])) < msms[lo]
        if i + 1 < len(starts):  # the next batch's upload is queued before this batch computes
            assert uploads[starts[i + 1]] < msms[lo]
        if i >= 2:  # a buffer is filled again only after the batch that last used it
            released = ops[msms[starts[i - 2]] + 1]
            assert released[:2] == ("record", "compute")
            assert ops.index(("wait", "copy", released[2])) < uploads[lo]
    assert parts == [f"part {lo}" for lo in starts]
