"""Merkle trees: CC comm_d vectors, Poseidon batch == reference, sparse == dense, proof codecs
(docs/formats.md §4, §5; docs/circuits.md §13)."""

from __future__ import annotations

import random

import numpy as np
import pytest

from cuzk.errors import FormatError
from cuzk.field.constants import R_MODULUS
from cuzk.filecoin.codec import BincodeReader, BincodeWriter, JsonReader
from cuzk.filecoin.merkle import POSEIDON, DenseTree, MerkleProof, PathElement, SparseTree, TreeLayout, compute_roots
from cuzk.filecoin.poseidon_batch import as_limbs, hash_custom_gr_batch, hash_merkle_batch, limbs_to_bytes
from cuzk.filecoin.sha256 import bytes_to_fr, fr32_truncate, hash2_sha, sha256_fr32
from cuzk.filecoin.sizes import sector_params
from cuzk.hashes.poseidon import hash_column, hash_custom_gr, hash_merkle

CURIO_INPUTS = [
    "f743111428ecda9b74a18826f1cc62d48ae1510de17e58645997559f86442f31",
    "197a6efa37086e3a37108f8460c52bc810e2781aff0091bfd7b74e3f6f752f02",
    "01c2c12f7930bbb59e3b36dae1c694b33ac6b3f199ec32a8665fadb8338f4f21",
    "bbe672a853f65cdb2563339ca61d6ad648473b4b4ce44bf3a48486424b865a2d",
    "937d57295f488cea8099f5525958f1af39c6241614b917835292e8e2314cf908",
    "3272570cd8ba38c1183629ca72d5e9149d76786ed22c1d591db3d2bccfa7d308",
    "2d3fc90e11aaf601bd1beae80fc3aba15a9e1f886d8140533ce36cda3dd9f936",
    "0a017e264d0728bfcd2edb3c6c60cc5a05a02af31a71cdd7bb2da27616f5f630",
]
CURIO_OUTPUT = "0737ca506df7d4544f8512df35aaa07ed8a40691e96ae868c23320220fec6866"


def _fr_bytes(rng: random.Random) -> bytes:
    return rng.randrange(R_MODULUS).to_bytes(32, "little")


def test_zero_sector_comm_d() -> None:
    # docs/circuits.md §13 (filecoin-proofs tests/pieces.rs)
    assert DenseTree(TreeLayout.tree_d(4), bytes(128)).root.hex() == (
        "3731bb99ac689f66eef5973e4a94da188f4ddcae580724fc6f3fd60dfd488333")
    assert DenseTree(TreeLayout.tree_d(64), bytes(2048)).root.hex() == (
        "fc7e928296e516faade986b28f92d44a4f24b935485223376a799027bc18f833")
    assert SparseTree(TreeLayout.tree_d(64), bytes(32)).root.hex() == (
        "fc7e928296e516faade986b28f92d44a4f24b935485223376a799027bc18f833")


def test_sha256_helpers() -> None:
    assert fr32_truncate(b"\xff" * 32) == b"\xff" * 31 + b"\x3f"
    assert sha256_fr32(b"abc")[31] < 0x40
    assert hash2_sha(bytes(32), bytes(32)) == sha256_fr32(bytes(64))
    with pytest.raises(FormatError, match=r"comm_r: not a canonical field element"):
        bytes_to_fr(R_MODULUS.to_bytes(32, "little"), field="comm_r")
    with pytest.raises(FormatError, match="expected 32 bytes"):
        bytes_to_fr(bytes(31))


def test_poseidon_batch_matches_reference_and_curio_vector() -> None:
    children = [bytes.fromhex(x) for x in CURIO_INPUTS]
    got = limbs_to_bytes(hash_merkle_batch(8, as_limbs(children)))[0]
    assert got.hex() == CURIO_OUTPUT
    assert hash_merkle(8, [int.from_bytes(c, "little") for c in children]).to_bytes(32, "little").hex() == CURIO_OUTPUT
    rng = random.Random(5)
    for arity in (2, 8, 11):
        vals = [rng.randrange(R_MODULUS) for _ in range(3 * arity)]
        out = hash_merkle_batch(arity, as_limbs([v.to_bytes(32, "little") for v in vals]))
        expected = [hash_merkle(arity, vals[i * arity:(i + 1) * arity]) for i in range(3)]
        assert [int.from_bytes(b, "little") for b in limbs_to_bytes(out)] == expected
    assert hash_column(vals[:11]) == hash_merkle(11, vals[:11])
    a, b = rng.randrange(R_MODULUS), rng.randrange(R_MODULUS)
    gr = hash_custom_gr_batch(as_limbs(a.to_bytes(32, "little")), as_limbs(b.to_bytes(32, "little")))
    assert int.from_bytes(limbs_to_bytes(gr)[0], "little") == hash_custom_gr(a, b)


LAYOUTS = [
    TreeLayout.tree_d(1 << 10),
    TreeLayout.tree_r(sector_params("2KiB")),
    TreeLayout(POSEIDON, 8, 2, 8, 0),  # a 32GiB-shaped tree (Sub proofs) with 64-leaf base trees
    TreeLayout(POSEIDON, 8, 1, 8, 2),  # a 64GiB-shaped tree (Top proofs) with 8-leaf base trees
]


@pytest.mark.parametrize("layout", LAYOUTS, ids=lambda lay: f"{lay.hasher}-{lay.kind}-{lay.leaves}")
def test_sparse_tree_equals_dense_tree(layout: TreeLayout) -> None:
    rng = random.Random(layout.leaves)
    default = sha256_fr32(b"default")
    given = {rng.randrange(layout.leaves): _fr_bytes(rng) for _ in range(5)}
    given[layout.leaves - 1] = _fr_bytes(rng)
    dense = DenseTree(layout, b"".join(given.get(i, default) for i in range(layout.leaves)))
    sparse = SparseTree(layout, default, given)
    assert sparse.root == dense.root
    for i in [*given, 0, 1, layout.leaves // 2]:
        p = dense.proof(i)
        assert sparse.proof(i) == p
        assert p.kind == layout.kind and p.path_index == i and p.shape_problem(layout) is None
        assert p.verify(layout.hasher)
    assert sparse.explicit_nodes < layout.leaves


def test_sparse_tree_equals_dense_tree_at_8mib_size() -> None:
    size = sector_params("8MiB")
    rng = random.Random(8)
    given = {rng.randrange(size.nodes): _fr_bytes(rng) for _ in range(40)}
    default = bytes(32)
    data = bytearray(size.sector_bytes)
    for i, v in given.items():
        data[32 * i:32 * i + 32] = v
    layout = TreeLayout.tree_d(size.nodes)
    dense, sparse = DenseTree(layout, bytes(data)), SparseTree(layout, default, given)
    assert dense.root == sparse.root
    assert all(dense.proof(i) == sparse.proof(i) for i in list(given)[:5])


def test_sparse_tree_at_32gib_and_batched_roots() -> None:
    layout = TreeLayout.tree_r(sector_params("32GiB"))
    rng = random.Random(32)
    given = {rng.randrange(1 << 30): _fr_bytes(rng) for _ in range(50)}
    tree = SparseTree(layout, bytes(32), given)
    proofs = [tree.proof(i) for i in list(given)[:10]] + [tree.proof(7)]
    assert all(p.kind == "Sub" and len(p.base_path) == 9 for p in proofs)
    assert compute_roots(proofs, POSEIDON) == [tree.root] * len(proofs)
    with pytest.raises(ValueError, match="outside the tree"):
        SparseTree(layout, bytes(32), {1 << 30: bytes(32)})


def _sample_proof(layout: TreeLayout) -> MerkleProof:
    rng = random.Random(1)
    return SparseTree(layout, bytes(32), {3: _fr_bytes(rng)}).proof(3)


@pytest.mark.parametrize("layout", LAYOUTS, ids=lambda lay: f"{lay.hasher}-{lay.kind}")
def test_proof_codecs_round_trip(layout: TreeLayout) -> None:
    p = _sample_proof(layout)
    assert MerkleProof.from_json(p.to_json(), JsonReader(), "p") == p
    w = BincodeWriter()
    p.write_bincode(w)
    data = w.getvalue()
    r = BincodeReader(data, "proof.bin")
    assert MerkleProof.read_bincode(r, "p", layout) == p
    r.finish()
    w2 = BincodeWriter()
    MerkleProof.read_bincode(BincodeReader(data), "p").write_bincode(w2)
    assert w2.getvalue() == data


def test_proof_json_layout() -> None:
    single = _sample_proof(LAYOUTS[1]).to_json()
    assert list(single["data"]["Single"]) == ["root", "leaf", "path"]
    assert list(single["data"]["Single"]["path"]["path"][0]) == ["hashes", "index"]
    top = _sample_proof(LAYOUTS[3]).to_json()
    assert list(top["data"]["Top"]) == ["base_proof", "sub_proof", "top_proof", "root", "leaf"]
    assert len(top["data"]["Top"]["top_proof"]["path"][0]["hashes"]) == 1


def test_tampered_proofs_fail() -> None:
    layout = LAYOUTS[2]
    p = _sample_proof(layout)
    e = p.base_path[1]
    flipped = PathElement((b"\x01" + e.hashes[0][1:], *e.hashes[1:]), e.index)
    bad_sibling = MerkleProof(p.root, p.leaf, (p.base_path[0], flipped), p.sub_path, p.top_path)
    assert p.verify(POSEIDON) and not bad_sibling.verify(POSEIDON)
    assert MerkleProof(p.root, p.leaf, p.base_path, p.sub_path, None).shape_problem(layout) is None
    assert "Top proof" in (MerkleProof(p.root, p.leaf, p.base_path, p.sub_path, p.sub_path).shape_problem(layout))
    assert "1 path elements" in MerkleProof(p.root, p.leaf, p.base_path[:1]).shape_problem(LAYOUTS[1])


def test_bincode_errors_are_precise() -> None:
    layout = LAYOUTS[1]
    p = _sample_proof(layout)
    w = BincodeWriter()
    p.write_bincode(w)
    data = w.getvalue()
    with pytest.raises(FormatError, match=r"x.bin: offset 4: p.root: truncated: need 32 bytes, only 10 left"):
        MerkleProof.read_bincode(BincodeReader(data[:14], "x.bin"), "p", layout)
    bad = data[:4] + (R_MODULUS + 1).to_bytes(32, "little") + data[36:]
    with pytest.raises(FormatError, match=r"offset 4: p.root: not a canonical field element"):
        MerkleProof.read_bincode(BincodeReader(bad, "x.bin"), "p", layout)
    with pytest.raises(FormatError, match=r"offset 0: p.kind: Sub proof, expected Single"):
        MerkleProof.read_bincode(BincodeReader((1).to_bytes(4, "little") + data[4:], "x.bin"), "p", layout)
    with pytest.raises(FormatError, match=r"offset 0: p.kind: enum tag 7 out of range"):
        MerkleProof.read_bincode(BincodeReader((7).to_bytes(4, "little") + data[4:], "x.bin"), "p")
    with pytest.raises(FormatError, match=r"offset 68: p.path.len: vector length 3, expected 2"):
        MerkleProof.read_bincode(BincodeReader(data[:68] + (3).to_bytes(8, "little") + data[76:], "x.bin"), "p",
                                 layout)
    r = BincodeReader(data + b"\x00", "x.bin")
    MerkleProof.read_bincode(r, "p", layout)
    with pytest.raises(FormatError, match="1 trailing bytes"):
        r.finish()


def test_json_errors_are_precise() -> None:
    p = _sample_proof(LAYOUTS[1]).to_json()
    p["data"]["Single"]["path"]["path"][1]["hashes"][2] = [256] + [0] * 31
    with pytest.raises(FormatError,
                       match=r"proof.json: p.data.Single.path.path\[1\].hashes\[2\]: expected 32 integers"):
        MerkleProof.from_json(p, JsonReader("proof.json"), "p")
    with pytest.raises(FormatError, match=r"unknown variant 'Mid'"):
        MerkleProof.from_json({"data": {"Mid": {}}}, JsonReader("proof.json"), "p")
    assert np.array_equal(as_limbs(bytes(64)), np.zeros((2, 4), np.uint64))


@pytest.mark.slow
def test_sparse_poseidon_tree_equals_dense_at_8mib_size() -> None:
    layout = TreeLayout.tree_r(sector_params("8MiB"))
    rng = random.Random(18)
    default = _fr_bytes(rng)
    given = {rng.randrange(layout.leaves): _fr_bytes(rng) for _ in range(30)}
    leaves = bytearray(default * layout.leaves)
    for i, v in given.items():
        leaves[32 * i:32 * i + 32] = v
    dense, sparse = DenseTree(layout, bytes(leaves)), SparseTree(layout, default, given)
    assert dense.root == sparse.root
    assert all(dense.proof(i) == sparse.proof(i) for i in [*list(given)[:5], 0, layout.leaves - 1])


@pytest.mark.parametrize("bad", [[True] + [0] * 31, [1.0] + [0] * 31, [256] + [0] * 31, [-1] + [0] * 31, [0] * 31,
                                 [255] * 32, "00" * 32, None])
def test_an_array_of_field_elements_reads_as_each_one_would_and_names_the_first_bad_one(bad: object) -> None:
    good = [list(x.to_bytes(32, "little")) for x in (0, 1, R_MODULUS - 1, 12345)]
    reader = JsonReader("c1.json")
    assert reader.frs(good, "p", 4) == tuple(reader.fr(v, f"p[{i}]") for i, v in enumerate(good))
    values = [*good[:2], bad, good[2], bad]
    with pytest.raises(FormatError) as got:
        reader.frs(values, "p")
    with pytest.raises(FormatError) as want:
        reader.fr(bad, "p[2]")
    assert str(got.value) == str(want.value) and "p[2]" in str(got.value)
    with pytest.raises(FormatError, match="expected 3 entries"):
        reader.frs(good, "p", 3)
