"""The BLS12-381 curve layer: points, their on-disk encodings, and batch fixed-base multiplication.

* `points`: py-arkworks `G1Point`, `G2Point`, `GT`, `Scalar` (the in-memory representation) and
  the encoded sizes.
* `encoding`: byte-exact blstrs/zcash encodings, single-point and bulk, with precise
  `PointDecodeError`s, and numba validation of whole point vectors.
* `fixed_base`: k_i * g for millions of scalars (Groth16 parameter generation), straight to bytes.
* `fp_kernels`: the numba Fp/Fp2 Montgomery arithmetic behind the two above.

The encoding and fixed-base names are re-exported lazily: importing them pulls in numba, which
modules that only need point types (most of the prover) should not pay for.
"""

from __future__ import annotations

import importlib
from typing import Any

from cuzk.curve.points import (
    G1_COMPRESSED_BYTES,
    G1_UNCOMPRESSED_BYTES,
    G2_COMPRESSED_BYTES,
    G2_UNCOMPRESSED_BYTES,
    GT,
    G1Point,
    G2Point,
    Scalar,
)

_LAZY = {
    "g1_to_compressed": "encoding",
    "g1_from_compressed": "encoding",
    "g2_to_compressed": "encoding",
    "g2_from_compressed": "encoding",
    "g1_to_uncompressed": "encoding",
    "g1_from_uncompressed": "encoding",
    "g2_to_uncompressed": "encoding",
    "g2_from_uncompressed": "encoding",
    "g1_points_from_uncompressed": "encoding",
    "g2_points_from_uncompressed": "encoding",
    "g1_points_to_uncompressed": "encoding",
    "g2_points_to_uncompressed": "encoding",
    "find_invalid_g1_rows": "encoding",
    "find_invalid_g2_rows": "encoding",
    "g1_fixed_base_batch": "fixed_base",
    "g2_fixed_base_batch": "fixed_base",
    "scalars_from_ints": "fixed_base",
}

__all__ = [
    "G1_COMPRESSED_BYTES",
    "G1_UNCOMPRESSED_BYTES",
    "G2_COMPRESSED_BYTES",
    "G2_UNCOMPRESSED_BYTES",
    "GT",
    "G1Point",
    "G2Point",
    "Scalar",
    *_LAZY,
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
