// SHA-256 witnesses on the device: the aux bits `cuzk.gadgets.sha256` allocates for many messages of
// one configuration, exactly as `cuzk.witness_gen.sha256.Sha256WitnessPlan.generate` makes them.
//
// One warp per instance. Per compression, its first lane fills the register file of every
// intermediate word (`cuzk.witness_gen.sha256_trace`: SLOT_* layout, 896 u64 in shared memory, sums
// keeping their carry bits); then the whole warp writes the compression's aux, lane j taking aux j,
// j + 32, ...: aux j's trace code (slot << 7 | bit << 1 | flip) says which register bit it is. Each
// aux is written as a field element (eight u32 words, the value 0 or 1 in the first), the layout of
// the prover's device aux vector, at out[dst[instance] + its index in the instance's aux]: so a
// warp's stores are 1 KiB in a row, and a caller places every instance wherever its circuit
// allocated those aux.
//
// The plan's tables come from `Sha256WitnessPlan.device_tables()`: block_table[b] names the
// distinct compression block b uses, whose codes are codes[code_start[u] .. + code_len[u]], and
// aux_start[b] is where block b's aux begin among the instance's.
#pragma once
#include "common.cuh"

#define SHA_SLOT_H 0
#define SHA_SLOT_W 8
#define SHA_SLOT_SCHEDULE 72
#define SHA_SLOT_ROUND 312
#define SHA_SLOT_FINAL 888
#define SHA_NUM_SLOTS 896

CONSTANT u32 SHA_K[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};
CONSTANT u32 SHA_IV[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                          0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};

DEV u64 sha_rotr(u64 x, u32 by) { return ((x >> by) | (x << (32 - by))) & 0xFFFFFFFFull; }

// One compression of w[0..16) into state, every intermediate word recorded in regs (the order of the
// operands of a sum does not matter: the slots' meaning does; see sha256_trace).
DEV void sha_compress(u64* regs, u64* state, const u32* w) {
    const u64 mask = 0xFFFFFFFFull;
    for (int k = 0; k < 8; ++k) regs[SHA_SLOT_H + k] = state[k];
    for (int i = 0; i < 16; ++i) regs[SHA_SLOT_W + i] = w[i];
    for (int i = 16; i < 64; ++i) {
        u64* s = regs + SHA_SLOT_SCHEDULE + 5 * (i - 16);
        const u64 x = regs[SHA_SLOT_W + i - 15], y = regs[SHA_SLOT_W + i - 2];
        const u64 t0 = sha_rotr(x, 7) ^ sha_rotr(x, 18), s0 = t0 ^ (x >> 3);
        const u64 t1 = sha_rotr(y, 17) ^ sha_rotr(y, 19), s1 = t1 ^ (y >> 10);
        const u64 total = regs[SHA_SLOT_W + i - 16] + s0 + regs[SHA_SLOT_W + i - 7] + s1;
        s[0] = t0; s[1] = s0; s[2] = t1; s[3] = s1; s[4] = total;
        regs[SHA_SLOT_W + i] = total & mask;
    }
    u64 a = state[0], b = state[1], c = state[2], d = state[3];
    u64 e = state[4], f = state[5], g = state[6], h = state[7];
    u64 pending_e = 0, pending_a = 0;
    for (int i = 0; i < 64; ++i) {
        u64* r = regs + SHA_SLOT_ROUND + 9 * i;
        if (i > 0) {  // the deferred additions of the previous round, done at first use
            r[0] = pending_e;
            e = pending_e & mask;
        }
        const u64 t1 = sha_rotr(e, 6) ^ sha_rotr(e, 11), s1 = t1 ^ sha_rotr(e, 25);
        const u64 ch = (e & f) ^ (~e & g & mask);
        const u64 temp1 = h + s1 + ch + SHA_K[i] + regs[SHA_SLOT_W + i];
        if (i > 0) {
            r[4] = pending_a;
            a = pending_a & mask;
        }
        const u64 t0 = sha_rotr(a, 2) ^ sha_rotr(a, 13), s0 = t0 ^ sha_rotr(a, 22);
        const u64 bc = b & c, maj = (a & b) ^ (a & c) ^ bc;
        r[1] = t1; r[2] = s1; r[3] = ch; r[5] = t0; r[6] = s0; r[7] = maj; r[8] = bc;
        pending_e = temp1 + d;
        pending_a = temp1 + s0 + maj;
        h = g; g = f; f = e;
        d = c; c = b; b = a;
    }
    const u64 finals[8] = {pending_a + state[0], state[1] + b, state[2] + c, state[3] + d,
                           pending_e + state[4], state[5] + f, state[6] + g, state[7] + h};
    for (int k = 0; k < 8; ++k) {
        regs[SHA_SLOT_FINAL + k] = finals[k];
        state[k] = finals[k] & mask;
    }
}

#define SHA_WARPS 4  // instances per block of the kernel (one warp each)

// words: (n, blocks * 16) message words (big-endian decoded, padding included); out: field elements
// (eight u32 words each); digest: (n, 8) words. Launched with SHA_WARPS * 32 threads a block and
// SHA_WARPS * (SHA_NUM_SLOTS + 8) * 8 bytes of dynamic shared memory.
BLOCK_KERNEL sha256_witness(const u32* words, u32 n, u32 blocks, const long long* block_table,
                            const long long* code_start, const long long* code_len, const u32* codes,
                            const long long* aux_start, const u64* dst, u32* out, u32* digest) {
    DYN_SMEM(u64, smem);  // per warp: SHA_NUM_SLOTS registers, then the 8 state words
    for (u32 blk = 0; blk < blocks; ++blk) {
        BLOCK_THREADS(t) {
            const u32 warp = t / 32, instance = blockIdx.x * SHA_WARPS + warp;
            u64* regs = smem + warp * (SHA_NUM_SLOTS + 8);
            u64* state = regs + SHA_NUM_SLOTS;
            if (t % 32 == 0 && instance < n) {
                if (blk == 0) {
                    for (int k = 0; k < 8; ++k) state[k] = SHA_IV[k];
                }
                sha_compress(regs, state, words + ((u64)instance * blocks + blk) * 16);
            }
        }
        SYNC();
        BLOCK_THREADS(t) {
            const u32 warp = t / 32, lane = t % 32, instance = blockIdx.x * SHA_WARPS + warp;
            if (instance < n) {
                const u64* regs = smem + warp * (SHA_NUM_SLOTS + 8);
                const long long u = block_table[blk];
                const u32* code = codes + code_start[u];
                u32* base = out + 8 * (dst[instance] + (u64)aux_start[blk]);
                for (long long j = lane; j < code_len[u]; j += 32) {
                    const u32 c = code[j];
                    const u32 bit = (u32)((regs[c >> 7] >> ((c >> 1) & 63)) & 1u) ^ (c & 1u);
                    u32* limb = base + 8 * j;
                    limb[0] = bit;
                    for (int k = 1; k < 8; ++k) limb[k] = 0;
                }
            }
        }
        SYNC();
    }
    BLOCK_THREADS(t) {
        const u32 warp = t / 32, instance = blockIdx.x * SHA_WARPS + warp;
        if (t % 32 < 8 && instance < n) {
            const u64* state = smem + warp * (SHA_NUM_SLOTS + 8) + SHA_NUM_SLOTS;
            digest[(u64)instance * 8 + t % 32] = (u32)state[t % 32];
        }
    }
}
