"""snarkjs JSON interop against the JSON that snarkjs itself writes, and against broken JSON."""

from __future__ import annotations

import copy
import json
import sys
from pathlib import Path
from typing import Any

import pytest
from py_arkworks_bls12381 import GT, G1Point, G2Point, Scalar

from cuzk.errors import FormatError, PointDecodeError
from cuzk.field.constants import P_MODULUS, R_MODULUS
from cuzk.groth16.formats.snarkjs_json import (
    g1_from_json,
    g1_to_json,
    g2_from_json,
    g2_to_json,
    proof_from_json,
    proof_to_json,
    public_from_json,
    public_to_json,
    vk_from_json,
    vk_to_json,
)

try:
    import snarkjs_tools
except ImportError:  # tests/ is on sys.path only once tests/conftest.py has been loaded
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    import snarkjs_tools

pytestmark = pytest.mark.external

G1_INF = ["0", "1", "0"]
G2_INF = [["0", "0"], ["1", "0"], ["0", "0"]]


@pytest.fixture(scope="module")
def circom(tmp_path_factory: pytest.TempPathFactory) -> dict[str, snarkjs_tools.Paths]:
    reason = snarkjs_tools.tools_missing_reason()
    if reason:
        pytest.skip(reason)
    return snarkjs_tools.standard_fixtures(tmp_path_factory.mktemp("circom"))


@pytest.fixture(scope="module", params=["multiplier", "square_chain"])
def built(request: pytest.FixtureRequest, circom: dict[str, snarkjs_tools.Paths]) -> snarkjs_tools.Paths:
    return circom[request.param]


@pytest.fixture(scope="module")
def files(built: snarkjs_tools.Paths) -> dict[str, Any]:
    return {"vk": json.loads(built.vk_json.read_text()), "proof": json.loads(built.proof_json.read_text()),
            "public": json.loads(built.public_json.read_text())}


def _scalar(v: int) -> Scalar:
    return Scalar.from_le_bytes(v.to_bytes(32, "little"))


def _verify(vk: dict[str, Any], publics: list[int], proof: tuple[G1Point, G2Point, G1Point]) -> bool:
    """docs/dependencies.md §7 with parsed objects."""
    a, b, c = proof
    ic = vk["ic"]
    vk_x = ic[0] + G1Point.multiexp_unchecked(ic[1:], [_scalar(x) for x in publics])
    return GT.pairing_check([-a, vk["alpha_g1"], vk_x, c], [b, vk["beta_g2"], vk["gamma_g2"], vk["delta_g2"]])


def _message(exc: pytest.ExceptionInfo[BaseException]) -> str:
    return str(exc.value)


# --- round trips and verification ------------------------------------------------------------------


def test_vk_round_trip(files: dict[str, Any]) -> None:
    vk = files["vk"]
    assert "vk_alphabeta_12" in vk
    assert vk_to_json(**vk_from_json(vk)) == vk
    # Without vk_alphabeta_12 the key is simply left out.
    parsed = vk_from_json(vk)
    parsed["alphabeta"] = None
    emitted = vk_to_json(**parsed)
    assert emitted == {k: v for k, v in vk.items() if k != "vk_alphabeta_12"}
    assert list(emitted) == ["protocol", "curve", "nPublic", "vk_alpha_1", "vk_beta_2", "vk_gamma_2",
                             "vk_delta_2", "IC"]


def test_vk_to_json_takes_a_key_object(files: dict[str, Any]) -> None:
    class Key:
        pass

    key = Key()
    parsed = vk_from_json(files["vk"])
    for name in ("alpha_g1", "beta_g2", "gamma_g2", "delta_g2", "ic"):
        setattr(key, name, parsed[name])
    assert vk_to_json(key) == vk_to_json(**{**parsed, "alphabeta": None})
    with pytest.raises(TypeError):
        vk_to_json(parsed["alpha_g1"], parsed["beta_g2"])


def test_proof_and_public_round_trip(files: dict[str, Any]) -> None:
    a, b, c = proof_from_json(files["proof"])
    assert proof_to_json(a, b, c) == files["proof"]

    class Proof:
        def __init__(self) -> None:
            self.a, self.b, self.c = a, b, c

    assert proof_to_json(Proof()) == files["proof"]
    publics = public_from_json(files["public"])
    assert all(isinstance(v, int) for v in publics)
    assert public_to_json(publics) == files["public"]


def test_python_pairing_check_of_snarkjs_proof(files: dict[str, Any]) -> None:
    vk = vk_from_json(files["vk"])
    proof = proof_from_json(files["proof"])
    publics = public_from_json(files["public"])
    assert len(publics) == files["vk"]["nPublic"]
    assert _verify(vk, publics, proof)
    for i in range(len(publics)):
        tampered = list(publics)
        tampered[i] = (tampered[i] + 1) % R_MODULUS
        assert not _verify(vk, tampered, proof)
    a, b, c = proof
    assert not _verify(vk, publics, (a, b, c + G1Point()))


def test_snarkjs_accepts_our_json(built: snarkjs_tools.Paths, files: dict[str, Any], tmp_path: Path) -> None:
    """Re-emitted vk (without vk_alphabeta_12), proof and public verify with snarkjs itself, and a
    tampered public input does not: snarkjs really does not need vk_alphabeta_12."""
    parsed = vk_from_json(files["vk"])
    parsed["alphabeta"] = None
    vk_path, proof_path, public_path = tmp_path / "vk.json", tmp_path / "proof.json", tmp_path / "public.json"
    vk_path.write_text(json.dumps(vk_to_json(**parsed)))
    proof_path.write_text(json.dumps(proof_to_json(*proof_from_json(files["proof"]))))
    publics = public_from_json(files["public"])
    public_path.write_text(json.dumps(public_to_json(publics)))
    assert snarkjs_tools.snarkjs_verify(vk_path, public_path, proof_path)
    public_path.write_text(json.dumps(public_to_json([(publics[0] + 1) % R_MODULUS, *publics[1:]])))
    assert not snarkjs_tools.snarkjs_verify(vk_path, public_path, proof_path)


def test_infinity_forms(circom: dict[str, snarkjs_tools.Paths]) -> None:
    """The infinity forms snarkjs writes (seen in `zkey export json` of square_chain's B1/B2)."""
    zkey_json = snarkjs_tools.zkey_export_json(circom["square_chain"].zkey)
    assert zkey_json["B1"][0] == G1_INF
    assert zkey_json["B2"][0] == G2_INF
    assert g1_from_json(zkey_json["B1"][0], "zkey.json", "B1[0]") == G1Point.identity()
    assert g2_from_json(zkey_json["B2"][0], "zkey.json", "B2[0]") == G2Point.identity()
    assert g1_to_json(G1Point.identity()) == G1_INF
    assert g2_to_json(G2Point.identity()) == G2_INF
    assert g1_from_json(g1_to_json(G1Point()), "x", "p") == G1Point()
    assert g2_from_json(g2_to_json(G2Point()), "x", "p") == G2Point()


def test_public_to_json_range() -> None:
    assert public_to_json([0, R_MODULUS - 1]) == ["0", str(R_MODULUS - 1)]
    with pytest.raises(ValueError):
        public_to_json([R_MODULUS])
    with pytest.raises(ValueError):
        public_to_json([-1])


# --- rejected inputs -------------------------------------------------------------------------------


def _vk_error(vk: Any, kind: type[FormatError] = FormatError) -> str:
    with pytest.raises(kind) as info:
        vk_from_json(vk, source="vk.json")
    return _message(info)


def test_bad_vk(circom: dict[str, snarkjs_tools.Paths]) -> None:
    good = json.loads(circom["square_chain"].vk_json.read_text())

    def edited(path: list[Any], value: Any) -> dict[str, Any]:
        vk = copy.deepcopy(good)
        node = vk
        for key in path[:-1]:
            node = node[key]
        if value is KeyError:
            del node[path[-1]]
        else:
            node[path[-1]] = value
        return vk

    assert _vk_error(edited(["IC", 2, 1], 12)) == "vk.json: IC[2][1]: not a decimal string (got 12)"
    assert _vk_error(edited(["IC", 2, 1], "0x12")).startswith("vk.json: IC[2][1]: not a decimal string")
    assert _vk_error(edited(["IC", 1, 0], "-5")).startswith("vk.json: IC[1][0]: not a decimal string")
    assert _vk_error(edited(["IC", 0, 1], str(P_MODULUS))) == (
        f"vk.json: IC[0][1]: {P_MODULUS} is not below the base field modulus q")
    y = int(good["vk_alpha_1"][1])
    assert _vk_error(edited(["vk_alpha_1", 1], str(y + 1)), PointDecodeError).startswith(
        "vk.json: vk_alpha_1: not a valid G1 point")
    assert "subgroup" in _vk_error(edited(["vk_alpha_1"], ["0", "2", "1"]), PointDecodeError)
    assert _vk_error(edited(["vk_alpha_1", 2], "2")).startswith("vk.json: vk_alpha_1[2]: Z = 2")
    x = int(good["vk_delta_2"][0][1])
    assert _vk_error(edited(["vk_delta_2", 0, 1], str(x ^ 1)), PointDecodeError).startswith(
        "vk.json: vk_delta_2: not a valid G2 point")
    assert _vk_error(edited(["vk_gamma_2", 1], ["1"])) == (
        "vk.json: vk_gamma_2[1]: expected a list of 2 elements, got a list of 1")
    assert _vk_error(edited(["vk_beta_2"], "x")).startswith(
        "vk.json: vk_beta_2: expected a list of 3 elements, got 'x'")
    assert _vk_error(edited(["curve"], "bn128")) == (
        "vk.json: curve: 'bn128', expected 'bls12381': this prover only handles BLS12-381")
    assert vk_from_json(edited(["curve"], "BLS12-381"))["ic"]  # snarkjs's spellings are normalised
    assert _vk_error(edited(["curve"], KeyError)) == "vk.json: curve: missing key"
    assert _vk_error(edited(["protocol"], "plonk")) == "vk.json: protocol: 'plonk', expected 'groth16'"
    assert _vk_error(edited(["IC"], KeyError)) == "vk.json: IC: missing key"
    assert _vk_error(edited(["IC"], [])).startswith("vk.json: IC: expected a non-empty list")
    assert _vk_error(edited(["nPublic"], 5)) == (
        "vk.json: nPublic: 5, but IC has 3 points (expected nPublic + 1)")
    assert _vk_error(edited(["vk_alphabeta_12", 1, 2], ["1"])) == (
        "vk.json: vk_alphabeta_12[1][2]: expected a list of 2 elements, got a list of 1")
    assert _vk_error([1, 2]) == "vk.json: expected a JSON object, got [1, 2]"


def test_bad_proof(circom: dict[str, snarkjs_tools.Paths]) -> None:
    good = json.loads(circom["multiplier"].proof_json.read_text())

    def error(proof: Any, kind: type[FormatError] = FormatError) -> str:
        with pytest.raises(kind) as info:
            proof_from_json(proof, source="proof.json")
        return _message(info)

    bad = copy.deepcopy(good)
    bad["pi_b"][1][0] = 7
    assert error(bad) == "proof.json: pi_b[1][0]: not a decimal string (got 7)"
    bad = copy.deepcopy(good)
    bad["pi_c"] = bad["pi_c"][:2]
    assert error(bad) == "proof.json: pi_c: expected a list of 3 elements, got a list of 2"
    bad = copy.deepcopy(good)
    del bad["pi_a"]
    assert error(bad) == "proof.json: pi_a: missing key"
    bad = copy.deepcopy(good)
    bad["pi_a"][0] = str(int(bad["pi_a"][0]) ^ 1)
    assert error(bad, PointDecodeError).startswith("proof.json: pi_a: not a valid G1 point")
    bad = copy.deepcopy(good)
    bad["pi_b"][2] = ["1", "1"]
    assert error(bad).startswith("proof.json: pi_b[2]: Z = [1, 1]")
    bad = copy.deepcopy(good)
    bad["curve"] = "bn128"
    assert error(bad).startswith("proof.json: curve: 'bn128'")
    bad = copy.deepcopy(good)
    del bad["curve"], bad["protocol"]
    assert proof_from_json(bad) == proof_from_json(good)  # snarkjs does not need the tags either


def test_bad_public() -> None:
    def error(value: Any) -> str:
        with pytest.raises(FormatError) as info:
            public_from_json(value, source="public.json")
        return _message(info)

    assert public_from_json(["0", "7", str(R_MODULUS - 1)]) == [0, 7, R_MODULUS - 1]
    assert error(["1", str(R_MODULUS)]) == (
        f"public.json: [1]: {R_MODULUS} is not below the scalar field modulus r")
    assert error(["1", 2]) == "public.json: [1]: not a decimal string (got 2)"
    assert error(["1", ""]) == "public.json: [1]: not a decimal string (got '')"
    assert error({"a": "1"}) == "public.json: expected a JSON list of decimal strings, got {'a': '1'}"
