"""Sealing, C1 generation, its JSON/bincode codecs and the vanilla verifier (docs/circuits.md §5;
docs/formats.md §4, §5)."""

from __future__ import annotations

import json
import time
from dataclasses import replace

import pytest

from cuzk.errors import CuzkError, FormatError
from cuzk.field.constants import R_MODULUS
from cuzk.filecoin.c1 import Column, SealCommitPhase1Output
from cuzk.filecoin.graph import SdrGraph
from cuzk.filecoin.merkle import PathElement
from cuzk.filecoin.porep import (
    compute_labels,
    create_label,
    expand_parents,
    random_sector_data,
    seal,
    verify_porep_vanilla,
)
from cuzk.filecoin.sizes import ApiVersion, seal_proof
from cuzk.filecoin.synthetic import generate_c1

PROVER = bytes([0xE8, 0x07]) + bytes(30)
SECTOR = 42


@pytest.fixture(scope="module")
def c1_2k() -> SealCommitPhase1Output:
    return generate_c1("2KiB", sparse=False, seed=3, prover_id=PROVER, sector_id=SECTOR)


def test_label_rules() -> None:
    a, b = bytes([1]) * 32, bytes([2]) * 32
    assert expand_parents([a, b]) == (a, b) * 18 + (a,)
    fourteen = [bytes([i]) * 32 for i in range(14)]
    assert expand_parents(fourteen)[28:] == tuple(fourteen[:9])
    rid = bytes(range(32))
    label = create_label(rid, 2, 5, expand_parents([a]))
    import hashlib
    digest = bytearray(hashlib.sha256(rid + (2).to_bytes(4, "big") + (5).to_bytes(8, "big") + bytes(20)
                                      + a * 37).digest())
    digest[31] &= 0x3F
    assert label == bytes(digest)


def _limbs(*limbs: int) -> bytes:
    return b"".join(x.to_bytes(8, "little") for x in limbs)


# storage-proofs-porep create_label/multi.rs `test_create_labels`: last label of layer 11 for replica_id
# [9; 32] on 64- and 128-node graphs, legacy porep_id [0; 32] (V1_0_0) and [123; 32] (V1_1_0).
LABEL_KATS = [
    (64, 0, _limbs(0xD3FAA96B9A0FBA04, 0xEA81A283D106485E, 0xE3D51B9AFA5AC2B3, 0x0462F4F4F1A68D37)),
    (128, 0, _limbs(0x7E191E52C4A8DA86, 0x5AE8A1C9E6FAC148, 0xCE239F3B88A894B8, 0x234C00D1DC1D53BE)),
    (64, 123, _limbs(0xABB3F38BB70DEFCF, 0x777A2E4D7769119F, 0x3448959D495490BC, 0x06021188C7A71CB5)),
    (128, 123, _limbs(0x22AB81CF68C4676D, 0x7A77A82FC7C9C189, 0xC6C03D32C1E42D23, 0x0F777C18CC2C55BD)),
]


@pytest.mark.parametrize(("nodes", "pid", "expected"), LABEL_KATS)
def test_rust_create_labels_known_answers(nodes: int, pid: int, expected: bytes) -> None:
    version = ApiVersion.V1_0_0 if pid == 0 else ApiVersion.V1_1_0
    graph = SdrGraph(nodes, bytes([pid]) * 32, version)
    assert compute_labels(graph, bytes([9]) * 32, 11)[-1, -1].tobytes() == expected


def test_seal_2kib_structure() -> None:
    proof = seal_proof(5)
    data = random_sector_data(64, 1)
    s = seal(proof, data, PROVER, SECTOR, bytes(32))
    assert s.labels.shape == (2, 64, 32)
    assert s.label(1, 0) == create_label(s.replica_id, 1, 0, ())
    p58 = s.graph.parents(58)
    assert s.label(1, 58) == create_label(s.replica_id, 1, 58, expand_parents([s.label(1, p) for p in p58[:6]]))
    layer2 = [s.label(2, p) for p in p58[:6]] + [s.label(1, p) for p in p58[6:]]
    assert s.label(2, 58) == create_label(s.replica_id, 2, 58, expand_parents(layer2))
    replica58 = int.from_bytes(s.replica[58 * 32:59 * 32], "little")
    assert replica58 == (int.from_bytes(s.label(2, 58), "little") + int.from_bytes(data[58 * 32:59 * 32], "little")) \
        % R_MODULUS
    assert (compute_labels(s.graph, s.replica_id, 2) == s.labels).all()
    with pytest.raises(CuzkError, match="sector data must be 2048 bytes"):
        seal(proof, data[:-1], PROVER, SECTOR, bytes(32))
    with pytest.raises(CuzkError, match="node 3 is not fr32-padded"):
        seal(proof, data[:127] + b"\xff" + data[128:], PROVER, SECTOR, bytes(32))


@pytest.mark.parametrize("proof_id", [0, 5, 10, 15])
def test_2kib_c1_verifies_for_every_flavour(proof_id: int) -> None:
    c1 = generate_c1("2KiB", sparse=False, seed=proof_id, prover_id=PROVER, sector_id=SECTOR,
                     registered_proof=proof_id)
    proof = seal_proof(proof_id)
    assert len(c1.vanilla_proofs) == proof.partitions and len(c1.vanilla_proofs[0]) == 2
    assert verify_porep_vanilla(c1, prover_id=PROVER, sector_id=SECTOR) == []
    assert verify_porep_vanilla(c1, prover_id=PROVER, sector_id=SECTOR + 1)[0].startswith("replica_id")


def test_json_round_trip_is_byte_identical(c1_2k: SealCommitPhase1Output) -> None:
    text = c1_2k.to_json()
    again = SealCommitPhase1Output.from_json(text)
    assert again == c1_2k and again.to_json() == text
    value = json.loads(text)
    assert list(value) == ["registered_proof", "vanilla_proofs", "comm_r", "comm_d", "replica_id", "seed", "ticket"]
    assert value["registered_proof"] == "StackedDrg2KiBV1_1" and list(value["vanilla_proofs"]) == ["StackedDrg2KiBV1"]
    proof = value["vanilla_proofs"]["StackedDrg2KiBV1"][0][0]
    assert list(proof) == ["comm_d_proofs", "comm_r_last_proof", "replica_column_proofs", "labeling_proofs",
                           "encoding_proof"]
    column = proof["replica_column_proofs"]["c_x"]["column"]
    assert list(column) == ["index", "rows", "_h"] and column["_h"] is None
    assert list(proof["labeling_proofs"][1]) == ["parents", "layer_index", "node"]
    assert len(proof["encoding_proof"]["parents"]) == 37 and proof["encoding_proof"]["layer_index"] == 2
    assert '"_h":null' in text and ": " not in text
    # Curio re-serialises with sorted keys: still accepted
    assert SealCommitPhase1Output.from_json(json.dumps(value, sort_keys=True)) == c1_2k


def test_bincode_round_trip_is_byte_identical(c1_2k: SealCommitPhase1Output) -> None:
    data = c1_2k.to_bincode()
    again = SealCommitPhase1Output.from_bincode(data, "StackedDrg2KiBV1_1", "c1.bin")
    assert again == c1_2k and again.to_bincode() == data
    assert int.from_bytes(data[:8], "little") == 1 and int.from_bytes(data[8:16], "little") == 2
    assert data[-160:] == c1_2k.comm_r + c1_2k.comm_d + c1_2k.replica_id + c1_2k.seed + c1_2k.ticket


def _first(c1: SealCommitPhase1Output, **changes) -> SealCommitPhase1Output:  # type: ignore[no-untyped-def]
    """c1 with partition 0 challenge 0 replaced field-wise."""
    p = replace(c1.vanilla_proofs[0][0], **changes)
    return replace(c1, vanilla_proofs=((p, *c1.vanilla_proofs[0][1:]), *c1.vanilla_proofs[1:]))


def _flip(b: bytes) -> bytes:
    return bytes([b[0] ^ 1]) + b[1:]


def test_tampered_label_is_named(c1_2k: SealCommitPhase1Output) -> None:
    p = c1_2k.vanilla_proofs[0][0]
    rcp = p.replica_column_proofs
    rows = (rcp.c_x.column.rows[0], _flip(rcp.c_x.column.rows[1]))
    c_x = replace(rcp.c_x, column=Column(rcp.c_x.column.index, rows))
    problems = verify_porep_vanilla(_first(c1_2k, replica_column_proofs=replace(rcp, c_x=c_x)))
    node = p.challenge
    assert f"partition 0 challenge 0 (node {node}): labeling proof layer 2: label hashed from the parents does not " \
           "match column row 2" in problems
    assert f"partition 0 challenge 0 (node {node}): c_x tree_c proof: leaf is not the hash of the column" in problems


def test_tampered_sibling_is_named(c1_2k: SealCommitPhase1Output) -> None:
    p = c1_2k.vanilla_proofs[0][0]
    r = p.comm_r_last_proof
    e = r.base_path[1]
    bad = replace(r, base_path=(r.base_path[0], PathElement((_flip(e.hashes[0]), *e.hashes[1:]), e.index)))
    problems = verify_porep_vanilla(_first(c1_2k, comm_r_last_proof=bad))
    assert problems == [
        f"partition 0 challenge 0 (node {p.challenge}): comm_r_last proof: path does not hash to its root"]
    d = p.comm_d_proofs
    bad_d = replace(d, base_path=(PathElement((_flip(d.base_path[0].hashes[0]),), d.base_path[0].index),
                                  *d.base_path[1:]))
    assert verify_porep_vanilla(_first(c1_2k, comm_d_proofs=bad_d)) == [
        f"partition 0 challenge 0 (node {p.challenge}): comm_d proof path does not hash to its root"]


def test_tampered_parent_column_is_named(c1_2k: SealCommitPhase1Output) -> None:
    p = c1_2k.vanilla_proofs[0][0]
    rcp = p.replica_column_proofs
    col = rcp.exp_parents[3].column
    bad_col = replace(rcp.exp_parents[3], column=Column(col.index, (_flip(col.rows[0]), col.rows[1])))
    exp = (*rcp.exp_parents[:3], bad_col, *rcp.exp_parents[4:])
    problems = verify_porep_vanilla(_first(c1_2k, replica_column_proofs=replace(rcp, exp_parents=exp)))
    at = f"partition 0 challenge 0 (node {p.challenge})"
    assert f"{at}: exp parent 3 tree_c proof: leaf is not the hash of the column" in problems
    assert f"{at}: labeling proof layer 2: parents differ from the parent columns' labels" in problems


def test_tampered_encoding_and_challenge(c1_2k: SealCommitPhase1Output) -> None:
    p = c1_2k.vanilla_proofs[0][0]
    enc = replace(p.encoding_proof, parents=(_flip(p.encoding_proof.parents[0]), *p.encoding_proof.parents[1:]))
    assert verify_porep_vanilla(_first(c1_2k, encoding_proof=enc)) == [
        f"partition 0 challenge 0 (node {p.challenge}): encoding proof: replica leaf != key + data leaf"]
    wrong_seed = replace(c1_2k, seed=bytes(32))
    assert any("derived challenge" in m for m in verify_porep_vanilla(wrong_seed))
    assert verify_porep_vanilla(replace(c1_2k, comm_r=c1_2k.comm_d)) == [
        "comm_r is not Poseidon_2(comm_c, comm_r_last) of the proofs' roots"]


def test_bad_json_inputs(c1_2k: SealCommitPhase1Output) -> None:
    value = json.loads(c1_2k.to_json())
    proofs = value["vanilla_proofs"]["StackedDrg2KiBV1"]
    del proofs[0][0]["labeling_proofs"][0]["parents"][36]
    with pytest.raises(FormatError, match=r"c1.json: \$.vanilla_proofs.StackedDrg2KiBV1\[0\]\[0\]"
                                          r".labeling_proofs\[0\].parents: expected 37 entries, got 36"):
        SealCommitPhase1Output.from_json(json.dumps(value), "c1.json")
    value = json.loads(c1_2k.to_json())
    value["comm_r"] = list((R_MODULUS + 5).to_bytes(32, "little"))
    with pytest.raises(FormatError, match=r"\$.comm_r: not a canonical field element"):
        SealCommitPhase1Output.from_json(json.dumps(value), "c1.json")
    value = json.loads(c1_2k.to_json())
    value["registered_proof"] = "StackedDrg8MiBV1_1"
    with pytest.raises(FormatError, match=r"\$.vanilla_proofs: unknown variant 'StackedDrg2KiBV1'"):
        SealCommitPhase1Output.from_json(json.dumps(value), "c1.json")
    value["registered_proof"] = "StackedDrg3KiBV1"
    with pytest.raises(FormatError, match="unknown registered seal proof 'StackedDrg3KiBV1'"):
        SealCommitPhase1Output.from_json(json.dumps(value), "c1.json")
    value = json.loads(c1_2k.to_json())
    value["vanilla_proofs"]["StackedDrg2KiBV1"][0][1]["comm_r_last_proof"]["data"]["Single"]["path"]["path"].pop()
    with pytest.raises(FormatError, match=r"\[0\]\[1\].comm_r_last_proof: Merkle proof has 1 path elements, "
                                          "expected 2"):
        SealCommitPhase1Output.from_json(json.dumps(value), "c1.json")
    with pytest.raises(FormatError, match=r"c1\.json: not valid JSON"):
        SealCommitPhase1Output.from_json("{", "c1.json")
    with pytest.raises(FormatError, match=r"\$: missing key\(s\) ticket"):
        SealCommitPhase1Output.from_json(json.dumps({k: v for k, v in value.items() if k != "ticket"}), "c1.json")


def test_bad_bincode_inputs(c1_2k: SealCommitPhase1Output) -> None:
    data = c1_2k.to_bincode()
    with pytest.raises(FormatError, match=rf"c1.bin: offset {len(data) - 32}: ticket: truncated: need 32 bytes, "
                                          "only 12 left"):
        SealCommitPhase1Output.from_bincode(data[:-20], 5, "c1.bin")
    with pytest.raises(FormatError, match=r"offset 0: vanilla_proofs.len: vector length 1, expected 10"):
        SealCommitPhase1Output.from_bincode(data, "StackedDrg32GiBV1_1", "c1.bin")
    with pytest.raises(FormatError, match=r"offset 84: vanilla_proofs\[0\]\[0\].comm_d_proofs.path.len: vector "
                                          "length 6, expected 18"):
        SealCommitPhase1Output.from_bincode(data, "StackedDrg8MiBV1_1", "c1.bin")
    with pytest.raises(FormatError, match=r"offset 0: vanilla_proofs.len: vector length 1, expected 13"):
        SealCommitPhase1Output.from_bincode(data, 15, "c1.bin")
    bad = bytearray(data)
    offset = len(data) - 160
    bad[offset:offset + 32] = (R_MODULUS).to_bytes(32, "little")
    with pytest.raises(FormatError, match=rf"offset {offset}: comm_r: not a canonical field element"):
        SealCommitPhase1Output.from_bincode(bytes(bad), 5, "c1.bin")
    with pytest.raises(FormatError, match="trailing bytes"):
        SealCommitPhase1Output.from_bincode(data + b"\x00", 5, "c1.bin")


@pytest.mark.parametrize("size", ["2KiB", "8MiB"])
def test_sparse_small_sizes_verify(size: str) -> None:
    c1 = generate_c1(size, sparse=True, seed=9, prover_id=PROVER, sector_id=SECTOR)
    assert verify_porep_vanilla(c1, prover_id=PROVER, sector_id=SECTOR) == []
    assert SealCommitPhase1Output.from_bincode(c1.to_bincode(), c1.registered_proof) == c1


def test_sparse_rejects_synthetic_and_ni() -> None:
    with pytest.raises(CuzkError, match="sparse sectors support interactive PoRep only"):
        generate_c1("2KiB", sparse=True, registered_proof=15)
    with pytest.raises(CuzkError, match="is for 2KiB, not 8MiB"):
        generate_c1("8MiB", sparse=True, registered_proof=5)
    with pytest.raises(CuzkError, match="dense sealing is for test sizes"):
        generate_c1("512MiB", sparse=False)


@pytest.mark.slow
@pytest.mark.parametrize("size", ["32GiB", "64GiB"])
def test_sparse_large_c1_verifies_and_round_trips(size: str) -> None:
    start = time.perf_counter()
    c1 = generate_c1(size, sparse=True, seed=1, prover_id=PROVER, sector_id=SECTOR, registered_proof=None)
    generated = time.perf_counter() - start
    proof = c1.registered_proof
    assert len(c1.vanilla_proofs) == 10 and all(len(part) == 18 for part in c1.vanilla_proofs)
    first = c1.vanilla_proofs[0][0]
    assert first.comm_r_last_proof.kind == ("Sub" if size == "32GiB" else "Top")
    assert len(first.replica_column_proofs.c_x.column.rows) == 11
    assert verify_porep_vanilla(c1, prover_id=PROVER, sector_id=SECTOR) == []
    data = c1.to_bincode()
    assert SealCommitPhase1Output.from_bincode(data, proof).to_bincode() == data
    assert generated < 60, f"sparse {size} C1 took {generated:.1f} s"


@pytest.mark.slow
def test_dense_8mib_seal_and_c1() -> None:
    c1 = generate_c1("8MiB", sparse=False, seed=2, prover_id=PROVER, sector_id=SECTOR)
    assert verify_porep_vanilla(c1, prover_id=PROVER, sector_id=SECTOR) == []
    assert SealCommitPhase1Output.from_json(c1.to_json()) == c1
