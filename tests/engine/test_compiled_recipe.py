"""The compiled-circuit path is the engine's: a provider that says its circuits may be compiled gets,
for recipes with no compiled-circuit code of their own (here the test circuits' `DebugCircuitRecipe`
on mimc-5, no Filecoin circuit), the ready compiled file, the fallback to the constraint system, the
compiled-only rule and the witness hand-off for products on the prover."""

from __future__ import annotations

import logging
import pickle
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from cuzk.engine.compiled_recipe import CompiledRecipe, use_compiled
from cuzk.engine.compiled_store import CompiledStore
from cuzk.engine.jobs import Priority, ProofKind
from cuzk.engine.providers import JobPlan
from cuzk.engine.synthesis import CompiledWitness, synthesize_shared
from cuzk.errors import SynthesisError
from cuzk.groth16.assignment import Assignment
from cuzk.providers.debug import DebugCircuitProvider, DebugCircuitRecipe
from cuzk.providers.fields import submit_request
from cuzk.r1cs.compiled_file import load_compiled

FIELDS = ("a", "b", "c", "inputs", "aux", "a_aux_density", "b_input_density", "b_aux_density")


class CompiledDebugProvider(DebugCircuitProvider):
    """The test circuits, opted in to compiled circuits: the only line it adds."""

    compiled_circuits = True


def _plan(provider: DebugCircuitProvider, store: CompiledStore, *, priority: Priority = Priority.NORMAL,
          **settings: Any) -> tuple[JobPlan, bool]:
    request = submit_request("job-7", ProofKind.TEST, priority, vanilla_proof=b'{"test_circuit": "mimc-5", '
                             b'"partitions": 2, "seed": 3}')
    plan = provider.plan(request)
    used = use_compiled(plan, provider, store, request, **settings)
    # As a synthesis process receives them.
    plan.partitions = [replace(p, recipe=pickle.loads(pickle.dumps(p.recipe))) for p in plan.partitions]
    return plan, used


def _identical(ref: Any, got: Any) -> None:
    for name in FIELDS:
        x, y = getattr(ref, name), getattr(got, name)
        assert x.dtype == y.dtype and x.shape == y.shape and np.array_equal(x, y), name


def test_a_provider_that_opts_in_gets_the_ready_compiled_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = CompiledStore(tmp_path / "compiled")
    plain, used = _plan(CompiledDebugProvider(tmp_path), store)
    assert not used and all(isinstance(p.recipe, DebugCircuitRecipe) for p in plain.partitions)  # nothing ready
    path = store.build("mimc-5")
    plan, used = _plan(CompiledDebugProvider(tmp_path), store)
    assert used
    recipes = [p.recipe for p in plan.partitions]
    assert all(isinstance(r, CompiledRecipe) and r.compiled_path == str(path) and r.fallback for r in recipes)
    assert [r.label for r in recipes] == ["job-7 partition 0", "job-7 partition 1"]
    assert recipes[1].recipe == plain.partitions[1].recipe  # the provider's recipe, as it planned it
    refs = [p.recipe.assignment() for p in plain.partitions]

    def no_constraint_system(*args: object, **kwargs: object) -> None:
        raise AssertionError("the constraint-system path ran")

    monkeypatch.setattr("cuzk.groth16.synthesis.synthesize_for_proving", no_constraint_system)
    for ref, recipe in zip(refs, recipes, strict=True):
        _identical(ref, recipe.assignment())
    # A provider that does not opt in, or a store that is off, plans as before.
    assert not _plan(DebugCircuitProvider(tmp_path), store)[1]
    assert not _plan(CompiledDebugProvider(tmp_path), CompiledStore(tmp_path / "compiled", enabled=False))[1]


def test_the_fallback_and_the_compiled_only_rule(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    store = CompiledStore(tmp_path / "compiled")
    path = store.build("mimc-5")
    plain, _ = _plan(DebugCircuitProvider(tmp_path), store)
    plan, _ = _plan(CompiledDebugProvider(tmp_path), store)
    recipe = plan.partitions[0].recipe
    path.write_bytes(path.read_bytes()[:1000])  # truncated: refused at load
    with caplog.at_level(logging.WARNING):
        _identical(plain.partitions[0].recipe.assignment(), recipe.assignment())
    assert any("truncated" in r.getMessage() for r in caplog.records)
    pinned = recipe.compiled_only()
    assert not pinned.fallback and pinned.compiled_path == recipe.compiled_path
    with pytest.raises(SynthesisError, match="mimc-5 job-7 partition 0: the compiled circuit .* could not be used "
                                             r"\(see the log\) and this partition's memory was reserved for the "
                                             "compiled path"):
        pinned.assignment()


def test_a_failure_the_recipe_injects_still_happens_on_the_fallback(tmp_path: Path) -> None:
    """Falling back runs the provider's own recipe, as without the file (here its injected failure)."""
    store = CompiledStore(tmp_path / "compiled")
    store.build("mimc-5").write_bytes(b"not a compiled circuit")
    plan, used = _plan(CompiledDebugProvider(tmp_path), store)
    assert not used  # a file that is not ready (stale) is not planned with at all
    request = submit_request("job-8", ProofKind.TEST, Priority.NORMAL, vanilla_proof=b'{"test_circuit": "mimc-5", '
                             b'"fail_partition": 0}')
    store.build("mimc-5")
    plan = CompiledDebugProvider(tmp_path).plan(request)
    assert use_compiled(plan, CompiledDebugProvider(tmp_path), store, request)
    store.path("mimc-5").write_bytes(b"")  # unusable by the time the partition is synthesized
    with pytest.raises(SynthesisError, match="injected synthesis failure"):
        plan.partitions[0].recipe.assignment()


def test_products_on_the_prover_hand_over_the_witness_alone(tmp_path: Path) -> None:
    """With `sparse_products = "prover"` the synthesis process hands over inputs and aux with the
    compiled file's path (`synthesize_shared`, as a synthesis process runs it); the products computed
    from them are the constraint system's."""
    store = CompiledStore(tmp_path / "compiled")
    path = store.build("mimc-5")
    plain, _ = _plan(DebugCircuitProvider(tmp_path), store)
    plan, _ = _plan(CompiledDebugProvider(tmp_path), store, sparse_products="prover", device_witness=Priority.LOW)
    recipe = plan.partitions[0].recipe
    assert recipe.sparse_products == "prover" and recipe.device_witness and not recipe.defers_witness
    assert not recipe.batched_witness  # mimc has no batched generator: WitnessCS gives the witness
    ref = plain.partitions[0].recipe.assignment()
    shared, _, _ = synthesize_shared(recipe)
    try:
        assert shared.compiled_path == str(path) and {a.name for a in shared.arrays} == {"inputs", "aux"}
        with shared.attach() as att:
            got = att.assignment
            assert isinstance(got, CompiledWitness) and got.deferred is None
            _identical(ref, Assignment.from_compiled(load_compiled(path), (got.inputs, got.aux)))
            del got
    finally:
        shared.unlink()
