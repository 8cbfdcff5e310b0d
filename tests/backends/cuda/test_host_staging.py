"""The pinned witness staging of streaming plans (`cuzk.backends.cuda.staging`, and how
`Lane.stage` uploads from it), with stand-ins for CuPy's streams, events and copies. No GPU
needed: what is checked is which bytes go where and when the buffer may be written again."""

from __future__ import annotations

import threading
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from cuzk.backends.cuda.inputs import CompiledWitness, host_products, host_witness
from cuzk.backends.cuda.lanes import Lane
from cuzk.backends.cuda.staging import ALIGN, HostStaging, staging_bytes


class _Event:
    def __init__(self, log: list[str], name: str) -> None:
        self.log, self.name = log, name

    def synchronize(self) -> None:
        self.log.append(f"sync {self.name}")


def _arrays(seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {"inputs": rng.integers(0, 2**32, (3, 8), dtype=np.uint32),
            "aux": rng.integers(0, 2**32, (5, 8), dtype=np.uint32),
            "a_mask": rng.integers(0, 2, 5).astype(np.bool_)}


def test_arrays_are_copied_each_at_an_aligned_offset_and_read_back_whole() -> None:
    arrays = _arrays()
    staging = HostStaging(np.zeros(staging_bytes([v.nbytes for v in arrays.values()]), dtype=np.uint8))
    filled = staging.fill(arrays)
    assert filled is not None and list(filled.views) == list(arrays)
    base = staging._buffer.ctypes.data
    for name, v in arrays.items():
        view = filled.views[name]
        assert (view.ctypes.data - base) % ALIGN == 0
        assert view.tobytes() == v.tobytes()
    assert staging.fills == 1 and staging.missed == 0


def test_the_buffer_is_refused_while_a_proof_holds_it_and_taken_again_after_its_transfer() -> None:
    log: list[str] = []
    staging = HostStaging(np.zeros(4096, dtype=np.uint8))
    first = staging.fill(_arrays(1))
    assert first is not None
    assert staging.fill(_arrays(2)) is None  # held: the second proof stages the old way
    assert staging.missed == 1
    first.release(_Event(log, "first's upload"))
    first.release(_Event(log, "again"))  # a second release changes nothing
    assert log == []
    second = staging.fill(_arrays(2))
    assert second is not None
    assert log == ["sync first's upload"]  # waited for the transfer that read the bytes it overwrites
    assert second.views["aux"].tobytes() == _arrays(2)["aux"].tobytes()


def test_arrays_that_do_not_fit_are_refused_and_leave_the_buffer_free() -> None:
    arrays = _arrays()
    staging = HostStaging(np.zeros(staging_bytes([v.nbytes for v in arrays.values()]) - 1, dtype=np.uint8))
    assert staging.fill(arrays) is None and staging.missed == 1
    assert staging.fill({"inputs": arrays["inputs"]}) is not None


def test_a_failed_copy_hands_the_buffer_back() -> None:
    staging = HostStaging(np.zeros(4096, dtype=np.uint8))

    def broken(dst: np.ndarray, src: np.ndarray) -> None:
        raise OSError("no")

    with pytest.raises(OSError):
        staging.fill(_arrays(), broken)
    assert staging.fill(_arrays()) is not None


def test_one_buffer_goes_to_one_of_two_proofs_staging_at_once() -> None:
    staging = HostStaging(np.zeros(1 << 16, dtype=np.uint8))
    gate = threading.Barrier(2)
    got: list[Any] = []

    def stage(seed: int) -> None:
        gate.wait()
        got.append(staging.fill(_arrays(seed)))

    threads = [threading.Thread(target=stage, args=(k,)) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(f is not None for f in got) == 1 and staging.missed == 1


# -- Lane.stage with a staged witness -----------------------------------------------------------


class _Stream:
    def __init__(self, log: list[Any], name: str) -> None:
        self.log, self.name, self.ptr = log, name, id(self)

    def __enter__(self) -> _Stream:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def record(self) -> _Event:
        self.log.append(("record", self.name))
        return _Event(self.log, f"{self.name} {len(self.log)}")

    def wait_event(self, ev: Any) -> None:
        self.log.append(("wait", self.name))


class _DeviceArray:
    def __init__(self, shape: tuple[int, ...], dtype: Any) -> None:
        self.shape, self.dtype = shape, np.dtype(dtype)
        self.nbytes = int(np.prod(shape)) * self.dtype.itemsize
        self.data = SimpleNamespace(ptr=id(self))

    def __getitem__(self, rows: slice) -> _DeviceArray:
        assert rows.step is None
        start, stop = rows.start or 0, min(rows.stop, self.shape[0])
        view = _DeviceArray((stop - start, *self.shape[1:]), self.dtype)
        view.data = SimpleNamespace(ptr=self.data.ptr + start * (self.nbytes // max(1, self.shape[0])))
        return view


def _witness(num_inputs: int = 2, num_aux: int = 6) -> CompiledWitness:
    compiled = SimpleNamespace(num_constraints=4, circuit_id="t", fingerprint="f",
                               a_aux_density=np.ones(num_aux, dtype=np.bool_),
                               b_input_density=np.ones(num_inputs, dtype=np.bool_),
                               b_aux_density=np.zeros(num_aux, dtype=np.bool_))
    rng = np.random.default_rng(5)
    return CompiledWitness(compiled, rng.integers(0, 2**63, (num_inputs, 4), dtype=np.uint64),
                            rng.integers(0, 2**63, (num_aux, 4), dtype=np.uint64), True, None)


def _fake_lane(log: list[Any]) -> Any:
    copies: list[tuple[int, int, int]] = []

    def memcpy(dst: int, src: int, nbytes: int, kind: int, stream: int) -> None:
        copies.append((dst, src, nbytes))
        log.append(("memcpy", nbytes))

    cp = SimpleNamespace(uint32=np.uint32, bool_=np.bool_,
                         zeros=lambda shape, dtype: _DeviceArray(shape, dtype),
                         empty=lambda shape, dtype: _DeviceArray(shape, dtype),
                         cuda=SimpleNamespace(runtime=SimpleNamespace(memcpyAsync=memcpy, memcpyHostToDevice=1)))
    uploads: list[str] = []
    lane = Lane(SimpleNamespace(cp=cp), _Stream(log, "copy"),
                SimpleNamespace(upload=lambda dst, src: uploads.append(src.nbytes), host_copy=np.copyto))
    return lane, copies, uploads


def test_a_staged_witness_goes_up_from_the_pinned_buffer_and_the_buffer_is_handed_back_after_queuing() -> None:
    log: list[Any] = []
    lane, copies, uploads = _fake_lane(log)
    asg = _witness()
    arrays = host_witness(asg)
    dk = SimpleNamespace(staging=HostStaging(np.zeros(staging_bytes([v.nbytes for v in arrays.values()]),
                                                      dtype=np.uint8)))
    pinned = lane.prestage(asg, dk.staging)
    assert pinned is not None
    staged = lane.stage(asg, 8, pinned=pinned)
    assert uploads == []  # nothing through the uploader's small buffers with the device held
    assert [n for _, _, n in copies] == [v.nbytes for v in arrays.values()]
    for (dst, src, _n), name in zip(copies, arrays, strict=True):
        assert dst == staged.wit[name].data.ptr and src == pinned.views[name].ctypes.data
    # Handed back with the event recorded after the last transfer was queued, which a later fill waits for.
    last_copy = max(i for i, op in enumerate(log) if op[0] == "memcpy")
    assert log[last_copy + 1] == ("record", "copy") and pinned.released
    assert dk.staging._read_done is staged.abc_done
    assert dk.staging.fill(arrays) is not None
    assert log[-1] == f"sync {staged.abc_done.name}"


def test_without_a_staged_witness_the_uploader_stages_it_as_before() -> None:
    log: list[Any] = []
    lane, copies, uploads = _fake_lane(log)
    asg = _witness()
    assert lane.prestage(asg, None) is None  # the key has no buffer
    lane.stage(asg, 8)
    assert copies == [] and uploads == [v.nbytes for v in host_witness(asg).values()]


def _abc_assignment(rows: int = 4, num_aux: int = 6) -> Any:
    rng = np.random.default_rng(9)
    vec = {name: rng.integers(0, 2**63, (rows, 4), dtype=np.uint64) for name in "abc"}
    return SimpleNamespace(num_constraints=rows, inputs=np.zeros((1, 4), np.uint64),
                           aux=np.zeros((num_aux, 4), np.uint64), a_aux_density=np.ones(num_aux, np.bool_),
                           b_aux_density=np.ones(num_aux, np.bool_), b_input_density=np.ones(1, np.bool_), **vec)


def test_a_b_c_from_the_host_products_go_up_from_the_pinned_buffer() -> None:
    log: list[Any] = []
    lane, copies, uploads = _fake_lane(log)
    asg = _abc_assignment()
    dk = SimpleNamespace(staging=HostStaging(np.zeros(staging_bytes([asg.a.nbytes] * 3), dtype=np.uint8)))
    pinned = lane.prestage(asg, dk.staging)
    assert pinned is not None and list(pinned.views) == ["a", "b", "c"]
    staged = lane.stage(asg, 8, witness=False, pinned=pinned)
    assert uploads == [] and [n for _, _, n in copies] == [asg.a.nbytes] * 3
    for (dst, src, _n), name, dev in zip(copies, "abc", staged.abc, strict=True):
        assert src == pinned.views[name].ctypes.data and pinned.views[name].tobytes() == getattr(asg, name).tobytes()
        assert dst == dev.data.ptr
    assert pinned.released and dk.staging._read_done is staged.abc_done


def test_a_b_c_go_up_part_by_part_and_hand_the_buffer_back_with_each_parts_mark(monkeypatch) -> None:
    from cuzk.backends.cuda import lanes

    monkeypatch.setattr(lanes, "PART_ROWS", 3)
    log: list[Any] = []
    lane, copies, _uploads = _fake_lane(log)
    asg = _abc_assignment(rows=7)
    dk = SimpleNamespace(staging=HostStaging(np.zeros(staging_bytes([asg.a.nbytes] * 3), dtype=np.uint8)))
    pinned = lane.prestage(asg, dk.staging)
    staged = lane.stage(asg, 8, witness=False, pinned=pinned)
    # Rows 0-2 of a, b, c, a mark; 3-5, a mark; row 6, a mark; then the whole transfer's event.
    assert [n for _, _, n in copies] == [96] * 3 + [96] * 3 + [32] * 3
    for k, (dst, src, _n) in enumerate(copies):
        part, name = divmod(k, 3)
        lo = 3 * part
        assert src == pinned.views["abc"[name]].ctypes.data + 32 * lo
        assert dst == staged.abc[name].data.ptr + 32 * lo
    assert [nbytes for nbytes, _ in dk.staging._marks] == [96, 192, 224]
    assert dk.staging._read_done is staged.abc_done


_ABC = {"a": 128, "b": 128, "c": 128}  #: four rows of a, b, c


def _read_in_two_parts(log: list[str]) -> HostStaging:
    """A buffer whose last reader read a, b, c's rows 0-1, then 2-3, then was done."""
    staging = HostStaging(np.zeros(4096, dtype=np.uint8))
    first = staging.take(_ABC, wait=True)
    first.release(_Event(log, "all"), [(64, _Event(log, "rows 0-1")), (128, _Event(log, "rows 2-3"))])
    return staging


def test_a_writer_in_parts_waits_only_for_the_transfer_of_the_rows_it_writes() -> None:
    log: list[str] = []
    staging = _read_in_two_parts(log)
    second = staging.take(_ABC, wait=True, in_parts=True)
    assert log == []  # taken without waiting for the transfer
    second.writable(32)
    assert log == ["sync rows 0-1"]
    second.writable(64)
    second.writable(65)
    assert log == ["sync rows 0-1", "sync rows 2-3"]
    second.writable()
    assert log[-1] == "sync all"
    # Arrays laid out otherwise than the marks' wait for the whole transfer at their first part.
    second.release(_Event(log, "all again"), [(64, _Event(log, "part"))])
    third = staging.take({"a": 256}, wait=True, in_parts=True)
    third.writable(32)
    assert log[-1] == "sync all again" and "sync part" not in log
    # A whole take waits for everything, as before.
    third.release(_Event(log, "last"), [(64, _Event(log, "last part"))])
    assert staging.take({"a": 256}, wait=True) is not None and log[-2:] == ["sync last part", "sync last"]


def test_a_writer_in_parts_that_fails_hands_on_the_transfer_it_did_not_wait_for() -> None:
    log: list[str] = []
    staging = _read_in_two_parts(log)
    failed = staging.take(_ABC, wait=True, in_parts=True)
    failed.writable(32)
    failed.release(None)  # its attempt failed after its first part
    after = staging.take(_ABC, wait=True, in_parts=True)
    after.writable(128)
    assert log == ["sync rows 0-1", "sync rows 2-3"]  # rows 2-3 still waited for: the first transfer's
    after.writable()
    assert log[-1] == "sync all"


def test_host_products_in_parts_write_no_part_before_its_rows_have_gone_up(mimc: Any, monkeypatch) -> None:
    """The next proof's products start while the last proof's a, b, c are still going up, and write
    each part only once the transfer has read those rows: what went up is the last proof's, what
    stays is the next one's."""
    from cuzk.r1cs import compiled as compiled_module

    compiled, inputs, aux, ref = mimc
    rows = compiled.num_constraints
    part = 16
    monkeypatch.setattr(compiled_module, "PART_ROWS", part)
    dk = SimpleNamespace(staging=HostStaging(np.zeros(staging_bytes([32 * rows] * 3), dtype=np.uint8)))
    previous = dk.staging.take({name: 32 * rows for name in "abc"}, wait=True)
    old = {name: np.full(32 * rows, 7, dtype=np.uint8) for name in "abc"}
    for name in "abc":
        previous.views[name][:] = old[name]
    sent = {name: np.zeros(32 * rows, dtype=np.uint8) for name in "abc"}

    class Transfer:
        """A part's copy of the previous a, b, c, made when the writer first waits for it."""

        def __init__(self, lo: int, hi: int) -> None:
            self.lo, self.hi, self.done = lo, hi, False

        def synchronize(self) -> None:
            if not self.done:
                for name in "abc":
                    sent[name][32 * self.lo: 32 * self.hi] = previous.views[name][32 * self.lo: 32 * self.hi]
                self.done = True

    parts = [Transfer(lo, min(rows, lo + part)) for lo in range(0, rows, part)]
    whole = Transfer(0, rows)
    previous.release(whole, [(32 * p.hi, p) for p in parts])
    asg, _filled = host_products(dk.staging, compiled, inputs, aux, True, {})
    for name in "abc":
        assert sent[name].tobytes() == old[name].tobytes()  # every row went up before it was overwritten
        assert np.array_equal(getattr(asg, name), getattr(ref, name))
    assert all(p.done for p in parts) and rows > 2 * part


def test_a_buffer_too_small_for_the_proof_leaves_it_to_the_uploader() -> None:
    lane, copies, uploads = _fake_lane([])
    asg = _abc_assignment()
    dk = SimpleNamespace(staging=HostStaging(np.zeros(asg.a.nbytes, dtype=np.uint8)))
    assert lane.prestage(asg, dk.staging) is None and dk.staging.missed == 1
    lane.stage(asg, 8, witness=False)
    assert copies == [] and uploads == [asg.a.nbytes] * 3


# -- the plan's status ----------------------------------------------------------------------------------


def _status(budget: int, staging: HostStaging | None, compiled_rows: int | None) -> dict[str, Any]:
    """CudaBackend.memory_plan's entry (`DeviceKeys.status`) of one streaming key (nothing resident)
    and, with `compiled_rows`, its compiled circuit (one matrix of that many rows, a few KB)."""
    from cuzk.backends.cuda.plan import DevicePlan, KeyShape
    from cuzk.backends.cuda.residency import DeviceKey, DeviceKeys
    from cuzk.r1cs.compiled import CompiledMatrix

    shape = KeyShape(domain=1 << 10, inputs=2, aux=500, h=1023, l=500, a=502, b_g1=300, b_g2=300)
    pk = object()
    dk = DeviceKey(DevicePlan(budget, "streaming", (), reserve=1 << 20, batch=1 << 8), shape, staging=staging)
    compiled = {}
    if compiled_rows is not None:
        mat = CompiledMatrix(np.zeros(compiled_rows + 1, np.uint32), np.zeros(3 * compiled_rows, np.uint32),
                             np.zeros(3 * compiled_rows, np.uint32))
        compiled["f"] = SimpleNamespace(owner=pk, host_bytes=0, compiled=SimpleNamespace(a=mat, b=mat, c=mat))
    keys = SimpleNamespace(loaded={pk: dk}, compiled=compiled)
    return DeviceKeys.status(keys, {pk: "t"})[0]  # type: ignore[arg-type]


def test_the_status_says_where_a_keys_products_run_and_what_its_staging_holds() -> None:
    staging = HostStaging(np.zeros(4096, dtype=np.uint8))
    filled = staging.fill({"a": np.ones(10, np.uint8)})
    assert filled is not None
    filled.release(None)
    roomy = _status(1 << 30, staging, 8)
    assert roomy["products"] == "device"
    assert roomy["host_pinned_staging_bytes"] == 4096 and roomy["host_pinned_bytes"] == 4096
    assert (roomy["inputs_prestaged"], roomy["inputs_prestage_missed"]) == (1, 0)
    assert _status(1 << 20, None, 8)["products"] == "host"  # the witness, a, b, c and a matrix exceed it
    none = _status(1 << 30, None, None)
    assert none["products"] is None and none["host_pinned_staging_bytes"] == 0


def test_the_status_counts_the_compiled_pages_that_host_products_read() -> None:
    host = _status(1 << 20, None, 8)
    assert host["products"] == "host" and host["host_mapped_compiled_bytes"] == 3 * (9 + 24 + 24) * 4
    assert _status(1 << 30, None, 8)["host_mapped_compiled_bytes"] == 0  # the device's products: pinned copies


# -- host products written into the buffer --------------------------------------------------------------


def test_a_proof_that_finds_the_buffer_taken_waits_for_it_when_asked_to() -> None:
    log: list[str] = []
    staging = HostStaging(np.zeros(4096, dtype=np.uint8))
    first = staging.take({"a": 64, "b": 64}, wait=True)
    assert first is not None and [v.nbytes for v in first.views.values()] == [64, 64]
    assert (first.views["b"].ctypes.data - first.views["a"].ctypes.data) == ALIGN
    assert staging.take({"a": 64}, wait=False) is None  # taken: refused at once
    got: list[Any] = []
    waiter = threading.Thread(target=lambda: got.append(staging.take({"a": 64, "b": 64}, wait=True)))
    waiter.start()
    waiter.join(0.2)
    assert waiter.is_alive() and got == []  # still waiting
    first.release(_Event(log, "first's upload"))
    waiter.join(10)
    assert got and got[0] is not None and log == ["sync first's upload"]
    assert staging.take({"a": 8192}, wait=True) is None  # too large: refused, not waited for


@pytest.fixture(scope="module")
def mimc() -> tuple[Any, np.ndarray, np.ndarray, Any]:
    from cuzk.circuits.examples import MimcCircuit
    from cuzk.field.limbs import ints_to_limbs
    from cuzk.groth16.synthesis import compile_circuit, synthesize_compiled, synthesize_witness

    compiled = compile_circuit(MimcCircuit.with_total_constraints(64), "mimc-6")
    instance = MimcCircuit.with_total_constraints(64, 5)
    w = synthesize_witness(instance)
    ref = synthesize_compiled(instance, compiled)
    return compiled, ints_to_limbs(w.input_assignment), ints_to_limbs(w.aux_assignment), ref


def test_host_products_are_written_into_the_keys_staging_and_it_is_held_for_the_upload(mimc: Any) -> None:
    compiled, inputs, aux, ref = mimc
    rows = compiled.num_constraints
    dk = SimpleNamespace(staging=HostStaging(np.zeros(staging_bytes([32 * rows] * 3), dtype=np.uint8)))
    t: dict[str, float] = {}
    asg, filled = host_products(dk.staging, compiled, inputs, aux, True, t)
    assert filled is not None and not filled.released and {"staging_wait", "host_products"} <= set(t)
    for name in "abc":
        assert np.array_equal(getattr(asg, name), getattr(ref, name))
        assert getattr(asg, name).ctypes.data == filled.views[name].ctypes.data  # no pageable copy
    assert dk.staging.take({"a": 32}, wait=False) is None  # held until its upload is queued
    # What goes up with the device held is the buffer's bytes, not another copy.
    log: list[Any] = []
    lane, copies, uploads = _fake_lane(log)
    lane.stage(asg, 1 << (rows - 1).bit_length(), witness=False, pinned=filled)
    assert uploads == [] and [src for _, src, _ in copies] == [filled.views[n].ctypes.data for n in "abc"]
    assert filled.released


def test_host_products_that_fail_their_check_hand_the_buffer_back(mimc: Any) -> None:
    from cuzk.errors import SynthesisError

    compiled, inputs, aux, _ = mimc
    bad = aux.copy()
    bad[len(bad) // 2, 0] ^= 1
    dk = SimpleNamespace(staging=HostStaging(np.zeros(staging_bytes([32 * compiled.num_constraints] * 3),
                                                      dtype=np.uint8)))
    with pytest.raises(SynthesisError):
        host_products(dk.staging, compiled, inputs, bad, True, {})
    assert dk.staging.take({"a": 32}, wait=False) is not None  # free again


def test_without_a_staging_buffer_host_products_get_their_own_arrays(mimc: Any) -> None:
    compiled, inputs, aux, ref = mimc
    asg, filled = host_products(None, compiled, inputs, aux, True, {})
    assert filled is None and np.array_equal(asg.c, ref.c)
