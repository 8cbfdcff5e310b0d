// The BLS12-381 base field Fp (381 bits, 12 limbs): coordinates of G1 and, through Fp2, of G2.
// Montgomery radix R = 2^384, the same as blst's and the CPU kernels', so limbs agree everywhere.
#pragma once
#include "mont.cuh"

CONSTANT u32 FP_MOD[12] = {0xffffaaab, 0xb9feffff, 0xb153ffff, 0x1eabfffe, 0xf6b0f624, 0x6730d2a0,
                           0xf38512bf, 0x64774b84, 0x434bacd7, 0x4b1ba7b6, 0x397fe69a, 0x1a0111ea};
CONSTANT u32 FP_RR[12] = {0x1c341746, 0xf4df1f34, 0x09d104f1, 0x0a76e6a6, 0x4c95b6d5, 0x8de5476c,
                          0x939d83c0, 0x67eb88a9, 0xb519952d, 0x9a793e85, 0x92cae3aa, 0x11988fe5};
CONSTANT u32 FP_ONE[12] = {0x0002fffd, 0x76090000, 0xc40c0002, 0xebf4000b, 0x53c758ba, 0x5f489857,
                           0x70525745, 0x77ce5853, 0xa256ec6d, 0x5c071a97, 0xfa80e493, 0x15f65ec3};
// 4^BGCD_ROUNDS R^3 mod p: the binary-GCD inversion's closing factor (mont.cuh inv_binary).
CONSTANT u32 FP_BINV[12] = {0x317468b8, 0x0a55fea2, 0x933216c5, 0x9941e988, 0xe6642962, 0x63286e14,
                            0xb0bd8ff3, 0x9968153e, 0x87cd505f, 0x328225eb, 0x80d97151, 0x0c9d232e};
static_assert(BGCD_ROUNDS == 27, "FP_BINV is 4^27 R^3 mod p");

struct fp_params {
    static constexpr int N = 12;
    DEV static constexpr u32 m0() { return 0xfffcfffdu; }
    DEV static u32 mod(int i) { return FP_MOD[i]; }
    DEV static u32 rr(int i) { return FP_RR[i]; }
    DEV static u32 one(int i) { return FP_ONE[i]; }
    DEV static u32 binv(int i) { return FP_BINV[i]; }
};

typedef mont_t<fp_params> fp_t;

// Fp for the G1 curve kernels: the same element, its products out of line (a call taking and returning
// values, operands in registers). Inlined, the ten products of a mixed addition made a loop of ~9,000
// instructions that overflowed the instruction cache: on an H200 the G1 accumulation spent more cycles
// waiting for instructions than issuing them; one called copy took G1 MSM 2^24 from 193.1 to 172.3 ms.
// Squarings (mont_t::sqr, about a fifth fewer multiplier instructions than a product) are a second call.
struct fpc_t;
DEV_NOINLINE fpc_t fpc_mul(fpc_t a, fpc_t b);
DEV_NOINLINE fpc_t fpc_sqr(fpc_t a);

struct fpc_t {
    fp_t x;

    DEV static fpc_t zero() { return {fp_t::zero()}; }
    DEV static fpc_t one() { return {fp_t::one()}; }
    DEV bool is_zero() const { return x.is_zero(); }
    DEV friend fpc_t operator+(const fpc_t& a, const fpc_t& b) { return {a.x + b.x}; }
    DEV friend fpc_t operator-(const fpc_t& a, const fpc_t& b) { return {a.x - b.x}; }
    DEV fpc_t operator-() const { return {-x}; }
    DEV fpc_t dbl() const { return {x.dbl()}; }
    DEV friend fpc_t operator*(const fpc_t& a, const fpc_t& b) { return fpc_mul(a, b); }
    DEV fpc_t sqr() const { return fpc_sqr(*this); }
    DEV fpc_t inv() const { return {x.inv()}; }
};

DEV_NOINLINE fpc_t fpc_mul(fpc_t a, fpc_t b) { return {a.x * b.x}; }
DEV_NOINLINE fpc_t fpc_sqr(fpc_t a) { return {a.x.sqr()}; }
