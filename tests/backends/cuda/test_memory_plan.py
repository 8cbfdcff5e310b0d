"""The device memory plan (`cuzk.backends.cuda.plan`) for the cards storage providers own and each
Filecoin circuit, the refusal of a card too small, and the out-of-memory retry (an injected
allocation failure through `CudaBackend._guarded`, with stand-ins for CuPy: no GPU needed)."""

from __future__ import annotations

import contextlib
import threading
from types import SimpleNamespace

import pytest
from fake_backend import FakeBackend

from cuzk.backends.cuda.backend import CudaBackend, CudaDeviceError
from cuzk.backends.cuda.msm import working_bytes
from cuzk.backends.cuda.plan import (
    BATCHES,
    CONTEXT_BYTES,
    GIB,
    PHASE_SLACK,
    PHASES,
    QUERIES,
    DeviceTooSmallError,
    KeyShape,
    Products,
    estimated_seconds,
    minimum_bytes,
    plan_beside,
    plan_device,
    products_bytes,
    products_fit,
    stream_buffers,
    stream_rows,
    streaming_phases,
    tail_capacity,
)
from cuzk.backends.cuda.residency import DeviceKey, DeviceKeys, pinned_bases
from cuzk.cli.circuit_cmd import resolve_shape

CARDS_GIB = (8, 16, 24, 32, 80, 141)
CIRCUITS = ("porep-32g", "wpost-32g", "snap-32g", "winning-32g", "porep-2k", "wpost-2k", "snap-2k")


def shape_of(circuit_id: str) -> KeyShape:
    """The key's lengths from the circuit's exact shape table (what `cuzk circuit shape` prints)."""
    layout = resolve_shape(circuit_id).expected_layout
    return KeyShape(domain=layout.domain_size, inputs=layout.ic, aux=layout.l, h=layout.h, l=layout.l, a=layout.a,
                    b_g1=layout.b_g1, b_g2=layout.b_g2)


def budget(card_gib: int) -> int:
    """What a card of that size leaves the pool under `memory_limit` = its size."""
    return card_gib * GIB - CONTEXT_BYTES


@pytest.mark.parametrize("circuit_id", CIRCUITS)
@pytest.mark.parametrize("card", CARDS_GIB)
def test_a_plan_never_plans_past_its_budget(circuit_id: str, card: int) -> None:
    shape = shape_of(circuit_id)
    try:
        plan = plan_device(shape, budget(card))
    except DeviceTooSmallError:
        assert minimum_bytes(shape) > budget(card)
        return
    resident = plan.resident_bytes(shape)
    assert resident + plan.reserve <= budget(card)
    assert set(plan.resident) | set(plan.streamed) == {name for name, _ in QUERIES}
    assert plan.streamed_bytes(shape) + resident == shape.key_bytes
    if plan.mode == "streaming":
        # Every phase, with the resident bases beside it, within the budget.
        assert all(resident + peak <= budget(card) for peak in plan.phases.values())
        assert plan.batch in BATCHES


@pytest.mark.parametrize("card", CARDS_GIB)
def test_keys_planned_one_beside_another_fit_together(card: int) -> None:
    """PoRep, WindowPoSt and WinningPoSt at 32 GiB planned in turn on one card (`plan_beside`): all the
    resident bases and the largest reserve fit the budget, whichever key's proof runs."""
    planned: list[tuple[KeyShape, object]] = []
    for circuit_id in ("porep-32g", "wpost-32g", "winning-32g"):
        shape = shape_of(circuit_id)
        try:
            plan = plan_beside(shape, budget(card), [(p.resident_bytes(s), p.reserve) for s, p in planned])
        except DeviceTooSmallError:
            continue
        planned.append((shape, plan))
    assert planned
    resident = sum(p.resident_bytes(s) for s, p in planned)
    assert resident + max(p.reserve for _, p in planned) <= budget(card)
    if card == 80:  # PoRep keeps every vector; WindowPoSt, planned after it, fewer than alone
        (_, first), (wpost, second) = planned[:2]
        assert set(first.resident) == {name for name, _ in QUERIES}
        assert set(second.resident) < set(plan_device(wpost, budget(card)).resident)


def test_a_device_process_plans_a_key_beside_the_keys_it_holds() -> None:
    """`DeviceKeys.plan_key` on an 80 GiB card holding PoRep-32GiB with every vector resident: a
    WindowPoSt-32GiB key keeps fewer vectors resident than alone, so that PoRep's proofs still fit
    beside both keys."""
    porep, wpost = shape_of("porep-32g"), shape_of("wpost-32g")
    gpu = SimpleNamespace(device_id=0, memory=SimpleNamespace(budget=lambda: budget(80), limit=None))
    keys = DeviceKeys(gpu, threading.RLock())  # type: ignore[arg-type]
    held = DeviceKey(plan_device(porep, budget(80)), porep)
    held.bases = {name: SimpleNamespace(nbytes=porep.base_bytes(name)) for name in held.plan.resident}
    keys.loaded = {"porep": held}  # type: ignore[assignment]
    plan = keys.plan_key("wpost", wpost)  # type: ignore[arg-type]
    assert set(held.plan.resident) == {name for name, _ in QUERIES}
    assert set(plan.resident) < set(plan_device(wpost, budget(80)).resident)
    assert held.nbytes() + plan.resident_bytes(wpost) + max(held.plan.reserve, plan.reserve) <= budget(80)


def test_porep_32g_on_each_card() -> None:
    shape = shape_of("porep-32g")
    with pytest.raises(DeviceTooSmallError, match=r"needs at least 1[0-9]\.\d GiB of device memory"):
        plan_device(shape, budget(8))
    plans = {card: plan_device(shape, budget(card)) for card in CARDS_GIB[1:]}
    assert plans[141].mode == "resident"  # the H200 keeps running as before
    for card in (16, 24, 32, 80):
        assert plans[card].mode == "streaming"
    assert plans[16].resident == ()  # 16 GiB holds a proof's working memory and no bases
    assert plans[80].streamed == ()  # 80 GiB holds the whole 44 GiB key beside batched MSMs
    kept = [plans[card].resident_bytes(shape) for card in (16, 24, 32, 80, 141)]
    assert kept == sorted(kept)  # more memory never keeps fewer bases
    times = [estimated_seconds(shape, plans[card]) for card in (16, 24, 32, 80)]
    assert times == sorted(times, reverse=True)


def test_a_smaller_batch_is_taken_over_tree_groups_below_one_and_a_half_gib() -> None:
    # At 16 GiB the H MSM ran 1,356 ms in batches of 2^24 with 768 MiB tree groups and 1,141 in 2^23
    # with 1.5 GiB (TREE_OVERHEAD): the plan takes the second, which also fits.
    shape = shape_of("porep-32g")
    plan = plan_device(shape, budget(16))
    assert (plan.batch, plan.tree_bytes) == (1 << 23, 3 << 29)
    everything = frozenset(name for name, _ in QUERIES)
    assert max(streaming_phases(shape, 1 << 24, 3 << 28, everything).values()) <= budget(16)  # it fit too
    assert plan_device(shape, budget(24)).tree_bytes >= 3 << 29


def test_the_streamed_vectors_are_the_ones_whose_uploads_their_msm_hides() -> None:
    # The H and B_G2 MSMs do the most work per base: they are streamed before A, B_G1 and L.
    shape = shape_of("porep-32g")
    plan = plan_device(shape, budget(32))
    assert "h" in plan.streamed and "b_g2" in plan.streamed
    assert "a" in plan.resident


def test_small_circuits_stay_resident_on_every_card() -> None:
    for card in CARDS_GIB:
        plan = plan_device(shape_of("winning-32g"), budget(card))
        assert plan.mode == "resident" and plan.streamed == ()


def test_the_witness_products_fit_only_where_there_is_room() -> None:
    shape = shape_of("porep-32g")
    matrix = 2 * GIB  # about the largest of PoRep-32GiB's compiled matrices
    assert not products_fit(plan_device(shape, budget(16)), shape, matrix)
    assert products_fit(plan_device(shape, budget(141)), shape, matrix)


#: PoRep-32GiB's compiled circuit: its rows, about its largest matrix, and its three matrices (the
#: 6.1 GB the 16 GiB plan's host products read, benchmarks/results/porep-e2e-cuda-32g-cap16GiB-h200-2026-12-04d.json).
POREP_32G_PRODUCTS = Products(rows=130_278_869, largest_matrix=2_700_000_000, matrices=6_100_463_286)


def test_a_compiled_circuits_products_go_where_the_partition_is_fastest() -> None:
    shape, products = shape_of("porep-32g"), POREP_32G_PRODUCTS
    plans = {card: plan_device(shape, budget(card), products) for card in (16, 24, 32, 80)}
    # 16 GiB cannot hold the witness, a, b, c and a matrix: the host computes them, and the plan is the
    # one it was without them.
    assert not products_fit(plans[16], shape, products.largest_matrix)
    assert plans[16] == plan_device(shape, budget(16))
    for card in (24, 32, 80):
        assert products_fit(plans[card], shape, products.largest_matrix)
        assert plans[card].resident_bytes(shape) + products_bytes(shape, products.largest_matrix) <= budget(card)
    # At 32 GiB, A and B_G1 resident would leave them no room; on the host they would set the pace.
    alone = plan_device(shape, budget(32))
    assert alone.resident == ("a", "b_g1") and not products_fit(alone, shape, products.largest_matrix)
    assert plans[32].resident_bytes(shape) < alone.resident_bytes(shape)
    assert estimated_seconds(shape, plans[32], products) < estimated_seconds(shape, alone, products)
    times = [estimated_seconds(shape, plans[card], products) for card in (16, 24, 32, 80)]
    assert times == sorted(times, reverse=True)


@pytest.mark.parametrize("card", (16, 20, 24, 28, 32, 40, 48))
def test_a_plan_weighing_the_products_stays_within_its_budget(card: int) -> None:
    shape = shape_of("porep-32g")
    plan = plan_device(shape, budget(card), POREP_32G_PRODUCTS)
    resident = plan.resident_bytes(shape)
    assert all(resident + peak <= budget(card) for peak in plan.phases.values())


def test_host_products_are_paced_by_the_host() -> None:
    # One staging buffer: a partition's products follow the last one's a, b, c out of it, so a host
    # slower than the device sets the pace whatever the device plan.
    shape = shape_of("porep-32g")
    plan = plan_device(shape, budget(16))
    slow = Products(rows=10 * POREP_32G_PRODUCTS.rows, largest_matrix=POREP_32G_PRODUCTS.largest_matrix,
                    matrices=POREP_32G_PRODUCTS.matrices)
    assert estimated_seconds(shape, plan, slow) > 10 * estimated_seconds(shape, plan)


def test_smaller_plans_hold_less_until_the_floor() -> None:
    shape = shape_of("porep-32g")
    plan = plan_device(shape, budget(24))
    seen = 0
    while (smaller := plan.smaller(shape)) is not None:
        assert smaller.reserve <= plan.reserve
        assert (smaller.batch, smaller.tree_bytes) != (plan.batch, plan.tree_bytes)
        assert smaller.resident == plan.resident
        plan, seen = smaller, seen + 1
    assert seen >= 1 and plan.batch == BATCHES[-1]
    # A resident plan's smaller one streams nothing but batches its MSMs.
    resident = plan_device(shape, budget(141))
    smaller = resident.smaller(shape)
    assert smaller is not None and smaller.mode == "streaming" and smaller.streamed == ()


def test_phases_grow_with_the_batch() -> None:
    shape = shape_of("porep-32g")
    everything = frozenset(name for name, _ in QUERIES)
    small = streaming_phases(shape, 1 << 20, 3 << 26, everything)
    large = streaming_phases(shape, 1 << 25, 6 << 30, everything)
    assert all(small[k] <= large[k] for k in small)
    assert small["h"] == large["h"]  # a, b, c: the batch does not change them


def test_the_streamed_bases_buffers_are_counted_from_the_first_streamed_msm_on() -> None:
    # The streaming phase's BaseStream holds two buffers of the largest streamed batch (one when all that is
    # streamed is one batch) from the first streamed vector's MSM to the proof's end, so that each
    # vector's first batch goes up while the vector before it computes.
    shape = shape_of("porep-32g")
    batch, tree = 1 << 25, 6 << 30
    assert shape.b_g1 <= batch and stream_rows("g2", batch) == batch // 2 < shape.b_g2
    everything = frozenset(name for name, _ in QUERIES)
    assert stream_buffers(shape, batch, frozenset({"b_g1"})) == shape.base_bytes("b_g1")
    assert stream_buffers(shape, batch, frozenset({"b_g2"})) == 2 * (batch // 2) * 192
    assert stream_buffers(shape, batch, everything) == 2 * batch * 96
    assert stream_buffers(shape, batch, frozenset()) == 0

    resident = streaming_phases(shape, batch, tree, frozenset())
    only_b_g2 = streaming_phases(shape, batch, tree, frozenset({"b_g2"}))
    assert all(only_b_g2[k] == resident[k] for k in PHASES[:-1])
    # Streamed, B_G2 goes in batches of half as many bases, its merged tail holding bases (192 bytes)
    # instead of indices into them (4).
    def b_g2(rows: int, point: int) -> int:
        cap = tail_capacity(rows)
        return 14 * rows + cap * (32 + point) + working_bytes("g2", cap, tree)

    b_sc = 32 * shape.b_g1 + PHASE_SLACK
    assert resident["msm_b_g2"] == b_sc + b_g2(shape.b_g2, 4)
    assert only_b_g2["msm_b_g2"] == b_sc + b_g2(batch // 2, 192) + 2 * (batch // 2) * 192

    streamed = streaming_phases(shape, batch, tree, everything)
    assert streamed["h"] == resident["h"]  # allocated after H, once a, b, c are freed
    assert all(streamed[k] - resident[k] >= 2 * batch * 96 for k in PHASES[1:])


def test_a_split_msm_holds_half_a_batch_of_merged_tail() -> None:
    # MergedTails: a batch's split (14 bytes a scalar), the tail's scalars and bases, and the MSM of half
    # a batch, whose working memory is what the plan counts (not a whole batch's).
    shape = shape_of("porep-32g")
    batch, tree = 1 << 24, 3 << 28
    l_streamed = streaming_phases(shape, batch, tree, frozenset({"l"}))["msm_l"]
    wit, b_sc = shape.witness_bytes, 32 * shape.b_g1
    cap = tail_capacity(batch)
    assert cap == batch // 2
    bufs = stream_buffers(shape, batch, frozenset({"l"}))
    want = wit + b_sc + 14 * batch + cap * (32 + 96) + working_bytes("g1", cap, tree) + bufs + PHASE_SLACK
    assert l_streamed == want


def test_half_an_h200_keeps_the_h_bases_resident() -> None:
    # Two logical devices on one H200 (devices = [0, 0]) get ~69 GiB each: H's 12.9 GB stay on the
    # device, and only B_G2, one buffer of it, goes up per proof.
    shape = shape_of("porep-32g")
    plan = plan_device(shape, budget(69))
    assert plan.mode == "streaming" and plan.streamed == ("b_g2",)
    assert plan.resident_bytes(shape) + plan.reserve <= budget(69)


# -- the out-of-memory retry, with stand-ins for CuPy ------------------------------------------------

class _FakeOomError(Exception):
    pass


def _backend_with(plan_key: DeviceKey) -> SimpleNamespace:
    cuda = SimpleNamespace(memory=SimpleNamespace(OutOfMemoryError=_FakeOomError),
                           runtime=SimpleNamespace(CUDARuntimeError=RuntimeError),
                           driver=SimpleNamespace(CUDADriverError=OSError))
    gpu = SimpleNamespace(device_id=0, memory=SimpleNamespace(release_cached=lambda: None))
    keys = DeviceKeys(gpu, threading.RLock())  # type: ignore[arg-type]
    keys.loaded = {"pk": plan_key}  # type: ignore[assignment]
    return SimpleNamespace(_cp=SimpleNamespace(cuda=cuda), _device=contextlib.nullcontext(), keys=keys, device_id=0,
                           plan=gpu.memory)


def test_an_out_of_memory_proof_is_retried_once_with_a_smaller_plan() -> None:
    shape = shape_of("porep-32g")
    key = DeviceKey(plan_device(shape, budget(24)), shape)
    first = key.plan
    fake = _backend_with(key)
    plans_seen = []

    def prove(pk, asg, r, s, t, job, filled=None):  # the stand-in for CudaBackend._prove
        plans_seen.append(key.plan)
        if len(plans_seen) == 1:
            raise _FakeOomError("Out of memory allocating 4,165,436,928 bytes")
        return "proof"

    fake._prove = prove
    assert CudaBackend._guarded(fake, "pk", lambda: (None, None), None, None, {}, "job") == "proof"  # type: ignore[arg-type]
    assert fake.keys.oom_retries == 1
    assert plans_seen[0] is first and plans_seen[1].reserve <= first.reserve
    assert key.plan is plans_seen[1]  # later proofs keep the smaller plan


def test_the_failed_attempts_arrays_are_released_before_the_retry() -> None:
    """The first attempt's device arrays, held by its frames in a reference cycle, are gone when the
    retry starts: its allocations then find the memory they need."""
    import weakref

    shape = shape_of("porep-32g")
    key = DeviceKey(plan_device(shape, budget(24)), shape)
    fake = _backend_with(key)

    class DeviceArray:
        pass

    first_attempt: list[weakref.ref] = []

    def prove(pk, asg, r, s, t, job, filled=None):
        if not first_attempt:
            abc = [DeviceArray() for _ in range(3)]
            cycle = {"abc": abc}
            cycle["self"] = cycle  # a cycle: only the gc or cleared frames would free it
            first_attempt.extend(weakref.ref(a) for a in abc)
            raise _FakeOomError("Out of memory allocating 4,294,967,296 bytes")
        assert all(ref() is None for ref in first_attempt)
        return "proof"

    fake._prove = prove
    assert CudaBackend._guarded(fake, "pk", lambda: (None, None), None, None, {}, "job") == "proof"  # type: ignore[arg-type]


def test_a_second_out_of_memory_error_fails_the_proof_clearly() -> None:
    shape = shape_of("porep-32g")
    key = DeviceKey(plan_device(shape, budget(24)), shape)
    fake = _backend_with(key)

    def prove(pk, asg, r, s, t, job, filled=None):
        raise _FakeOomError("Out of memory allocating 1 bytes")

    fake._prove = prove
    with pytest.raises(CudaDeviceError, match="CUDA error on device 0: Out of memory"):
        CudaBackend._guarded(fake, "pk", lambda: (None, None), None, None, {}, "job")  # type: ignore[arg-type]
    assert fake.keys.oom_retries == 1


def test_the_refusal_names_the_circuit_and_the_limit() -> None:
    from cuzk.engine.device_worker import DeviceWorker

    class TooSmall(FakeBackend):
        def load_key(self, pk: object, compiled: object = None) -> None:
            raise DeviceTooSmallError("needs at least 12.9 GiB of device memory with memory_limit = 8.0 GiB")

    state = DeviceWorker(TooSmall())
    state.keys["porep-32g"], state.verifying_keys["porep-32g"] = object(), object()
    with pytest.raises(DeviceTooSmallError, match=r"^porep-32g needs at least 12\.9 GiB of device memory with "
                                                  r"memory_limit = 8\.0 GiB$"):
        state.load("porep-32g", "/unused", True)
    assert "porep-32g" not in state.hot
    assert "porep-32g" not in state.keys and "porep-32g" not in state.verifying_keys  # no host copy kept for nothing


def test_a_key_is_planned_knowing_the_compiled_circuit_its_proofs_compute(monkeypatch) -> None:
    """The device process maps the compiled circuit before it loads the key and gives it to the backend
    (one that plans device memory places the products); a backend that keeps no matrices resident
    (the default `load_compiled`) says so with `resident` None."""
    from cuzk.engine import device_worker
    from cuzk.engine.device_worker import DeviceWorker

    compiled = SimpleNamespace(circuit_id="porep-32g")
    monkeypatch.setattr(device_worker, "load_verified", lambda path, circuit_id: compiled)
    calls: list[tuple[str, object]] = []

    class Planned(FakeBackend):
        def load_key(self, pk: object, compiled: object = None) -> None:
            calls.append(("load_key", compiled))

        def load_compiled(self, compiled: object, pk: object) -> tuple[bool, bool, bool]:
            calls.append(("load_compiled", compiled))
            return (False, False, False)

    class Unplanned(FakeBackend):
        def load_key(self, pk: object, compiled: object = None) -> None:
            calls.append(("load_key", compiled))

    state = DeviceWorker(Planned())
    state.keys["porep-32g"], state.verifying_keys["porep-32g"] = object(), object()
    reply = state.load("porep-32g", "/unused", True, "/compiled.cuzk-r1cs")
    assert calls == [("load_key", compiled), ("load_compiled", compiled)]
    assert reply["compiled"]["usable"] and reply["compiled"]["resident"] == [False, False, False]
    calls.clear()
    state = DeviceWorker(Unplanned())
    state.keys["porep-32g"], state.verifying_keys["porep-32g"] = object(), object()
    reply = state.load("porep-32g", "/unused", True, "/compiled.cuzk-r1cs")
    assert reply["compiled"]["usable"] and reply["compiled"]["resident"] is None
    assert calls == [("load_key", compiled)]
    # A compiled file found unusable: the key is planned without it, and the reply says so.
    calls.clear()
    monkeypatch.setattr(device_worker, "load_verified", lambda path, circuit_id: None)
    state = DeviceWorker(Planned())
    state.keys["porep-32g"], state.verifying_keys["porep-32g"] = object(), object()
    reply = state.load("porep-32g", "/unused", True, "/compiled.cuzk-r1cs")
    assert calls == [("load_key", None)] and not reply["compiled"]["usable"] and "porep-32g" in state.hot


def test_streamed_bases_are_not_pinned_past_the_hosts_spare_memory(monkeypatch, caplog) -> None:
    """A streaming plan's pinned copy that would leave the host less than HOST_PIN_SPARE is not made:
    the vector stays unpinned (each proof converts it from the key's bytes) instead of the host
    running out of memory that cannot be reclaimed."""
    import numpy as np

    from cuzk.backends.cuda import residency

    monkeypatch.setattr(residency, "host_available", lambda: 1 << 30)
    gpu = SimpleNamespace(cp=None, device_id=3)
    raw = np.zeros((1 << 24, 96), dtype=np.uint8)  # 2^24 G1 bases: 1.5 GiB in device form
    with caplog.at_level("WARNING", logger="cuzk.backends.cuda"):
        assert pinned_bases(gpu, "g1", raw) is None  # type: ignore[arg-type]
    assert "device 3: 1.5 GiB of g1 bases would not leave this host 4.0 GiB" in caplog.text
