"""A circuit's values as the batched generators take them: integers reduced mod r, a missing one named.

`WitnessCS` reduces every value it is given mod r and fails naming the variable when one is missing
(a blank circuit). The circuit-level generators (`porep_witness`, `post_witness`, `snap_witness`)
read the same values straight from the circuit's fields, so they apply the same rules through
these helpers: a value is reduced mod r (a non-canonical input gives the witness WitnessCS would
give), a missing one is a SynthesisError naming it, and so is one that is not an integer (a float
would otherwise be truncated into a wrong witness without a word).
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from typing import SupportsIndex

import numpy as np

from cuzk.errors import SynthesisError
from cuzk.field.constants import R_MODULUS
from cuzk.field.limbs import ints_to_limbs

__all__ = ["field_limbs", "required_value", "required_values"]


def required_value(value: SupportsIndex | None, what: str) -> int:
    """`value` reduced mod r; SynthesisError naming `what` if it is missing or not an integer."""
    if value is None:
        raise SynthesisError(f"{what} has no value (a blank circuit has no witness)")
    try:
        return operator.index(value) % R_MODULUS
    except TypeError:
        raise SynthesisError(f"{what} must be an integer, got {type(value).__name__}") from None


def required_values(values: Sequence[SupportsIndex | None], name: Callable[[int], str]) -> list[int]:
    """Each of `values` reduced mod r; SynthesisError naming `name(i)` for the first missing or
    non-integer one (`required_value`'s rule, with one comprehension in the common all-good case)."""
    try:
        return [operator.index(v) % R_MODULUS for v in values]  # type: ignore[arg-type]  # None: named below
    except TypeError:
        for i, v in enumerate(values):
            required_value(v, name(i))
        raise


def field_limbs(values: Sequence[SupportsIndex | None], what: str) -> np.ndarray:
    """(len(values), 4) canonical limbs of `values` reduced mod r; SynthesisError naming `what[i]`
    for the first missing or non-integer one."""
    return ints_to_limbs(required_values(values, lambda i: f"{what}[{i}]"))
