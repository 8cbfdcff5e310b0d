"""The Poseidon circuit exactly as neptune 11.0.0's legacy `circuit::poseidon_hash` lays it out.

Filecoin's published parameters were generated from neptune's "Legacy" circuit, so this gadget
reproduces its allocation order, row order, operand placement (A, B, C) and every coefficient
(docs/circuits.md §8). It follows the optimized permutation of
:func:`cuzk.hashes.poseidon.permute_optimized` step by step.

State elements are either *allocated* (a variable) or *linear combinations* with a known value
(neptune's `Elt::Num`): the linear layers are free LC arithmetic, and an LC is only pinned to a new
variable ("ensure allocated", one row LC * ONE = v) when an S-box or the output needs it.

Rows, with k the compressed round constants in consumption order (docs/circuits.md §8):

* round 0, element 0 (the domain tag): folded to the constant ((tag + pre)^5 + post), no rows;
* round 0, input x (already allocated): q = (x+pre)^2, q2 = q^2, y = (x+pre)*q2 + post, rows
  (x + pre)(x + pre) = q, q * q = q2, (x + pre) * q2 = y - post;
* every later S-box on an LC e: v = e (row e * ONE = v), v2 = v^2, v4 = v2^2, y = v*v4 + post,
  rows v * v = v2, v2 * v2 = v4, v * v4 = y - post (no post in the terminal round);
* output: element 1 "ensure allocated".

Every row allocates exactly one new variable, so aux count = row count =
3 (t R_F + R_P - 1) + (t R_F + R_P - arity), e.g. 311 / 377 / 505 / 598 for arity 2 / 4 / 8 / 11.

Details read in neptune v11.0.0 src/circuit.rs (fact-finding, where docs/circuits.md §8 does not say):

* each gadget allocates its result *before* emitting its row;
* `mul_sum` puts the S-box input in A and the power in B: (x + pre) * q2, v * v4;
* constants sit in C as `res + (-post) * ONE`, in A/B as `x + pre * ONE`;
* LCs are bellpepper `LinearCombination`s, which merge repeated variables (coefficients add)
  and iterate inputs in index order, then aux in index order. We emit the same canonical form,
  dropping zero coefficients (bellpepper keeps them, but they contribute nothing to any matrix or
  density).

How it is computed, and why. A 32GiB PoRep partition synthesises ~3,000 of these hashes. Merging
LCs term by term for every hash (the partial rounds' LCs grow to ~t + R_P terms and are re-merged
each round) cost 30-100 ms per arity-8 hash, almost all of it in that merging. But which rows come
next, and which earlier S-box outputs each "ensure allocated" LC combines with which coefficients,
depends only on the constants (and, for round 1's constant term, the tag). So that merging runs once
per constants instance, over S-box output *positions* instead of variables, into a `_Template`; a
hash then only allocates, substitutes its variables into the one large LC per S-box, and enforces
(`_emit`). The witness is the optimized permutation with every intermediate kept, computed by a
compiled kernel on Montgomery limbs (`_witness_kernel`, ~1 ms of Python big-int arithmetic per
arity-8 hash otherwise), and not at all when `cs.needs_values` is False.

Template term order is allocation order, which is bellpepper's canonical order while back ends
number aux variables consecutively (all of ours do); `_emit` checks this for every S-box and sorts
the LCs canonically for a back end that does not. Annotations are precomputed as full namespace
paths below the caller's (`"partial round 3/solitary quintic s-box/l^2"`), so error messages name
rows as before without entering ~130 namespaces per hash. tests/gadgets/test_poseidon_gadget.py
compares every recorded row, witness value and annotation path with a frozen copy of the
term-by-term implementation.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from itertools import repeat
from typing import NamedTuple

import numpy as np
from numba import njit

from cuzk.field import _mont64 as m
from cuzk.field.constants import FR_BYTES, FR_MONT_R, R_MODULUS
from cuzk.field.limbs import LIMB_DTYPE, ints_to_limbs
from cuzk.hashes.poseidon_constants import Matrix, PoseidonConstants, SparseMatrix
from cuzk.r1cs.lc import LinearCombination, Term
from cuzk.r1cs.system import ConstraintSystem
from cuzk.r1cs.variable import ONE, Variable

__all__ = ["PoseidonOutput", "poseidon_hash_circuit"]


class PoseidonOutput(NamedTuple):
    """The allocated digest; `value` is None on back ends that compute no values."""

    variable: Variable
    value: int | None


Spec = tuple[tuple[int, int], ...]
"""An "ensure allocated" row's A as (position, coefficient) terms, in emission order, coefficients in
[1, r). Position 0 is ONE; position i >= 1 is the hash's i-th S-box output (1..arity: round 0's)."""


class _FirstSbox(NamedTuple):
    """Round 0 on input i: the annotation paths of its three rows, pre and -post (both mod r)."""

    square: str
    fourth: str
    out: str
    pre: int
    neg_post: int


class _Sbox(NamedTuple):
    """A later S-box: its ensure row (A = `lc`) and three power rows. `neg_post` is -post mod r, and 0
    in the terminal round (no post), which emits the same C as a post of 0 would."""

    alloc_v: str
    enforce_v: str
    square: str
    fourth: str
    out: str
    lc: Spec
    neg_post: int


class _Ensure(NamedTuple):
    """The digest's ensure row: element 1 after the last round, pinned to a variable."""

    alloc_v: str
    enforce_v: str
    lc: Spec


class _KernelConstants(NamedTuple):
    """The permutation's constants as `_witness_kernel` reads them: (.., 4) uint64 Montgomery limbs."""

    pre0: np.ndarray  #: (arity, 4): round 0's pre of inputs 1..arity
    post0: np.ndarray  #: (arity, 4): round 0's post of inputs 1..arity
    posts: np.ndarray  #: (later S-boxes, 4): each later S-box's post (0 in the terminal round)
    partial: np.ndarray  #: (rounds - 1,) uint8: whether round 1, 2, ... is a partial round
    dense: np.ndarray  #: (R_F, t, t, 4): M[i][j] of the layer after round 0 and after each later full round
    w_hat: np.ndarray  #: (R_P, t, 4): each partial round's sparse first column
    v_rest: np.ndarray  #: (R_P, t - 1, 4): each partial round's sparse first row, element 0 excluded


# Key of round 0's folded tag constant while templates are derived: it sorts before every position
# (as ONE sorts first in bellpepper's order) and becomes a ONE term, times the constant, per tag.
_FOLDED = -1


def _spec(terms: dict[int, int]) -> Spec:
    """A merged LC as a template: by position (= allocation order), zero coefficients dropped."""
    return tuple((pos, coeff) for pos, coeff in sorted(terms.items()) if coeff)


def _combine(elements: Sequence[dict[int, int]], scalars: Sequence[int]) -> dict[int, int]:
    """sum_i scalars[i] * elements[i] over positions, merged -- neptune's `scalar_product` on LCs."""
    terms: dict[int, int] = {}
    for elt, scalar in zip(elements, scalars, strict=True):
        for pos, coeff in elt.items():
            terms[pos] = (terms.get(pos, 0) + coeff * scalar) % R_MODULUS
    return terms


def _mix_symbolic(state: list[dict[int, int]], matrix: Matrix | SparseMatrix) -> list[dict[int, int]]:
    """The linear layer on LC templates: state times matrix (dense, or sparse M'')."""
    if isinstance(matrix, SparseMatrix):
        head = _combine(state, matrix.w_hat)
        return [head, *(_combine([elt, state[0]], [1, v]) for elt, v in zip(state[1:], matrix.v_rest, strict=True))]
    return [_combine(state, column) for column in zip(*matrix, strict=True)]


def _round_matrix(c: PoseidonConstants, round_index: int) -> Matrix | SparseMatrix:
    """The optimized form's linear layer after round `round_index` (docs/circuits.md §8)."""
    half = c.half_full_rounds
    if round_index == half - 1:
        return c.pre_sparse_matrix
    if half <= round_index < half + c.partial_rounds:
        return c.sparse_matrices[round_index - half]
    return c.mds


def _round_names(c: PoseidonConstants) -> list[str]:
    """neptune's namespace of every round, in order."""
    half = c.half_full_rounds
    return ["first round",
            *(f"initial full round {i}" for i in range(1, half)),
            *(f"partial round {i}" for i in range(c.partial_rounds)),
            *(f"final full round {i}" for i in range(half - 1)),
            "terminal full round"]


def _folded_constant(constants: PoseidonConstants, tag: int) -> int:
    """Round 0's element 0, (tag + pre)^5 + post: a constant, so it costs no rows."""
    crc, t = constants.compressed_round_constants, constants.width
    return (pow((tag + crc[0]) % R_MODULUS, 5, R_MODULUS) + crc[t]) % R_MODULUS


def _with_folded(spec: Spec, folded: int) -> Spec:
    """`spec` with its folded-constant term (if any) turned into ONE * (folded * unit coefficient)."""
    if not spec or spec[0][0] != _FOLDED:
        return spec
    coeff = folded * spec[0][1] % R_MODULUS
    return ((0, coeff), *spec[1:]) if coeff else spec[1:]


def _montgomery(values: Sequence[int], *shape: int) -> np.ndarray:
    """Canonical ints as uint64 Montgomery limbs of the given leading shape."""
    return ints_to_limbs([v * FR_MONT_R % R_MODULUS for v in values]).reshape(*shape, 4)


# -- the witness kernel ------------------------------------------------------------------------------
#
# `_mont64`'s helpers are `inline="always"`; numba re-types an inlined body at every call site, which
# made this kernel take ~50 s to compile on a busy machine. Calling them through these two compiled
# functions instead types each body once; the call costs a few ns, against ~0.1 ms per hash spent
# turning limbs back into ints.

@njit(cache=True)
def _mul(a0, a1, a2, a3, b0, b1, b2, b3):  # type: ignore[no-untyped-def]
    """Montgomery product (see `_mont64.mont_mul`)."""
    return m.mont_mul(a0, a1, a2, a3, b0, b1, b2, b3)


@njit(cache=True)
def _add(a0, a1, a2, a3, b0, b1, b2, b3):  # type: ignore[no-untyped-def]
    """Modular sum (see `_mont64.add_mod`)."""
    return m.add_mod(a0, a1, a2, a3, b0, b1, b2, b3)


@njit(inline="always", cache=True)
def _put(a, i, x0, x1, x2, x3):  # type: ignore[no-untyped-def]
    """Store one element into row i of an (n, 4) limb array."""
    a[i, 0] = x0
    a[i, 1] = x1
    a[i, 2] = x2
    a[i, 3] = x3


@njit(cache=True)
def _dense_mix(st, dense, index):  # type: ignore[no-untyped-def]
    """st <- st times dense[index] (new[j] = sum_i st[i] * M[i][j]), all in Montgomery form."""
    t = st.shape[0]
    new = np.empty_like(st)
    for j in range(t):
        a0, a1, a2, a3 = m.U0, m.U0, m.U0, m.U0
        for i in range(t):
            p0, p1, p2, p3 = _mul(st[i, 0], st[i, 1], st[i, 2], st[i, 3],
                                        dense[index, i, j, 0], dense[index, i, j, 1],
                                        dense[index, i, j, 2], dense[index, i, j, 3])
            a0, a1, a2, a3 = _add(a0, a1, a2, a3, p0, p1, p2, p3)
        _put(new, j, a0, a1, a2, a3)
    st[:, :] = new


@njit(cache=True)
def _sparse_mix(st, w_hat, v_rest, index):  # type: ignore[no-untyped-def]
    """st <- st times the sparse M'': new[0] = w_hat . st, new[j] = st[j] + v_rest[j - 1] * st[0]."""
    t = st.shape[0]
    h0, h1, h2, h3 = m.U0, m.U0, m.U0, m.U0
    for i in range(t):
        p0, p1, p2, p3 = _mul(st[i, 0], st[i, 1], st[i, 2], st[i, 3],
                                    w_hat[index, i, 0], w_hat[index, i, 1], w_hat[index, i, 2], w_hat[index, i, 3])
        h0, h1, h2, h3 = _add(h0, h1, h2, h3, p0, p1, p2, p3)
    f0, f1, f2, f3 = st[0, 0], st[0, 1], st[0, 2], st[0, 3]
    for j in range(1, t):
        p0, p1, p2, p3 = _mul(f0, f1, f2, f3, v_rest[index, j - 1, 0], v_rest[index, j - 1, 1],
                                    v_rest[index, j - 1, 2], v_rest[index, j - 1, 3])
        s0, s1, s2, s3 = _add(st[j, 0], st[j, 1], st[j, 2], st[j, 3], p0, p1, p2, p3)
        _put(st, j, s0, s1, s2, s3)
    _put(st, 0, h0, h1, h2, h3)


@njit(cache=True)
def _witness_kernel(start, pre0, post0, posts, partial, dense, w_hat, v_rest, out):  # type: ignore[no-untyped-def]
    """Every allocation's value in allocation order, as canonical limbs, into `out`.

    `start` is the initial state [folded tag constant, inputs...] as canonical limbs; the other
    arrays are a `_KernelConstants`. Row order: q, q^2, y per input (round 0); v, v^2, v^4, y per
    later S-box; the digest.
    """
    t = start.shape[0]
    st = np.empty((t, 4), np.uint64)
    for i in range(t):
        a0, a1, a2, a3 = _mul(start[i, 0], start[i, 1], start[i, 2], start[i, 3], m.RR0, m.RR1, m.RR2, m.RR3)
        _put(st, i, a0, a1, a2, a3)
    k = 0
    for i in range(1, t):  # round 0: element 0 is the folded constant already
        s0, s1, s2, s3 = _add(st[i, 0], st[i, 1], st[i, 2], st[i, 3],
                                   pre0[i - 1, 0], pre0[i - 1, 1], pre0[i - 1, 2], pre0[i - 1, 3])
        q0, q1, q2, q3 = _mul(s0, s1, s2, s3, s0, s1, s2, s3)
        f0, f1, f2, f3 = _mul(q0, q1, q2, q3, q0, q1, q2, q3)
        p0, p1, p2, p3 = _mul(s0, s1, s2, s3, f0, f1, f2, f3)
        y0, y1, y2, y3 = _add(p0, p1, p2, p3, post0[i - 1, 0], post0[i - 1, 1], post0[i - 1, 2], post0[i - 1, 3])
        _put(out, k, q0, q1, q2, q3)
        _put(out, k + 1, f0, f1, f2, f3)
        _put(out, k + 2, y0, y1, y2, y3)
        _put(st, i, y0, y1, y2, y3)
        k += 3
    _dense_mix(st, dense, 0)
    n_dense, n_sparse, n_sbox = 1, 0, 0
    for rnd in range(partial.shape[0]):
        for i in range(1 if partial[rnd] else t):
            v0, v1, v2, v3 = st[i, 0], st[i, 1], st[i, 2], st[i, 3]
            s0, s1, s2, s3 = _mul(v0, v1, v2, v3, v0, v1, v2, v3)
            f0, f1, f2, f3 = _mul(s0, s1, s2, s3, s0, s1, s2, s3)
            p0, p1, p2, p3 = _mul(v0, v1, v2, v3, f0, f1, f2, f3)
            y0, y1, y2, y3 = _add(p0, p1, p2, p3, posts[n_sbox, 0], posts[n_sbox, 1], posts[n_sbox, 2],
                                       posts[n_sbox, 3])
            _put(out, k, v0, v1, v2, v3)
            _put(out, k + 1, s0, s1, s2, s3)
            _put(out, k + 2, f0, f1, f2, f3)
            _put(out, k + 3, y0, y1, y2, y3)
            _put(st, i, y0, y1, y2, y3)
            k += 4
            n_sbox += 1
        if partial[rnd]:
            _sparse_mix(st, w_hat, v_rest, n_sparse)
            n_sparse += 1
        else:
            _dense_mix(st, dense, n_dense)
            n_dense += 1
    _put(out, k, st[1, 0], st[1, 1], st[1, 2], st[1, 3])
    for row in range(out.shape[0]):  # out of Montgomery form: times 1 (plain) = times R^-1
        a0, a1, a2, a3 = _mul(out[row, 0], out[row, 1], out[row, 2], out[row, 3], m.U1, m.U0, m.U0, m.U0)
        _put(out, row, a0, a1, a2, a3)


# -- templates -----------------------------------------------------------------------------------------

class _Template:
    """Everything about one constants instance's circuit that does not depend on the inputs.

    Built once, by the same LC merging as neptune but over positions. The round-1 ensure rows hold
    the folded tag constant symbolically; `for_tag` fills it in (cached per tag).
    """

    __slots__ = ("_by_tag", "constants", "first", "kernel", "num_rows", "output", "sboxes")

    _MAX_TAGS = 16

    def __init__(self, constants: PoseidonConstants) -> None:
        c, r = constants, R_MODULUS
        t, crc, half = c.width, c.compressed_round_constants, c.half_full_rounds
        names = _round_names(c)
        self.constants = constants
        self.first = tuple(_FirstSbox(f"{ns}(l+rk)^2", f"{ns}l^4", f"{ns}l4 * (l + rk)", crc[i] % r, -crc[t + i] % r)
                           for i, ns in ((i, f"{names[0]}/quintic s-box {i}/") for i in range(1, t)))
        sboxes: list[_Sbox] = []
        posts: list[int] = []
        partial_flags: list[bool] = []
        first_matrix = _round_matrix(c, 0)
        assert not isinstance(first_matrix, SparseMatrix)  # round 0 is a full round
        dense: list[Matrix] = [first_matrix]
        sparse: list[SparseMatrix] = []

        def sbox(elt: dict[int, int], post: int | None, ns: str) -> dict[int, int]:
            """Record a later S-box on `elt`; its output is the next position."""
            sboxes.append(_Sbox(ns + "S-box input", ns + "S-box input preserves lc", ns + "l^2", ns + "l^4",
                                ns + "(l4 * l) + rk", _spec(elt), 0 if post is None else -post % r))
            posts.append(0 if post is None else post % r)
            return {t + len(sboxes) - 1: 1}

        state: list[dict[int, int]] = [{_FOLDED: 1}, *({i: 1} for i in range(1, t))]
        state = _mix_symbolic(state, dense[0])
        offset = 2 * t
        last = len(names) - 1
        for rnd in range(1, len(names)):
            partial = half <= rnd < half + c.partial_rounds
            if partial:
                state[0] = sbox(state[0], crc[offset], f"{names[rnd]}/solitary quintic s-box/")
                offset += 1
            else:
                round_posts: Sequence[int | None] = [None] * t if rnd == last else crc[offset:offset + t]
                offset += 0 if rnd == last else t
                state = [sbox(elt, post, f"{names[rnd]}/quintic s-box {i}/")
                         for i, (elt, post) in enumerate(zip(state, round_posts, strict=True))]
            matrix = _round_matrix(c, rnd)
            # Partial rounds, and only they, mix with a sparse M'' (docs/circuits.md §8); the kernel relies on it.
            assert partial == isinstance(matrix, SparseMatrix)
            partial_flags.append(partial)
            if isinstance(matrix, SparseMatrix):
                sparse.append(matrix)
            else:
                dense.append(matrix)
            state = _mix_symbolic(state, matrix)
        assert offset == len(crc)
        assert len(sboxes) == t * (c.full_rounds - 1) + c.partial_rounds
        self.sboxes = tuple(sboxes)
        self.output = _Ensure("hash result/allocate for Elt::Num", "hash result/allocate for Elt::Num preserves lc",
                              _spec(state[1]))
        self.num_rows = 3 * c.arity + 4 * len(sboxes) + 1
        self.kernel = _KernelConstants(
            pre0=_montgomery(crc[1:t], t - 1),
            post0=_montgomery(crc[t + 1:2 * t], t - 1),
            posts=_montgomery(posts, len(posts)),
            partial=np.array(partial_flags, dtype=np.uint8),
            dense=_montgomery([x for mat in dense for row in mat for x in row], len(dense), t, t),
            w_hat=_montgomery([x for s in sparse for x in s.w_hat], len(sparse), t),
            v_rest=_montgomery([x for s in sparse for x in s.v_rest], len(sparse), t - 1),
        )
        self._by_tag: dict[int, tuple[tuple[_Sbox, ...], _Ensure]] = {}

    def for_tag(self, tag: int) -> tuple[tuple[_Sbox, ...], _Ensure]:
        """The later S-boxes and the output row with the folded tag constant filled in."""
        cached = self._by_tag.get(tag)
        if cached is None:
            folded = _folded_constant(self.constants, tag)
            cached = (tuple(s._replace(lc=_with_folded(s.lc, folded)) for s in self.sboxes),
                      self.output._replace(lc=_with_folded(self.output.lc, folded)))
            if len(self._by_tag) >= self._MAX_TAGS:
                self._by_tag.clear()
            self._by_tag[tag] = cached
        return cached

    def witness(self, tag: int, inputs: Sequence[int]) -> list[int]:
        """Every allocation's value, in allocation order (`inputs` canonical, i.e. reduced mod r)."""
        out = np.empty((self.num_rows, 4), dtype=LIMB_DTYPE)  # little-endian limbs, read back as bytes
        _witness_kernel(ints_to_limbs([_folded_constant(self.constants, tag), *inputs]), *self.kernel, out)
        data, from_bytes = out.tobytes(), int.from_bytes
        return [from_bytes(data[i:i + FR_BYTES], "little") for i in range(0, len(data), FR_BYTES)]


_TEMPLATES: dict[int, _Template] = {}
_MAX_TEMPLATES = 64


def _template(constants: PoseidonConstants) -> _Template:
    """The cached template of `constants`, keyed by identity: `poseidon_constants` is cached, and
    hashing the frozen dataclass would hash every constant on every call."""
    template = _TEMPLATES.get(id(constants))
    if template is None or template.constants is not constants:
        if len(_TEMPLATES) >= _MAX_TEMPLATES:
            _TEMPLATES.clear()
        template = _TEMPLATES[id(constants)] = _Template(constants)
    return template


# -- emission -------------------------------------------------------------------------------------------

def _shifted(x: Variable, pre: int) -> list[Term]:
    """Round 0's `x + pre * ONE` in canonical order; an input that *is* ONE merges with the constant."""
    if x == ONE:
        merged = (pre + 1) % R_MODULUS
        return [(ONE, merged)] if merged else []
    return [(ONE, pre), (x, 1)] if pre else [(x, 1)]


def _canonical_key(term: Term) -> tuple[bool, int]:
    """bellpepper's iteration order: inputs by index, then aux by index."""
    var = term[0]
    return (var < 0, var if var >= 0 else ~var)


_ONE_TERM: Term = (ONE, 1)


def _emit(cs: ConstraintSystem, first: Sequence[_FirstSbox], sboxes: Sequence[_Sbox], output: _Ensure,
          inputs: Sequence[Variable], witness: Sequence[int] | None) -> Variable:
    """Allocate and enforce every row; returns the digest variable.

    Written out per S-box, so that only the ensure rows substitute variables into a template: the
    other rows' LCs are one or two literal terms. `ys` maps positions to variables (ONE, then each
    S-box output). Template term order is allocation order, which is canonical while each new aux
    variable has a higher index than the last: checked per S-box, else ensure rows are sorted.
    """
    alloc, enforce = cs.alloc, cs.enforce
    new_lc = LinearCombination.__new__

    def row(annotation: str, a: list[Term], b: list[Term], c: list[Term]) -> None:
        """enforce(a * b = c). The term lists are fresh and never reused, so they are handed to
        LinearCombinations without `__init__`'s copy: that copy, three per row, was a third of
        this loop's time."""
        lc_a, lc_b, lc_c = new_lc(LinearCombination), new_lc(LinearCombination), new_lc(LinearCombination)
        lc_a.terms, lc_b.terms, lc_c.terms = a, b, c
        enforce(annotation, lc_a, lc_b, lc_c)

    value: Callable[[], int | None] = iter(witness).__next__ if witness is not None else repeat(None).__next__
    ys: list[Variable] = [ONE]
    previous: int = 0  # aux j is encoded as ~j: later aux variables compare lower
    in_order = True
    for (square, fourth, out, pre, neg_post), x in zip(first, inputs, strict=True):
        shifted = _shifted(x, pre)
        q = alloc(square, value())
        row(square, list(shifted), list(shifted), [(q, 1)])
        q2 = alloc(fourth, value())
        row(fourth, [(q, 1)], [(q, 1)], [(q2, 1)])
        y = alloc(out, value())
        row(out, shifted, [(q2, 1)], [(ONE, neg_post), (y, 1)] if neg_post else [(y, 1)])
        in_order = in_order and y < q2 < q < previous
        previous = y
        ys.append(y)
    for alloc_v, enforce_v, square, fourth, out, spec, neg_post in sboxes:
        v = alloc(alloc_v, value())
        terms = [(ys[p], k) for p, k in spec]
        if not in_order:
            terms.sort(key=_canonical_key)
        v_term = (v, 1)  # tuples are immutable: one per variable serves every row that uses it
        row(enforce_v, terms, [_ONE_TERM], [v_term])
        v2 = alloc(square, value())
        v2_term = (v2, 1)
        row(square, [v_term], [v_term], [v2_term])
        v4 = alloc(fourth, value())
        v4_term = (v4, 1)
        row(fourth, [v2_term], [v2_term], [v4_term])
        y = alloc(out, value())
        row(out, [v_term], [v4_term], [(ONE, neg_post), (y, 1)] if neg_post else [(y, 1)])
        in_order = in_order and y < v4 < v2 < v < previous
        previous = y
        ys.append(y)
    alloc_v, enforce_v, spec = output
    digest = alloc(alloc_v, value())
    terms = [(ys[p], k) for p, k in spec]
    if not in_order:
        terms.sort(key=_canonical_key)
    row(enforce_v, terms, [_ONE_TERM], [(digest, 1)])
    return digest


def poseidon_hash_circuit(cs: ConstraintSystem, inputs: Sequence[Variable], constants: PoseidonConstants,
                          tag_value: int, values: Sequence[int] | None = None) -> PoseidonOutput:
    """Constrain and return Poseidon(tag_value; inputs) -- neptune's legacy `poseidon_hash`.

    `inputs` are already-allocated variables (exactly `constants.arity` of them) and `values` their
    values, needed only when `cs.needs_values` (they are never read otherwise). `tag_value` is the
    domain tag, e.g. `merkle_tree_tag(arity)` or `custom_tag(1)`. Returns the digest variable and,
    on value-computing back ends, its value (which equals `poseidon_hash`).
    """
    if len(inputs) != constants.arity:
        raise ValueError(f"Poseidon circuit of arity {constants.arity} needs exactly {constants.arity} "
                         f"inputs, got {len(inputs)}")
    if not 0 <= tag_value < R_MODULUS:
        raise ValueError(f"domain tag {tag_value:#x} is not a field element")
    template = _template(constants)
    sboxes, output = template.for_tag(tag_value)
    witness: list[int] | None = None
    if cs.needs_values:
        if values is None or len(values) != len(inputs):
            raise ValueError("values of the Poseidon inputs are required on this constraint system")
        witness = template.witness(tag_value, [int(v) % R_MODULUS for v in values])
    digest = _emit(cs, template.first, sboxes, output, inputs, witness)
    return PoseidonOutput(digest, None if witness is None else witness[-1])
