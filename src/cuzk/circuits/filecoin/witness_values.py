"""Witness values of a circuit instance as the batched generators take them: canonical limb arrays.

`WitnessCS` reduces every value it is given mod r and fails naming the variable when one is missing
(a blank circuit). The circuit-level generators (`post_witness`, `snap_witness`) read the same
values straight from the circuit's fields, so they apply the same two rules here: values are
reduced mod r (a non-canonical input gives the witness WitnessCS would give), and a missing one is
a SynthesisError naming the field.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from cuzk.errors import SynthesisError
from cuzk.field.constants import R_MODULUS
from cuzk.field.limbs import ints_to_limbs
from cuzk.gadgets.por import PathLevel, TreeShape

__all__ = ["field_limbs", "path_positions_and_siblings", "required"]


def required(value: int | None, what: str) -> int:
    """`value` reduced mod r; SynthesisError naming `what` if it is missing."""
    if value is None:
        raise SynthesisError(f"assignment missing for {what} (a blank circuit has no witness)")
    return int(value) % R_MODULUS


def field_limbs(values: Sequence[int | None], what: str) -> np.ndarray:
    """(len(values), 4) canonical limbs of `values` reduced mod r; SynthesisError naming `what[i]`
    for the first missing one."""
    try:
        return ints_to_limbs([int(v) % R_MODULUS for v in values])  # type: ignore[arg-type]
    except TypeError:
        first = next(i for i, v in enumerate(values) if v is None)
        raise SynthesisError(f"assignment missing for {what}[{first}] (a blank circuit has no witness)") from None


def path_positions_and_siblings(shape: TreeShape, paths: Sequence[Sequence[PathLevel]],
                                what: str) -> tuple[np.ndarray, np.ndarray]:
    """(leaf indices, (N, Σ (arity - 1), 4) siblings) of `PathLevel` paths, as `merkle_path_witness`
    takes them: the index from the per-level positions (the circuit's index bits), the siblings
    level by level, reduced mod r. The layout must already have been checked (`check_path`)."""
    indices = np.empty(len(paths), dtype=np.int64)
    flat: list[int | None] = []
    for n, path in enumerate(paths):
        index, scale = 0, 1
        for level, (arity, step) in enumerate(zip(shape.arities, path, strict=True)):
            if step.index is None or None in step.siblings:
                raise SynthesisError(f"assignment missing for {what} {n} level {level} "
                                     "(a blank circuit has no witness)")
            index += step.index * scale
            scale *= arity
            flat.extend(step.siblings)
        indices[n] = index
    per_path = sum(a - 1 for a in shape.arities)
    return indices, field_limbs(flat, f"{what} siblings").reshape(len(paths), per_path, 4)
