"""blst's Pippenger MSM and bulk additions, reached through ctypes.

blst (supranational, C and assembly) is 1.5-2x faster than the py-arkworks wheel at MSM
(docs/dependencies.md §2). No wheel ships a Python binding for its MSM, but the `ckzg` wheel (Ethereum's
c-kzg-4844, on PyPI) links blst in and exports its whole C API, so we call blst in that shared
object directly; ctypes drops the GIL for each call, so chunks run in parallel on threads.

Points go to blst in its affine layout: x then y, each Fp as six little-endian u64 limbs in
Montgomery form (R = 2^384), Fp2 as c0 then c1; the identity is all zeros
(`encoding.g1_affine_limbs_from_uncompressed` makes it). Scalars are canonical little-endian,
(n, 4) uint64, i.e. 32 bytes each, of which blst reads `SCALAR_BITS`.

Threading follows blst's own Rust binding: every point goes through every window, and the windows
("tiles") are spread over threads; each tile's sum is shifted by its first bit and the shifted sums
are added.
"""

from __future__ import annotations

import ctypes
import importlib.util
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from functools import cache
from itertools import pairwise

import numpy as np

from cuzk.curve import encoding
from cuzk.curve.points import G1_UNCOMPRESSED_BYTES, G2_UNCOMPRESSED_BYTES

#: Scalars are below r < 2^255.
SCALAR_BITS = 255
#: Largest window a tile uses. blst's choice grows with the MSM (24 bits at 2^27 points), and every
#: running tile holds 2^(window-1) buckets: 1.6 GB per G1 tile at 24 bits, times the threads. At 20
#: bits a tile's buckets take 100 MB (G1) / 200 MB (G2).
MAX_WINDOW = 20
#: blst's own single call handles tiny MSMs (it switches to fixed windows below 32 points), and a
#: tile needs at least 2 points; below this many points one untiled call is used.
MIN_TILED_POINTS = 64

_p = ctypes.c_void_p
_size = ctypes.c_size_t


@dataclass(frozen=True)
class GroupLayout:
    """Sizes of one group's blst structures, in u64 words, and its functions' name prefix."""

    prefix: str            # "p1" (G1) or "p2" (G2)
    affine_words: int      # blst_pX_affine
    jacobian_words: int    # blst_pX
    serialized_bytes: int  # blst_pX_affine_serialize: blstrs' uncompressed encoding
    decode: Callable[[np.ndarray], list]  # those encodings -> py-arkworks points

    @property
    def xyzz_bytes(self) -> int:
        """blst's bucket type (X, Y, ZZZ, ZZ): four coordinates."""
        return 4 * self.affine_words * 8 // 2


G1 = GroupLayout("p1", 12, 18, G1_UNCOMPRESSED_BYTES, encoding.g1_points_from_uncompressed)
G2 = GroupLayout("p2", 24, 36, G2_UNCOMPRESSED_BYTES, encoding.g2_points_from_uncompressed)

_SIGNATURES: dict[str, tuple[list, object]] = {
    "s_mult_pippenger_scratch_sizeof": ([_size], _size),
    "s_mult_pippenger": ([_p, _p, _size, _p, _size, _p], None),
    "s_tile_pippenger": ([_p, _p, _size, _p, _size, _p, _size, _size], None),
    "s_add": ([_p, _p, _size], None),
    "_mult": ([_p, _p, _p, _size], None),
    "_to_affine": ([_p, _p], None),
    "_affine_serialize": ([_p, _p], None),
}


class BlstUnavailableError(RuntimeError):
    """blst could not be loaded; the message says why (the arkworks engine still works)."""


@cache
def _library() -> ctypes.CDLL:
    spec = importlib.util.find_spec("ckzg")
    if spec is None or not spec.origin:
        raise BlstUnavailableError("the ckzg package (which carries blst) is not installed")
    try:
        lib = ctypes.CDLL(spec.origin)
    except OSError as exc:
        raise BlstUnavailableError(f"cannot load {spec.origin}: {exc}") from None
    for group in (G1, G2):
        for suffix, (argtypes, restype) in _SIGNATURES.items():
            name = f"blst_{group.prefix}{suffix}"
            try:
                fn = getattr(lib, name)
            except AttributeError:
                raise BlstUnavailableError(f"{spec.origin} does not export {name}") from None
            fn.argtypes = argtypes
            fn.restype = restype
    return lib


def unavailable_reason() -> str | None:
    """None when blst can be used, else why not."""
    try:
        _library()
    except BlstUnavailableError as exc:
        return str(exc)
    return None


def _fn(group: GroupLayout, suffix: str):
    return getattr(_library(), f"blst_{group.prefix}{suffix}")


def window_bits(npoints: int) -> int:
    """blst's window size for an MSM of npoints (pippenger_window_size in its multi_scalar.c)."""
    wbits = max(npoints, 1).bit_length() - 1
    if wbits > 12:
        return wbits - 3
    if wbits > 8:
        return wbits - 2
    if wbits > 4:
        return wbits - 1
    return 2 if wbits else 1


def _pointer_pair(array: np.ndarray) -> ctypes.Array:
    """blst's convention for a contiguous array: {start, NULL}."""
    return (_p * 2)(array.ctypes.data, None)


def _point_refs(affine: np.ndarray, rows: np.ndarray | None) -> tuple[ctypes.Array | np.ndarray, object]:
    """What blst takes as `points[]`: the whole array, or a table of pointers to the chosen rows.

    Returns (argument, keep-alive object)."""
    if rows is None:
        return _pointer_pair(affine), affine
    table = (np.uint64(affine.ctypes.data)
             + rows.astype(np.uint64) * np.uint64(affine.strides[0])).astype(np.uint64)
    return table.ctypes.data_as(_p), table


def _to_point(group: GroupLayout, jacobian: np.ndarray):
    affine = np.empty(group.affine_words, np.uint64)
    _fn(group, "_to_affine")(affine.ctypes.data, jacobian.ctypes.data)
    raw = np.empty((1, group.serialized_bytes), np.uint8)
    _fn(group, "_affine_serialize")(raw.ctypes.data, affine.ctypes.data)
    return group.decode(raw)[0]


def _shifted_tile(group: GroupLayout, refs, keep, count: int, scalars: np.ndarray, bit0: int,
                  window: int, scratch_bytes: int):
    """The tile sum of bits [bit0, bit0 + window) of every scalar, times 2^bit0."""
    del keep  # referenced only so the pointer table outlives the call
    tile = np.zeros(group.jacobian_words, np.uint64)
    scratch = np.zeros(scratch_bytes // 8 + 1, np.uint64)  # the tile expects empty buckets
    _fn(group, "s_tile_pippenger")(tile.ctypes.data, refs, count, _pointer_pair(scalars), SCALAR_BITS,
                                   scratch.ctypes.data, bit0, window)
    if bit0:
        shift = np.zeros(bit0 // 8 + 1, np.uint8)
        shift[bit0 // 8] = 1 << (bit0 % 8)
        shifted = np.empty_like(tile)   # blst does not promise that out may alias the input
        _fn(group, "_mult")(shifted.ctypes.data, tile.ctypes.data, shift.ctypes.data, bit0 + 1)
        tile = shifted
    return _to_point(group, tile)


def _whole(group: GroupLayout, refs, keep, count: int, scalars: np.ndarray):
    del keep
    out = np.zeros(group.jacobian_words, np.uint64)
    scratch = np.empty(_fn(group, "s_mult_pippenger_scratch_sizeof")(count) // 8 + 1, np.uint64)
    _fn(group, "s_mult_pippenger")(out.ctypes.data, refs, count, _pointer_pair(scalars), SCALAR_BITS,
                                   scratch.ctypes.data)
    return _to_point(group, out)


def _sum(group: GroupLayout, refs, keep, count: int):
    del keep
    out = np.zeros(group.jacobian_words, np.uint64)
    _fn(group, "s_add")(out.ctypes.data, refs, count)
    return _to_point(group, out)


def msm_tasks(pool: ThreadPoolExecutor, group: GroupLayout, affine: np.ndarray, rows: np.ndarray | None,
              scalars: np.ndarray, threads: int) -> list[Future]:
    """Start Σ scalars[k] * affine[rows[k]] (rows None: all rows in order) on the pool.

    The futures' results are py-arkworks points whose sum is the MSM.
    """
    count = affine.shape[0] if rows is None else rows.shape[0]
    scalars = np.ascontiguousarray(scalars, dtype=np.uint64)
    if scalars.shape != (count, 4):
        raise ValueError(f"MSM length mismatch: {count} points, scalars of shape {scalars.shape}")
    if count == 0:
        return []
    if count < MIN_TILED_POINTS:
        refs, keep = _point_refs(affine, rows)
        return [pool.submit(_whole, group, refs, keep, count, scalars)]
    window = min(window_bits(count), MAX_WINDOW)
    # A tile's buckets: 2^(window-1) XYZZ points (4 coordinates each), one buffer per running tile.
    scratch = group.xyzz_bytes << (window - 1)
    # Signed (Booth) digits carry out of each window into the next. A tile that ends exactly at
    # SCALAR_BITS would drop its carry, so the tiles always reach past it: when the window divides
    # SCALAR_BITS, the last tile starts at SCALAR_BITS and holds only that carry.
    tiles = SCALAR_BITS // window + 1
    # Each thread takes whole tiles; when there are more threads than tiles the points are split too,
    # so that every core has work (each piece is a smaller MSM with the same window).
    pieces = max(1, -(-threads // tiles)) if count >= MIN_TILED_POINTS * threads else 1
    bounds = np.linspace(0, count, pieces + 1).astype(int).tolist()
    futures = []
    for lo, hi in pairwise(bounds):
        piece_refs, piece_keep = (_point_refs(affine[lo:hi], None) if rows is None
                                  else _point_refs(affine, rows[lo:hi]))
        for t in range(tiles):
            futures.append(pool.submit(_shifted_tile, group, piece_refs, piece_keep, hi - lo, scalars[lo:hi],
                                       t * window, window, scratch))
    return futures


def sum_tasks(pool: ThreadPoolExecutor, group: GroupLayout, affine: np.ndarray, rows: np.ndarray,
              threads: int) -> list[Future]:
    """Start Σ affine[rows] (batched affine additions: one inversion per level of a tree)."""
    if rows.shape[0] == 0:
        return []
    pieces = max(1, min(threads, rows.shape[0] // 4096))
    bounds = np.linspace(0, rows.shape[0], pieces + 1).astype(int).tolist()
    futures = []
    for lo, hi in pairwise(bounds):
        refs, keep = _point_refs(affine, rows[lo:hi])
        futures.append(pool.submit(_sum, group, refs, keep, hi - lo))
    return futures
