"""`ProverBackend.prove_compiled` on the CPU backend: a compiled circuit and its witness give the proof
that `prove` gives on `Assignment.from_compiled` (the CUDA backend's override: tests/gpu/test_cuda_spmv.py)."""

from __future__ import annotations

import random

import pytest

from cuzk.backends.cpu import CpuBackend
from cuzk.circuits.registry import lookup
from cuzk.errors import SynthesisError
from cuzk.field.constants import R_MODULUS
from cuzk.field.limbs import ints_to_limbs
from cuzk.groth16.assignment import Assignment
from cuzk.groth16.synthesis import compile_circuit, synthesize_witness
from cuzk.groth16.verifier import verify_proof


def test_prove_compiled_is_prove_of_the_compiled_assignment(bits_params) -> None:
    spec = lookup(bits_params.circuit_id)
    compiled = compile_circuit(spec.blank(), bits_params.circuit_id)
    witness = synthesize_witness(spec.example(random.Random(41)))
    inputs, aux = ints_to_limbs(witness.input_assignment), ints_to_limbs(witness.aux_assignment)
    backend = CpuBackend()
    timings: dict[str, float] = {}
    proof = backend.prove_compiled(bits_params.pk, compiled, inputs, aux, r=7, s=8, timings=timings)
    asg = Assignment.from_compiled(compiled, (inputs, aux))
    assert proof == backend.prove(bits_params.pk, asg, r=7, s=8)
    assert verify_proof(bits_params.pk.vk, proof, asg.public_inputs())
    assert timings["spmv"] >= 0 and "msm_h" in timings

    bad = aux.copy()
    bad[0] = ints_to_limbs([(int.from_bytes(aux[0].tobytes(), "little") + 1) % R_MODULUS])[0]
    with pytest.raises(SynthesisError, match="constraints are not satisfied"):
        backend.prove_compiled(bits_params.pk, compiled, inputs, bad)
