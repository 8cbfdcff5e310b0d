"""The Poseidon circuit exactly as neptune 11.0.0's legacy `circuit::poseidon_hash` lays it out.

Filecoin's published parameters were generated from neptune's "Legacy" circuit, so this gadget
reproduces its allocation order, row order, operand placement (A, B, C) and every coefficient
(filecoin-proofs.md §6.5). It follows the optimized permutation of
:func:`cuzk.hashes.poseidon.permute_optimized` step by step.

State elements are either *allocated* (a variable) or *linear combinations* with a known value
(neptune's `Elt::Num`): the linear layers are free LC arithmetic, and an LC is only pinned to a new
variable ("ensure allocated", one row LC * ONE = v) when an S-box or the output needs it.

Rows, with k the compressed round constants in consumption order (§6.4):

* round 0, element 0 (the domain tag): folded to the constant ((tag + pre)^5 + post), no rows;
* round 0, input x (already allocated): q = (x+pre)^2, q2 = q^2, y = (x+pre)*q2 + post, rows
  (x + pre)(x + pre) = q, q * q = q2, (x + pre) * q2 = y - post;
* every later S-box on an LC e: v = e (row e * ONE = v), v2 = v^2, v4 = v2^2, y = v*v4 + post,
  rows v * v = v2, v2 * v2 = v4, v * v4 = y - post (no post in the terminal round);
* output: element 1 "ensure allocated".

Every row allocates exactly one new variable, so aux count = row count =
3 (t R_F + R_P - 1) + (t R_F + R_P - arity), e.g. 311 / 377 / 505 / 598 for arity 2 / 4 / 8 / 11.

Details read in neptune v11.0.0 src/circuit.rs (fact-finding, where §6.5 does not say):

* each gadget allocates its result *before* emitting its row;
* `mul_sum` puts the S-box input in A and the power in B: (x + pre) * q2, v * v4;
* constants sit in C as `res + (-post) * ONE`, in A/B as `x + pre * ONE`;
* LCs are bellpepper `LinearCombination`s, which merge repeated variables (coefficients add)
  and iterate inputs in index order, then aux in index order. We emit the same canonical form,
  dropping zero coefficients (bellpepper keeps them, but they contribute nothing to any matrix or
  density).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import NamedTuple

from cuzk.field.constants import R_MODULUS
from cuzk.hashes.poseidon_constants import Matrix, PoseidonConstants, SparseMatrix
from cuzk.r1cs.lc import LinearCombination
from cuzk.r1cs.system import ConstraintSystem
from cuzk.r1cs.variable import ONE, Variable

__all__ = ["PoseidonOutput", "poseidon_hash_circuit"]

Terms = dict[Variable, int]


class PoseidonOutput(NamedTuple):
    """The allocated digest; `value` is None on back ends that compute no values."""

    variable: Variable
    value: int | None


class _Elt:
    """One state element: an LC (variable -> coefficient, merged) and its value when known.

    `var` is set when the element *is* a single allocated variable (neptune's `Elt::Allocated`).
    """

    __slots__ = ("terms", "value", "var")

    def __init__(self, terms: Terms, value: int | None, var: Variable | None = None) -> None:
        self.terms = terms
        self.value = value
        self.var = var

    @classmethod
    def allocated(cls, var: Variable, value: int | None) -> _Elt:
        return cls({var: 1}, value, var)

    @classmethod
    def constant(cls, value: int) -> _Elt:
        return cls({ONE: value % R_MODULUS}, value % R_MODULUS)


def _sort_key(var: Variable) -> tuple[bool, int]:
    """bellpepper's iteration order: inputs by index, then aux by index."""
    return (var < 0, var if var >= 0 else ~var)


def _lc(terms: Terms) -> LinearCombination:
    return LinearCombination((var, terms[var]) for var in sorted(terms, key=_sort_key) if terms[var])


def _plus_constant(var: Variable, constant: int) -> LinearCombination:
    """`var + constant * ONE` in canonical order."""
    terms: Terms = {ONE: constant % R_MODULUS}
    terms[var] = (terms.get(var, 0) + 1) % R_MODULUS
    return _lc(terms)


def _linear_combination(elements: Sequence[_Elt], scalars: Sequence[int], with_values: bool) -> _Elt:
    """sum_i scalars[i] * elements[i] as a new (unallocated) element, neptune's `scalar_product`."""
    terms: Terms = {}
    for elt, scalar in zip(elements, scalars, strict=True):
        for var, coeff in elt.terms.items():
            terms[var] = (terms.get(var, 0) + coeff * scalar) % R_MODULUS
    value = None
    if with_values:
        value = sum(e.value * s for e, s in zip(elements, scalars, strict=True)) % R_MODULUS
    return _Elt(terms, value)


def _mix(state: list[_Elt], matrix: Matrix | SparseMatrix, with_values: bool) -> list[_Elt]:
    """The linear layer as free LC arithmetic: state times matrix (dense or sparse M'')."""
    if isinstance(matrix, SparseMatrix):
        head = _linear_combination(state, matrix.w_hat, with_values)
        return [head, *(_linear_combination([elt, state[0]], [1, v], with_values)
                        for elt, v in zip(state[1:], matrix.v_rest, strict=True))]
    columns = tuple(zip(*matrix, strict=True))
    return [_linear_combination(state, column, with_values) for column in columns]


class _PoseidonCircuit:
    """Synthesis state: the elements, the next compressed constant, the round counter."""

    def __init__(self, cs: ConstraintSystem, constants: PoseidonConstants, state: list[_Elt]) -> None:
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
    def ensure_allocated(self, elt: _Elt, annotation: str) -> tuple[Variable, int | None]:
        """An element as a variable: itself if allocated, else v with the row LC * ONE = v."""
        if elt.var is not None:
            return elt.var, elt.value
        v = self.cs.alloc(annotation, elt.value)
        self.cs.enforce(f"{annotation} preserves lc", _lc(elt.terms), LinearCombination.of(ONE),
                        LinearCombination.of(v))
        return v, elt.value

    def _square(self, x: Variable, value: int | None, annotation: str) -> tuple[Variable, int | None]:
        sq_value = self._val(lambda: value * value)
        sq = self.cs.alloc(annotation, sq_value)
        self.cs.enforce(annotation, LinearCombination.of(x), LinearCombination.of(x),
                        LinearCombination.of(sq))
        return sq, sq_value

    def _mul_post_add(self, x_lc: LinearCombination, x_value: int | None, power: Variable,
                      power_value: int | None, post: int | None, annotation: str) -> _Elt:
        """y = x * power + post with the row x * power = y - post (neptune `mul_sum`)."""
        y_value = self._val(lambda: x_value * power_value + (post or 0))
        y = self.cs.alloc(annotation, y_value)
        c = _lc({ONE: -post % R_MODULUS, y: 1}) if post is not None else LinearCombination.of(y)
        self.cs.enforce(annotation, x_lc, LinearCombination.of(power), c)
        return _Elt.allocated(y, y_value)

    def first_sbox(self, elt: _Elt, pre: int, post: int) -> _Elt:
        """Round 0 on an allocated input: (x + pre)^5 + post in three rows."""
        x, x_value = self.ensure_allocated(elt, "S-box input")
        shifted = _plus_constant(x, pre)
        shifted_value = self._val(lambda: x_value + pre)
        q_value = self._val(lambda: shifted_value * shifted_value)
        q = self.cs.alloc("(l+rk)^2", q_value)
        self.cs.enforce("(l+rk)^2", shifted, shifted, LinearCombination.of(q))
        q2, q2_value = self._square(q, q_value, "l^4")
        return self._mul_post_add(shifted, shifted_value, q2, q2_value, post, "l4 * (l + rk)")

    def sbox(self, elt: _Elt, post: int | None) -> _Elt:
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
        self.state = _mix(self.state, matrix, self.with_values)
        self.round += 1

    def first_round(self) -> None:
        t = self.constants.width
        pre, post = self._take(t), self._take(t)
        tag = self.state[0].terms[ONE]
        folded = (pow((tag + pre[0]) % R_MODULUS, 5, R_MODULUS) + post[0]) % R_MODULUS
        new_state = [_Elt.constant(folded)]
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
    if cs.needs_values:
        if values is None or len(values) != len(inputs):
            raise ValueError("values of the Poseidon inputs are required on this constraint system")
        input_values: Sequence[int | None] = [v % R_MODULUS for v in values]
    else:
        input_values = [None] * len(inputs)
    state = [_Elt.constant(tag_value), *(_Elt.allocated(var, value)
                                         for var, value in zip(inputs, input_values, strict=True))]
    return _PoseidonCircuit(cs, constants, state).hash()
