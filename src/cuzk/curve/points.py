"""G1, G2 and GT of BLS12-381.

Points in memory are py-arkworks objects: they carry the fast native arithmetic (MSM, pairing).
Their sizes in the encodings used by bellperson/blstrs are given here too.
"""

from __future__ import annotations

from py_arkworks_bls12381 import GT, G1Point, G2Point, Scalar

G1_COMPRESSED_BYTES = 48
G2_COMPRESSED_BYTES = 96
G1_UNCOMPRESSED_BYTES = 96
G2_UNCOMPRESSED_BYTES = 192

__all__ = [
    "G1_COMPRESSED_BYTES",
    "G1_UNCOMPRESSED_BYTES",
    "G2_COMPRESSED_BYTES",
    "G2_UNCOMPRESSED_BYTES",
    "GT",
    "G1Point",
    "G2Point",
    "Scalar",
]
