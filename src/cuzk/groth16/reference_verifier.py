"""An independent Groth16 verifier on py_ecc (the Ethereum Foundation's pure-Python BLS12-381).

It shares no code with cuzk's verifier: it parses the `.vk` bytes and the 192-byte proof itself,
decompresses with py_ecc, and evaluates the pairing equation with py_ecc's Miller loop and one
final exponentiation (~0.25 s). Tests and `cuzk demo` use it as a second opinion on our proofs.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

G1_BYTES, G2_BYTES = 96, 192


def _fq(data: bytes) -> int:
    return int.from_bytes(data, "big")


def _g1(data: bytes, ec: Any) -> tuple:
    if data[0] & 0xE0:
        raise ValueError("unexpected flag bits in an uncompressed G1 point")
    point = (ec.FQ(_fq(data[:48])), ec.FQ(_fq(data[48:])), ec.FQ.one())
    if not ec.is_on_curve(point, ec.b):
        raise ValueError("G1 point is not on the curve")
    return point


def _g2(data: bytes, ec: Any) -> tuple:
    if data[0] & 0xE0:
        raise ValueError("unexpected flag bits in an uncompressed G2 point")
    x = ec.FQ2([_fq(data[48:96]), _fq(data[0:48])])  # stored imaginary part first
    y = ec.FQ2([_fq(data[144:192]), _fq(data[96:144])])
    point = (x, y, ec.FQ2.one())
    if not ec.is_on_curve(point, ec.b2):
        raise ValueError("G2 point is not on the curve")
    return point


def parse_vk(vk_bytes: bytes) -> dict[str, Any]:
    from py_ecc import optimized_bls12_381 as ec

    pos = 0

    def take(n: int) -> bytes:
        nonlocal pos
        if pos + n > len(vk_bytes):
            raise ValueError("verifying key is truncated")
        out = vk_bytes[pos:pos + n]
        pos += n
        return out

    vk = {
        "alpha_g1": _g1(take(G1_BYTES), ec),
        "beta_g1": _g1(take(G1_BYTES), ec),
        "beta_g2": _g2(take(G2_BYTES), ec),
        "gamma_g2": _g2(take(G2_BYTES), ec),
        "delta_g1": _g1(take(G1_BYTES), ec),
        "delta_g2": _g2(take(G2_BYTES), ec),
    }
    n_ic = int.from_bytes(take(4), "big")
    vk["ic"] = [_g1(take(G1_BYTES), ec) for _ in range(n_ic)]
    return vk


def _in_subgroup(point: tuple, ec: Any) -> bool:
    return bool(ec.is_inf(ec.multiply(point, ec.curve_order)))


def parse_proof(proof_bytes: bytes) -> tuple[tuple, tuple, tuple]:
    from py_ecc import optimized_bls12_381 as ec
    from py_ecc.bls.point_compression import decompress_G1, decompress_G2

    if len(proof_bytes) != 192:
        raise ValueError(f"a proof is 192 bytes, got {len(proof_bytes)}")
    a = decompress_G1(_fq(proof_bytes[0:48]))
    b = decompress_G2((_fq(proof_bytes[48:96]), _fq(proof_bytes[96:144])))
    c = decompress_G1(_fq(proof_bytes[144:192]))
    for name, point in (("A", a), ("B", b), ("C", c)):
        if ec.is_inf(point) or not _in_subgroup(point, ec):
            raise ValueError(f"proof point {name} is the identity or outside the prime-order subgroup")
    return a, b, c


def verify(vk_bytes: bytes, proof_bytes: bytes, public_inputs: Sequence[int]) -> bool:
    """e(A, B) = e(α, β)·e(IC₀ + Σ xᵢ ICᵢ, γ)·e(C, δ), computed entirely with py_ecc."""
    from py_ecc import optimized_bls12_381 as ec
    from py_ecc.optimized_bls12_381.optimized_pairing import miller_loop

    vk = parse_vk(vk_bytes)
    a, b, c = parse_proof(proof_bytes)
    if len(public_inputs) + 1 != len(vk["ic"]):
        raise ValueError(f"the key takes {len(vk['ic']) - 1} public inputs, got {len(public_inputs)}")
    acc = vk["ic"][0]
    for x, ic in zip(public_inputs, vk["ic"][1:], strict=True):
        if not 0 <= x < ec.curve_order:
            raise ValueError("public input is not a canonical field element")
        acc = ec.add(acc, ec.multiply(ic, x))
    f = (
        miller_loop(b, a, final_exponentiate=False)
        * miller_loop(vk["beta_g2"], ec.neg(vk["alpha_g1"]), final_exponentiate=False)
        * miller_loop(vk["gamma_g2"], ec.neg(acc), final_exponentiate=False)
        * miller_loop(vk["delta_g2"], ec.neg(c), final_exponentiate=False)
    )
    return ec.final_exponentiate(f) == ec.FQ12.one()
