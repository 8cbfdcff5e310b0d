"""`prove_compiled(..., deferred=...)` on the CPU backend: a witness whose SHA-256 aux were left
unwritten gives the very proof of the complete witness (same r, s), which verifies; the caller's aux
is not modified. The circuit (`deferred_circuit.HashesCircuit`) is checked against WitnessCS first."""

from __future__ import annotations

import random

import numpy as np
import pytest
from deferred_circuit import HashesCircuit

from cuzk.backends import CpuBackend
from cuzk.errors import SynthesisError
from cuzk.field.limbs import ints_to_limbs, limbs_to_ints
from cuzk.groth16.setup import ToxicWaste, generate_insecure_parameters
from cuzk.groth16.synthesis import compile_circuit, defers_witness, generated_witness, synthesize_witness
from cuzk.groth16.verifier import verify_proof
from cuzk.witness_gen.deferred import DeferredWitness


@pytest.fixture(scope="module")
def hashes() -> tuple:
    blank = HashesCircuit(1, None)
    pk = generate_insecure_parameters(blank, waste=ToxicWaste.random(random.Random(5)))
    return pk, compile_circuit(blank, "hashes-1")


def test_the_test_circuits_generator_equals_witness_cs() -> None:
    circuit = HashesCircuit.random(2, seed=1)
    reference = synthesize_witness(circuit)
    inputs, aux = circuit.witness_arrays()
    assert np.array_equal(inputs, ints_to_limbs(reference.input_assignment))
    assert np.array_equal(aux, ints_to_limbs(reference.aux_assignment))


def test_deferred_witness_proves_the_same(hashes: tuple) -> None:
    pk, compiled = hashes
    circuit = HashesCircuit.random(1, seed=2)
    assert defers_witness(circuit)
    inputs, full = circuit.witness_arrays()
    deferred = DeferredWitness()
    generated = generated_witness(circuit, np.full_like(full, 0xDEAD), deferred)
    assert generated is not None
    _, partial = generated
    kept = partial.copy()
    backend = CpuBackend()
    timings: dict[str, float] = {}
    proof = backend.prove_compiled(pk, compiled, inputs, partial, r=3, s=4, timings=timings, deferred=deferred)
    assert timings["witness"] >= 0
    assert np.array_equal(partial, kept)  # completed on a copy
    assert proof == backend.prove_compiled(pk, compiled, inputs, full, r=3, s=4)
    assert verify_proof(pk.vk, proof, limbs_to_ints(inputs)[1:])
    # Without the record, the unwritten rows are refused by the row check rather than proven.
    with pytest.raises(SynthesisError, match="constraints are not satisfied"):
        backend.prove_compiled(pk, compiled, inputs, partial)


def test_a_generator_that_cannot_defer_is_refused() -> None:
    from cuzk.circuits.examples import BitsCircuit

    with pytest.raises(ValueError, match="cannot leave part of its aux"):
        generated_witness(type("WithGenerator", (BitsCircuit,), {"witness_arrays": lambda self, **kw: None})
                          .random(1), None, DeferredWitness())
