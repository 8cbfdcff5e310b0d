"""NTTs over Fr on the device, and the Groth16 H polynomial built from them.

Arrays are (n, 8) uint32 Montgomery, the same bytes as the CPU's (n, 4) uint64 arrays. The kernels
(kernels/ntt.cu) provide two in-place transforms, DIF (natural order in, bit-reversed out) and DIT
(bit-reversed in, natural out), a bit-reversal permutation and a "multiply by scale * g^i" sweep.
The natural-order transforms of `cuzk.field.ntt.Domain` are DIF + permutation; the H polynomial
pairs DIF with DIT so that only its final inverse transform needs a permutation.

Roots: a domain of 2^L points uses the root `omega` of order 2^L (bellperson's by default, any other
of that exact order for snarkjs keys) and the roots w_(2^j) = omega^(2^(L-j)) of its sub-transforms;
all twiddle tables derive from omega, so one transform uses one consistent family of roots.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from cuzk.field import fr_vec
from cuzk.field.constants import FR_GENERATOR, R_MODULUS, fr_root_of_unity
from cuzk.groth16.prover import quotient_shift

#: Largest transform: 2^28 points (u32 indices in the kernels, 8 GiB per vector).
MAX_LOG_SIZE = 28
#: Stages one kernel pass runs (2^10 points a block, two a thread in registers; 32 KiB of trade buffers).
MAX_PASS_LOG = 10
#: Split of twiddle exponents: w^e = lo[e mod 2^14] * hi[e >> 14].
_TW_SPLIT = 14
#: A pass on bits [lo, lo+S) with lo + S at most this reads its between-pass twiddles from a table of
#: all 2^(lo+S) powers of the root of that order (at most 8 MiB): one load instead of two and a product.
DIRECT_TWIDDLE_LOG = 18
_BLOCK = 256
#: Pass sizes (top bits down; DIT runs them reversed) for sizes where the default measured slower on an
#: H200. The default lists balanced sizes largest first in both directions, so at 2^28 DIT would run
#: 10,9,9 from the bottom up (the plan "9,9,10"), which is slower than 10,9,9 both ways; at 2^27 the
#: default is the fastest (benchmarks/results/cuda-ntt-plans-h200-2026-12-01c.json and
#: results/archive/cuda-ntt-plans-h200-2026-12-01b.json; history: benchmarks/HISTORY.md).
MEASURED_PLANS = {28: (10, 9, 9)}
#: kernels/ntt.cu ntt_bitrev_tiled: tiles of 2^K x 2^K points (NTT_BR_K) and their shared memory.
_BITREV_TILE_LOG = 4
_BITREV_SMEM = 2 * 8 * (1 << _BITREV_TILE_LOG) * ((1 << _BITREV_TILE_LOG) + 1) * 4


def mont_words(x: int) -> np.ndarray:
    """The Montgomery form of x as 8 little-endian u32 words (one kernel-side fr_t)."""
    return fr_vec.mont(x % R_MODULUS).view(np.uint32)


def _powers_words(x: int, count: int) -> np.ndarray:
    """[x^0 .. x^(count-1)] Montgomery, as a (count, 8) u32 array."""
    return np.ascontiguousarray(fr_vec.powers(x % R_MODULUS, count)).view(np.uint32).reshape(count, 8)


@dataclass(frozen=True)
class _RootTables:
    """Everything a transform of 2^log_n points by `root` reads, resident on the device."""

    inner_log: int
    inner: Any  #: w_(2^I)^k, k < 2^(I-1), I = min(L, MAX_PASS_LOG)
    tw_lo: Any  #: root^k, k < min(n, 2^14)
    tw_hi: Any  #: root^(2^14 k), k < ceil(n / 2^14)
    root: int
    direct: dict[int, Any]  #: j -> root_(2^j)^k, k < 2^j, made on first use (j <= DIRECT_TWIDDLE_LOG)

    def direct_table(self, kernels: Any, log_n: int, j: int) -> Any:
        table = self.direct.get(j)
        if table is None:
            table = self.direct[j] = kernels.to_device(_powers_words(pow(self.root, 1 << (log_n - j), R_MODULUS),
                                                                     1 << j))
        return table


@dataclass(frozen=True)
class _PowerTables:
    lo: Any
    hi: Any


class DeviceNtt:
    """Radix-2 NTTs of up to 2^28 points on one device (see kernels/ntt.cu for the schedule)."""

    def __init__(self, kernels: Any, *, max_pass_log: int = MAX_PASS_LOG) -> None:
        if not 1 <= max_pass_log <= MAX_PASS_LOG:
            raise ValueError(f"max_pass_log must be in [1, {MAX_PASS_LOG}]")
        self.k = kernels
        self.xp = kernels.xp
        self.max_pass_log = max_pass_log
        #: Passes with lo + S up to this read direct twiddle tables (0: none; benchmarks compare).
        self.direct_twiddle_log = DIRECT_TWIDDLE_LOG
        #: Passes of 2^10 elements a block run the kernels with a constant shared-memory stride
        #: (False: the generic ones; tests/gpu/test_cuda_ntt.py checks both agree).
        self.fixed_stride = True
        #: Pass sizes that replace the default plan, by (transform, log_n): "dif" lists them from the
        #: top index bits down, "dit" from the bottom up (benchmarks/cuda/bench_cuda.py --ntt-plans compares).
        self.pass_plans: dict[tuple[str, int], tuple[int, ...]] = {}
        #: Points a block holds, log2: a pass of S stages takes min(2^lo, 2^(block_log - S)) columns.
        #: Below MAX_PASS_LOG only to compare smaller blocks (bench_cuda.py --ntt-plans "20:7,7,6@7").
        self.block_log = MAX_PASS_LOG
        #: The H quotient's transforms: 6 (`h_quotient`), or bellperson's 7 (benchmarks compare).
        self.quotient_transforms = 6
        #: to_coset_evaluations runs the inverse's last pass and the forward's first as one kernel where
        #: their stage counts agree (False: apart; benchmarks compare).
        self.fuse_coset = True
        #: h_quotient's product A*B in the loads of the last transform's first pass (False: a sweep of
        #: its own; benchmarks compare).
        self.fuse_product = True
        self._roots: dict[tuple[int, int], _RootTables] = {}
        self._powers: dict[tuple[int, int, int], _PowerTables] = {}
        self._consts: dict[int, Any] = {}

    # -- tables -------------------------------------------------------------------------------------

    def clear_tables(self) -> None:
        """Drop every cached table (a few MiB per domain size)."""
        self._roots.clear()
        self._powers.clear()
        self._consts.clear()

    def _const(self, x: int) -> Any:
        x %= R_MODULUS
        c = self._consts.get(x)
        if c is None:
            c = self._consts[x] = self.k.to_device(mont_words(x).reshape(1, 8))
        return c

    def _power_tables(self, g: int, log_n: int, scale: int = 1) -> _PowerTables:
        """Tables of scale * g^k = lo[k mod 2^14] * hi[k >> 14]: the scale rides in the low table, so a
        kernel applies scale and power with the one product that joins the two halves."""
        key = (g % R_MODULUS, log_n, scale % R_MODULUS)
        t = self._powers.get(key)
        if t is None:
            n = 1 << log_n
            n_lo = min(n, 1 << _TW_SPLIT)
            n_hi = max(1, -(-n // (1 << _TW_SPLIT)))
            lo = fr_vec.mul_scalar(fr_vec.powers(g % R_MODULUS, n_lo), scale % R_MODULUS)
            t = self._powers[key] = _PowerTables(
                lo=self.k.to_device(np.ascontiguousarray(lo).view(np.uint32).reshape(n_lo, 8)),
                hi=self.k.to_device(_powers_words(pow(g, 1 << _TW_SPLIT, R_MODULUS), n_hi)))
        return t

    def _root_tables(self, log_n: int, root: int) -> _RootTables:
        key = (log_n, root)
        t = self._roots.get(key)
        if t is None:
            inner_log = min(log_n, MAX_PASS_LOG)
            w_inner = pow(root, 1 << (log_n - inner_log), R_MODULUS)
            p = self._power_tables(root, log_n)
            inner = self.k.to_device(_powers_words(w_inner, max(1, 1 << max(inner_log - 1, 0))))
            t = self._roots[key] = _RootTables(inner_log, inner, p.lo, p.hi, root, {})
        return t

    # -- primitives -----------------------------------------------------------------------------------

    def _passes(self, log_n: int, kind: str = "dif") -> list[int]:
        """Stages per pass, in the order `kind` runs them: pass_plans' when it names them, else
        MEASURED_PLANS', else the fewest passes of at most max_pass_log stages, sizes balanced."""
        most = min(self.max_pass_log, self.block_log)
        plan = self.pass_plans.get((kind, log_n))
        if plan is not None:
            if sum(plan) != log_n or not all(1 <= s <= most for s in plan):
                raise ValueError(f"pass plan {plan} for 2^{log_n} points: sizes must be in "
                                 f"[1, {most}] and sum to {log_n}")
            return list(plan)
        if log_n == 0:
            return []
        if most == MAX_PASS_LOG and log_n in MEASURED_PLANS:
            plan = MEASURED_PLANS[log_n]
            return list(plan) if kind == "dif" else list(reversed(plan))
        passes = -(-log_n // most)
        return [log_n // passes + (1 if i < log_n % passes else 0) for i in range(passes)]

    def _check(self, a: Any, log_n: int) -> None:
        if not 0 <= log_n <= MAX_LOG_SIZE:
            raise ValueError(f"log_n must be in [0, {MAX_LOG_SIZE}], got {log_n}")
        if a.shape != (1 << log_n, 8) or a.dtype != np.uint32:
            raise ValueError(f"expected a ({1 << log_n}, 8) uint32 array, got {a.dtype} {a.shape}")

    def _run_pass(self, kernel: str, a: Any, log_n: int, lo: int, stages: int, t: _RootTables,
                  extra: tuple = ()) -> None:
        log_c = min(lo, self.block_log - stages)
        elems = 1 << (stages + log_c)
        blocks = 1 << (log_n - stages - log_c)
        j = lo + stages
        direct = t.direct_table(self.k, log_n, j) if lo > 0 and j <= self.direct_twiddle_log else None
        if elems == 1024 and self.fixed_stride:
            kernel += "_1024"  # the same pass with its shared-memory stride a constant (kernels/ntt.cu)
        self.k.launch(kernel, blocks, elems // 2,
                      (a, log_n, lo, stages, log_c, t.inner_log, t.inner, t.tw_lo, t.tw_hi, direct, *extra),
                      shared_mem=elems * 32)

    def dif(self, a: Any, log_n: int, root: int, pre_g: int | None = None, post_g: int | None = None,
            post_scale: int | None = None, post_sub: Any = None, pre_mul: Any = None) -> Any:
        """In place: natural-order coefficients -> evaluations at root^i, bit-reversed positions.

        Fused factors (no extra sweep over memory): with `pre_mul` (an array of the same shape), the
        input is first multiplied by it element-wise; with `pre_g`, by pre_g^i (a coset shift); with
        `post_g` / `post_scale`, the output at bit-reversed position p is
        multiplied by post_scale * post_g^bitrev(p), i.e. by the power of its natural index once
        permuted (the shift and 1/n of inverse coset transforms). With both, post_scale is part of
        post_g's table, so the two cost the product of a power alone. With `post_sub` (an array of the
        same shape), the output at p is then post_sub[p] minus it.
        """
        self._check(a, log_n)
        for v in (post_sub, pre_mul):
            if v is not None:
                self._check(v, log_n)
        if log_n == 0:  # no pass to fuse into; g^0 = 1, only a product and a scale can remain
            if pre_mul is not None:
                self.k.launch1d("fr_h_combine", 1, (a, pre_mul, None, 1, None), _BLOCK)
            if post_scale is not None:
                self.mul_powers(a, 0, scale=post_scale)
            if post_sub is not None:  # post_sub - a = (a * 1 - post_sub) * (-1)
                self.k.launch1d("fr_h_combine", 1, (a, self._const(1), post_sub, 1, self._const(-1)), _BLOCK)
            return a
        t = self._root_tables(log_n, root)
        pre = self._power_tables(pre_g, log_n) if pre_g is not None else None
        post, scale = None, None
        if post_g is not None:  # the scale folded into the power table: one product fewer a point
            post = self._power_tables(post_g, log_n, 1 if post_scale is None else post_scale)
        elif post_scale is not None:
            scale = self._const(post_scale)
        passes = self._passes(log_n, "dif")
        hi = log_n
        for i, stages in enumerate(passes):
            hi -= stages
            first, last = i == 0, i == len(passes) - 1
            extra = (pre.lo if first and pre else None, pre.hi if first and pre else None,
                     pre_mul if first else None, post.lo if last and post else None, post.hi if last and post else None,
                     scale if last else None, post_sub if last else None)
            self._run_pass("ntt_dif_pass", a, log_n, hi, stages, t, extra)
        return a

    def dit(self, a: Any, log_n: int, root: int) -> Any:
        """In place: bit-reversed coefficients -> evaluations at root^i in natural order."""
        self._check(a, log_n)
        t = self._root_tables(log_n, root)
        lo = 0
        for stages in self._passes(log_n, "dit"):
            self._run_pass("ntt_dit_pass", a, log_n, lo, stages, t)
            lo += stages
        return a

    def bitrev(self, a: Any, log_n: int) -> Any:
        """In place: the bit-reversal permutation (by tiles through shared memory from 2^8 points on)."""
        self._check(a, log_n)
        if log_n >= 2 * _BITREV_TILE_LOG:
            self.k.launch("ntt_bitrev_tiled", 1 << (log_n - 2 * _BITREV_TILE_LOG), 1 << (2 * _BITREV_TILE_LOG),
                          (a, log_n), shared_mem=_BITREV_SMEM)
        elif log_n:
            self.k.launch1d("ntt_bitrev", 1 << log_n, (a, log_n), _BLOCK)
        return a

    def mul_powers(self, a: Any, log_n: int, g: int | None = None, scale: int | None = None,
                   bitrev: bool = False) -> Any:
        """a[i] *= scale * g^k, k = i or bitrev(i): coset shifts and the 1/n of inverse transforms."""
        n = a.shape[0]
        tables = self._power_tables(g, log_n) if g is not None else None
        self.k.launch1d("fr_mul_powers", n, (a, n, log_n, tables.lo if tables else None,
                                             tables.hi if tables else None,
                                             self._const(scale) if scale is not None else None,
                                             1 if bitrev else 0), _BLOCK)
        return a

    # -- natural-order transforms (cuzk.field.ntt.Domain semantics) -----------------------------------

    @staticmethod
    def default_root(log_n: int) -> int:
        return fr_root_of_unity(log_n)

    def ntt(self, a: Any, log_n: int, root: int | None = None) -> Any:
        """In place: coefficients -> evaluations at root^i (natural order both ways)."""
        root = self.default_root(log_n) if root is None else root
        return self.bitrev(self.dif(a, log_n, root), log_n)

    def intt(self, a: Any, log_n: int, root: int | None = None) -> Any:
        """In place: evaluations at root^i -> coefficients (the 1/n fused into the last pass)."""
        root = self.default_root(log_n) if root is None else root
        self.dif(a, log_n, pow(root, -1, R_MODULUS), post_scale=pow(1 << log_n, -1, R_MODULUS))
        return self.bitrev(a, log_n)

    def coset_ntt(self, a: Any, log_n: int, shift: int = FR_GENERATOR, root: int | None = None) -> Any:
        """In place: coefficients -> evaluations at shift * root^i (the shift fused into the first pass)."""
        root = self.default_root(log_n) if root is None else root
        return self.bitrev(self.dif(a, log_n, root, pre_g=shift), log_n)

    def icoset_ntt(self, a: Any, log_n: int, shift: int = FR_GENERATOR, root: int | None = None,
                   scale: int = 1) -> Any:
        """In place: evaluations at shift * root^i -> coefficients, times `scale` (shift, 1/n and scale
        fused into the last pass)."""
        root = self.default_root(log_n) if root is None else root
        self.dif(a, log_n, pow(root, -1, R_MODULUS), post_g=pow(shift, -1, R_MODULUS),
                 post_scale=scale * pow(1 << log_n, -1, R_MODULUS))
        return self.bitrev(a, log_n)

    # -- Groth16 --------------------------------------------------------------------------------------

    def to_coset_evaluations(self, a: Any, log_n: int, root: int, shift: int, scale: int = 1) -> Any:
        """In place: evaluations on <root> -> evaluations on shift * <root> times `scale`, natural order.

        Inverse DIF (leaves coefficients bit-reversed) whose last pass also scales by scale * shift^i / n
        at the bit-reversed positions, then forward DIT (bit-reversed in, natural out): no permutation
        pass and no separate scaling sweep; with `fuse_coset`, the two passes over the low bits are one.
        """
        n_inv = pow(1 << log_n, -1, R_MODULUS)
        dif_plan, dit_plan = self._passes(log_n, "dif"), self._passes(log_n, "dit")
        if not (self.fuse_coset and log_n and dif_plan[-1] == dit_plan[0]):
            self.dif(a, log_n, pow(root, -1, R_MODULUS), post_g=shift, post_scale=n_inv * scale)
            return self.dit(a, log_n, root)
        # The inverse's last pass and the forward's first run over the same low bits: one kernel
        # (kernels/ntt.cu ntt_dif_dit_pass), the points kept in registers between the two.
        self._check(a, log_n)
        t_inv, t_fwd = self._root_tables(log_n, pow(root, -1, R_MODULUS)), self._root_tables(log_n, root)
        post = self._power_tables(shift, log_n, n_inv * scale)
        hi = log_n
        for stages in dif_plan[:-1]:
            hi -= stages
            self._run_pass("ntt_dif_pass", a, log_n, hi, stages, t_inv, (None,) * 7)
        stages = dif_plan[-1]
        self.k.launch("ntt_dif_dit_pass", 1 << (log_n - stages), 1 << (stages - 1),
                      (a, log_n, stages, t_inv.inner_log, t_inv.inner, t_fwd.inner, post.lo, post.hi, None),
                      shared_mem=32 << stages)
        lo = stages
        for stages in dit_plan[1:]:
            self._run_pass("ntt_dit_pass", a, log_n, lo, stages, t_fwd)
            lo += stages
        return a

    def h_quotient(self, a: Any, b: Any, c: Any, log_n: int, root: int | None = None,
                   shift: int | None = None, divide: bool = True, canonical: bool = False) -> Any:
        """The H polynomial of Groth16 from the per-constraint evaluations of A, B, C (zero-padded to
        2^log_n, all overwritten). Returns `a`, holding:

        * divide=True (bellperson's keys): the coefficients of (A*B - C) / Z, Z = x^n - 1; the top
          coefficient is zero. `shift` (default: a root of unity of order 2n) must have shift^n = -1:
          the six transforms of `cuzk.groth16.prover.quotient` (bellperson's seven with
          `quotient_transforms` = 7, for benchmarks).
        * divide=False (snarkjs odd coset): the evaluations of A*B - C on shift * <root>.

        Inputs and result are Montgomery forms, or with `canonical` plain integers (< r). Every step but
        the product is linear, so the conversions ride in the scales the transforms apply anyway: read
        as Montgomery, x is x / R, so A's and B's first transforms also scale by R and the last one by
        1 / R (four sweeps over memory fewer than converting); C's never meets a product and needs none.
        """
        root = self.default_root(log_n) if root is None else root
        n = 1 << log_n
        if shift is None:
            if not divide:
                raise ValueError("divide=False needs the coset shift")
            shift = quotient_shift(n)
        radix = pow(2, 256, R_MODULUS)
        out_scale = pow(radix, -1, R_MODULUS) if canonical else 1
        if divide and self.quotient_transforms == 6 and log_n:
            if pow(shift, n, R_MODULUS) != R_MODULUS - 1:
                raise ValueError(f"the quotient's coset shift must have shift^n = -1 (n = 2^{log_n})")
            for v in (a, b):
                self.to_coset_evaluations(v, log_n, root, shift, radix if canonical else 1)
            half_n_inv = pow(2 * n, -1, R_MODULUS)
            root_inv = pow(root, -1, R_MODULUS)
            # C's coefficients over 2, bit-reversed: (L + U) / 2 where every constraint holds.
            self.dif(c, log_n, root_inv, post_scale=half_n_inv)
            if not self.fuse_product:
                self.k.launch1d("fr_h_combine", n, (a, b, None, n, None), _BLOCK)
            # A*B's coefficients from the coset over 2, (L - U) / 2, subtracted from C's in the last pass;
            # the product A*B rides in the first pass's loads (no sweep of its own).
            self.dif(a, log_n, root_inv, post_g=pow(shift, -1, R_MODULUS), post_scale=out_scale * half_n_inv,
                     post_sub=c, pre_mul=b if self.fuse_product else None)
            return self.bitrev(a, log_n)
        for v in (a, b, c):
            self.to_coset_evaluations(v, log_n, root, shift, radix if canonical else 1)
        if divide:
            self.k.launch1d("fr_h_combine", n, (a, b, c, n, None), _BLOCK)
            # 1/Z is a constant on the coset: part of the inverse transform's scale, not a product here.
            z = (pow(shift, n, R_MODULUS) - 1) % R_MODULUS
            self.icoset_ntt(a, log_n, shift, root, scale=out_scale * pow(z, -1, R_MODULUS))
        else:
            scale = self._const(out_scale) if canonical else None
            self.k.launch1d("fr_h_combine", n, (a, b, c, n, scale), _BLOCK)
        return a

    def to_montgomery(self, a: Any, n: int | None = None) -> Any:
        n = a.shape[0] if n is None else n
        self.k.launch1d("fr_to_mont", n, (a, n), _BLOCK)
        return a

    def from_montgomery(self, a: Any, n: int | None = None) -> Any:
        n = a.shape[0] if n is None else n
        self.k.launch1d("fr_from_mont", n, (a, n), _BLOCK)
        return a

