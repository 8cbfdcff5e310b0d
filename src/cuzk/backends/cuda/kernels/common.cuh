// Shared definitions of cuzk's CUDA kernels: integer types, the PTX carry-chain primitives and the
// few macros that let the same source build for the GPU (NVRTC / nvcc) and, with CUZK_HOST_EMU
// defined, as plain C++ on a CPU. The host build runs every kernel sequentially (one thread after
// another, or one phase of a block after another) so the arithmetic and the indexing can be
// checked against the CPU prover on a machine without a GPU.
#pragma once

typedef unsigned char u8;
typedef unsigned int u32;
typedef unsigned long long u64;

#ifdef CUZK_HOST_EMU

#include <cstring>

struct emu_dim3 { u32 x, y, z; };
static emu_dim3 threadIdx, blockIdx, blockDim, gridDim;
static unsigned char* emu_smem;
static u32 emu_cf;  // the emulated carry flag (CC.CF)

#define DEV inline
#define DEV_NOINLINE inline
#define KERNEL extern "C" void
#define BLOCK_KERNEL extern "C" void
#define LAUNCH_BOUNDS(x)
#define LAUNCH_BOUNDS2(x, b)
#define CONSTANT static const
// A block kernel is called once per block; each phase loops over the block's threads.
#define BLOCK_THREADS(t) for (u32 t = 0; t < blockDim.x; ++t)
#define SYNC()
#define DYN_SMEM(T, name) T* name = reinterpret_cast<T*>(emu_smem)
#define UNROLL

DEV u32 atomicAdd(u32* p, u32 v) { u32 old = *p; *p = old + v; return old; }
DEV u32 brev32(u32 x) {
    u32 r = 0;
    for (int i = 0; i < 32; ++i) r |= ((x >> i) & 1u) << (31 - i);
    return r;
}

DEV u32 add_cc(u32 a, u32 b) { u64 s = (u64)a + b; emu_cf = (u32)(s >> 32); return (u32)s; }
DEV u32 addc_cc(u32 a, u32 b) { u64 s = (u64)a + b + emu_cf; emu_cf = (u32)(s >> 32); return (u32)s; }
DEV u32 addc(u32 a, u32 b) { return a + b + emu_cf; }
// The flag as the GPU keeps it: an adder's carry out, a subtraction being a + ~b + 1 (sub.cc) or
// a + ~b + flag (subc), so that after a subtraction the flag is 1 when it did NOT borrow. A chain of
// subtractions reads the same either way; an addc after a sub.cc adds that inverted borrow on the GPU,
// and so it does here.
DEV u32 sub_cc(u32 a, u32 b) { u64 s = (u64)a + (u32)~b + 1u; emu_cf = (u32)(s >> 32); return (u32)s; }
DEV u32 subc_cc(u32 a, u32 b) { u64 s = (u64)a + (u32)~b + emu_cf; emu_cf = (u32)(s >> 32); return (u32)s; }
DEV u32 subc(u32 a, u32 b) { return a + ~b + emu_cf; }
DEV u32 mad_lo_cc(u32 a, u32 b, u32 c) { return add_cc((u32)((u64)a * b), c); }
DEV u32 madc_lo_cc(u32 a, u32 b, u32 c) { return addc_cc((u32)((u64)a * b), c); }
DEV u32 mad_hi_cc(u32 a, u32 b, u32 c) { return add_cc((u32)(((u64)a * b) >> 32), c); }
DEV u32 madc_hi_cc(u32 a, u32 b, u32 c) { return addc_cc((u32)(((u64)a * b) >> 32), c); }
DEV u32 mul_lo(u32 a, u32 b) { return a * b; }
DEV u32 mul_hi(u32 a, u32 b) { return (u32)(((u64)a * b) >> 32); }

// cp.async emulation: the copy happens at once, so waiting is a no-op.
DEV void cp_async16(void* smem_dst, const void* gmem_src) { memcpy(smem_dst, gmem_src, 16); }
DEV void cp_async_wait_all() {}

#else  // CUDA (NVRTC or nvcc)

#define DEV __device__ __forceinline__
// Large routines (Fp2 products, inversions) are called, not inlined: inlining them
// into every caller multiplies code size and compile time for little speed.
#define DEV_NOINLINE __device__ __noinline__
#define KERNEL extern "C" __global__ void
#define BLOCK_KERNEL extern "C" __global__ void
#define LAUNCH_BOUNDS(x) __launch_bounds__(x)
#define LAUNCH_BOUNDS2(x, b) __launch_bounds__(x, b)
#define CONSTANT __constant__
#define BLOCK_THREADS(t) for (u32 t = threadIdx.x, t##_once = 1; t##_once; t##_once = 0)
#define SYNC() __syncthreads()
#define DYN_SMEM(T, name) T* name = reinterpret_cast<T*>(cuzk_dyn_smem)
#define UNROLL _Pragma("unroll")

extern __shared__ __align__(16) unsigned char cuzk_dyn_smem[];  // dynamic shared memory of every kernel

DEV u32 brev32(u32 x) { return __brev(x); }

// Each primitive is one PTX instruction; the carry flag flows between consecutive calls. The asm
// statements are volatile so the compiler keeps their order; nothing that touches the flag may sit
// between the calls of one chain (only these primitives are used inside chains).
DEV u32 add_cc(u32 a, u32 b) { u32 r; asm volatile("add.cc.u32 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b)); return r; }
DEV u32 addc_cc(u32 a, u32 b) { u32 r; asm volatile("addc.cc.u32 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b)); return r; }
DEV u32 addc(u32 a, u32 b) { u32 r; asm volatile("addc.u32 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b)); return r; }
DEV u32 sub_cc(u32 a, u32 b) { u32 r; asm volatile("sub.cc.u32 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b)); return r; }
DEV u32 subc_cc(u32 a, u32 b) { u32 r; asm volatile("subc.cc.u32 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b)); return r; }
DEV u32 subc(u32 a, u32 b) { u32 r; asm volatile("subc.u32 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b)); return r; }
DEV u32 mad_lo_cc(u32 a, u32 b, u32 c) {
    u32 r; asm volatile("mad.lo.cc.u32 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(c)); return r;
}
DEV u32 madc_lo_cc(u32 a, u32 b, u32 c) {
    u32 r; asm volatile("madc.lo.cc.u32 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(c)); return r;
}
DEV u32 mad_hi_cc(u32 a, u32 b, u32 c) {
    u32 r; asm volatile("mad.hi.cc.u32 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(c)); return r;
}
DEV u32 madc_hi_cc(u32 a, u32 b, u32 c) {
    u32 r; asm volatile("madc.hi.cc.u32 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(c)); return r;
}
// Plain products (no carry flag involved): ordinary C, so the compiler may fuse and schedule them.
DEV u32 mul_lo(u32 a, u32 b) { return a * b; }
DEV u32 mul_hi(u32 a, u32 b) { return __umulhi(a, b); }

// Asynchronous 16-byte copy global -> shared (sm_80+): the data lands without passing through
// registers, so a thread can fetch its next operand while it computes on the current one. Bypasses
// L1 (.cg), right for gathers of data read once. cp_async_wait_all() makes this thread's copies
// visible to itself (no barrier needed when each thread reads only what it copied).
DEV void cp_async16(void* smem_dst, const void* gmem_src) {
    const u32 s = (u32)__cvta_generic_to_shared(smem_dst);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(s), "l"(gmem_src) : "memory");
}
DEV void cp_async_wait_all() { asm volatile("cp.async.wait_all;" ::: "memory"); }

#endif

// Index of the calling thread in a 1-D grid.
DEV u32 global_tid() { return blockIdx.x * blockDim.x + threadIdx.x; }

// Reverse the low `bits` bits of x (bits in 0..32).
DEV u32 bit_reverse(u32 x, u32 bits) { return bits == 0 ? 0u : brev32(x) >> (32 - bits); }
