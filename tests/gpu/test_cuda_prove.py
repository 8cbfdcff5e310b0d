"""Whole proofs on the CudaBackend: equal to the CPU backend's for fixed r, s, and verifying."""

from __future__ import annotations

import contextlib
import random
import time

import pytest

from cuzk.backends.cpu import CpuBackend
from cuzk.circuits.registry import lookup
from cuzk.groth16.assignment import Assignment
from cuzk.groth16.synthesis import synthesize_for_proving
from cuzk.groth16.verifier import verify_proof

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def backend(needs_gpu):
    from cuzk.backends.cuda import CudaBackend

    return CudaBackend(0)


def _assignment(circuit_id: str, seed: int) -> Assignment:
    return Assignment.from_proving_assignment(
        synthesize_for_proving(lookup(circuit_id).example(random.Random(seed)), check=True))


@pytest.mark.parametrize("fixture", ["mimc_params", "bits_params"])
def test_proof_equals_cpu_and_verifies(backend, request, fixture: str) -> None:
    params = request.getfixturevalue(fixture)
    asg = _assignment(params.circuit_id, 21)
    timings: dict[str, float] = {}
    proof = backend.prove(params.pk, asg, r=12345, s=67890, timings=timings)
    assert proof == CpuBackend().prove(params.pk, asg, r=12345, s=67890)
    assert verify_proof(params.pk.vk, proof, asg.public_inputs())
    for key in ("h", "msm_h", "msm_l", "msm_a", "msm_b_g1", "msm_b_g2", "select", "assemble", "h2d_abc",
                "h2d_witness", "device"):
        assert key in timings and timings[key] >= 0


def test_random_proofs_verify_and_keys_load_once(backend, mimc_params) -> None:
    pk = mimc_params.pk
    backend.load_key(pk)
    assert all(backend.resident(pk).values())
    asg = _assignment(mimc_params.circuit_id, 22)
    p1, p2 = backend.prove(pk, asg), backend.prove(pk, asg)
    assert p1 != p2
    assert verify_proof(pk.vk, p1, asg.public_inputs()) and verify_proof(pk.vk, p2, asg.public_inputs())
    info = backend.devices()[0]
    assert info.kind == "cuda" and info.memory_total and info.extra["current_job"] == ""
    backend.unload_key(pk)
    assert not any(backend.resident(pk).values())


def test_streamed_bases_give_the_same_proof(backend, bits_params) -> None:
    """A streaming plan with nothing resident: every MSM uploads its bases batch by batch."""
    from cuzk.backends.cuda.plan import DevicePlan

    pk = bits_params.pk
    backend.unload_key(pk)
    backend.load_key(pk, plan=DevicePlan(budget=1 << 40, mode="streaming", resident=(), reserve=0, batch=1 << 9))
    asg = _assignment(bits_params.circuit_id, 23)
    streamed = backend.prove(pk, asg, r=3, s=4)
    assert not any(backend.resident(pk).values())
    backend.unload_key(pk)
    assert backend.prove(pk, asg, r=3, s=4) == streamed
    assert all(backend.resident(pk).values())
    assert verify_proof(pk.vk, streamed, asg.public_inputs())


@pytest.mark.parametrize("failing_group", ["g2", "g1"])
def test_a_failing_msm_beside_the_other_fails_only_its_proof(backend, bits_params, monkeypatch,
                                                             failing_group: str) -> None:
    """With all bases resident B's G2 MSM runs on its own stream and thread beside the G1 MSMs: a
    failure on either side fails that proof (after both sides stopped) and the next proof is whole."""
    pk = bits_params.pk
    backend.load_key(pk)
    assert all(backend.resident(pk).values())
    asg = _assignment(bits_params.circuit_id, 24)
    want = backend.prove(pk, asg, r=5, s=6)
    from cuzk.backends.cuda import phase

    real = phase.msm
    l_bases = backend.keys.loaded[pk].bases["l"]

    def failing(gpu, group, bases, *args, **kwargs):
        # G1: the L MSM, the first one that runs beside the G2 MSM
        if group == failing_group and (group == "g2" or bases is l_bases):
            raise RuntimeError(f"injected {group} failure")
        return real(gpu, group, bases, *args, **kwargs)

    monkeypatch.setattr(phase, "msm", failing)
    with pytest.raises(RuntimeError, match=f"injected {failing_group} failure"):
        backend.prove(pk, asg, r=5, s=6)
    monkeypatch.undo()
    assert backend.prove(pk, asg, r=5, s=6) == want


def test_bases_made_on_the_device_are_adopted(backend, bits_params) -> None:
    """load_key(device_bases=...) uses the given device arrays (the benchmarks' tiled keys) as they are."""
    pk = bits_params.pk
    backend.unload_key(pk)
    dev = {name: backend.msm.upload_bases(group, getattr(pk, name).raw)
           for name, group in (("h", "g1"), ("l", "g1"), ("a", "g1"), ("b_g1", "g1"), ("b_g2", "g2"))}
    with pytest.raises(ValueError, match="device bases for h must have shape"):
        backend.load_key(pk, device_bases={"h": dev["b_g2"]})
    with pytest.raises(ValueError, match="unknown query names in device_bases: z"):
        backend.load_key(pk, device_bases={"z": dev["h"]})
    asg = _assignment(bits_params.circuit_id, 24)
    want = CpuBackend().prove(pk, asg, r=5, s=6)
    backend.load_key(pk, device_bases={"h": dev["h"][::-1].copy()})  # the given array is the one used
    assert backend.prove(pk, asg, r=5, s=6) != want
    backend.unload_key(pk)
    backend.load_key(pk, device_bases={"h": dev["h"], "b_g2": dev["b_g2"]})
    assert all(backend.resident(pk).values())
    proof = backend.prove(pk, asg, r=5, s=6)
    assert proof == want
    assert verify_proof(pk.vk, proof, asg.public_inputs())
    backend.unload_key(pk)


def test_wrong_assignment_fails_with_the_cpu_provers_messages(backend, bits_params, mimc_params) -> None:
    """The device-side selection keeps select_query_scalars' checks (and messages)."""
    from dataclasses import replace

    from cuzk.groth16.prover import KeyMismatchError, select_query_scalars

    pk = bits_params.pk
    asg = _assignment(bits_params.circuit_id, 25)
    cases = [_assignment(mimc_params.circuit_id, 25),  # another circuit: input count
             replace(asg, b_aux_density=~asg.b_aux_density)]  # B density does not match the key
    for bad in cases:
        with pytest.raises(KeyMismatchError) as cpu_err:
            select_query_scalars(pk, bad)
        with pytest.raises(KeyMismatchError) as gpu_err:
            backend.prove(pk, bad)
        assert str(gpu_err.value) == str(cpu_err.value)
    with pytest.raises(KeyMismatchError, match="A aux density has shape"):
        backend.prove(pk, replace(asg, a_aux_density=asg.a_aux_density[:-1]))


def test_concurrent_proofs_stage_beside_each_others_device_work(backend, bits_params, mimc_params) -> None:
    """Proofs on several threads at once (the engine's prover workers): each equals the proof made
    alone with the same r, s; each staged its inputs before taking the device; the memory counts
    the backend keeps for that return to zero."""
    import threading

    work = [(p.pk, _assignment(p.circuit_id, seed)) for p, seed in
            ((bits_params, 31), (mimc_params, 32), (bits_params, 33), (mimc_params, 34))]
    alone = [backend.prove(pk, asg, r=5, s=7) for pk, asg in work]
    proofs: list[object] = [None] * len(work)
    timings: list[dict[str, float]] = [{} for _ in work]
    errors: list[BaseException] = []

    def run(k: int) -> None:
        try:
            proofs[k] = backend.prove(*work[k], r=5, s=7, timings=timings[k])
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(k,)) for k in range(len(work))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors
    assert proofs == alone
    for t in timings:
        assert t["stage_ahead"] > 0 and t["lock_wait"] >= 0 and t["device_begin"] > 0
    assert backend.admission.ahead_bytes == 0 and backend.admission.running_reserve == 0


def _critical_queues(backend, critical_work, seen: dict) -> None:
    """Start a CRITICAL proof of `critical_work` on a thread of its own (its proof, timings and end in
    `seen`) and wait until it queues for the device."""
    import threading

    from cuzk.backends.device_lock import priority_scope

    def critical() -> None:
        timings: dict[str, float] = {}
        with priority_scope(4):
            seen["proof"] = backend.prove(*critical_work, r=3, s=4, timings=timings)
        seen["done"], seen["timings"] = time.monotonic(), timings

    seen["thread"] = threading.Thread(target=critical)
    seen["thread"].start()
    deadline = time.monotonic() + 60
    while backend.admission.lock.waiting(4) == 0:
        assert time.monotonic() < deadline, "the CRITICAL proof never queued for the device"
        time.sleep(0.001)


def _lets_the_critical_through(backend, normal, alone, seen: dict, before: int) -> tuple[dict[str, float], float]:
    """Prove `normal` while the CRITICAL proof that `seen` follows goes through mid-phase: both proofs
    are the ones made alone (`alone`), one preemption more than `before`, the time lent recorded, and
    the memory counts back to zero. Returns the NORMAL proof's timings and when it returned."""
    timings: dict[str, float] = {}
    proof = backend.prove(*normal, r=5, s=7, timings=timings)
    normal_done = time.monotonic()
    seen["thread"].join(60)
    assert (proof, seen["proof"]) == alone
    assert backend.preemptions == before + 1 and timings["yielded"] > 0
    admission = backend.admission
    assert (admission.suspended, admission.running_reserve, admission.ahead_bytes) == (0, 0, 0)
    assert admission.waiting_need == {} and backend.current_job is None
    return timings, normal_done


def _critical_arrives_after_h(backend, monkeypatch, critical_work, streaming: bool = False):
    """Make a CRITICAL proof of `critical_work` start and queue for the device while the first proof
    to finish its H step still holds it (in a streaming plan's phase when `streaming`); returns what
    that proof's thread records."""
    from cuzk.backends.cuda import phase
    from cuzk.backends.cuda import streaming as streaming_phase

    module = streaming_phase if streaming else phase
    real, seen = module.h_step, {}

    def h_step_then_critical(*args, **kwargs):
        out = real(*args, **kwargs)
        if "thread" not in seen:
            _critical_queues(backend, critical_work, seen)
        return out

    monkeypatch.setattr(module, "h_step", h_step_then_critical)
    return seen


@contextlib.contextmanager
def _normal_and_critical(backend, bits_params, mimc_params, seed: int, streaming: bool = False):
    """A NORMAL proof's work (bits, `seed`) and a CRITICAL one's (mimc, `seed` + 1) with the proofs each
    makes alone; with `streaming`, the NORMAL key loaded by `_streaming_everything_resident` until the
    block ends."""
    normal = (bits_params.pk, _assignment(bits_params.circuit_id, seed))
    critical = (mimc_params.pk, _assignment(mimc_params.circuit_id, seed + 1))
    alone = backend.prove(*normal, r=5, s=7), backend.prove(*critical, r=3, s=4)
    if not streaming:
        yield normal, critical, alone
        return
    _streaming_everything_resident(backend, normal[0])
    try:
        yield normal, critical, alone
    finally:
        backend.unload_key(normal[0])


@pytest.mark.parametrize("streaming", [False, True])
def test_a_critical_proof_goes_between_the_steps_of_a_device_phase(backend, bits_params, mimc_params, monkeypatch,
                                                                  streaming: bool) -> None:
    """A CRITICAL proof that queues while a NORMAL one is in its device phase takes the device at the
    next step (after H), before the NORMAL one ends, in a resident plan and in a streaming one; both
    proofs are the proofs made alone; the time lent is recorded and left out of the NORMAL proof's
    device time, and the backend's memory counts come back to zero."""
    with _normal_and_critical(backend, bits_params, mimc_params, 41, streaming) as (normal, critical, alone):
        if streaming:
            assert backend.prove(*normal, r=5, s=7) == alone[0]
        before = backend.preemptions
        seen = _critical_arrives_after_h(backend, monkeypatch, critical, streaming=streaming)
        timings, normal_done = _lets_the_critical_through(backend, normal, alone, seen, before)
        assert seen["done"] < normal_done and seen["timings"]["device_begin"] > timings["device_begin"]
        assert timings["yielded"] + timings["device"] <= normal_done - timings["device_begin"]


@pytest.mark.parametrize("streaming", [False, True])
def test_no_preemption_without_memory_for_both(backend, bits_params, mimc_params, monkeypatch, streaming: bool) -> None:
    """With no room beside the proof on the device, the CRITICAL one waits for its phase's end, in a
    resident plan and in a streaming one."""
    with _normal_and_critical(backend, bits_params, mimc_params, 43, streaming) as (normal, critical, alone):
        before, refused = backend.preemptions, backend.preemptions_refused
        seen = _critical_arrives_after_h(backend, monkeypatch, critical, streaming=streaming)
        monkeypatch.setattr(backend.plan, "available", lambda: 0)
        timings: dict[str, float] = {}
        proof = backend.prove(*normal, r=5, s=7, timings=timings)
        seen["thread"].join(60)
        assert (proof, seen["proof"]) == alone
        assert backend.preemptions == before and backend.preemptions_refused > refused and "yielded" not in timings
        assert seen["timings"]["device_begin"] > timings["device_begin"] + timings["device"]
        admission = backend.admission
        assert (admission.suspended, admission.running_reserve, admission.waiting_need) == (0, 0, {})


def test_after_h_a_critical_proof_needs_room_only_beside_the_rest_of_the_phase(backend, bits_params, mimc_params,
                                                                             monkeypatch) -> None:
    """A CRITICAL proof that queues during the H MSM is let in after it when the memory holds its
    reserve beside what the NORMAL proof's phase still needs then: its reserve less a, b, c, which H
    freed. (Charged the whole reserve again, as before, it was refused on a card with one reserve to
    spare beside the key.)"""

    from cuzk.backends.cuda import phase

    # MiMC's a, b, c (3 x 32 bytes a row) outweigh its witness, as PoRep's do (else the old rule would
    # have let it in too, and the test would show nothing).
    normal = (mimc_params.pk, _assignment(mimc_params.circuit_id, 45))
    critical = (bits_params.pk, _assignment(bits_params.circuit_id, 46))
    alone = backend.prove(*normal, r=5, s=7), backend.prove(*critical, r=3, s=4)
    abc = 3 * 32 * normal[0].domain_size
    # Free memory for exactly the CRITICAL proof's need and the NORMAL one's reserve less a, b, c.
    rest = backend.key_plan(normal[0]).reserve - abc

    def room() -> int:
        return sum(backend.admission.waiting_need.values()) + rest
    before, seen, real_msm = backend.preemptions, {}, phase.msm

    def msm_then_critical(gpu, group, bases, scalars, split=None, use_split=True):
        if not use_split and "thread" not in seen:  # the H MSM: the CRITICAL proof queues meanwhile
            monkeypatch.setattr(backend.plan, "available", room)
            _critical_queues(backend, critical, seen)
        return real_msm(gpu, group, bases, scalars, split, use_split)

    monkeypatch.setattr(phase, "msm", msm_then_critical)
    _lets_the_critical_through(backend, normal, alone, seen, before)


def _streaming_everything_resident(backend, pk) -> None:
    """Load `pk` as an 80 GB card loads PoRep-32GiB: a streaming plan (MSMs in batches, the witness
    after H, one MSM at a time) that keeps every vector resident, its reserve counted from its phases."""
    from cuzk.backends.cuda.plan import QUERIES, DevicePlan, KeyShape

    backend.unload_key(pk)
    plan = DevicePlan(budget=1 << 40, mode="streaming", resident=tuple(name for name, _ in QUERIES), reserve=0)
    backend.load_key(pk, plan=plan.streaming_with(KeyShape.of(pk), 1 << 9, 1 << 30))
    assert backend.key_plan(pk).mode == "streaming" and all(backend.resident(pk).values())


def test_after_the_h_msm_of_a_streaming_phase_a_critical_proof_goes_through(backend, bits_params, mimc_params,
                                                                           monkeypatch) -> None:
    """A CRITICAL proof that queues during a streaming phase's H MSM is let in after it (the second
    point), and the proofs are those made alone."""

    from cuzk.backends.cuda import streaming

    real, seen = streaming.msm_batches, {}
    with _normal_and_critical(backend, bits_params, mimc_params, 50, streaming=True) as (normal, critical, alone):
        def h_msm_then_critical(gpu, name, *args, **kwargs):
            if name == "h" and "thread" not in seen:
                _critical_queues(backend, critical, seen)
            return real(gpu, name, *args, **kwargs)

        before = backend.preemptions
        monkeypatch.setattr(streaming, "msm_batches", h_msm_then_critical)
        _lets_the_critical_through(backend, normal, alone, seen, before)


def test_staging_falls_back_to_the_device_lock_when_memory_goes(backend, bits_params, monkeypatch) -> None:
    """Out of memory while staging ahead (another proof took it): staged again with the device held."""
    from cuzk.backends.cuda import runtime
    cupy = runtime.get_cupy()

    pk = bits_params.pk
    asg = _assignment(bits_params.circuit_id, 35)
    expected = backend.prove(pk, asg, r=8, s=9)
    from cuzk.backends.cuda.lanes import Lane

    real, calls = Lane.stage, []

    def first_call_out_of_memory(*args, **kwargs):
        calls.append(1)
        if len(calls) == 1:
            raise cupy.cuda.memory.OutOfMemoryError(1 << 40, 1 << 40)
        return real(*args, **kwargs)

    monkeypatch.setattr(Lane, "stage", first_call_out_of_memory)
    timings: dict[str, float] = {}
    assert backend.prove(pk, asg, r=8, s=9, timings=timings) == expected
    assert len(calls) == 2 and timings["stage_ahead"] == 0
    assert backend.admission.ahead_bytes == 0


def test_deferred_sha256_witness_is_completed_on_the_device(backend) -> None:
    """A witness whose SHA-256 aux rows were left unwritten (`deferred`) is completed at staging on
    the device: the proof equals the CPU's from the complete witness (same r, s) and verifies."""
    import numpy as np
    from deferred_circuit import HashesCircuit

    from cuzk.field.limbs import limbs_to_ints
    from cuzk.groth16.setup import ToxicWaste, generate_insecure_parameters
    from cuzk.groth16.synthesis import compile_circuit
    from cuzk.witness_gen.deferred import DeferredWitness

    blank = HashesCircuit(2, None)
    pk = generate_insecure_parameters(blank, waste=ToxicWaste.random(random.Random(6)))
    compiled = compile_circuit(blank, "hashes-2")
    for seed in (1, 2):
        circuit = HashesCircuit.random(2, seed)
        inputs, full = circuit.witness_arrays()
        deferred = DeferredWitness()
        _, partial = circuit.witness_arrays(out=np.full_like(full, 0xDEAD), deferred=deferred)
        proof = backend.prove_compiled(pk, compiled, inputs, partial, r=5, s=6, deferred=deferred)
        assert proof == CpuBackend().prove_compiled(pk, compiled, inputs, full, r=5, s=6)
        assert verify_proof(pk.vk, proof, limbs_to_ints(inputs)[1:])


def test_prepare_kernels_loads_every_unit_a_proof_may_reach(backend) -> None:
    from cuzk.backends.cuda import module

    loaded = backend.prepare_kernels()
    assert set(loaded) == {"synthesis", "witness", "poseidon"} and all(s >= 0 for s in loaded.values())
    assert all((backend.device_id, unit) in module._MODULES for unit in ("curve", *loaded))
    paths = backend.poseidon_paths
    backend.prepare_kernels()
    assert backend.poseidon_paths is paths  # loaded once
