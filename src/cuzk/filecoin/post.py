"""Fallback PoSt (WinningPoSt / WindowPoSt) vanilla proofs: types, bincode, generation, verification.

A PoSt vanilla proof opens tree_r_last of a sealed sector at leaves derived from the chain randomness
(docs/circuits.md §9). The FFI exchanges one `FallbackPoStSectorProof` per sector as bincode
(docs/formats.md §5); those bytes are what a PoSt C2 consumes, so they are the unit here.

Any sealed sector works as input — dense (2KiB, 8MiB) or sparse (32GiB, 64GiB): PoSt only opens
tree_r_last, and a sparse tree proves any leaf.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from cuzk.errors import CuzkError
from cuzk.filecoin.challenges import post_sector_challenges, winning_sector_challenge
from cuzk.filecoin.codec import BincodeReader, BincodeWriter
from cuzk.filecoin.merkle import POSEIDON, DenseTree, MerkleProof, SparseTree, TreeLayout, compute_roots
from cuzk.filecoin.porep import comm_r_of
from cuzk.filecoin.sha256 import check_fr_bytes
from cuzk.filecoin.sizes import CircuitKind, RegisteredPoStProof, SectorParams

__all__ = [
    "FallbackPoStSectorProof",
    "ReplicaView",
    "SectorProof",
    "post_sector_proof",
    "verify_post_vanilla",
    "window_post_vanilla",
    "winning_post_vanilla",
]


class ReplicaView(Protocol):
    """What PoSt needs of a sealed sector: tree_r_last and the commitments."""

    tree_r: DenseTree | SparseTree

    @property
    def comm_c(self) -> bytes: ...

    @property
    def comm_r_last(self) -> bytes: ...

    @property
    def comm_r(self) -> bytes: ...


@dataclass(frozen=True)
class SectorProof:
    """Openings of one sector's tree_r_last at its challenged leaves."""

    inclusion_proofs: tuple[MerkleProof, ...]
    comm_c: bytes
    comm_r_last: bytes


@dataclass(frozen=True)
class FallbackPoStSectorProof:
    """filecoin-proofs FallbackPoStSectorProof: the FFI's per-sector PoSt vanilla proof."""

    sector_id: int
    comm_r: bytes
    sectors: tuple[SectorProof, ...]  #: vanilla_proof.sectors (one entry in FFI proofs)

    def to_bincode(self) -> bytes:
        w = BincodeWriter()
        w.u64(self.sector_id)
        w.bytes32(self.comm_r)
        w.u64(len(self.sectors))
        for s in self.sectors:
            w.u64(len(s.inclusion_proofs))
            for p in s.inclusion_proofs:
                p.write_bincode(w)
            w.bytes32(s.comm_c)
            w.bytes32(s.comm_r_last)
        return w.getvalue()

    @classmethod
    def from_bincode(cls, data: bytes, size: SectorParams, source: str = "<PoSt vanilla proof>",
                     challenges: int | None = None) -> FallbackPoStSectorProof:
        """Decode; tree_r proof shapes are checked against `size`, and the count against `challenges` if given."""
        r = BincodeReader(data, source)
        layout = TreeLayout.tree_r(size)
        sector_id = r.u64("sector_id")
        comm_r = r.fr("comm_r")
        sectors = []
        for i in range(r.length("vanilla_proof.sectors.len")):
            at = f"vanilla_proof.sectors[{i}]"
            n = r.length(f"{at}.inclusion_proofs.len", challenges)
            proofs = tuple(MerkleProof.read_bincode(r, f"{at}.inclusion_proofs[{j}]", layout) for j in range(n))
            sectors.append(SectorProof(proofs, r.fr(f"{at}.comm_c"), r.fr(f"{at}.comm_r_last")))
        r.finish()
        return cls(sector_id, comm_r, tuple(sectors))


def post_sector_proof(replica: ReplicaView, sector_id: int, challenges: list[int]) -> FallbackPoStSectorProof:
    """`generate_single_vanilla_proof`: open tree_r_last at `challenges`."""
    proofs = tuple(replica.tree_r.proof(c) for c in challenges)
    return FallbackPoStSectorProof(sector_id, replica.comm_r,
                                   (SectorProof(proofs, replica.comm_c, replica.comm_r_last),))


def _check_randomness(randomness: bytes) -> bytes:
    return check_fr_bytes(randomness, field="randomness")


def winning_post_vanilla(proof: RegisteredPoStProof, replicas: dict[int, ReplicaView], randomness: bytes,
                         prover_id: bytes) -> list[FallbackPoStSectorProof]:
    """WinningPoSt: select one of the eligible sectors (sorted sector ids), prove 66 leaf challenges."""
    if proof.kind is not CircuitKind.WINNING:
        raise CuzkError(f"{proof.name} is not a WinningPoSt proof")
    _check_randomness(randomness)
    eligible = sorted(replicas)
    if not eligible:
        raise CuzkError("WinningPoSt needs at least one sector")
    chosen = eligible[winning_sector_challenge(randomness, prover_id, 0, len(eligible))]
    challenges = post_sector_challenges(proof, randomness, [chosen])[chosen]
    return [post_sector_proof(replicas[chosen], chosen, challenges)]


def window_post_vanilla(proof: RegisteredPoStProof, replicas: dict[int, ReplicaView],
                        randomness: bytes) -> list[FallbackPoStSectorProof]:
    """WindowPoSt: every sector (in the given order), 10 leaf challenges each."""
    if proof.kind is not CircuitKind.WINDOW:
        raise CuzkError(f"{proof.name} is not a WindowPoSt proof")
    _check_randomness(randomness)
    ids = list(replicas)
    challenges = post_sector_challenges(proof, randomness, ids)
    return [post_sector_proof(replicas[s], s, challenges[s]) for s in ids]


def verify_post_vanilla(proof: RegisteredPoStProof, randomness: bytes, proofs: list[FallbackPoStSectorProof],
                        *, sector_ids: list[int] | None = None,
                        comm_rs: dict[int, bytes] | None = None) -> list[str]:
    """Problems with a list of per-sector PoSt vanilla proofs (empty = valid).

    Challenges are derived from the proofs' sector ids in list order (or `sector_ids`, the order the
    challenged sectors were given in); `comm_rs` (sector id -> comm_r, e.g. from the chain) is checked too.
    """
    problems: list[str] = []
    try:
        _check_randomness(randomness)
    except CuzkError as err:
        return [str(err)]
    ids = sector_ids if sector_ids is not None else [p.sector_id for p in proofs]
    challenges = post_sector_challenges(proof, randomness, ids)
    layout = TreeLayout.tree_r(proof.size)
    batch: list[MerkleProof] = []
    names: list[str] = []
    for p in proofs:
        where = f"sector {p.sector_id}"
        if p.sector_id not in challenges:
            problems.append(f"{where}: not among the challenged sectors")
            continue
        if comm_rs is not None and comm_rs.get(p.sector_id) != p.comm_r:
            problems.append(f"{where}: comm_r differs from the expected one")
        if len(p.sectors) != 1:
            problems.append(f"{where}: {len(p.sectors)} sector proofs, expected 1")
            continue
        s = p.sectors[0]
        if comm_r_of(s.comm_c, s.comm_r_last) != p.comm_r:
            problems.append(f"{where}: comm_r is not Poseidon_2(comm_c, comm_r_last)")
        expected = challenges[p.sector_id]
        if len(s.inclusion_proofs) != len(expected):
            problems.append(f"{where}: {len(s.inclusion_proofs)} inclusion proofs, expected {len(expected)}")
        for n, (mp, c) in enumerate(zip(s.inclusion_proofs, expected, strict=False)):
            at = f"{where} challenge {n} (leaf {c})"
            shape = mp.shape_problem(layout)
            if shape:
                problems.append(f"{at}: proof {shape}")
                continue
            if mp.path_index != c:
                problems.append(f"{at}: proof opens leaf {mp.path_index}")
            if mp.root != s.comm_r_last:
                problems.append(f"{at}: proof root is not comm_r_last")
            batch.append(mp)
            names.append(at)
    for mp, at, root in zip(batch, names, compute_roots(batch, POSEIDON), strict=True):
        if root != mp.root:
            problems.append(f"{at}: path does not hash to its root")
    return problems
