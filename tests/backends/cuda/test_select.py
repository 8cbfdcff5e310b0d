"""`phase.select`, the scalars of the density-filtered A and B MSMs: integer gathers that must give
exactly what boolean-mask indexing and concatenation gave. It only calls the kernel module's flatnonzero
and the array module's empty / take, so numpy stands in for CuPy and it runs without a GPU."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from cuzk.backends.cuda.phase import select


def _select(inputs: np.ndarray, input_mask: np.ndarray | None, aux: np.ndarray, aux_mask: np.ndarray) -> np.ndarray:
    return select(np, SimpleNamespace(flatnonzero=np.flatnonzero), inputs, input_mask, aux, aux_mask)


@pytest.mark.parametrize("density", [0.0, 0.25, 0.997, 1.0])
def test_select_equals_masked_concatenation(density: float) -> None:
    rng = np.random.default_rng(5)
    inputs = rng.integers(0, 2**32, size=(7, 8), dtype=np.uint32)
    aux = rng.integers(0, 2**32, size=(1000, 8), dtype=np.uint32)
    aux_mask = rng.random(1000) < density
    input_mask = rng.random(7) < 0.5
    got = _select(inputs, None, aux, aux_mask)
    assert got.dtype == np.uint32 and got.flags.c_contiguous
    assert np.array_equal(got, np.concatenate((inputs, aux[aux_mask])))
    got_b = _select(inputs, input_mask, aux, aux_mask)
    assert np.array_equal(got_b, np.concatenate((inputs[input_mask], aux[aux_mask])))


def test_select_with_nothing_selected_is_empty() -> None:
    inputs = np.ones((3, 8), dtype=np.uint32)
    aux = np.ones((5, 8), dtype=np.uint32)
    out = _select(inputs, np.zeros(3, dtype=bool), aux, np.zeros(5, dtype=bool))
    assert out.shape == (0, 8)
