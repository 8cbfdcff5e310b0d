"""cuzk and snarkjs check each other: our proofs of circom circuits verify in snarkjs, and our own
bellperson-style proofs verify in snarkjs after export to its JSON."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
import snarkjs_tools

from cuzk.circuits.registry import lookup
from cuzk.cli.main import main
from cuzk.groth16.assignment import Assignment
from cuzk.groth16.formats import snarkjs_json
from cuzk.groth16.prover import prove
from cuzk.groth16.synthesis import synthesize_for_proving

pytestmark = pytest.mark.external


def cli(*args: object) -> int:
    return main([str(a) for a in args])


@pytest.fixture(scope="module", params=["multiplier", "square_chain"])
def circom_proof(request: pytest.FixtureRequest, circom_fixtures: dict, tmp_path_factory: pytest.TempPathFactory):
    paths = circom_fixtures[request.param]
    out = tmp_path_factory.mktemp(f"cuzk-{request.param}")
    proof, public = out / "proof.json", out / "public.json"
    assert cli("groth16", "prove", "--zkey", paths.zkey, "--wtns", paths.wtns, "--proof", proof,
               "--public", public) == 0
    return paths, proof, public


def test_snarkjs_accepts_our_proof_of_a_circom_circuit(circom_proof) -> None:
    paths, proof, public = circom_proof
    # The public signals are the ones snarkjs itself derives from the same witness.
    assert json.loads(public.read_text()) == json.loads(paths.public_json.read_text())
    assert snarkjs_tools.snarkjs_verify(paths.vk_json, public, proof)
    assert cli("groth16", "verify", paths.vk_json, public, proof) == 0


def test_we_accept_snarkjs_own_proof(circom_fixtures: dict) -> None:
    paths = circom_fixtures["square_chain"]
    assert cli("groth16", "verify", paths.vk_json, paths.public_json, paths.proof_json) == 0


def test_tampered_and_wrong_inputs_rejected_by_both(circom_proof, tmp_path: Path) -> None:
    paths, proof, public = circom_proof
    values = json.loads(public.read_text())
    values[-1] = str(int(values[-1]) + 1)
    wrong = tmp_path / "wrong_public.json"
    wrong.write_text(json.dumps(values))
    assert not snarkjs_tools.snarkjs_verify(paths.vk_json, wrong, proof)
    assert cli("groth16", "verify", paths.vk_json, wrong, proof) == 1
    # Swap A for a different valid point: a well-formed but false proof.
    doc = json.loads(proof.read_text())
    other = json.loads(paths.proof_json.read_text())  # snarkjs's own proof of the same statement
    doc["pi_a"] = other["pi_a"]
    forged = tmp_path / "forged.json"
    forged.write_text(json.dumps(doc))
    assert not snarkjs_tools.snarkjs_verify(paths.vk_json, public, forged)
    assert cli("groth16", "verify", paths.vk_json, public, forged) == 1


def test_snarkjs_accepts_our_bellperson_style_proof(mimc_params, tmp_path: Path) -> None:
    """Our native circuits, bellperson parameters and prover, checked by snarkjs via exported JSON."""
    if reason := snarkjs_tools.tools_missing_reason():  # as circom_fixtures does for the tests above
        pytest.skip(reason)
    circuit = lookup(mimc_params.circuit_id).example(random.Random(31))
    asg = Assignment.from_proving_assignment(synthesize_for_proving(circuit))
    proof = prove(mimc_params.pk, asg)
    vk_json, proof_json, public_json = tmp_path / "vk.json", tmp_path / "proof.json", tmp_path / "public.json"
    assert cli("groth16", "export-vk", mimc_params.vk_path, vk_json) == 0
    proof_json.write_text(json.dumps(snarkjs_json.proof_to_json(proof)))
    public_json.write_text(json.dumps(snarkjs_json.public_to_json(asg.public_inputs())))
    assert snarkjs_tools.snarkjs_verify(vk_json, public_json, proof_json)
    public_json.write_text(json.dumps(snarkjs_json.public_to_json([asg.public_inputs()[0] ^ 1])))
    assert not snarkjs_tools.snarkjs_verify(vk_json, public_json, proof_json)
