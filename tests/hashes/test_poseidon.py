"""Native Poseidon against neptune 11.0.0's known answers (docs/circuits.md §8, §13)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cuzk.field.constants import R_MODULUS
from cuzk.hashes.poseidon import (
    hash_column,
    hash_custom_gr,
    hash_merkle,
    permute_optimized,
    permute_reference,
    poseidon_hash,
)
from cuzk.hashes.poseidon_constants import (
    ENCRYPTION_TAG,
    SPONGE_TAG,
    VARIABLE_LENGTH_TAG,
    SparseMatrix,
    apply_matrix,
    cauchy_mds,
    constant_length_tag,
    custom_tag,
    identity,
    mat_inverse,
    mat_mul,
    merkle_tree_tag,
    partial_rounds,
    poseidon_constants,
    sparse_factorization,
    transpose,
)


def _limbs(limbs: list[int]) -> int:
    """neptune's `scalar_from_u64s`: four little-endian u64 limbs."""
    return sum(limb << (64 * i) for i, limb in enumerate(limbs))


def _le_hex(text: str) -> int:
    return int.from_bytes(bytes.fromhex(text), "little")


# docs/circuits.md §13: preimage [0, 1, ..., arity - 1], MerkleTree tag.
STANDARD_KATS = {
    2: [0x2E203C369A02E7FF, 0xA6FBA9339D05A69D, 0x739E0FD902EFE161, 0x396508D75E76A56B],
    4: [0x019814FF6662075D, 0xFB6B4605BF1327EC, 0x00DB3C6579229399, 0x58A54B10A9E5848A],
    8: [0x2A9934F56D38A5E6, 0x4B682E9D9CC4AED9, 0x1201004211677077, 0x2394611DA3A5DE55],
    11: [0xCEE3BBC32B693163, 0x09F3DCD8CCB08FC1, 0x6CA537E232EBE87A, 0x0C0FC1B2E5227F28],
    16: [0x1291C74060266D37, 0x5B8DBC6D30680A6F, 0xC1C2FB5A6F871E63, 0x2D3AE2663381AE8A],
    24: [0xD7EF3569F585B321, 0xC3E779F6468815B1, 0x066F39BF783F3D9F, 0x63BEB8831F11AE15],
    36: [0x4473606DFA4E8140, 0x75CD368DF8A8AC3C, 0x540A30E03C10BBAA, 0x699303082A6E5D5F],
}
# neptune src/poseidon.rs `hash_values` (strengthened arity 2 is also in docs/circuits.md §13).
STRENGTHENED_KATS = {
    2: [0x793DBAF54552CD69, 0x5278ECBF17040EA6, 0xC48B36ECC4CAB748, 0x33D28A753BAEE41B],
    4: [0x4650EE190212AA9A, 0xE5113A254D6F5C7E, 0x54013BDAF68BA4C2, 0x09D8207C51CA3F43],
    8: [0x9F0C3C93C3FC894E, 0xE843D4CFBA662DF1, 0xD69AAE8FE1CB63E8, 0x69E61465981AE17E],
}
# Same source: ConstantLength(4) of [0, 1, 2, 3], zero-padded to the arity.
CONSTANT_LENGTH_4_KATS = {
    4: [0x8935B00A07909D45, 0x4984DE08542C9977, 0x39443980077D7593, 0x3A21A6AE86754A29],
    8: [0x370A94532F818897, 0x203E3C7C4A85C1F9, 0xCAD8B9F8AEB1578F, 0x5C6DE4B69DE9D792],
    11: [0xE9B0CB7D6496F73B, 0x7D2807D793AF9582, 0xEF841B6BF51A5A39, 0x02550C3A2113C7CA],
}


@pytest.mark.parametrize("arity", sorted(STANDARD_KATS))
def test_standard_known_answers(arity: int) -> None:
    expected = _limbs(STANDARD_KATS[arity])
    preimage = list(range(arity))
    assert poseidon_hash(preimage) == expected
    assert poseidon_hash(preimage, optimized=False) == expected
    assert hash_merkle(arity, preimage) == expected


@pytest.mark.parametrize("arity", sorted(STRENGTHENED_KATS))
def test_strengthened_known_answers(arity: int) -> None:
    expected = _limbs(STRENGTHENED_KATS[arity])
    for optimized in (True, False):
        assert poseidon_hash(list(range(arity)), strength="strengthened", optimized=optimized) == expected


@pytest.mark.parametrize("arity", sorted(CONSTANT_LENGTH_4_KATS))
def test_constant_length_pads_with_zeros(arity: int) -> None:
    got = poseidon_hash([0, 1, 2, 3], arity=arity, tag="constant_length")
    assert got == _limbs(CONSTANT_LENGTH_4_KATS[arity])


def test_curio_arity_8_vector() -> None:
    """Curio lib/proof/post_vproof_test.go: an oct-tree node (docs/circuits.md §13)."""
    children = [_le_hex(h) for h in (
        "f743111428ecda9b74a18826f1cc62d48ae1510de17e58645997559f86442f31",
        "197a6efa37086e3a37108f8460c52bc810e2781aff0091bfd7b74e3f6f752f02",
        "01c2c12f7930bbb59e3b36dae1c694b33ac6b3f199ec32a8665fadb8338f4f21",
        "bbe672a853f65cdb2563339ca61d6ad648473b4b4ce44bf3a48486424b865a2d",
        "937d57295f488cea8099f5525958f1af39c6241614b917835292e8e2314cf908",
        "3272570cd8ba38c1183629ca72d5e9149d76786ed22c1d591db3d2bccfa7d308",
        "2d3fc90e11aaf601bd1beae80fc3aba15a9e1f886d8140533ce36cda3dd9f936",
        "0a017e264d0728bfcd2edb3c6c60cc5a05a02af31a71cdd7bb2da27616f5f630",
    )]
    expected = _le_hex("0737ca506df7d4544f8512df35aaa07ed8a40691e96ae868c23320220fec6866")
    assert hash_merkle(8, children) == expected
    assert poseidon_hash(children, optimized=False) == expected


def test_first_round_constants() -> None:
    """docs/circuits.md §8: the Grain LFSR output for t = 3 and t = 12."""
    c2 = poseidon_constants(2)
    assert len(c2.round_constants) == 189
    assert c2.round_constants[:3] == (
        0x669F064BFA3AE17A23BD51861DBB4A24501EAC92A2758B36A7320A009D6ED3D8,
        0x0A61A8DEFBACCA36E4537FF2C84FA66CEEE67C9645AC27346E72AB842B9D3F15,
        0x21E9CEFA24B89D09F91B1E8A45DF275B17292B4E1AAA49301E234771128165D5,
    )
    c11 = poseidon_constants(11)
    assert len(c11.round_constants) == 780
    assert c11.round_constants[0] == 0x1F6C9576E648B5047399BFC5F38902E0D506F18E0F3AB77DE6DE096BD089BCE4


def test_round_numbers() -> None:
    """docs/circuits.md §8 table and neptune's strengthened cases (lib.rs test_strengthened_round_numbers)."""
    expected = {1: 55, 2: 55, 3: 56, 6: 56, 7: 57, 14: 57, 15: 59, 30: 59, 31: 60, 36: 60}
    for arity, r_p in expected.items():
        assert partial_rounds(arity) == r_p, arity
    strengthened = {1: 69, 2: 69, 3: 70, 6: 70, 7: 72, 11: 72, 16: 74, 24: 74, 36: 75}
    for arity, r_p in strengthened.items():
        assert partial_rounds(arity, "strengthened") == r_p, arity
    c = poseidon_constants(8)
    assert (c.full_rounds, c.partial_rounds, c.width) == (8, 57, 9)
    with pytest.raises(ValueError):
        partial_rounds(37)
    with pytest.raises(ValueError):
        partial_rounds(2, "weak")


def test_domain_tags() -> None:
    assert merkle_tree_tag(2) == 3 and merkle_tree_tag(8) == 255 and merkle_tree_tag(11) == 2047
    assert custom_tag(1) == 1 << 40 and custom_tag(256) == 256 << 40
    assert constant_length_tag(4) == 4 << 64
    assert (VARIABLE_LENGTH_TAG, ENCRYPTION_TAG, SPONGE_TAG) == (1 << 64, 1 << 32, 0)
    for bad in (0, 257):
        with pytest.raises(ValueError):
            custom_tag(bad)


@pytest.mark.parametrize("width", [3, 5, 9, 12])
def test_mds_is_symmetric_cauchy_and_invertible(width: int) -> None:
    m = cauchy_mds(width)
    assert m == transpose(m)
    assert m[0][0] * width % R_MODULUS == 1 and m[1][2] * (1 + 2 + width) % R_MODULUS == 1
    c = poseidon_constants(width - 1)
    assert c.mds == m
    assert mat_mul(m, c.mds_inverse) == identity(width) == mat_mul(c.mds_inverse, m)


def _literal_sparse_factorization(mds: tuple, rounds: int) -> tuple:
    """neptune's loop as written (mds.rs), the oracle for the closed form we use."""
    curr, kept = mds, []
    for _ in range(rounds):
        m_hat = tuple(row[1:] for row in curr[1:])
        w_hat = apply_matrix(mat_inverse(m_hat), [row[0] for row in curr[1:]])
        kept.append(SparseMatrix(w_hat=(curr[0][0], *w_hat), v_rest=tuple(curr[0][1:])))
        m_prime = ((1,) + (0,) * len(m_hat), *((0, *row) for row in m_hat))
        curr = mat_mul(mds, m_prime)
    return curr, tuple(reversed(kept))


@pytest.mark.parametrize("arity", [2, 4, 8])
def test_sparse_factorization_matches_neptune_loop(arity: int) -> None:
    c = poseidon_constants(arity)
    assert sparse_factorization(c.mds, c.partial_rounds) == _literal_sparse_factorization(
        c.mds, c.partial_rounds)
    assert (c.pre_sparse_matrix, c.sparse_matrices) == _literal_sparse_factorization(c.mds, c.partial_rounds)
    assert len(c.compressed_round_constants) == c.full_rounds * c.width + c.partial_rounds


def test_sparse_matrix_is_identity_off_its_first_row_and_column() -> None:
    sparse = poseidon_constants(4).sparse_matrices[0]
    m = sparse.to_matrix()
    assert all(m[i][j] == int(i == j) for i in range(1, 5) for j in range(1, 5))
    assert tuple(row[0] for row in m) == sparse.w_hat and m[0][1:] == sparse.v_rest


field_elements = st.integers(min_value=0, max_value=R_MODULUS - 1)


@settings(deadline=None, max_examples=15)
@given(arity=st.sampled_from([2, 4, 8, 11]), data=st.data())
def test_reference_and_optimized_permutations_agree(arity: int, data: st.DataObject) -> None:
    """The whole output state agrees, not just the digest (tag and inputs arbitrary)."""
    state = data.draw(st.lists(field_elements, min_size=arity + 1, max_size=arity + 1))
    c = poseidon_constants(arity)
    assert permute_reference(state, c) == permute_optimized(state, c)


@settings(deadline=None, max_examples=10)
@given(a=field_elements, b=field_elements)
def test_reference_and_optimized_agree_strengthened_and_custom(a: int, b: int) -> None:
    assert poseidon_hash([a, b], strength="strengthened") == poseidon_hash(
        [a, b], strength="strengthened", optimized=False)
    assert hash_custom_gr(a, b) == poseidon_hash([a, b], tag=1 << 40, optimized=False)


def test_convenience_wrappers_pick_the_right_instance() -> None:
    assert hash_column([5, 6]) == poseidon_hash([5, 6], arity=2, tag="merkle")
    assert hash_column(list(range(11))) == _limbs(STANDARD_KATS[11])
    assert hash_custom_gr(0, 1) != hash_merkle(2, [0, 1])  # only the tag differs


def test_input_count_and_range_are_checked() -> None:
    with pytest.raises(ValueError, match="exactly 2 inputs"):
        poseidon_hash([1], arity=2)
    with pytest.raises(ValueError, match="exactly 8 inputs"):
        hash_merkle(8, [0] * 7)
    with pytest.raises(ValueError, match="exactly 2 inputs"):
        poseidon_hash([1, 2, 3], arity=2, tag=custom_tag(1))
    with pytest.raises(ValueError, match="exceed"):
        poseidon_hash([1, 2, 3], arity=2, tag="constant_length")
    with pytest.raises(ValueError, match="not a field element"):
        poseidon_hash([R_MODULUS, 0])
    with pytest.raises(ValueError, match="unknown Poseidon domain tag"):
        poseidon_hash([0, 0], tag="variable_length")
