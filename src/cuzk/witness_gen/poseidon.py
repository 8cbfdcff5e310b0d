"""Poseidon witnesses for many hashes at once, without a constraint system.

`cuzk.gadgets.poseidon.poseidon_hash_circuit` allocates one aux variable per row of a hash: for
round 0's inputs q, q^2, y; for every later S-box v, v^2, v^4, y; then the digest (311 / 377 / 505
/ 598 values for arity 2 / 4 / 8 / 11). Run under `WitnessCS`, the values come from the gadget's
numba kernel (`_witness_kernel`), but every one of them still goes through a Python `alloc` call and
a row's worth of LC building, one hash after another; a 32GiB PoRep partition has ~3,000 hashes.

Here the same kernel, with the same constants (the gadget's cached `_Template`), runs over N
independent hashes in parallel (numba `prange`, all cores) and writes their values straight into
one (N, rows, 4) array of canonical limbs: row j of instance i is the value the gadget's j-th
`alloc` receives, so it can be copied into a partition's aux vector at the hash's offset. Reusing
the gadget's kernel and templates, not a copy of them, is what keeps the two bit-identical.

numba's on-disk cache of `_batch_kernel` is keyed on this file, not on the gadget's kernel it
calls: after editing `cuzk/gadgets/poseidon.py` (or `cuzk/field/_mont64.py`), delete this package's
`__pycache__/*.nbi` / `*.nbc` too, or the old kernel keeps running here.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit, prange

from cuzk.errors import SynthesisError
from cuzk.field.constants import R_MODULUS
from cuzk.field.limbs import check_canonical, int_to_limbs
from cuzk.gadgets.poseidon import _folded_constant, _template, _witness_kernel
from cuzk.hashes.poseidon_constants import PoseidonConstants

__all__ = ["HashPlan", "PoseidonWitness", "hash_plan", "poseidon_aux_count", "poseidon_witness"]


class HashPlan(NamedTuple):
    """What the witness kernel needs for one (constants, tag): no input-dependent data."""

    arity: int
    rows: int  #: aux values per hash (the gadget's allocations)
    folded: np.ndarray  #: (4,) canonical limbs: round 0's element 0, the tag folded into a constant
    kernel: tuple[np.ndarray, ...]  #: the gadget's `_KernelConstants`, as a plain tuple for numba


class PoseidonWitness(NamedTuple):
    """N hashes' allocations, in the gadget's order, and their digests."""

    aux: np.ndarray  #: (N, rows, 4) uint64 canonical limbs
    digests: np.ndarray  #: (N, 4) uint64 canonical limbs; equals aux[:, -1]


def hash_plan(constants: PoseidonConstants, tag: int) -> HashPlan:
    """The kernel's inputs for hashes with `constants` and domain tag `tag` (built once per constants
    instance by the gadget, and shared with it)."""
    if not 0 <= tag < R_MODULUS:
        raise SynthesisError(f"domain tag {tag:#x} is not a field element")
    template = _template(constants)
    return HashPlan(constants.arity, template.num_rows, int_to_limbs(_folded_constant(constants, tag)),
                    tuple(template.kernel))


def poseidon_aux_count(constants: PoseidonConstants) -> int:
    """How many aux values `poseidon_hash_circuit` allocates per hash with these constants."""
    return _template(constants).num_rows


@njit(parallel=True, cache=True)
def _batch_kernel(starts, pre0, post0, posts, partial, dense, w_hat, v_rest, out):  # type: ignore[no-untyped-def]
    """out[i] = the gadget's witness of the hash whose initial state is starts[i] (canonical)."""
    for i in prange(starts.shape[0]):
        _witness_kernel(starts[i], pre0, post0, posts, partial, dense, w_hat, v_rest, out[i])


def poseidon_witness(inputs: np.ndarray, constants: PoseidonConstants, tag: int) -> PoseidonWitness:
    """The allocations of `poseidon_hash_circuit(cs, ·, constants, tag, values)` for N hashes at once.

    `inputs` is (N, arity, 4) uint64: each hash's input values as canonical limbs, in the order the
    gadget receives them. Raises SynthesisError naming the first bad hash or value.
    """
    plan = hash_plan(constants, tag)
    if not isinstance(inputs, np.ndarray) or inputs.dtype != np.uint64:
        raise SynthesisError(f"Poseidon inputs must be a uint64 numpy array, got "
                             f"{getattr(inputs, 'dtype', type(inputs).__name__)}")
    if inputs.ndim != 3 or inputs.shape[1:] != (plan.arity, 4):
        raise SynthesisError(f"Poseidon inputs of arity {plan.arity} must have shape (N, {plan.arity}, 4), "
                             f"got {inputs.shape}")
    count = inputs.shape[0]
    if (bad := check_canonical(inputs.reshape(-1, 4))) >= 0:
        raise SynthesisError(f"Poseidon input {bad % plan.arity} of hash {bad // plan.arity} is not a canonical "
                             "field element")
    starts = np.empty((count, plan.arity + 1, 4), dtype=np.uint64)
    starts[:, 0] = plan.folded
    starts[:, 1:] = inputs
    aux = np.empty((count, plan.rows, 4), dtype=np.uint64)
    if count:
        _batch_kernel(starts, *plan.kernel, aux)
    return PoseidonWitness(aux, aux[:, -1].copy())
