"""Packing bits into field elements, row for row as bellperson's `multipack.rs` (docs/circuits.md §4).

Filecoin uses `pack_bits` to turn SHA-256 outputs into Fr values (labels, tree_d nodes) and
`pack_into_inputs` to expose Merkle path bits and challenges as public inputs. Both pack at most
CAPACITY = 254 bits per element so the packing is injective.
"""

from __future__ import annotations

from collections.abc import Sequence

from cuzk.gadgets.boolean import Boolean
from cuzk.gadgets.num import AllocatedNum, Num
from cuzk.r1cs import ONE, ConstraintSystem, LinearCombination

#: Fr::CAPACITY for BLS12-381: bits that always fit in a field element.
CAPACITY = 254


def _num_of_bits(bits: Sequence[Boolean]) -> Num:
    num = Num.zero()
    coeff = 1
    for bit in bits:
        num.add_bool_with_coeff(bit, coeff)
        coeff <<= 1
    return num


def pack_bits(cs: ConstraintSystem, bits: Sequence[Boolean]) -> AllocatedNum:
    """Aux y; row (Σ_{i<min(n,254)} 2^i·bit_i) * ONE = y. Bits past 254 are ignored (not constrained)."""
    num = _num_of_bits(bits[:CAPACITY])
    packed = AllocatedNum.alloc(cs, "input", lambda: num.value)
    cs.enforce("packing constraint", num.lc(), LinearCombination([(ONE, 1)]),
               LinearCombination([(packed.variable, 1)]))
    return packed


def pack_into_inputs(cs: ConstraintSystem, bits: Sequence[Boolean]) -> list[AllocatedNum]:
    """Per chunk of 254 bits, in order: input y; row (Σ 2^i·bit_i) * ONE = y.

    Returns the inputs (bellperson returns nothing; they are handy for tests and callers).
    """
    inputs = []
    for i in range(0, len(bits), CAPACITY):
        num = _num_of_bits(bits[i:i + CAPACITY])
        y = AllocatedNum.alloc_input(cs, f"input {i // CAPACITY}", lambda num=num: num.value)
        cs.enforce("packing constraint", num.lc(), LinearCombination([(ONE, 1)]), LinearCombination([(y.variable, 1)]))
        inputs.append(y)
    return inputs


def bytes_to_bits(data: bytes) -> list[bool]:
    """Bits of each byte MSB first, bytes in order (SHA-256 stream order)."""
    return [bool(byte >> i & 1) for byte in data for i in range(7, -1, -1)]


def bytes_to_bits_le(data: bytes) -> list[bool]:
    """Bits of each byte LSB first, bytes in order."""
    return [bool(byte >> i & 1) for byte in data for i in range(8)]


def compute_multipacking(bits: Sequence[bool]) -> list[int]:
    """The public inputs `pack_into_inputs` produces for these bits (native, for verifiers)."""
    out = []
    for i in range(0, len(bits), CAPACITY):
        chunk = bits[i:i + CAPACITY]
        out.append(sum(1 << j for j, bit in enumerate(chunk) if bit))
    return out
