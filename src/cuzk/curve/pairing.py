"""Pairings on BLS12-381 through py-arkworks (one final exponentiation per check)."""

from __future__ import annotations

from collections.abc import Sequence

from cuzk.curve.points import GT, G1Point, G2Point


def pairing(p: G1Point, q: G2Point) -> GT:
    return GT.pairing(p, q)


def multi_pairing(ps: Sequence[G1Point], qs: Sequence[G2Point]) -> GT:
    if len(ps) != len(qs):
        raise ValueError(f"multi_pairing needs as many G1 as G2 points ({len(ps)} != {len(qs)})")
    return GT.multi_pairing(list(ps), list(qs))


def pairing_product_is_one(ps: Sequence[G1Point], qs: Sequence[G2Point]) -> bool:
    """Whether Π e(ps[i], qs[i]) == 1."""
    if len(ps) != len(qs):
        raise ValueError(f"pairing check needs as many G1 as G2 points ({len(ps)} != {len(qs)})")
    return GT.pairing_check(list(ps), list(qs))
