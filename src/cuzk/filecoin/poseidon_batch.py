"""Many Poseidon hashes at once: neptune's optimized permutation as one numba kernel.

Why: an 8MiB sector needs ~2^18 column hashes and ~2 x 37,449 arity-8 tree nodes. The reference
`cuzk.hashes.poseidon` computes one hash in ~1 ms of Python, i.e. minutes per sector; this kernel
runs the same arithmetic (compressed round constants, pre-sparse and sparse matrices, exactly as
`permute_optimized`) on Montgomery limbs, in parallel over rows, at a few microseconds per hash.
The constants come from `cuzk.hashes.poseidon_constants`, and the tests compare the results with
`poseidon_hash` for every arity and tag used here.

Values are (n, 4) uint64 arrays of canonical little-endian limbs, i.e. the 32-byte LE encoding viewed
as uint64 — so tree levels can stay byte arrays and be hashed without converting to Python ints.

The kernel inlines `cuzk.field._mont64`; numba's on-disk cache does not notice edits there, so after
changing that file delete this package's `__pycache__/*.nbi`/`*.nbc` too. The first compilation takes
~30 s; later runs load the cache.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import numpy as np
from numba import njit, prange

from cuzk.field import _mont64 as m
from cuzk.field.constants import FR_MONT_R, R_MODULUS
from cuzk.hashes.poseidon_constants import custom_tag, merkle_tree_tag, poseidon_constants

__all__ = ["as_limbs", "hash_batch", "hash_custom_gr_batch", "hash_merkle_batch", "limbs_to_bytes"]


@njit(inline="always", cache=True)
def _sbox(x0, x1, x2, x3):  # type: ignore[no-untyped-def]
    s0, s1, s2, s3 = m.mont_mul(x0, x1, x2, x3, x0, x1, x2, x3)
    s0, s1, s2, s3 = m.mont_mul(s0, s1, s2, s3, s0, s1, s2, s3)
    return m.mont_mul(s0, s1, s2, s3, x0, x1, x2, x3)


@njit(inline="always", cache=True)
def _mul_acc(acc, s, i, c, ci, cj):  # type: ignore[no-untyped-def]
    """acc += s[i] * c[ci, cj] (all Montgomery)."""
    p0, p1, p2, p3 = m.mont_mul(s[i, 0], s[i, 1], s[i, 2], s[i, 3], c[ci, cj, 0], c[ci, cj, 1], c[ci, cj, 2],
                                c[ci, cj, 3])
    a0, a1, a2, a3 = m.add_mod(acc[0], acc[1], acc[2], acc[3], p0, p1, p2, p3)
    acc[0] = a0
    acc[1] = a1
    acc[2] = a2
    acc[3] = a3


@njit(parallel=True, cache=True)
def _permute(states, crc, mds, pre, w_hat, v_rest, half, rp):  # type: ignore[no-untyped-def]
    """Permute every row of `states` (n, t, 4), canonical in and out; returns nothing (in place)."""
    n = states.shape[0]
    t = states.shape[1]
    total = 2 * half + rp
    for row in prange(n):
        s = np.empty((t, 4), dtype=np.uint64)
        tmp = np.empty((t, 4), dtype=np.uint64)
        acc = np.empty(4, dtype=np.uint64)
        for j in range(t):
            a0, a1, a2, a3 = m.mont_mul(states[row, j, 0], states[row, j, 1], states[row, j, 2], states[row, j, 3],
                                        m.RR0, m.RR1, m.RR2, m.RR3)
            a0, a1, a2, a3 = m.add_mod(a0, a1, a2, a3, crc[j, 0], crc[j, 1], crc[j, 2], crc[j, 3])
            s[j, 0] = a0
            s[j, 1] = a1
            s[j, 2] = a2
            s[j, 3] = a3
        off = t
        for r in range(total):
            partial = half <= r < half + rp
            if partial:
                a0, a1, a2, a3 = _sbox(s[0, 0], s[0, 1], s[0, 2], s[0, 3])
                a0, a1, a2, a3 = m.add_mod(a0, a1, a2, a3, crc[off, 0], crc[off, 1], crc[off, 2], crc[off, 3])
                s[0, 0] = a0
                s[0, 1] = a1
                s[0, 2] = a2
                s[0, 3] = a3
                off += 1
            else:
                for j in range(t):
                    a0, a1, a2, a3 = _sbox(s[j, 0], s[j, 1], s[j, 2], s[j, 3])
                    if r < total - 1:
                        k = off + j
                        a0, a1, a2, a3 = m.add_mod(a0, a1, a2, a3, crc[k, 0], crc[k, 1], crc[k, 2], crc[k, 3])
                    s[j, 0] = a0
                    s[j, 1] = a1
                    s[j, 2] = a2
                    s[j, 3] = a3
                if r < total - 1:
                    off += t
            if partial:
                k = r - half
                acc[:] = 0
                for i in range(t):
                    _mul_acc(acc, s, i, w_hat, k, i)
                for j in range(1, t):
                    p0, p1, p2, p3 = m.mont_mul(s[0, 0], s[0, 1], s[0, 2], s[0, 3], v_rest[k, j - 1, 0],
                                                v_rest[k, j - 1, 1], v_rest[k, j - 1, 2], v_rest[k, j - 1, 3])
                    a0, a1, a2, a3 = m.add_mod(s[j, 0], s[j, 1], s[j, 2], s[j, 3], p0, p1, p2, p3)
                    tmp[j, 0] = a0
                    tmp[j, 1] = a1
                    tmp[j, 2] = a2
                    tmp[j, 3] = a3
                tmp[0, :] = acc
            else:
                mat = pre if r == half - 1 else mds
                for j in range(t):
                    acc[:] = 0
                    for i in range(t):
                        _mul_acc(acc, s, i, mat, i, j)
                    tmp[j, :] = acc
            s[:, :] = tmp
        for j in range(t):
            a0, a1, a2, a3 = m.mont_mul(s[j, 0], s[j, 1], s[j, 2], s[j, 3], m.U1, m.U0, m.U0, m.U0)
            states[row, j, 0] = a0
            states[row, j, 1] = a1
            states[row, j, 2] = a2
            states[row, j, 3] = a3


def _mont_limbs(values: list[int] | tuple[int, ...]) -> np.ndarray:
    data = b"".join((v * FR_MONT_R % R_MODULUS).to_bytes(32, "little") for v in values)
    return np.frombuffer(data, dtype="<u8").reshape(-1, 4).astype(np.uint64)


@dataclass(frozen=True)
class _Kernel:
    crc: np.ndarray
    mds: np.ndarray
    pre: np.ndarray
    w_hat: np.ndarray
    v_rest: np.ndarray
    half: int
    rp: int


@cache
def _kernel_constants(arity: int) -> _Kernel:
    c = poseidon_constants(arity)
    t = c.width
    mds = _mont_limbs([x for row in c.mds for x in row]).reshape(t, t, 4)
    pre = _mont_limbs([x for row in c.pre_sparse_matrix for x in row]).reshape(t, t, 4)
    w_hat = _mont_limbs([x for sm in c.sparse_matrices for x in sm.w_hat]).reshape(c.partial_rounds, t, 4)
    v_rest = _mont_limbs([x for sm in c.sparse_matrices for x in sm.v_rest]).reshape(c.partial_rounds, t - 1, 4)
    return _Kernel(crc=_mont_limbs(c.compressed_round_constants), mds=mds, pre=pre, w_hat=w_hat, v_rest=v_rest,
                   half=c.half_full_rounds, rp=c.partial_rounds)


def as_limbs(values: np.ndarray | bytes | list[bytes]) -> np.ndarray:
    """32-byte LE values (bytes, list of bytes, (n, 32) uint8 or (n, 4) uint64) -> (n, 4) uint64 limbs."""
    if isinstance(values, list):
        values = b"".join(values)
    if isinstance(values, bytes | bytearray | memoryview):
        return np.frombuffer(bytes(values), dtype="<u8").reshape(-1, 4).astype(np.uint64)
    arr = np.ascontiguousarray(values)
    if arr.dtype == np.uint8:
        return arr.reshape(-1, 32).view("<u8").astype(np.uint64)
    return arr.reshape(-1, 4).astype(np.uint64)


def limbs_to_bytes(limbs: np.ndarray) -> list[bytes]:
    """(n, 4) uint64 limbs -> list of 32-byte LE values."""
    data = np.ascontiguousarray(limbs, dtype="<u8").tobytes()
    return [data[i:i + 32] for i in range(0, len(data), 32)]


def hash_batch(inputs: np.ndarray, tag: int) -> np.ndarray:
    """Poseidon of each row of `inputs` ((n, arity, 4) canonical limbs) with domain tag `tag`; (n, 4)."""
    inputs = np.asarray(inputs, dtype=np.uint64)
    if inputs.ndim != 3 or inputs.shape[2] != 4:
        raise ValueError(f"expected an (n, arity, 4) limb array, got shape {inputs.shape}")
    n, arity = inputs.shape[0], inputs.shape[1]
    k = _kernel_constants(arity)
    states = np.empty((n, arity + 1, 4), dtype=np.uint64)
    states[:, 0] = np.frombuffer(tag.to_bytes(32, "little"), dtype="<u8")
    states[:, 1:] = inputs
    if n:
        _permute(states, k.crc, k.mds, k.pre, k.w_hat, k.v_rest, k.half, k.rp)
    return states[:, 1].copy()


def hash_merkle_batch(arity: int, children: np.ndarray) -> np.ndarray:
    """Merkle-tag Poseidon of consecutive groups of `arity` children ((n*arity, 4) limbs) -> (n, 4)."""
    children = np.asarray(children, dtype=np.uint64).reshape(-1, arity, 4)
    return hash_batch(children, merkle_tree_tag(arity))


def hash_custom_gr_batch(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """SnapDeals' Poseidon_GR(a_i, b_i) (arity 2, tag Custom(1)) for (n, 4) limb arrays a, b."""
    pairs = np.stack([np.asarray(a, dtype=np.uint64).reshape(-1, 4), np.asarray(b, dtype=np.uint64).reshape(-1, 4)],
                     axis=1)
    return hash_batch(pairs, custom_tag(1))
