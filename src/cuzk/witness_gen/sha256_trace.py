"""Where every aux bit of one SHA-256 compression comes from, found by walking the gadget symbolically.

`cuzk.gadgets.sha256.sha256_compression_function` allocates its aux bits through the `Boolean` rules,
which fold constant operands away; so *which* bits exist, and in which order, depends only on which
input bits are constant (and their values), never on the allocated bits' values. This module replays
the gadget's structure (message schedule, 64 rounds with the deferred additions into `a` and `e`,
the 8 final additions) on bit *kinds* only (constant false/true, `Is`, `Not`) and records, for each
aux the gadget would allocate, a code saying which bit of which intermediate word holds its value.

Every aux is a bit of an intermediate word of an ordinary SHA-256 evaluation, possibly negated:
an xor result is bit i of `x ^ y`, flipped when the result view is `Not`; `ch`/`maj` and their
constant short cuts allocate one `and`-type bit whose value is the ch/maj bit or its negation (the
short cuts return `Not` of an `and`); `maj`'s general case also allocates `b ∧ c`; an `addmany`
allocates the low n_bits of the plain integer sum. The intermediate words live in a fixed register
file (`SLOT_*`, `NUM_SLOTS`) that `cuzk.witness_gen.sha256`'s kernel fills per compression, so the
codes recorded here turn into aux bits with one lookup each:

    code = slot << 7 | bit << 1 | flip        aux = (register[slot] >> bit & 1) ^ flip

The walk mirrors `cuzk.gadgets.boolean` / `uint32` / `sha256` rule for rule; the tests compare its
result bit for bit with the gadget run under `WitnessCS`.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from cuzk.gadgets.boolean import FALSE_KIND, IS_KIND, NOT_KIND, TRUE_KIND
from cuzk.gadgets.sha256 import IV, ROUND_CONSTANTS

__all__ = [
    "NUM_SLOTS",
    "SLOT_FINAL",
    "SLOT_H",
    "SLOT_ROUND",
    "SLOT_SCHEDULE",
    "SLOT_W",
    "BlockTrace",
    "Kinds",
    "constant_word_kinds",
    "trace_compression",
]

_MASK = 0xFFFFFFFF
F, T, IS, NOT = FALSE_KIND, TRUE_KIND, IS_KIND, NOT_KIND
_NEG = (T, F, NOT, IS)  # Boolean.not_ by kind

# -- the register file of one compression (uint64 words; sums keep their carry bits) -----------------
SLOT_H = 0  #: + k: the incoming hash state word k (0..7)
SLOT_W = 8  #: + i: message schedule word w[i] (0..63)
SLOT_SCHEDULE = 72  #: + 5·(i-16) + {0: σ0 partial, 1: σ0, 2: σ1 partial, 3: σ1, 4: sum giving w[i]}
SCHED_T0, SCHED_S0, SCHED_T1, SCHED_S1, SCHED_SUM = range(5)
SLOT_ROUND = 312  #: + 9·i + one of the ROUND_* offsets below (round i = 0..63)
ROUND_SUM_E, ROUND_T1, ROUND_S1, ROUND_CH, ROUND_SUM_A, ROUND_T0, ROUND_S0, ROUND_MAJ, ROUND_BC = range(9)
SLOT_FINAL = 888  #: + k: the sum giving output word k (0..7)
NUM_SLOTS = 896

#: A word's bits as kinds, LSB first (FALSE_KIND, TRUE_KIND, IS_KIND, NOT_KIND).
Kinds = list[int]


def constant_word_kinds(value: int) -> Kinds:
    return [T if value >> i & 1 else F for i in range(32)]


_K_KINDS = tuple(constant_word_kinds(k) for k in ROUND_CONSTANTS)
IV_KINDS: tuple[Kinds, ...] = tuple(constant_word_kinds(v) for v in IV)


class BlockTrace:
    """One compression's aux codes (in allocation order) and the kinds of its 8 output words."""

    __slots__ = ("codes", "out_kinds")

    def __init__(self, codes: np.ndarray, out_kinds: list[Kinds]) -> None:
        self.codes = codes
        self.out_kinds = out_kinds


def _code(slot: int, bit: int, flip: int = 0) -> int:
    return slot << 7 | bit << 1 | flip


def _rotr(w: Kinds, by: int) -> Kinds:
    return w[by:] + w[:by]


def _shr(w: Kinds, by: int) -> Kinds:
    return w[by:] + [F] * by


def _xor(a: Kinds, b: Kinds, slot: int, emit: list[int]) -> Kinds:
    """UInt32.xor: Boolean.xor bit by bit; an allocated bit holds x ^ y of the underlying bits, i.e. the
    result's value flipped when the result view is Not."""
    out = []
    for i in range(32):
        ka, kb = a[i], b[i]
        if ka == F:
            out.append(kb)
        elif kb == F:
            out.append(ka)
        elif ka == T:
            out.append(_NEG[kb])
        elif kb == T:
            out.append(_NEG[ka])
        elif ka == kb:
            emit.append(_code(slot, i))
            out.append(IS)
        else:
            emit.append(_code(slot, i, 1))
            out.append(NOT)
    return out


def _and(ka: int, kb: int, code: int, emit: list[int]) -> int:
    """Boolean.and_: constants fold; otherwise one aux holding the and of the two views (always Is).
    `code` locates that value."""
    if ka == F or kb == F:
        return F
    if ka == T:
        return kb
    if kb == T:
        return ka
    emit.append(code)
    return IS


def _ch(a: Kinds, b: Kinds, c: Kinds, slot: int, emit: list[int]) -> Kinds:
    """UInt32.sha256_ch: Boolean.sha256_ch's short cuts in its order. Each allocates at most one bit,
    equal to ch or (under a `.not_()`) to ¬ch."""
    out = []
    for i in range(32):
        ka, kb, kc = a[i], b[i], c[i]
        code = _code(slot, i)
        if ka <= T and kb <= T and kc <= T:
            out.append((ka & kb) ^ ((1 - ka) & kc))
        elif ka == F:
            out.append(kc)
        elif kb == F:
            out.append(_and(_NEG[ka], kc, code, emit))
        elif kc == F:
            out.append(_and(ka, kb, code, emit))
        elif kc == T:
            out.append(_NEG[_and(ka, _NEG[kb], code | 1, emit)])
        elif kb == T:
            out.append(_NEG[_and(_NEG[ka], _NEG[kc], code | 1, emit)])
        else:
            emit.append(code)
            out.append(IS)
    return out


def _maj(a: Kinds, b: Kinds, c: Kinds, slot: int, bc_slot: int, emit: list[int]) -> Kinds:
    """UInt32.sha256_maj: short cuts allocate at most one bit (maj or ¬maj); the general case allocates
    maj, then b ∧ c."""
    out = []
    for i in range(32):
        ka, kb, kc = a[i], b[i], c[i]
        code = _code(slot, i)
        if ka <= T and kb <= T and kc <= T:
            out.append((ka & kb) ^ (ka & kc) ^ (kb & kc))
        elif ka == F:
            out.append(_and(kb, kc, code, emit))
        elif kb == F:
            out.append(_and(ka, kc, code, emit))
        elif kc == F:
            out.append(_and(ka, kb, code, emit))
        elif kc == T:
            out.append(_NEG[_and(_NEG[ka], _NEG[kb], code | 1, emit)])
        elif kb == T:
            out.append(_NEG[_and(_NEG[ka], _NEG[kc], code | 1, emit)])
        elif ka == T:
            out.append(_NEG[_and(_NEG[kb], _NEG[kc], code | 1, emit)])
        else:
            emit.append(code)
            emit.append(_code(bc_slot, i))  # the gadget's `bc = Boolean.and_(cs, b, c)`, both non-constant
            out.append(IS)
    return out


def _constant_value(w: Kinds) -> int:
    return sum(1 << i for i, k in enumerate(w) if k == T)


def _addmany(operands: Sequence[Kinds], slot: int, emit: list[int]) -> Kinds:
    """UInt32.addmany: all bits constant → a constant word; otherwise the sum's n_bits low bits, LSB first."""
    if all(k <= T for w in operands for k in w):
        return constant_word_kinds(sum(_constant_value(w) for w in operands) & _MASK)
    n_bits = (len(operands) * _MASK).bit_length()
    emit.extend(_code(slot, j) for j in range(n_bits))
    return [IS] * 32


def trace_compression(state: Sequence[Kinds], message: Sequence[int]) -> BlockTrace:
    """Walk `sha256_compression_function` on kinds: `state` = 8 words (LSB first), `message` = 512 bit
    kinds in stream order. Returns the aux codes in the gadget's allocation order."""
    if len(state) != 8 or any(len(w) != 32 for w in state):
        raise ValueError("the hash state has 8 words of 32 bits")
    if len(message) != 512:
        raise ValueError(f"a compression takes 512 bits, got {len(message)}")
    emit: list[int] = []
    # UInt32::from_bits_be: stream bit 0 of a word is its MSB.
    w: list[Kinds] = [list(reversed(message[i:i + 32])) for i in range(0, 512, 32)]
    for i in range(16, 64):
        base = SLOT_SCHEDULE + 5 * (i - 16)
        x = w[i - 15]
        s0 = _xor(_xor(_rotr(x, 7), _rotr(x, 18), base + SCHED_T0, emit), _shr(x, 3), base + SCHED_S0, emit)
        y = w[i - 2]
        s1 = _xor(_xor(_rotr(y, 17), _rotr(y, 19), base + SCHED_T1, emit), _shr(y, 10), base + SCHED_S1, emit)
        w.append(_addmany([w[i - 16], s0, w[i - 7], s1], base + SCHED_SUM, emit))

    # a and e are either concrete words or the operands of a deferred addition (bellperson's Maybe).
    a: Kinds | list[Kinds] = list(state[0])
    e: Kinds | list[Kinds] = list(state[4])
    a_deferred = e_deferred = False
    b, c, d = list(state[1]), list(state[2]), list(state[3])
    f, g, h = list(state[5]), list(state[6]), list(state[7])
    for i in range(64):
        base = SLOT_ROUND + 9 * i
        new_e: Kinds = _addmany(e, base + ROUND_SUM_E, emit) if e_deferred else e  # type: ignore[arg-type]
        s1 = _xor(_xor(_rotr(new_e, 6), _rotr(new_e, 11), base + ROUND_T1, emit), _rotr(new_e, 25),
                  base + ROUND_S1, emit)
        ch = _ch(new_e, f, g, base + ROUND_CH, emit)
        temp1 = [h, s1, ch, _K_KINDS[i], w[i]]
        new_a: Kinds = _addmany(a, base + ROUND_SUM_A, emit) if a_deferred else a  # type: ignore[arg-type]
        s0 = _xor(_xor(_rotr(new_a, 2), _rotr(new_a, 13), base + ROUND_T0, emit), _rotr(new_a, 22),
                  base + ROUND_S0, emit)
        maj = _maj(new_a, b, c, base + ROUND_MAJ, base + ROUND_BC, emit)
        h, g, f = g, f, new_e
        e, e_deferred = [*temp1, d], True
        d, c, b = c, b, new_a
        a, a_deferred = [*temp1, s0, maj], True

    # 64 rounds always leave a and e deferred, so the final additions take the extra operand.
    out = [
        _addmany([*a, list(state[0])], SLOT_FINAL + 0, emit),  # type: ignore[list-item]
        _addmany([list(state[1]), b], SLOT_FINAL + 1, emit),
        _addmany([list(state[2]), c], SLOT_FINAL + 2, emit),
        _addmany([list(state[3]), d], SLOT_FINAL + 3, emit),
        _addmany([*e, list(state[4])], SLOT_FINAL + 4, emit),  # type: ignore[list-item]
        _addmany([list(state[5]), f], SLOT_FINAL + 5, emit),
        _addmany([list(state[6]), g], SLOT_FINAL + 6, emit),
        _addmany([list(state[7]), h], SLOT_FINAL + 7, emit),
    ]
    return BlockTrace(np.asarray(emit, dtype=np.int32), out)
