"""Vectors of curve points as stored in parameter files, decoded to native points on demand.

A `.params` file holds millions of points in blstrs' uncompressed encoding. `G1Bases`/`G2Bases` keep
that byte form (often a read-only memory map, so nothing is read twice) and convert it only when a
CPU MSM first needs it: to blst's affine layout (Montgomery limbs; 1x the file bytes) for the blst
engine, or to py-arkworks points (~2.6x) for the arkworks engine. A GPU backend uploads the bytes.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import ClassVar, Generic, TypeVar

import numpy as np

from cuzk.curve import encoding
from cuzk.curve.points import G1_UNCOMPRESSED_BYTES, G2_UNCOMPRESSED_BYTES, G1Point, G2Point

P = TypeVar("P", G1Point, G2Point)


class _Bases(Generic[P]):
    group: ClassVar[type]
    point_bytes: ClassVar[int]
    _decode: ClassVar[Callable[[np.ndarray], list]]
    _encode: ClassVar[Callable[[Sequence], np.ndarray]]
    _to_affine: ClassVar[Callable[[np.ndarray], np.ndarray]]

    def __init__(self, raw: np.ndarray | None = None, *, affine: np.ndarray | None = None) -> None:
        """From the encodings (`raw`), from blst's affine limbs (`affine`, trusted: the caller checked
        them, as `encoding.find_invalid_affine_limbs` does), or both. A form not given is made on
        first use."""
        name = type(self).__name__
        if raw is None and affine is None:
            raise ValueError(f"{name} needs its points as encodings, affine limbs, or both")
        if raw is not None and (raw.dtype != np.uint8 or raw.ndim != 2 or raw.shape[1] != self.point_bytes):
            raise ValueError(f"{name} needs an (n, {self.point_bytes}) uint8 array, got {raw.dtype} {raw.shape}")
        count = raw.shape[0] if raw is not None else affine.shape[0]
        words = self.point_bytes // 8
        if affine is not None and (affine.dtype != np.uint64 or affine.shape != (count, words)):
            raise ValueError(f"{name} affine limbs must be ({count}, {words}) uint64, "
                             f"got {affine.dtype} {affine.shape}")
        self._count = count
        self._raw = raw
        self._points: list[P] | None = None
        self._affine = affine
        self._lock = threading.RLock()   # points()/affine() may make `raw` first

    @classmethod
    def from_points(cls, points: Sequence[P]) -> _Bases[P]:
        raw = cls._encode(points) if len(points) else np.zeros((0, cls.point_bytes), np.uint8)
        bases = cls(raw)
        bases._points = list(points)
        return bases

    def __len__(self) -> int:
        return self._count

    @property
    def raw(self) -> np.ndarray:
        """The blstrs uncompressed encodings, (n, point_bytes) uint8 (made from the limbs on first use)."""
        if self._raw is None:
            with self._lock:
                if self._raw is None:
                    self._raw = encoding.uncompressed_from_affine_limbs(self._affine, is_g2=self.group is G2Point)
        return self._raw

    @property
    def nbytes(self) -> int:
        return self._count * self.point_bytes

    @property
    def decoded(self) -> bool:
        """Whether a converted copy (points or affine limbs) is held."""
        return self._points is not None or self._affine is not None

    def points(self) -> list[P]:
        """Native points, decoded on first use and kept (thread-safe)."""
        if self._points is None:
            with self._lock:
                if self._points is None:
                    self._points = type(self)._decode(self.raw) if len(self) else []
        return self._points

    def affine(self) -> np.ndarray:
        """blst's affine layout ((n, 12) or (n, 24) uint64), converted on first use and kept (thread-safe).

        Conversion checks what `points()` checks (flags, canonical coordinates, the curve equation).
        """
        if self._affine is None:
            with self._lock:
                if self._affine is None:
                    self._affine = type(self)._to_affine(self.raw)
        return self._affine

    def release_points(self) -> None:
        """Drop the converted copies (the byte form stays; limbs given at construction stay too)."""
        with self._lock:
            self._points = None
            if self._raw is not None:
                self._affine = None

    def to_bytes(self) -> bytes:
        return self.raw.tobytes()


class G1Bases(_Bases[G1Point]):
    group = G1Point
    point_bytes = G1_UNCOMPRESSED_BYTES
    _decode = staticmethod(encoding.g1_points_from_uncompressed)
    _encode = staticmethod(encoding.g1_points_to_uncompressed)
    _to_affine = staticmethod(encoding.g1_affine_limbs_from_uncompressed)


class G2Bases(_Bases[G2Point]):
    group = G2Point
    point_bytes = G2_UNCOMPRESSED_BYTES
    _decode = staticmethod(encoding.g2_points_from_uncompressed)
    _encode = staticmethod(encoding.g2_points_to_uncompressed)
    _to_affine = staticmethod(encoding.g2_affine_limbs_from_uncompressed)
