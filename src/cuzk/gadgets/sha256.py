"""The SHA-256 gadget, row for row as bellperson's `sha256.rs` (docs/circuits.md §7), and the
Filecoin framing around it (docs/circuits.md §6, §7).

Bits are in stream order: bytes in order, each byte MSB first (the standard digest bit order).
Padding, IV and round constants are constant words, so everything they touch folds away. One
`MultiEq` per compression packs the word additions; the additions into `a` and `e` are deferred to
their first use so that each round costs one `addmany` of 7 (resp. 6) operands instead of a chain.
"""

from __future__ import annotations

from collections.abc import Sequence

from cuzk.gadgets.boolean import FALSE, TRUE, Boolean, reverse_bit_numbering
from cuzk.gadgets.multieq import MultiEq
from cuzk.gadgets.multipack import CAPACITY, pack_bits
from cuzk.gadgets.num import AllocatedNum
from cuzk.gadgets.uint32 import UInt32
from cuzk.r1cs import ConstraintSystem

ROUND_CONSTANTS = (
    0x428A2F98, 0x71374491, 0xB5C0FBCF, 0xE9B5DBA5, 0x3956C25B, 0x59F111F1, 0x923F82A4, 0xAB1C5ED5,
    0xD807AA98, 0x12835B01, 0x243185BE, 0x550C7DC3, 0x72BE5D74, 0x80DEB1FE, 0x9BDC06A7, 0xC19BF174,
    0xE49B69C1, 0xEFBE4786, 0x0FC19DC6, 0x240CA1CC, 0x2DE92C6F, 0x4A7484AA, 0x5CB0A9DC, 0x76F988DA,
    0x983E5152, 0xA831C66D, 0xB00327C8, 0xBF597FC7, 0xC6E00BF3, 0xD5A79147, 0x06CA6351, 0x14292967,
    0x27B70A85, 0x2E1B2138, 0x4D2C6DFC, 0x53380D13, 0x650A7354, 0x766A0ABB, 0x81C2C92E, 0x92722C85,
    0xA2BFE8A1, 0xA81A664B, 0xC24B8B70, 0xC76C51A3, 0xD192E819, 0xD6990624, 0xF40E3585, 0x106AA070,
    0x19A4C116, 0x1E376C08, 0x2748774C, 0x34B0BCB5, 0x391C0CB3, 0x4ED8AA4A, 0x5B9CCA4F, 0x682E6FF3,
    0x748F82EE, 0x78A5636F, 0x84C87814, 0x8CC70208, 0x90BEFFFA, 0xA4506CEB, 0xBEF9A3F7, 0xC67178F2,
)

IV = (0x6A09E667, 0xBB67AE85, 0x3C6EF372, 0xA54FF53A, 0x510E527F, 0x9B05688C, 0x1F83D9AB, 0x5BE0CD19)

_K_WORDS = tuple(UInt32.constant(k) for k in ROUND_CONSTANTS)


def sha256_iv() -> list[UInt32]:
    """The initial hash value as constant words."""
    return [UInt32.constant(v) for v in IV]


def sha256(cs: ConstraintSystem, bits: Sequence[Boolean]) -> list[Boolean]:
    """SHA-256 of a whole number of bytes of stream-order bits → 256 digest bits in stream order."""
    if len(bits) % 8:
        raise ValueError(f"sha256 takes whole bytes, got {len(bits)} bits")
    length = len(bits)
    padded = list(bits)
    padded.append(TRUE)
    padded.extend([FALSE] * (-(len(padded) + 64) % 512))
    padded.extend(TRUE if length >> i & 1 else FALSE for i in range(63, -1, -1))
    cur = sha256_iv()
    for i in range(0, len(padded), 512):
        cur = sha256_compression_function(cs, padded[i:i + 512], cur)
    return [bit for word in cur for bit in word.into_bits_be()]


def sha256_block_no_padding(cs: ConstraintSystem, bits: Sequence[Boolean]) -> list[Boolean]:
    """One compression of 512 bits from the IV, no padding (bellperson's helper of that name)."""
    return [bit for word in sha256_compression_function(cs, bits, sha256_iv()) for bit in word.into_bits_be()]


class _Deferred:
    """Operands of an addition not performed yet (bellperson's `Maybe::Deferred`)."""

    __slots__ = ("operands",)

    def __init__(self, operands: list[UInt32]) -> None:
        self.operands = operands


def _compute(word: UInt32 | _Deferred, meq: MultiEq, others: Sequence[UInt32] = ()) -> UInt32:
    """`Maybe::compute`: a concrete word is returned as is (even with `others`, like bellperson)."""
    if isinstance(word, UInt32):
        return word
    return UInt32.addmany(meq, [*word.operands, *others])


def sha256_compression_function(cs: ConstraintSystem, input_bits: Sequence[Boolean],
                                current_hash_value: Sequence[UInt32]) -> list[UInt32]:
    """One compression: message schedule, 64 rounds, the 8 final additions; the pending MultiEq row
    is emitted last."""
    if len(input_bits) != 512:
        raise ValueError(f"a compression takes 512 bits, got {len(input_bits)}")
    if len(current_hash_value) != 8:
        raise ValueError(f"the hash state has 8 words, got {len(current_hash_value)}")
    w = [UInt32.from_bits_be(input_bits[i:i + 32]) for i in range(0, 512, 32)]
    with MultiEq(cs) as meq:
        for i in range(16, 64):
            x = w[i - 15]
            s0 = x.rotr(7).xor(cs, x.rotr(18)).xor(cs, x.shr(3))
            y = w[i - 2]
            s1 = y.rotr(17).xor(cs, y.rotr(19)).xor(cs, y.shr(10))
            w.append(UInt32.addmany(meq, [w[i - 16], s0, w[i - 7], s1]))

        a: UInt32 | _Deferred = current_hash_value[0]
        b, c, d = current_hash_value[1], current_hash_value[2], current_hash_value[3]
        e: UInt32 | _Deferred = current_hash_value[4]
        f, g, h = current_hash_value[5], current_hash_value[6], current_hash_value[7]
        for i in range(64):
            new_e = _compute(e, meq)
            s1 = new_e.rotr(6).xor(cs, new_e.rotr(11)).xor(cs, new_e.rotr(25))
            ch = UInt32.sha256_ch(cs, new_e, f, g)
            temp1 = [h, s1, ch, _K_WORDS[i], w[i]]
            new_a = _compute(a, meq)
            s0 = new_a.rotr(2).xor(cs, new_a.rotr(13)).xor(cs, new_a.rotr(22))
            maj = UInt32.sha256_maj(cs, new_a, b, c)
            h, g, f = g, f, new_e
            e = _Deferred([*temp1, d])
            d, c, b = c, b, new_a
            a = _Deferred([*temp1, s0, maj])

        cur = current_hash_value
        return [
            _compute(a, meq, [cur[0]]),
            UInt32.addmany(meq, [cur[1], b]),
            UInt32.addmany(meq, [cur[2], c]),
            UInt32.addmany(meq, [cur[3], d]),
            _compute(e, meq, [cur[4]]),
            UInt32.addmany(meq, [cur[5], f]),
            UInt32.addmany(meq, [cur[6], g]),
            UInt32.addmany(meq, [cur[7], h]),
        ]


# -- Filecoin framing (filecoin-hashers sha256.rs) --------------------------------------------------

def sha256_fr32_digest_to_field_bits(digest_bits: Sequence[Boolean]) -> list[Boolean]:
    """Digest (stream order) → its first 254 LE bits: reverse within bytes, keep bits 0..253.

    This is fr32 truncation: the digest read as a little-endian integer with its top two bits dropped.
    """
    return reverse_bit_numbering(digest_bits)[:CAPACITY]


def hash_circuit(cs: ConstraintSystem, bits: Sequence[Boolean]) -> AllocatedNum:
    """filecoin-hashers `hash_circuit`: sha256, fr32-truncate, pack_bits (one aux + one row)."""
    return pack_bits(cs, sha256_fr32_digest_to_field_bits(sha256(cs, bits)))


def hash_leaf_bits_circuit(cs: ConstraintSystem, left: Sequence[Boolean], right: Sequence[Boolean]) -> AllocatedNum:
    """Hash of two LE bit strings: each padded to whole bytes and reversed within bytes, concatenated."""
    return hash_circuit(cs, reverse_bit_numbering(left) + reverse_bit_numbering(right))


def hash2_circuit(cs: ConstraintSystem, left: AllocatedNum, right: AllocatedNum) -> AllocatedNum:
    """The tree_d node hash fr32-truncate(SHA256(LE(left) ‖ LE(right))) as a field element.

    Both inputs are decomposed first (255 bits + unpacking row each, left then right); each gets one
    constant-false pad bit, so the 512-bit message costs 44,866 SHA-256 rows, plus one packing row.
    """
    left_bits = left.to_bits_le(cs)
    right_bits = right.to_bits_le(cs)
    return hash_leaf_bits_circuit(cs, left_bits, right_bits)
