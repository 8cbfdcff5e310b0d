"""Groth16 proofs and their 192-byte encoding (compressed A ‖ B ‖ C, bellperson/blstrs).

A proof of several partitions (PoRep 32GiB: 10) is the partition proofs concatenated in partition
order with no length prefix.
"""

from __future__ import annotations

from dataclasses import dataclass

from cuzk.curve import encoding
from cuzk.curve.points import G1_COMPRESSED_BYTES, G2_COMPRESSED_BYTES, G1Point, G2Point
from cuzk.errors import FormatError

PROOF_BYTES = 2 * G1_COMPRESSED_BYTES + G2_COMPRESSED_BYTES  # 192


@dataclass(frozen=True, eq=False)
class Proof:
    a: G1Point
    b: G2Point
    c: G1Point

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Proof):
            return NotImplemented
        return self.a == other.a and self.b == other.b and self.c == other.c

    def to_bytes(self) -> bytes:
        return (
            encoding.g1_to_compressed(self.a)
            + encoding.g2_to_compressed(self.b)
            + encoding.g1_to_compressed(self.c)
        )

    @classmethod
    def from_bytes(cls, data: bytes, *, source: str | None = None, base_offset: int = 0) -> Proof:
        """Decode one proof; points must be valid, in the subgroup and not the identity (as bellperson)."""
        if len(data) != PROOF_BYTES:
            raise FormatError(f"a proof is {PROOF_BYTES} bytes, got {len(data)}", source=source,
                              offset=base_offset)
        parts = []
        for name, lo, hi, decode in (
            ("A", 0, 48, encoding.g1_from_compressed),
            ("B", 48, 144, encoding.g2_from_compressed),
            ("C", 144, 192, encoding.g1_from_compressed),
        ):
            try:
                parts.append(decode(data[lo:hi], allow_identity=False, field=f"proof.{name}",
                                    offset=base_offset + lo))
            except FormatError as err:
                if source is not None and err.source is None:
                    raise type(err)(err.what, source=source, offset=err.offset, field=err.field) from None
                raise
        return cls(*parts)


def proofs_to_bytes(proofs: list[Proof]) -> bytes:
    return b"".join(p.to_bytes() for p in proofs)


def proofs_from_bytes(data: bytes, *, expected: int | None = None, source: str | None = None) -> list[Proof]:
    """Split concatenated partition proofs; `expected` partitions if given (as bellperson requires)."""
    if len(data) % PROOF_BYTES:
        raise FormatError(f"proof bytes must be a multiple of {PROOF_BYTES}, got {len(data)}", source=source)
    count = len(data) // PROOF_BYTES
    if expected is not None and count != expected:
        raise FormatError(f"expected {expected} partition proofs ({expected * PROOF_BYTES} bytes), "
                          f"got {count} ({len(data)} bytes)", source=source)
    return [Proof.from_bytes(data[k * PROOF_BYTES:(k + 1) * PROOF_BYTES], source=source,
                             base_offset=k * PROOF_BYTES) for k in range(count)]
