"""The scalar field Fr of BLS12-381: single elements, limb arrays, vector kernels and NTT domains.

Layers, from slow and simple to fast and bulk:

* :class:`Fr` (``fr.py``): one element as a Python int, for readable scalar code and test oracles.
* ``limbs.py``: Python ints / little-endian bytes <-> (n, 4) uint64 arrays of canonical values.
* ``fr_vec.py``: numba kernels on (n, 4) arrays in Montgomery form (import it as a module:
  ``from cuzk.field import fr_vec``).
* :class:`Domain` (``ntt.py``): radix-2 evaluation domains and NTTs on Montgomery arrays.
"""

from __future__ import annotations

import importlib
from typing import Any

# Re-exported lazily: `fr_vec` and `ntt` compile numba kernels on import, which modules that only
# need a constant (the CLI's start-up, for one) should not pay for.
_LAZY = {
    "fr_vec": None,
    "Fr": "fr",
    "fr_inv": "fr",
    "fr_pow": "fr",
    "as_limb_array": "limbs",
    "bytes_le_to_limbs": "limbs",
    "check_canonical": "limbs",
    "int_to_limbs": "limbs",
    "ints_to_limbs": "limbs",
    "is_one_mask": "limbs",
    "is_zero_mask": "limbs",
    "limbs_to_bytes_le": "limbs",
    "limbs_to_int": "limbs",
    "limbs_to_ints": "limbs",
    "Domain": "ntt",
    "clear_twiddle_cache": "ntt",
}


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module 'cuzk.field' has no attribute {name!r}")
    module = _LAZY[name]
    if module is None:
        return importlib.import_module(f"cuzk.field.{name}")
    return getattr(importlib.import_module(f"cuzk.field.{module}"), name)


__all__ = [
    "Domain",
    "Fr",
    "as_limb_array",
    "bytes_le_to_limbs",
    "check_canonical",
    "clear_twiddle_cache",
    "fr_inv",
    "fr_pow",
    "fr_vec",
    "int_to_limbs",
    "ints_to_limbs",
    "is_one_mask",
    "is_zero_mask",
    "limbs_to_bytes_le",
    "limbs_to_int",
    "limbs_to_ints",
]
