"""PoSt and SnapDeals vanilla proofs: generation, bincode, verification, tampering (docs/circuits.md
§9, §10; docs/formats.md §5)."""

from __future__ import annotations

import os
import random
from dataclasses import replace
from pathlib import Path

import pytest

from cuzk.errors import CuzkError, FormatError
from cuzk.field.constants import R_MODULUS
from cuzk.filecoin.merkle import PathElement
from cuzk.filecoin.porep import SealedSector, random_sector_data, seal
from cuzk.filecoin.post import (
    FallbackPoStSectorProof,
    verify_post_vanilla,
    window_post_vanilla,
    winning_post_vanilla,
)
from cuzk.filecoin.sizes import post_proof, seal_proof, sector_params
from cuzk.filecoin.snap import (
    PartitionProof,
    encode_update,
    encode_update_sparse,
    k_and_h_select,
    partition_proof,
    rho,
    verify_snap_vanilla,
)
from cuzk.filecoin.sparse import sparse_sector

PROVER = bytes([0xE8, 0x07]) + bytes(30)
RANDOMNESS = bytes(range(31)) + b"\x1f"


@pytest.fixture(scope="module")
def sector_2k() -> SealedSector:
    return seal(seal_proof(5), random_sector_data(64, 11), PROVER, 7, bytes(32))


def _flip(b: bytes) -> bytes:
    return bytes([b[0] ^ 1]) + b[1:]


def test_window_post_2kib(sector_2k: SealedSector) -> None:
    proof = post_proof("StackedDrgWindow2KiBV1_2")
    proofs = window_post_vanilla(proof, {7: sector_2k, 8: sector_2k, 9: sector_2k}, RANDOMNESS)
    assert [p.sector_id for p in proofs] == [7, 8, 9]
    assert all(len(p.sectors[0].inclusion_proofs) == 10 for p in proofs)
    assert verify_post_vanilla(proof, RANDOMNESS, proofs) == []
    data = proofs[1].to_bincode()
    assert len(data) == 8 + 32 + 8 + 8 + 10 * (4 + 32 + 32 + 8 + 2 * (8 + 7 * 32 + 8)) + 64
    again = FallbackPoStSectorProof.from_bincode(data, sector_params("2KiB"), "p.bin", 10)
    assert again == proofs[1] and again.to_bincode() == data
    # V1_0_0 indexes challenges by the sector's position: a different proof set, also valid
    old = window_post_vanilla(post_proof(5), {7: sector_2k, 8: sector_2k}, RANDOMNESS)
    assert verify_post_vanilla(post_proof(5), RANDOMNESS, old) == []
    assert verify_post_vanilla(proof, RANDOMNESS, old)  # checked against the wrong version's challenges


def test_winning_post_2kib(sector_2k: SealedSector) -> None:
    proof = post_proof(0)
    proofs = winning_post_vanilla(proof, {3: sector_2k, 5: sector_2k, 6: sector_2k}, RANDOMNESS, PROVER)
    assert len(proofs) == 1 and len(proofs[0].sectors[0].inclusion_proofs) == 66
    assert verify_post_vanilla(proof, RANDOMNESS, proofs) == []
    with pytest.raises(CuzkError, match="not a WinningPoSt proof"):
        winning_post_vanilla(post_proof(5), {3: sector_2k}, RANDOMNESS, PROVER)
    with pytest.raises(FormatError, match="randomness: not a canonical field element"):
        window_post_vanilla(post_proof(5), {3: sector_2k}, b"\xff" * 32)


def test_post_tampering_is_named(sector_2k: SealedSector) -> None:
    proof = post_proof(10)
    p = window_post_vanilla(proof, {7: sector_2k}, RANDOMNESS)[0]
    s = p.sectors[0]
    mp = s.inclusion_proofs[4]
    e = mp.base_path[0]
    bad = replace(mp, base_path=(PathElement((_flip(e.hashes[0]), *e.hashes[1:]), e.index), mp.base_path[1]))
    tampered = replace(p, sectors=(replace(s, inclusion_proofs=(*s.inclusion_proofs[:4], bad,
                                                                *s.inclusion_proofs[5:])),))
    leaf = mp.path_index
    assert verify_post_vanilla(proof, RANDOMNESS, [tampered]) == [
        f"sector 7 challenge 4 (leaf {leaf}): path does not hash to its root"]
    assert verify_post_vanilla(proof, RANDOMNESS, [replace(p, comm_r=s.comm_c)]) == [
        "sector 7: comm_r is not Poseidon_2(comm_c, comm_r_last)"]
    assert verify_post_vanilla(proof, RANDOMNESS, [p], comm_rs={7: bytes(32)}) == [
        "sector 7: comm_r differs from the expected one"]


def test_post_bincode_errors(sector_2k: SealedSector) -> None:
    data = window_post_vanilla(post_proof(10), {7: sector_2k}, RANDOMNESS)[0].to_bincode()
    size = sector_params("2KiB")
    with pytest.raises(FormatError, match=r"p.bin: offset 48: vanilla_proof.sectors\[0\].inclusion_proofs.len: vector "
                                          "length 10, expected 66"):
        FallbackPoStSectorProof.from_bincode(data, size, "p.bin", 66)
    with pytest.raises(FormatError, match=r"p.bin: offset 8: comm_r: truncated"):
        FallbackPoStSectorProof.from_bincode(data[:20], size, "p.bin")
    with pytest.raises(FormatError, match=r"offset 56: vanilla_proof.sectors\[0\].inclusion_proofs\[0\].kind: "
                                          "Single proof, expected Sub for this sector size"):
        FallbackPoStSectorProof.from_bincode(data, sector_params("32GiB"), "p.bin")
    with pytest.raises(FormatError, match=r"offset 124: vanilla_proof.sectors\[0\].inclusion_proofs\[0\].path.len: "
                                          "vector length 2, expected 6"):
        FallbackPoStSectorProof.from_bincode(data, sector_params("8MiB"), "p.bin")


CURIO_GOLDEN = os.environ.get("CUZK_CURIO_POST_VPROOF")


@pytest.mark.skipif(not CURIO_GOLDEN, reason="set CUZK_CURIO_POST_VPROOF to Curio's lib/proof/testgolden/post.vproof")
def test_curio_golden_window_post_vproof() -> None:
    """A real 32GiB WindowPoSt vanilla proof (sector 1, randomness 0, StackedDrgWindow32GiBV1)."""
    data = Path(str(CURIO_GOLDEN)).read_bytes()
    proof = post_proof(8)
    p = FallbackPoStSectorProof.from_bincode(data, proof.size, "post.vproof", 10)
    assert p.to_bincode() == data and p.sector_id == 1
    # comm_r from the SealedCID bagboea4b5abcbx3jccdohrttzfneleehcpkmle4oltwuh4q3rcf5tpdodaoj6mtl
    comm_r = bytes.fromhex("df691086e3c673c95a45908713d4c5938e5ced43f21b888bd9bc6e181c9f326b")
    assert verify_post_vanilla(proof, bytes(32), [p], comm_rs={1: comm_r}) == []


# -- SnapDeals ---------------------------------------------------------------------------------------------

def test_snap_2kib(sector_2k: SealedSector) -> None:
    size = sector_params("2KiB")
    new_data = random_sector_data(64, 12)
    update = encode_update(size, sector_2k, new_data)
    assert update.comm_r_old == sector_2k.comm_r and update.comm_c == sector_2k.comm_c
    high = 37 >> (6 - 1)
    old_leaf = int.from_bytes(sector_2k.tree_r.leaf(37), "little")
    d = int.from_bytes(new_data[37 * 32:38 * 32], "little")
    assert int.from_bytes(update.tree_r_new.leaf(37), "little") == (old_leaf + d * rho(
        _phi(update), high)) % R_MODULUS
    proofs = [partition_proof(update, 0)]
    assert len(proofs[0].apex_leafs) == 8 and len(proofs[0].challenge_proofs) == 10
    assert verify_snap_vanilla(size, update.comm_r_old, update.comm_d_new, update.comm_r_new, proofs) == []
    data = proofs[0].to_bincode()
    assert PartitionProof.from_bincode(data, size, "snap.bin") == proofs[0]
    assert PartitionProof.from_bincode(data, size).to_bincode() == data
    assert k_and_h_select(size, 0) == 1
    assert k_and_h_select(sector_params("8MiB"), 3) == 3 + 32
    assert k_and_h_select(sector_params("32GiB"), 5) == 5 + 128


def _phi(update) -> bytes:  # type: ignore[no-untyped-def]
    from cuzk.filecoin.snap import phi

    return phi(update.comm_d_new, update.comm_r_old)


def test_snap_tampering_is_named(sector_2k: SealedSector) -> None:
    size = sector_params("2KiB")
    update = encode_update(size, sector_2k, random_sector_data(64, 13))
    part = partition_proof(update, 0)
    args = (size, update.comm_r_old, update.comm_d_new, update.comm_r_new)
    bad_apex = replace(part, apex_leafs=(_flip(part.apex_leafs[0]), *part.apex_leafs[1:]))
    problems = verify_snap_vanilla(*args, [bad_apex])
    assert problems and all("apex" in m for m in problems)
    cp = part.challenge_proofs[2]
    node = cp.proof_r_new.path_index
    bad_leaf = replace(cp, proof_r_new=replace(cp.proof_r_new, leaf=_flip(cp.proof_r_new.leaf)))
    tampered = replace(part, challenge_proofs=(*part.challenge_proofs[:2], bad_leaf, *part.challenge_proofs[3:]))
    assert verify_snap_vanilla(*args, [tampered]) == [
        f"partition 0 challenge 2 (node {node}): new replica leaf != old leaf + data · rho",
        f"partition 0 challenge 2 (node {node}): proof_r_new path does not hash to its root"]
    assert verify_snap_vanilla(size, update.comm_r_old, update.comm_d_new, update.comm_r_old, [part])
    assert verify_snap_vanilla(*args, [part], h=3) == ["h = 3 is not allowed for 2KiB"]
    with pytest.raises(FormatError, match=r"snap.bin: offset 32: apex_leafs.len: vector length 8, expected 128"):
        PartitionProof.from_bincode(part.to_bincode(), sector_params("8MiB"), "snap.bin")


@pytest.mark.slow
def test_snap_sparse_32gib_and_post() -> None:
    proof = seal_proof("StackedDrg32GiBV1_1")
    size = proof.size
    sector = sparse_sector(proof, seed=4, prover_id=PROVER, sector_id=1, ticket=bytes(32), seed_randomness=bytes(32))
    rng = random.Random(4)
    new_data = {rng.randrange(size.nodes): rng.randbytes(31) + b"\x01" for _ in range(32)}
    update = encode_update_sparse(size, sector, new_data)
    proofs = [partition_proof(update, k) for k in range(size.snap_partitions)]
    assert verify_snap_vanilla(size, update.comm_r_old, update.comm_d_new, update.comm_r_new, proofs) == []
    assert PartitionProof.from_bincode(proofs[3].to_bincode(), size) == proofs[3]
    post = post_proof("StackedDrgWindow32GiBV1_2")
    vanilla = window_post_vanilla(post, {1: sector, 2: update}, RANDOMNESS)
    assert verify_post_vanilla(post, RANDOMNESS, vanilla) == []
    assert len(vanilla[0].to_bincode()) == 24960  # as Curio's real 32GiB post.vproof
