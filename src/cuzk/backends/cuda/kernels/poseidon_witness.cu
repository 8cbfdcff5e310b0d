// Merkle-path witnesses over Poseidon trees on the device: the aux values `cuzk.gadgets.por` allocates
// for an opening of a tree_c / tree_r_last-shaped tree, exactly as the CPU generator
// (`cuzk.witness_gen.merkle.merkle_path_witness`, whose Poseidon part is the gadget's own numba kernel
// `cuzk.gadgets.poseidon._witness_kernel`) makes them: per level the position bits, the siblings, the
// insertion network's results and the node hash's rows (q, q^2, y per input in round 0; v, v^2, v^4, y
// per later S-box; the digest), every value canonical, written as a field element (eight u32 words) at
// out[rows[path] + its index in the path's aux]: the prover's device aux vector.
//
// One thread per path: a path's levels depend on each other, and a WindowPoSt-32GiB partition has
// 23,490 paths of ten arity-8 levels. The permutation's state stays in registers (the hash is a
// template on the width T = arity + 1); its constants come from one table per tree shape.
//
// The insertion network is run on references rather than values: every slot is one of the level's
// own values (0 the current node, 1..bits the position bits, then the siblings) or a constant bit, so
// a pick copies a reference and an and / nor makes a constant. Its program is the one the CPU
// generator traces from the gadget (`insertion_program`), so the order is the gadget's by construction.
//
// Table of one level kind (u32 words; fr values in Montgomery form, 8 words each), from
// `cuzk.backends.cuda.poseidon_witness`: a header of PW_HEADER words (the PW_* indices below), then
// the arrays at the header's offsets (counted from the header's first word).
#pragma once
#include "fr.cuh"

#define PW_T 0            // width: arity + 1
#define PW_BITS 1         // position bits per level: log2(arity)
#define PW_HASH_ROWS 2    // aux rows of one hash
#define PW_OPS 3          // insertion operations (one aux each)
#define PW_ROUNDS 4       // rounds after round 0
#define PW_PRE0 5         // (arity) round 0's additive constant of inputs 1..arity
#define PW_POST0 6        // (arity) round 0's post constant
#define PW_POSTS 7        // (later S-boxes) each later S-box's post constant
#define PW_DENSE 8        // (dense layers, T, T) M[i][j]
#define PW_W_HAT 9        // (partial rounds, T) sparse first column
#define PW_V_REST 10      // (partial rounds, T - 1) sparse first row without element 0
#define PW_PARTIAL 11     // (rounds) u32: whether round 1, 2, ... is partial
#define PW_OP_TABLE 12    // (ops, 4) u32: code, cond, x, y
#define PW_OUTPUTS 13     // (arity) u32: the slot of each hash input
#define PW_FOLDED 14      // (1) round 0's element 0 (the domain tag folded in), canonical
#define PW_HEADER 16

#define PW_OP_PICK 0      // slot[x] if slot[cond] else slot[y]
#define PW_OP_AND 1
#define PW_OP_NOR 2
#define PW_MAX_SLOTS 48   // 1 + bits + siblings + ops: 33 at arity 8
#define PW_REF_ZERO 254   // references to the constant bits
#define PW_REF_ONE 255

DEV fr_t pw_small(u32 bit) {
    fr_t r = fr_t::zero();
    r.v[0] = bit;
    return r;
}

DEV const fr_t* pw_array(const u32* kind, int field) {
    return reinterpret_cast<const fr_t*>(kind + kind[field]);
}

// One node hash: `start` is the initial state [folded constant, inputs...], canonical; its rows go to
// out[0 .. hash_rows), canonical; returns the digest, canonical.
template <int T>
DEV fr_t pw_hash(const u32* kind, const fr_t* start, fr_t* out) {
    const fr_t* pre0 = pw_array(kind, PW_PRE0);
    const fr_t* post0 = pw_array(kind, PW_POST0);
    const fr_t* posts = pw_array(kind, PW_POSTS);
    const fr_t* dense = pw_array(kind, PW_DENSE);
    const fr_t* w_hat = pw_array(kind, PW_W_HAT);
    const fr_t* v_rest = pw_array(kind, PW_V_REST);
    const u32* partial = kind + kind[PW_PARTIAL];
    fr_t st[T];
    UNROLL for (int i = 0; i < T; ++i) st[i] = start[i].to_mont();
    u32 k = 0;
    UNROLL for (int i = 1; i < T; ++i) {  // round 0: element 0 is the folded constant already
        const fr_t s = st[i] + fr_load(pre0 + i - 1);
        const fr_t q = s * s, f = q * q;
        const fr_t y = s * f + fr_load(post0 + i - 1);
        fr_store(out + k, q.from_mont());
        fr_store(out + k + 1, f.from_mont());
        fr_store(out + k + 2, y.from_mont());
        st[i] = y;
        k += 3;
    }
    u32 n_dense = 0, n_sparse = 0, n_sbox = 0;
    const u32 rounds = kind[PW_ROUNDS];
    for (u32 rnd = 0;; ++rnd) {
        // The linear layer after round rnd (rnd = 0: round 0), then round rnd + 1's S-boxes.
        const bool sparse = rnd > 0 && partial[rnd - 1];
        if (sparse) {
            const fr_t* w = w_hat + n_sparse * T;
            const fr_t* v = v_rest + n_sparse * (T - 1);
            fr_t h = st[0] * fr_load(w);
            UNROLL for (int i = 1; i < T; ++i) h = h + st[i] * fr_load(w + i);
            UNROLL for (int j = 1; j < T; ++j) st[j] = st[j] + st[0] * fr_load(v + j - 1);
            st[0] = h;
            ++n_sparse;
        } else {
            const fr_t* m = dense + n_dense * T * T;
            fr_t next[T];
            UNROLL for (int j = 0; j < T; ++j) {
                fr_t acc = st[0] * fr_load(m + j);
                UNROLL for (int i = 1; i < T; ++i) acc = acc + st[i] * fr_load(m + i * T + j);
                next[j] = acc;
            }
            UNROLL for (int j = 0; j < T; ++j) st[j] = next[j];
            ++n_dense;
        }
        if (rnd == rounds) break;
        const u32 boxes = partial[rnd] ? 1 : T;
        UNROLL for (int i = 0; i < T; ++i) {
            if ((u32)i < boxes) {
                const fr_t v = st[i];
                const fr_t s = v * v, f = s * s;
                const fr_t y = v * f + fr_load(posts + n_sbox);
                fr_store(out + k, v.from_mont());
                fr_store(out + k + 1, s.from_mont());
                fr_store(out + k + 2, f.from_mont());
                fr_store(out + k + 3, y.from_mont());
                st[i] = y;
                k += 4;
                ++n_sbox;
            }
        }
    }
    const fr_t digest = st[1].from_mont();
    fr_store(out + k, digest);
    return digest;
}

// Paths n = 0 .. count - 1. tab + kind_off[level_kind[l]] is level l's table; leaves (count) and
// siblings (count, sib_per_path: level by level, leaf level first) canonical; indices the leaf
// indices (their bit groups, LSB first, are the per-level positions). layout: 0 inclusion, 1 leaf
// first (the leaf is the path's first aux), 2 siblings first (every sibling first; no position bits).
// roots[n] := the root path n computes.
KERNEL LAUNCH_BOUNDS(128) poseidon_paths(const u32* tab, const u32* kind_off, const u32* level_kind, u32 levels,
                                         const fr_t* leaves, const u64* indices, const fr_t* siblings,
                                         u32 sib_per_path, const u64* rows, u32 count, u32 layout, fr_t* out,
                                         fr_t* roots) {
    const u32 n = global_tid();
    if (n >= count) return;
    const fr_t* sib = siblings + (u64)n * sib_per_path;
    fr_t* o = out + rows[n];
    u64 row = 0;
    fr_t node = fr_load(leaves + n);
    if (layout == 1) fr_store(o + row++, node);
    if (layout == 2)
        for (u32 j = 0; j < sib_per_path; ++j) fr_store(o + row++, fr_load(sib + j));
    u64 index = indices[n];
    u8 ref[PW_MAX_SLOTS];
    for (u32 lvl = 0; lvl < levels; ++lvl) {
        const u32* kind = tab + kind_off[level_kind[lvl]];
        const u32 t = kind[PW_T], bits = kind[PW_BITS], arity = t - 1;
        const u32 pos = (u32)(index & (arity - 1));
        index >>= bits;
        if (layout != 2) {
            for (u32 j = 0; j < bits; ++j) fr_store(o + row++, pw_small((pos >> j) & 1u));
            for (u32 j = 0; j + 1 < arity; ++j) fr_store(o + row++, fr_load(sib + j));
        }
        // Slot values: 0 the node, 1..bits the position bits, then the siblings; later slots refer to them.
        const u32 base = bits + arity;
        for (u32 q = 0; q < base; ++q) ref[q] = (u8)q;
        const u32* ops = kind + kind[PW_OP_TABLE];
        auto bit_of = [&](u32 r) -> u32 { return r == PW_REF_ONE ? 1u : r == PW_REF_ZERO ? 0u : (pos >> (r - 1)) & 1u; };
        auto value_of = [&](u32 r) -> fr_t {
            if (r == 0) return node;
            if (r >= PW_REF_ZERO || r <= bits) return pw_small(bit_of(r));
            return fr_load(sib + (r - 1 - bits));
        };
        const u32 n_ops = kind[PW_OPS];
        for (u32 q = 0; q < n_ops; ++q) {
            const u32 code = ops[4 * q], cond = ops[4 * q + 1], x = ops[4 * q + 2], y = ops[4 * q + 3];
            u32 r;
            if (code == PW_OP_PICK) {
                r = bit_of(ref[cond]) ? ref[x] : ref[y];
            } else {
                const u32 bx = bit_of(ref[x]), by = bit_of(ref[y]);
                r = (code == PW_OP_AND ? (bx & by) : ((bx | by) ^ 1u)) ? PW_REF_ONE : PW_REF_ZERO;
            }
            ref[base + q] = (u8)r;
            fr_store(o + row++, value_of(r));
        }
        const u32* outputs = kind + kind[PW_OUTPUTS];
        fr_t start[9];
        start[0] = fr_load(pw_array(kind, PW_FOLDED));
        for (u32 j = 0; j < arity; ++j) start[1 + j] = value_of(ref[outputs[j]]);
        if (t == 9) node = pw_hash<9>(kind, start, o + row);
        else if (t == 5) node = pw_hash<5>(kind, start, o + row);
        else node = pw_hash<3>(kind, start, o + row);
        row += kind[PW_HASH_ROWS];
        sib += arity - 1;
    }
    fr_store(roots + n, node);
}
