"""The H quotient from six transforms (`prover.quotient`) against bellperson's seven: A, B and C each
to the coset 7·D, a·b − c there, divided by Z = 7^m − 1, back to coefficients."""

from __future__ import annotations

import numpy as np
import pytest
from fr_vectors import random_mont

from cuzk.field import fr_vec
from cuzk.field.constants import FR_GENERATOR, R_MODULUS, fr_root_of_unity
from cuzk.field.ntt import Domain
from cuzk.groth16.prover import Reduction, quotient, quotient_shift


def _bellperson(domain: Domain, a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    a, b, c = (domain.coset_ntt_inplace(domain.intt_inplace(v.copy()), FR_GENERATOR) for v in (a, b, c))
    ab_c = fr_vec.sub(fr_vec.mul(a, b), c)
    z_inv = pow(domain.vanishing_on_coset(FR_GENERATOR), -1, R_MODULUS)
    return domain.icoset_ntt_inplace(fr_vec.mul_scalar(ab_c, z_inv), FR_GENERATOR)


@pytest.mark.parametrize("log_m", [1, 2, 5, 10])
@pytest.mark.parametrize("other_root", [False, True])
def test_six_transforms_give_bellpersons_quotient(log_m: int, other_root: bool) -> None:
    """Where c = a·b row by row (every constraint holds), with the default root and with another of
    the same order (snarkjs keys name theirs): the same coefficients, the top one zero."""
    m = 1 << log_m
    root = pow(fr_root_of_unity(log_m), 3, R_MODULUS) if other_root else None
    domain = Domain(log_m, root)
    a, b = random_mont(m, 2 * log_m), random_mont(m, 2 * log_m + 1)
    a[m - 3:] = 0  # zero padding beyond the constraints, as the prover's
    c = fr_vec.mul(a, b)
    want = _bellperson(domain, a, b, c)
    red = Reduction(quotient_shift(m), divide=True)
    assert np.array_equal(quotient(domain, red, a.copy(), b.copy(), c.copy()), want)
    assert np.array_equal(quotient(domain, red, a.copy(), b.copy(), c.copy(), transforms=7), want)
    assert not want[m - 1].any()


def test_quotient_shift_is_a_half_turn() -> None:
    """shift^m = −1: what makes A·B on the coset L − U."""
    for log_m in (1, 10, 27, 31):
        m = 1 << log_m
        assert pow(quotient_shift(m), m, R_MODULUS) == R_MODULUS - 1
