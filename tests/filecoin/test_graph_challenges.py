"""SDR graph (parent-cache digests of parent_cache.json) and challenge derivation
(docs/circuits.md §5, §9, §10, §13)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pytest

from cuzk.errors import FormatError
from cuzk.filecoin.chacha import chacha20_ietf_keystream, chacha_blocks
from cuzk.filecoin.challenges import (
    interactive_challenges,
    ni_challenges,
    porep_challenges,
    post_challenge_index,
    post_leaf_challenge,
    post_sector_challenges,
    replica_id,
    snap_challenges,
    synthetic_all,
    synthetic_challenge,
    synthetic_challenges,
    synthetic_indexes,
    winning_sector_challenge,
)
from cuzk.filecoin.graph import SdrGraph, read_parent_cache
from cuzk.filecoin.sizes import ALL_SIZES, ApiVersion, porep_id, post_proof, seal_proof, sector_params
from cuzk.hashes.poseidon import hash_custom_gr

# storage-proofs-porep/parent_cache.json: cache id -> SHA-256 digest (ids for every published size)
PARENT_CACHE_IDS = {
    ("2KiB", 0): "3f0eef38bb48af1f48ad65e14eb85b4ebfc167cec18cd81764f6d998836c9899",
    ("2KiB", 5): "494d91dc80f2df5272c4b9e129bc7ade9405225993af9fe34e6542a39a47554b",
    ("8MiB", 1): "dcdabb0fbe4364bf0ac28b6a18c66de246409fa1a9020a00f33fb3e3053da6dc",
    ("8MiB", 6): "5eed212119fd91aa6220a27f31a8966444a9381842bceb3a1ea61525bd47a5b5",
    ("512MiB", 2): "2aa9c77c3e58259481351cc4be2079cc71e1c9af39700866545c043bfa30fb42",
    ("512MiB", 7): "7ba215a1d2345774ab90b8cb1158d296e409d6068819d7b8c7baf0b25d63dc34",
    ("32GiB", 3): "e1fa5d5b811ddbd118be3412c4a8c329156b8b8acc72632bca459455b5a05a13",
    ("32GiB", 8): "21981246c370f9d76c7a77ab273d94bde0ceb4e938292334960bce05585dc117",
    ("64GiB", 4): "8a99e8d6b6be7ab87a56b632e6739ff201c23ea14e99737c74690f0e265574d6",
    ("64GiB", 9): "4905486b7af19558ac3649bc6261411858b6add534438878c4ee3b29d8b9de0b",
}
PARENT_CACHE_DIGESTS = {
    ("2KiB", 0): "3da49221e2ed55371b86d0bf3d6526fcf128af61bed904f966428db1b531750d",
    ("2KiB", 5): "840057702eea7652cf97e04306c30fe57174714d90de156a25eddd6075c25b97",
    ("8MiB", 1): "a76604f2f59f2744c7151653bbb1d8596b6b57d295e6fa6c1f0c41d725b502ce",
    ("8MiB", 6): "03cd13565ded97c240a5f52e54295ad127bd0461b57904cb3a4d79b097bbecab",
}

# docs/circuits.md §13: the first 2KiB V1_1 record of seal_regression_records-v16.json
RECORD = {
    "prover_id": "101cbe4b9c42604f04c703c396f788c6cb2d6d7d58f45430b12eb2edd640076c",
    "sector_id": 9259733836259213201,
    "ticket": "e8867f2000d5597a0a5f4382c52b8b89890019df5320d486a067f38e6c68624b",
    "comm_d": "7e45f0925dc72593d6b296100e6ca63e3341c92a50c0e7a9461883a3c959ea28",
    "seed": "56964257e0d6c11e074117b36172fff3ebd1a6ec18fa79555e58df5a9d889dcb",
    "replica_id": "da838d3efe2e28665cd17ebfa274f67af8c3b51dfb01e8c6bf8892e712d62006",
}


def _graph(size: str, pid: int) -> SdrGraph:
    version = ApiVersion.V1_0_0 if pid <= 4 else ApiVersion.V1_1_0
    return SdrGraph(sector_params(size).nodes, porep_id(pid), version)


@pytest.mark.parametrize(("size", "pid"), list(PARENT_CACHE_IDS))
def test_parent_cache_ids(size: str, pid: int) -> None:
    g = _graph(size, pid)
    assert g.cache_id == PARENT_CACHE_IDS[size, pid]
    assert g.cache_file_name == f"v28-sdr-parent-{PARENT_CACHE_IDS[size, pid]}.cache"


@pytest.mark.parametrize(("size", "pid"), [("2KiB", 0), ("2KiB", 5)])
def test_2kib_parent_cache_digests(size: str, pid: int, tmp_path: Path) -> None:
    g = _graph(size, pid)
    path = g.write_parent_cache(tmp_path)
    assert hashlib.sha256(path.read_bytes()).hexdigest() == PARENT_CACHE_DIGESTS[size, pid]
    assert np.array_equal(read_parent_cache(path, g.nodes), g.all_parents())


@pytest.mark.parametrize(("size", "pid"), [("8MiB", 1), ("8MiB", 6)])
def test_8mib_parent_cache_digests(size: str, pid: int) -> None:
    g = _graph(size, pid)
    assert hashlib.sha256(g.parent_cache_bytes()).hexdigest() == PARENT_CACHE_DIGESTS[size, pid]


def test_example_parents() -> None:
    g = _graph("2KiB", 5)
    assert g.parents(10) == [9, 6, 6, 9, 9, 5, 30, 20, 60, 53, 31, 9, 47, 41]
    assert g.parents(57) == [56, 56, 48, 50, 42, 55, 46, 41, 13, 46, 44, 31, 3, 15]
    assert g.parents(58) == [57, 45, 11, 54, 56, 57, 51, 52, 38, 18, 33, 8, 54, 40]
    assert g.parents(0) == [0] * 6 + g.parents(0)[6:] and g.parents(1)[:6] == [0] * 6
    v1 = _graph("2KiB", 0)
    assert v1.drg_parents(10)[0, 5] == 9  # V1_0_0 puts the predecessor last


def test_large_graph_parents_are_in_range() -> None:
    g = _graph("64GiB", 9)
    nodes = np.array([2, 12345, (1 << 31) - 1])
    parents = g.parents_array(nodes)
    assert parents.shape == (3, 14) and (parents >= 0).all() and (parents < 1 << 31).all()
    assert (parents[:, 1:6] < nodes[:, None]).all() and (parents[:, 0] == nodes - 1).all()
    with pytest.raises(ValueError, match="outside the graph"):
        g.parents(1 << 31)


def test_parent_cache_reader_errors(tmp_path: Path) -> None:
    path = tmp_path / "bad.cache"
    path.write_bytes(bytes(56 * 3 + 5))
    with pytest.raises(FormatError, match=r"bad.cache: offset 168: length 173 is not a multiple of 56 bytes"):
        read_parent_cache(path)
    path.write_bytes((7).to_bytes(4, "little") + bytes(56 * 2 - 4))
    with pytest.raises(FormatError, match="node 0 has a parent >= 2"):
        read_parent_cache(path)
    path.write_bytes(bytes(56 * 2))
    with pytest.raises(FormatError, match="holds 2 nodes, expected 4"):
        read_parent_cache(path, 4)


def test_chacha20_rfc8439_block() -> None:
    # RFC 8439 §2.3.2: key 00..1f, nonce 00 00 00 09 00 00 00 4a 00 00 00 00, counter 1
    key = bytes(range(32))
    nonce = bytes.fromhex("000000090000004a00000000")
    stream = chacha20_ietf_keystream(key, nonce, 64, 64)
    assert stream.hex().startswith("10f1e7e4d13b5915500fdd1fa32071c4c7d1f4c733c068030422aa9ac3d46c4e")
    assert chacha20_ietf_keystream(key, nonce, 70, 10) == stream[6:16]
    with pytest.raises(ValueError, match="even number of rounds"):
        chacha_blocks(np.zeros(8, np.uint32), np.zeros(4, np.uint32), 7)


def test_regression_record_replica_id_and_challenges() -> None:
    h = bytes.fromhex
    proof = seal_proof(5)
    rid = replica_id(h(RECORD["prover_id"]), RECORD["sector_id"], h(RECORD["ticket"]), h(RECORD["comm_d"]),
                     proof.porep_id)
    assert rid.hex() == RECORD["replica_id"]
    assert porep_challenges(proof, rid, h(RECORD["seed"]), bytes(32), 0) == [57, 58]
    assert interactive_challenges(64, rid, h(RECORD["seed"]), 0, 2) == [57, 58]


def test_ni_and_synthetic_challenges() -> None:
    rid, comm_r, seed = bytes(range(32)), bytes(31) + b"\x01", bytes([7]) * 32
    nodes = 1 << 30
    ni = ni_challenges(nodes, rid, comm_r, 3, 18)
    assert len(ni) == 18 and all(1 <= c < nodes for c in ni) and ni != ni_challenges(nodes, rid, comm_r, 4, 18)
    assert porep_challenges(seal_proof(18), rid, seed, comm_r, 3) == ni
    whole = synthetic_all(64, rid, comm_r)
    assert len(whole) == 64 and all(1 <= c < 64 for c in whole)
    assert [synthetic_challenge(64, rid, comm_r, i) for i in (0, 1, 33, 63)] == [whole[i] for i in (0, 1, 33, 63)]
    idx = synthetic_indexes(nodes, rid, seed, 2, 18)
    assert all(0 <= i < 1 << 18 for i in idx)
    assert synthetic_indexes(nodes, rid, seed, 0, 54)[36:] == idx  # partition 2 continues the selection stream
    chosen = synthetic_challenges(nodes, rid, comm_r, seed, 2, 18)
    assert chosen == [synthetic_challenge(nodes, rid, comm_r, i) for i in idx]
    assert porep_challenges(seal_proof(13), rid, seed, comm_r, 2) == chosen
    with pytest.raises(ValueError, match="partition 10 out of range"):
        porep_challenges(seal_proof(8), rid, seed, comm_r, 10)


def test_post_challenges_by_api_version() -> None:
    assert post_challenge_index(ApiVersion.V1_0_0, 3, 10, 4) == 34
    assert post_challenge_index(ApiVersion.V1_2_0, 3, 10, 4) == 4
    rand = bytes(32)
    c = post_leaf_challenge(2048, rand, 5, 7)
    digest = hashlib.sha256(rand + (5).to_bytes(8, "little") + (7).to_bytes(8, "little")).digest()
    assert c == int.from_bytes(digest[:8], "little") % 64
    old, new = post_proof(5), post_proof(10)
    ids = [11, 12, 13]
    a, b = post_sector_challenges(old, rand, ids), post_sector_challenges(new, rand, ids)
    assert a[11] == b[11]  # sector_index 0: both versions index challenges 0..9
    assert a[13] == [post_leaf_challenge(2048, rand, 13, 20 + n) for n in range(10)]
    assert b[13] == [post_leaf_challenge(2048, rand, 13, n) for n in range(10)]
    winning = post_sector_challenges(post_proof(0), rand, [9])
    assert winning[9] == [post_leaf_challenge(2048, rand, 9, n) for n in range(66)]
    assert 0 <= winning_sector_challenge(rand, bytes(32), 0, 7) < 7


@pytest.mark.parametrize("size", ALL_SIZES, ids=lambda p: p.name)
def test_snap_challenges(size) -> None:  # type: ignore[no-untyped-def]
    comm_r_new = (12345).to_bytes(32, "little")
    k = size.snap_partitions - 1
    cs = snap_challenges(size, comm_r_new, k)
    pb = size.snap_partitions.bit_length() - 1
    rb = size.log2_nodes - pb
    assert len(cs) == size.snap_challenges and all(c >> rb == k for c in cs) and all(c < size.nodes for c in cs)
    per_digest = 254 // rb
    digests = -(-size.snap_challenges // per_digest)
    first = hash_custom_gr(12345, k * digests)
    assert cs[0] == (first & ((1 << rb) - 1)) | (k << rb)
    assert cs[1] == ((first >> rb) & ((1 << rb) - 1)) | (k << rb)
    if digests > 1:
        second = hash_custom_gr(12345, k * digests + 1)
        assert cs[per_digest] == (second & ((1 << rb) - 1)) | (k << rb)
