// Montgomery arithmetic modulo an odd prime of N 32-bit limbs (little-endian), R = 2^(32N).
// Elements are kept fully reduced (< modulus), so equality is limb equality and zero is all-zero.
// The modulus must be below 2^(32N-1): sums of two elements then never carry out of N limbs.
// P supplies N, M0 (= -mod^-1 mod 2^32) and the constant limbs mod(i), rr(i) (R^2), one(i) (R).
#pragma once
#include "common.cuh"

template <class P>
struct mont_t {
    static constexpr int N = P::N;
    u32 v[N];

    DEV static mont_t zero() { mont_t r; UNROLL for (int i = 0; i < N; ++i) r.v[i] = 0; return r; }
    DEV static mont_t one() { mont_t r; UNROLL for (int i = 0; i < N; ++i) r.v[i] = P::one(i); return r; }

    DEV bool is_zero() const {
        u32 acc = 0;
        UNROLL for (int i = 0; i < N; ++i) acc |= v[i];
        return acc == 0;
    }
    DEV bool operator==(const mont_t& b) const {
        u32 acc = 0;
        UNROLL for (int i = 0; i < N; ++i) acc |= v[i] ^ b.v[i];
        return acc == 0;
    }

    // a + b: one add chain, then a trial subtraction of the modulus kept when it does not borrow.
    DEV friend mont_t operator+(const mont_t& a, const mont_t& b) {
        mont_t s, t;
        s.v[0] = add_cc(a.v[0], b.v[0]);
        UNROLL for (int i = 1; i < N; ++i) s.v[i] = addc_cc(a.v[i], b.v[i]);
        t.v[0] = sub_cc(s.v[0], P::mod(0));
        UNROLL for (int i = 1; i < N; ++i) t.v[i] = subc_cc(s.v[i], P::mod(i));
        const u32 borrow = subc(0, 0);  // 0xffffffff when s < mod
        UNROLL for (int i = 0; i < N; ++i) t.v[i] = (s.v[i] & borrow) | (t.v[i] & ~borrow);
        return t;
    }

    // a - b: a subtract chain, then the modulus added back under the borrow mask.
    DEV friend mont_t operator-(const mont_t& a, const mont_t& b) {
        mont_t d;
        d.v[0] = sub_cc(a.v[0], b.v[0]);
        UNROLL for (int i = 1; i < N; ++i) d.v[i] = subc_cc(a.v[i], b.v[i]);
        const u32 borrow = subc(0, 0);
        d.v[0] = add_cc(d.v[0], P::mod(0) & borrow);
        UNROLL for (int i = 1; i < N; ++i) d.v[i] = addc_cc(d.v[i], P::mod(i) & borrow);
        return d;
    }

    DEV mont_t operator-() const { return zero() - *this; }
    DEV mont_t dbl() const { return *this + *this; }

    // CIOS Montgomery product a*b/R. Per limb of b: t += a*b_i as a low-half chain and a high-half
    // chain (mad.lo / mad.hi with carries), then t += m*mod the same way and shift one limb.
    // Invariant: t < 2*mod after each round, so N + 2 limbs never overflow.
    DEV friend mont_t operator*(const mont_t& a, const mont_t& b) {
        u32 t[N + 2];
        UNROLL for (int i = 0; i < N + 2; ++i) t[i] = 0;
        UNROLL for (int i = 0; i < N; ++i) {
            const u32 bi = b.v[i];
            t[0] = mad_lo_cc(a.v[0], bi, t[0]);
            UNROLL for (int j = 1; j < N; ++j) t[j] = madc_lo_cc(a.v[j], bi, t[j]);
            t[N] = addc_cc(t[N], 0);
            t[N + 1] = addc(t[N + 1], 0);
            t[1] = mad_hi_cc(a.v[0], bi, t[1]);
            UNROLL for (int j = 1; j < N; ++j) t[j + 1] = madc_hi_cc(a.v[j], bi, t[j + 1]);
            t[N + 1] = addc(t[N + 1], 0);

            const u32 m = t[0] * P::M0;
            t[0] = mad_lo_cc(m, P::mod(0), t[0]);
            UNROLL for (int j = 1; j < N; ++j) t[j] = madc_lo_cc(m, P::mod(j), t[j]);
            t[N] = addc_cc(t[N], 0);
            t[N + 1] = addc(t[N + 1], 0);
            t[1] = mad_hi_cc(m, P::mod(0), t[1]);
            UNROLL for (int j = 1; j < N; ++j) t[j + 1] = madc_hi_cc(m, P::mod(j), t[j + 1]);
            t[N + 1] = addc(t[N + 1], 0);

            UNROLL for (int j = 0; j <= N; ++j) t[j] = t[j + 1];
            t[N + 1] = 0;
        }
        mont_t s, r;
        UNROLL for (int i = 0; i < N; ++i) s.v[i] = t[i];
        r.v[0] = sub_cc(s.v[0], P::mod(0));
        UNROLL for (int i = 1; i < N; ++i) r.v[i] = subc_cc(s.v[i], P::mod(i));
        const u32 borrow = subc(0, 0);
        UNROLL for (int i = 0; i < N; ++i) r.v[i] = (s.v[i] & borrow) | (r.v[i] & ~borrow);
        return r;
    }

    DEV mont_t sqr() const { return *this * *this; }

    // Canonical limbs -> Montgomery form (x * R^2 / R) and back (x * 1 / R).
    DEV mont_t to_mont() const {
        mont_t rr;
        UNROLL for (int i = 0; i < N; ++i) rr.v[i] = P::rr(i);
        return *this * rr;
    }
    DEV mont_t from_mont() const {
        mont_t one_raw = zero();
        one_raw.v[0] = 1;
        return *this * one_raw;
    }

    // x^(mod - 2) = 1/x (Fermat; 0 maps to 0). Left-to-right square and multiply: only used for a
    // handful of elements per MSM (final affine conversion), never in bulk.
    DEV_NOINLINE mont_t inv() const {
        u32 e[N];
        e[0] = sub_cc(P::mod(0), 2);
        UNROLL for (int i = 1; i < N; ++i) e[i] = subc_cc(P::mod(i), 0);
        mont_t r = one();
        for (int i = N - 1; i >= 0; --i) {
            for (int b = 31; b >= 0; --b) {
                r = r.sqr();
                if ((e[i] >> b) & 1u) r = r * *this;
            }
        }
        return r;
    }
};
