"""Memory reserved per partition on the compiled path: the constraint-system estimate while the budget
can hold it (so an unusable compiled file can still fall back), the compiled path's own needs when it
cannot (a PoRep-32GiB partition: 215 GB on the constraint system, ~23 GB compiled on a GPU), with the
partitions then pinned to the compiled path."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from cuzk.circuits.filecoin.shapes import KNOWN_SHAPES
from cuzk.engine.compiled_recipe import CompiledRecipe
from cuzk.engine.compiled_store import CompiledStore
from cuzk.engine.engine import Engine
from cuzk.engine.memory import PartitionEstimate
from cuzk.engine.providers import JobPlan, PartitionPlan
from cuzk.errors import SynthesisError
from cuzk.filecoin.sizes import CircuitKind, parameter_file_name, sector_params
from cuzk.providers.filecoin.provider import WinningPostProvider
from cuzk.providers.filecoin.recipe import FilecoinPartitionRecipe

GB = 10**9


def test_porep_32g_compiled_estimates() -> None:
    shape = KNOWN_SHAPES["porep-32g"]
    cs = PartitionEstimate.from_shape(shape)
    gpu = PartitionEstimate.compiled(shape, products_on_prover=True, device_prover=True)
    cpu = PartitionEstimate.compiled(shape, products_on_prover=False, device_prover=False)
    assert 214 * GB < cs.total < 216 * GB
    assert (round(gpu.synthesis / GB, 1), round(gpu.shared / GB, 1), round(gpu.proving / GB, 1)) == (15.6, 4.2, 3.2)
    # PoRep's batched generator (39 B per variable measured) instead of WitnessCS's Python ints.
    batched = PartitionEstimate.compiled(shape, products_on_prover=True, device_prover=True, batched_witness=True)
    assert (round(batched.synthesis / GB, 1), batched.shared, batched.proving) == (8.3, gpu.shared, gpu.proving)
    # On the host: a, b, c in shared memory (16.9 GB) and the CPU prover's working set over the domain.
    assert cpu.shared == PartitionEstimate.from_shape(shape).shared
    assert gpu.total < cpu.total < cs.total


def _engine(usable: int, kind: str, products: str) -> SimpleNamespace:
    return SimpleNamespace(budget=SimpleNamespace(usable=usable), sparse_products=products,
                           device_specs=[SimpleNamespace(kind=kind)])


def _plan(compiled: bool, circuit: object = None) -> JobPlan:
    recipe: object = FilecoinPartitionRecipe("porep-32g", 0, circuit, (), "p0")
    if compiled:
        recipe = CompiledRecipe(recipe, "porep-32g", "p0", "/x.cuzk-r1cs")
    return JobPlan("porep-32g", [PartitionPlan(0, recipe, [])])


@pytest.mark.parametrize("compiled", [True, False])
def test_the_constraint_system_estimate_while_it_fits(compiled: bool) -> None:
    plan = _plan(compiled)
    recipe = plan.partitions[0].recipe
    got = Engine._partition_estimate(_engine(10**15, "cuda", "prover"), plan, KNOWN_SHAPES["porep-32g"])
    assert got == PartitionEstimate.from_shape(KNOWN_SHAPES["porep-32g"])
    assert plan.partitions[0].recipe is recipe  # a compiled recipe may still fall back


def test_the_compiled_estimate_when_the_constraint_system_cannot_fit() -> None:
    shape = KNOWN_SHAPES["porep-32g"]
    plan = _plan(True)
    got = Engine._partition_estimate(_engine(120 * GB, "cuda", "prover"), plan, shape)
    assert got == PartitionEstimate.compiled(shape, products_on_prover=True, device_prover=True)
    assert not plan.partitions[0].recipe.fallback
    # ... or cannot fit beside the job's own key (the room the engine gives once the key is hot).
    plan = _plan(True)
    got = Engine._partition_estimate(_engine(10**15, "cuda", "prover"), plan, shape, room=120 * GB)
    assert got == PartitionEstimate.compiled(shape, products_on_prover=True, device_prover=True)
    assert not plan.partitions[0].recipe.fallback
    plan = _plan(True)
    got = Engine._partition_estimate(_engine(120 * GB, "cpu", "synthesis"), plan, shape)
    assert got == PartitionEstimate.compiled(shape, products_on_prover=False, device_prover=False)
    # A circuit with a batched witness generator (PoRep's) reserves for it.
    plan = _plan(True, SimpleNamespace(witness_arrays=lambda: None))
    got = Engine._partition_estimate(_engine(120 * GB, "cuda", "prover"), plan, shape)
    assert got == PartitionEstimate.compiled(shape, products_on_prover=True, device_prover=True, batched_witness=True)
    # Without a compiled circuit there is nothing smaller to reserve: the job fails on the budget later.
    plan = _plan(False)
    assert Engine._partition_estimate(_engine(120 * GB, "cuda", "prover"), plan, shape).total > 120 * GB


def test_a_recipe_pinned_to_the_compiled_path_fails_instead_of_falling_back(tmp_path: Path) -> None:
    from providers.filecoin.test_compiled_recipe import plan_recipe

    size = sector_params("2KiB")
    (tmp_path / parameter_file_name(CircuitKind.WINNING, size)).touch()
    path = CompiledStore(tmp_path / "compiled").build("winning-2k")
    recipe = plan_recipe(WinningPostProvider(tmp_path)).compiled_only()
    assert recipe.compiled_path == str(path) and not recipe.fallback
    path.write_bytes(path.read_bytes()[:1000])  # truncated: refused at load
    with pytest.raises(SynthesisError, match="reserved for the compiled path"):
        recipe.assignment()


def test_a_deferred_witness_completed_on_the_host_reserves_its_aux_copy(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where a device's plan computes the products on the host, a partition whose witness is left
    to the device is completed there on a copy of its aux: its proving part holds that copy."""
    import cuzk.groth16.synthesis as synthesis

    monkeypatch.setattr(synthesis, "defers_witness", lambda circuit: True)
    shape = KNOWN_SHAPES["wpost-32g"]

    def estimate(on_host: bool, device_witness: bool) -> PartitionEstimate:
        recipe = CompiledRecipe(FilecoinPartitionRecipe("wpost-32g", 0, SimpleNamespace(witness_arrays=lambda: None),
                                                        (), "p0"), "wpost-32g", "p0", "/x.cuzk-r1cs", "prover",
                                device_witness=device_witness)
        plan = JobPlan("wpost-32g", [PartitionPlan(0, recipe, [])])
        engine = _engine(120 * GB, "cuda", "prover")
        engine.executor = SimpleNamespace(products_on_host=lambda cid: on_host and cid == "wpost-32g")
        return Engine._partition_estimate(engine, plan, shape)

    plain = PartitionEstimate.compiled(shape, products_on_prover=True, device_prover=True, batched_witness=True)
    assert estimate(on_host=False, device_witness=True) == plain  # the GPU writes it into its own vector
    assert estimate(on_host=True, device_witness=False) == plain  # nothing deferred, nothing copied
    copied = estimate(on_host=True, device_witness=True)
    assert copied.proving == plain.proving + 32 * shape.num_aux and copied.synthesis == plain.synthesis
