"""Sector proofs decoded as arrays (`cuzk.filecoin.post_arrays`) hold what the per-proof decoder
reads, and any blob the per-proof decoder would refuse makes the batch decode to None."""

from __future__ import annotations

import numpy as np
import pytest

from cuzk.circuits.filecoin.compound import CompoundError
from cuzk.circuits.filecoin.compound_post import WindowPoSt
from cuzk.field.constants import R_MODULUS
from cuzk.filecoin.merkle import TreeLayout
from cuzk.filecoin.porep import SealedSector, random_sector_data, seal
from cuzk.filecoin.post import FallbackPoStSectorProof, window_post_vanilla
from cuzk.filecoin.post_arrays import PoStOpenings, decode_sector_proofs
from cuzk.filecoin.sizes import post_proof, seal_proof
from cuzk.filecoin.sparse import sparse_sector

PROVER = bytes(range(32))
RANDOMNESS = bytes(range(31)) + b"\x1f"


@pytest.fixture(scope="module")
def sector_2k() -> SealedSector:
    return seal(seal_proof(5), random_sector_data(64, 11), PROVER, 7, bytes(32))


def _limbs(value: bytes) -> list[int]:
    return list(np.frombuffer(value, "<u8"))


def _assert_matches(openings: PoStOpenings, proofs: list[FallbackPoStSectorProof]) -> None:
    assert openings.count == len(proofs)
    for i, sp in enumerate(proofs):
        s = sp.sectors[0]
        assert int(openings.sector_ids[i]) == sp.sector_id
        assert list(openings.comm_r[i]) == _limbs(sp.comm_r)
        assert list(openings.comm_c[i]) == _limbs(s.comm_c)
        assert list(openings.comm_r_last[i]) == _limbs(s.comm_r_last)
        for n, mp in enumerate(s.inclusion_proofs):
            assert list(openings.leaves[i, n]) == _limbs(mp.leaf)
            siblings = [v for e in mp.path for v in e.hashes]
            assert [list(v) for v in openings.siblings[i, n]] == [_limbs(v) for v in siblings]
            assert list(openings.positions[i, n]) == [e.index for e in mp.path]
            assert int(openings.leaf_indices()[i, n]) == mp.path_index


def test_2kib_proofs_decode_as_the_per_proof_decoder_reads_them(sector_2k: SealedSector) -> None:
    proof = post_proof(10)
    vanilla = window_post_vanilla(proof, {3: sector_2k, 5: sector_2k, 9: sector_2k}, RANDOMNESS)
    layout = TreeLayout.tree_r(proof.size)
    openings = decode_sector_proofs([sp.to_bincode() for sp in vanilla], layout, proof.challenge_count)
    assert openings is not None and openings.layout == layout and openings.challenges == proof.challenge_count
    _assert_matches(openings, vanilla)
    rows = openings.take([2, 0, 0])
    assert list(rows.sector_ids) == [9, 3, 3] and (rows.leaves[1] == openings.leaves[0]).all()


@pytest.mark.parametrize(("size", "kind"), [("32GiB", "Sub"), ("64GiB", "Top")])
def test_sub_and_top_tree_proofs_decode_as_read(size: str, kind: str) -> None:
    """The layouts WindowPoSt-32GiB and -64GiB partitions carry: base and sub paths, and a top path."""
    proof = post_proof(f"StackedDrgWindow{size}V1_2")
    sector = sparse_sector(seal_proof(f"StackedDrg{size}V1_1"), seed=4, prover_id=PROVER, sector_id=1,
                           ticket=bytes(32), seed_randomness=bytes(32))
    vanilla = window_post_vanilla(proof, {1: sector, 4: sector}, RANDOMNESS)
    layout = TreeLayout.tree_r(proof.size)
    assert layout.kind == kind
    openings = decode_sector_proofs([sp.to_bincode() for sp in vanilla], layout, proof.challenge_count)
    assert openings is not None
    _assert_matches(openings, vanilla)


def _with(blob: bytes, at: int, value: bytes) -> bytes:
    return blob[:at] + value + blob[at + len(value):]


def test_any_blob_the_per_proof_decoder_refuses_fails_the_batch(sector_2k: SealedSector) -> None:
    proof = post_proof(10)
    layout, challenges = TreeLayout.tree_r(proof.size), proof.challenge_count
    good = [sp.to_bincode() for sp in window_post_vanilla(proof, {3: sector_2k, 5: sector_2k}, RANDOMNESS)]
    assert decode_sector_proofs(good, layout, challenges) is not None
    p = R_MODULUS.to_bytes(32, "little")
    comm_c_at = len(good[1]) - 64
    first_position = 8 + 32 + 8 + 8 + 4 + 64 + 8 + 8 + 32 * (layout.arities[0] - 1)
    bad = {
        "empty batch": [],
        "a short blob": [good[0], good[1][:-1]],
        "another challenge count": [good[0], good[1] + bytes(8)],
        "a sector count of two": [good[0], _with(good[1], 40, (2).to_bytes(8, "little"))],
        "a comm_c equal to the modulus": [good[0], _with(good[1], comm_c_at, p)],
        "a comm_r above the modulus": [good[0], _with(good[1], 8, b"\xff" * 32)],
        "a position past its arity": [good[0], _with(good[1], first_position, layout.arities[0].to_bytes(8, "little"))],
        "a root other than comm_r_last": [good[0], _with(good[1], 8 + 32 + 8 + 8 + 4, bytes(32))],
    }
    for problem, blobs in bad.items():
        assert decode_sector_proofs(blobs, layout, challenges) is None, problem
    # what the offsets above point at, read back through the per-proof decoder
    tampered = FallbackPoStSectorProof.from_bincode(_with(good[1], first_position, (1).to_bytes(8, "little")),
                                                    proof.size, challenges=challenges)
    assert tampered.sectors[0].inclusion_proofs[0].path[0].index == 1


def test_window_post_from_arrays_equals_from_objects(sector_2k: SealedSector) -> None:
    proof = post_proof(10)
    vanilla = window_post_vanilla(proof, {7: sector_2k, 8: sector_2k, 9: sector_2k}, RANDOMNESS)
    openings = decode_sector_proofs([sp.to_bincode() for sp in vanilla], TreeLayout.tree_r(proof.size),
                                    proof.challenge_count)
    assert openings is not None
    common = {"registered_proof": proof, "randomness": RANDOMNESS, "prover_id": PROVER}
    from_objects = WindowPoSt.from_vanilla(vanilla, **common)
    from_arrays = WindowPoSt.from_vanilla(openings, **common)
    for k in range(from_arrays.partition_count):
        assert from_arrays.public_inputs(k) == from_objects.public_inputs(k)
        assert from_arrays.witness_public_inputs(k) == from_objects.witness_public_inputs(k)
        aux = from_arrays.partition_circuit(k).witness_arrays()
        assert all((a == b).all() for a, b in zip(aux, from_objects.partition_circuit(k).witness_arrays(), strict=True))
    with pytest.raises(CompoundError, match="sectors out of order"):
        WindowPoSt.from_vanilla(openings.take([1, 0]), **common)
    other = PoStOpenings(TreeLayout.tree_r(post_proof(11).size), *(getattr(openings, f) for f in (
        "sector_ids", "comm_r", "comm_c", "comm_r_last", "leaves", "siblings", "positions")))
    with pytest.raises(CompoundError, match="expected 10 of"):
        WindowPoSt.from_vanilla(other, **common)
