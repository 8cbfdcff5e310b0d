"""Witness files (.wtns) as written by circom's witness calculator and `snarkjs wtns calculate`.

iden3 container, magic "wtns", version <= 2. Section 1: u32 n8 (bytes per element), the prime (n8 bytes
little-endian), u32 number of values. Section 2: the values, n8 bytes each, little-endian, canonical
(not Montgomery). Value 0 is the constant 1; then the outputs, the public inputs and the private
signals, in circom's numbering, which is the variable numbering of the matching .zkey.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np

from cuzk.errors import FormatError
from cuzk.field.constants import FR_BYTES, R_MODULUS
from cuzk.groth16.formats._fq_mont import first_not_below
from cuzk.groth16.formats.binfile import read_binfile

__all__ = ["WTNS_MAGIC", "WTNS_VERSION", "read_wtns", "write_wtns"]

WTNS_MAGIC = b"wtns"
# circom writes version 2; snarkjs reads versions up to 2.
WTNS_VERSION = 2

# Primes circom can target, to turn "wrong prime" into an actionable message.
_KNOWN_PRIMES = {
    R_MODULUS: "BLS12-381 scalar field",
    21888242871839275222246405745257275088548364400416034343698204186575808495617: "BN254 scalar field",
    8444461749428370424248824938781546531375899335154063827935233455917409239041: "BLS12-377 scalar field",
    18446744069414584321: "Goldilocks",
}


def _prime_name(prime: int) -> str:
    name = _KNOWN_PRIMES.get(prime)
    return f"{prime} ({name})" if name else str(prime)


def read_wtns(path: str | os.PathLike[str]) -> np.ndarray:
    """The witness of `path` as an `(n, 4)` uint64 array of canonical little-endian limbs.

    Row i is witness value i; its bytes are exactly the 32 little-endian bytes stored in the file.
    Raises FormatError (naming file, offset and problem) unless the file is a BLS12-381 witness with
    n8 = 32, a value count matching the data section, and every value below r.
    """
    source = str(path)
    with read_binfile(path, WTNS_MAGIC, WTNS_VERSION,
                      required=((1, "header"), (2, "witness values"))) as bf:
        off, size = bf.sections[1]
        if size < 4:
            raise FormatError(f"header section is {size} bytes, too short to hold n8", source=source,
                              offset=off, field="n8")
        n8 = bf.u32(off)
        if n8 != FR_BYTES:
            raise FormatError(f"n8 = {n8} bytes per value, expected {FR_BYTES} (BLS12-381 scalars)",
                              source=source, offset=off, field="n8")
        if size != 4 + n8 + 4:
            raise FormatError(f"header section is {size} bytes, expected {4 + n8 + 4} (n8, prime, count)",
                              source=source, offset=off)
        prime = int.from_bytes(bf.read(off + 4, n8), "little")
        if prime != R_MODULUS:
            raise FormatError(f"witness is for another curve: prime {_prime_name(prime)}, expected the "
                              f"BLS12-381 scalar field r = {R_MODULUS}", source=source, offset=off + 4,
                              field="prime")
        count = bf.u32(off + 4 + n8)
        data_off, data_size = bf.sections[2]
        if data_size != count * n8:
            raise FormatError(f"values section is {data_size} bytes but the header announces {count} values "
                              f"of {n8} bytes ({count * n8} bytes)", source=source, offset=data_off)
        view = bf.array(data_off, "<u8", 4 * count).reshape(count, 4)
        values = np.array(view, dtype=np.uint64, order="C")  # own copy, so the file can be unmapped
        del view
    bad = first_not_below(values, R_MODULUS)
    if bad >= 0:
        value = int.from_bytes(values[bad].tobytes(), "little")
        raise FormatError(f"witness value #{bad} is {value}, not below r (not a canonical scalar)",
                          source=source, offset=data_off + bad * n8, field=f"value[{bad}]")
    return values


def write_wtns(path: str | os.PathLike[str], values: Sequence[int] | np.ndarray, *,
               prime: int = R_MODULUS, n8: int = FR_BYTES, version: int = WTNS_VERSION) -> None:
    """Write a .wtns file in the layout `read_wtns` and snarkjs read.

    `values` are ints or an `(n, 4)` uint64 limb array. Nothing is range-checked beyond fitting in n8
    bytes, on purpose: tests use this to craft files with a foreign prime or non-canonical values.
    """
    if isinstance(values, np.ndarray):
        if values.ndim != 2 or values.shape[1] * 8 != n8:
            raise ValueError(f"expected an (n, {n8 // 8}) limb array, got shape {values.shape}")
        data = np.ascontiguousarray(values, dtype="<u8").tobytes()
        count = values.shape[0]
    else:
        data = b"".join(int(v).to_bytes(n8, "little") for v in values)
        count = len(values)
    header = n8.to_bytes(4, "little") + prime.to_bytes(n8, "little") + count.to_bytes(4, "little")
    with open(path, "wb") as fh:
        fh.write(WTNS_MAGIC + version.to_bytes(4, "little") + (2).to_bytes(4, "little"))
        for section_type, payload in ((1, header), (2, data)):
            fh.write(section_type.to_bytes(4, "little") + len(payload).to_bytes(8, "little"))
            fh.write(payload)
