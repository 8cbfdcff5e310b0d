"""Synthesis processes and the shared-memory hand-off: arrays arrive intact, segments are cleaned up,
a crashed worker is reported to its caller and replaced."""

from __future__ import annotations

import random
from multiprocessing import shared_memory

import numpy as np
import pytest

from cuzk.circuits.registry import lookup
from cuzk.engine.procs import WorkerCrashedError, WorkerProcess
from cuzk.engine.synthesis import export_assignment, synthesis_worker_main
from cuzk.groth16.assignment import Assignment
from cuzk.groth16.synthesis import synthesize_for_proving
from cuzk.providers import build_providers
from cuzk.providers.debug import DebugCircuitRecipe

FIELDS = ("a", "b", "c", "inputs", "aux", "a_aux_density", "b_input_density", "b_aux_density")


def local_assignment(circuit_id: str, seed: int) -> Assignment:
    return Assignment.from_proving_assignment(synthesize_for_proving(lookup(circuit_id).example(random.Random(seed))))


def segment_exists(name: str) -> bool:
    try:
        shm = shared_memory.SharedMemory(name=name)
    except FileNotFoundError:
        return False
    shm.close()
    return True


def test_round_trip_in_process() -> None:
    asg = local_assignment("bits-1", 3)
    shared = export_assignment(asg)
    try:
        assert shared.num_constraints == asg.num_constraints and shared.size >= 3 * asg.a.nbytes
        with shared.attach() as attached:
            for name in FIELDS:
                view = getattr(attached.assignment, name)
                assert np.array_equal(view, getattr(asg, name)) and not view.flags.writeable
    finally:
        shared.unlink()
    assert not segment_exists(shared.shm_name)
    shared.unlink()  # twice is harmless


@pytest.fixture(scope="module")
def worker() -> WorkerProcess:
    # with a daemon's warm-up calls (test circuits' mimc-3 on both paths, the Filecoin witness generators)
    warm_up = build_providers("/nonexistent", test_circuits=False).warm_up_calls()
    proc = WorkerProcess("test-synth", synthesis_worker_main, (1, 0, warm_up))
    proc.start()
    proc.wait_ready()
    yield proc
    proc.stop()


def test_a_worker_process_synthesizes_into_shared_memory(worker: WorkerProcess) -> None:
    kind, shared, start, end = worker.request(("synth", DebugCircuitRecipe("mimc-4", 11)))
    assert kind == "ok" and end >= start
    try:
        with shared.attach() as attached:
            expected = local_assignment("mimc-4", 11)
            for name in FIELDS:
                assert np.array_equal(getattr(attached.assignment, name), getattr(expected, name))
    finally:
        shared.unlink()
    assert worker.request(("call", "cuzk.providers.debug:debug_circuit_shape", ("mimc-4",)))[1].num_constraints == 16


def test_failures_come_back_as_messages(worker: WorkerProcess) -> None:
    kind, message, trace = worker.request(("synth", DebugCircuitRecipe("mimc-3", 1, "error", 0, "p0")))
    assert kind == "error" and "injected synthesis failure (p0)" in message and "Traceback" in trace
    assert worker.request(("call", "nomodule:nothing", ()))[0] == "error"
    assert worker.request(("bogus",))[0] == "error"


def test_a_crash_is_reported_and_the_worker_replaced(worker: WorkerProcess) -> None:
    pid = worker.pid
    with pytest.raises(WorkerCrashedError, match=r"exited with code 70"):
        worker.request(("synth", DebugCircuitRecipe("mimc-3", 1, "crash", 0, "p0")))
    worker.restart("test")
    assert worker.pid != pid and worker.restarts == 1
    kind, shared, _, _ = worker.request(("synth", DebugCircuitRecipe("mimc-3", 2)))
    assert kind == "ok"
    shared.unlink()
