"""WinningPoSt and WindowPoSt as compound proofs: per-sector vanilla proofs in, FallbackPoStCircuit
partitions out, and `verify_winning_post` / `verify_window_post` (docs/circuits.md §9, §12).

What the FFI hands a PoSt prover is one `FallbackPoStSectorProof` per challenged sector (its id,
comm_r and the tree_r_last openings). The circuit is laid out differently per kind:

* WinningPoSt (`generate_winning_post_with_vanilla`): one real sector with 66 openings becomes 66
  circuit "sectors" of one opening each, all with the sector's comm_r / comm_c / comm_r_last; the
  verifier lists the sector 66 times, so circuit sector i is challenged with index i.
* WindowPoSt (`generate_window_post_with_vanilla` / `generate_single_window_post_with_vanilla`):
  the sectors are chunked by `sector_count` per partition; a short last chunk repeats its last
  sector, in the witness and in the public inputs.

Public inputs are `FallbackPoStCompound::generate_public_inputs`: per circuit sector its comm_r,
then its leaf challenges recomputed from the randomness, the sector id and the challenge index —
sector_index·challenge_count + n for api V1_0_0 / V1_1_0, just n for V1_2_0 (on-chain WindowPoSt
"V1_1", the grindability fix) — never read from the vanilla paths.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from cuzk.circuits.filecoin.compound import (
    SAMPLE_PROVER_ID,
    CompoundError,
    CompoundProof,
    check_fr,
    check_proof_shape,
    path_levels,
    sample_randomness,
    sample_sector,
    verify_partition_proofs,
)
from cuzk.circuits.filecoin.post import FallbackPoStCircuit, FallbackPoStConfig, PoStSector, post_public_inputs
from cuzk.field.limbs import limbs_to_int
from cuzk.filecoin.challenges import post_challenge_index, post_leaf_challenge
from cuzk.filecoin.merkle import TreeLayout
from cuzk.filecoin.post import FallbackPoStSectorProof, SectorProof, window_post_vanilla, winning_post_vanilla
from cuzk.filecoin.post_arrays import PoStOpenings, decode_sector_proofs
from cuzk.filecoin.sizes import CircuitKind, RegisteredPoStProof, SectorParams, circuit_id, post_proof
from cuzk.groth16.keys import PreparedVerifyingKey, VerifyingKey

__all__ = [
    "WindowPoSt",
    "WinningPoSt",
    "fallback_post_public_inputs",
    "verify_window_post",
    "verify_winning_post",
]

_U64 = 1 << 64


def _registered(registered_proof: RegisteredPoStProof | int | str, kind: CircuitKind) -> RegisteredPoStProof:
    proof = registered_proof if isinstance(registered_proof, RegisteredPoStProof) else post_proof(registered_proof)
    if proof.kind is not kind:
        word = "WinningPoSt" if kind is CircuitKind.WINNING else "WindowPoSt"
        raise CompoundError(f"{proof.name} is not a {word} proof")
    return proof


def _config(proof: RegisteredPoStProof) -> FallbackPoStConfig:
    """The circuit of one partition: Winning 66 sectors × 1 challenge, Window S sectors × 10."""
    size = proof.size.sector_bytes
    return FallbackPoStConfig.winning(size) if proof.kind is CircuitKind.WINNING else FallbackPoStConfig.window(size)


def _check_public(randomness: bytes, prover_id: bytes) -> None:
    """Rust's `as_safe_commitment`: randomness and prover_id must be canonical field elements."""
    check_fr(randomness, "randomness")
    check_fr(prover_id, "prover_id")


def _chunk_inputs(proof: RegisteredPoStProof, randomness: bytes, chunk: Sequence[tuple[int, bytes]],
                  partition_index: int) -> list[int]:
    """Inputs of one partition whose public sectors are `chunk` and whose global index is
    `partition_index` (it fixes the V1_0_0 / V1_1_0 challenge indices)."""
    config = _config(proof)
    if not chunk:
        raise CompoundError(f"{proof.name}: partition {partition_index} has no sectors")
    entries = []
    for i, (sector_id, comm_r) in enumerate(chunk):
        if not isinstance(sector_id, int) or not 0 <= sector_id < _U64:
            raise CompoundError(f"sector id must be a u64, got {sector_id!r}")
        sector_index = partition_index * config.sector_count + i
        challenges = [post_leaf_challenge(proof.size.sector_bytes, randomness, sector_id,
                                          post_challenge_index(proof.api_version, sector_index, config.challenge_count,
                                                               n))
                      for n in range(config.challenge_count)]
        entries.append((check_fr(comm_r, f"comm_r of sector {sector_id}"), challenges))
    return post_public_inputs(entries, config.sector_count, 0)


def fallback_post_public_inputs(registered_proof: RegisteredPoStProof | int | str, *, randomness: bytes,
                                sectors: Sequence[tuple[int, bytes]], k: int) -> list[int]:
    """`FallbackPoStCompound::generate_public_inputs` for partition k (ONE excluded).

    `sectors` is the public sector list (sector id, comm_r) as the verifier holds it: WindowPoSt's
    sectors in ascending id order; WinningPoSt's single sector repeated 66 times.
    """
    proof = registered_proof if isinstance(registered_proof, RegisteredPoStProof) else post_proof(registered_proof)
    check_fr(randomness, "randomness")
    per = _config(proof).sector_count
    chunk = list(sectors[k * per:(k + 1) * per]) if k >= 0 else []
    if not chunk:
        raise CompoundError(f"{proof.name}: partition {k} is empty ({len(sectors)} sectors, {per} per partition)")
    return _chunk_inputs(proof, randomness, chunk, k)


def _check_sector_proof(sp: FallbackPoStSectorProof, proof: RegisteredPoStProof, challenges: int) -> SectorProof:
    """One FFI sector proof: one SectorProof with `challenges` openings whose roots are its comm_r_last."""
    where = f"sector {sp.sector_id}"
    layout = TreeLayout.tree_r(proof.size)
    registered = f"{proof.name}, for {proof.size.name} sectors"
    if not isinstance(sp.sector_id, int) or not 0 <= sp.sector_id < _U64:
        raise CompoundError(f"sector id must be a u64, got {sp.sector_id!r}")
    check_fr(sp.comm_r, f"{where}: comm_r")
    if len(sp.sectors) != 1:
        raise CompoundError(f"{where}: the vanilla proof holds {len(sp.sectors)} sector proofs, expected 1")
    s = sp.sectors[0]
    check_fr(s.comm_c, f"{where}: comm_c")
    check_fr(s.comm_r_last, f"{where}: comm_r_last")
    if len(s.inclusion_proofs) != challenges:
        raise CompoundError(f"{where}: {len(s.inclusion_proofs)} inclusion proofs, expected {challenges}")
    for n, mp in enumerate(s.inclusion_proofs):
        check_proof_shape(mp, layout, f"{where} challenge {n}", registered)
        if mp.root != s.comm_r_last:
            raise CompoundError(f"{where} challenge {n}: inconsistent roots: the inclusion proof's root is not the "
                                "sector's comm_r_last")
    return s


def _circuit_sector(sp: FallbackPoStSectorProof, openings: Sequence[int]) -> PoStSector:
    s = sp.sectors[0]
    proofs = [s.inclusion_proofs[n] for n in openings]
    return PoStSector(int.from_bytes(sp.comm_r, "little"), int.from_bytes(s.comm_c, "little"),
                      int.from_bytes(s.comm_r_last, "little"), [int.from_bytes(p.leaf, "little") for p in proofs],
                      [path_levels(p) for p in proofs])


@dataclass
class WinningPoSt(CompoundProof):
    """`generate_winning_post_with_vanilla`: one sector, 66 openings, one partition."""

    registered_proof: RegisteredPoStProof
    randomness: bytes
    prover_id: bytes
    sector_proof: FallbackPoStSectorProof
    config: FallbackPoStConfig

    @property
    def circuit_id(self) -> str:  # type: ignore[override]
        return circuit_id(CircuitKind.WINNING, self.registered_proof.size)

    @property
    def partition_count(self) -> int:  # type: ignore[override]
        return 1

    @classmethod
    def from_vanilla(cls, sector_proofs: Sequence[FallbackPoStSectorProof], *,
                     registered_proof: RegisteredPoStProof | int | str, randomness: bytes,
                     prover_id: bytes) -> WinningPoSt:
        proof = _registered(registered_proof, CircuitKind.WINNING)
        _check_public(randomness, prover_id)
        if len(sector_proofs) != proof.sector_count:
            raise CompoundError(f"{proof.name}: {len(sector_proofs)} sector proofs, expected {proof.sector_count} "
                                "(WinningPoSt proves the one selected sector)")
        config = _config(proof)
        sp = sector_proofs[0]
        _check_sector_proof(sp, proof, config.sector_count * config.challenge_count)
        return cls(proof, bytes(randomness), bytes(prover_id), sp, config)

    @classmethod
    def sample(cls, size: SectorParams, *, seed: int = 0) -> WinningPoSt:
        """Over fresh vanilla proofs of one test sector (StackedDrgWinning<size>V1)."""
        proof = post_proof(size.index)
        randomness = sample_randomness(seed)
        vanilla = winning_post_vanilla(proof, {1: sample_sector(size, seed)}, randomness, SAMPLE_PROVER_ID)
        return cls.from_vanilla(vanilla, registered_proof=proof, randomness=randomness, prover_id=SAMPLE_PROVER_ID)

    def partition_circuit(self, k: int) -> FallbackPoStCircuit:
        self._check_k(k)
        return FallbackPoStCircuit(self.config, [_circuit_sector(self.sector_proof, [i])
                                                 for i in range(self.config.sector_count)])

    def public_inputs(self, k: int) -> list[int]:
        self._check_k(k)
        sp = self.sector_proof
        return fallback_post_public_inputs(self.registered_proof, randomness=self.randomness,
                                           sectors=[(sp.sector_id, sp.comm_r)] * self.config.sector_count, k=0)

    def witness_public_inputs(self, k: int) -> list[int]:
        self._check_k(k)
        comm_r = int.from_bytes(self.sector_proof.comm_r, "little")
        out: list[int] = []
        for mp in self.sector_proof.sectors[0].inclusion_proofs:
            out += [comm_r, mp.path_index]
        return out


@dataclass
class WindowPoSt(CompoundProof):
    """`generate_window_post_with_vanilla` (all sectors, `first_partition` 0) or, with a
    `partition_index`, `generate_single_window_post_with_vanilla` (one partition's sectors)."""

    registered_proof: RegisteredPoStProof
    randomness: bytes
    prover_id: bytes
    openings: PoStOpenings  #: the sector proofs as arrays (`cuzk.filecoin.post_arrays`)
    config: FallbackPoStConfig
    first_partition: int  #: global index of this object's partition 0
    partitions: int

    @property
    def circuit_id(self) -> str:  # type: ignore[override]
        return circuit_id(CircuitKind.WINDOW, self.registered_proof.size)

    @property
    def partition_count(self) -> int:  # type: ignore[override]
        return self.partitions

    @classmethod
    def from_vanilla(cls, sector_proofs: Sequence[FallbackPoStSectorProof] | PoStOpenings, *,
                     registered_proof: RegisteredPoStProof | int | str, randomness: bytes, prover_id: bytes,
                     partition_index: int | None = None) -> WindowPoSt:
        """Sector proofs must be in ascending sector id order, as `verify_window_post` lists the
        sectors (a BTreeMap): any other order yields other public inputs. `PoStOpenings` (the
        daemon's decoding, `decode_sector_proofs`) were checked as they were decoded."""
        proof = _registered(registered_proof, CircuitKind.WINDOW)
        _check_public(randomness, prover_id)
        config = _config(proof)
        layout = TreeLayout.tree_r(proof.size)
        if isinstance(sector_proofs, PoStOpenings):
            openings = sector_proofs
            if openings.challenges != config.challenge_count or openings.layout != layout:
                raise CompoundError(f"{proof.name}: openings of {openings.challenges} challenges of a "
                                    f"{openings.layout.arities} tree, expected {config.challenge_count} of "
                                    f"{layout.arities}")
        else:
            if not sector_proofs:
                raise CompoundError(f"{proof.name}: no sector proofs")
            for sp in sector_proofs:
                _check_sector_proof(sp, proof, config.challenge_count)
            decoded = decode_sector_proofs([sp.to_bincode() for sp in sector_proofs], layout, config.challenge_count)
            if decoded is None:  # pragma: no cover - what _check_sector_proof accepts decodes
                raise CompoundError(f"{proof.name}: the sector proofs do not decode as arrays")
            openings = decoded
        if openings.count == 0:
            raise CompoundError(f"{proof.name}: no sector proofs")
        ids = [int(i) for i in openings.sector_ids]
        for a, b in itertools.pairwise(ids):
            if b <= a:
                problem = "duplicate sector" if a == b else "sectors out of order"
                raise CompoundError(f"{proof.name}: {problem} ({a} then {b}); sector proofs must be in strictly "
                                    "ascending sector id order, as the verifier lists them")
        per = config.sector_count
        if partition_index is None:
            first, partitions = 0, -(-openings.count // per)
        else:
            if not isinstance(partition_index, int) or partition_index < 0:
                raise CompoundError(f"partition index must be a non-negative integer, got {partition_index!r}")
            if openings.count > per:
                raise CompoundError(f"{proof.name}: {openings.count} sector proofs for one partition, at most "
                                    f"{per} fit")
            first, partitions = partition_index, 1
        return cls(proof, bytes(randomness), bytes(prover_id), openings, config, first, partitions)

    @classmethod
    def sample(cls, size: SectorParams, *, seed: int = 0, sectors: int = 2) -> WindowPoSt:
        """Over fresh vanilla proofs of `sectors` sector ids sharing one test sector
        (StackedDrgWindow<size>V1_2, i.e. on-chain V1_1)."""
        proof = post_proof(size.index + 10)
        randomness = sample_randomness(seed)
        sector = sample_sector(size, seed)
        vanilla = window_post_vanilla(proof, {sid: sector for sid in range(1, sectors + 1)}, randomness)
        return cls.from_vanilla(vanilla, registered_proof=proof, randomness=randomness, prover_id=SAMPLE_PROVER_ID)

    def _chunk(self, k: int) -> range:
        """The rows of partition k's sectors in `openings`."""
        self._check_k(k)
        per = self.config.sector_count
        return range(k * per, min((k + 1) * per, self.openings.count))

    def partition_circuit(self, k: int) -> FallbackPoStCircuit:
        rows = list(self._chunk(k))
        rows += [rows[-1]] * (self.config.sector_count - len(rows))  # a short chunk repeats its last sector
        return FallbackPoStCircuit(self.config, openings=self.openings.take(rows))

    def public_inputs(self, k: int) -> list[int]:
        o = self.openings
        chunk = [(int(o.sector_ids[i]), o.comm_r[i].tobytes()) for i in self._chunk(k)]
        return _chunk_inputs(self.registered_proof, self.randomness, chunk, self.first_partition + k)

    def witness_public_inputs(self, k: int) -> list[int]:
        o = self.openings
        indices = o.leaf_indices()
        groups = [[limbs_to_int(o.comm_r[i]), *map(int, indices[i])] for i in self._chunk(k)]
        groups += [groups[-1]] * (self.config.sector_count - len(groups))
        return [x for g in groups for x in g]


def verify_winning_post(vk: VerifyingKey | PreparedVerifyingKey, proof_bytes: bytes, *,
                        registered_proof: RegisteredPoStProof | int | str, randomness: bytes, prover_id: bytes,
                        replicas: Mapping[int, bytes]) -> bool:
    """filecoin-proofs `verify_winning_post`: `replicas` maps the one challenged sector's id to its
    comm_r; the proof is one partition (192 bytes), its sector listed 66 times."""
    proof = _registered(registered_proof, CircuitKind.WINNING)
    _check_public(randomness, prover_id)
    if len(replicas) != proof.sector_count:
        raise CompoundError(f"{proof.name}: {len(replicas)} replicas given, WinningPoSt verifies exactly "
                            f"{proof.sector_count}")
    ((sector_id, comm_r),) = replicas.items()
    sectors = [(sector_id, comm_r)] * _config(proof).sector_count
    inputs = [fallback_post_public_inputs(proof, randomness=randomness, sectors=sectors, k=0)]
    return verify_partition_proofs(vk, proof_bytes, inputs, f"{proof.name} proof")


def verify_window_post(vk: VerifyingKey | PreparedVerifyingKey, proof_bytes: bytes, *,
                       registered_proof: RegisteredPoStProof | int | str, randomness: bytes, prover_id: bytes,
                       replicas: Mapping[int, bytes]) -> bool:
    """filecoin-proofs `verify_window_post`: `replicas` (sector id → comm_r) is taken in ascending
    id order and chunked into P = ceil(n / sector_count) partitions; the proof is P·192 bytes."""
    proof = _registered(registered_proof, CircuitKind.WINDOW)
    _check_public(randomness, prover_id)
    if not replicas:
        raise CompoundError(f"{proof.name}: no replicas to verify")
    sectors = sorted(replicas.items())
    per = _config(proof).sector_count
    inputs = [fallback_post_public_inputs(proof, randomness=randomness, sectors=sectors, k=k)
              for k in range(-(-len(sectors) // per))]
    return verify_partition_proofs(vk, proof_bytes, inputs, f"{proof.name} proof")
