// Points of y^2 = x^3 + b over F (fpc_t for G1, fp2_t for G2): affine inputs and XYZZ accumulators.
//
// Affine points (the SRS bases) are (x, y) in Montgomery form; the point at infinity is stored as
// (0, 0), which is not on either curve. XYZZ coordinates (X, Y, ZZ, ZZZ) stand for
// (X/ZZ, Y/ZZZ) with ZZ^3 = ZZZ^2 and ZZ = 0 for infinity; additions need no inversion, and a mixed
// addition (XYZZ + affine) costs 8M + 2S (EFD madd-2008-s), a full one 12M + 2S (add-2008-s), a
// doubling 6M + 3S (dbl-2008-s-1). Every formula handles infinity, P + P and P + (-P), because a
// bucket can receive the same base twice (repeated bases, or one base under two signs).
// The formulas are inlined into each kernel; the field products they use are calls taking values
// (fpc_t, fp2_t), which bounds code size (instruction-cache misses) and compile time. Results leave
// the device in XYZZ form; the host divides by ZZ and ZZZ.
#pragma once
#include "fp2.cuh"

template <class F>
struct affine_t {
    F x, y;
    DEV bool is_inf() const { return x.is_zero() && y.is_zero(); }
    DEV affine_t neg() const { return {x, -y}; }
};

template <class F>
struct xyzz_t {
    F X, Y, ZZ, ZZZ;

    DEV static xyzz_t inf() { return {F::zero(), F::zero(), F::zero(), F::zero()}; }
    DEV bool is_inf() const { return ZZ.is_zero(); }

    DEV void dbl() {
        const F U = Y.dbl();
        const F V = U.sqr();
        const F W = U * V;
        const F S = X * V;
        const F X2 = X.sqr();
        const F M = X2.dbl() + X2;
        X = M.sqr() - S.dbl();
        Y = M * (S - X) - W * Y;
        ZZ = ZZ * V;
        ZZZ = ZZZ * W;
    }

    DEV void add_affine(const affine_t<F>& q) {
        if (q.is_inf()) return;
        if (is_inf()) {
            X = q.x; Y = q.y; ZZ = F::one(); ZZZ = F::one();
            return;
        }
        const F P = q.x * ZZ - X;
        const F R = q.y * ZZZ - Y;
        if (P.is_zero()) {
            if (R.is_zero()) dbl();
            else *this = inf();
            return;
        }
        const F PP = P.sqr();
        const F PPP = P * PP;
        const F Q = X * PP;
        X = R.sqr() - PPP - Q.dbl();
        Y = R * (Q - X) - Y * PPP;
        ZZ = ZZ * PP;
        ZZZ = ZZZ * PPP;
    }

    DEV void add(const xyzz_t& q) {
        if (q.is_inf()) return;
        if (is_inf()) { *this = q; return; }
        const F U1 = X * q.ZZ;
        const F S1 = Y * q.ZZZ;
        const F P = q.X * ZZ - U1;
        const F R = q.Y * ZZZ - S1;
        if (P.is_zero()) {
            if (R.is_zero()) dbl();
            else *this = inf();
            return;
        }
        const F PP = P.sqr();
        const F PPP = P * PP;
        const F Q = U1 * PP;
        X = R.sqr() - PPP - Q.dbl();
        Y = R * (Q - X) - S1 * PPP;
        ZZ = ZZ * q.ZZ * PP;
        ZZZ = ZZZ * q.ZZZ * PPP;
    }
};

typedef affine_t<fpc_t> g1_affine;
typedef xyzz_t<fpc_t> g1_xyzz;
typedef affine_t<fp2_t> g2_affine;
typedef xyzz_t<fp2_t> g2_xyzz;

// Whole-struct loads and stores as 16-byte vectors (the struct must be 16-byte aligned in device
// memory, which every cuzk buffer is: CuPy allocations are 256-byte aligned and strides are
// multiples of 16). A plain struct copy would be split into 4-byte accesses.
// EARLY: each vector through L2 (ld.global.cg: coherent with what this kernel stored earlier, which
// __ldg's read-only path is not) by volatile asm, so that the compiler issues it where it is written:
// nvcc sinks a plain load used on one branch only into that branch, its latency then in the way of the
// work after it (tree_round's second pass).
template <bool EARLY, class T>
DEV T load_vectors(const T* p) {
#ifdef CUZK_HOST_EMU
    return *p;
#else
    static_assert(sizeof(T) % 16 == 0, "struct size must be a multiple of 16 bytes");
    T r;
    const uint4* src = reinterpret_cast<const uint4*>(p);
    uint4* dst = reinterpret_cast<uint4*>(&r);
    UNROLL for (int i = 0; i < (int)(sizeof(T) / 16); ++i) {
        if constexpr (EARLY)
            asm volatile("ld.global.cg.v4.u32 {%0, %1, %2, %3}, [%4];"
                         : "=r"(dst[i].x), "=r"(dst[i].y), "=r"(dst[i].z), "=r"(dst[i].w) : "l"(src + i));
        else
            dst[i] = __ldg(src + i);
    }
    return r;
#endif
}

template <class T>
DEV T load_struct(const T* p) { return load_vectors<false>(p); }

template <class T>
DEV T load_struct_early(const T* p) { return load_vectors<true>(p); }

template <class T>
DEV void store_struct(T* p, const T& v) {
#ifdef CUZK_HOST_EMU
    *p = v;
#else
    static_assert(sizeof(T) % 16 == 0, "struct size must be a multiple of 16 bytes");
    const uint4* src = reinterpret_cast<const uint4*>(&v);
    uint4* dst = reinterpret_cast<uint4*>(p);
    UNROLL for (int i = 0; i < (int)(sizeof(T) / 16); ++i) dst[i] = src[i];
#endif
}
