"""The streamed bases' pipeline of a streaming plan (`BaseStream`, `msm_batches`), with
stand-ins for CuPy's streams, events and copies: the order in which each batch's bases go up and its
MSM runs, across the vectors of one proof, and the buffers it takes, which the memory plan
(`plan.stream_buffers`) counts. No GPU needed."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from cuzk.backends.cuda.msm import AFFINE_WORDS
from cuzk.backends.cuda.plan import KeyShape, stream_buffers, stream_rows
from cuzk.backends.cuda.streaming import BaseStream, msm_batches


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

    def synchronize(self) -> None:
        self.rec.ops.append(("sync", self.name))


class _Buffer:
    """A device byte buffer: its index names it; a view of it (sliced, viewed, reshaped) is ("buf",
    index, rows), what an MSM is handed."""

    def __init__(self, nbytes: int, ident: int) -> None:
        self.nbytes, self.ident, self.data = nbytes, ident, SimpleNamespace(ptr=ident)
        self.rows = None

    def __getitem__(self, rows: slice) -> _Buffer:
        assert rows.stop <= self.nbytes
        return self

    def view(self, dtype: Any) -> _Buffer:
        return self

    def reshape(self, rows: int, words: int) -> tuple[str, int, int]:
        return ("buf", self.ident, rows)


def _shape(**lengths: int) -> KeyShape:
    full = {"h": 0, "l": 0, "a": 0, "b_g1": 0, "b_g2": 0, **lengths}
    return KeyShape(domain=1 << 10, inputs=1, aux=full["l"], **full)


def _setup(batch: int, lengths: dict[str, int]) -> tuple[Any, Any, dict[str, np.ndarray], _Recorder, list[_Buffer]]:
    rec, buffers = _Recorder(), []
    compute, copy = _Stream(rec, "compute"), _Stream(rec, "copy")
    host = {name: np.zeros((n, AFFINE_WORDS["g2" if name == "b_g2" else "g1"]), dtype=np.uint32)
            for name, n in lengths.items()}

    def empty(nbytes: int, dtype: Any) -> _Buffer:
        buffers.append(_Buffer(nbytes, ident=len(buffers)))
        return buffers[-1]

    def memcpy(dst: int, src: int, nbytes: int, kind: int, stream: int) -> None:
        assert stream == copy.ptr
        name = next(k for k, v in host.items() if v.ctypes.data <= src < v.ctypes.data + max(v.nbytes, 1))
        lo = (src - host[name].ctypes.data) // (4 * host[name].shape[1])
        rec.ops.append(("upload", dst, name, lo, nbytes))

    def msm(group: str, bases: tuple[str, int, int], scalars: slice, bases_ready: Any = None) -> str:
        rec.ops.append(("msm", bases[1], scalars.start, bases_ready))
        return f"part {scalars.start}"

    cp = SimpleNamespace(uint8=np.uint8, uint32=np.uint32, empty=empty,
                         cuda=SimpleNamespace(get_current_stream=lambda: compute,
                                              runtime=SimpleNamespace(memcpyAsync=memcpy, memcpyHostToDevice=1)))
    fake = SimpleNamespace(cp=cp, bases_copy=copy,
                           msm=SimpleNamespace(msm=msm, add=list, zero=lambda g: "zero"))
    dk = SimpleNamespace(plan=SimpleNamespace(batch=batch), shape=_shape(**lengths),
                         bases=dict.fromkeys(lengths), host=host)
    return fake, dk, host, rec, buffers


class _Scalars:
    def __init__(self, n: int) -> None:
        self.shape = (n, 8)

    def __getitem__(self, rows: slice) -> slice:
        return rows


def _prove(batch: int, lengths: dict[str, int]) -> tuple[dict[str, Any], _Recorder, list[_Buffer]]:
    """The vectors' MSMs (unsplit) one after the other through one stream, as a proof runs them."""
    fake, dk, host, rec, buffers = _setup(batch, lengths)
    stream = BaseStream(fake, dk, host, tuple(lengths))
    parts = {name: msm_batches(fake, name, dk, host[name], _Scalars(n), split=False, stream=stream)
             for name, n in lengths.items()}
    return parts, rec, buffers


@pytest.mark.parametrize("n", [100, 256])
def test_a_vector_in_one_batch_goes_up_into_one_buffer(n: int) -> None:
    parts, rec, buffers = _prove(256, {"l": n})
    assert len(buffers) == 1 and buffers[0].nbytes == n * AFFINE_WORDS["g1"] * 4
    assert stream_buffers(_shape(l=n), 256, frozenset({"l"})) == buffers[0].nbytes  # what the plan counts
    uploads = [op for op in rec.ops if op[0] == "upload"]
    assert uploads == [("upload", 0, "l", 0, n * AFFINE_WORDS["g1"] * 4)]
    done = next(op[2] for op in rec.ops if op[:2] == ("record", "copy"))
    assert ("msm", 0, 0, done) in rec.ops  # the MSM waits for its only upload (after its sort)
    assert parts == {"l": ["part 0"]}


def test_batches_go_up_one_ahead_across_vectors_into_two_buffers_in_turn() -> None:
    batch = 64
    lengths = {"h": 3 * 64 + 10, "l": 64, "b_g2": 2 * 32 + 5}
    parts, rec, buffers = _prove(batch, lengths)
    ops = rec.ops
    # Two buffers of a G1 batch's bytes; B_G2's batches have half as many (twice as large) bases.
    assert len(buffers) == 2 and all(b.nbytes == batch * 24 * 4 for b in buffers)
    assert stream_rows("g2", batch) == 32
    assert stream_buffers(_shape(**lengths), batch, frozenset(lengths)) == 2 * batch * 24 * 4
    order = [(name, lo) for name, n in lengths.items() for lo in range(0, n, stream_rows(
        "g2" if name == "b_g2" else "g1", batch))]
    uploads = [op for op in ops if op[0] == "upload"]
    msms = [op for op in ops if op[0] == "msm"]
    assert [(op[2], op[3]) for op in uploads] == order
    assert [op[2] for op in msms] == [lo for _, lo in order]
    for i, (up, m) in enumerate(zip(uploads, msms, strict=True)):
        assert up[1] == m[1] == i % 2  # the buffers in turn
        uploaded = ops[ops.index(up) + 1]
        assert uploaded[:2] == ("record", "copy") and m[3] == uploaded[2]  # the MSM waits for it
        if i + 1 < len(order):  # the next batch, the next vector's first too, is queued before this one computes
            assert ops.index(uploads[i + 1]) < ops.index(m)
        if i >= 2:  # a buffer is filled again only after the batch that last used it
            released = ops[ops.index(msms[i - 2]) + 1]
            assert released[:2] == ("record", "compute")
            assert ops.index(("wait", "copy", released[2])) < ops.index(up)
    assert parts["h"] == [f"part {lo}" for lo in range(0, lengths["h"], batch)]


def test_bases_taken_out_of_order_are_refused() -> None:
    fake, dk, host, _, _ = _setup(64, {"h": 100, "l": 50})
    stream = BaseStream(fake, dk, host, ("h", "l"))
    with pytest.raises(ValueError, match=r"streamed bases taken out of order: l \[0, 50\) asked, \('h', 0, 64\) next"):
        stream.take("l", 0, 50)


def test_a_vector_without_a_pinned_copy_is_converted_when_taken() -> None:
    fake, dk, host, rec, _ = _setup(64, {"h": 100, "l": 70})
    dk.host["l"] = None
    raw = {"h": host["h"], "l": np.zeros((70, 96), np.uint8)}
    converted = []
    fake.msm.upload_bases = lambda group, r, out: converted.append((group, r.shape[0], out))
    stream = BaseStream(fake, dk, raw, ("h", "l"))
    for name, n in (("h", 100), ("l", 70)):
        msm_batches(fake, name, dk, raw[name], _Scalars(n), split=False, stream=stream)
    assert [op[2:4] for op in rec.ops if op[0] == "upload"] == [("h", 0), ("h", 64)]
    assert converted == [("g1", 64, ("buf", 0, 64)), ("g1", 6, ("buf", 1, 6))]
    stream.close()
    assert rec.ops[-1] == ("sync", "copy")


def test_a_scalars_gathered_per_batch_are_the_whole_selection() -> None:
    # Streaming plans gather A's scalars (all inputs, then aux[a_mask]) batch by batch (BatchSelect);
    # numpy stands in for CuPy.
    from cuzk.backends.cuda.streaming import BatchSelect

    rng = np.random.default_rng(5)
    inputs = rng.integers(0, 2**32, size=(7, 8), dtype=np.uint32)
    aux = rng.integers(0, 2**32, size=(300, 8), dtype=np.uint32)
    mask = rng.random(300) < 0.6
    whole = np.concatenate([inputs, aux[mask]])
    select = BatchSelect(np, inputs, aux, mask, SimpleNamespace(flatnonzero=np.flatnonzero))
    assert select.shape == whole.shape and select.index.dtype == np.uint32
    for batch in (1, 5, 7, 8, 64, whole.shape[0], whole.shape[0] + 10):
        got = np.concatenate([select[lo:lo + batch] for lo in range(0, whole.shape[0], batch)])
        assert np.array_equal(got, whole), batch


def test_a_vector_alone_gets_a_stream_of_its_own_closed_after_it() -> None:
    fake, dk, host, rec, buffers = _setup(64, {"l": 100})
    parts = msm_batches(fake, "l", dk, host["l"], _Scalars(100), split=False)
    assert parts == ["part 0", "part 64"] and len(buffers) == 2
    assert [op[2:4] for op in rec.ops if op[0] == "upload"] == [("l", 0), ("l", 64)]
    assert rec.ops[-1] == ("sync", "copy")
