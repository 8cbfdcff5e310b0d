"""Vectors of curve points as stored in parameter files, decoded to native points on demand.

A `.params` file holds millions of points in blstrs' uncompressed encoding. `G1Bases`/`G2Bases` keep
that byte form (often a read-only memory map, so nothing is read twice) and decode it to
py-arkworks points only when a CPU MSM first needs them; a GPU backend uploads the bytes instead.
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

    def __init__(self, raw: np.ndarray) -> None:
        if raw.dtype != np.uint8 or raw.ndim != 2 or raw.shape[1] != self.point_bytes:
            raise ValueError(
                f"{type(self).__name__} needs an (n, {self.point_bytes}) uint8 array, got {raw.dtype} {raw.shape}"
            )
        self.raw = raw
        self._points: list[P] | None = None
        self._lock = threading.Lock()

    @classmethod
    def from_points(cls, points: Sequence[P]) -> _Bases[P]:
        raw = cls._encode(points) if len(points) else np.zeros((0, cls.point_bytes), np.uint8)
        bases = cls(raw)
        bases._points = list(points)
        return bases

    def __len__(self) -> int:
        return self.raw.shape[0]

    @property
    def nbytes(self) -> int:
        return self.raw.shape[0] * self.point_bytes

    @property
    def decoded(self) -> bool:
        return self._points is not None

    def points(self) -> list[P]:
        """Native points, decoded on first use and kept (thread-safe)."""
        if self._points is None:
            with self._lock:
                if self._points is None:
                    self._points = type(self)._decode(self.raw) if len(self) else []
        return self._points

    def release_points(self) -> None:
        """Drop the decoded copy (the byte form stays)."""
        with self._lock:
            self._points = None

    def to_bytes(self) -> bytes:
        return self.raw.tobytes()


class G1Bases(_Bases[G1Point]):
    group = G1Point
    point_bytes = G1_UNCOMPRESSED_BYTES
    _decode = staticmethod(encoding.g1_points_from_uncompressed)
    _encode = staticmethod(encoding.g1_points_to_uncompressed)


class G2Bases(_Bases[G2Point]):
    group = G2Point
    point_bytes = G2_UNCOMPRESSED_BYTES
    _decode = staticmethod(encoding.g2_points_from_uncompressed)
    _encode = staticmethod(encoding.g2_points_to_uncompressed)
