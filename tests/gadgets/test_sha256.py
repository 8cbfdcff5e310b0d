"""The SHA-256 gadget and its Filecoin framing (docs/circuits.md §6, §7): the constraint counts
stated in bellperson / rust-fil-proofs tests, digests against hashlib, and hash2 against the native
tree_d node hash."""

from __future__ import annotations

import hashlib
import random

import pytest

from cuzk.field.constants import R_MODULUS
from cuzk.gadgets.boolean import (
    FALSE,
    AllocatedBit,
    Boolean,
    Constant,
    Is,
    bytes_into_boolean_vec,
    bytes_into_boolean_vec_be,
    reverse_bit_numbering,
)
from cuzk.gadgets.multipack import pack_bits
from cuzk.gadgets.num import AllocatedNum
from cuzk.gadgets.sha256 import (
    hash2_circuit,
    hash_leaf_bits_circuit,
    sha256,
    sha256_block_no_padding,
    sha256_compression_function,
    sha256_fr32_digest_to_field_bits,
    sha256_iv,
)
from cuzk.gadgets.uint32 import UInt32
from cuzk.r1cs import ProvingAssignment, RecordingCS, ShapeCS


def shape() -> ShapeCS:
    cs = ShapeCS()
    cs.alloc_input("ONE", 1)
    return cs


def proving() -> ProvingAssignment:
    cs = ProvingAssignment(check=True)
    cs.alloc_input("ONE", 1)
    return cs


def alloc_bits(cs, n: int) -> list[Boolean]:
    return [Is(AllocatedBit.alloc(cs, None)) for _ in range(n)]


def fr_stream_bits(cs) -> list[Boolean]:
    """An allocated Fr's 255 LE bits as a SHA-256 stream (one constant pad bit), as Filecoin frames it."""
    return reverse_bit_numbering(alloc_bits(cs, 255))


def digest_bytes(bits: list[Boolean]) -> bytes:
    value = 0
    for b in bits:
        value = value << 1 | int(b.get_value())
    return value.to_bytes(len(bits) // 8, "big")


def fr32_node(left: int, right: int) -> int:
    """Native tree_d node: fr32-truncate(SHA256(LE(left) ‖ LE(right))) read little-endian."""
    d = bytearray(hashlib.sha256(left.to_bytes(32, "little") + right.to_bytes(32, "little")).digest())
    d[31] &= 0x3F
    return int.from_bytes(d, "little")


# -- stated constraint counts (ShapeCS, blank) ---------------------------------------------------------

def test_compression_of_512_allocated_bits_is_25840_rows() -> None:
    cs = shape()
    bits = alloc_bits(cs, 512)
    sha256_compression_function(cs, bits, sha256_iv())
    assert cs.num_constraints - 512 == 25_840  # bellperson test_full_block


def test_full_hash_of_512_allocated_bits_is_44874_rows() -> None:
    cs = shape()
    out = sha256(cs, alloc_bits(cs, 512))
    assert len(out) == 256 and cs.num_constraints - 512 == 44_874  # bellperson test_full_hash


def test_hash_leaf_bits_circuit_is_45387_rows() -> None:
    cs = shape()
    left, right = alloc_bits(cs, 256), alloc_bits(cs, 256)
    hash_leaf_bits_circuit(cs, left, right)
    assert cs.num_constraints == 45_387  # filecoin-hashers / storage-proofs-core util.rs test


def test_tree_d_node_message_is_44866_rows_and_hash2_adds_decomposition_and_packing() -> None:
    cs = shape()
    message = fr_stream_bits(cs) + fr_stream_bits(cs)
    before = cs.num_constraints
    sha256(cs, message)
    assert cs.num_constraints - before == 44_866
    cs = shape()
    left, right = AllocatedNum.alloc(cs, "l", None), AllocatedNum.alloc(cs, "r", None)
    hash2_circuit(cs, left, right)
    assert cs.num_constraints == 2 * 256 + 44_866 + 1


@pytest.mark.slow
def test_label_messages_match_the_stated_counts() -> None:
    """create_label test (constant layer/node, 256-bit allocated ids/parents): 522,296 SHA rows
    (532,025 in all); the production label message (pad bits constant, challenge allocated): 522,268."""
    cs = shape()
    replica_id = alloc_bits(cs, 256)
    parents = [alloc_bits(cs, 256) for _ in range(37)]
    message = replica_id + UInt32.constant(3).into_bits_be() + [Constant(bool(22 >> i & 1)) for i in range(63, -1, -1)]
    message += [FALSE] * 160 + [bit for p in parents for bit in p]
    assert len(message) == 9984
    before = cs.num_constraints
    digest = sha256(cs, message)
    assert cs.num_constraints - before == 522_296
    pack_bits(cs, sha256_fr32_digest_to_field_bits(digest))
    assert cs.num_constraints == 532_025

    cs = shape()
    replica_id = fr_stream_bits(cs)
    challenge = alloc_bits(cs, 64)
    columns = [fr_stream_bits(cs) for _ in range(6)]
    message = replica_id + UInt32.constant(1).into_bits_be() + challenge[::-1] + [FALSE] * 160
    message += [bit for p in (columns * 7)[:37] for bit in p]
    before = cs.num_constraints
    sha256(cs, message)
    assert cs.num_constraints - before == 522_268


# -- constant folding ------------------------------------------------------------------------------------

def test_constant_messages_fold_to_constants() -> None:
    cs = shape()
    block = [Constant(i == 0) for i in range(512)]  # the padded empty message
    out = sha256_block_no_padding(cs, block)
    assert cs.num_constraints == 0 and all(b.is_constant for b in out)
    assert digest_bytes(out) == hashlib.sha256(b"").digest()
    data = b"constant"
    out = sha256(cs, [Constant(bool(byte >> i & 1)) for byte in data for i in range(7, -1, -1)])
    assert cs.num_constraints == 0 and digest_bytes(out) == hashlib.sha256(data).digest()


def test_rejects_partial_bytes_and_bad_blocks() -> None:
    cs = shape()
    with pytest.raises(ValueError):
        sha256(cs, [FALSE] * 7)
    with pytest.raises(ValueError):
        sha256_compression_function(cs, [FALSE] * 511, sha256_iv())


# -- witness correctness ------------------------------------------------------------------------------------

@pytest.mark.parametrize("length", [0, 1, 3, 55, 56, 64, 119])
def test_digests_match_hashlib(length) -> None:
    data = random.Random(length).randbytes(length)
    cs = proving()
    bits = bytes_into_boolean_vec_be(cs, data, 8 * length)
    out = sha256(cs, bits)
    assert digest_bytes(out) == hashlib.sha256(data).digest()
    assert len(out) == 256


def test_hash2_circuit_is_the_tree_d_node_hash() -> None:
    rng = random.Random(7)
    for left, right in [(rng.randrange(R_MODULUS), rng.randrange(R_MODULUS)), (R_MODULUS - 1, 0)]:
        cs = proving()
        node = hash2_circuit(cs, AllocatedNum.alloc(cs, "l", left), AllocatedNum.alloc(cs, "r", right))
        assert node.value == fr32_node(left, right)
        assert cs.num_constraints == 2 * 256 + 44_866 + 1


def test_hash_leaf_bits_circuit_value() -> None:
    rng = random.Random(8)
    left, right = rng.randrange(R_MODULUS), rng.randrange(R_MODULUS)
    cs = proving()
    lb = bytes_into_boolean_vec(cs, left.to_bytes(32, "little"), 256)
    rb = bytes_into_boolean_vec(cs, right.to_bytes(32, "little"), 256)
    assert hash_leaf_bits_circuit(cs, lb, rb).value == fr32_node(left, right)


def test_back_ends_agree_on_a_node_hash() -> None:
    """Recording (structure only) and proving produce the same number of rows and variables."""
    rec = RecordingCS()
    rec.alloc_input("ONE", 1)
    hash2_circuit(rec, AllocatedNum.alloc(rec, "l", None), AllocatedNum.alloc(rec, "r", None))
    prover = proving()
    hash2_circuit(prover, AllocatedNum.alloc(prover, "l", 1), AllocatedNum.alloc(prover, "r", 2))
    assert (rec.num_constraints, rec.num_aux, rec.num_inputs) == (
        prover.num_constraints, prover.num_aux, prover.num_inputs)


def test_compression_ends_with_the_pending_multieq_row() -> None:
    """The MultiEq is flushed when the compression ends: the last row is (LHS) * ONE = (RHS), right
    after the 33 booleanity rows of H7's result bits, which its RHS includes."""
    cs = RecordingCS()
    cs.alloc_input("ONE", 1)
    sha256_compression_function(cs, alloc_bits(cs, 512), sha256_iv())
    m = cs.matrices()
    last = m.num_constraints - 1
    assert list(m.b.cols[m.b.row_ptr[last]:m.b.row_ptr[last + 1]]) == [0]
    c_cols = m.c.cols[m.c.row_ptr[last]:m.c.row_ptr[last + 1]]
    assert len(c_cols) > 33 and all(col >= 1 for col in c_cols)
    h7_bits = [m.num_inputs + m.num_aux - 33 + i for i in range(33)]
    for i, col in enumerate(h7_bits):  # booleanity rows of H7's result bits, in order, just before
        r = last - 33 + i
        assert list(m.b.cols[m.b.row_ptr[r]:m.b.row_ptr[r + 1]]) == [col]
    assert set(h7_bits) <= {int(col) for col in c_cols}
