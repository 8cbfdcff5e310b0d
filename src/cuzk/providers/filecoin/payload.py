"""Filecoin requests' payloads: what each kind carries, recognised and checked at submit time.

A SubmitProofRequest, exactly as Curio sends it (docs/protocol.md §3), per kind:

============================  =================================================================
kind (registered_proof)       payload
============================  =================================================================
POREP_SEAL_COMMIT             `vanilla_proof`: the commit phase-1 output, see "PoRep payloads";
(the C1's RegisteredSeal-     `sector_number`, `miner_id` (prover_id = LEB128 of the actor id,
Proof)                        zero-padded to 32 bytes, docs/circuits.md §1).
WINNING_POST (0-4)            `vanilla_proofs`: one bincode FallbackPoStSectorProof (66 openings);
                              `randomness` (32 bytes, a canonical Fr); `miner_id`.
WINDOW_POST_PARTITION         `vanilla_proofs`: one bincode FallbackPoStSectorProof (10 openings)
(5-14; 10-14 = on-chain       per sector of the partition, ascending sector ids; `randomness`;
V1_1 = proofs-api V1_2)       `partition_index`; `miner_id`. One partition, one 192-byte proof.
SNAP_DEALS_UPDATE (0-4)       `vanilla_proofs`: one bincode PartitionProof per partition;
                              `comm_r_old`, `comm_r_new`, `comm_d_new`: 32 raw bytes each.
============================  =================================================================

`sector_size`, when non-zero, must be the registered proof's sector size (0: not given). Fields a
kind does not use (e.g. `sector_number` of a SnapDeals request) are ignored (docs/compatibility.md §3).

PoRep payloads (`vanilla_proof`), told apart by their first bytes:

1. Curio's wrapper, what `PoRepSnarkCuzk` sends: JSON `{"SectorNum": n, "Phase1Out": "<base64>",
   "SectorSize": bytes}`, where Phase1Out (Go's []byte, so standard base64) holds the C1 output as
   filecoin-ffi's serde JSON — or as supraseal/Curio bincode (form 3).
2. A bare C1 JSON (`cuzk gen-vanilla` writes `c1.json`): a JSON object whose top-level keys include
   `registered_proof` / `vanilla_proofs`.
3. A bare bincode C1 (supraseal / Curio `porep_vproof_bin`, `cuzk gen-vanilla` `c1.bin`). The format
   does not record its proof type, so `registered_proof` names it, and the bytes are taken as bincode
   only if they are exactly as long as that proof's C1 and start with its partition and challenge
   counts; anything else is refused with those numbers.

For the JSON forms the C1's own `registered_proof` decides the circuit (docs/compatibility.md §3); a
non-zero request `registered_proof` must name the same proof (0 is the proto default, i.e. not
given). The sector number is the request's `sector_number`, or the wrapper's SectorNum when the
request leaves it 0; both non-zero and different is refused. NonInteractivePoRep C1 outputs are
refused: their C2 result is a SnarkPack aggregate, which this daemon does not make.

When things are checked: these functions, which the providers' `circuit_id` calls at submit (errors
are gRPC INVALID_ARGUMENT), check what costs at most a pass over the bytes at C speed — kind vs
registered_proof vs sector_size, payload presence, randomness and commitment lengths and canonicity,
the exact byte length of every bincode vanilla proof (a pure function of the proof type, so
truncation is caught here), base64, WindowPoSt sector order. The rest (parsing, the compound proof,
the public inputs) is the providers' `plan` (`cuzk.providers.filecoin.provider`).
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from dataclasses import dataclass
from typing import Any

from cuzk.engine.providers import InvalidRequestError
from cuzk.errors import CuzkError
from cuzk.field.constants import R_MODULUS
from cuzk.filecoin.merkle import TreeLayout
from cuzk.filecoin.sizes import (
    TOTAL_PARENTS,
    CircuitKind,
    RegisteredPoStProof,
    RegisteredSealProof,
    RegisteredUpdateProof,
    SectorParams,
    post_proof,
    seal_proof,
    update_proof,
)
from cuzk.kinds import ProofKind
from cuzk.providers.fields import SubmitFields

__all__ = [
    "PorepPayload",
    "c1_bincode_bytes",
    "merkle_proof_bytes",
    "porep_payload",
    "post_sector_proof_bytes",
    "prover_id_from_miner",
    "read_sector_proofs",
    "snap_partition_proof_bytes",
    "snap_update_proof",
    "window_post_proof",
    "winning_post_proof",
]

_U64 = 1 << 64


# -- byte sizes of the bincode forms (docs/formats.md §5) ------------------------------------------

def merkle_proof_bytes(layout: TreeLayout) -> int:
    """Bincode size of a MerkleProof of `layout`: u32 tag, one u64-counted path per part (base, sub,
    top), per level u64 hash count + siblings + u64 index, root and leaf."""
    paths = {"Single": 1, "Sub": 2, "Top": 3}[layout.kind]
    return 4 + 64 + 8 * paths + sum(16 + 32 * (arity - 1) for arity in layout.arities)


def post_sector_proof_bytes(size: SectorParams, challenges: int) -> int:
    """A FallbackPoStSectorProof of one sector with `challenges` openings."""
    return 8 + 32 + 8 + 8 + challenges * merkle_proof_bytes(TreeLayout.tree_r(size)) + 64


def snap_partition_proof_bytes(size: SectorParams) -> int:
    """A SnapDeals PartitionProof: comm_c, apex leaves, per challenge r_old, d_new, r_new openings."""
    tree_r = merkle_proof_bytes(TreeLayout.tree_r(size))
    tree_d = merkle_proof_bytes(TreeLayout.tree_d(size.nodes))
    return 32 + 8 + 32 * size.snap_apex_leaves + 8 + size.snap_challenges * (2 * tree_r + tree_d)


def c1_bincode_bytes(proof: RegisteredSealProof) -> int:
    """The supraseal/Curio bincode C1 of `proof` (no registered_proof, no size-enum wrapper)."""
    size = proof.size
    layers = size.layers
    tree_r = merkle_proof_bytes(TreeLayout.tree_r(size))
    tree_d = merkle_proof_bytes(TreeLayout.tree_d(size.nodes))
    column = 4 + 8 + 32 * layers + tree_r
    labeling = 8 + 32 * TOTAL_PARENTS + 4 + 8
    challenge = tree_d + tree_r + 15 * column + 3 * 8 + (layers + 1) * labeling
    return 8 + proof.partitions * (8 + proof.challenges_per_partition * challenge) + 5 * 32


def prover_id_from_miner(miner_id: int) -> bytes:
    """prover_id = the ID address payload: unsigned LEB128 of the actor id, zero-padded to 32 bytes
    (Curio's `toProverID`, the Rust daemon's `make_prover_id`)."""
    if not 0 <= miner_id < _U64:
        raise InvalidRequestError(f"miner_id must be a u64, got {miner_id}")
    out = bytearray()
    value = miner_id
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out).ljust(32, b"\0")


# -- shared validation ------------------------------------------------------------------------------

def canonical32(value: bytes, name: str, where: str, *, required: bool = True) -> bytes:
    if not value:
        if required:
            raise InvalidRequestError(f"{where}: {name} is required (32 bytes)")
        return value
    if len(value) != 32:
        raise InvalidRequestError(f"{where}: {name} must be 32 bytes, got {len(value)}")
    if int.from_bytes(value, "little") >= R_MODULUS:
        raise InvalidRequestError(f"{where}: {name} is not a canonical field element (little-endian value >= r): "
                                  f"{value.hex()}")
    return value


def check_sector_size(request: SubmitFields, size: SectorParams, proof_name: str, where: str) -> None:
    if request.sector_size and request.sector_size != size.sector_bytes:
        raise InvalidRequestError(f"{where}: sector_size {request.sector_size} disagrees with {proof_name}, a "
                                  f"{size.name} proof ({size.sector_bytes} bytes)")


def check_vanilla_list(request: SubmitFields, where: str, what: str, lo: int, hi: int, each: int) -> None:
    """`vanilla_proofs` holds lo..hi entries of exactly `each` bytes; `vanilla_proof` is empty."""
    if request.vanilla_proof:
        raise InvalidRequestError(f"{where}: send the {what}s in vanilla_proofs (one per entry); vanilla_proof must "
                                  "be empty")
    n = len(request.vanilla_proofs)
    if not lo <= n <= hi:
        count = f"exactly {lo}" if lo == hi else f"{lo} to {hi}"
        raise InvalidRequestError(f"{where}: vanilla_proofs holds {n} {what}(s), expected {count}")
    for i, blob in enumerate(request.vanilla_proofs):
        if len(blob) != each:
            problem = "truncated" if len(blob) < each else "longer than that"
            raise InvalidRequestError(f"{where}: vanilla_proofs[{i}] is {len(blob)} bytes; a bincode {what} of this "
                                      f"proof type is exactly {each} bytes ({problem}; another sector size or proof "
                                      "type?)")


def invalid(where: str, err: CuzkError) -> InvalidRequestError:
    return InvalidRequestError(f"{where}: {err}")


# -- PoRep ------------------------------------------------------------------------------------------

_C1_KEYS_RE = re.compile(rb'"(?:registered_proof|vanilla_proofs|comm_r|comm_d|replica_id|seed|ticket)"\s*:')
_REGISTERED_RE = re.compile(rb'"registered_proof"\s*:\s*"([^"\\]{0,80})"')
#: The top-level keys of a C1 JSON are short; one of them is within this many bytes of the start.
_SNIFF_BYTES = 1 << 16


@dataclass(frozen=True)
class PorepPayload:
    """The C1 bytes of a PoRep request and what the submit-time checks established about them."""

    proof: RegisteredSealProof
    form: str  #: "curio-wrapper/json", "curio-wrapper/bincode", "json" or "bincode"
    sector_number: int
    c1: bytes  #: the C1 output: serde JSON text or bincode

    @property
    def is_json(self) -> bool:
        return self.form.endswith("json")


def _is_json(data: bytes) -> bool:
    return data[:64].lstrip()[:1] == b"{"


def _sniff_json_proof(c1: bytes, where: str) -> RegisteredSealProof:
    """The registered proof a C1 JSON names, found by a regex pass instead of a full parse."""
    m = _REGISTERED_RE.search(c1)
    if m is None:
        raise InvalidRequestError(f"{where}: the C1 output JSON has no \"registered_proof\" string")
    name = m.group(1).decode("ascii", "replace")
    try:
        return seal_proof(name)
    except CuzkError:
        raise InvalidRequestError(f"{where}: the C1 output's registered_proof {name!r} is not a RegisteredSealProof")\
            from None


def _bincode_proof(c1: bytes, registered: int, where: str) -> RegisteredSealProof:
    """The proof a bincode C1 is of: the request's registered_proof, if the bytes fit it exactly."""
    try:
        proof = seal_proof(registered)
    except CuzkError:
        raise InvalidRequestError(f"{where}: the payload is not JSON, so it must be a bincode C1 output, which does "
                                  f"not name its proof type: registered_proof must be a RegisteredSealProof id "
                                  f"(0-19), got {registered}") from None
    expected = c1_bincode_bytes(proof)
    counts = (int.from_bytes(c1[0:8], "little"), int.from_bytes(c1[8:16], "little")) if len(c1) >= 16 else None
    if len(c1) != expected or counts != (proof.partitions, proof.challenges_per_partition):
        got = f"{len(c1)} bytes" + (f" starting with counts {counts[0]}, {counts[1]}" if counts else "")
        raise InvalidRequestError(
            f"{where}: the payload is neither JSON nor a bincode C1 output of {proof.name} (registered_proof "
            f"{registered}): that is exactly {expected} bytes starting with u64 partitions = {proof.partitions} and "
            f"u64 challenges = {proof.challenges_per_partition}; got {got}")
    return proof


def _wrapper_int(data: dict, key: str, where: str) -> int:
    if key not in data:
        raise InvalidRequestError(f"{where}: Curio's C1 wrapper lacks {key!r} (it has {', '.join(sorted(data))})")
    value = data[key]
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < _U64:
        raise InvalidRequestError(f"{where}: the wrapper's {key} must be an unsigned integer, got {value!r}")
    return value


def porep_payload(request: SubmitFields) -> PorepPayload:
    """Recognise the PoRep payload form and its proof type (see the module docstring); raises
    InvalidRequestError with the reason. Costs a JSON parse of the wrapper and a base64 decode."""
    where = ProofKind.POREP_SEAL_COMMIT.proto_name
    payload = request.vanilla_proof
    if request.vanilla_proofs:
        raise InvalidRequestError(f"{where}: send the commit phase-1 output in vanilla_proof; vanilla_proofs must be "
                                  "empty")
    if not payload:
        raise InvalidRequestError(f"{where}: vanilla_proof is empty; it must hold the commit phase-1 output (Curio's "
                                  "{SectorNum, Phase1Out, SectorSize} JSON, a C1 JSON or a bincode C1)")
    wrapper_number: int | None = None
    wrapper_size: int | None = None
    if _is_json(payload) and _C1_KEYS_RE.search(payload, 0, _SNIFF_BYTES):
        c1, form = payload, "json"
    elif _is_json(payload):
        try:
            data = json.loads(payload)
        except (ValueError, RecursionError) as err:  # also over-long numbers and too deep nesting
            raise InvalidRequestError(f"{where}: vanilla_proof is not valid JSON: {err}") from None
        if not isinstance(data, dict) or "Phase1Out" not in data:
            raise InvalidRequestError(f"{where}: vanilla_proof is JSON but neither Curio's {{SectorNum, Phase1Out, "
                                      "SectorSize}} wrapper nor a C1 output (no Phase1Out or registered_proof key)")
        encoded = data["Phase1Out"]
        if not isinstance(encoded, str) or not encoded:
            raise InvalidRequestError(f"{where}: the wrapper's Phase1Out must be a non-empty base64 string, got "
                                      f"{type(encoded).__name__}")
        wrapper_number = _wrapper_int(data, "SectorNum", where)
        wrapper_size = _wrapper_int(data, "SectorSize", where)
        try:
            c1 = base64.b64decode(encoded, validate=True)
        except (binascii.Error, ValueError) as err:
            raise InvalidRequestError(f"{where}: the wrapper's Phase1Out is not valid base64 ({err})") from None
        form = "curio-wrapper/json" if _is_json(c1) else "curio-wrapper/bincode"
    else:
        c1, form = payload, "bincode"
    if form.endswith("json"):
        proof = _sniff_json_proof(c1, where)
        if request.registered_proof and request.registered_proof != proof.id:
            other = _proof_name(request.registered_proof, seal_proof)
            raise InvalidRequestError(f"{where}: registered_proof {request.registered_proof}{other} disagrees with the "
                                      f"C1 output's {proof.name} ({proof.id})")
    else:
        proof = _bincode_proof(c1, request.registered_proof, where)
    if proof.non_interactive:
        raise InvalidRequestError(f"{where}: {proof.name}: seal_commit_phase2 returns a SnarkPack aggregate of the "
                                  "partition proofs for non-interactive PoRep, which this daemon does not produce")
    if wrapper_size is not None and wrapper_size != proof.size.sector_bytes:
        raise InvalidRequestError(f"{where}: the wrapper's SectorSize {wrapper_size} disagrees with the C1 output's "
                                  f"{proof.name} ({proof.size.sector_bytes} bytes)")
    check_sector_size(request, proof.size, proof.name, where)
    number = request.sector_number
    if wrapper_number is not None and wrapper_number != number:
        if number:
            raise InvalidRequestError(f"{where}: sector_number {number} disagrees with the wrapper's SectorNum "
                                      f"{wrapper_number}")
        number = wrapper_number
    prover_id_from_miner(request.miner_id)
    return PorepPayload(proof, form, number, c1)


def _proof_name(value: int, lookup: Any) -> str:
    try:
        return f" ({lookup(value).name})"
    except CuzkError:
        return ""


# -- PoSt -------------------------------------------------------------------------------------------

def post_proof_of(request: SubmitFields, kind: CircuitKind, where: str) -> RegisteredPoStProof:
    ids = "0-4 (StackedDrgWinning<size>V1)" if kind is CircuitKind.WINNING else \
        "5-9 (StackedDrgWindow<size>V1) or 10-14 (on-chain V1_1 = proofs-api V1_2)"
    try:
        proof = post_proof(request.registered_proof)
    except CuzkError:
        raise InvalidRequestError(f"{where}: registered_proof {request.registered_proof} is not a "
                                  f"RegisteredPoStProof; {where} takes {ids}") from None
    if proof.kind is not kind:
        other = "WinningPoSt" if proof.kind is CircuitKind.WINNING else "WindowPoSt"
        raise InvalidRequestError(f"{where}: registered_proof {proof.id} ({proof.name}) is a {other} proof; {where} "
                                  f"takes {ids}")
    check_sector_size(request, proof.size, proof.name, where)
    return proof


def post_public(request: SubmitFields, where: str) -> None:
    canonical32(request.randomness, "randomness", where)
    prover_id_from_miner(request.miner_id)


def read_sector_proofs(request: SubmitFields, proof: RegisteredPoStProof, challenges: int, where: str) -> list[Any]:
    from cuzk.filecoin.post import FallbackPoStSectorProof

    out = []
    for i, blob in enumerate(request.vanilla_proofs):
        try:
            out.append(FallbackPoStSectorProof.from_bincode(blob, proof.size, source=f"vanilla_proofs[{i}]",
                                                            challenges=challenges))
        except CuzkError as err:
            raise invalid(where, err) from None
    return out



def winning_post_proof(request: SubmitFields) -> RegisteredPoStProof:
    """A WINNING_POST request's proof type, its randomness, miner and vanilla proof checked."""
    where = ProofKind.WINNING_POST.proto_name
    proof = post_proof_of(request, CircuitKind.WINNING, where)
    post_public(request, where)
    check_vanilla_list(request, where, "FallbackPoStSectorProof", proof.sector_count, proof.sector_count,
                        post_sector_proof_bytes(proof.size, proof.challenge_count))
    return proof


def window_post_proof(request: SubmitFields) -> RegisteredPoStProof:
    """A WINDOW_POST_PARTITION request's proof type, its randomness, miner and sector proofs checked
    (lengths, strictly ascending sector ids)."""
    where = ProofKind.WINDOW_POST_PARTITION.proto_name
    proof = post_proof_of(request, CircuitKind.WINDOW, where)
    post_public(request, where)
    check_vanilla_list(request, where, "FallbackPoStSectorProof", 1, proof.sector_count,
                        post_sector_proof_bytes(proof.size, proof.challenge_count))
    ids = [int.from_bytes(blob[:8], "little") for blob in request.vanilla_proofs]
    for i in range(1, len(ids)):
        if ids[i] <= ids[i - 1]:
            problem = "duplicate sector" if ids[i] == ids[i - 1] else "sectors out of order"
            raise InvalidRequestError(f"{where}: {problem} (vanilla_proofs[{i - 1}] is sector {ids[i - 1]}, "
                                      f"vanilla_proofs[{i}] sector {ids[i]}); sector proofs must be in strictly "
                                      "ascending sector id order, as the verifier lists them")
    return proof


# -- SnapDeals --------------------------------------------------------------------------------------

def snap_update_proof(request: SubmitFields) -> RegisteredUpdateProof:
    """A SNAP_DEALS_UPDATE request's proof type, its commitments and partition proofs checked."""
    where = ProofKind.SNAP_DEALS_UPDATE.proto_name
    try:
        proof = update_proof(request.registered_proof)
    except CuzkError:
        raise InvalidRequestError(f"{where}: registered_proof {request.registered_proof} is not a "
                                  f"RegisteredUpdateProof; {where} takes 0-4 (StackedDrg<size>V1: 2KiB, 8MiB, "
                                  "512MiB, 32GiB, 64GiB)") from None
    check_sector_size(request, proof.size, proof.name, where)
    for name in ("comm_r_old", "comm_r_new", "comm_d_new"):
        canonical32(getattr(request, name), name, where)
    parts = proof.size.snap_partitions
    check_vanilla_list(request, where, "PartitionProof", parts, parts, snap_partition_proof_bytes(proof.size))
    return proof
