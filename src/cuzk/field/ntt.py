"""Radix-2 NTT over Fr on (n, 4) Montgomery arrays: the polynomial arithmetic of the Groth16 prover.

Algorithm: Cooley-Tukey butterflies from the top index bit down (natural order in, bit-reversed
out), then one bit-reversal permutation, so callers see natural order both ways. The log2(n) stages
are grouped into passes of at most ``_PASS_LOG`` stages; within a pass the data splits into
independent cache-sized tiles (see :func:`_ntt_pass`) processed in parallel. A 2^20 transform thus
sweeps memory twice instead of twenty times, which is faster than one parallel sweep per stage
(benchmarks/HISTORY.md, "Figures cut from code comments").

Only one twiddle table is kept per domain: ``omega^j`` for ``j < n/2``, in bit-reversed order (see
:func:`_twiddles`). The inverse transform reuses it through the identity
``intt(a)[i] = ntt(a)[(n - i) mod n] / n`` (an index reversal after a forward transform), which halves
the table memory that matters at 2^27.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

import numpy as np
from numba import njit, prange

from cuzk.field import _mont64 as m
from cuzk.field import fr_vec
from cuzk.field.constants import FR_GENERATOR, FR_LIMBS, FR_TWO_ADICITY, R_MODULUS, fr_root_of_unity
from cuzk.field.limbs import as_limb_array

__all__ = ["TWIDDLE_CACHE_BYTES", "Domain", "clear_twiddle_cache"]

# A pass runs up to 2^_PASS_LOG-row sub-transforms, _TILE_WIDTH of them side by side, in a local buffer
# (2^10 * 8 * 32 B = 256 KiB, sized for L2).
_PASS_LOG = 10
_TILE_WIDTH = 8

# Twiddle tables kept across calls. The newest table is always kept, even when alone it is larger.
TWIDDLE_CACHE_BYTES = 1 << 30
_twiddle_cache: OrderedDict[tuple[int, int], np.ndarray] = OrderedDict()
_twiddle_lock = threading.Lock()


# ----------------------------------------------------------------------------------------------------
# Kernels


# Shifts and masks of the swap-halves bit reversal (pairs, 2-bit groups, nibbles, bytes, 16-bit words).
_S1, _M1 = np.uint64(1), np.uint64(0x5555555555555555)
_S2, _M2 = np.uint64(2), np.uint64(0x3333333333333333)
_S4, _M4 = np.uint64(4), np.uint64(0x0F0F0F0F0F0F0F0F)
_S8, _M8 = np.uint64(8), np.uint64(0x00FF00FF00FF00FF)
_S16, _M16 = np.uint64(16), np.uint64(0x0000FFFF0000FFFF)
_S32 = np.uint64(32)


@njit(inline="always", cache=True)
def _bit_reverse(i: int, log_n: int) -> int:
    """Reverse the low ``log_n`` bits of ``i`` (1 <= log_n <= 64)."""
    x = np.uint64(i)
    x = ((x >> _S1) & _M1) | ((x & _M1) << _S1)
    x = ((x >> _S2) & _M2) | ((x & _M2) << _S2)
    x = ((x >> _S4) & _M4) | ((x & _M4) << _S4)
    x = ((x >> _S8) & _M8) | ((x & _M8) << _S8)
    x = ((x >> _S16) & _M16) | ((x & _M16) << _S16)
    x = (x >> _S32) | (x << _S32)
    return int(x >> np.uint64(64 - log_n))


@njit(inline="always", cache=True)
def _butterfly(buf: np.ndarray, i: int, j: int, w: int, z0: int, z1: int, z2: int, z3: int) -> None:
    """(buf[i, w], buf[j, w]) <- (x + z y, x - z y) for x = buf[i, w], y = buf[j, w]."""
    v0, v1, v2, v3 = m.mont_mul(buf[j, w, 0], buf[j, w, 1], buf[j, w, 2], buf[j, w, 3], z0, z1, z2, z3)
    u0, u1, u2, u3 = buf[i, w, 0], buf[i, w, 1], buf[i, w, 2], buf[i, w, 3]
    s0, s1, s2, s3 = m.add_mod(u0, u1, u2, u3, v0, v1, v2, v3)
    d0, d1, d2, d3 = m.sub_mod(u0, u1, u2, u3, v0, v1, v2, v3)
    buf[i, w, 0] = s0
    buf[i, w, 1] = s1
    buf[i, w, 2] = s2
    buf[i, w, 3] = s3
    buf[j, w, 0] = d0
    buf[j, w, 1] = d1
    buf[j, w, 2] = d2
    buf[j, w, 3] = d3


@njit(parallel=True, cache=True)
def _bit_reverse_permute(a: np.ndarray, log_n: int) -> None:
    """In-place bit-reversal permutation; each pair is swapped by its smaller index only (no races)."""
    for i in prange(a.shape[0]):
        j = _bit_reverse(i, log_n)
        if i < j:
            for q in range(4):
                t = a[i, q]
                a[i, q] = a[j, q]
                a[j, q] = t


@njit(parallel=True, cache=True)
def _ntt_pass(a: np.ndarray, z: np.ndarray, lo: int, n_stages: int, width: int) -> None:
    """The butterfly stages acting on index bits lo .. lo+n_stages-1 (top bit first), on tiles.

    These stages only combine rows whose indices differ in those bits. Fixing the other bits gives
    independent sub-transforms of 2^n_stages rows spaced 2^lo apart. A tile gathers ``width``
    neighbouring sub-transforms (so reads are whole cache lines) into a local buffer, runs all the
    stages there and writes back: one sweep over memory per pass instead of one per stage.

    Butterfly group ``p`` of a stage (the index bits above the stage's bit) uses twiddle ``z[p]``, so
    a group's twiddle is loaded once and shared by the whole tile width.
    """
    n = a.shape[0]
    rows = 1 << n_stages
    width = min(width, 1 << lo)
    n_cb = (1 << lo) // width
    n_tiles = (n >> (lo + n_stages)) * n_cb
    for tile in prange(n_tiles):
        h = tile // n_cb
        cb = (tile % n_cb) * width
        base = (h << (lo + n_stages)) + cb
        buf = np.empty((rows, width, FR_LIMBS), dtype=np.uint64)
        for t in range(rows):
            src = base + (t << lo)
            for w in range(width):
                for q in range(4):
                    buf[t, w, q] = a[src + w, q]
        for lvl in range(n_stages):
            half = 1 << (n_stages - 1 - lvl)
            for g in range(0, rows, 2 * half):
                p = (h << lvl) + (g >> (n_stages - lvl))
                z0, z1, z2, z3 = z[p, 0], z[p, 1], z[p, 2], z[p, 3]
                for tt in range(g, g + half):
                    for w in range(width):
                        _butterfly(buf, tt, tt + half, w, z0, z1, z2, z3)
        for t in range(rows):
            dst = base + (t << lo)
            for w in range(width):
                for q in range(4):
                    a[dst + w, q] = buf[t, w, q]


def _stage_split(log_n: int) -> list[int]:
    """Stages per pass: as few passes as keep a tile's rows within 2^_PASS_LOG, sizes balanced."""
    if log_n == 0:
        return []
    passes = -(-log_n // _PASS_LOG)
    return [log_n // passes + (1 if i < log_n % passes else 0) for i in range(passes)]


def _ntt_forward(a: np.ndarray, z: np.ndarray, log_n: int) -> None:
    """In-place forward NTT, natural order in and out, with the bit-reversed twiddle table ``z``.

    The butterflies (top index bit first) leave evaluation i at position bitrev(i); one permutation
    at the end restores natural order.
    """
    if log_n == 0:
        return
    hi = log_n
    for n_stages in _stage_split(log_n):
        _ntt_pass(a, z, hi - n_stages, n_stages, _TILE_WIDTH)
        hi -= n_stages
    _bit_reverse_permute(a, log_n)


@njit(parallel=True, cache=True)
def _reverse_tail(a: np.ndarray) -> None:
    """a[i] <-> a[n - i] for 0 < i < n/2: turns a transform by omega into one by omega^-1."""
    n = a.shape[0]
    for i in prange(1, (n + 1) // 2):
        j = n - i
        for q in range(4):
            t = a[i, q]
            a[i, q] = a[j, q]
            a[j, q] = t


# ----------------------------------------------------------------------------------------------------
# Twiddle cache


def _twiddles(log_n: int, omega: int) -> np.ndarray:
    """``z[p] = omega^bitrev(p)`` (log_n - 1 bits) for p < n/2, Montgomery, cached per (log_n, omega).

    In bit-reversed order every stage reads a prefix of the table sequentially, one entry per
    butterfly group, instead of striding through it.
    """
    key = (log_n, omega)
    with _twiddle_lock:
        table = _twiddle_cache.get(key)
        if table is not None:
            _twiddle_cache.move_to_end(key)
            return table
    table = fr_vec.powers(omega, (1 << log_n) >> 1)
    if log_n >= 2:
        _bit_reverse_permute(table, log_n - 1)
    with _twiddle_lock:
        _twiddle_cache[key] = table
        _twiddle_cache.move_to_end(key)
        total = sum(t.nbytes for t in _twiddle_cache.values())
        while total > TWIDDLE_CACHE_BYTES and len(_twiddle_cache) > 1:
            _, old = _twiddle_cache.popitem(last=False)
            total -= old.nbytes
    return table


def clear_twiddle_cache() -> None:
    """Free every cached twiddle table (e.g. after a 2^27 proof, before other work)."""
    with _twiddle_lock:
        _twiddle_cache.clear()


# ----------------------------------------------------------------------------------------------------
# Domain


def _has_exact_order(root: int, log_n: int) -> bool:
    """True when ``root`` has multiplicative order exactly 2^log_n mod r."""
    if pow(root, 1 << log_n, R_MODULUS) != 1:
        return False
    return log_n == 0 or pow(root, 1 << (log_n - 1), R_MODULUS) != 1


class Domain:
    """The multiplicative subgroup {omega^i : i < 2^k} of Fr, with NTTs over it.

    All transforms take and return Montgomery (size, 4) arrays in natural order. The plain methods
    return new arrays; the ``_inplace`` ones overwrite their argument, which at 2^27 (4 GiB per
    vector) is the difference between fitting in memory or not.
    """

    size: int
    log_size: int
    omega: int
    omega_inv: int
    size_inv: int

    def __init__(self, log_size: int, root_of_unity: int | None = None) -> None:
        if not 0 <= log_size <= FR_TWO_ADICITY:
            raise ValueError(
                f"log_size must be in [0, {FR_TWO_ADICITY}] (the 2-adicity of Fr), got {log_size}"
            )
        if root_of_unity is None:
            root_of_unity = fr_root_of_unity(log_size)
        elif not (0 < root_of_unity < R_MODULUS and _has_exact_order(root_of_unity, log_size)):
            # snarkjs and bellperson pick different roots; both are fine, a wrong order is not.
            raise ValueError(f"root_of_unity is not a primitive 2^{log_size}-th root of unity in Fr")
        self.log_size = log_size
        self.size = 1 << log_size
        self.omega = root_of_unity
        self.omega_inv = pow(root_of_unity, -1, R_MODULUS)
        self.size_inv = pow(self.size, -1, R_MODULUS)

    @classmethod
    def for_size(cls, n: int) -> Domain:
        """The smallest domain with at least ``n`` points (default root)."""
        if n < 0:
            raise ValueError(f"n must be >= 0, got {n}")
        return cls((n - 1).bit_length() if n > 1 else 0)

    def __repr__(self) -> str:
        return f"Domain(log_size={self.log_size}, omega={self.omega:#x})"

    # -- helpers ------------------------------------------------------------------------------------

    def _checked(self, a: np.ndarray, inplace: bool) -> np.ndarray:
        """Validate the shape; return ``a`` itself (in place) or a private copy to transform."""
        if inplace:
            if not (isinstance(a, np.ndarray) and a.flags.c_contiguous and a.flags.writeable):
                raise ValueError("in-place transforms need a writeable C-contiguous (n, 4) uint64 array")
            a = as_limb_array(a)
        else:
            a = as_limb_array(a).copy()
        if a.shape[0] != self.size:
            raise ValueError(f"expected {self.size} elements for this domain, got {a.shape[0]}")
        return a

    def _forward(self, a: np.ndarray) -> np.ndarray:
        _ntt_forward(a, _twiddles(self.log_size, self.omega), self.log_size)
        return a

    # -- transforms -----------------------------------------------------------------------------------

    def ntt_inplace(self, a: np.ndarray) -> np.ndarray:
        """Coefficients -> evaluations at omega^i, overwriting ``a``."""
        return self._forward(self._checked(a, True))

    def intt_inplace(self, a: np.ndarray) -> np.ndarray:
        """Evaluations at omega^i -> coefficients, overwriting ``a``."""
        a = self._forward(self._checked(a, True))
        _reverse_tail(a)
        return fr_vec.mul_scalar_inplace(a, self.size_inv)

    def coset_ntt_inplace(self, a: np.ndarray, shift: int = FR_GENERATOR) -> np.ndarray:
        """Coefficients -> evaluations at shift * omega^i, overwriting ``a``."""
        a = self._checked(a, True)
        fr_vec.mul_powers_inplace(a, shift)
        return self._forward(a)

    def icoset_ntt_inplace(self, a: np.ndarray, shift: int = FR_GENERATOR) -> np.ndarray:
        """Evaluations at shift * omega^i -> coefficients, overwriting ``a``."""
        shift %= R_MODULUS
        if shift == 0:
            raise ValueError("coset shift must be non-zero")
        a = self._forward(self._checked(a, True))
        _reverse_tail(a)
        # a[i] *= (1/n) * shift^-i: the 1/n scaling and the coset unshift in one pass.
        return fr_vec.mul_powers_inplace(a, pow(shift, -1, R_MODULUS), self.size_inv)

    def ntt(self, a: np.ndarray) -> np.ndarray:
        """Coefficients -> evaluations at omega^i (new array)."""
        return self.ntt_inplace(self._checked(a, False))

    def intt(self, a: np.ndarray) -> np.ndarray:
        """Evaluations at omega^i -> coefficients (new array)."""
        return self.intt_inplace(self._checked(a, False))

    def coset_ntt(self, a: np.ndarray, shift: int = FR_GENERATOR) -> np.ndarray:
        """Coefficients -> evaluations at shift * omega^i (new array)."""
        return self.coset_ntt_inplace(self._checked(a, False), shift)

    def icoset_ntt(self, a: np.ndarray, shift: int = FR_GENERATOR) -> np.ndarray:
        """Evaluations at shift * omega^i -> coefficients (new array)."""
        return self.icoset_ntt_inplace(self._checked(a, False), shift)

    # -- scalars and bases ------------------------------------------------------------------------------

    def vanishing_on_coset(self, shift: int = FR_GENERATOR) -> int:
        """Z(x) = x^n - 1 at any point of the coset shift * <omega>, which is shift^n - 1 everywhere."""
        return (pow(shift, self.size, R_MODULUS) - 1) % R_MODULUS

    def lagrange_at(self, tau: int) -> np.ndarray:
        """[L_0(tau), ..., L_{n-1}(tau)] in Montgomery form: the inverse NTT of the powers of tau.

        Since L_i(X) = (1/n) sum_j (X / omega^i)^j, applying the inverse transform to (tau^j)_j gives
        every L_i(tau) at once, which is how bellperson builds the Groth16 key's Lagrange basis.
        """
        return self.intt_inplace(fr_vec.powers(tau, self.size))
