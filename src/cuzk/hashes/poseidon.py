"""Native Poseidon hashing over BLS12-381 Fr, as neptune 11.0.0 computes it (docs/circuits.md §8).

Two permutations are provided and must agree (the tests check it):

* :func:`permute_reference` -- the textbook definition ("Correct" mode in neptune): every round adds
  its t round constants, applies x^5 to all elements (full rounds) or to element 0 only (partial
  rounds), then mixes with the MDS matrix. Easy to audit against the paper.
* :func:`permute_optimized` -- neptune's default ("OptimizedStatic"): compressed round constants and
  sparse partial-round matrices. This is the computation the circuit gadget mirrors row by row,
  so it is the one :func:`poseidon_hash` uses by default.

The state is [domain tag, x_1, ..., x_arity]; the hash is state[1] after the permutation.
"""

from __future__ import annotations

from collections.abc import Sequence

from cuzk.field.constants import R_MODULUS
from cuzk.hashes.poseidon_constants import (
    ENCRYPTION_TAG,
    STANDARD,
    Matrix,
    PoseidonConstants,
    SparseMatrix,
    apply_matrix,
    constant_length_tag,
    custom_tag,
    merkle_tree_tag,
    poseidon_constants,
)

__all__ = [
    "hash_column",
    "hash_custom_gr",
    "hash_merkle",
    "permute_optimized",
    "permute_reference",
    "poseidon_hash",
]


def _sbox(x: int) -> int:
    return pow(x, 5, R_MODULUS)


def _mix_sparse(state: Sequence[int], sparse: SparseMatrix) -> list[int]:
    """state times a sparse M'': dense first column and first row, identity elsewhere."""
    first = state[0]
    head = sum(w * s for w, s in zip(sparse.w_hat, state, strict=True)) % R_MODULUS
    return [head, *((s + v * first) % R_MODULUS for s, v in zip(state[1:], sparse.v_rest, strict=True))]


def permute_reference(state: Sequence[int], constants: PoseidonConstants) -> list[int]:
    """The plain Poseidon permutation: R_F/2 full, R_P partial, R_F/2 full rounds."""
    half, r_p = constants.half_full_rounds, constants.partial_rounds
    s = list(state)
    for r in range(constants.full_rounds + r_p):
        s = [(x + k) % R_MODULUS for x, k in zip(s, constants.round_keys(r), strict=True)]
        if half <= r < half + r_p:
            s[0] = _sbox(s[0])
        else:
            s = [_sbox(x) for x in s]
        s = apply_matrix(constants.mds, s)
    return s


def _mixing_matrix(constants: PoseidonConstants, round_index: int) -> Matrix | SparseMatrix:
    """The linear layer of round `round_index` (0-based) in the optimized form (docs/circuits.md §8)."""
    half = constants.half_full_rounds
    if round_index == half - 1:
        return constants.pre_sparse_matrix
    if half <= round_index < half + constants.partial_rounds:
        return constants.sparse_matrices[round_index - half]
    return constants.mds


def _mix(state: list[int], constants: PoseidonConstants, round_index: int) -> list[int]:
    matrix = _mixing_matrix(constants, round_index)
    if isinstance(matrix, SparseMatrix):
        return _mix_sparse(state, matrix)
    return apply_matrix(matrix, state)


def permute_optimized(state: Sequence[int], constants: PoseidonConstants) -> list[int]:
    """neptune's optimized permutation: same output as :func:`permute_reference`.

    Constants are consumed in this order: t before the first S-boxes, then t after each full
    round's S-boxes and 1 after each partial round's, except the last round, which adds none.
    """
    crc = constants.compressed_round_constants
    t, half, r_p = constants.width, constants.half_full_rounds, constants.partial_rounds
    s = [(x + k) % R_MODULUS for x, k in zip(state, crc[:t], strict=True)]
    offset = t
    rounds = constants.full_rounds + r_p
    for r in range(rounds):
        if half <= r < half + r_p:
            s[0] = (_sbox(s[0]) + crc[offset]) % R_MODULUS
            offset += 1
        elif r < rounds - 1:
            s = [(_sbox(x) + k) % R_MODULUS for x, k in zip(s, crc[offset:offset + t], strict=True)]
            offset += t
        else:
            s = [_sbox(x) for x in s]
        s = _mix(s, constants, r)
    assert offset == len(crc)
    return s


def _domain_tag(tag: str | int, arity: int, length: int) -> int:
    if isinstance(tag, int):
        if not 0 <= tag < R_MODULUS:
            raise ValueError(f"domain tag {tag:#x} is not a field element")
        return tag
    if tag == "merkle":
        return merkle_tree_tag(arity)
    if tag == "constant_length":
        return constant_length_tag(length)
    if tag == "encryption":
        return ENCRYPTION_TAG
    if tag == "sponge":
        return 0
    raise ValueError(f"unknown Poseidon domain tag {tag!r} "
                     "(use 'merkle', 'constant_length', 'encryption', 'sponge' or an int tag value)")


def poseidon_hash(inputs: Sequence[int], *, arity: int | None = None, tag: str | int = "merkle",
                  strength: str = STANDARD, optimized: bool = True) -> int:
    """Poseidon of `inputs` (field elements as ints in [0, r)), as neptune's `Poseidon::hash`.

    `arity` defaults to len(inputs). `tag` is a HashType name or a raw domain tag value (e.g.
    `custom_tag(1)`). Only "constant_length" may take fewer inputs than the arity (neptune pads
    with zeros); every other type needs exactly `arity` inputs. `optimized=False` runs the
    reference permutation instead (same result, slower).
    """
    values = list(inputs)
    arity = len(values) if arity is None else arity
    for x in values:
        if not 0 <= x < R_MODULUS:
            raise ValueError(f"Poseidon input {x:#x} is not a field element (must be in [0, r))")
    if tag == "constant_length":
        if len(values) > arity:
            raise ValueError(f"{len(values)} inputs exceed Poseidon arity {arity}")
    elif len(values) != arity:
        raise ValueError(f"Poseidon with arity {arity} and tag {tag!r} needs exactly {arity} inputs, "
                         f"got {len(values)}")
    constants = poseidon_constants(arity, strength)
    state = [_domain_tag(tag, arity, len(values)), *values, *[0] * (arity - len(values))]
    permute = permute_optimized if optimized else permute_reference
    return permute(state, constants)[1]


def hash_merkle(arity: int, children: Sequence[int]) -> int:
    """A Merkle-tree node of `arity` children (tree_c, tree_r_last, PoSt trees, comm_r)."""
    return poseidon_hash(children, arity=arity, tag="merkle")


def hash_custom_gr(a: int, b: int) -> int:
    """Arity-2 Poseidon with domain tag Custom(1) = 2^40: SnapDeals' "gen randomness" digests."""
    return poseidon_hash([a, b], arity=2, tag=custom_tag(1))


def hash_column(values: Sequence[int]) -> int:
    """A tree_c column digest: arity = number of layers (2 or 11 for the published sizes)."""
    return poseidon_hash(values, arity=len(values), tag="merkle")
