// Fp2 = Fp[u]/(u^2 + 1), the field of G2 coordinates; c0 + c1*u, stored c0 then c1 (Montgomery).
// It offers the same operations as fp_t so the curve code is one template for G1 and G2.
#pragma once
#include "fp.cuh"

// The Fp2 products are calls (not inlined: inlining them into every curve kernel multiplies code size
// and compile time) that take and return values, not references. A call with reference arguments makes
// the caller store each operand to its stack (local memory) for the callee to load; by value, the
// operands travel in registers (H200, G2 MSM 2^22, side by side: 142.8 ms against 175.5 ms by reference).
// The inverse too: as a member call, `this` needs an address, and the G2 tree round's running product,
// updated before the inversion, would live in local memory, stored after every product of the first pass.
struct fp2_t;
DEV_NOINLINE fp2_t fp2_mul(fp2_t a, fp2_t b);
DEV_NOINLINE fp2_t fp2_sqr(fp2_t a);
DEV_NOINLINE fp2_t fp2_inv(fp2_t a);

struct fp2_t {
    fp_t c0, c1;

    DEV static fp2_t zero() { return {fp_t::zero(), fp_t::zero()}; }
    DEV static fp2_t one() { return {fp_t::one(), fp_t::zero()}; }
    DEV bool is_zero() const { return c0.is_zero() && c1.is_zero(); }
    DEV bool operator==(const fp2_t& b) const { return c0 == b.c0 && c1 == b.c1; }
    DEV friend fp2_t operator+(const fp2_t& a, const fp2_t& b) { return {a.c0 + b.c0, a.c1 + b.c1}; }
    DEV friend fp2_t operator-(const fp2_t& a, const fp2_t& b) { return {a.c0 - b.c0, a.c1 - b.c1}; }
    DEV fp2_t operator-() const { return {-c0, -c1}; }
    DEV fp2_t dbl() const { return {c0.dbl(), c1.dbl()}; }
    DEV friend fp2_t operator*(const fp2_t& a, const fp2_t& b) { return fp2_mul(a, b); }
    DEV fp2_t sqr() const { return fp2_sqr(*this); }
    DEV fp2_t inv() const { return fp2_inv(*this); }
};

// Karatsuba: three Fp products.
DEV_NOINLINE fp2_t fp2_mul(fp2_t a, fp2_t b) {
    const fp_t t0 = a.c0 * b.c0;
    const fp_t t1 = a.c1 * b.c1;
    const fp_t t2 = (a.c0 + a.c1) * (b.c0 + b.c1);
    return {t0 - t1, t2 - t0 - t1};
}
// (c0 + c1 u)^2 = (c0 + c1)(c0 - c1) + 2 c0 c1 u: two Fp products.
DEV_NOINLINE fp2_t fp2_sqr(fp2_t a) {
    const fp_t t = a.c0 * a.c1;
    return {(a.c0 + a.c1) * (a.c0 - a.c1), t.dbl()};
}
// 1/(c0 + c1 u) = (c0 - c1 u) / (c0^2 + c1^2).
DEV_NOINLINE fp2_t fp2_inv(fp2_t a) {
    const fp_t d = (a.c0.sqr() + a.c1.sqr()).inv();
    return {a.c0 * d, -(a.c1 * d)};
}
