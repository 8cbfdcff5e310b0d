"""SHA-256 as Filecoin uses it, and the 32-byte <-> Fr conversions (docs/circuits.md §1).

Every SHA-256 output that becomes a tree node, label or id is "fr32-truncated": the two most
significant bits of the little-endian integer are cleared (byte 31 &= 0x3f), so the value is below
2^254 < r and is a valid field element without reduction. Fr values travel as 32 little-endian bytes
and must be canonical (< r); parsers reject anything else with a FormatError naming the field.
"""

from __future__ import annotations

import hashlib

import numpy as np

from cuzk.errors import FormatError
from cuzk.field.constants import R_MODULUS

__all__ = [
    "bytes_to_fr",
    "check_fr_bytes",
    "fr32_truncate",
    "fr32_truncate_array",
    "fr_add_bytes",
    "fr_to_bytes",
    "hash2_sha",
    "sha256_fr32",
]

FR32_MASK = 0x3F


def fr32_truncate(digest: bytes) -> bytes:
    """Clear the top two bits of byte 31 (rust `bytes_into_fr_repr_safe` / Sha256Domain truncation)."""
    if len(digest) != 32:
        raise ValueError(f"fr32 truncation needs 32 bytes, got {len(digest)}")
    return digest[:31] + bytes((digest[31] & FR32_MASK,))


def fr32_truncate_array(nodes: np.ndarray) -> np.ndarray:
    """In-place truncation of an (n, 32) uint8 array of digests; returns it."""
    nodes[:, 31] &= FR32_MASK
    return nodes


def sha256_fr32(data: bytes) -> bytes:
    """fr32-truncate(SHA-256(data)): labels, replica_id, tree_d nodes."""
    d = bytearray(hashlib.sha256(data).digest())
    d[31] &= FR32_MASK
    return bytes(d)


def hash2_sha(left: bytes, right: bytes) -> bytes:
    """A tree_d interior node: fr32-truncate(SHA-256(left ‖ right))."""
    d = bytearray(hashlib.sha256(left + right).digest())
    d[31] &= FR32_MASK
    return bytes(d)


def check_fr_bytes(value: bytes, *, field: str | None = None, source: str | None = None,
                   offset: int | None = None) -> bytes:
    """Return `value` if it is 32 bytes encoding a canonical Fr (< r), else raise FormatError."""
    if len(value) != 32:
        raise FormatError(f"expected 32 bytes (a field element), got {len(value)}", source=source, offset=offset,
                          field=field)
    if int.from_bytes(value, "little") >= R_MODULUS:
        raise FormatError(f"not a canonical field element (little-endian value >= r): {bytes(value).hex()}",
                          source=source, offset=offset, field=field)
    return bytes(value)


def bytes_to_fr(value: bytes, *, field: str | None = None, source: str | None = None,
                offset: int | None = None) -> int:
    """32 little-endian bytes -> canonical Fr int (FormatError if the length or value is wrong)."""
    return int.from_bytes(check_fr_bytes(value, field=field, source=source, offset=offset), "little")


def fr_to_bytes(x: int) -> bytes:
    """Canonical Fr int -> 32 little-endian bytes."""
    if not 0 <= x < R_MODULUS:
        raise ValueError(f"{x:#x} is not a canonical field element")
    return x.to_bytes(32, "little")


def fr_add_bytes(a: bytes, b: bytes) -> bytes:
    """(a + b) mod r on 32-byte LE values: the SDR encoding replica = label + data."""
    return ((int.from_bytes(a, "little") + int.from_bytes(b, "little")) % R_MODULUS).to_bytes(32, "little")
