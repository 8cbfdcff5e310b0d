"""Poseidon parameters over BLS12-381 Fr, derived exactly as neptune 11.0.0 derives them.

Filecoin's tree_c / tree_r / column hashes and SnapDeals digests are neptune Poseidon hashes, and the
published Groth16 parameters fix every coefficient of neptune's circuit. So nothing here is chosen
by us: round numbers, Grain-LFSR round constants, the Cauchy MDS matrix, and neptune's optimisation
artefacts (compressed round constants, pre-sparse and sparse matrices) are all reproduced bit for
bit (docs/circuits.md §8). All values are Python ints in [0, r).

Conventions follow neptune: a matrix is a tuple of rows, and ``apply_matrix(m, v)`` is the row
vector ``v`` times ``m`` (``out[j] = sum_i v[i] * m[i][j]``).
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache

from cuzk.field.constants import FR_BITS, R_MODULUS

Matrix = tuple[tuple[int, ...], ...]

STANDARD = "standard"
STRENGTHENED = "strengthened"
STRENGTHS = (STANDARD, STRENGTHENED)

FULL_ROUNDS = 8
#: neptune implements its `Arity` trait for typenum U1..U36 only.
MAX_ARITY = 36

# Partial rounds by width t (neptune round_numbers.rs with n = 256, M = 128 and its security margin;
# the computation is pure f32 arithmetic, so the results are hard-coded as (first t, R_P) steps).
# From t = 63 on the formula gives 61 (neptune's tests list t = 65 -> 61), not 60; neptune has no arity
# above 36, so neither do we (docs/circuits.md §8).
_PARTIAL_ROUNDS_BY_WIDTH = ((2, 55), (4, 56), (8, 57), (16, 59), (32, 60))


# -- round numbers ----------------------------------------------------------------------------------

def _check_arity(arity: int) -> None:
    if not 1 <= arity <= MAX_ARITY:
        raise ValueError(f"Poseidon arity must be in 1..{MAX_ARITY} (neptune's range), got {arity}")


def _check_strength(strength: str) -> None:
    if strength not in STRENGTHS:
        raise ValueError(f"Poseidon strength must be one of {STRENGTHS}, got {strength!r}")


def partial_rounds(arity: int, strength: str = STANDARD) -> int:
    """R_P for width arity + 1; strengthened is ceil(1.25 * R_P) (neptune: f64 ceil)."""
    _check_arity(arity)
    _check_strength(strength)
    width = arity + 1
    rounds = next(rp for first_t, rp in reversed(_PARTIAL_ROUNDS_BY_WIDTH) if width >= first_t)
    if strength == STRENGTHENED:
        rounds = -(-rounds * 5 // 4)  # ceil(1.25 * R_P), exactly
    return rounds


# -- domain tags (neptune hash_type.rs); the tag is the initial state[0] ------------------------------

SPONGE_TAG = 0
ENCRYPTION_TAG = 1 << 32
VARIABLE_LENGTH_TAG = 1 << 64


def merkle_tree_tag(arity: int) -> int:
    """HashType::MerkleTree: 2^arity - 1 (so 3 for binary trees, 255 for oct trees)."""
    _check_arity(arity)
    return (1 << arity) - 1


def custom_tag(identifier: int) -> int:
    """HashType::Custom(Arbitrary(id)): id * 2^40 for 1 <= id <= 256 (SnapDeals uses id 1)."""
    if not 1 <= identifier <= 256:
        raise ValueError(f"custom domain tag id must be in 1..256, got {identifier}")
    return identifier << 40


def constant_length_tag(length: int) -> int:
    """HashType::ConstantLength(n): n * 2^64."""
    if length < 0:
        raise ValueError(f"constant length must be >= 0, got {length}")
    return (length << 64) % R_MODULUS


# -- Grain LFSR round constants (neptune round_constants.rs) ----------------------------------------

_GRAIN_STATE_BITS = 80
_GRAIN_MASK = (1 << _GRAIN_STATE_BITS) - 1
# Bits produced per LFSR step below: new bit i needs state bit i + 62 < 80, so at most 18 at once.
_GRAIN_CHUNK = 16


def _shrink_table() -> tuple[tuple[int, int], ...]:
    """Self-shrinking of one byte of raw bits (bit 0 generated first): (output bits MSB-first, count).

    Raw bits are taken in pairs (x, y); y is output when x = 1, and dropped otherwise.
    """
    table = []
    for raw in range(256):
        value = count = 0
        for pair in range(4):
            if raw >> (2 * pair) & 1:
                value = value << 1 | (raw >> (2 * pair + 1) & 1)
                count += 1
        table.append((value, count))
    return tuple(table)


_SHRINK = _shrink_table()


def _grain_initial_state(width: int, full_rounds: int, partial_rounds: int, field_size: int) -> int:
    """The 80 initial bits b0..b79 packed as an int with bit j = b_j (b0 is the first appended bit)."""
    fields = ((2, 1), (4, 1), (12, field_size), (12, width), (10, full_rounds), (10, partial_rounds),
              (30, (1 << 30) - 1))  # (bit count, value): field = GF(p), S-box = x^alpha, ..., 30 ones
    bits: list[int] = []
    for count, value in fields:
        bits.extend((value >> i) & 1 for i in reversed(range(count)))
    assert len(bits) == _GRAIN_STATE_BITS
    return sum(bit << j for j, bit in enumerate(bits))


def _grain_step(state: int) -> tuple[int, int]:
    """Advance the LFSR by 16 bits; returns (new state, the 16 new bits with bit 0 generated first).

    Feedback b_{i+80} = b_{i+62} ^ b_{i+51} ^ b_{i+38} ^ b_{i+23} ^ b_{i+13} ^ b_i, evaluated for 16
    consecutive i at once on the packed state.
    """
    new = (state ^ state >> 13 ^ state >> 23 ^ state >> 38 ^ state >> 51 ^ state >> 62) & 0xFFFF
    return (state >> _GRAIN_CHUNK) | (new << (_GRAIN_STATE_BITS - _GRAIN_CHUNK)), new


def grain_round_constants(width: int, full_rounds: int, partial_rounds: int,
                          field_size: int = FR_BITS) -> tuple[int, ...]:
    """(R_F + R_P) * t round constants from the self-shrinking Grain LFSR.

    Each candidate is `field_size` output bits read most significant first; candidates >= r are
    discarded (neptune reads 7 + 31 * 8 bits big-endian and rejects non-canonical encodings).
    """
    state = _grain_initial_state(width, full_rounds, partial_rounds, field_size)
    for _ in range(160 // _GRAIN_CHUNK):  # the first 160 bits are discarded
        state, _ = _grain_step(state)
    wanted = (full_rounds + partial_rounds) * width
    constants: list[int] = []
    buffer = buffered = 0  # self-shrunk output not consumed yet, earliest bit most significant
    while len(constants) < wanted:
        state, raw = _grain_step(state)
        for byte in (raw & 0xFF, raw >> 8):
            value, count = _SHRINK[byte]
            buffer = buffer << count | value
            buffered += count
        if buffered >= field_size:
            buffered -= field_size
            candidate = buffer >> buffered
            buffer &= (1 << buffered) - 1
            if candidate < R_MODULUS:
                constants.append(candidate)
    return tuple(constants)


# -- matrices over Fr -------------------------------------------------------------------------------

def _dot(a: Sequence[int], b: Sequence[int]) -> int:
    return sum(map(operator.mul, a, b)) % R_MODULUS


def transpose(m: Matrix) -> Matrix:
    return tuple(zip(*m, strict=True))


def mat_mul(a: Matrix, b: Matrix) -> Matrix:
    """Ordinary product a x b."""
    columns = transpose(b)
    return tuple(tuple(_dot(row, col) for col in columns) for row in a)


def apply_matrix(m: Matrix, v: Sequence[int]) -> list[int]:
    """Row vector times matrix, neptune's `apply_matrix`: out[j] = sum_i v[i] * m[i][j]."""
    return [_dot(v, col) for col in transpose(m)]


def identity(n: int) -> Matrix:
    return tuple(tuple(int(i == j) for j in range(n)) for i in range(n))


def mat_inverse(m: Matrix) -> Matrix:
    """Gauss-Jordan inverse mod r (the inverse is unique, so the method does not matter)."""
    n = len(m)
    rows = [[*row, *ident] for row, ident in zip(m, identity(n), strict=True)]
    for col in range(n):
        pivot = next((r for r in range(col, n) if rows[r][col]), None)
        if pivot is None:
            raise ValueError("matrix is singular")
        rows[col], rows[pivot] = rows[pivot], rows[col]
        inv = pow(rows[col][col], -1, R_MODULUS)
        rows[col] = [x * inv % R_MODULUS for x in rows[col]]
        for r in range(n):
            factor = rows[r][col]
            if r != col and factor:
                rows[r] = [(x - factor * y) % R_MODULUS for x, y in zip(rows[r], rows[col], strict=True)]
    return tuple(tuple(row[n:]) for row in rows)


def cauchy_mds(width: int) -> Matrix:
    """neptune's MDS matrix: M[i][j] = 1 / (x_i + y_j) with x_i = i, y_j = width + j (symmetric)."""
    return tuple(tuple(pow(i + j + width, -1, R_MODULUS) for j in range(width)) for i in range(width))


@dataclass(frozen=True)
class SparseMatrix:
    """A matrix that is the identity except for its first row and first column (neptune's M'').

    Mixing with it costs 2t - 1 multiplications: new[0] = sum_i w_hat[i] * s[i] and
    new[j] = s[j] + v_rest[j - 1] * s[0] for j >= 1.
    """

    w_hat: tuple[int, ...]  #: the first column, element 0 included
    v_rest: tuple[int, ...]  #: the first row without element 0

    def to_matrix(self) -> Matrix:
        n = len(self.w_hat)
        rows = [list(row) for row in identity(n)]
        for i, w in enumerate(self.w_hat):
            rows[i][0] = w
        rows[0][1:] = self.v_rest
        return tuple(tuple(row) for row in rows)


def mat_pow(m: Matrix, exponent: int) -> Matrix:
    """m^exponent (exponent >= 0) by square-and-multiply."""
    result, base = identity(len(m)), m
    while exponent:
        if exponent & 1:
            result = mat_mul(result, base)
        base = mat_mul(base, base)
        exponent >>= 1
    return result


def sparse_factorization(mds: Matrix, partial_rounds: int) -> tuple[Matrix, tuple[SparseMatrix, ...]]:
    """(pre_sparse, sparse[0..R_P-1]) such that the partial rounds can mix with sparse matrices.

    neptune (mds.rs `factor_to_sparse_matrices`) starts from curr = M and R_P times factors
    curr = M' x M'', where M' = diag(1, c_hat) (c_hat: curr without row 0 and column 0) and M'' is
    sparse: first row = curr's first row, first column below it = w_hat = apply(c_hat^-1, w) with
    w = (curr[1][0], ..., curr[t-1][0]); it keeps M'' and continues with curr = M x M'. The last
    curr is the pre-sparse matrix; the kept M'' are used in reverse order.

    That loop costs R_P matrix products and inversions, seconds in Python for wide instances, so we
    use its closed form instead (same values; the literal loop is a test oracle). With M_hat the
    minor of M, step k (k = 0..R_P-1) has c_hat = M_hat^(k+1), an unchanged first column
    (w = M[1:][0], curr[0][0] = M[0][0]) and first row tail M[0][1:] . M_hat^k, hence
    w_hat_k = w_hat_(k-1) . M_hat^-1 and v_rest_k = v_rest_(k-1) . M_hat; finally
    pre_sparse = M x diag(1, M_hat^R_P).
    """
    m_hat = tuple(row[1:] for row in mds[1:])
    m_hat_inverse = mat_inverse(m_hat)
    w_hat = apply_matrix(m_hat_inverse, [row[0] for row in mds[1:]])
    v_rest = list(mds[0][1:])
    kept: list[SparseMatrix] = []
    for _ in range(partial_rounds):
        kept.append(SparseMatrix(w_hat=(mds[0][0], *w_hat), v_rest=tuple(v_rest)))
        w_hat = apply_matrix(m_hat_inverse, w_hat)
        v_rest = apply_matrix(m_hat, v_rest)
    kept.reverse()
    power = mat_pow(m_hat, partial_rounds)
    m_prime = ((1,) + (0,) * len(m_hat), *((0, *row) for row in power))
    return mat_mul(mds, m_prime), tuple(kept)


def compress_round_constants(width: int, full_rounds: int, partial_rounds: int,
                             round_constants: Sequence[int], mds_inverse: Matrix) -> tuple[int, ...]:
    """neptune's fully preprocessed constants (preprocessing.rs), R_F * t + R_P of them.

    Constants are pushed back through the linear layers so that each S-box is followed by one
    addition (and partial rounds add a single constant, to element 0).
    """
    def round_keys(r: int) -> list[int]:
        return list(round_constants[r * width:(r + 1) * width])

    half = full_rounds // 2
    out = round_keys(0)
    for i in range(1, half):
        out += apply_matrix(mds_inverse, round_keys(i))
    final_round = half + partial_rounds
    acc = round_keys(final_round)
    partial_keys: list[int] = []
    for i in range(partial_rounds):
        inverted = apply_matrix(mds_inverse, acc)
        partial_keys.append(inverted[0])
        inverted[0] = 0
        previous = round_keys(final_round - 1 - i)
        acc = [(p + q) % R_MODULUS for p, q in zip(previous, inverted, strict=True)]
    out += apply_matrix(mds_inverse, acc)
    out += reversed(partial_keys)
    for i in range(1, half):
        out += apply_matrix(mds_inverse, round_keys(final_round + i))
    assert len(out) == full_rounds * width + partial_rounds
    return tuple(out)


# -- the bundle -------------------------------------------------------------------------------------

@dataclass(frozen=True)
class PoseidonConstants:
    """Everything the native hash and the circuit need for one (arity, strength) instance."""

    arity: int
    width: int
    full_rounds: int
    partial_rounds: int
    round_constants: tuple[int, ...]  #: (R_F + R_P) * t, t per round, for the reference permutation
    mds: Matrix
    mds_inverse: Matrix
    compressed_round_constants: tuple[int, ...]  #: R_F * t + R_P, for the optimized form
    pre_sparse_matrix: Matrix
    sparse_matrices: tuple[SparseMatrix, ...]  #: R_P of them
    strength: str

    @property
    def half_full_rounds(self) -> int:
        return self.full_rounds // 2

    def round_keys(self, round_index: int) -> tuple[int, ...]:
        """The t reference round constants of round `round_index` (0-based, all rounds counted)."""
        return self.round_constants[round_index * self.width:(round_index + 1) * self.width]


@cache  # = functools.lru_cache(maxsize=None): computed once per (arity, strength)
def poseidon_constants(arity: int, strength: str = STANDARD) -> PoseidonConstants:
    """The (cached) constants of neptune's `PoseidonConstants::<Fr, U{arity}>::new_with_strength`."""
    r_p = partial_rounds(arity, strength)
    width = arity + 1
    mds = cauchy_mds(width)
    mds_inverse = mat_inverse(mds)
    round_constants = grain_round_constants(width, FULL_ROUNDS, r_p)
    pre_sparse, sparse = sparse_factorization(mds, r_p)
    return PoseidonConstants(
        arity=arity,
        width=width,
        full_rounds=FULL_ROUNDS,
        partial_rounds=r_p,
        round_constants=round_constants,
        mds=mds,
        mds_inverse=mds_inverse,
        compressed_round_constants=compress_round_constants(width, FULL_ROUNDS, r_p, round_constants,
                                                            mds_inverse),
        pre_sparse_matrix=pre_sparse,
        sparse_matrices=sparse,
        strength=strength,
    )
