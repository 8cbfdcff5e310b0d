"""SHA-256 witnesses for many messages at once: the aux bits `cuzk.gadgets.sha256` allocates, in order.

A *configuration* is a message length and the pattern of its constant bits (positions and values);
in the Filecoin circuits these are the SHA-256 padding, the fr32 pad bit of every 256-bit chunk and
constants such as the PoRep label's layer index. Constant bits fold away in the gadget's `Boolean`
rules, so the configuration alone decides how many aux bits each compression allocates and which
value each one holds (`cuzk.witness_gen.sha256_trace` works that out once per distinct compression).
The instances of a batch share the configuration and differ only in their allocated bits.

The kernel (numba, one instance per thread) evaluates SHA-256 per instance, keeping every
intermediate word of a compression in a small register file, then copies the aux bits out of those
words in runs (a word's consecutive bits to consecutive aux, 8 per store), as the trace dictates.
No constraint system, no per-bit Python; about 10 µs per compression on one core, most of it
writing the ~26,000 aux bytes.

    plan = Sha256WitnessPlan.for_message(constant_mask, constant_values)
    aux, digest_bits = plan.generate(message_bits)        # (N, plan.num_aux), (N, 256) uint8

`aux[i]` is what `sha256(cs, message_i)` appends to `cs.aux_assignment` (bits as 0/1), excluding
the message bits themselves, which the caller's circuit allocated earlier. `generate_hash_circuit`
covers `hash_circuit` (sha256, fr32 truncation, `pack_bits`): its one extra aux, the packed digest,
comes back as canonical limbs.

numba's on-disk cache is keyed on this file: after changing the slot layout in `sha256_trace`,
delete this module's cached kernels (`__pycache__/sha256.*.nbi|nbc`).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import NamedTuple

import numpy as np
from llvmlite import ir
from numba import njit, prange, types
from numba.extending import intrinsic

from cuzk.errors import SynthesisError
from cuzk.gadgets.boolean import FALSE_KIND, IS_KIND, TRUE_KIND, Boolean
from cuzk.gadgets.sha256 import IV, ROUND_CONSTANTS
from cuzk.witness_gen.sha256_trace import (
    IV_KINDS,
    NUM_SLOTS,
    ROUND_BC,
    ROUND_CH,
    ROUND_MAJ,
    ROUND_S0,
    ROUND_S1,
    ROUND_SUM_A,
    ROUND_SUM_E,
    ROUND_T0,
    ROUND_T1,
    SCHED_S0,
    SCHED_S1,
    SCHED_SUM,
    SCHED_T0,
    SCHED_T1,
    SLOT_FINAL,
    SLOT_H,
    SLOT_ROUND,
    SLOT_SCHEDULE,
    SLOT_W,
    BlockTrace,
    trace_compression,
)

__all__ = ["HashCircuitWitness", "Sha256DeviceTables", "Sha256Witness", "Sha256WitnessPlan", "fr32_packed_limbs"]

_U1 = np.uint64(1)
_U63 = np.uint64(63)
_MASK32 = np.uint64(0xFFFFFFFF)
_K = np.array(ROUND_CONSTANTS, dtype=np.uint64)
_IV = np.array(IV, dtype=np.uint64)
#: fr32 truncation keeps the digest's low 254 bits (as a little-endian integer): limb 3 keeps 62.
_TOP_LIMB_MASK = np.uint64((1 << 62) - 1)


@njit(inline="always")
def _rotr(x, by):  # type: ignore[no-untyped-def]
    return ((x >> np.uint64(by)) | (x << np.uint64(32 - by))) & _MASK32


@njit(cache=True)
def _compress(regs, state, words, offset):  # type: ignore[no-untyped-def]
    """One SHA-256 compression of words[offset:offset + 16] into `state` (8 uint64 words), recording
    every intermediate word in `regs` at the slots `sha256_trace` names. The order of operands in a
    sum does not matter; the slots' meaning does."""
    for k in range(8):
        regs[SLOT_H + k] = state[k]
    for i in range(16):
        regs[SLOT_W + i] = np.uint64(words[offset + i])
    for i in range(16, 64):
        base = SLOT_SCHEDULE + 5 * (i - 16)
        x = regs[SLOT_W + i - 15]
        t0 = _rotr(x, 7) ^ _rotr(x, 18)
        s0 = t0 ^ (x >> np.uint64(3))
        y = regs[SLOT_W + i - 2]
        t1 = _rotr(y, 17) ^ _rotr(y, 19)
        s1 = t1 ^ (y >> np.uint64(10))
        total = regs[SLOT_W + i - 16] + s0 + regs[SLOT_W + i - 7] + s1
        regs[base + SCHED_T0] = t0
        regs[base + SCHED_S0] = s0
        regs[base + SCHED_T1] = t1
        regs[base + SCHED_S1] = s1
        regs[base + SCHED_SUM] = total
        regs[SLOT_W + i] = total & _MASK32
    a, b, c, d = state[0], state[1], state[2], state[3]
    e, f, g, h = state[4], state[5], state[6], state[7]
    pending_e = np.uint64(0)
    pending_a = np.uint64(0)
    for i in range(64):
        base = SLOT_ROUND + 9 * i
        if i > 0:  # the deferred additions of the previous round, done at first use
            regs[base + ROUND_SUM_E] = pending_e
            e = pending_e & _MASK32
        t1 = _rotr(e, 6) ^ _rotr(e, 11)
        s1 = t1 ^ _rotr(e, 25)
        ch = (e & f) ^ (~e & g & _MASK32)
        temp1 = h + s1 + ch + _K[i] + regs[SLOT_W + i]
        if i > 0:
            regs[base + ROUND_SUM_A] = pending_a
            a = pending_a & _MASK32
        t0 = _rotr(a, 2) ^ _rotr(a, 13)
        s0 = t0 ^ _rotr(a, 22)
        bc = b & c
        maj = (a & b) ^ (a & c) ^ bc
        regs[base + ROUND_T1] = t1
        regs[base + ROUND_S1] = s1
        regs[base + ROUND_CH] = ch
        regs[base + ROUND_T0] = t0
        regs[base + ROUND_S0] = s0
        regs[base + ROUND_MAJ] = maj
        regs[base + ROUND_BC] = bc
        pending_e = temp1 + d
        pending_a = temp1 + s0 + maj
        h, g, f = g, f, e
        d, c, b = c, b, a
    finals = (pending_a + state[0], state[1] + b, state[2] + c, state[3] + d,
              pending_e + state[4], state[5] + f, state[6] + g, state[7] + h)
    for k in range(8):
        regs[SLOT_FINAL + k] = finals[k]
        state[k] = finals[k] & _MASK32


# Byte patterns for writing 8 aux bits with one (unaligned) 64-bit store: SPREAD[x] holds bit t of x in byte
# t; PAIRS[x | y << 4] holds bit t of x in byte 2t and bit t of y in byte 2t + 1. Built as bytes and viewed
# natively, so a native store reproduces the byte order on any host.
_SPREAD = np.array([[x >> t & 1 for t in range(8)] for x in range(256)], dtype=np.uint8).view(np.uint64).ravel()
_PAIRS = np.array([[(x >> (t // 2) if t % 2 == 0 else x >> 4 + t // 2) & 1 for t in range(8)] for x in range(256)],
                  dtype=np.uint8).view(np.uint64).ravel()

# Columns of a run (see `_runs`).
RUN_SLOT, RUN_BIT, RUN_COUNT, RUN_FLIPS, RUN_DST, RUN_SLOT2, RUN_BIT2, RUN_FLIPS2 = range(8)


@intrinsic
def _store_u64(typingctx, arr, index, value):  # type: ignore[no-untyped-def]
    """arr[index:index + 8] = the bytes of `value` (native order), one unaligned store; arr is uint8 1-D.
    Callers keep index + 8 within the array."""
    sig = types.void(arr, types.intp, types.uint64)

    def codegen(context, builder, signature, args):  # type: ignore[no-untyped-def]
        ary = context.make_array(signature.args[0])(context, builder, value=args[0])
        ptr = builder.bitcast(builder.gep(ary.data, [args[1]]), ir.IntType(64).as_pointer())
        builder.store(args[2], ptr, align=1)
        return context.get_dummy_value()

    return sig, codegen


@njit(inline="always")
def _emit_run(out, dst, v, count):  # type: ignore[no-untyped-def]
    """out[dst + j] = bit j of v, j < count: 8 bits per store, then the tail byte by byte."""
    j = 0
    while j + 8 <= count:
        _store_u64(out, dst + j, _SPREAD[(v >> np.uint64(j)) & np.uint64(0xFF)])
        j += 8
    while j < count:
        out[dst + j] = np.uint8((v >> np.uint64(j)) & _U1)
        j += 1


@njit(inline="always")
def _emit_pair(out, dst, v, w, count):  # type: ignore[no-untyped-def]
    """out[dst + 2j] = bit j of v, out[dst + 2j + 1] = bit j of w, j < count."""
    j = 0
    while j + 4 <= count:
        index = ((v >> np.uint64(j)) & np.uint64(15)) | (((w >> np.uint64(j)) & np.uint64(15)) << np.uint64(4))
        _store_u64(out, dst + 2 * j, _PAIRS[index])
        j += 4
    while j < count:
        out[dst + 2 * j] = np.uint8((v >> np.uint64(j)) & _U1)
        out[dst + 2 * j + 1] = np.uint8((w >> np.uint64(j)) & _U1)
        j += 1


@njit(inline="always")
def _generate_instance(r, words, block_table, table_start, table_len, runs, aux_start, aux, digest_words):  # type: ignore[no-untyped-def]
    """Instance r: chain its compressions from the IV; after each, write that compression's aux bits run by
    run (see `_runs`)."""
    regs = np.empty(NUM_SLOTS, dtype=np.uint64)
    state = _IV.copy()
    row = words[r]
    out = aux[r]
    for blk in range(block_table.shape[0]):
        _compress(regs, state, row, blk * 16)
        u = block_table[blk]
        base = aux_start[blk]
        for q in range(table_start[u], table_start[u] + table_len[u]):
            v = (regs[runs[q, RUN_SLOT]] >> np.uint64(runs[q, RUN_BIT])) ^ np.uint64(runs[q, RUN_FLIPS])
            if runs[q, RUN_SLOT2] < 0:
                _emit_run(out, base + runs[q, RUN_DST], v, runs[q, RUN_COUNT])
            else:
                w = (regs[runs[q, RUN_SLOT2]] >> np.uint64(runs[q, RUN_BIT2])) ^ np.uint64(runs[q, RUN_FLIPS2])
                _emit_pair(out, base + runs[q, RUN_DST], v, w, runs[q, RUN_COUNT])
    for k in range(8):
        digest_words[r, k] = np.uint32(state[k])


@njit(parallel=True, cache=True)
def _generate(words, block_table, table_start, table_len, runs, aux_start, aux, digest_words):  # type: ignore[no-untyped-def]
    """All instances, one per thread."""
    for r in prange(words.shape[0]):
        _generate_instance(r, words, block_table, table_start, table_len, runs, aux_start, aux, digest_words)


@njit(cache=True)
def _generate_serial(words, block_table, table_start, table_len, runs, aux_start, aux, digest_words):  # type: ignore[no-untyped-def]
    """All instances on the calling thread: for batches too small to be worth waking the thread pool (a
    parallel region can take milliseconds to start on a loaded host, a compression takes microseconds)."""
    for r in range(words.shape[0]):
        _generate_instance(r, words, block_table, table_start, table_len, runs, aux_start, aux, digest_words)


_SERIAL_MAX_COMPRESSIONS = 32


def _runs(codes: np.ndarray) -> np.ndarray:
    """Group a compression's aux codes into runs, each a row (slot, first bit, count, flip mask, first aux,
    slot2, first bit2, flip mask2): consecutive bits of one register written to consecutive aux (xor words,
    sums; slot2 = -1), or two registers' bits interleaved (maj's alternating maj and b ∧ c bits; count
    pairs). Any grouping is exact; long runs make the kernel fast."""
    slots = (codes >> 7).tolist()
    bits = (codes >> 1 & 63).tolist()
    flips = (codes & 1).tolist()
    n = len(slots)

    def extent(k: int, stride: int) -> int:
        """How many of codes k, k + stride, ... continue the bits of code k's register."""
        count = 1
        while (k + count * stride < n and count < 63 and slots[k + count * stride] == slots[k]
               and bits[k + count * stride] == bits[k] + count):
            count += 1
        return count

    runs = []
    k = 0
    while k < n:
        single = extent(k, 1)
        pairs = min(extent(k, 2), extent(k + 1, 2)) if k + 1 < n and slots[k + 1] != slots[k] else 0
        if 2 * pairs > single:
            firsts, seconds = range(k, k + 2 * pairs, 2), range(k + 1, k + 2 * pairs, 2)
            runs.append((slots[k], bits[k], pairs, sum(flips[m] << j for j, m in enumerate(firsts)), k,
                         slots[k + 1], bits[k + 1], sum(flips[m] << j for j, m in enumerate(seconds))))
            k += 2 * pairs
        else:
            runs.append((slots[k], bits[k], single, sum(flips[k + j] << j for j in range(single)), k, -1, 0, 0))
            k += single
    return np.array(runs, dtype=np.int64).reshape(-1, 8)


class _Block(NamedTuple):
    runs: np.ndarray  #: (n, 8) int64, see `_runs`
    codes: np.ndarray  #: (num_aux,) uint32: each aux's trace code (slot << 7 | bit << 1 | flip)
    num_aux: int
    out_kinds: list[list[int]]


@lru_cache(maxsize=512)
def _block(key: bytes) -> _Block:
    """A compression's runs by (state kinds ‖ message kinds), traced once: long messages repeat the same
    few compressions, and plans of one shape share them."""
    kinds = list(key)
    trace: BlockTrace = trace_compression([kinds[32 * k:32 * k + 32] for k in range(8)], kinds[256:])
    return _Block(_runs(trace.codes), trace.codes.astype(np.uint32), int(trace.codes.shape[0]), trace.out_kinds)


class Sha256Witness(NamedTuple):
    aux: np.ndarray  #: (N, num_aux) uint8: the gadget's aux bits in allocation order
    digest_bits: np.ndarray  #: (N, 256) uint8: the digest in stream order (bytes in order, MSB first)


class Sha256DeviceTables(NamedTuple):
    """A plan's layout for a device kernel: which distinct compression each block uses
    (block_table), where that compression's aux codes are (code_start, code_len into `codes`, uint32
    trace codes: slot << 7 | bit << 1 | flip), and where each block's aux begin among an instance's
    (aux_start); int64 apart from `codes`."""

    block_table: np.ndarray
    code_start: np.ndarray
    code_len: np.ndarray
    codes: np.ndarray
    aux_start: np.ndarray


class HashCircuitWitness(NamedTuple):
    aux: np.ndarray  #: (N, num_aux) uint8: the SHA-256 aux bits
    packed: np.ndarray  #: (N, 4) uint64 canonical limbs: the aux `pack_bits` allocates right after them

    def aux_limbs(self) -> np.ndarray:
        """All num_aux + 1 values as canonical limbs (N, num_aux + 1, 4), as a partition's aux vector holds them."""
        n, k = self.aux.shape
        out = np.zeros((n, k + 1, 4), dtype=np.uint64)
        out[:, :k, 0] = self.aux
        out[:, k] = self.packed
        return out


def fr32_packed_limbs(digest_bits: np.ndarray) -> np.ndarray:
    """`pack_bits(sha256_fr32_digest_to_field_bits(digest))`'s value: the digest read as a little-endian
    integer, top two bits dropped, as (N, 4) canonical limbs (< 2^254 < r)."""
    digest_bytes = np.packbits(np.asarray(digest_bits, dtype=np.uint8), axis=1)
    limbs = np.ascontiguousarray(digest_bytes).view("<u8").astype(np.uint64)
    limbs[:, 3] &= _TOP_LIMB_MASK
    return limbs


class Sha256WitnessPlan:
    """The aux layout of `sha256(cs, message)` for one configuration; build once, `generate` many times.

    `constant_mask[j]` says whether message bit j (stream order) is a constant, `constant_values[j]`
    its value; every other bit is an allocated (`Is`) bit whose value comes with each instance.
    """

    def __init__(self, constant_mask: np.ndarray, constant_values: np.ndarray) -> None:
        mask = np.asarray(constant_mask)
        values = np.asarray(constant_values)
        if mask.ndim != 1 or mask.dtype != np.bool_:
            raise ValueError(f"constant_mask must be a 1-D bool array, got {mask.dtype} of shape {mask.shape}")
        if values.shape != mask.shape:
            raise ValueError(f"constant_values has shape {values.shape}, constant_mask {mask.shape}")
        bad = np.flatnonzero(mask & (values != 0) & (values != 1))
        if bad.size:
            raise ValueError(f"constant message bit {int(bad[0])} has value {values[bad[0]].item()!r}, not 0 or 1")
        length = mask.shape[0]
        if length % 8:
            raise ValueError(f"sha256 takes whole bytes, got {length} bits")
        self.message_bits = length
        self.constant_positions = np.flatnonzero(mask)
        self.constant_values = values[self.constant_positions].astype(np.uint8)
        self.allocated_positions = np.flatnonzero(~mask)

        # The gadget's padding, as constants: a one bit, zeros, the 64-bit big-endian length.
        padded = length + 1 + (-(length + 1 + 64) % 512) + 64
        template = np.zeros(padded, dtype=np.uint8)
        template[self.constant_positions] = self.constant_values
        template[length] = 1
        template[padded - 64:] = [length >> i & 1 for i in range(63, -1, -1)]
        self._tail = template[length:]
        kinds = template.copy()
        kinds[self.allocated_positions] = IS_KIND  # constants keep their value: FALSE_KIND = 0, TRUE_KIND = 1
        assert (FALSE_KIND, TRUE_KIND) == (0, 1)

        self.num_blocks = padded // 512
        state = [list(w) for w in IV_KINDS]
        unique: dict[bytes, int] = {}
        tables: list[np.ndarray] = []
        code_tables: list[np.ndarray] = []
        block_table = np.empty(self.num_blocks, dtype=np.int64)
        aux_start = np.empty(self.num_blocks, dtype=np.int64)
        offset = 0
        for blk in range(self.num_blocks):
            key = bytes([k for w in state for k in w]) + kinds[512 * blk:512 * blk + 512].tobytes()
            block = _block(key)
            if key not in unique:
                unique[key] = len(tables)
                tables.append(block.runs)
                code_tables.append(block.codes)
            block_table[blk] = unique[key]
            aux_start[blk] = offset
            offset += block.num_aux
            state = block.out_kinds
        self.num_aux = offset
        self.block_aux_counts = np.diff(np.append(aux_start, offset))
        self._block_table = block_table
        self._aux_start = aux_start
        lengths = np.array([t.shape[0] for t in tables], dtype=np.int64)
        self._table_len = lengths
        self._table_start = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
        self._runs = np.concatenate(tables) if tables else np.zeros((0, 8), dtype=np.int64)
        code_lengths = np.array([c.shape[0] for c in code_tables], dtype=np.int64)
        self._code_len = code_lengths
        self._code_start = np.concatenate([[0], np.cumsum(code_lengths)[:-1]]).astype(np.int64)
        self._codes = np.concatenate(code_tables) if code_tables else np.zeros(0, dtype=np.uint32)

    # -- construction ------------------------------------------------------------------------------
    @classmethod
    def for_message(cls, constant_mask: np.ndarray, constant_values: np.ndarray) -> Sha256WitnessPlan:
        return cls(constant_mask, constant_values)

    @classmethod
    def all_allocated(cls, message_bits: int) -> Sha256WitnessPlan:
        """Every message bit allocated (no constants)."""
        return cls(np.zeros(message_bits, dtype=bool), np.zeros(message_bits, dtype=np.uint8))

    @classmethod
    def for_booleans(cls, message: Sequence[Boolean]) -> Sha256WitnessPlan:
        """The configuration of a gadget-level message: its constants, and `Is` bits as allocated."""
        kinds = np.array([bit.kind for bit in message], dtype=np.uint8)
        negated = np.flatnonzero(kinds > IS_KIND)
        if negated.size:
            raise ValueError(f"message bit {int(negated[0])} is a negated view (Not); only constants and "
                             "allocated bits are supported")
        mask = kinds <= TRUE_KIND
        return cls(mask, np.where(mask, kinds, 0).astype(np.uint8))

    @staticmethod
    def values_of(message: Sequence[Boolean]) -> np.ndarray:
        """One instance's message bits (uint8, stream order) from gadget Booleans with known values."""
        values = [bit.get_value() for bit in message]
        missing = [i for i, v in enumerate(values) if v is None]
        if missing:
            raise SynthesisError(f"message bit {missing[0]} has no value")
        return np.array(values, dtype=np.uint8)

    # -- generation --------------------------------------------------------------------------------
    def _checked_bits(self, message_bits: np.ndarray) -> np.ndarray:
        bits = np.asarray(message_bits)
        if bits.ndim != 2 or bits.shape[1] != self.message_bits:
            raise ValueError(f"message_bits must have shape (N, {self.message_bits}), got {bits.shape}")
        if bits.dtype == np.bool_:
            bits = bits.view(np.uint8)
        elif not np.issubdtype(bits.dtype, np.integer):
            raise TypeError(f"message_bits must be bool or integer, got {bits.dtype}")
        elif bits.size and (bits.min() < 0 or bits.max() > 1):
            row, col = np.argwhere((bits < 0) | (bits > 1))[0]
            raise SynthesisError(f"message bit {col} of instance {row} is {bits[row, col]}, not 0 or 1")
        if self.constant_positions.size:
            wrong = bits[:, self.constant_positions] != self.constant_values
            if wrong.any():
                row, j = np.argwhere(wrong)[0]
                col = self.constant_positions[j]
                raise SynthesisError(f"message bit {col} of instance {row} is {bits[row, col]}, but the plan has "
                                     f"it as the constant {self.constant_values[j]}")
        return bits.astype(np.uint8, copy=False)

    def _padded_words(self, bits: np.ndarray) -> np.ndarray:
        """Checked message bits (N, message_bits) -> the padded messages as (N, 16 * blocks) words."""
        padded = np.empty((bits.shape[0], self.message_bits + self._tail.shape[0]), dtype=np.uint8)
        padded[:, :self.message_bits] = bits
        padded[:, self.message_bits:] = self._tail
        return np.ascontiguousarray(np.packbits(padded, axis=1)).view(">u4").astype(np.uint32)

    def message_words(self, message_bits: np.ndarray) -> np.ndarray:
        """N messages ((N, message_bits) bool/0-1 integers, stream order) checked against the plan
        and padded, as the (N, 16 * num_blocks) uint32 words the compressions read."""
        return self._padded_words(self._checked_bits(message_bits))

    def device_tables(self) -> Sha256DeviceTables:
        """The tables a device kernel needs to write this plan's aux bits (kernels/sha256_witness.cu)."""
        return Sha256DeviceTables(self._block_table, self._code_start, self._code_len, self._codes, self._aux_start)

    def generate(self, message_bits: np.ndarray, out: np.ndarray | None = None) -> Sha256Witness:
        """Aux bits and digests of N messages ((N, message_bits) bool/0-1 integers, stream order).

        `out`, if given, is a C-contiguous (N, num_aux) uint8 array to fill (e.g. a view into a larger
        buffer), returned as `aux`."""
        bits = self._checked_bits(message_bits)
        n = bits.shape[0]
        if out is None:
            out = np.empty((n, self.num_aux), dtype=np.uint8)
        elif out.shape != (n, self.num_aux) or out.dtype != np.uint8 or not out.flags.c_contiguous:
            raise ValueError(f"out must be a C-contiguous ({n}, {self.num_aux}) uint8 array, got {out.dtype} "
                             f"{out.shape}{'' if out.flags.c_contiguous else ' (not C-contiguous)'}")
        words = self._padded_words(bits)
        digest = np.empty((n, 8), dtype=np.uint32)
        if n:
            kernel = _generate_serial if n * self.num_blocks <= _SERIAL_MAX_COMPRESSIONS else _generate
            kernel(words, self._block_table, self._table_start, self._table_len, self._runs, self._aux_start,
                   out, digest)
        digest_bits = np.unpackbits(digest.astype(">u4").view(np.uint8), axis=1)
        return Sha256Witness(out, digest_bits)

    def generate_hash_circuit(self, message_bits: np.ndarray) -> HashCircuitWitness:
        """`hash_circuit`'s aux: the SHA-256 aux bits, then the fr32-packed digest (num_aux + 1 values)."""
        aux, digest_bits = self.generate(message_bits)
        return HashCircuitWitness(aux, fr32_packed_limbs(digest_bits))

    @property
    def num_compressions(self) -> int:
        return self.num_blocks

    def __repr__(self) -> str:
        return (f"Sha256WitnessPlan({self.message_bits} message bits, {self.constant_positions.size} constant; "
                f"{self.num_blocks} compressions, {self.num_aux} aux)")
