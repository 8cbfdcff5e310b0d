"""The payload fields of a cuzk.v1 SubmitProofRequest, as the providers' `RequestPayload`.

Curio fills a subset of them per kind (`cuzk.providers.filecoin.payload` says which, and checks
them); a test-circuit request carries its description in `vanilla_proof`. Both providers keep the
fields as sent, so a request's digest and journal copy do not depend on which fields a kind reads.

The encoded form: a magic line, a u32 header length, a JSON header (the scalars and the blob
lengths), then the blobs. `decode` also reads the request record of a schema-1 journal (`CZKREQ1`,
the same layout with the request id, kind and priority in its header), which cuzk.engine.journal
hands over whole.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

from cuzk.engine.jobs import V1_REQUEST_MAGIC, Priority, ProofKind, ProofRequest, RequestPayload, frame, unframe
from cuzk.engine.providers import InvalidRequestError

__all__ = ["SubmitFields", "fields_of", "submit_request"]

_MAGIC = b"CZKFLD1\n"
_SCALARS = ("sector_size", "registered_proof", "sector_number", "miner_id", "partition_index")
_BLOBS = ("vanilla_proof", "randomness", "comm_r_old", "comm_r_new", "comm_d_new")
#: Fields that are 32 bytes whenever they are sent, whatever the kind.
_BYTES32 = ("randomness", "comm_r_old", "comm_r_new", "comm_d_new")


@dataclass
class SubmitFields(RequestPayload):
    """The request's fields besides its id, kind and priority, and the kind (part of the digest)."""

    kind: ProofKind
    sector_size: int = 0
    registered_proof: int = 0
    vanilla_proof: bytes = b""
    vanilla_proofs: list[bytes] = field(default_factory=list)
    sector_number: int = 0
    miner_id: int = 0
    randomness: bytes = b""
    partition_index: int = 0
    comm_r_old: bytes = b""
    comm_r_new: bytes = b""
    comm_d_new: bytes = b""

    @classmethod
    def from_message(cls, kind: ProofKind, msg: Any) -> SubmitFields:
        """The fields of a SubmitProofRequest; a 32-byte field of another length is refused here."""
        fields = cls(kind, vanilla_proofs=list(msg.vanilla_proofs),
                     **{name: getattr(msg, name) for name in (*_SCALARS, *_BLOBS)})
        for name in _BYTES32:
            value = getattr(fields, name)
            if value and len(value) != 32:
                raise InvalidRequestError(f"{name} must be 32 bytes, got {len(value)}")
        return fields

    # -- RequestPayload ------------------------------------------------------------------------------
    def digest(self) -> str:
        """sha256 over the kind, the scalars and the length-prefixed blobs; unchanged from the digest
        schema-1 journals recorded, so a request sent again after an upgrade still matches its job."""
        h = hashlib.sha256()
        for part in (int(self.kind), self.sector_size, self.registered_proof, self.sector_number, self.miner_id,
                     self.partition_index):
            h.update(int(part).to_bytes(16, "little"))
        for blob in (self.vanilla_proof, self.randomness, self.comm_r_old, self.comm_r_new, self.comm_d_new,
                     *self.vanilla_proofs):
            h.update(len(blob).to_bytes(8, "little"))
            h.update(blob)
        h.update(len(self.vanilla_proofs).to_bytes(8, "little"))
        return h.hexdigest()

    def encode(self) -> bytes:
        header: dict[str, Any] = {name: getattr(self, name) for name in _SCALARS}
        header.update(kind=int(self.kind), blobs=[len(getattr(self, name)) for name in _BLOBS],
                      vanilla_proofs=[len(v) for v in self.vanilla_proofs])
        return frame(_MAGIC, header, [getattr(self, name) for name in _BLOBS] + list(self.vanilla_proofs))

    def nbytes(self) -> int:
        return len(self.vanilla_proof) + sum(len(v) for v in self.vanilla_proofs)

    def release(self) -> None:
        self.vanilla_proof = b""
        self.vanilla_proofs = []

    @classmethod
    def decode(cls, kind: ProofKind, data: bytes) -> SubmitFields:
        """`encode()`'s bytes, or a schema-1 journal's request record, as the fields of a `kind` request;
        ValueError when they are neither or are cut short."""
        _, header, at = unframe(data, (_MAGIC, V1_REQUEST_MAGIC), "an encoded SubmitProofRequest payload")
        written = header["kind"] if "kind" in header else header["proof_kind"]
        if written != int(kind):
            raise ValueError(f"the payload is of proof kind {written}, not {int(kind)}")
        values: dict[str, Any] = {name: int(header[name]) for name in _SCALARS}
        for name, length in zip(_BLOBS, header["blobs"], strict=True):
            values[name] = bytes(data[at:at + length])
            at += length
        vanilla = []
        for length in header["vanilla_proofs"]:
            vanilla.append(bytes(data[at:at + length]))
            at += length
        if at != len(data):
            raise ValueError("the encoded payload is shorter or longer than its header says")
        return cls(kind, vanilla_proofs=vanilla, **values)


def submit_request(request_id: str, kind: ProofKind, priority: Priority | None = None, **fields: Any) -> ProofRequest:
    """The engine's request of a SubmitProofRequest's fields, for in-process callers (benchmarks,
    tests); the gRPC server builds its payload through the kind's provider instead."""
    return ProofRequest(request_id, kind, priority, SubmitFields(kind, **fields))


def fields_of(request: ProofRequest) -> SubmitFields:
    """The request's payload, which the providers of this package made (`payload_from_message`, `decode`)."""
    payload = request.payload
    if not isinstance(payload, SubmitFields):
        raise InvalidRequestError(f"{request.proof_kind.proto_name}: the request carries {type(payload).__name__}, "
                                  "not the fields of a SubmitProofRequest")
    return payload
