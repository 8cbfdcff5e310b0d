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

    // CIOS Montgomery product a*b/R, laid out for the SASS multiplier. A PTX pair mad.lo / madc.hi of
    // the same operands into two consecutive limbs becomes one IMAD.WIDE.U32(.X) (a 64-bit product
    // added to an aligned register pair) where separate low and high chains cost an IMAD and an
    // IADD3.X per half product, about 2.2x the instructions (1280 against 568 SASS for Fp).
    // Per limb b_i, the running value t = e + o * 2^32 is kept in two parts so that every product
    // lands on an aligned pair: a_j b_i for even j (and m p_j) go into e at limbs (j, j+1), for odd j
    // into o at limbs (j-1, j), o starting afresh each round. The low limb of t is e[0], so
    // m = e[0] * M0 as usual, and the shift is the merge e = (e >> 32) + o, one add chain.
    // Bound: with a, b < mod and t < 2*mod < 2^(32N) at the start of a round, every partial sum of
    // t + a*b_i + m*mod stays below 2^(32N + 32), so N + 1 limbs of e hold it and no carry leaves them.
    DEV friend mont_t operator*(const mont_t& a, const mont_t& b) {
        u32 e[N + 1], o[N + 1];
        UNROLL for (int i = 0; i <= N; ++i) e[i] = 0;
        UNROLL for (int i = 0; i < N; ++i) {
            const u32 bi = b.v[i];
            e[0] = mad_lo_cc(a.v[0], bi, e[0]);
            e[1] = madc_hi_cc(a.v[0], bi, e[1]);
            UNROLL for (int j = 2; j < N; j += 2) {
                e[j] = madc_lo_cc(a.v[j], bi, e[j]);
                e[j + 1] = madc_hi_cc(a.v[j], bi, e[j + 1]);
            }
            e[N] = addc(e[N], 0);
            UNROLL for (int j = 1; j < N; j += 2) {
                o[j - 1] = mul_lo(a.v[j], bi);
                o[j] = mul_hi(a.v[j], bi);
            }

            const u32 m = e[0] * P::M0;
            e[0] = mad_lo_cc(m, P::mod(0), e[0]);
            e[1] = madc_hi_cc(m, P::mod(0), e[1]);
            UNROLL for (int j = 2; j < N; j += 2) {
                e[j] = madc_lo_cc(m, P::mod(j), e[j]);
                e[j + 1] = madc_hi_cc(m, P::mod(j), e[j + 1]);
            }
            e[N] = addc(e[N], 0);
            o[0] = mad_lo_cc(m, P::mod(1), o[0]);
            o[1] = madc_hi_cc(m, P::mod(1), o[1]);
            UNROLL for (int j = 3; j < N; j += 2) {
                o[j - 1] = madc_lo_cc(m, P::mod(j), o[j - 1]);
                o[j] = madc_hi_cc(m, P::mod(j), o[j]);
            }
            o[N] = addc(0, 0);

            // e[0] is now 0: t / 2^32 = e[1..N] + o[0..N].
            e[0] = add_cc(e[1], o[0]);
            UNROLL for (int j = 1; j < N; ++j) e[j] = addc_cc(e[j + 1], o[j]);
            e[N] = addc(0, o[N]);
        }
        mont_t s, r;
        UNROLL for (int i = 0; i < N; ++i) s.v[i] = e[i];
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
