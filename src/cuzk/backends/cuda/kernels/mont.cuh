// Montgomery arithmetic modulo an odd prime of N 32-bit limbs (little-endian), R = 2^(32N).
// Elements are kept fully reduced (< modulus), so equality is limb equality and zero is all-zero.
// The modulus must be below 2^(32N-1): sums of two elements then never carry out of N limbs.
// P supplies N, m0() (= -mod^-1 mod 2^32) and the constant limbs mod(i), rr(i) (R^2), one(i) (R); a P
// that also supplies binv(i) (see inv_binary) gets the binary-GCD inversion from inv().
#pragma once
#include "common.cuh"

// Leading zero bits of a word (32 for 0).
DEV u32 mont_clz(u32 x) {
#ifdef CUZK_HOST_EMU
    return x ? (u32)__builtin_clz(x) : 32u;
#else
    return (u32)__clz(x);
#endif
}

// trait<P>::value: whether P supplies the static member `member` (detected, so that fields without it
// need no change).
#define MONT_HAS_MEMBER(trait, member)                                      \
    template <class P>                                                      \
    struct trait {                                                          \
        template <class Q>                                                  \
        static char probe(decltype(&Q::member));                            \
        template <class Q>                                                  \
        static long probe(...);                                             \
        static constexpr bool value = sizeof(probe<P>(nullptr)) == 1;       \
    }
// P supplies binv(i), the closing constant of inv_binary: fields without it keep Fermat's inversion.
MONT_HAS_MEMBER(has_binary_inv, binv);
// P's modulus has the low limbs mod(0) = 1 and mod(1) = 2^32 - 1 (P supplies sparse_low(), a marker;
// BLS12-381's Fr does): operator* then folds them into the round's other products.
MONT_HAS_MEMBER(has_sparse_low, sparse_low);

// Rounds of the binary-GCD inversion: each runs BGCD_STEPS steps of the binary GCD on 62-bit
// approximations of (a, b), then applies them to the full values. The exact algorithm needs at most
// 2 len(mod) - 1 steps (761 for Fp, 26 rounds); the loop runs one round more. Rounds after a reaches
// 0 leave b alone and divide v by 4, which the closing constant accounts for.
#define BGCD_STEPS 30
#define BGCD_ROUNDS 27

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

    // t[j - D], t[j - D + 1] += m mod(j) for j = J0, J0 + 2, ... < N in one carry chain (started here
    // when FRESH, else continuing the caller's), its carry out added to t[N]: operator*'s reduction,
    // the even j into e (D = 0), the odd j into o (D = 1).
    template <int J0, int D, bool FRESH>
    DEV static void add_mod_products(u32 (&t)[N + 1], u32 m) {
        UNROLL for (int j = J0; j < N; j += 2) {
            if (FRESH && j == J0) t[j - D] = mad_lo_cc(m, P::mod(j), t[j - D]);
            else t[j - D] = madc_lo_cc(m, P::mod(j), t[j - D]);
            t[j - D + 1] = madc_hi_cc(m, P::mod(j), t[j - D + 1]);
        }
        t[N] = addc(t[N], 0);
    }

    // CIOS Montgomery product a*b/R, laid out for the SASS multiplier. A PTX pair mad.lo / madc.hi of
    // the same operands into two consecutive limbs becomes one IMAD.WIDE.U32(.X) (a 64-bit product
    // added to an aligned register pair) where separate low and high chains cost an IMAD and an
    // IADD3.X per half product, about 2.2x the instructions (1280 against 568 SASS for Fp).
    // Per limb b_i, the running value t = e + o * 2^32 is kept in two parts so that every product
    // lands on an aligned pair: a_j b_i for even j (and m p_j) go into e at limbs (j, j+1), for odd j
    // into o at limbs (j-1, j), o starting afresh each round. The low limb of t is e[0], so
    // m = e[0] * m0 as usual, and the shift is the merge e = (e >> 32) + o, one add chain.
    // For Fr (has_sparse_low) the round has no product by the modulus's two low limbs: they enter
    // a_1 b_i's product as its addend and carry in, which is faster in the NTT passes on an H100
    // (benchmarks/results/cuda-fr-fold-ab-h100-2026-12-07.json). Variants measured slower and not kept:
    // benchmarks/HISTORY.md, "Montgomery product variants".
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
            // One 64-bit product (PTX mul.wide, one IMAD.WIDE.U32): written as a mul.lo / mul.hi pair,
            // ptxas kept them apart in the inlined Fr products (an IMAD and an IMAD.HI each).
            constexpr bool sparse = has_sparse_low<P>::value;
            UNROLL for (int j = sparse ? 3 : 1; j < N; j += 2) {
                const u64 p = (u64)a.v[j] * bi;
                o[j - 1] = (u32)p;
                o[j] = (u32)(p >> 32);
            }
            o[N] = 0;

            const u32 m = e[0] * P::m0();
            if constexpr (sparse) {
                // mod(0) = 1, mod(1) = 2^32 - 1: m (mod(0) + mod(1) 2^32) = m + (m 2^32 - m) 2^32, where
                // e[0] + m = c 2^32 with c = [e[0] != 0] (m = -e[0]) and m 2^32 - m = e[0] + (m - c) 2^32.
                // Both enter a_1 b_i's product as its addend and carry in, so no product by the low
                // limbs remains. m stays e[0] * m0 from the constant bank: written as a negation, it
                // made ptxas split the other reduction products into low and high halves. Two chains,
                // neither mixing additions and subtractions (see common.cuh's sub_cc): 0 - e[0] borrows
                // c, which m - 0 - borrow takes away; e[0] + m carries c into the product.
                sub_cc(0, e[0]);
                const u32 mh = subc(m, 0);  // m - c
                add_cc(e[0], m);
                o[0] = madc_lo_cc(a.v[1], bi, e[0]);
                o[1] = madc_hi_cc(a.v[1], bi, mh);
                add_mod_products<3, 1, false>(o, m);
                add_mod_products<2, 0, true>(e, m);
            } else {
                add_mod_products<0, 0, true>(e, m);
                add_mod_products<1, 1, true>(o, m);
            }

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

    // a^2 / R with each cross product a_i a_j (i < j) formed once: N(N - 1)/2 + N word products instead
    // of N^2 before the reduction (78 against 144 for Fp), the reduction's N^2 unchanged (Fp in the curve
    // unit: 220 IMAD.WIDE and 461-467 SASS instructions against 276 and 511-512 for a product). As in
    // operator*, every product lands on an aligned register pair through PTX mad.lo / madc.hi pairs:
    // - Cross products by diagonals d = j - i: a_i a_(i+d) sits at limbs (2i + d, 2i + d + 1), steps of 2
    //   apart, so a diagonal is one chain into E (pairs at even limbs, d even) or O (odd limbs, d odd).
    //   Diagonals are added longest last: each covers the limbs of the shorter ones of its class, so its
    //   carry lands on a limb not yet written. Then s = 2 (E + O) + sum a_i^2 2^(64 i), into E.
    // - Reduction in place (no shift as in operator*: here the compiler fuses the shifted merge into
    //   misaligned pairs and moves every limb): round i adds m mod 2^(32 i), m = (limb i of the total)
    //   * M0, its products m mod_j at limbs (i + j, i + j + 1) into E when i + j is even, into O (zeroed
    //   again) when odd: two chains per round. A chain's carry out lands on a limb >= N and is kept
    //   apart in C; the total's low limbs (E + O + the running carry cin) become zero one per round.
    // Bound: s < mod^2, so (s + sum m_i mod 2^(32 i)) / 2^(32 N) < mod^2 / 2^(32N) + mod < 2 mod (mod <
    // 2^(32N - 3)): one conditional subtraction.
    DEV mont_t sqr() const {
        const u32* a = this->v;
        u32 E[2 * N], O[2 * N];
        UNROLL for (int k = 0; k < 2 * N; ++k) E[k] = O[k] = 0;
        // last[c]: the carry (0 or 1) ending the class's previous diagonal. Added shifted (always 0),
        // it makes a diagonal wait for that one: ptxas would otherwise overlap every diagonal of a
        // class, one carry predicate each, and spill the carries (see the reduction below).
        u32 last[2] = {0, 0};
        UNROLL for (int d = N - 1; d >= 1; --d) {
            u32* T = (d & 1) ? O : E;
            const u32 a0 = a[0] + (last[d & 1] >> 31);
            T[d] = mad_lo_cc(a0, a[d], T[d]);
            T[d + 1] = madc_hi_cc(a0, a[d], T[d + 1]);
            UNROLL for (int i = 1; i + d < N; ++i) {
                T[2 * i + d] = madc_lo_cc(a[i], a[i + d], T[2 * i + d]);
                T[2 * i + d + 1] = madc_hi_cc(a[i], a[i + d], T[2 * i + d + 1]);
            }
            T[2 * N - d] = addc(T[2 * N - d], 0);
            last[d & 1] = T[2 * N - d];
        }
        // E + O (below a^2 / 2 < 2^(64N - 1)), doubled by a one-bit shift, plus the squares.
        E[1] = add_cc(E[1], O[1]);
        UNROLL for (int k = 2; k < 2 * N; ++k) E[k] = addc_cc(E[k], O[k]);
        UNROLL for (int k = 2 * N - 1; k >= 1; --k) E[k] = (E[k] << 1) | (E[k - 1] >> 31);
        E[0] = 0;  // no cross product reaches limb 0
        E[0] = mad_lo_cc(a[0], a[0], E[0]);
        E[1] = madc_hi_cc(a[0], a[0], E[1]);
        UNROLL for (int i = 1; i < N; ++i) {
            E[2 * i] = madc_lo_cc(a[i], a[i], E[2 * i]);
            E[2 * i + 1] = madc_hi_cc(a[i], a[i], E[2 * i + 1]);
        }

        u32 C[N + 1];  // carries at limbs N..2N (each at most 2; the one at 2N is 0: the total is < 2^(64N))
        UNROLL for (int k = 0; k < 2 * N; ++k) O[k] = 0;
        UNROLL for (int k = 0; k <= N; ++k) C[k] = 0;
        u32 cin = 0;
        UNROLL for (int i = 0; i < N; ++i) {
            const u32 m = (E[i] + O[i] + cin) * P::m0();
            u32* X = (i & 1) ? O : E;  // pairs at limbs i + j, j even
            u32* Y = (i & 1) ? E : O;  // j odd
            X[i] = mad_lo_cc(m, P::mod(0), X[i]);
            X[i + 1] = madc_hi_cc(m, P::mod(0), X[i + 1]);
            UNROLL for (int j = 2; j < N; j += 2) {
                X[i + j] = madc_lo_cc(m, P::mod(j), X[i + j]);
                X[i + j + 1] = madc_hi_cc(m, P::mod(j), X[i + j + 1]);
            }
            C[i] = addc(C[i], 0);
            Y[i + 1] = mad_lo_cc(m, P::mod(1), Y[i + 1]);
            Y[i + 2] = madc_hi_cc(m, P::mod(1), Y[i + 2]);
            UNROLL for (int j = 3; j < N; j += 2) {
                Y[i + j] = madc_lo_cc(m, P::mod(j), Y[i + j]);
                Y[i + j + 1] = madc_hi_cc(m, P::mod(j), Y[i + j + 1]);
            }
            C[i + 1] = addc(C[i + 1], 0);
            // Limb i of the total is now 0 mod 2^32; what it carries (0, 1 or 2) goes to limb i + 1. The
            // C terms are always 0 (C <= 2): they make round i + 1 wait for both chains of round i, which
            // ptxas would otherwise overlap with the next rounds' and run out of carry predicates (the
            // spilled carries cost more than the whole saving).
            cin = (u32)(((u64)E[i] + O[i] + cin) >> 32) + (C[i] >> 31) + (C[i + 1] >> 31);
        }
        mont_t s, r;
        C[0] += cin;
        s.v[0] = add_cc(E[N], O[N]);
        UNROLL for (int i = 1; i < N; ++i) s.v[i] = addc_cc(E[N + i], O[N + i]);
        s.v[0] = add_cc(s.v[0], C[0]);
        UNROLL for (int i = 1; i < N; ++i) s.v[i] = addc_cc(s.v[i], C[i]);
        r.v[0] = sub_cc(s.v[0], P::mod(0));
        UNROLL for (int i = 1; i < N; ++i) r.v[i] = subc_cc(s.v[i], P::mod(i));
        const u32 borrow = subc(0, 0);
        UNROLL for (int i = 0; i < N; ++i) r.v[i] = (s.v[i] & borrow) | (r.v[i] & ~borrow);
        return r;
    }

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

    // 1/x (0 maps to 0): the binary GCD when P supplies its constant (inv_binary), else Fermat.
    DEV mont_t inv() const {
        if constexpr (has_binary_inv<P>::value) return inv_binary(*this);
        else return inv_fermat();
    }

    // 1/x by the binary extended GCD on approximations (T. Pornin, "Optimized Binary GCD for Modular
    // Inversion", 2020), about a tenth of Fermat's cost (~570 products for Fp): the batch-affine tree
    // rounds of the MSM pay one inversion per thread and round. Branch-free (every lane of a warp runs
    // the same instructions), fixed round count. x is in Montgomery form (X = x R); the GCD runs on
    // the integer X with a = X, b = mod, u = 1, v = 0, keeping a = X u C and b = X v C (mod `mod`)
    // for a common factor C. A round runs BGCD_STEPS binary-GCD steps on 62-bit values A, B (the low
    // 30 bits of a, b exact, above them the 32 bits from the top of the longer of the two), recording
    // them as factors with a' 2^30 = f0 a + g0 b, b' 2^30 = f1 a + g1 b (|f| + |g| <= 2^30), then
    // applies them to the full a, b (negating a result that came out negative, and its factors: the
    // approximations can misjudge a < b) and to u, v as u' = (f0 u + g0 v) / 2^32 (one Montgomery
    // word step), so C gains a factor 4 per round. At the end a = 0, b = gcd = 1 = X v 4^ROUNDS, and
    // 1/x in Montgomery form, X^-1 R^2, is v * binv / R with binv = 4^ROUNDS R^3 mod `mod`.
    // x comes by value: as `this` it would need an address in the caller, and a caller that updates x
    // in a loop before inverting it (the MSM's tree rounds) would keep x in local memory, stored at
    // every update.
    DEV_NOINLINE static mont_t inv_binary(mont_t x) {
        u32 a[N], b[N], u[N], v[N];
        UNROLL for (int i = 0; i < N; ++i) {
            a[i] = x.v[i];
            b[i] = P::mod(i);
            u[i] = i == 0 ? 1u : 0u;
            v[i] = 0;
        }
        for (int round = 0; round < BGCD_ROUNDS; ++round) {
            u64 A, B;
            bgcd_approx(a, b, A, B);
            int f0 = 1, g0 = 0, f1 = 0, g1 = 1;
            for (int j = 0; j < BGCD_STEPS; ++j) {
                // a odd: (a, b) = (b, a) when a < b, then a -= b; always a /= 2 (b's factors double).
                const bool odd = (A & 1u) != 0;
                const bool swap = odd && A < B;
                const u64 A1 = swap ? B : A, B1 = swap ? A : B;
                const int f0s = swap ? f1 : f0, f1s = swap ? f0 : f1;
                const int g0s = swap ? g1 : g0, g1s = swap ? g0 : g1;
                A = (A1 - (odd ? B1 : 0ull)) >> 1;
                B = B1;
                f0 = f0s - (odd ? f1s : 0);
                g0 = g0s - (odd ? g1s : 0);
                f1 = f1s + f1s;
                g1 = g1s + g1s;
            }
            u32 a2[N], b2[N];
            const bool neg_a = bgcd_combine(a, b, f0, g0, a2);
            const bool neg_b = bgcd_combine(a, b, f1, g1, b2);
            if (neg_a) { f0 = -f0; g0 = -g0; }
            if (neg_b) { f1 = -f1; g1 = -g1; }
            u32 u2[N], v2[N];
            bgcd_combine_mod(u, v, f0, g0, u2);
            bgcd_combine_mod(u, v, f1, g1, v2);
            UNROLL for (int i = 0; i < N; ++i) {
                a[i] = a2[i];
                b[i] = b2[i];
                u[i] = u2[i];
                v[i] = v2[i];
            }
        }
        mont_t r, k;
        UNROLL for (int i = 0; i < N; ++i) {
            r.v[i] = v[i];
            k.v[i] = P::binv(i);
        }
        return r * k;
    }

    // x^(mod - 2) = 1/x (Fermat; 0 maps to 0). Left-to-right square and multiply.
    DEV_NOINLINE mont_t inv_fermat() const {
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

  private:
    // The GCD's 62-bit approximations of a and b: with n = max(len(a | b), 62), the bits [n - 32, n)
    // of each above its low 30 bits (equal to the values themselves when both are below 2^62).
    DEV static void bgcd_approx(const u32* a, const u32* b, u64& A, u64& B) {
        u32 top = 0, hi = 0;
        UNROLL for (int i = 0; i < N; ++i) {
            const u32 w = a[i] | b[i];
            if (w) { top = w; hi = (u32)i; }
        }
        const u32 len = top ? 32 * hi + 32 - mont_clz(top) : 0;
        const u32 s = (len > 62 ? len : 62) - 32;  // a >> s and b >> s are below 2^32
        const u32 q = s >> 5, r = s & 31;
        u32 alo = 0, ahi = 0, blo = 0, bhi = 0;
        UNROLL for (int i = 0; i < N; ++i) {
            if ((u32)i == q) { alo = a[i]; blo = b[i]; }
            if ((u32)i == q + 1) { ahi = a[i]; bhi = b[i]; }
        }
        const u32 atop = (u32)((((u64)ahi << 32) | alo) >> r);
        const u32 btop = (u32)((((u64)bhi << 32) | blo) >> r);
        A = ((u64)atop << 30) | (a[0] & 0x3fffffffu);
        B = ((u64)btop << 30) | (b[0] & 0x3fffffffu);
    }

    // |f| x as N + 1 limbs, negated (two's complement) when f < 0.
    DEV static void bgcd_mul_signed(const u32* x, int f, u32* t) {
        const u32 af = f < 0 ? 0u - (u32)f : (u32)f;
        const u32 mask = f < 0 ? 0xffffffffu : 0u;
        u32 hi[N];
        UNROLL for (int i = 0; i < N; ++i) {
            t[i] = mul_lo(x[i], af);
            hi[i] = mul_hi(x[i], af);
        }
        t[1] = add_cc(t[1], hi[0]);
        UNROLL for (int i = 2; i < N; ++i) t[i] = addc_cc(t[i], hi[i - 1]);
        t[N] = addc(hi[N - 1], 0);
        UNROLL for (int i = 0; i <= N; ++i) t[i] ^= mask;
        t[0] = add_cc(t[0], mask & 1u);
        UNROLL for (int i = 1; i <= N; ++i) t[i] = addc_cc(t[i], 0);
    }

    // r = |f x + g y| / 2^30 (exact: the low 30 bits are zero); returns whether f x + g y < 0.
    DEV static bool bgcd_combine(const u32* x, const u32* y, int f, int g, u32* r) {
        u32 tx[N + 1], ty[N + 1];
        bgcd_mul_signed(x, f, tx);
        bgcd_mul_signed(y, g, ty);
        tx[0] = add_cc(tx[0], ty[0]);
        UNROLL for (int i = 1; i <= N; ++i) tx[i] = addc_cc(tx[i], ty[i]);
        const u32 mask = (u32)((int)tx[N] >> 31);
        // |t| = (t ^ mask) + (mask & 1), then the shift.
        UNROLL for (int i = 0; i <= N; ++i) tx[i] ^= mask;
        tx[0] = add_cc(tx[0], mask & 1u);
        UNROLL for (int i = 1; i <= N; ++i) tx[i] = addc_cc(tx[i], 0);
        UNROLL for (int i = 0; i < N; ++i) r[i] = (tx[i] >> 30) | (tx[i + 1] << 2);
        return mask != 0;
    }

    // |f| (x or mod - x when f < 0) as N + 1 limbs (x < mod, |f| <= 2^30).
    DEV static void bgcd_mul_mod(const u32* x, int f, u32* t) {
        const u32 af = f < 0 ? 0u - (u32)f : (u32)f;
        u32 nx[N], s[N];
        nx[0] = sub_cc(P::mod(0), x[0]);
        UNROLL for (int i = 1; i < N; ++i) nx[i] = subc_cc(P::mod(i), x[i]);
        UNROLL for (int i = 0; i < N; ++i) s[i] = f < 0 ? nx[i] : x[i];
        u32 hi[N];
        UNROLL for (int i = 0; i < N; ++i) {
            t[i] = mul_lo(s[i], af);
            hi[i] = mul_hi(s[i], af);
        }
        t[1] = add_cc(t[1], hi[0]);
        UNROLL for (int i = 2; i < N; ++i) t[i] = addc_cc(t[i], hi[i - 1]);
        t[N] = addc(hi[N - 1], 0);
    }

    // r = (f x + g y) / 2^32 mod `mod` (x, y < mod; |f| + |g| <= 2^30), fully reduced.
    DEV static void bgcd_combine_mod(const u32* x, const u32* y, int f, int g, u32* r) {
        u32 t[N + 1], ty[N + 1];
        bgcd_mul_mod(x, f, t);
        bgcd_mul_mod(y, g, ty);
        t[0] = add_cc(t[0], ty[0]);
        UNROLL for (int i = 1; i <= N; ++i) t[i] = addc_cc(t[i], ty[i]);
        // t <= 2^30 mod; adding m * mod (m < 2^32) zeroes the low word and stays below 2^(32N + 32).
        const u32 m = t[0] * P::m0();
        u32 hi[N];
        UNROLL for (int i = 0; i < N; ++i) hi[i] = mul_hi(m, P::mod(i));
        t[0] = mad_lo_cc(m, P::mod(0), t[0]);
        UNROLL for (int i = 1; i < N; ++i) t[i] = madc_lo_cc(m, P::mod(i), t[i]);
        t[N] = addc(t[N], 0);
        t[1] = add_cc(t[1], hi[0]);
        UNROLL for (int i = 2; i <= N; ++i) t[i] = addc_cc(t[i], hi[i - 1]);
        // (t + m mod) / 2^32 < 2^30 mod / 2^32 + mod < 2 mod: one conditional subtraction.
        u32 d[N];
        d[0] = sub_cc(t[1], P::mod(0));
        UNROLL for (int i = 1; i < N; ++i) d[i] = subc_cc(t[i + 1], P::mod(i));
        const u32 borrow = subc(0, 0);
        UNROLL for (int i = 0; i < N; ++i) r[i] = borrow ? t[i + 1] : d[i];
    }
};
