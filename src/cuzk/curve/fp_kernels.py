"""numba kernels for Fp and Fp2 = Fp[u]/(u^2 + 1) in Montgomery form, 6 x 64-bit limbs.

Why: generating Groth16 parameters multiplies one base point by millions of scalars, and checking
a .params file tests millions of points against the curve equation. Per-point Python (or even
per-point py-arkworks calls) is too slow for that, so the curve layer does its bulk work here.

Representation inside jitted code: an Fp element is a `UniTuple(uint64, 6)` of little-endian limbs
holding a*R mod p with R = 2^384 (tuples stay in registers; arrays would go through memory); an Fp2
element is a pair `(c0, c1)` of such tuples. Arrays use shape (n, 6) for Fp and (n, 2, 6) for Fp2.

The field operations `fe_add`, `fe_sub`, `fe_neg`, `fe_mul`, `fe_square`, `fe_is_zero`, `fe_eq`,
`fe_is_canonical`, `fe_zero_like` and `fe_one_like` are numba intrinsics that emit LLVM IR
directly, and they accept Fp or Fp2 (picked at compile time from the argument type), so the curve
formulas in `cuzk.curve.fixed_base` are written once for G1 and G2. Additions are emitted in place;
the Montgomery product and the Fp2 product/square are emitted once per LLVM module as internal
`fastcc` functions and called (see `_IRGen.outlined`). Why not `@njit(inline="always")` helpers:
numba-level inlining expands a G2 point addition into thousands of numba IR statements (minutes
of compilation, and a crash in numba's parfor analysis); plain njit calls pass the tuples through
memory and doubled the cost of a product.

Montgomery multiplication is CIOS in the "no-carry" form, valid because the top limb of p is
below 2^62 (intermediate sums never need a 7th limb). Limb products are 64x64 -> 128-bit i128
operations, which LLVM lowers to `mulx` + add/adc (docs/dependencies.md §5). Reductions use
`select`, not branches.

Every constant used in jitted code is an `np.uint64`: numba would turn a uint64 mixed with a Python
int into float64.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import numba
import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic, overload

from cuzk.field.constants import FP_BYTES, FP_LIMBS, FP_MONT_R, P_MODULUS

_MASK64 = (1 << 64) - 1


def int_to_limbs(a: int) -> tuple[int, ...]:
    """Little-endian 64-bit limbs of a non-negative int below 2^384 (Python ints)."""
    return tuple((a >> (64 * i)) & _MASK64 for i in range(FP_LIMBS))


def limbs_to_int(limbs) -> int:
    """Inverse of `int_to_limbs` (accepts any sequence of 6 integer-like limbs)."""
    return sum(int(v) << (64 * i) for i, v in enumerate(limbs))


_P_LIMBS = int_to_limbs(P_MODULUS)
_NPRIME = (-pow(P_MODULUS, -1, 1 << 64)) % (1 << 64)  # -p^-1 mod 2^64, the Montgomery factor


def _u64_tuple(a: int) -> tuple[np.uint64, ...]:
    return tuple(np.uint64(v) for v in int_to_limbs(a))


_ZERO = np.uint64(0)
_FP_ONE_STD = _u64_tuple(1)                              # multiply by this to leave Montgomery form
_FP_R2 = _u64_tuple(FP_MONT_R * FP_MONT_R % P_MODULUS)  # multiply by this to enter Montgomery form
# Fermat inversion exponent p - 2, most significant bit first.
_INV_EXP_BITS = np.array([int(c) for c in bin(P_MODULUS - 2)[2:]], dtype=np.uint8)

FP_TYPE = types.UniTuple(types.uint64, FP_LIMBS)
FP2_TYPE = types.UniTuple(FP_TYPE, 2)


# ---------------------------------------------------------------------------------------------
# LLVM IR generation. Values handled in Python: an Fp element is a list of 6 i64 ir.Values, an
# Fp2 element a pair of such lists.
# ---------------------------------------------------------------------------------------------

_I64 = ir.IntType(64)
_I128 = ir.IntType(128)
_C64 = ir.Constant(_I128, 64)


class _IRGen:
    """Emits Fp/Fp2 arithmetic on limb lists into one llvmlite builder."""

    def __init__(self, builder: ir.IRBuilder) -> None:
        self.b = builder
        self.zero = ir.Constant(_I64, 0)
        self.p = [ir.Constant(_I64, v) for v in _P_LIMBS]

    # -- 64-bit carry primitives (i128 arithmetic) --
    def _split(self, v):
        return self.b.trunc(v, _I64), self.b.trunc(self.b.lshr(v, _C64), _I64)

    def mac(self, a, b, c, d):
        """(lo, hi) of a*b + c + d (fits in 128 bits)."""
        z = self.b.zext
        return self._split(self.b.add(self.b.add(self.b.mul(z(a, _I128), z(b, _I128)), z(c, _I128)),
                                      z(d, _I128)))

    def adc(self, a, b, carry):
        z = self.b.zext
        return self._split(self.b.add(self.b.add(z(a, _I128), z(b, _I128)), z(carry, _I128)))

    def sbb(self, a, b, borrow):
        """(a - b - borrow, borrow_out in {0, 1})."""
        z = self.b.zext
        lo, hi = self._split(self.b.sub(self.b.sub(z(a, _I128), z(b, _I128)), z(borrow, _I128)))
        return lo, self.b.and_(hi, ir.Constant(_I64, 1))

    def select(self, cond, x, y):
        return [self.b.select(cond, xi, yi) for xi, yi in zip(x, y, strict=True)]

    # -- Fp --
    def sub_p_if_ge(self, t):
        """t (known < 2p) reduced below p."""
        d, w = [], self.zero
        for ti, pi in zip(t, self.p, strict=True):
            di, w = self.sbb(ti, pi, w)
            d.append(di)
        return self.select(self.b.icmp_unsigned("!=", w, self.zero), t, d)

    def fp_mul_inline(self, a, bb):
        """The CIOS Montgomery product, emitted in place (~700 instructions)."""
        b = self.b
        t = [self.zero] * FP_LIMBS
        nprime = ir.Constant(_I64, _NPRIME)
        for i in range(FP_LIMBS):
            t[0], A = self.mac(a[0], bb[i], t[0], self.zero)
            m = b.mul(t[0], nprime)
            _, C = self.mac(m, self.p[0], t[0], self.zero)
            for j in range(1, FP_LIMBS):
                t[j], A = self.mac(a[j], bb[i], t[j], A)
                t[j - 1], C = self.mac(m, self.p[j], t[j], C)
            t[FP_LIMBS - 1] = b.add(C, A)
        return self.sub_p_if_ge(t)

    def outlined(self, name: str, emit, *args, n_out: int = 1):
        """Call `emit(gen, *args)` (-> list of n_out limb lists) as an internal fastcc function.

        The function is created in the current LLVM module on first use. Why out of line: LLVM's
        optimisation and instruction scheduling grow super-linearly with the size of a basic
        block, and a G2 addition with ~30 inlined products took minutes to compile; a call costs
        a few ns against a ~60 ns product.
        """
        module = self.b.module
        fn = module.globals.get(name)
        if fn is None:
            ret_ty = ir.LiteralStructType([_I64] * (FP_LIMBS * n_out))
            fn = ir.Function(module, ir.FunctionType(ret_ty, [_I64] * (FP_LIMBS * len(args))), name)
            fn.linkage = "internal"
            fn.calling_convention = "fastcc"
            fn.attributes.add("noinline")
            fn.attributes.add("nounwind")
            body = _IRGen(ir.IRBuilder(fn.append_basic_block()))
            params = [list(fn.args[FP_LIMBS * k:FP_LIMBS * (k + 1)]) for k in range(len(args))]
            ret = ir.Constant(ret_ty, ir.Undefined)
            for k, v in enumerate(v for limbs in emit(body, *params) for v in limbs):
                ret = body.b.insert_value(ret, v, k)
            body.b.ret(ret)
        res = self.b.call(fn, [v for limbs in args for v in limbs], cconv="fastcc")
        flat = [self.b.extract_value(res, k) for k in range(FP_LIMBS * n_out)]
        return [flat[FP_LIMBS * k:FP_LIMBS * (k + 1)] for k in range(n_out)]

    def fp_mul(self, a, bb):
        return self.outlined("cuzk_fp_mul", lambda g, x, y: [g.fp_mul_inline(x, y)], a, bb)[0]

    def fp_add(self, x, y):
        s, c = [], self.zero
        for xi, yi in zip(x, y, strict=True):  # x + y < 2p < 2^382: no carry out of limb 5
            si, c = self.adc(xi, yi, c)
            s.append(si)
        return self.sub_p_if_ge(s)

    def fp_sub(self, x, y):
        d, w = [], self.zero
        for xi, yi in zip(x, y, strict=True):
            di, w = self.sbb(xi, yi, w)
            d.append(di)
        mask = self.b.sub(self.zero, w)          # all ones when it borrowed: add p back
        r, c = [], self.zero
        for di, pi in zip(d, self.p, strict=True):
            ri, c = self.adc(di, self.b.and_(pi, mask), c)
            r.append(ri)
        return r

    def fp_is_zero(self, x):
        acc = x[0]
        for xi in x[1:]:
            acc = self.b.or_(acc, xi)
        return self.b.icmp_unsigned("==", acc, self.zero)

    def fp_eq(self, x, y):
        acc = self.zero
        for xi, yi in zip(x, y, strict=True):
            acc = self.b.or_(acc, self.b.xor(xi, yi))
        return self.b.icmp_unsigned("==", acc, self.zero)

    def fp_is_canonical(self, x):
        """x < p: subtracting p borrows."""
        w = self.zero
        for xi, pi in zip(x, self.p, strict=True):
            _, w = self.sbb(xi, pi, w)
        return self.b.icmp_unsigned("!=", w, self.zero)

    def fp_neg(self, x):
        zero = [self.zero] * FP_LIMBS
        return self.select(self.fp_is_zero(x), zero, self.fp_sub(zero, x))

    def fp_square(self, x):
        return self.fp_mul(x, x)

    # -- Fp2 (u^2 = -1) --
    def fp2_add(self, x, y):
        return self.fp_add(x[0], y[0]), self.fp_add(x[1], y[1])

    def fp2_sub(self, x, y):
        return self.fp_sub(x[0], y[0]), self.fp_sub(x[1], y[1])

    def fp2_neg(self, x):
        return self.fp_neg(x[0]), self.fp_neg(x[1])

    def fp2_mul_inline(self, x, y):
        """Karatsuba, 3 products: c0 = x0y0 - x1y1, c1 = (x0+x1)(y0+y1) - x0y0 - x1y1."""
        v0 = self.fp_mul(x[0], y[0])
        v1 = self.fp_mul(x[1], y[1])
        s = self.fp_mul(self.fp_add(x[0], x[1]), self.fp_add(y[0], y[1]))
        return self.fp_sub(v0, v1), self.fp_sub(self.fp_sub(s, v0), v1)

    def fp2_square_inline(self, x):
        """Complex squaring, 2 products: c0 = (x0+x1)(x0-x1), c1 = 2 x0 x1."""
        c0 = self.fp_mul(self.fp_add(x[0], x[1]), self.fp_sub(x[0], x[1]))
        t = self.fp_mul(x[0], x[1])
        return c0, self.fp_add(t, t)

    def fp2_mul(self, x, y):
        return tuple(self.outlined("cuzk_fp2_mul", lambda g, a0, a1, b0, b1: g.fp2_mul_inline(
            (a0, a1), (b0, b1)), x[0], x[1], y[0], y[1], n_out=2))

    def fp2_square(self, x):
        return tuple(self.outlined("cuzk_fp2_square", lambda g, a0, a1: g.fp2_square_inline((a0, a1)),
                                   x[0], x[1], n_out=2))

    def fp2_is_zero(self, x):
        return self.b.and_(self.fp_is_zero(x[0]), self.fp_is_zero(x[1]))

    def fp2_is_canonical(self, x):
        return self.b.and_(self.fp_is_canonical(x[0]), self.fp_is_canonical(x[1]))

    def fp2_eq(self, x, y):
        return self.b.and_(self.fp_eq(x[0], y[0]), self.fp_eq(x[1], y[1]))

    # -- numba values <-> limb lists --
    def unpack(self, val, is_fp2: bool):
        ev = self.b.extract_value
        if is_fp2:
            return tuple([ev(val, [c, k]) for k in range(FP_LIMBS)] for c in range(2))
        return [ev(val, k) for k in range(FP_LIMBS)]

    def pack(self, context, ty, val, is_fp2: bool):
        if is_fp2:
            parts = [context.make_tuple(self.b, FP_TYPE, v) for v in val]
            return context.make_tuple(self.b, ty, parts)
        return context.make_tuple(self.b, ty, val)


def _field_kind(ty) -> bool | None:
    """True for Fp2, False for Fp, None for anything else (the intrinsic then fails to type)."""
    if ty == FP2_TYPE:
        return True
    if ty == FP_TYPE:
        return False
    return None


def _make_intrinsic(name: str, arity: int, method: str, result: str, doc: str):
    """An intrinsic for `fp_<method>` / `fp2_<method>` of `_IRGen`.

    result: "elem" (same type as the arguments), "bool", or "const1"/"const0" (constants one/zero of
    the argument's field, Montgomery form; the argument is only used for its type).
    """

    def typer(typingctx, *args):
        if len(args) != arity:
            return None
        kind = _field_kind(args[0])
        if kind is None or any(a != args[0] for a in args):
            return None
        rtype = types.boolean if result == "bool" else args[0]

        def codegen(context, builder, sig, llargs):
            g = _IRGen(builder)
            if result in ("const0", "const1"):
                one = [ir.Constant(_I64, v) for v in int_to_limbs(FP_MONT_R if result == "const1" else 0)]
                zero = [g.zero] * FP_LIMBS
                val = (one, zero) if kind else one
                return g.pack(context, rtype, val, kind)
            vals = [g.unpack(v, kind) for v in llargs]
            out = getattr(g, ("fp2_" if kind else "fp_") + method)(*vals)
            return out if result == "bool" else g.pack(context, rtype, out, kind)

        return rtype(*args), codegen

    if arity == 1:
        def template(typingctx, a):
            return typer(typingctx, a)
    else:
        def template(typingctx, a, b):
            return typer(typingctx, a, b)
    template.__name__ = template.__qualname__ = name
    template.__doc__ = doc
    return intrinsic(template)


fe_add = _make_intrinsic("fe_add", 2, "add", "elem", "a + b in Fp or Fp2.")
fe_sub = _make_intrinsic("fe_sub", 2, "sub", "elem", "a - b in Fp or Fp2.")
fe_neg = _make_intrinsic("fe_neg", 1, "neg", "elem", "-a in Fp or Fp2.")
fe_mul = _make_intrinsic("fe_mul", 2, "mul", "elem", "Montgomery product a*b/R in Fp or Fp2.")
fe_square = _make_intrinsic("fe_square", 1, "square", "elem", "a^2 (Fp2: complex squaring).")
fe_is_zero = _make_intrinsic("fe_is_zero", 1, "is_zero", "bool", "a == 0.")
fe_eq = _make_intrinsic("fe_eq", 2, "eq", "bool", "a == b (both reduced).")
fe_is_canonical = _make_intrinsic("fe_is_canonical", 1, "is_canonical", "bool",
                                  "Every Fp coordinate of a (standard form, not Montgomery) is below p.")
fe_zero_like = _make_intrinsic("fe_zero_like", 1, "", "const0", "Zero of the argument's field.")
fe_one_like = _make_intrinsic("fe_one_like", 1, "", "const1", "One (Montgomery) of the argument's field.")


# ---------------------------------------------------------------------------------------------
# Inversion, conversions, array access (ordinary jitted functions built on the intrinsics)
# ---------------------------------------------------------------------------------------------

@njit(cache=True)
def fp_inv(a):
    """a^(p-2) (Fermat: ~380 squarings + 228 products); 0 maps to 0. Callers batch inversions."""
    r = fe_one_like(a)
    for i in range(_INV_EXP_BITS.shape[0]):
        r = fe_square(r)
        if _INV_EXP_BITS[i]:
            r = fe_mul(r, a)
    return r


@njit(cache=True)
def fp2_inv(a):
    """(a0 - a1 u) / (a0^2 + a1^2); 0 maps to 0."""
    t = fp_inv(fe_add(fe_square(a[0]), fe_square(a[1])))
    return (fe_mul(a[0], t), fe_neg(fe_mul(a[1], t)))


def fe_inv(a):
    """1/a in Fp or Fp2, 0 maps to 0 (callable from jitted code only)."""
    raise TypeError("fe_inv is only callable from numba-jitted code")


@overload(fe_inv)
def _ov_fe_inv(a):
    kind = _field_kind(a)
    if kind is None:
        return None
    return (lambda a: fp2_inv(a)) if kind else (lambda a: fp_inv(a))


@njit(cache=True)
def fp_to_mont(a):
    """Standard limbs (a < p) to Montgomery form: a * R^2 / R."""
    return fe_mul(a, _FP_R2)


@njit(cache=True)
def fp_from_mont(a):
    """Montgomery form to standard limbs: a * 1 / R."""
    return fe_mul(a, _FP_ONE_STD)


@njit(inline="always", cache=True)
def load_fp(arr, i):
    """Row i of an (n, 6) uint64 array as an Fp tuple."""
    return (arr[i, 0], arr[i, 1], arr[i, 2], arr[i, 3], arr[i, 4], arr[i, 5])


@njit(inline="always", cache=True)
def store_fp(arr, i, a):
    for k in range(FP_LIMBS):
        arr[i, k] = a[k]


@njit(inline="always", cache=True)
def load_fp2(arr, i):
    """Row i of an (n, 2, 6) uint64 array as an Fp2 pair."""
    return ((arr[i, 0, 0], arr[i, 0, 1], arr[i, 0, 2], arr[i, 0, 3], arr[i, 0, 4], arr[i, 0, 5]),
            (arr[i, 1, 0], arr[i, 1, 1], arr[i, 1, 2], arr[i, 1, 3], arr[i, 1, 4], arr[i, 1, 5]))


@njit(inline="always", cache=True)
def store_fp2(arr, i, a):
    for k in range(FP_LIMBS):
        arr[i, 0, k] = a[0][k]
        arr[i, 1, k] = a[1][k]


@njit(inline="always", cache=True)
def _be64(buf, off):
    v = _ZERO
    for j in range(8):
        v = (v << np.uint64(8)) | np.uint64(buf[off + j])
    return v


@njit(cache=True)
def read_be48(buf, off):
    """48 big-endian bytes buf[off:off+48] (1-D uint8) as standard limbs, without reduction.

    Check `fe_is_canonical` on the result before using it as a field element.
    """
    return (_be64(buf, off + 40), _be64(buf, off + 32), _be64(buf, off + 24), _be64(buf, off + 16),
            _be64(buf, off + 8), _be64(buf, off))


@njit(cache=True)
def write_be48(buf, off, a):
    """Write standard limbs `a` as 48 big-endian bytes into buf[off:off+48] (1-D uint8)."""
    for k in range(FP_LIMBS):
        v = a[k]
        base = off + 40 - 8 * k
        for j in range(8):
            buf[base + 7 - j] = np.uint8(v & np.uint64(0xFF))
            v >>= np.uint64(8)


# ---------------------------------------------------------------------------------------------
# Threading. Kernels are `nogil` functions over a row range [lo, hi); `parallel_for` splits the rows
# over a thread pool. Why not `prange`: every parallel=True function re-links and re-optimises its
# whole call tree (it doubled the compile time of the curve kernels) and numba's parfor array
# analysis crashed on these kernels.
# ---------------------------------------------------------------------------------------------

_pool: ThreadPoolExecutor | None = None
_pool_size = 0
_pool_lock = threading.Lock()


def _thread_count() -> int:
    """numba's thread count (NUMBA_NUM_THREADS, default: the CPU count)."""
    return max(1, numba.get_num_threads())


def _get_pool(size: int) -> ThreadPoolExecutor:
    global _pool, _pool_size
    with _pool_lock:
        if _pool is None or _pool_size < size:
            _pool = ThreadPoolExecutor(max_workers=size, thread_name_prefix="cuzk-fp")
            _pool_size = size
        return _pool


def parallel_for(kernel, n: int, *args, grain: int = 1) -> None:
    """Run kernel(*args, lo, hi) over [0, n) split into one contiguous range per thread.

    Ranges are multiples of `grain` rows (except the last), so kernels can batch per grain.
    """
    threads = min(_thread_count(), -(-n // grain)) if n > 0 else 0
    if threads <= 1:
        if n > 0:
            kernel(*args, 0, n)
        return
    per = -(-n // (threads * grain)) * grain
    bounds = [(lo, min(n, lo + per)) for lo in range(0, n, per)]
    pool = _get_pool(len(bounds))
    futures = [pool.submit(kernel, *args, lo, hi) for lo, hi in bounds]
    for f in futures:
        f.result()


@njit(nogil=True, cache=True)
def _from_be_rows(raw, out, ok, lo, hi):
    for i in range(lo, hi):
        a = read_be48(raw[i], 0)
        good = fe_is_canonical(a)
        ok[i] = good
        store_fp(out, i, fp_to_mont(a) if good else a)


def fp_from_be_bytes(raw: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(n, 48) uint8 big-endian -> ((n, 6) uint64 Montgomery limbs, (n,) bool canonical).

    Non-canonical inputs (>= p) are flagged and their limbs are left unconverted.
    """
    raw = np.ascontiguousarray(raw, dtype=np.uint8).reshape(-1, FP_BYTES)
    n = raw.shape[0]
    out = np.empty((n, FP_LIMBS), dtype=np.uint64)
    ok = np.empty(n, dtype=np.bool_)
    parallel_for(_from_be_rows, n, raw, out, ok, grain=1024)
    return out, ok


@njit(nogil=True, cache=True)
def _to_be_rows(mont, out, lo, hi):
    for i in range(lo, hi):
        write_be48(out[i], 0, fp_from_mont(load_fp(mont, i)))


def fp_to_be_bytes(mont: np.ndarray) -> np.ndarray:
    """(n, 6) uint64 Montgomery limbs -> (n, 48) uint8 big-endian standard form."""
    mont = np.ascontiguousarray(mont, dtype=np.uint64).reshape(-1, FP_LIMBS)
    out = np.empty((mont.shape[0], FP_BYTES), dtype=np.uint8)
    parallel_for(_to_be_rows, mont.shape[0], mont, out, grain=1024)
    return out


# ---------------------------------------------------------------------------------------------
# Exported element-wise kernels on Montgomery arrays ((n, 6) Fp or (n, 2, 6) Fp2); tests use them,
# and they give callers vectorised Fp/Fp2 arithmetic without writing numba.
# ---------------------------------------------------------------------------------------------

FE_ADD, FE_SUB, FE_MUL = 0, 1, 2
FE_NEG, FE_SQUARE, FE_INV = 0, 1, 2


def _load_row(arr, i):
    """Row i of an (n, 6) or (n, 2, 6) array as an Fp / Fp2 value (jitted code only)."""
    raise TypeError("jitted code only")


def _store_row(arr, i, a):
    """Store an Fp / Fp2 value as row i (jitted code only)."""
    raise TypeError("jitted code only")


@overload(_load_row, inline="always")
def _ov_load_row(arr, i):
    return (lambda arr, i: load_fp2(arr, i)) if arr.ndim == 3 else (lambda arr, i: load_fp(arr, i))


@overload(_store_row, inline="always")
def _ov_store_row(arr, i, a):
    return (lambda arr, i, a: store_fp2(arr, i, a)) if arr.ndim == 3 else (
        lambda arr, i, a: store_fp(arr, i, a))


@njit(nogil=True, cache=True)
def _binary_rows(op, a, b, out, lo, hi):
    for i in range(lo, hi):
        x = _load_row(a, i)
        y = _load_row(b, i)
        if op == FE_ADD:
            r = fe_add(x, y)
        elif op == FE_SUB:
            r = fe_sub(x, y)
        else:
            r = fe_mul(x, y)
        _store_row(out, i, r)


@njit(nogil=True, cache=True)
def _unary_rows(op, a, out, lo, hi):
    for i in range(lo, hi):
        x = _load_row(a, i)
        if op == FE_NEG:
            r = fe_neg(x)
        elif op == FE_SQUARE:
            r = fe_square(x)
        else:
            r = fe_inv(x)
        _store_row(out, i, r)


def _check_elems(a: np.ndarray) -> np.ndarray:
    a = np.ascontiguousarray(a, dtype=np.uint64)
    if a.shape[1:] not in ((FP_LIMBS,), (2, FP_LIMBS)):
        raise ValueError(f"expected an (n, 6) Fp or (n, 2, 6) Fp2 array, got shape {a.shape}")
    return a


def fe_binary(op: int, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Element-wise FE_ADD / FE_SUB / FE_MUL of two Montgomery arrays of the same shape."""
    a, b = _check_elems(a), _check_elems(b)
    if a.shape != b.shape:
        raise ValueError(f"shape mismatch {a.shape} vs {b.shape}")
    out = np.empty_like(a)
    parallel_for(_binary_rows, a.shape[0], op, a, b, out, grain=1024)
    return out


def fe_unary(op: int, a: np.ndarray) -> np.ndarray:
    """Element-wise FE_NEG / FE_SQUARE / FE_INV (0 -> 0) of a Montgomery array."""
    a = _check_elems(a)
    out = np.empty_like(a)
    parallel_for(_unary_rows, a.shape[0], op, a, out, grain=64)
    return out


@njit(nogil=True, cache=True)
def _mont_rows(to_mont, a, out, lo, hi):
    for i in range(lo, hi):
        x = load_fp(a, i)
        store_fp(out, i, fp_to_mont(x) if to_mont else fp_from_mont(x))


def fp_to_mont_array(a: np.ndarray) -> np.ndarray:
    """(..., 6) standard limbs (each < p) -> Montgomery form (works for Fp2 arrays too)."""
    flat = np.ascontiguousarray(a, dtype=np.uint64).reshape(-1, FP_LIMBS)
    out = np.empty_like(flat)
    parallel_for(_mont_rows, flat.shape[0], True, flat, out, grain=1024)
    return out.reshape(np.shape(a))


def fp_from_mont_array(a: np.ndarray) -> np.ndarray:
    """(..., 6) Montgomery form -> standard limbs (works for Fp2 arrays too)."""
    flat = np.ascontiguousarray(a, dtype=np.uint64).reshape(-1, FP_LIMBS)
    out = np.empty_like(flat)
    parallel_for(_mont_rows, flat.shape[0], False, flat, out, grain=1024)
    return out.reshape(np.shape(a))


def ints_to_fp_array(values) -> np.ndarray:
    """Python ints (each < p) -> (n, 6) uint64 Montgomery array (slow path for tests and setup)."""
    std = np.array([int_to_limbs(int(v)) for v in values], dtype=np.uint64).reshape(-1, FP_LIMBS)
    return fp_to_mont_array(std)


def fp_array_to_ints(a: np.ndarray) -> list[int]:
    """(n, 6) uint64 Montgomery array -> Python ints (slow path for tests and setup)."""
    return [limbs_to_int(row) for row in fp_from_mont_array(a)]


def ints_to_fp2_array(values) -> np.ndarray:
    """(c0, c1) pairs of Python ints -> (n, 2, 6) uint64 Montgomery array."""
    flat = [int(c) for v in values for c in v]
    return ints_to_fp_array(flat).reshape(-1, 2, FP_LIMBS)


def fp2_array_to_ints(a: np.ndarray) -> list[tuple[int, int]]:
    """(n, 2, 6) uint64 Montgomery array -> (c0, c1) pairs of Python ints."""
    flat = fp_array_to_ints(np.asarray(a).reshape(-1, FP_LIMBS))
    return list(zip(flat[0::2], flat[1::2], strict=True))
