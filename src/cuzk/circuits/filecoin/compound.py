"""Compound proofs: what turns vanilla proofs into partition circuits, and proof bytes back into a verdict.

rust-fil-proofs' `CompoundProof` couples a vanilla proof scheme with its circuit: a proof is one
Groth16 proof per partition, concatenated (192 bytes each). For partition k the prover builds the
circuit from the k-th vanilla partition proof (`circuit`), and prover and verifier both derive the
public inputs (`generate_public_inputs`) from public data only — commitments, ids, randomness —
never from the vanilla proof. That split is what makes a wrong vanilla proof fail: its witness
exposes different inputs (or no satisfying assignment), and the Groth16 proof does not verify.

This module holds what the four proof kinds share; the kinds themselves live in
`compound_porep` (`PorepC2`, `verify_seal`), `compound_post` (`WinningPoSt`, `WindowPoSt`,
`verify_winning_post`, `verify_window_post`) and `compound_snap` (`SnapUpdate`, `verify_update`),
and are re-exported here for convenience — lazily, because they import this module.
"""

from __future__ import annotations

import hashlib
import importlib
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, MutableMapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from cuzk.circuits.filecoin.porep import StackedCircuit, StackedConfig
from cuzk.circuits.filecoin.post import FallbackPoStCircuit, FallbackPoStConfig
from cuzk.circuits.filecoin.snap import EmptySectorUpdateCircuit, EmptySectorUpdateConfig
from cuzk.errors import CuzkError
from cuzk.field.constants import R_MODULUS
from cuzk.filecoin.merkle import MerkleProof, TreeLayout
from cuzk.filecoin.sizes import CircuitKind, SectorParams, parse_circuit_id
from cuzk.gadgets.por import PathLevel
from cuzk.groth16.assignment import Assignment
from cuzk.groth16.keys import PreparedVerifyingKey, ProvingKey, VerifyingKey
from cuzk.groth16.proof import PROOF_BYTES, proofs_from_bytes, proofs_to_bytes
from cuzk.groth16.prover import prove
from cuzk.groth16.synthesis import synthesize_for_proving
from cuzk.groth16.verifier import verify_proofs_batch
from cuzk.r1cs import Circuit, ConstraintSystem, ProvingAssignment

__all__ = [
    "DENSE_SAMPLE_NODES",
    "SAMPLE_PROVER_ID",
    "CompoundError",
    "CompoundProof",
    "PartitionInstance",
    "ProofLengthError",
    "PublicInputMismatchError",
    "blank_circuit",
    "check_bytes32",
    "check_fr",
    "check_nonzero",
    "check_proof_shape",
    "path_levels",
    "path_siblings",
    "sample_compound",
    "sample_randomness",
    "sample_sector",
    "verify_partition_proofs",
]

_LAZY_EXPORTS = {
    "PorepC2": "compound_porep", "seal_public_inputs": "compound_porep", "verify_seal": "compound_porep",
    "WinningPoSt": "compound_post", "WindowPoSt": "compound_post", "fallback_post_public_inputs": "compound_post",
    "verify_winning_post": "compound_post", "verify_window_post": "compound_post",
    "SnapUpdate": "compound_snap", "update_public_inputs": "compound_snap", "verify_update": "compound_snap",
}


def __getattr__(name: str) -> Any:
    """`from cuzk.circuits.filecoin.compound import PorepC2` etc. without an import cycle."""
    module = _LAZY_EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"cuzk.circuits.filecoin.{module}"), name)


class CompoundError(CuzkError):
    """Vanilla proofs or public values from which no valid proof can be made or checked.

    The message names the partition / challenge / sector and what is wrong with it.
    """


class ProofLengthError(CompoundError):
    """Proof bytes that are not exactly partitions × 192 bytes."""


class PublicInputMismatchError(CompoundError):
    """A partition's witness exposes public inputs other than those derived from the public data:
    the vanilla proofs answer other challenges, or belong to other commitments or ids."""


# -- value checks ----------------------------------------------------------------------------------

def check_fr(value: bytes, what: str) -> int:
    """A 32-byte little-endian canonical field element as an int; CompoundError naming `what` otherwise.

    Rust's `as_safe_commitment` / `try_from_bytes` refuse non-canonical commitments and randomness;
    a circuit would silently reduce them, so they are refused here too.
    """
    x = int.from_bytes(check_bytes32(value, what), "little")
    if x >= R_MODULUS:
        raise CompoundError(f"{what} is not a canonical field element (little-endian value >= r): {bytes(value).hex()}")
    return x


def check_nonzero(value: bytes, what: str) -> None:
    """rust-fil-proofs refuses all-zero comm_d / comm_r / seed in seal_commit_phase2 and verify_seal."""
    if not any(value):
        raise CompoundError(f"invalid all-zero {what}")


def check_bytes32(value: bytes, what: str) -> bytes:
    """Any 32 bytes (tickets and seeds are only hashed, so they need not be field elements)."""
    if not isinstance(value, (bytes, bytearray)) or len(value) != 32:
        size = len(value) if isinstance(value, (bytes, bytearray)) else type(value).__name__
        raise CompoundError(f"{what} must be 32 bytes, got {size}")
    return bytes(value)


def path_levels(proof: MerkleProof) -> list[PathLevel]:
    """A vanilla Merkle path (per level: siblings and position) as the PoR gadget's witness."""
    return [PathLevel([int.from_bytes(h, "little") for h in e.hashes], e.index) for e in proof.path]


def path_siblings(proof: MerkleProof) -> list[list[int]]:
    """Only the siblings, level by level (SnapDeals takes the positions from the challenge bits)."""
    return [[int.from_bytes(h, "little") for h in e.hashes] for e in proof.path]


def check_proof_shape(proof: MerkleProof, layout: TreeLayout, what: str, registered: str) -> None:
    """Raise CompoundError if a vanilla Merkle proof cannot belong to a tree of `layout`; `registered`
    names the proof type that fixed the layout (a mismatched sector size shows up here first)."""
    problem = proof.shape_problem(layout)
    if problem:
        raise CompoundError(f"{what}: Merkle proof {problem} (as required by {registered})")


# -- blank circuits ----------------------------------------------------------------------------------

def blank_circuit(circuit_id: str) -> Circuit:
    """The key-generation circuit of a Filecoin circuit id (`porep-2k`, `winning-32g`, ...).

    Blank circuits carry no values, only the layout; bellperson's generator synthesizes exactly
    this to make `.params` (docs/circuits.md §12).
    """
    kind, size = parse_circuit_id(circuit_id)
    if kind is CircuitKind.POREP:
        return StackedCircuit.blank(StackedConfig.production(size.sector_bytes))
    if kind is CircuitKind.WINNING:
        return FallbackPoStCircuit.blank(FallbackPoStConfig.winning(size.sector_bytes))
    if kind is CircuitKind.WINDOW:
        return FallbackPoStCircuit.blank(FallbackPoStConfig.window(size.sector_bytes))
    return EmptySectorUpdateCircuit.blank(EmptySectorUpdateConfig.for_sector_size(size.sector_bytes))


# -- the shared protocol -----------------------------------------------------------------------------

@dataclass
class PartitionInstance:
    """A partition circuit together with the public inputs a verifier derives for it.

    Satisfies the `Circuit` protocol, plus `public_inputs()` like cuzk's example circuits, so the
    CLI, the engine and benchmarks can treat it as any other circuit instance.
    """

    circuit: Circuit
    inputs: list[int]

    def synthesize(self, cs: ConstraintSystem) -> None:
        self.circuit.synthesize(cs)

    def public_inputs(self) -> list[int]:
        return list(self.inputs)

    @property
    def witness_arrays(self) -> Callable[..., tuple[np.ndarray, np.ndarray]]:
        """The wrapped circuit's batched witness generator (`synthesize_compiled` uses it); an
        AttributeError, as for any circuit without one, when the wrapped circuit has none."""
        return self.circuit.witness_arrays  # type: ignore[attr-defined, no-any-return]

    @property
    def witness_shape(self) -> Callable[[], tuple[int, int]]:
        """The wrapped circuit's `witness_shape` (an AttributeError when it has none)."""
        return self.circuit.witness_shape  # type: ignore[attr-defined, no-any-return]


class CompoundProof(ABC):
    """One proof request, built from the vanilla proofs exactly as a C2 prover receives them.

    Subclasses set `circuit_id` and `partition_count` and implement the three methods below.
    """

    circuit_id: str
    partition_count: int

    @abstractmethod
    def partition_circuit(self, k: int) -> Circuit:
        """Partition k's circuit with its witness, mapped from the vanilla proofs."""

    @abstractmethod
    def public_inputs(self, k: int) -> list[int]:
        """Partition k's public inputs (ONE excluded), derived from public data only."""

    @abstractmethod
    def witness_public_inputs(self, k: int) -> list[int]:
        """The inputs partition k's witness will allocate, read off the vanilla proofs without
        synthesis (path indices are the opened leaves): a cheap pre-check against `public_inputs`."""

    def blank_circuit(self) -> Circuit:
        """The key-generation circuit of this proof's parameter set."""
        return blank_circuit(self.circuit_id)

    def instance(self, k: int) -> PartitionInstance:
        return PartitionInstance(self.partition_circuit(k), self.public_inputs(k))

    def _check_k(self, k: int) -> None:
        if not 0 <= k < self.partition_count:
            raise CompoundError(f"{self.circuit_id}: partition {k} out of range (the proof has "
                                f"{self.partition_count} partition(s))")

    def mismatches(self, k: int) -> list[int]:
        """Positions where the witness's inputs differ from the derived ones (empty = consistent)."""
        return _differences(self.witness_public_inputs(k), self.public_inputs(k))

    def synthesize_partition(self, k: int, *, check: bool = False) -> ProvingAssignment:
        """Synthesize partition k for proving and refuse a witness whose allocated public inputs
        differ from `public_inputs(k)` (it could only yield a proof that fails verification).

        `check=True` also evaluates every constraint as it is emitted (SynthesisError at the first
        unsatisfied one).
        """
        self._check_k(k)
        expected = self.public_inputs(k)
        cs = synthesize_for_proving(self.partition_circuit(k), check=check)
        allocated = list(cs.input_assignment[1:])
        diff = _differences(allocated, expected)
        if diff:
            shown = ", ".join(str(i) for i in diff[:8]) + (" ..." if len(diff) > 8 else "")
            raise PublicInputMismatchError(
                f"{self.circuit_id} partition {k}: the witness allocates public inputs that differ from the ones "
                f"derived from the public data at {len(diff)} position(s) ({shown}); the vanilla proofs do not "
                "answer these challenges for these commitments")
        return cs

    def prove(self, pk: ProvingKey, *, check: bool = False,
              timings: MutableMapping[str, float] | None = None) -> bytes:
        """All partition proofs, concatenated in partition order (what C2 returns).

        `timings` (seconds, summed over partitions) receives `synthesis` and the prover's phases.
        """
        proofs = []
        for k in range(self.partition_count):
            start = time.perf_counter()
            asg = Assignment.from_proving_assignment(self.synthesize_partition(k, check=check))
            phases = {"synthesis": time.perf_counter() - start}
            proofs.append(prove(pk, asg, timings=phases))
            if timings is not None:
                for name, seconds in phases.items():
                    timings[name] = timings.get(name, 0.0) + seconds
        return proofs_to_bytes(proofs)


def _differences(a: Sequence[int], b: Sequence[int]) -> list[int]:
    n = min(len(a), len(b))
    return [i for i in range(n) if a[i] != b[i]] + list(range(n, max(len(a), len(b))))


# -- instances from fresh test sectors ----------------------------------------------------------------

#: prover_id of test sectors: actor id 1000 as unsigned LEB128, zero-padded (as in Curio's examples).
SAMPLE_PROVER_ID = bytes([0xE8, 0x07]) + bytes(30)
#: Above this many nodes test sectors are sparse: dense sealing of 8MiB already takes ~30 s here.
DENSE_SAMPLE_NODES = 1 << 6


def sample_sector(size: SectorParams, seed: int, sector_id: int = 1) -> Any:
    """A sealed V1_1 test sector with tree_r_last, comm_c and comm_r: dense for 2KiB, sparse beyond.

    Sparse sectors (cuzk.filecoin.sparse) prove any tree_r_last leaf, which is all PoSt and
    SnapDeals need; their PoRep challenges are fixed by the seed, see `PorepC2.sample`.
    """
    from cuzk.filecoin.porep import random_sector_data, seal
    from cuzk.filecoin.sizes import seal_proof
    from cuzk.filecoin.sparse import sparse_sector

    proof = seal_proof(size.index + 5)
    ticket = hashlib.sha256(b"cuzk test ticket" + seed.to_bytes(8, "little")).digest()
    if size.nodes <= DENSE_SAMPLE_NODES:
        return seal(proof, random_sector_data(size.nodes, seed), SAMPLE_PROVER_ID, sector_id, ticket)
    randomness = hashlib.sha256(b"cuzk test seed" + seed.to_bytes(8, "little")).digest()
    return sparse_sector(proof, seed=seed, prover_id=SAMPLE_PROVER_ID, sector_id=sector_id, ticket=ticket,
                         seed_randomness=randomness)


def sample_randomness(seed: int) -> bytes:
    """32 bytes of chain-like randomness, top two bits cleared as Lotus/Curio do (a canonical Fr)."""
    digest = bytearray(hashlib.sha256(b"cuzk test randomness" + seed.to_bytes(8, "little")).digest())
    digest[31] &= 0x3F
    return bytes(digest)


def sample_compound(circuit_id: str, seed: int = 0) -> CompoundProof:
    """The compound proof of a Filecoin circuit id over fresh vanilla proofs of a test sector."""
    kind, size = parse_circuit_id(circuit_id)
    module, cls = {CircuitKind.POREP: ("compound_porep", "PorepC2"),
                   CircuitKind.WINNING: ("compound_post", "WinningPoSt"),
                   CircuitKind.WINDOW: ("compound_post", "WindowPoSt"),
                   CircuitKind.SNAP: ("compound_snap", "SnapUpdate")}[kind]
    return getattr(importlib.import_module(f"cuzk.circuits.filecoin.{module}"), cls).sample(size, seed=seed)


# -- verification ------------------------------------------------------------------------------------

def verify_partition_proofs(vk: VerifyingKey | PreparedVerifyingKey, proof_bytes: bytes, inputs: list[list[int]],
                            what: str) -> bool:
    """Batch-verify P concatenated partition proofs against per-partition public inputs.

    The length must be exactly P·192 bytes (bellperson's `MultiProof::new_from_reader` refuses
    anything else); points must decode (FormatError otherwise). A false result means at least one
    partition proof does not verify.
    """
    count = len(inputs)
    if not isinstance(proof_bytes, (bytes, bytearray)) or len(proof_bytes) != count * PROOF_BYTES:
        got = len(proof_bytes) if isinstance(proof_bytes, (bytes, bytearray)) else type(proof_bytes).__name__
        raise ProofLengthError(f"{what}: a proof of {count} partition(s) is {count * PROOF_BYTES} bytes "
                               f"({count} × {PROOF_BYTES}), got {got}")
    proofs = proofs_from_bytes(bytes(proof_bytes), expected=count, source=what)
    return verify_proofs_batch(vk, proofs, inputs)
