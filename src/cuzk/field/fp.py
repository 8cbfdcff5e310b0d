"""Python-int helpers for the base field Fp and its quadratic extension Fp2 = Fp[u]/(u^2 + 1).

Points live in py-arkworks objects, so the only Fp arithmetic Python itself needs is what the
byte encodings test (canonical coordinates, the compressed-form sign rule) and what tests use as
an oracle (curve equations, square roots to build off-subgroup points). The fast vectorised
arithmetic is in `cuzk.curve.fp_kernels`. Fp2 elements are `(c0, c1)` tuples meaning c0 + c1*u.
"""

from __future__ import annotations

from cuzk.field.constants import FP_BYTES, P_MODULUS

Fp2 = tuple[int, int]

_HALF_P = (P_MODULUS - 1) // 2
# p = 3 (mod 4), so a square root of a quadratic residue a is a^((p+1)/4).
_SQRT_EXP = (P_MODULUS + 1) // 4

# Curve constants: G1 is y^2 = x^3 + 4 over Fp, G2 is y^2 = x^3 + 4(u + 1) over Fp2.
G1_B = 4
G2_B: Fp2 = (4, 4)


def fp_is_canonical(a: int) -> bool:
    """Whether `a` is a reduced representative (0 <= a < p), as every encoding requires."""
    return 0 <= a < P_MODULUS


def fp_from_be(data: bytes) -> int:
    """The integer encoded by 48 big-endian bytes (not reduced: canonicity is the caller's check)."""
    if len(data) != FP_BYTES:
        raise ValueError(f"an Fp element is {FP_BYTES} bytes, got {len(data)}")
    return int.from_bytes(data, "big")


def fp_to_be(a: int) -> bytes:
    """The 48-byte big-endian encoding of a canonical element."""
    return a.to_bytes(FP_BYTES, "big")


def fp_is_lex_largest(y: int) -> bool:
    """zcash "sign" of y: set when y > (p-1)/2, i.e. y is the larger of {y, -y}."""
    return y > _HALF_P


def fp_sqrt(a: int) -> int | None:
    """A square root of `a` in Fp, or None when `a` is not a square."""
    a %= P_MODULUS
    s = pow(a, _SQRT_EXP, P_MODULUS)
    return s if s * s % P_MODULUS == a else None


def fp_inv(a: int) -> int:
    """Multiplicative inverse; raises ZeroDivisionError on 0 (Python's pow does)."""
    return pow(a, -1, P_MODULUS)


def fp2_add(a: Fp2, b: Fp2) -> Fp2:
    return (a[0] + b[0]) % P_MODULUS, (a[1] + b[1]) % P_MODULUS


def fp2_sub(a: Fp2, b: Fp2) -> Fp2:
    return (a[0] - b[0]) % P_MODULUS, (a[1] - b[1]) % P_MODULUS


def fp2_neg(a: Fp2) -> Fp2:
    return -a[0] % P_MODULUS, -a[1] % P_MODULUS


def fp2_mul(a: Fp2, b: Fp2) -> Fp2:
    """(a0 + a1 u)(b0 + b1 u) with u^2 = -1."""
    return (a[0] * b[0] - a[1] * b[1]) % P_MODULUS, (a[0] * b[1] + a[1] * b[0]) % P_MODULUS


def fp2_square(a: Fp2) -> Fp2:
    return fp2_mul(a, a)


def fp2_inv(a: Fp2) -> Fp2:
    """1/(a0 + a1 u) = (a0 - a1 u) / (a0^2 + a1^2); raises ZeroDivisionError on 0."""
    t = fp_inv((a[0] * a[0] + a[1] * a[1]) % P_MODULUS)
    return a[0] * t % P_MODULUS, -a[1] * t % P_MODULUS


def fp2_is_lex_largest(y: Fp2) -> bool:
    """zcash sign rule for Fp2: compare the imaginary part c1, or c0 when c1 is zero."""
    return fp_is_lex_largest(y[1]) if y[1] != 0 else fp_is_lex_largest(y[0])


def fp2_sqrt(a: Fp2) -> Fp2 | None:
    """A square root in Fp2, or None when `a` is not a square.

    Uses the norm: if a = x^2 with x = x0 + x1 u, then |a| = a0^2 + a1^2 = |x|^2 is a square in Fp,
    and x0^2 = (a0 + sqrt|a|)/2 for one of the two signs of sqrt|a|. Slow but simple; tests only.
    """
    a0, a1 = a[0] % P_MODULUS, a[1] % P_MODULUS
    if a1 == 0:
        r = fp_sqrt(a0)
        if r is not None:
            return r, 0
        r = fp_sqrt(-a0 % P_MODULUS)  # a0 = -(r^2) = (r u)^2
        return None if r is None else (0, r)
    n = fp_sqrt((a0 * a0 + a1 * a1) % P_MODULUS)
    if n is None:
        return None
    half = fp_inv(2)
    for s in (n, -n % P_MODULUS):
        x0 = fp_sqrt((a0 + s) * half % P_MODULUS)
        if x0 is None or x0 == 0:
            continue
        x1 = a1 * fp_inv(2 * x0 % P_MODULUS) % P_MODULUS
        if fp2_square((x0, x1)) == (a0, a1):
            return x0, x1
    return None


def g1_on_curve(x: int, y: int) -> bool:
    """Whether the affine (x, y) satisfies y^2 = x^3 + 4."""
    return (y * y - x * x * x - G1_B) % P_MODULUS == 0


def g2_on_curve(x: Fp2, y: Fp2) -> bool:
    """Whether the affine (x, y) satisfies y^2 = x^3 + 4(u + 1)."""
    rhs = fp2_add(fp2_mul(fp2_square(x), x), G2_B)
    return fp2_square(y) == rhs
