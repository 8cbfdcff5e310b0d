"""snarkjs JSON interop: verification keys, proofs and public signals for BLS12-381.

Layouts are those of `snarkjs zkey export verificationkey` and `snarkjs groth16 prove` (see
docs/formats.md §6): every number is a decimal string of a canonical (non-Montgomery) field element;
points are affine written projectively with Z = "1": G1 `[x, y, "1"]`, G2 `[[x.c0, x.c1], [y.c0, y.c1],
["1", "0"]]`; the point at infinity is G1 `["0", "1", "0"]` and G2 `[["0", "0"], ["1", "0"], ["0", "0"]]`.

`vk_alphabeta_12` (the Fp12 value e(alpha, beta)) is not computed: `snarkjs groth16 verify` never reads
it (groth16_verify.js uses only curve, IC, vk_alpha_1, vk_beta_2, vk_gamma_2 and vk_delta_2), and
py-arkworks cannot expose GT coefficients. A vk that came from snarkjs keeps its value through
`vk_from_json` -> `vk_to_json` (validated, copied verbatim); a vk made here omits the key.

Parsing is strict, and every error is a FormatError naming the file and the JSON path, e.g.
`vk.json: IC[3][1]: not a decimal string`. Points are checked on the curve and in the subgroup.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from py_arkworks_bls12381 import G1Point, G2Point

from cuzk.errors import FormatError, PointDecodeError
from cuzk.field.constants import P_MODULUS, R_MODULUS

__all__ = [
    "g1_from_json",
    "g1_to_json",
    "g2_from_json",
    "g2_to_json",
    "proof_from_json",
    "proof_to_json",
    "public_from_json",
    "public_to_json",
    "vk_from_json",
    "vk_to_json",
]

CURVE_NAME = "bls12381"
PROTOCOL = "groth16"
_FQ_BYTES = 48
_DECIMAL = re.compile(r"[0-9]{1,200}")

# The nested list layout of vk_alphabeta_12: Fp12 = 2 x Fp6, Fp6 = 3 x Fp2, Fp2 = 2 x Fp.
AlphaBeta = list[list[list[str]]]


# --- emitting --------------------------------------------------------------------------------------


def _coords_be(xy: bytes) -> list[str]:
    return [str(int.from_bytes(xy[k:k + _FQ_BYTES], "big")) for k in range(0, len(xy), _FQ_BYTES)]


def g1_to_json(p: G1Point) -> list[str]:
    """`[x, y, "1"]`, or `["0", "1", "0"]` for infinity."""
    if p == G1Point.identity():
        return ["0", "1", "0"]
    x, y = _coords_be(p.to_xy_bytes_be())
    return [x, y, "1"]


def g2_to_json(p: G2Point) -> list[list[str]]:
    """`[[x.c0, x.c1], [y.c0, y.c1], ["1", "0"]]`, or the snarkjs infinity form."""
    if p == G2Point.identity():
        return [["0", "0"], ["1", "0"], ["0", "0"]]
    x0, x1, y0, y1 = _coords_be(p.to_xy_bytes_be())  # py-arkworks order: x.c0, x.c1, y.c0, y.c1
    return [[x0, x1], [y0, y1], ["1", "0"]]


def vk_to_json(alpha_g1: Any, beta_g2: G2Point | None = None, gamma_g2: G2Point | None = None,
               delta_g2: G2Point | None = None, ic: Sequence[G1Point] | None = None, *,
               alphabeta: AlphaBeta | None = None) -> dict[str, Any]:
    """A snarkjs verification key.

    Takes the points, or as the only positional argument any object with attributes alpha_g1,
    beta_g2, gamma_g2, delta_g2 and ic (such as a verifying key). `alphabeta`, when given, is copied
    (after validation) as `vk_alphabeta_12`; otherwise that key is left out (snarkjs's verifier does
    not use it).
    """
    if beta_g2 is None and gamma_g2 is None and delta_g2 is None and ic is None:
        key = alpha_g1
        alpha_g1, beta_g2, gamma_g2, delta_g2, ic = (key.alpha_g1, key.beta_g2, key.gamma_g2, key.delta_g2,
                                                     key.ic)
    if beta_g2 is None or gamma_g2 is None or delta_g2 is None or ic is None:
        raise TypeError("vk_to_json takes alpha_g1, beta_g2, gamma_g2, delta_g2 and ic, or one key object")
    if not ic:
        raise ValueError("IC needs at least one point (IC[0])")
    vk: dict[str, Any] = {
        "protocol": PROTOCOL,
        "curve": CURVE_NAME,
        "nPublic": len(ic) - 1,
        "vk_alpha_1": g1_to_json(alpha_g1),
        "vk_beta_2": g2_to_json(beta_g2),
        "vk_gamma_2": g2_to_json(gamma_g2),
        "vk_delta_2": g2_to_json(delta_g2),
    }
    if alphabeta is not None:
        vk["vk_alphabeta_12"] = _alphabeta(alphabeta, "vk_to_json", "alphabeta")
    vk["IC"] = [g1_to_json(p) for p in ic]
    return vk


def proof_to_json(a: Any, b: G2Point | None = None, c: G1Point | None = None) -> dict[str, Any]:
    """A snarkjs proof.json object from A, B, C, or from one object with attributes a, b and c."""
    if b is None and c is None:
        a, b, c = a.a, a.b, a.c
    if b is None or c is None:
        raise TypeError("proof_to_json takes a, b and c, or one proof object")
    return {"pi_a": g1_to_json(a), "pi_b": g2_to_json(b), "pi_c": g1_to_json(c), "protocol": PROTOCOL,
            "curve": CURVE_NAME}


def public_to_json(values: Sequence[int]) -> list[str]:
    """public.json: decimal strings, in circom's order (outputs, then public inputs)."""
    out = []
    for i, v in enumerate(values):
        if not 0 <= v < R_MODULUS:
            raise ValueError(f"public value #{i} = {v} is not in [0, r)")
        out.append(str(v))
    return out


# --- parsing ---------------------------------------------------------------------------------------


def _decimal(obj: object, source: str, path: str, bound: int, bound_name: str) -> int:
    if not isinstance(obj, str) or not _DECIMAL.fullmatch(obj):
        raise FormatError(f"not a decimal string (got {_show(obj)})", source=source, field=path)
    v = int(obj)
    if v >= bound:
        raise FormatError(f"{v} is not below {bound_name}", source=source, field=path)
    return v


def _show(obj: object) -> str:
    text = repr(obj)
    return text if len(text) <= 40 else text[:37] + "..."


def _list(obj: object, n: int | tuple[int, ...], source: str, path: str) -> list[Any]:
    sizes = (n,) if isinstance(n, int) else n
    if not isinstance(obj, list) or len(obj) not in sizes:
        want = " or ".join(str(s) for s in sizes)
        got = f"a list of {len(obj)}" if isinstance(obj, list) else _show(obj)
        raise FormatError(f"expected a list of {want} elements, got {got}", source=source, field=path)
    return obj


def _fq(obj: object, source: str, path: str) -> int:
    return _decimal(obj, source, path, P_MODULUS, "the base field modulus q")


def _fq2(obj: object, source: str, path: str) -> tuple[int, int]:
    c0, c1 = _list(obj, 2, source, path)
    return _fq(c0, source, f"{path}[0]"), _fq(c1, source, f"{path}[1]")


def g1_from_json(obj: object, source: str, path: str) -> G1Point:
    """Parse `[x, y, z]` with z = 1 (affine) or z = 0 (infinity); checked on curve and in G1."""
    x, y, z = _list(obj, 3, source, path)
    xv, yv, zv = _fq(x, source, f"{path}[0]"), _fq(y, source, f"{path}[1]"), _fq(z, source, f"{path}[2]")
    if zv == 0:
        return G1Point.identity()
    if zv != 1:
        raise FormatError(f"Z = {zv}: only affine points (Z = 1) or infinity (Z = 0) are accepted",
                          source=source, field=f"{path}[2]")
    try:
        return G1Point.from_xy_bytes_be(xv.to_bytes(_FQ_BYTES, "big") + yv.to_bytes(_FQ_BYTES, "big"))
    except ValueError as exc:
        raise PointDecodeError(f"not a valid G1 point: {exc}", source=source, field=path) from None


def g2_from_json(obj: object, source: str, path: str) -> G2Point:
    """Parse `[[x.c0, x.c1], [y.c0, y.c1], [z.c0, z.c1]]`, z = 1 or 0; checked on curve and in G2."""
    x, y, z = _list(obj, 3, source, path)
    xv, yv, zv = _fq2(x, source, f"{path}[0]"), _fq2(y, source, f"{path}[1]"), _fq2(z, source, f"{path}[2]")
    if zv == (0, 0):
        return G2Point.identity()
    if zv != (1, 0):
        raise FormatError(f"Z = {list(zv)}: only affine points (Z = [1, 0]) or infinity (Z = [0, 0]) are "
                          f"accepted", source=source, field=f"{path}[2]")
    raw = b"".join(v.to_bytes(_FQ_BYTES, "big") for v in (*xv, *yv))
    try:
        return G2Point.from_xy_bytes_be(raw)
    except ValueError as exc:
        raise PointDecodeError(f"not a valid G2 point: {exc}", source=source, field=path) from None


def _dict(obj: object, source: str) -> dict[str, Any]:
    if not isinstance(obj, dict):
        raise FormatError(f"expected a JSON object, got {_show(obj)}", source=source)
    return obj


def _key(d: dict[str, Any], key: str, source: str) -> Any:
    if key not in d:
        raise FormatError("missing key", source=source, field=key)
    return d[key]


def _check_tags(d: dict[str, Any], source: str, *, curve_required: bool) -> None:
    """protocol must be groth16 and curve BLS12-381 (snarkjs spells it bls12381, BLS12-381, ...)."""
    if "protocol" in d and d["protocol"] != PROTOCOL:
        raise FormatError(f"{_show(d['protocol'])}, expected {PROTOCOL!r}", source=source, field="protocol")
    if curve_required or "curve" in d:
        curve = _key(d, "curve", source)
        if not isinstance(curve, str) or re.sub(r"[^A-Z0-9]", "", curve.upper()) != CURVE_NAME.upper():
            raise FormatError(f"{_show(curve)}, expected {CURVE_NAME!r}: this prover only handles BLS12-381",
                              source=source, field="curve")


def _alphabeta(obj: object, source: str, path: str) -> AlphaBeta:
    out: AlphaBeta = []
    for j, fp6 in enumerate(_list(obj, 2, source, path)):
        row = []
        for k, fp2 in enumerate(_list(fp6, 3, source, f"{path}[{j}]")):
            row.append([str(v) for v in _fq2(fp2, source, f"{path}[{j}][{k}]")])
        out.append(row)
    return out


def vk_from_json(d: object, *, source: str = "vk.json") -> dict[str, Any]:
    """Parse a snarkjs vk.json object into the keyword arguments of `vk_to_json`.

    Keys: alpha_g1, beta_g2, gamma_g2, delta_g2 (points), ic (list of G1Point, nPublic + 1 of them),
    alphabeta (the validated vk_alphabeta_12 strings, or None when absent).
    """
    vk = _dict(d, source)
    _check_tags(vk, source, curve_required=True)
    ic_json = _key(vk, "IC", source)
    if not isinstance(ic_json, list) or not ic_json:
        raise FormatError(f"expected a non-empty list of G1 points, got {_show(ic_json)}", source=source,
                          field="IC")
    if "nPublic" in vk and vk["nPublic"] != len(ic_json) - 1:
        raise FormatError(f"{_show(vk['nPublic'])}, but IC has {len(ic_json)} points (expected nPublic + 1)",
                          source=source, field="nPublic")
    alphabeta = vk.get("vk_alphabeta_12")
    return {
        "alpha_g1": g1_from_json(_key(vk, "vk_alpha_1", source), source, "vk_alpha_1"),
        "beta_g2": g2_from_json(_key(vk, "vk_beta_2", source), source, "vk_beta_2"),
        "gamma_g2": g2_from_json(_key(vk, "vk_gamma_2", source), source, "vk_gamma_2"),
        "delta_g2": g2_from_json(_key(vk, "vk_delta_2", source), source, "vk_delta_2"),
        "ic": [g1_from_json(p, source, f"IC[{i}]") for i, p in enumerate(ic_json)],
        "alphabeta": None if alphabeta is None else _alphabeta(alphabeta, source, "vk_alphabeta_12"),
    }


def proof_from_json(d: object, *, source: str = "proof.json") -> tuple[G1Point, G2Point, G1Point]:
    """Parse a snarkjs proof.json object into (A, B, C)."""
    proof = _dict(d, source)
    _check_tags(proof, source, curve_required=False)
    return (g1_from_json(_key(proof, "pi_a", source), source, "pi_a"),
            g2_from_json(_key(proof, "pi_b", source), source, "pi_b"),
            g1_from_json(_key(proof, "pi_c", source), source, "pi_c"))


def public_from_json(lst: object, *, source: str = "public.json") -> list[int]:
    """Parse public.json: a list of decimal strings, each below r."""
    if not isinstance(lst, list):
        raise FormatError(f"expected a JSON list of decimal strings, got {_show(lst)}", source=source)
    return [_decimal(v, source, f"[{i}]", R_MODULUS, "the scalar field modulus r") for i, v in enumerate(lst)]
