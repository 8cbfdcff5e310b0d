"""The value rules every batched generator applies (`cuzk.witness_gen.values`, and `path_arrays` on
top of them): integers reduced mod r as WitnessCS reduces them, a missing or non-integer value
named, a path's layout checked."""

from __future__ import annotations

import numpy as np
import pytest

from cuzk.errors import SynthesisError
from cuzk.field.constants import R_MODULUS
from cuzk.field.limbs import limbs_to_ints
from cuzk.gadgets.por import NativeTree, PathLevel, TreeShape
from cuzk.witness_gen.merkle import path_arrays
from cuzk.witness_gen.values import field_limbs, required_value, required_values


def test_values_are_reduced_mod_r_and_numpy_integers_accepted() -> None:
    assert required_value(R_MODULUS + 5, "x") == 5
    assert required_value(np.int64(7), "x") == 7
    assert required_values([3, R_MODULUS, np.uint32(2)], str) == [3, 0, 2]
    assert limbs_to_ints(field_limbs([R_MODULUS + 1, 9], "v")) == [1, 9]
    assert field_limbs([], "v").shape == (0, 4)


def test_missing_and_non_integer_values_are_named() -> None:
    with pytest.raises(SynthesisError, match=r"^comm_c has no value \(a blank circuit has no witness\)$"):
        required_value(None, "comm_c")
    with pytest.raises(SynthesisError, match="comm_c must be an integer, got float"):
        required_value(1.5, "comm_c")
    with pytest.raises(SynthesisError, match=r"leaves\[2\] has no value"):
        field_limbs([1, 2, None, None], "leaves")
    with pytest.raises(SynthesisError, match=r"leaves\[1\] must be an integer, got str"):
        field_limbs([1, "2", None], "leaves")


def test_path_arrays_positions_siblings_and_reduction() -> None:
    """Index = Σ position · (product of the lower arities); siblings level by level, reduced."""
    shape = TreeShape(128, 8, 8, 2)
    path = [PathLevel([10 + j for j in range(7)], 5), PathLevel([R_MODULUS + 20 + j for j in range(7)], 3),
            PathLevel([30], 1)]
    indices, siblings = path_arrays(shape, [path, path])
    assert indices.tolist() == [5 + 3 * 8 + 1 * 64] * 2
    assert siblings.shape == (2, 15, 4)
    assert limbs_to_ints(siblings[1]) == [*range(10, 17), *range(20, 27), 30]
    tree = NativeTree(shape, list(range(128)))
    assert path_arrays(shape, [tree.path(i) for i in (0, 77, 127)])[0].tolist() == [0, 77, 127]
    # Canonical paths take one flat pass; a value to reduce sends the batch through the level-by-level
    # walk: both give the same arrays.
    canonical = [PathLevel([10 + j for j in range(7)], 5), PathLevel([20 + j for j in range(7)], 3), PathLevel([30], 1)]
    flat, walked = path_arrays(shape, [canonical]), path_arrays(shape, [canonical, path])
    assert np.array_equal(flat[0], walked[0][:1]) and np.array_equal(flat[1], walked[1][:1])


def test_path_arrays_names_the_bad_path_level_and_value() -> None:
    shape = TreeShape(64, 8)
    good = [PathLevel([1] * 7, 2), PathLevel([2] * 7, 4)]
    name = "sector {} path".format
    with pytest.raises(SynthesisError, match=r"^path 0: level 0's position has no value \(a blank circuit"):
        path_arrays(shape, [shape.blank_path()])
    with pytest.raises(SynthesisError, match="sector 1 path: level 1 sibling 6 has no value"):
        path_arrays(shape, [good, [good[0], PathLevel([2] * 6 + [None], 4)]], name)
    with pytest.raises(SynthesisError, match="sector 0 path: level 0 sibling 3 must be an integer, got float"):
        path_arrays(shape, [[PathLevel([1, 1, 1, 1.0, 1, 1, 1], 0), good[1]]], name)
    with pytest.raises(SynthesisError, match="sector 1 path: level 1 needs 7 siblings, got 6"):
        path_arrays(shape, [good, [good[0], PathLevel([2] * 6, 4)]], name)
    with pytest.raises(SynthesisError, match=r"sector 0 path: .* has 2 levels, got 1"):
        path_arrays(shape, [good[:1]], name)
