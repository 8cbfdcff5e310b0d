"""Random Fr vectors for tests: (n, 4) uint64 Montgomery forms of values below r."""

from __future__ import annotations

import numpy as np

from cuzk.field import fr_vec


def random_mont(n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 2**64, size=(n, 4), dtype=np.uint64)
    a[:, 3] &= np.uint64(2**62 - 1)  # below r
    return fr_vec.to_montgomery(a)
