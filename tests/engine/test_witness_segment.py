"""PoRep's witness generated in place in shared memory (`WitnessSegment`): the synthesis process's
hand-off passes the segment on instead of copying 4.2 GB per 32GiB partition, the arrays are the
generator's, and a segment that is not handed over is removed. With `device_witness`, PoRep's and
PoSt's deferred gadgets travel with the segment."""

from __future__ import annotations

import dataclasses
import logging
from multiprocessing import shared_memory
from types import SimpleNamespace

import numpy as np
import pytest

from cuzk.circuits.filecoin.porep import PRODUCTION_CONFIGS, random_stacked_circuit
from cuzk.engine import compiled_store
from cuzk.engine.compiled_recipe import CompiledRecipe
from cuzk.engine.synthesis import CompiledWitness, WitnessSegment, export_assignment
from cuzk.errors import SynthesisError
from cuzk.field.limbs import limbs_to_ints
from cuzk.providers.filecoin.recipe import FilecoinPartitionRecipe
from cuzk.r1cs.compiled import check_witness_counts

NUM_CONSTRAINTS = 1234  #: the stand-in header's; nothing here evaluates the products


def _header(num_inputs: int, num_aux: int) -> SimpleNamespace:
    """A compiled file's header as `read_checked_header` gives it: counts and `check_witness`."""
    want = (num_inputs, num_aux, NUM_CONSTRAINTS)

    def check_witness(inputs: int, aux: int, constraints: int | None = None) -> None:
        check_witness_counts("porep-2k", want, (inputs, aux, NUM_CONSTRAINTS if constraints is None else constraints))

    return SimpleNamespace(num_constraints=NUM_CONSTRAINTS, check_witness=check_witness)


@pytest.fixture(scope="module")
def porep_2k() -> tuple[object, np.ndarray, np.ndarray]:
    circuit = random_stacked_circuit(PRODUCTION_CONFIGS[2 << 10], seed=3)
    inputs, aux = circuit.witness_arrays()
    return circuit, inputs, aux


def _recipe(circuit: object, inputs: np.ndarray, monkeypatch: pytest.MonkeyPatch, counts: tuple[int, int]
            ) -> CompiledRecipe:
    monkeypatch.setattr(compiled_store, "read_checked_header", lambda path, cid: _header(*counts))
    recipe = FilecoinPartitionRecipe("porep-2k", 0, circuit, tuple(limbs_to_ints(inputs)[1:]), "p0")
    return CompiledRecipe(recipe, "porep-2k", "p0", "/stand-in.cuzk-r1cs", sparse_products="prover", fallback=False)


def _exists(name: str) -> bool:
    try:
        shared_memory.SharedMemory(name=name).close()
    except FileNotFoundError:
        return False
    return True


def test_generated_in_place_and_handed_over_without_a_copy(porep_2k, monkeypatch: pytest.MonkeyPatch,
                                                           caplog: pytest.LogCaptureFixture) -> None:
    circuit, inputs, aux = porep_2k
    assert circuit.witness_shape() == (inputs.shape[0], aux.shape[0])
    recipe = _recipe(circuit, inputs, monkeypatch, circuit.witness_shape())
    made: list[WitnessSegment] = []

    def segment(num_inputs: int, num_aux: int) -> WitnessSegment:
        made.append(WitnessSegment(num_inputs, num_aux))
        return made[-1]

    witness = recipe.assignment_into(segment)
    assert isinstance(witness, CompiledWitness) and witness.segment is made[0] and len(made) == 1
    assert np.array_equal(witness.inputs, inputs) and np.array_equal(witness.aux, aux)
    name = made[0]._shm.name
    with caplog.at_level(logging.WARNING, logger="cuzk.engine.synthesis"):
        shared = export_assignment(witness)
    assert "still referenced" not in caplog.text  # no view of the segment outlived the generator
    try:
        assert shared.shm_name == name  # the same segment: nothing copied
        assert (shared.compiled_path, shared.num_constraints) == ("/stand-in.cuzk-r1cs", NUM_CONSTRAINTS)
        with shared.attach() as att:
            got = att.assignment
            assert isinstance(got, CompiledWitness)
            assert np.array_equal(got.inputs, inputs) and np.array_equal(got.aux, aux)
    finally:
        shared.unlink()
    assert not _exists(name)
    # Without a segment maker (outside a synthesis process) the same witness comes in arrays of its own.
    plain = recipe.assignment()
    assert plain.segment is None and np.array_equal(plain.aux, aux)


def test_a_failed_generation_removes_its_segment(porep_2k, monkeypatch: pytest.MonkeyPatch) -> None:
    circuit, inputs, _ = porep_2k
    blank = dataclasses.replace(circuit, comm_c=None)
    recipe = _recipe(blank, inputs, monkeypatch, circuit.witness_shape())
    made: list[WitnessSegment] = []
    with pytest.raises(SynthesisError, match="comm_c"):
        recipe.assignment_into(lambda i, a: made.append(WitnessSegment(i, a)) or made[-1])
    assert len(made) == 1 and not _exists(made[0]._shm.name)


def test_counts_that_differ_make_no_segment(porep_2k, monkeypatch: pytest.MonkeyPatch,
                                           caplog: pytest.LogCaptureFixture) -> None:
    circuit, inputs, aux = porep_2k
    recipe = _recipe(circuit, inputs, monkeypatch, (inputs.shape[0], aux.shape[0] + 1))
    made: list[WitnessSegment] = []
    with pytest.raises(SynthesisError, match="reserved for the compiled path"):
        recipe.assignment_into(lambda i, a: made.append(WitnessSegment(i, a)) or made[-1])
    assert made == [] and "aux variables" in caplog.text


@pytest.fixture(scope="module")
def wpost_2k() -> tuple[object, np.ndarray, np.ndarray]:
    from cuzk.circuits.filecoin.post import FallbackPoStConfig, random_post_circuit

    circuit = random_post_circuit(dataclasses.replace(FallbackPoStConfig.window(2 << 10), sector_count=3), 2)
    inputs, aux = circuit.witness_arrays()
    return circuit, inputs, aux


@pytest.mark.parametrize("which", ["porep_2k", "wpost_2k"])
def test_deferred_gadgets_travel_with_the_segment(which: str, request: pytest.FixtureRequest,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """`device_witness`: the generator leaves its SHA-256 gadgets' (PoRep) or openings' (PoSt) rows
    unwritten and records them; the record travels with the segment, and completing it (here on the
    host, as the CPU backend's `prove_compiled` does) gives the full witness."""
    circuit, inputs, aux = request.getfixturevalue(which)
    recipe = dataclasses.replace(_recipe(circuit, inputs, monkeypatch, circuit.witness_shape()), device_witness=True)
    witness = recipe.assignment_into(lambda i, a: WitnessSegment(i, a))
    assert witness.deferred is not None and witness.deferred.num_rows > 0.9 * aux.shape[0]
    shared = export_assignment(witness)
    try:
        assert shared.deferred is not None
        with shared.attach() as att:
            got = att.assignment
            assert isinstance(got, CompiledWitness) and got.deferred is not None
            assert np.array_equal(got.inputs, inputs)
            completed = np.array(got.aux)
            got.deferred.complete_on_host(completed)
            assert np.array_equal(completed, aux)
            del got
    finally:
        shared.unlink()
    # Outside a synthesis process (arrays of its own) the record comes along too.
    plain = recipe.assignment()
    assert plain.segment is None and plain.deferred is not None
    plain.deferred.complete_on_host(plain.aux)
    assert np.array_equal(plain.aux, aux)
    # Without device_witness nothing is deferred.
    assert _recipe(circuit, inputs, monkeypatch, circuit.witness_shape()).assignment().deferred is None


def test_device_witness_setting(caplog: pytest.LogCaptureFixture) -> None:
    """The setting resolves to the lowest priority whose witnesses the devices complete: every job's with
    "on", HIGH and CRITICAL ones' with "deadlines" (the default), none without GPU products."""
    from cuzk.config import ConfigError, config_from_dict
    from cuzk.engine.devices import DeviceSpec, device_witness_floor
    from cuzk.engine.jobs import Priority

    cuda, cpu = DeviceSpec(0, "cuda"), DeviceSpec(0, "cpu")
    assert device_witness_floor("on", "prover", [cuda, DeviceSpec(1, "cuda")]) is Priority.LOW
    assert device_witness_floor("deadlines", "prover", [cuda]) is Priority.HIGH
    assert device_witness_floor("off", "prover", [cuda]) is None
    assert not caplog.records
    with caplog.at_level(logging.WARNING, logger="cuzk.engine.devices"):
        assert device_witness_floor("on", "synthesis", [cuda]) is None  # a, b, c made before the device
        assert device_witness_floor("on", "prover", [cpu]) is None
        assert device_witness_floor("on", "prover", []) is None
        assert device_witness_floor("deadlines", "synthesis", [cpu]) is None  # the default: nothing to say
    assert len(caplog.records) == 3 and "devices: cpu:0" in caplog.records[1].getMessage()
    assert config_from_dict({}).synthesis.device_witness == "deadlines"
    assert config_from_dict({"synthesis": {"device_witness": "on"}}).synthesis.device_witness == "on"
    with pytest.raises(ConfigError, match="device_witness"):
        config_from_dict({"synthesis": {"device_witness": "auto"}})


def test_snapdeals_witness_is_generated_in_place_too(monkeypatch: pytest.MonkeyPatch) -> None:
    """SnapDeals states its counts up front as well (`witness_shape`), so its witness goes straight
    into the segment and the hand-off copies nothing."""
    from cuzk.circuits.filecoin.compound import sample_compound

    circuit = sample_compound("snap-2k", 1).partition_circuit(0)
    inputs, aux = circuit.witness_arrays()
    recipe = _recipe(circuit, inputs, monkeypatch, circuit.witness_shape())
    made: list[WitnessSegment] = []
    witness = recipe.assignment_into(lambda i, a: made.append(WitnessSegment(i, a)) or made[-1])
    assert witness.segment is made[0] and np.array_equal(witness.aux, aux)
    shared = export_assignment(witness)
    try:
        assert shared.shm_name == made[0]._shm.name
        with shared.attach() as att:
            assert np.array_equal(att.assignment.inputs, inputs) and np.array_equal(att.assignment.aux, aux)
    finally:
        shared.unlink()


def test_segments_left_by_a_dead_maker_are_removed_and_those_handed_over_kept() -> None:
    import os

    from cuzk.engine.synthesis import new_segment, unlink_orphans

    handed_over, orphan = new_segment(64), new_segment(64)
    try:
        for shm in (handed_over, orphan):  # cuzk_<daemon pid>_<maker pid>_<random>: here both are this process
            assert shm.name.startswith(f"cuzk_{os.getpid()}_{os.getpid()}_")
        assert unlink_orphans(os.getpid() + 1_000_000, set()) == []  # another maker's: none
        assert unlink_orphans(os.getpid(), {handed_over.name}) == [orphan.name]
        assert not os.path.exists(f"/dev/shm/{orphan.name}") and os.path.exists(f"/dev/shm/{handed_over.name}")
    finally:
        orphan.close()
        handed_over.close()
        handed_over.unlink()
