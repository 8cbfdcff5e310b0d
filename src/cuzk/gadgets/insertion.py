"""Placing a Merkle node among its siblings, row for row as storage-proofs-core's `insertion.rs`
(docs/circuits.md §6).

A Merkle level knows the current node `A`, its `arity - 1` siblings in path order and the node's
position as `log2(arity)` index bits (LSB first). `insert` returns the `arity` hash inputs with `A`
at that position. Arities 2, 4 and 8 use hand-written networks of `pick`s whose order is part of
the published R1CS (2, 8 and 22 rows); any other power of two falls back, like Rust, to one
`select` per output position. `select` (MSB-first multiplexer) is also what SnapDeals uses to pick
its apex leaf.
"""

from __future__ import annotations

from collections.abc import Sequence

from cuzk.gadgets.boolean import IS_KIND, AllocatedBit, Boolean
from cuzk.gadgets.num import AllocatedNum, pick
from cuzk.r1cs import ConstraintSystem

__all__ = ["insert", "insert_2", "insert_4", "insert_8", "select"]


def insert(cs: ConstraintSystem, element: AllocatedNum, bits: Sequence[Boolean],
           siblings: Sequence[AllocatedNum]) -> list[AllocatedNum]:
    """`siblings` with `element` inserted at position `Σ 2^i·bits[i]`; dispatches on the arity."""
    size = len(siblings) + 1
    if 1 << len(bits) != size:
        raise ValueError(f"{len(bits)} index bits cannot place an element among {len(siblings)} siblings")
    if size == 2:
        return insert_2(cs, element, bits, siblings)
    if size == 4:
        return insert_4(cs, element, bits, siblings)
    if size == 8:
        return insert_8(cs, element, bits, siblings)
    # Generic arity: for each output position, select among the values that position would hold
    # for each possible index (Rust's fallback; never used by the production tree shapes).
    choices_by_index = [[*siblings[:index], element, *siblings[index:]] for index in range(size)]
    return [select(cs, [choices_by_index[index][pos] for index in range(size)], bits) for pos in range(size)]


def insert_2(cs: ConstraintSystem, element: AllocatedNum, bits: Sequence[Boolean],
             siblings: Sequence[AllocatedNum]) -> list[AllocatedNum]:
    """Two rows: out0 = pick(b0, sib, A), out1 = pick(b0, A, sib)."""
    _check(bits, siblings, 1)
    (b0,), (b,) = bits, siblings
    return [pick(cs, b0, b, element), pick(cs, b0, element, b)]


def insert_4(cs: ConstraintSystem, element: AllocatedNum, bits: Sequence[Boolean],
             siblings: Sequence[AllocatedNum]) -> list[AllocatedNum]:
    """Eight rows; index n = b0 + 2·b1 puts A at position n of [b, c, d]."""
    _check(bits, siblings, 2)
    b0, b1 = bits
    a = element
    b, c, d = siblings
    p0_x0 = pick(cs, b0, b, a)
    p0 = pick(cs, b1, b, p0_x0)
    p1_x0 = pick(cs, b0, a, b)
    p1 = pick(cs, b1, c, p1_x0)
    p2_x1 = pick(cs, b0, d, a)
    p2 = pick(cs, b1, p2_x1, c)
    p3_x1 = pick(cs, b0, a, d)
    p3 = pick(cs, b1, p3_x1, d)
    return [p0, p1, p2, p3]


def insert_8(cs: ConstraintSystem, element: AllocatedNum, bits: Sequence[Boolean],
             siblings: Sequence[AllocatedNum]) -> list[AllocatedNum]:
    """22 rows: nor(b0, b1), and(b0, b1), then 20 picks; index n = b0 + 2·b1 + 4·b2.

    The two precomputed bits let positions 0, 3, 4 and 7 be decided with one pick on the low
    bits instead of two. Like Rust, the index bits must be allocated and not negated.
    """
    _check(bits, siblings, 3)
    b0, b1, b2 = bits
    if b0.kind != IS_KIND or b1.kind != IS_KIND:
        raise ValueError("insert_8 needs allocated, non-negated low index bits")
    nor01 = Boolean(IS_KIND, AllocatedBit.nor(cs, b0.bit, b1.bit))  # type: ignore[arg-type]
    and01 = Boolean(IS_KIND, AllocatedBit.and_(cs, b0.bit, b1.bit))  # type: ignore[arg-type]
    a = element
    b, c, d, e, f, g, h = siblings

    p0_xx0 = pick(cs, nor01, a, b)
    p0 = pick(cs, b2, b, p0_xx0)

    p1_x00 = pick(cs, b0, a, b)
    p1_xx0 = pick(cs, b1, c, p1_x00)
    p1 = pick(cs, b2, c, p1_xx0)

    p2_x10 = pick(cs, b0, d, a)
    p2_xx0 = pick(cs, b1, p2_x10, c)
    p2 = pick(cs, b2, d, p2_xx0)

    p3_xx0 = pick(cs, and01, a, d)
    p3 = pick(cs, b2, e, p3_xx0)

    p4_xx1 = pick(cs, nor01, a, f)
    p4 = pick(cs, b2, p4_xx1, e)

    p5_x01 = pick(cs, b0, a, f)
    p5_xx1 = pick(cs, b1, g, p5_x01)
    p5 = pick(cs, b2, p5_xx1, f)

    p6_x11 = pick(cs, b0, h, a)
    p6_xx1 = pick(cs, b1, p6_x11, g)
    p6 = pick(cs, b2, p6_xx1, g)

    p7_xx1 = pick(cs, and01, a, h)
    p7 = pick(cs, b2, p7_xx1, h)
    return [p0, p1, p2, p3, p4, p5, p6, p7]


def select(cs: ConstraintSystem, choices: Sequence[AllocatedNum], bits: Sequence[Boolean]) -> AllocatedNum:
    """`choices[Σ 2^i·bits[i]]` by halving: bits are consumed MSB first, and each step keeps
    new[j] = pick(bit, state[half + j], state[j]) for j < half (len(choices) - 1 rows in all)."""
    if 1 << len(bits) != len(choices):
        raise ValueError(f"{len(bits)} bits cannot select among {len(choices)} values")
    state = list(choices)
    half = len(state) // 2
    for bit in reversed(bits):
        state = [pick(cs, bit, state[half + j], state[j]) for j in range(half)]
        half //= 2
    return state[0]


def _check(bits: Sequence[Boolean], siblings: Sequence[AllocatedNum], bit_count: int) -> None:
    if len(bits) != bit_count or len(siblings) != (1 << bit_count) - 1:
        raise ValueError(f"expected {bit_count} index bits and {(1 << bit_count) - 1} siblings, "
                         f"got {len(bits)} and {len(siblings)}")
