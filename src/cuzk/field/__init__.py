"""The scalar field Fr of BLS12-381: single elements, limb arrays, vector kernels and NTT domains.

Layers, from slow and simple to fast and bulk:

* :class:`Fr` (``fr.py``): one element as a Python int, for readable scalar code and test oracles.
* ``limbs.py``: Python ints / little-endian bytes <-> (n, 4) uint64 arrays of canonical values.
* ``fr_vec.py``: numba kernels on (n, 4) arrays in Montgomery form (import it as a module:
  ``from cuzk.field import fr_vec``).
* :class:`Domain` (``ntt.py``): radix-2 evaluation domains and NTTs on Montgomery arrays.
"""

from cuzk.field import fr_vec
from cuzk.field.fr import Fr, fr_inv, fr_pow
from cuzk.field.limbs import (
    as_limb_array,
    bytes_le_to_limbs,
    check_canonical,
    int_to_limbs,
    ints_to_limbs,
    is_one_mask,
    is_zero_mask,
    limbs_to_bytes_le,
    limbs_to_int,
    limbs_to_ints,
)
from cuzk.field.ntt import Domain, clear_twiddle_cache

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
