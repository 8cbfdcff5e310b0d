"""The memory plan on the device: streaming plans (bases in pinned host memory, MSMs in batches, the
witness uploaded after H) give the resident plan's proofs, `memory_limit` caps CuPy's pool, a key
that cannot fit is refused at load, and an out-of-memory proof is retried with a smaller plan."""

from __future__ import annotations

import random

import pytest

from cuzk.backends.cpu import CpuBackend
from cuzk.backends.cuda.plan import CONTEXT_BYTES, GIB, DevicePlan, DeviceTooSmallError, KeyShape, minimum_bytes
from cuzk.circuits.registry import lookup
from cuzk.groth16.assignment import Assignment
from cuzk.groth16.synthesis import synthesize_for_proving
from cuzk.groth16.verifier import verify_proof

pytestmark = pytest.mark.gpu


def _assignment(circuit_id: str, seed: int) -> Assignment:
    return Assignment.from_proving_assignment(
        synthesize_for_proving(lookup(circuit_id).example(random.Random(seed)), check=True))


@pytest.fixture
def capped(needs_gpu):
    """CudaBackend factory whose pool limits are lifted again after the test (the pool is the process's)."""
    from cuzk.backends.cuda import runtime
    cupy = runtime.get_cupy()

    from cuzk.backends.cuda import CudaBackend

    yield lambda limit: CudaBackend(0, memory_limit=limit)
    pool = cupy.get_default_memory_pool()
    pool.set_limit(size=0)
    pool.free_all_blocks()


@pytest.mark.parametrize("resident", [(), ("l", "b_g1"), ("h", "a", "b_g2")])
@pytest.mark.parametrize("batch", [1 << 8, 1 << 11])
def test_streaming_plans_give_the_resident_proof(capped, bits_params, resident: tuple[str, ...], batch: int) -> None:
    pk = bits_params.pk
    backend = capped(None)
    asg = _assignment(bits_params.circuit_id, 41)
    want = CpuBackend().prove(pk, asg, r=11, s=13)
    backend.load_key(pk, plan=DevicePlan(budget=1 << 40, mode="streaming", resident=resident, reserve=0, batch=batch,
                                         tree_bytes=1 << 26))
    assert {name for name, kept in backend.resident(pk).items() if kept} == set(resident)
    timings: dict[str, float] = {}
    proof = backend.prove(pk, asg, r=11, s=13, timings=timings)
    assert proof == want
    assert verify_proof(pk.vk, proof, asg.public_inputs())
    assert timings["h2d_witness"] >= 0 and timings["device"] > 0
    plan = backend.memory_plan()
    assert plan["keys"][0]["mode"] == "streaming" and set(plan["keys"][0]["resident"]) == set(resident)
    assert plan["keys"][0]["host_pinned_bytes"] == plan["keys"][0]["streamed_bytes"]
    backend.unload_key(pk)


def test_two_threads_prove_streaming_plans_at_once(capped, mimc_params, bits_params) -> None:
    import threading

    backend = capped(None)
    for params in (mimc_params, bits_params):
        backend.load_key(params.pk, plan=DevicePlan(budget=1 << 40, mode="streaming", resident=("a",), reserve=0,
                                                    batch=1 << 9))
    work = [(p.pk, _assignment(p.circuit_id, seed)) for p, seed in ((bits_params, 51), (mimc_params, 52),
                                                                     (bits_params, 53))]
    want = [CpuBackend().prove(pk, asg, r=5, s=7) for pk, asg in work]
    got: list[object] = [None] * len(work)

    def run(k: int) -> None:
        got[k] = backend.prove(*work[k], r=5, s=7)

    threads = [threading.Thread(target=run, args=(k,)) for k in range(len(work))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert got == want


def test_memory_limit_caps_the_pool_and_is_reported(capped, mimc_params) -> None:
    from cuzk.backends.cuda import runtime
    cupy = runtime.get_cupy()

    backend = capped(2 * GIB)
    assert cupy.get_default_memory_pool().get_limit() == 2 * GIB - CONTEXT_BYTES
    pk = mimc_params.pk
    asg = _assignment(mimc_params.circuit_id, 42)
    proof = backend.prove(pk, asg, r=1, s=2)
    assert verify_proof(pk.vk, proof, asg.public_inputs())
    plan = backend.memory_plan()
    assert plan["memory_limit"] == 2 * GIB and plan["budget"] <= 2 * GIB - CONTEXT_BYTES
    assert 0 < plan["peak_pool_bytes"] <= 2 * GIB - CONTEXT_BYTES
    assert plan["keys"][0]["mode"] == "resident" and plan["oom_retries"] == 0


def test_a_key_that_cannot_fit_is_refused_at_load(capped, bits_params) -> None:
    pk = bits_params.pk
    need = minimum_bytes(KeyShape.of(pk))
    backend = capped(CONTEXT_BYTES + need // 2)
    with pytest.raises(DeviceTooSmallError, match=r"needs at least .* GiB of device memory with memory_limit = "):
        backend.load_key(pk)
    assert not any(backend.resident(pk).values())


def _streaming_in_whole_batches(capped, params, seed: int):  # type: ignore[no-untyped-def]
    """A backend with params' key streamed in batches of 2^20 (a plan with smaller ones to retry with),
    an assignment, and the CPU's proof of it for r, s = 3, 5."""
    backend = capped(None)
    first = DevicePlan(budget=1 << 40, mode="streaming", resident=(), reserve=0, batch=1 << 20)
    backend.load_key(params.pk, plan=first)
    asg = _assignment(params.circuit_id, seed)
    return params.pk, backend, first, asg, CpuBackend().prove(params.pk, asg, r=3, s=5)


def test_an_out_of_memory_error_is_retried_with_a_smaller_plan(capped, bits_params, monkeypatch) -> None:
    from cuzk.backends.cuda import runtime
    cupy = runtime.get_cupy()

    pk, backend, first, asg, want = _streaming_in_whole_batches(capped, bits_params, 43)
    from cuzk.backends.cuda import streaming

    real, calls = streaming.device_phase, []

    def first_call_out_of_memory(*args, **kwargs):
        calls.append(1)
        if len(calls) == 1:
            raise cupy.cuda.memory.OutOfMemoryError(1 << 40, 1 << 40)
        return real(*args, **kwargs)

    monkeypatch.setattr(streaming, "device_phase", first_call_out_of_memory)
    assert backend.prove(pk, asg, r=3, s=5) == want
    assert len(calls) == 2 and backend.oom_retries == 1
    retried = backend.key_plan(pk)  # the plan's next smaller one, kept for later proofs
    assert (retried.batch, retried.tree_bytes) == (first.batch, first.tree_bytes // 2)


def test_a_streaming_proof_takes_the_device_with_no_blocks_cached(capped, bits_params, monkeypatch) -> None:
    """The pool's free blocks, left by the proof before, go back to the driver before a streaming proof
    allocates, so its arrays are not carved out of another proof's blocks. (A reserve larger than any
    card keeps the proof from staging ahead, before it holds the device.)"""
    from cuzk.backends.cuda import runtime
    cupy = runtime.get_cupy()

    pk = bits_params.pk
    backend = capped(None)
    backend.load_key(pk, plan=DevicePlan(budget=1 << 50, mode="streaming", resident=(), reserve=1 << 49,
                                         batch=1 << 8, tree_bytes=1 << 26))
    asg = _assignment(bits_params.circuit_id, 47)
    backend.prove(pk, asg, r=3, s=5)
    pool = cupy.get_default_memory_pool()
    before = pool.free_bytes()
    assert before > 0  # the first proof's blocks, cached
    release, cached = backend.plan.release_cached, []

    def watched() -> None:
        release()
        cached.append(pool.free_bytes())

    monkeypatch.setattr(backend.plan, "release_cached", watched)
    proof = backend.prove(pk, asg, r=3, s=5)
    # Whole free blocks went back; what may stay is the free rest of blocks kept in use (tables).
    assert cached and cached[0] < before
    assert proof == CpuBackend().prove(pk, asg, r=3, s=5)


def test_an_allocation_failing_in_the_device_phase_is_retried_with_a_smaller_plan(capped, bits_params,
                                                                                   monkeypatch) -> None:
    """The device itself runs out of memory mid-proof (an allocation fails, as a card shared with other
    work does): the attempt's memory goes back, and the retry's smaller plan gives the same proof."""
    from cuzk.backends.cuda import runtime, streaming
    from cuzk.backends.cuda.emulated import device as emulated_device

    if not runtime.emulated():
        pytest.skip("injects the failure through the emulated device (CUZK_EMULATED_GPUS)")
    from cuzk.backends.cuda.emulated import arrays as emulated_arrays

    # CuPy's own allocator: a capped backend made earlier installs one that frees the cache and tries
    # once more (cuzk.backends.cuda.device), which a single failed allocation would not get past.
    monkeypatch.setattr(emulated_arrays, "_allocator", [emulated_arrays._default_malloc])
    pk, backend, first, asg, want = _streaming_in_whole_batches(capped, bits_params, 47)
    assert backend.prove(pk, asg, r=3, s=5) == want  # the tables a first proof leaves on the device
    used_before = backend.plan.pool_used()
    real, entered = streaming.device_phase, []

    def fail_inside(*args, **kwargs):  # the phase's first allocation (H's, on this thread) fails, once
        if not entered:
            emulated_device.device_state(0).inject_oom(after=1)
        entered.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(streaming, "device_phase", fail_inside)
    assert backend.prove(pk, asg, r=3, s=5) == want
    assert len(entered) == 2
    assert backend.oom_retries == 1 and backend.key_plan(pk).tree_bytes == first.tree_bytes // 2
    assert backend.plan.pool_used() <= used_before and backend.admission.running_reserve == 0  # nothing held on
    backend.unload_key(pk)


def test_streamed_bases_left_unpinned_give_the_resident_proof(capped, bits_params, monkeypatch, tmp_path) -> None:
    """A host without memory to spare for the pinned copies (and no shared copy of them to join): the
    streamed vectors stay unpinned and each batch is converted from the key's bytes on the device;
    the proof is the same."""
    from cuzk.backends.cuda import residency, shared_pinned

    monkeypatch.setattr(residency, "host_available", lambda: 0)
    monkeypatch.setenv(shared_pinned.ROOT_ENV, str(tmp_path))
    pk = bits_params.pk
    backend = capped(None)
    asg = _assignment(bits_params.circuit_id, 44)
    want = CpuBackend().prove(pk, asg, r=7, s=9)
    backend.load_key(pk, plan=DevicePlan(budget=1 << 40, mode="streaming", resident=("b_g1",), reserve=0,
                                         batch=1 << 9))
    assert all(name == "b_g1" or backend.keys.loaded[pk].host.get(name) is None for name in ("h", "l", "a", "b_g2"))
    proof = backend.prove(pk, asg, r=7, s=9)
    assert proof == want and verify_proof(pk.vk, proof, asg.public_inputs())
    backend.unload_key(pk)


def _resident_compiled_proof(backend, params, seed: int, r: int, s: int):
    """The compiled circuit of `params`, a witness of it, and its proof by `backend` under the resident
    plan; the key and the compiled circuit are unloaded after."""
    from cuzk.field.limbs import ints_to_limbs
    from cuzk.groth16.synthesis import compile_circuit, synthesize_witness

    spec = lookup(params.circuit_id)
    compiled = compile_circuit(spec.blank(), params.circuit_id)
    witness = synthesize_witness(spec.example(random.Random(seed)))
    inputs, aux = ints_to_limbs(witness.input_assignment), ints_to_limbs(witness.aux_assignment)
    backend.load_key(params.pk)
    want = backend.prove_compiled(params.pk, compiled, inputs, aux, r=r, s=s)
    backend.unload_compiled(compiled)
    backend.unload_key(params.pk)
    return compiled, inputs, aux, want


@pytest.mark.parametrize("resident", [(), ("a", "b_g1")])
def test_compiled_proofs_under_a_streaming_plan_give_the_resident_proof(capped, bits_params, resident) -> None:
    """prove_compiled (a, b, c by the sparse products, the witness staged first) within a streaming
    plan: the stream of bases across the MSMs, the merged tails and A's scalars gathered per batch
    give the resident plan's proof."""
    pk, backend = bits_params.pk, capped(None)
    compiled, inputs, aux, want = _resident_compiled_proof(backend, bits_params, 46, r=8, s=10)
    backend.load_key(pk, plan=DevicePlan(budget=1 << 40, mode="streaming", resident=resident, reserve=0,
                                         batch=1 << 9, tree_bytes=1 << 26))
    assert backend.prove_compiled(pk, compiled, inputs, aux, r=8, s=10) == want
    assert verify_proof(pk.vk, want, Assignment.from_compiled(compiled, (inputs, aux)).public_inputs())
    backend.unload_key(pk)


def test_a_witness_copied_into_the_pinned_staging_first_gives_the_same_proof(capped, bits_params, monkeypatch) -> None:
    """Under a streaming plan with no room to stage ahead on the device, a compiled proof copies its
    witness into the key's pinned buffer before it takes the device and uploads from there
    (`cuzk.backends.cuda.staging`), and a proof from a, b, c (the host products') its a, b, c: the
    same proofs, the buffer used by each proof in turn."""
    from cuzk.backends.cuda import residency

    pk, backend = bits_params.pk, capped(None)
    compiled, inputs, aux, want = _resident_compiled_proof(backend, bits_params, 47, r=3, s=4)
    backend.load_key(pk, plan=DevicePlan(budget=1 << 40, mode="streaming", resident=(), reserve=0,
                                         batch=1 << 9, tree_bytes=1 << 26))
    monkeypatch.setattr(backend, "_stage_ahead", lambda *args, **kwargs: (None, 0))
    assert [backend.prove_compiled(pk, compiled, inputs, aux, r=3, s=4) for _ in range(2)] == [want, want]
    entry = backend.memory_plan()["keys"][0]
    assert entry["inputs_prestaged"] == 2 and entry["inputs_prestage_missed"] == 0
    assert entry["host_pinned_staging_bytes"] > 0
    # The host products' buffer:
    residency.host_staging(backend.gpu, backend.keys.loaded[pk], compiled, on_device=False)
    asg = Assignment.from_compiled(compiled, (inputs, aux))
    assert backend.prove(pk, asg, r=3, s=4) == want
    entry = backend.memory_plan()["keys"][0]
    assert entry["inputs_prestaged"] == 1 and entry["host_pinned_staging_bytes"] >= 3 * 32 * asg.num_constraints
    backend.unload_key(pk)


@pytest.mark.parametrize("part_rows", [None, 7])
def test_host_products_written_into_the_pinned_staging_give_the_resident_proof(capped, bits_params,
                                                                               monkeypatch, part_rows) -> None:
    """A plan whose products do not fit the device computes a, b, c on the host, straight into the
    key's pinned staging buffer: two threads' proofs take it in turn (the second writes each part of
    its rows once the first's transfer has read it; with parts of 7 rows, many) and give the resident
    proof; the status says the products run on the host and counts the compiled matrices they read."""
    import threading

    from cuzk.backends.cuda import backend as backend_module
    from cuzk.backends.cuda import lanes, residency
    from cuzk.r1cs import compiled as compiled_module

    if part_rows is not None:
        monkeypatch.setattr(lanes, "PART_ROWS", part_rows)
        monkeypatch.setattr(compiled_module, "PART_ROWS", part_rows)
    pk, backend = bits_params.pk, capped(None)
    compiled, inputs, aux, want = _resident_compiled_proof(backend, bits_params, 48, r=3, s=4)
    monkeypatch.setattr(backend_module, "products_fit", lambda *args: False)
    monkeypatch.setattr(residency, "products_fit", lambda *args: False)
    backend.load_key(pk, plan=DevicePlan(budget=1 << 40, mode="streaming", resident=(), reserve=0,
                                         batch=1 << 9, tree_bytes=1 << 26))
    backend.load_compiled(compiled, pk)  # as the daemon does with the key: the staging buffer is made here
    got: list[object] = [None, None]
    timings: list[dict[str, float]] = [{}, {}]

    def run(k: int) -> None:
        got[k] = backend.prove_compiled(pk, compiled, inputs, aux, r=3, s=4, timings=timings[k])

    threads = [threading.Thread(target=run, args=(k,)) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert got == [want, want]
    assert all("host_products" in t and "staging_wait" in t for t in timings)
    entry = backend.memory_plan()["keys"][0]
    assert entry["products"] == "host" and entry["host_mapped_compiled_bytes"] > 0
    assert entry["inputs_prestaged"] == 2 and entry["host_pinned_staging_bytes"] >= 3 * 32 * compiled.num_constraints
    backend.unload_key(pk)
