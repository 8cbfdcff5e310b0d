"""Merkle-path witnesses over Poseidon trees on the device (driving kernels/poseidon_witness.cu).

The aux values `cuzk.witness_gen.merkle.merkle_path_witness` produces for N openings of a Poseidon
tree, written as field elements (eight u32 words, canonical: the prover's device aux layout) straight
into a device vector: path n's aux go to rows dst[n], dst[n] + 1, ..., so a circuit's generator can
place each path where the circuit allocated it. A tree shape's tables (the hash constants and the
insertion programs of its arities) go up once.

    gen = DevicePoseidonPaths(get_module(0, "poseidon"))
    roots = gen.generate_into(shape, layout, leaves, indices, siblings, aux_vector, dst)   # device
    aux, roots = gen.generate(shape, layout, leaves, indices, siblings)   # (N, path_aux, 8) u32
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

from cuzk.gadgets.por import POSEIDON, TreeShape
from cuzk.hashes.poseidon_constants import merkle_tree_tag, poseidon_constants
from cuzk.witness_gen.merkle import PathLayout, insertion_program, path_aux_count, path_inputs
from cuzk.witness_gen.poseidon import hash_plan

__all__ = ["DevicePoseidonPaths", "kind_table"]

_THREADS = 128
#: The kernel's header fields, in order (kernels/poseidon_witness.cu: PW_*), and its size in words.
_HEADER = 16
_LAYOUT_CODE = {PathLayout.INCLUSION: 0, PathLayout.LEAF_FIRST: 1, PathLayout.SIBLINGS_FIRST: 2}
#: Widths the kernel is instantiated for (arity + 1): the Poseidon tree arities 2, 4 and 8.
_WIDTHS = (3, 5, 9)


def _words(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a, dtype=np.uint64).view(np.uint32).reshape(-1)


def kind_table(arity: int) -> np.ndarray:
    """One level kind's table for the kernel (u32 words; see the kernel's file comment): the
    MerkleTree-tagged Poseidon constants of `arity` and its insertion program."""
    if arity + 1 not in _WIDTHS:
        raise ValueError(f"the device Merkle-path kernel takes arities 2, 4 and 8, not {arity}")
    plan = hash_plan(poseidon_constants(arity), merkle_tree_tag(arity))
    pre0, post0, posts, partial, dense, w_hat, v_rest = plan.kernel
    program = insertion_program(arity)
    arrays = [_words(pre0), _words(post0), _words(posts), _words(dense), _words(w_hat), _words(v_rest),
              partial.astype(np.uint32), program.ops.astype(np.uint32).reshape(-1),
              program.outputs.astype(np.uint32), _words(plan.folded)]
    header = np.zeros(_HEADER, dtype=np.uint32)
    header[:5] = (arity + 1, arity.bit_length() - 1, plan.rows, len(program.ops), partial.shape[0])
    parts, offset = [header], _HEADER
    for field, words in enumerate(arrays, start=5):  # PW_PRE0 .. PW_FOLDED
        header[field] = offset
        padded = -(-words.size // 8) * 8  # every array 32-byte aligned: fr loads are 16-byte vectors
        parts.append(np.concatenate([words, np.zeros(padded - words.size, dtype=np.uint32)]))
        offset += padded
    return np.concatenate(parts)


class DevicePoseidonPaths:
    """Poseidon Merkle-path witness generation on one device (a `KernelModule` of the "poseidon" unit)."""

    def __init__(self, kernels: Any) -> None:
        self.kernels = kernels
        self.xp = kernels.xp
        self._tables: dict[tuple[int, ...], tuple[Any, Any, Any]] = {}
        self._lock = threading.Lock()  # two provers' staging threads may generate at once

    def _shape_tables(self, shape: TreeShape) -> tuple[Any, Any, Any]:
        """(table, kind offsets, per-level kinds) on the device for a tree shape's arities."""
        arities = shape.arities
        with self._lock:
            tables = self._tables.get(arities)
            if tables is None:
                kinds = sorted(set(arities), key=arities.index)
                parts = [kind_table(a) for a in kinds]
                offsets = np.cumsum([0] + [p.size for p in parts[:-1]]).astype(np.uint32)
                level_kind = np.array([kinds.index(a) for a in arities], dtype=np.uint32)
                tables = tuple(self.kernels.to_device(a) for a in (np.concatenate(parts), offsets, level_kind))
                # Complete before any stream (another prover's) reads them: a pageable upload may not be.
                self.kernels.synchronize()
                self._tables[arities] = tables
            return tables

    def generate_into(self, shape: TreeShape, layout: PathLayout, leaves: np.ndarray, indices: np.ndarray,
                      siblings: np.ndarray, out: Any, dst: np.ndarray) -> Any:
        """Write the aux of N openings (`merkle_path_witness`'s inputs, host arrays) into `out` (a
        C-contiguous (rows, 8) uint32 device array) at rows dst[n] .. dst[n] + path_aux - 1; returns
        the computed roots, (N, 8) uint32 canonical on the device. Refuses what `merkle_path_witness`
        refuses, SHA-256 trees, and destinations outside `out`."""
        if shape.hasher != POSEIDON:
            raise ValueError(f"the device Merkle-path kernel hashes with Poseidon, not {shape.hasher}")
        leaves, indices, siblings = path_inputs(shape, leaves, indices, siblings)
        n = leaves.shape[0]
        path_aux = path_aux_count(shape, layout)
        dst = np.ascontiguousarray(dst, dtype=np.int64)
        if dst.shape != (n,):
            raise ValueError(f"dst must hold one row index per path ({n}), got shape {dst.shape}")
        if out.dtype != self.xp.uint32 or out.ndim != 2 or out.shape[1] != 8 or not out.flags.c_contiguous:
            raise ValueError(f"out must be a C-contiguous (rows, 8) uint32 array, got {out.dtype} {out.shape}")
        if n and (int(dst.min()) < 0 or int(dst.max()) + path_aux > out.shape[0]):
            raise ValueError(f"destinations reach outside out: rows {int(dst.min())}..{int(dst.max()) + path_aux} "
                             f"of {out.shape[0]}")
        roots = self.xp.empty((n, 8), dtype=self.xp.uint32)
        if n:
            table, offsets, level_kind = self._shape_tables(shape)
            to_device = self.kernels.to_device
            self.kernels.launch("poseidon_paths", -(-n // _THREADS), _THREADS,
                                (table, offsets, level_kind, len(shape.arities), to_device(_words(leaves)),
                                 to_device(indices.view(np.uint64)), to_device(_words(siblings)),
                                 siblings.shape[1], to_device(dst.view(np.uint64)), n, _LAYOUT_CODE[layout],
                                 out, roots))
        return roots

    def generate(self, shape: TreeShape, layout: PathLayout, leaves: np.ndarray, indices: np.ndarray,
                 siblings: np.ndarray) -> tuple[Any, Any]:
        """The aux of N openings as an (N, path_aux, 8) uint32 device array (path after path) and
        their roots (N, 8) uint32."""
        n = np.asarray(leaves).shape[0]
        path_aux = path_aux_count(shape, layout)
        aux = self.xp.empty((n * path_aux, 8), dtype=self.xp.uint32)
        roots = self.generate_into(shape, layout, leaves, indices, siblings, aux,
                                   np.arange(n, dtype=np.int64) * path_aux)
        return aux.reshape(n, path_aux, 8), roots
