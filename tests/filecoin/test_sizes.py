"""Sector sizes, proof ids, porep_id, circuit ids and the published parameter file names (docs/circuits.md §2)."""

from __future__ import annotations

import pytest

from cuzk.errors import CuzkError
from cuzk.filecoin.sizes import (
    ALL_SIZES,
    POST_PROOFS,
    SEAL_PROOFS,
    UPDATE_PROOFS,
    ApiVersion,
    CircuitKind,
    TreeShape,
    circuit_id,
    parameter_cache_id,
    parameter_file_name,
    parse_circuit_id,
    porep_id,
    post_proof,
    seal_proof,
    sector_params,
    update_proof,
)

# The file-name hash part of every published parameter set (kind order: PoRep, Winning, Window,
# SnapDeals; docs/circuits.md §3).
PUBLISHED = {
    "2KiB": ("032d3138d22506ec0082ed72b2dcba18df18477904e35bafee82b3793b06832f",
             "3ea05428c9d11689f23529cde32fd30aabd50f7d2c93657c1d3650bca3e8ea9e",
             "0170db1f394b35d995252228ee359194b13199d259380541dc529fb0099096b0",
             "fb9e095bebdd77511c0269b967b4d87ba8b8a525edaa0e165de23ba454510194"),
    "8MiB": ("ecd683648512ab1765faa2a5f14bab48f676e633467f0aa8aad4b55dcb0652bb",
             "50c7368dea9593ed0989e70974d28024efa9d156d585b7eea1be22b2e753f331",
             "5294475db5237a2e83c3e52fd6c2b03859a1831d45ed08c4f35dbf9a803165a9",
             "92180959e1918d26350b8e6cfe217bbdd0a2d8de51ebec269078b364b715ad63"),
    "512MiB": ("6babf46ce344ae495d558e7770a585b2382d54f225af8ed0397b8be7c3fcd472",
               "7d739b8cf60f1b0709eeebee7730e297683552e4b69cab6984ec0285663c5781",
               "0cfb4f178bbb71cf2ecfcd42accce558b27199ab4fb59cb78f2483fe21ef36d9",
               "61fa69f38b9cc771ba27b670124714b4ea77fbeae05e377fb859c4a43b73a30c"),
    "32GiB": ("82a357d2f2ca81dc61bb45f4a762807aedee1b0a53fd6c4e77b46a01bfef7820",
              "559e581f022bb4e4ec6e719e563bf0e026ad6de42e56c18714a2c692b1b88d7e",
              "0377ded656c6f524f1618760bffe4e0a1c51d5a70c4509eedae8a27555733edc",
              "3b7f44a9362e3985369454947bc94022e118211e49fd672d52bec1cbfd599d18"),
    "64GiB": ("96f1b4a04c5c51e4759bbf224bbc2ef5a42c7100f16ec0637123f16a845ddfb2",
              "b62098629d07946e9028127e70295ed996fe3ed25b0f9f88eb610a0ab4385a3c",
              "2627e4006b67f99cef990c0a47d5426cb7ab0a0ad58fc1061547bf2d28b09def",
              "102e1444a7e9a97ebf1e3d6855dcc77e66c011ea66f936d9b2c508f87f2f83a7"),
}
KINDS = (CircuitKind.POREP, CircuitKind.WINNING, CircuitKind.WINDOW, CircuitKind.SNAP)


@pytest.mark.parametrize("size", list(PUBLISHED))
def test_parameter_file_names_match_parameters_json(size: str) -> None:
    for kind, expected in zip(KINDS, PUBLISHED[size], strict=True):
        assert parameter_cache_id(kind, size).endswith("-" + expected)
    shape = str(sector_params(size).tree_shape)
    assert parameter_file_name(CircuitKind.POREP, size) == (
        f"v28-stacked-proof-of-replication-merkletree-poseidon_hasher-{shape}-sha256_hasher-{PUBLISHED[size][0]}.params")
    assert parameter_file_name(CircuitKind.WINNING, size, "vk") == (
        f"v28-proof-of-spacetime-fallback-merkletree-poseidon_hasher-{shape}-{PUBLISHED[size][1]}.vk")
    assert parameter_file_name(CircuitKind.SNAP, size, "meta") == (
        f"v28-empty-sector-update-merkletree-poseidon_hasher-{shape}-{PUBLISHED[size][3]}.meta")


def test_snap_poseidon_variant_and_full_example() -> None:
    assert parameter_file_name(CircuitKind.SNAP, "32GiB", snap_poseidon=True) == (
        "v28-empty-sector-update-poseidon-merkletree-poseidon_hasher-8-8-0-" + PUBLISHED["32GiB"][3] + ".params")
    assert parameter_file_name(CircuitKind.POREP, "32GiB") == (
        "v28-stacked-proof-of-replication-merkletree-poseidon_hasher-8-8-0-sha256_hasher-"
        "82a357d2f2ca81dc61bb45f4a762807aedee1b0a53fd6c4e77b46a01bfef7820.params")
    with pytest.raises(CuzkError, match="params, vk or meta"):
        parameter_file_name(CircuitKind.POREP, "2KiB", "bin")


def test_size_table() -> None:
    rows = {p.name: (p.nodes, p.layers, str(p.tree_shape), p.base_tree_count, p.base_path_length, p.porep_partitions,
                     p.porep_challenges, p.ni_partitions, p.ni_challenges, p.window_post_sectors, p.snap_partitions,
                     p.snap_challenges, p.snap_h, p.snap_apex_leaves) for p in ALL_SIZES}
    assert rows == {
        "2KiB": (64, 2, "8-0-0", 1, 2, 1, 2, 13, 2, 2, 1, 10, 1, 8),
        "8MiB": (1 << 18, 2, "8-0-0", 1, 6, 1, 2, 13, 2, 2, 4, 10, 10, 128),
        "512MiB": (1 << 24, 2, "8-0-0", 1, 8, 1, 2, 13, 2, 2, 16, 86, 10, 128),
        "32GiB": (1 << 30, 11, "8-8-0", 8, 9, 10, 18, 126, 18, 2349, 16, 86, 10, 128),
        "64GiB": (1 << 31, 11, "8-8-2", 16, 9, 10, 18, 126, 18, 2300, 16, 86, 10, 128),
    }
    assert sector_params("8MiB").snap_hs == (7, 8, 9, 10, 11, 12)
    assert sector_params("2KiB").snap_hs == (1,) * 6
    assert TreeShape(8, 8, 2).base_tree_count == 16


def test_size_lookup_by_bytes_name_and_token() -> None:
    p = sector_params("32GiB")
    assert sector_params(34359738368) is p and sector_params("32gib") is p and sector_params("32g") is p
    with pytest.raises(CuzkError, match="unknown sector size '3GiB'; published sizes are 2KiB, 8MiB"):
        sector_params("3GiB")


def test_registered_seal_proofs() -> None:
    assert len(SEAL_PROOFS) == 20 and [p.id for p in SEAL_PROOFS] == list(range(20))
    assert seal_proof(3).name == "StackedDrg32GiBV1" and seal_proof(3).api_version is ApiVersion.V1_0_0
    p = seal_proof("StackedDrg32GiBV1_1")
    assert p.id == 8 and p.api_version is ApiVersion.V1_1_0 and p.feature is None and not p.is_legacy
    assert p.porep_id == bytes([8]) + bytes(31)
    syn = seal_proof(10)
    assert syn.name == "StackedDrg2KiBV1_1_Feat_SyntheticPoRep" and syn.synthetic
    assert syn.api_version is ApiVersion.V1_2_0
    ni = seal_proof("StackedDrg64GiBV1_2_Feat_NonInteractivePoRep")
    assert ni.id == 19 and ni.non_interactive and ni.partitions == 126 and ni.challenges_per_partition == 18
    assert seal_proof(0).porep_id == bytes(32)
    assert porep_id(5, nonce=1) == bytes([5]) + bytes(7) + bytes([1]) + bytes(23)
    with pytest.raises(CuzkError, match="unknown registered seal proof 20"):
        seal_proof(20)


def test_registered_post_and_update_proofs() -> None:
    assert [p.id for p in POST_PROOFS] == list(range(15))
    assert post_proof(0).name == "StackedDrgWinning2KiBV1" and post_proof(0).kind is CircuitKind.WINNING
    w = post_proof(13)
    assert w.name == "StackedDrgWindow32GiBV1_2" and w.chain_name == "StackedDrgWindow32GiBV1_1"
    assert w.api_version is ApiVersion.V1_2_0 and w.sector_count == 2349 and w.challenge_count == 10
    assert post_proof("StackedDrgWindow32GiBV1_1") is w
    assert post_proof(8).api_version is ApiVersion.V1_0_0 and post_proof(3).challenge_count == 66
    assert [u.name for u in UPDATE_PROOFS][4] == "StackedDrg64GiBV1"
    assert update_proof(2).api_version is ApiVersion.V1_1_0


def test_circuit_ids_round_trip() -> None:
    ids = [circuit_id(kind, p) for p in ALL_SIZES for kind in KINDS]
    assert ids[:4] == ["porep-2k", "winning-2k", "wpost-2k", "snap-2k"]
    assert "porep-512m" in ids and "snap-64g" in ids
    for cid in ids:
        kind, p = parse_circuit_id(cid)
        assert circuit_id(kind, p) == cid
    with pytest.raises(CuzkError, match="kind must be one of porep, winning, wpost, snap"):
        parse_circuit_id("seal-2k")
    with pytest.raises(CuzkError, match="size must be one of 2k, 8m, 512m, 32g, 64g"):
        parse_circuit_id("porep-4k")


def test_filecoin_package_stays_below_the_circuit_layer() -> None:
    import subprocess
    import sys

    code = ("import sys, cuzk.filecoin.porep, cuzk.filecoin.sparse, cuzk.filecoin.post, cuzk.filecoin.snap, "
            "cuzk.cli.gen_vanilla; print(sorted(m for m in sys.modules if m.split('.')[:2] in "
            "(['cuzk', 'r1cs'], ['cuzk', 'gadgets'], ['cuzk', 'circuits'], ['cuzk', 'groth16'])))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
