"""The Poseidon gadget emits neptune's legacy circuit row for row (docs/circuits.md §8).

Besides hand-derived rows and counts, every recorded circuit is compared term by term (CSR arrays,
witness, annotation paths) with `_reference_poseidon_hash_circuit`: a frozen copy of the first,
straightforward implementation of the gadget (dict-merged linear combinations, values computed
element by element). The optimised gadget replays precomputed row templates, so this comparison is
what shows that the rewrite left the R1CS bit-identical.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence

import numpy as np
import pytest

from cuzk.field.constants import R_MODULUS
from cuzk.field.limbs import limbs_to_ints
from cuzk.gadgets.poseidon import PoseidonOutput, poseidon_hash_circuit
from cuzk.hashes.poseidon import hash_custom_gr, poseidon_hash
from cuzk.hashes.poseidon_constants import (
    Matrix,
    PoseidonConstants,
    SparseMatrix,
    custom_tag,
    merkle_tree_tag,
    poseidon_constants,
)
from cuzk.r1cs import ONE, ConstraintSystem, LinearCombination, ProvingAssignment, RecordingCS, ShapeCS, Variable
from cuzk.r1cs.system import Annotation, Value

# (arity, strength) -> rows; neptune circuit.rs test_poseidon_hash (docs/circuits.md §8).
ROW_COUNTS = {
    (2, "standard"): 311,
    (4, "standard"): 377,
    (8, "standard"): 505,
    (11, "standard"): 598,
    (16, "standard"): 761,
    (24, "standard"): 1009,
    (36, "standard"): 1385,
    (2, "strengthened"): 367,
    (4, "strengthened"): 433,
    (8, "strengthened"): 565,
}


def _raise() -> int:
    raise AssertionError("a structure-only back end evaluated a witness value")


def _blank_shape(arity: int, strength: str = "standard") -> ShapeCS:
    cs = ShapeCS()
    cs.alloc_input("ONE", _raise)
    inputs = [cs.alloc(f"x{i}", _raise) for i in range(arity)]
    poseidon_hash_circuit(cs, inputs, poseidon_constants(arity, strength), merkle_tree_tag(arity))
    return cs


@pytest.mark.parametrize(("arity", "strength"), sorted(ROW_COUNTS))
def test_row_and_aux_counts(arity: int, strength: str) -> None:
    """Rows = neptune's formula; every row allocates one aux, so aux = rows (plus the inputs)."""
    c = poseidon_constants(arity, strength)
    sboxes = c.width * c.full_rounds + c.partial_rounds
    rows = ROW_COUNTS[arity, strength]
    assert rows == 3 * (sboxes - 1) + (sboxes - arity)
    shape = _blank_shape(arity, strength).shape()
    assert shape.num_constraints == rows
    assert shape.num_aux - arity == rows
    assert shape.num_inputs == 1
    # A holds each input x, q = (x+pre)^2, round-0 y and each later S-box's v, v^2, y; B holds x, q,
    # q^2 and each later v, v^2, v^4; ONE is in both. (Only the digest is in neither.)
    later_sboxes = sboxes - c.width
    assert shape.a_aux_density == shape.b_aux_density == 3 * (arity + later_sboxes)
    assert shape.a_input_density == shape.b_input_density == 1


AUX_PER_ARITY = {2: 311, 4: 377, 8: 505, 11: 598}


def test_aux_allocations_per_arity() -> None:
    for arity, aux in AUX_PER_ARITY.items():
        assert _blank_shape(arity).num_aux - arity == aux


def _prove(arity: int, tag: int, values: list[int]) -> tuple[ProvingAssignment, int | None, Variable]:
    cs = ProvingAssignment(check=True)
    cs.alloc_input("ONE", 1)
    inputs = [cs.alloc(f"x{i}", v) for i, v in enumerate(values)]
    out = poseidon_hash_circuit(cs, inputs, poseidon_constants(arity), tag, values)
    return cs, out.value, out.variable


@pytest.mark.parametrize("arity", [2, 4, 8, 11])
def test_satisfied_and_equal_to_native_hash(arity: int) -> None:
    rng = random.Random(arity)
    for _ in range(2):
        values = [rng.randrange(R_MODULUS) for _ in range(arity)]
        cs, value, variable = _prove(arity, merkle_tree_tag(arity), values)
        expected = poseidon_hash(values)
        assert value == expected
        assert cs.aux_assignment[variable.index] == expected
        assert not variable.is_input and variable.index == cs.num_aux - 1  # the last allocation


def test_custom_tag_matches_snapdeals_hash() -> None:
    rng = random.Random(7)
    a, b = rng.randrange(R_MODULUS), rng.randrange(R_MODULUS)
    cs, value, _ = _prove(2, custom_tag(1), [a, b])
    assert value == hash_custom_gr(a, b)
    assert cs.num_constraints == 311


def test_inputs_may_be_public_inputs() -> None:
    cs = ProvingAssignment(check=True)
    cs.alloc_input("ONE", 1)
    inputs = [cs.alloc_input("x0", 5), cs.alloc("x1", 6)]
    out = poseidon_hash_circuit(cs, inputs, poseidon_constants(2), 3, [5, 6])
    assert out.value == poseidon_hash([5, 6])


def test_missing_values_are_reported() -> None:
    cs = ProvingAssignment()
    cs.alloc_input("ONE", 1)
    inputs = [cs.alloc("x0", 1), cs.alloc("x1", 2)]
    with pytest.raises(ValueError, match="values"):
        poseidon_hash_circuit(cs, inputs, poseidon_constants(2), 3)
    with pytest.raises(ValueError, match="exactly 2 inputs"):
        poseidon_hash_circuit(cs, inputs[:1], poseidon_constants(2), 3, [1])


def test_blank_recording_never_evaluates_values() -> None:
    cs = RecordingCS()
    cs.alloc_input("ONE", _raise)
    inputs = [cs.alloc(f"x{i}", _raise) for i in range(8)]
    out = poseidon_hash_circuit(cs, inputs, poseidon_constants(8), merkle_tree_tag(8))
    assert out.value is None and cs.num_constraints == 505


def _record(arity: int, tag: int) -> object:
    cs = RecordingCS()
    cs.alloc_input("ONE", 1)
    inputs = [cs.alloc(f"x{i}") for i in range(arity)]
    poseidon_hash_circuit(cs, inputs, poseidon_constants(arity), tag)
    return cs.matrices()


@pytest.mark.parametrize("arity", [2, 11])
def test_recording_is_deterministic(arity: int) -> None:
    first, second = _record(arity, merkle_tree_tag(arity)), _record(arity, merkle_tree_tag(arity))
    for name in ("a", "b", "c"):
        m1, m2 = getattr(first, name), getattr(second, name)
        assert np.array_equal(m1.row_ptr, m2.row_ptr)
        assert np.array_equal(m1.cols, m2.cols)
        assert np.array_equal(m1.coeffs, m2.coeffs)
        # bellpepper's canonical LC: one term per variable, inputs then aux, each by index.
        for row in range(m1.num_rows):
            cols = m1.cols[m1.row_ptr[row]:m1.row_ptr[row + 1]]
            assert np.all(np.diff(cols) > 0)
    assert (first.num_inputs, first.num_aux) == (1, arity + (311 if arity == 2 else 598))


def _row(matrices: object, name: str, row: int) -> dict[int, int]:
    """Row `row` of matrix `name` as {column: coefficient}; column = input i or 1 + aux j."""
    m = getattr(matrices, name)
    lo, hi = m.row_ptr[row], m.row_ptr[row + 1]
    return dict(zip(m.cols[lo:hi].tolist(), limbs_to_ints(m.coeffs[lo:hi]), strict=True))


def test_rows_follow_section_6_5_literally() -> None:
    """Arity 2, derived by hand from docs/circuits.md §8 (columns: 0 = ONE, 1, 2 = inputs x1, x2, 3.. = gadget aux)."""
    c = poseidon_constants(2)
    crc, m, t = c.compressed_round_constants, c.mds, c.width
    rec = _record(2, 3)
    x1, q, q2, y1 = 1, 3, 4, 5
    # Round 0, input 1: (x + pre)^2 = q; q * q = q2; (x + pre) * q2 = y - post.
    shifted = {0: crc[1], x1: 1}
    assert (_row(rec, "a", 0), _row(rec, "b", 0), _row(rec, "c", 0)) == (shifted, shifted, {q: 1})
    assert (_row(rec, "a", 1), _row(rec, "b", 1), _row(rec, "c", 1)) == ({q: 1}, {q: 1}, {q2: 1})
    post = (-crc[t + 1]) % R_MODULUS
    assert (_row(rec, "a", 2), _row(rec, "b", 2), _row(rec, "c", 2)) == (shifted, {q2: 1}, {0: post, y1: 1})
    # Round 1, element 0 "ensure allocated": (M column 0 applied to [tag S-box constant, y1, y2]) * ONE = v.
    y2, v = 8, 9
    folded = (pow(3 + crc[0], 5, R_MODULUS) + crc[t]) % R_MODULUS
    ensure = {0: folded * m[0][0] % R_MODULUS, y1: m[1][0], y2: m[2][0]}
    assert (_row(rec, "a", 6), _row(rec, "b", 6), _row(rec, "c", 6)) == (ensure, {0: 1}, {v: 1})
    # Then v * v = v2, v2 * v2 = v4, v * v4 = y - post with post = crc[2t].
    v2, v4, y = 10, 11, 12
    assert (_row(rec, "a", 7), _row(rec, "b", 7), _row(rec, "c", 7)) == ({v: 1}, {v: 1}, {v2: 1})
    assert (_row(rec, "a", 8), _row(rec, "b", 8), _row(rec, "c", 8)) == ({v2: 1}, {v2: 1}, {v4: 1})
    post = (-crc[2 * t]) % R_MODULUS
    assert (_row(rec, "a", 9), _row(rec, "b", 9), _row(rec, "c", 9)) == ({v: 1}, {v4: 1}, {0: post, y: 1})
    # Terminal round: no key in C; output = (M column 1 applied to the terminal y's) * ONE = out.
    last = rec.num_constraints - 1
    out = rec.num_inputs + rec.num_aux - 1
    terminal_ys = [out - 1 - 4 * (t - 1 - i) for i in range(t)]
    assert _row(rec, "c", last - 1) == {terminal_ys[-1]: 1}
    assert _row(rec, "a", last) == {y: m[i][1] for i, y in enumerate(terminal_ys)}
    assert (_row(rec, "b", last), _row(rec, "c", last)) == ({0: 1}, {out: 1})


# -- bit-identity against the frozen reference implementation -----------------------------------------
#
# Everything from here to `_reference_poseidon_hash_circuit` is the gadget as first written (commit
# 9ffc044), identifiers prefixed with _ref/_Ref and nothing else changed. Do not "fix" or speed it up:
# it is the oracle the optimised gadget is compared with.

_RefTerms = dict[Variable, int]


class _RefElt:
    """One state element: an LC (variable -> coefficient, merged) and its value when known.

    `var` is set when the element *is* a single allocated variable (neptune's `Elt::Allocated`).
    """

    __slots__ = ("terms", "value", "var")

    def __init__(self, terms: _RefTerms, value: int | None, var: Variable | None = None) -> None:
        self.terms = terms
        self.value = value
        self.var = var

    @classmethod
    def allocated(cls, var: Variable, value: int | None) -> _RefElt:
        return cls({var: 1}, value, var)

    @classmethod
    def constant(cls, value: int) -> _RefElt:
        return cls({ONE: value % R_MODULUS}, value % R_MODULUS)


def _ref_sort_key(var: Variable) -> tuple[bool, int]:
    """bellpepper's iteration order: inputs by index, then aux by index."""
    return (var < 0, var if var >= 0 else ~var)


def _ref_lc(terms: _RefTerms) -> LinearCombination:
    return LinearCombination((var, terms[var]) for var in sorted(terms, key=_ref_sort_key) if terms[var])


def _ref_plus_constant(var: Variable, constant: int) -> LinearCombination:
    """`var + constant * ONE` in canonical order."""
    terms: _RefTerms = {ONE: constant % R_MODULUS}
    terms[var] = (terms.get(var, 0) + 1) % R_MODULUS
    return _ref_lc(terms)


def _ref_linear_combination(elements: Sequence[_RefElt], scalars: Sequence[int], with_values: bool) -> _RefElt:
    """sum_i scalars[i] * elements[i] as a new (unallocated) element, neptune's `scalar_product`."""
    terms: _RefTerms = {}
    for elt, scalar in zip(elements, scalars, strict=True):
        for var, coeff in elt.terms.items():
            terms[var] = (terms.get(var, 0) + coeff * scalar) % R_MODULUS
    value = None
    if with_values:
        value = sum(e.value * s for e, s in zip(elements, scalars, strict=True)) % R_MODULUS
    return _RefElt(terms, value)


def _ref_mix(state: list[_RefElt], matrix: Matrix | SparseMatrix, with_values: bool) -> list[_RefElt]:
    """The linear layer as free LC arithmetic: state times matrix (dense or sparse M'')."""
    if isinstance(matrix, SparseMatrix):
        head = _ref_linear_combination(state, matrix.w_hat, with_values)
        return [head, *(_ref_linear_combination([elt, state[0]], [1, v], with_values)
                            for elt, v in zip(state[1:], matrix.v_rest, strict=True))]
    columns = tuple(zip(*matrix, strict=True))
    return [_ref_linear_combination(state, column, with_values) for column in columns]


class _RefPoseidonCircuit:
    """Synthesis state: the elements, the next compressed constant, the round counter."""

    def __init__(self, cs: ConstraintSystem, constants: PoseidonConstants, state: list[_RefElt]) -> None:
        self.cs = cs
        self.constants = constants
        self.state = state
        self.with_values = cs.needs_values
        self.offset = 0
        self.round = 0

    # -- value helpers: never evaluated on structure-only back ends ------------------------------
    def _val(self, compute: Callable[[], int]) -> int | None:
        """compute() mod r, or None without evaluating it on structure-only back ends."""
        return compute() % R_MODULUS if self.with_values else None

    def _take(self, count: int) -> tuple[int, ...]:
        keys = self.constants.compressed_round_constants[self.offset:self.offset + count]
        self.offset += count
        return keys

    # -- rows ----------------------------------------------------------------------------------
    def ensure_allocated(self, elt: _RefElt, annotation: str) -> tuple[Variable, int | None]:
        """An element as a variable: itself if allocated, else v with the row LC * ONE = v."""
        if elt.var is not None:
            return elt.var, elt.value
        v = self.cs.alloc(annotation, elt.value)
        self.cs.enforce(f"{annotation} preserves lc", _ref_lc(elt.terms), LinearCombination.of(ONE),
                        LinearCombination.of(v))
        return v, elt.value

    def _square(self, x: Variable, value: int | None, annotation: str) -> tuple[Variable, int | None]:
        sq_value = self._val(lambda: value * value)
        sq = self.cs.alloc(annotation, sq_value)
        self.cs.enforce(annotation, LinearCombination.of(x), LinearCombination.of(x),
                        LinearCombination.of(sq))
        return sq, sq_value

    def _mul_post_add(self, x_lc: LinearCombination, x_value: int | None, power: Variable,
                      power_value: int | None, post: int | None, annotation: str) -> _RefElt:
        """y = x * power + post with the row x * power = y - post (neptune `mul_sum`)."""
        y_value = self._val(lambda: x_value * power_value + (post or 0))
        y = self.cs.alloc(annotation, y_value)
        c = _ref_lc({ONE: -post % R_MODULUS, y: 1}) if post is not None else LinearCombination.of(y)
        self.cs.enforce(annotation, x_lc, LinearCombination.of(power), c)
        return _RefElt.allocated(y, y_value)

    def first_sbox(self, elt: _RefElt, pre: int, post: int) -> _RefElt:
        """Round 0 on an allocated input: (x + pre)^5 + post in three rows."""
        x, x_value = self.ensure_allocated(elt, "S-box input")
        shifted = _ref_plus_constant(x, pre)
        shifted_value = self._val(lambda: x_value + pre)
        q_value = self._val(lambda: shifted_value * shifted_value)
        q = self.cs.alloc("(l+rk)^2", q_value)
        self.cs.enforce("(l+rk)^2", shifted, shifted, LinearCombination.of(q))
        q2, q2_value = self._square(q, q_value, "l^4")
        return self._mul_post_add(shifted, shifted_value, q2, q2_value, post, "l4 * (l + rk)")

    def sbox(self, elt: _RefElt, post: int | None) -> _RefElt:
        """A later S-box: v^5 + post in four rows (three if elt is already allocated)."""
        v, v_value = self.ensure_allocated(elt, "S-box input")
        v2, v2_value = self._square(v, v_value, "l^2")
        v4, v4_value = self._square(v2, v2_value, "l^4")
        return self._mul_post_add(LinearCombination.of(v), v_value, v4, v4_value, post, "(l4 * l) + rk")

    # -- rounds ----------------------------------------------------------------------------------
    def mix(self) -> None:
        c = self.constants
        half = c.half_full_rounds
        if self.round == half - 1:
            matrix: Matrix | SparseMatrix = c.pre_sparse_matrix
        elif half <= self.round < half + c.partial_rounds:
            matrix = c.sparse_matrices[self.round - half]
        else:
            matrix = c.mds
        self.state = _ref_mix(self.state, matrix, self.with_values)
        self.round += 1

    def first_round(self) -> None:
        t = self.constants.width
        pre, post = self._take(t), self._take(t)
        tag = self.state[0].terms[ONE]
        folded = (pow((tag + pre[0]) % R_MODULUS, 5, R_MODULUS) + post[0]) % R_MODULUS
        new_state = [_RefElt.constant(folded)]
        for i in range(1, t):
            with self.cs.namespace(f"quintic s-box {i}"):
                new_state.append(self.first_sbox(self.state[i], pre[i], post[i]))
        self.state = new_state
        self.mix()

    def full_round(self, terminal: bool) -> None:
        posts: Sequence[int | None] = [None] * self.constants.width if terminal \
            else self._take(self.constants.width)
        new_state = []
        for i, (elt, post) in enumerate(zip(self.state, posts, strict=True)):
            with self.cs.namespace(f"quintic s-box {i}"):
                new_state.append(self.sbox(elt, post))
        self.state = new_state
        self.mix()

    def partial_round(self) -> None:
        (post,) = self._take(1)
        with self.cs.namespace("solitary quintic s-box"):
            self.state[0] = self.sbox(self.state[0], post)
        self.mix()

    def hash(self) -> PoseidonOutput:
        c = self.constants
        with self.cs.namespace("first round"):
            self.first_round()
        for i in range(1, c.half_full_rounds):
            with self.cs.namespace(f"initial full round {i}"):
                self.full_round(terminal=False)
        for i in range(c.partial_rounds):
            with self.cs.namespace(f"partial round {i}"):
                self.partial_round()
        for i in range(c.half_full_rounds - 1):
            with self.cs.namespace(f"final full round {i}"):
                self.full_round(terminal=False)
        with self.cs.namespace("terminal full round"):
            self.full_round(terminal=True)
        assert self.offset == len(c.compressed_round_constants)
        with self.cs.namespace("hash result"):
            return PoseidonOutput(*self.ensure_allocated(self.state[1], "allocate for Elt::Num"))


def _reference_poseidon_hash_circuit(cs: ConstraintSystem, inputs: Sequence[Variable],
                                     constants: PoseidonConstants, tag_value: int,
                                     values: Sequence[int] | None = None) -> PoseidonOutput:
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
    if cs.needs_values:
        if values is None or len(values) != len(inputs):
            raise ValueError("values of the Poseidon inputs are required on this constraint system")
        input_values: Sequence[int | None] = [v % R_MODULUS for v in values]
    else:
        input_values = [None] * len(inputs)
    state = [_RefElt.constant(tag_value), *(_RefElt.allocated(var, value)
                                            for var, value in zip(inputs, input_values, strict=True))]
    return _RefPoseidonCircuit(cs, constants, state).hash()


HashFn = Callable[..., PoseidonOutput]

# (arity, strength, tag): the instances Filecoin uses, plus strengthened and SnapDeals' Custom(1).
SNAPSHOT_CASES = [
    (2, "standard", merkle_tree_tag(2)),
    (4, "standard", merkle_tree_tag(4)),
    (8, "standard", merkle_tree_tag(8)),
    (11, "standard", merkle_tree_tag(11)),
    (2, "strengthened", merkle_tree_tag(2)),
    (2, "standard", custom_tag(1)),
]


class _TranscriptCS(RecordingCS):
    """A RecordingCS that also keeps a transcript of every call, as the gadget made it.

    Each allocation is ("alloc", full annotation path, value) and each row ("enforce", path, A, B, C)
    with the LCs' raw terms (variable, coefficient) in emission order, zero coefficients included:
    the CSR matrices drop zero terms, the transcript does not, and it also covers the annotations,
    which never change the R1CS but name failing rows.
    """

    def __init__(self, *, with_values: bool) -> None:
        super().__init__(with_values=with_values)
        self.transcript: list[tuple[object, ...]] = []

    def alloc(self, annotation: Annotation, value: Value = None) -> Variable:
        self.transcript.append(("alloc", self.path_of(annotation), value))
        return super().alloc(annotation, value)

    def enforce(self, annotation: Annotation, a: LinearCombination, b: LinearCombination,
                c: LinearCombination) -> None:
        self.transcript.append(("enforce", self.path_of(annotation),
                                *([(int(v), k) for v, k in lc.terms] for lc in (a, b, c))))
        super().enforce(annotation, a, b, c)


def _record_two_hashes(hash_fn: HashFn, arity: int, strength: str, tag: int, *, with_values: bool,
                       seed: int = 0) -> tuple[_TranscriptCS, list[PoseidonOutput]]:
    """Two chained hashes in a circuit that already has public inputs and unrelated aux variables.

    The inputs are passed out of index order and the second hash takes the first digest as an
    input, so variable numbering, term order and the aux offset of a second hash are all exercised;
    the second hash runs inside a caller's namespace.
    """
    rng = random.Random(seed)
    cs = _TranscriptCS(with_values=with_values)
    cs.alloc_input("ONE", 1)
    cs.alloc_input("public", rng.randrange(R_MODULUS))
    for i in range(3):
        cs.alloc(f"unrelated {i}", rng.randrange(R_MODULUS))
    values = [rng.randrange(R_MODULUS) for _ in range(arity)]
    inputs = [cs.alloc(f"x{i}", v) for i, v in enumerate(values)]
    order = list(range(arity))
    rng.shuffle(order)
    inputs, values = [inputs[i] for i in order], [values[i] for i in order]
    constants = poseidon_constants(arity, strength)
    first = hash_fn(cs, inputs, constants, tag, values if with_values else None)
    inputs[-1] = first.variable
    if with_values:
        assert first.value == poseidon_hash(values, tag=tag, strength=strength)
        values[-1] = first.value
    with cs.namespace("caller"):
        second = hash_fn(cs, inputs, constants, tag, values if with_values else None)
    return cs, [first, second]


def _assert_same_recording(new: _TranscriptCS, ref: _TranscriptCS) -> None:
    """Identical CSR arrays (row_ptr, cols, coeffs) for A, B, C, witnesses and transcripts."""
    m_new, m_ref = new.matrices(), ref.matrices()
    assert (m_new.num_inputs, m_new.num_aux) == (m_ref.num_inputs, m_ref.num_aux)
    for name in ("a", "b", "c"):
        x, y = getattr(m_new, name), getattr(m_ref, name)
        assert x.num_cols == y.num_cols
        assert np.array_equal(x.row_ptr, y.row_ptr), name
        assert np.array_equal(x.cols, y.cols), name
        assert np.array_equal(x.coeffs, y.coeffs), name
    if m_ref.assignment is None:
        assert m_new.assignment is None
    else:
        assert m_new.assignment is not None
        assert np.array_equal(m_new.assignment, m_ref.assignment)
    assert len(new.transcript) == len(ref.transcript)
    for i, (got, want) in enumerate(zip(new.transcript, ref.transcript, strict=True)):
        assert got == want, f"call {i} differs"


@pytest.mark.parametrize(("arity", "strength", "tag"), SNAPSHOT_CASES)
def test_recording_with_values_matches_frozen_reference(arity: int, strength: str, tag: int) -> None:
    new, new_out = _record_two_hashes(poseidon_hash_circuit, arity, strength, tag, with_values=True)
    ref, ref_out = _record_two_hashes(_reference_poseidon_hash_circuit, arity, strength, tag, with_values=True)
    _assert_same_recording(new, ref)
    assert new_out == ref_out


@pytest.mark.parametrize("with_values", [False, True])
@pytest.mark.parametrize(("arity", "strength"), [(1, "standard"), (8, "strengthened"), (16, "standard"),
                                                 (36, "standard")])
def test_other_instances_match_frozen_reference(arity: int, strength: str, with_values: bool) -> None:
    """The narrowest and widest instances neptune has, strengthened, with and without values."""
    tag = merkle_tree_tag(arity)
    new, new_out = _record_two_hashes(poseidon_hash_circuit, arity, strength, tag, with_values=with_values)
    ref, ref_out = _record_two_hashes(_reference_poseidon_hash_circuit, arity, strength, tag, with_values=with_values)
    _assert_same_recording(new, ref)
    assert new_out == ref_out
    assert (new_out[0].value is None) == (not with_values)


def _folded_zero_tag(constants: PoseidonConstants) -> int:
    """The tag whose round-0 constant (tag + pre)^5 + post is 0, so ONE drops out of round-1 rows.

    x -> x^5 is a bijection of Fr (gcd(5, r - 1) = 1), so the fifth root is unique.
    """
    crc, t = constants.compressed_round_constants, constants.width
    root = pow(-crc[t] % R_MODULUS, pow(5, -1, R_MODULUS - 1), R_MODULUS)
    tag = (root - crc[0]) % R_MODULUS
    assert (pow(tag + crc[0], 5, R_MODULUS) + crc[t]) % R_MODULUS == 0
    return tag


@pytest.mark.parametrize("case", ["one_as_input", "repeated_input", "public_inputs", "zero_tag",
                                  "folded_zero"])
def test_edge_cases_match_frozen_reference(case: str) -> None:
    """Inputs that merge with ONE, repeat, or are public; tags that vanish or make ONE vanish."""
    constants = poseidon_constants(2)
    tag = {"zero_tag": 0, "folded_zero": _folded_zero_tag(constants)}.get(case, merkle_tree_tag(2))
    recordings = []
    for hash_fn in (poseidon_hash_circuit, _reference_poseidon_hash_circuit):
        cs = _TranscriptCS(with_values=True)
        one = cs.alloc_input("ONE", 1)
        if case == "one_as_input":
            inputs, values = [one, cs.alloc("x", 9)], [1, 9]
        elif case == "repeated_input":
            x = cs.alloc("x", 9)
            inputs, values = [x, x], [9, 9]
        elif case == "public_inputs":
            inputs, values = [cs.alloc_input("p1", 5), cs.alloc_input("p2", 6)], [5, 6]
        else:
            inputs, values = [cs.alloc("x0", 5), cs.alloc("x1", 6)], [5, 6]
        out = hash_fn(cs, inputs, constants, tag, values)
        assert out.value == poseidon_hash(values, tag=tag)
        recordings.append(cs)
    _assert_same_recording(*recordings)


def test_annotation_paths_are_neptunes_namespaces() -> None:
    """The transcript comparison covers every path; spot-check that they are the nested namespaces."""
    cs, _ = _record_two_hashes(poseidon_hash_circuit, 4, "standard", merkle_tree_tag(4), with_values=False)
    paths = {entry[1] for entry in cs.transcript}
    assert "first round/quintic s-box 1/(l+rk)^2" in paths
    assert "caller/partial round 3/solitary quintic s-box/S-box input preserves lc" in paths
    assert "caller/terminal full round/quintic s-box 4/(l4 * l) + rk" in paths
    assert "caller/hash result/allocate for Elt::Num" in paths


class _ScatteredAuxCS(ConstraintSystem):
    """Hands out aux variables in a scrambled (non-increasing) order and keeps rows as term lists.

    Every real back end numbers aux variables consecutively, which the gadget's templates exploit;
    this one does not, to check that the canonical term order (inputs, then aux by index) survives.
    """

    needs_values = False

    def __init__(self) -> None:
        super().__init__()
        self._count = 0
        self.rows: list[tuple[list[tuple[int, int]], ...]] = []

    def alloc(self, annotation: Annotation, value: Value = None) -> Variable:
        self._count += 1
        return Variable.aux((self._count * 7919) % 10007)  # a permutation of 1..10006

    def alloc_input(self, annotation: Annotation, value: Value = None) -> Variable:
        return ONE

    def enforce(self, annotation: Annotation, a: LinearCombination, b: LinearCombination,
                c: LinearCombination) -> None:
        self.rows.append(tuple([(int(v), k) for v, k in lc.terms] for lc in (a, b, c)))


def test_scattered_aux_numbering_matches_frozen_reference() -> None:
    rows = []
    for hash_fn in (poseidon_hash_circuit, _reference_poseidon_hash_circuit):
        cs = _ScatteredAuxCS()
        cs.alloc_input("ONE")
        inputs = [cs.alloc(f"x{i}") for i in range(8)]
        hash_fn(cs, inputs, poseidon_constants(8), merkle_tree_tag(8))
        rows.append(cs.rows)
    assert rows[0] == rows[1]
