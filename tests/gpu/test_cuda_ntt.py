"""Device NTTs against the CPU Domain (natural order, inverse, cosets) and the H polynomial against
the CPU prover's compute_h."""

from __future__ import annotations

import random

import numpy as np
import pytest
from fr_vectors import random_mont

from cuzk.backends.cuda.ntt import DeviceNtt
from cuzk.circuits.registry import lookup
from cuzk.field import fr_vec
from cuzk.field.constants import FR_GENERATOR, R_MODULUS, fr_root_of_unity
from cuzk.field.ntt import Domain
from cuzk.groth16.assignment import Assignment
from cuzk.groth16.prover import compute_h
from cuzk.groth16.synthesis import synthesize_for_proving

pytestmark = pytest.mark.gpu


def _sizes(emulated: bool) -> list[int]:
    return [0, 1, 2, 3, 7, 10, 11, 16] + ([] if emulated else [20, 22])


def _run(kernels, ntt: DeviceNtt, fn, host: np.ndarray) -> np.ndarray:
    d = kernels.to_device(host.view(np.uint32).reshape(-1, 8))
    fn(d)
    return kernels.to_host(d).view(np.uint64).reshape(-1, 4)


@pytest.mark.parametrize("max_pass_log,direct_log,fixed_stride",
                         [(10, 18, True), (10, 18, False), (4, 18, True), (10, 0, True), (4, 0, True)])
def test_transforms_match_cpu_domain(kernels, emulated: bool, max_pass_log: int, direct_log: int,
                                     fixed_stride: bool) -> None:
    """Passes of up to 10 and up to 4 stages; between-pass twiddles from the direct tables where a pass
    allows (the default) and from the two-level tables only (direct_log 0); passes of 2^10 elements a
    block with the constant-stride kernels (the default) and the generic ones."""
    ntt = DeviceNtt(kernels, max_pass_log=max_pass_log)
    ntt.direct_twiddle_log = direct_log
    ntt.fixed_stride = fixed_stride
    for log_n in _sizes(emulated):
        if max_pass_log < 10 and log_n > 11:
            continue
        dom = Domain(log_n)
        x = random_mont(1 << log_n, log_n)
        cases = [
            ("ntt", dom.ntt, lambda v, L=log_n: ntt.ntt(v, L)),
            ("intt", dom.intt, lambda v, L=log_n: ntt.intt(v, L)),
            ("coset", lambda v, d=dom: d.coset_ntt(v, FR_GENERATOR), lambda v, L=log_n: ntt.coset_ntt(v, L)),
            ("icoset", lambda v, d=dom: d.icoset_ntt(v, FR_GENERATOR), lambda v, L=log_n: ntt.icoset_ntt(v, L)),
        ]
        for name, cpu, dev in cases:
            assert np.array_equal(_run(kernels, ntt, dev, x), cpu(x.copy())), (name, log_n)


@pytest.mark.parametrize("max_pass_log", [10, 4])
def test_fused_factors_match_separate_sweeps(kernels, max_pass_log: int) -> None:
    """The factors `dif` fuses into its first pass (g^i) and last pass (scale * h^bitrev(p)) equal the
    separate fr_mul_powers sweeps they replace, whether first and last pass are one kernel or not."""
    ntt = DeviceNtt(kernels, max_pass_log=max_pass_log)
    g, h, scale = 7, 11, 13
    for log_n in (1, 5, 9):
        root = fr_root_of_unity(log_n)

        def fused(v, L=log_n, w=root):
            ntt.dif(v, L, w, pre_g=g, post_g=h, post_scale=scale)

        def separate(v, L=log_n, w=root):
            ntt.mul_powers(v, L, g=g)
            ntt.dif(v, L, w)
            ntt.mul_powers(v, L, g=h, scale=scale, bitrev=True)

        x = random_mont(1 << log_n, 100 + log_n)
        assert np.array_equal(_run(kernels, ntt, fused, x), _run(kernels, ntt, separate, x)), log_n


def test_pass_plans_give_the_same_transforms(kernels, emulated: bool) -> None:
    """Other splits of the stages into passes (DIF top-down, DIT bottom-up; passes of 2^10 elements a
    block and smaller ones, direct and two-level twiddles) and smaller blocks change nothing in the
    output; a plan whose sizes do not add up, or whose passes exceed a block, is refused."""
    log_n = 11 if emulated else 20
    root = fr_root_of_unity(log_n)
    plans = [(4, 3, 4), (2, 9), (9, 2), (1, 5, 5)] if emulated else [(9, 1, 10), (5, 5, 10), (10, 4, 6)]
    x = random_mont(1 << log_n, 77)
    base = DeviceNtt(kernels)
    want = {kind: _run(kernels, base, lambda v, k=kind: getattr(base, k)(v, log_n, root), x) for kind in ("dif", "dit")}
    for plan in plans:
        for kind in ("dif", "dit"):
            ntt = DeviceNtt(kernels)
            ntt.pass_plans[(kind, log_n)] = plan
            got = _run(kernels, ntt, lambda v, k=kind, t=ntt: getattr(t, k)(v, log_n, root), x)
            assert np.array_equal(got, want[kind]), (kind, plan)
    # Smaller blocks (`block_log`): 2^7 points a block, and the default plan of such passes.
    for block_log, plan in ((7, (4, 3, 4) if emulated else (7, 7, 6)), (7, None), (5, None)):
        for kind in ("dif", "dit"):
            ntt = DeviceNtt(kernels)
            ntt.block_log = block_log
            if plan is not None:
                ntt.pass_plans[(kind, log_n)] = plan
            assert max(ntt._passes(log_n, kind)) <= block_log
            got = _run(kernels, ntt, lambda v, k=kind, t=ntt: getattr(t, k)(v, log_n, root), x)
            assert np.array_equal(got, want[kind]), (kind, block_log, plan)
    ntt = DeviceNtt(kernels)
    for bad in ((5, 5), (11, 0), (12, -1)):
        ntt.pass_plans[("dif", log_n)] = bad
        with pytest.raises(ValueError, match="pass plan"):
            ntt.dif(kernels.to_device(x.view(np.uint32).reshape(-1, 8)), log_n, root)
    ntt.block_log = 7
    ntt.pass_plans[("dif", log_n)] = (9, 2) if emulated else (10, 10)  # passes larger than a block
    with pytest.raises(ValueError, match="pass plan"):
        ntt.dif(kernels.to_device(x.view(np.uint32).reshape(-1, 8)), log_n, root)


@pytest.mark.parametrize("max_pass_log", [10, 4])
@pytest.mark.parametrize("vector", ["post_sub", "pre_mul"])
def test_fused_vector_matches_a_separate_step(kernels, max_pass_log: int, vector: str) -> None:
    """`dif`'s element-wise vector y equals its step taken apart, one pass or several, and with no pass
    at all (2^0 points): post_sub (y - x at each output, after the fused factors) the transform and then
    the subtraction on the host; pre_mul (x * y before the first pass, a coset shift beside it) the
    product taken first."""
    ntt = DeviceNtt(kernels, max_pass_log=max_pass_log)
    factors = {"post_g": 3, "post_scale": 5} if vector == "post_sub" else {"pre_g": 3, "post_scale": 5}
    seed = 200 if vector == "post_sub" else 400
    for log_n in (0, 1, 5, 9):
        root = fr_root_of_unity(log_n)
        x, y = random_mont(1 << log_n, seed + log_n), random_mont(1 << log_n, seed + 100 + log_n)
        plain = _run(kernels, ntt, lambda v, L=log_n, w=root: ntt.dif(v, L, w, **factors),
                     x if vector == "post_sub" else fr_vec.mul(x, y))
        y_dev = kernels.to_device(y.view(np.uint32).reshape(-1, 8))
        fused = _run(kernels, ntt, lambda v, L=log_n, w=root, y=y_dev: ntt.dif(v, L, w, **factors, **{vector: y}), x)
        assert np.array_equal(fused, fr_vec.sub(y, plain) if vector == "post_sub" else plain), log_n


def test_coset_evaluations_fused_equal_apart(kernels, launched: list[str], emulated: bool) -> None:
    """to_coset_evaluations with the inverse's last pass and the forward's first as one kernel
    (`fuse_coset`, ntt_dif_dit_pass) equals the two passes apart, bit for bit: one pass or several,
    unrolled stage counts (8, 9, 10) and generic ones, smaller blocks, a scale; and plans whose two
    passes over the low bits differ in size fall back to the passes apart."""
    # (log_n, block_log, (dif plan, dit plan), fused): 2^11's default plan is 6, 5 both ways, so its
    # inverse ends on 5 bits and its forward starts on 6.
    cases = [(log_n, None, None, log_n != 11) for log_n in (1, 2, 5, 8, 9, 10, 11, 16)]
    cases += [(11, 7, None, False), (16, 5, None, True), (11, None, ((4, 3, 4), (4, 3, 4)), True),
              (11, None, ((6, 5), (6, 5)), False)]
    if not emulated:
        cases += [(20, None, None, True), (24, None, None, True), (22, None, None, False)]
    for log_n, block_log, plans, fused in cases:
        root, shift, scale = fr_root_of_unity(log_n), fr_root_of_unity(log_n + 1), 1 + log_n
        x = random_mont(1 << log_n, 400 + log_n)
        outs = []
        for fuse in (True, False):
            ntt = DeviceNtt(kernels)
            ntt.fuse_coset = fuse
            if block_log is not None:
                ntt.block_log = block_log
            if plans is not None:
                ntt.pass_plans[("dif", log_n)], ntt.pass_plans[("dit", log_n)] = plans
            launched.clear()
            outs.append(_run(kernels, ntt, lambda v, L=log_n, t=ntt, w=root, g=shift, c=scale:
                             t.to_coset_evaluations(v, L, w, g, c), x))
            assert ("ntt_dif_dit_pass" in launched) == (fuse and fused), (log_n, block_log, plans, fuse)
        assert np.array_equal(*outs), (log_n, block_log, plans)


@pytest.mark.parametrize("log_n", [1, 2, 6, 11])
def test_h_quotient_is_the_cpu_provers_on_any_inputs(kernels, log_n: int) -> None:
    """The six-transform quotient equals the CPU prover's (`prover.quotient`) on random a, b, c, which
    hold no constraint (so the two agree even on a witness the checks would refuse), Montgomery and
    canonical, the default root and another of the same order; where c = a·b it also equals
    bellperson's seven (`quotient_transforms` = 7)."""
    from cuzk.groth16.prover import Reduction, quotient, quotient_shift

    n = 1 << log_n
    red = Reduction(quotient_shift(n), divide=True)
    for root in (fr_root_of_unity(log_n), pow(fr_root_of_unity(log_n), 5, R_MODULUS)):
        a, b, c = (random_mont(n, 10 * log_n + i) for i in range(3))
        for satisfied in (False, True):
            if satisfied:
                c = fr_vec.mul(a, b)
            want = quotient(Domain(log_n, root), red, a.copy(), b.copy(), c.copy())
            for transforms, fuse_product in ((6, True), (6, False), (7, False))[:3 if satisfied else 2]:
                for canonical in (False, True):
                    ntt = DeviceNtt(kernels)
                    ntt.quotient_transforms, ntt.fuse_product = transforms, fuse_product
                    vecs = [kernels.to_device((fr_vec.from_montgomery(v) if canonical else v).view(np.uint32)
                                              .reshape(-1, 8)) for v in (a, b, c)]
                    out = kernels.to_host(ntt.h_quotient(*vecs, log_n, root, canonical=canonical))
                    got = out.view(np.uint64).reshape(-1, 4)
                    assert np.array_equal(got, fr_vec.from_montgomery(want) if canonical else want), \
                        (root, satisfied, transforms, fuse_product, canonical)
    ntt = DeviceNtt(kernels)
    vecs = [kernels.to_device(random_mont(n, i).view(np.uint32).reshape(-1, 8)) for i in range(3)]
    with pytest.raises(ValueError, match="shift\\^n = -1"):
        ntt.h_quotient(*vecs, log_n, shift=FR_GENERATOR)


def test_inverse_coset_scale_is_fused(kernels) -> None:
    """icoset_ntt's extra scale (the H polynomial's 1/Z) equals scaling the coefficients afterwards."""
    ntt = DeviceNtt(kernels)
    log_n, scale = 10, 123456789
    x = random_mont(1 << log_n, 5)
    want = fr_vec.mul_scalar(Domain(log_n).icoset_ntt(x.copy(), 5), scale)
    assert np.array_equal(_run(kernels, ntt, lambda v: ntt.icoset_ntt(v, log_n, 5, scale=scale), x), want)


def test_bit_reversal_matches_numpy(kernels, emulated: bool) -> None:
    """Both permutation kernels (element-wise below 2^8 points, by tiles from 2^8 on; odd and even
    numbers of middle bits), against the index permutation computed on the host."""
    ntt = DeviceNtt(kernels)
    for log_n in list(range(0, 13)) + ([] if emulated else [17, 20]):
        n = 1 << log_n
        x = random_mont(n, 500 + log_n)
        perm = np.array([int(format(i, f"0{log_n}b")[::-1], 2) if log_n else 0 for i in range(n)])
        assert np.array_equal(_run(kernels, ntt, lambda v, L=log_n: ntt.bitrev(v, L), x), x[perm]), log_n


def test_edge_inputs_and_other_roots(kernels) -> None:
    """Zero and one vectors, and a root other than bellperson's (snarkjs keys pick their own)."""
    ntt = DeviceNtt(kernels)
    log_n = 9
    n = 1 << log_n
    root = pow(fr_root_of_unity(log_n), 5, R_MODULUS)  # odd power: still of order exactly 2^9
    dom = Domain(log_n, root)
    zero = np.zeros((n, 4), np.uint64)
    one = np.tile(fr_vec.mont(1), (n, 1))
    for x in (zero, one, random_mont(n, 3)):
        assert np.array_equal(_run(kernels, ntt, lambda v: ntt.ntt(v, log_n, root), x), dom.ntt(x.copy()))
        assert np.array_equal(_run(kernels, ntt, lambda v: ntt.icoset_ntt(v, log_n, 5, root), x),
                              dom.icoset_ntt(x.copy(), 5))
    assert np.array_equal(_run(kernels, ntt, lambda v: ntt.ntt(v, log_n), zero), zero)


@pytest.mark.parametrize("circuit_id,canonical", [("mimc-10", False), ("mimc-10", True), ("bits-3", True)])
def test_h_polynomial_matches_cpu_prover(kernels, mimc_params, bits_params, circuit_id: str,
                                         canonical: bool) -> None:
    """Montgomery in and out, or (the CUDA backend's way) canonical integers with the conversions
    folded into the transforms' scales."""
    params = mimc_params if circuit_id == "mimc-10" else bits_params
    pk = params.pk
    asg = Assignment.from_proving_assignment(
        synthesize_for_proving(lookup(circuit_id).example(random.Random(4)), check=True))
    m = pk.domain_size
    log_n = m.bit_length() - 1
    ntt = DeviceNtt(kernels)
    vecs = []
    for v in (asg.a, asg.b, asg.c):
        d = kernels.xp.zeros((m, 8), dtype=kernels.xp.uint32)
        d[: v.shape[0]] = kernels.to_device(np.ascontiguousarray(v).view(np.uint32).reshape(-1, 8))
        vecs.append(d if canonical else ntt.to_montgomery(d))
    h = ntt.h_quotient(*vecs, log_n, pk.domain_root, canonical=canonical)
    if not canonical:
        ntt.from_montgomery(h)
    got = kernels.to_host(h[: m - 1]).view(np.uint64).reshape(-1, 4)
    assert np.array_equal(got, compute_h(pk, asg))


def test_coset_quotient_without_division_canonical(kernels) -> None:
    """divide=False (snarkjs): the evaluations of A*B - C on the coset, canonical in and out, equal the
    Montgomery run converted."""
    ntt = DeviceNtt(kernels)
    log_n = 8
    raw = [fr_vec.from_montgomery(random_mont(1 << log_n, 40 + i)) for i in range(3)]

    def run(canonical: bool) -> np.ndarray:
        vecs = [kernels.to_device(np.ascontiguousarray(v).view(np.uint32).reshape(-1, 8)) for v in raw]
        if not canonical:
            vecs = [ntt.to_montgomery(v) for v in vecs]
        out = ntt.h_quotient(*vecs, log_n, shift=7, divide=False, canonical=canonical)
        if not canonical:
            ntt.from_montgomery(out)
        return kernels.to_host(out).view(np.uint64).reshape(-1, 4)

    got = run(True)
    assert np.array_equal(got, run(False))
    assert got.any()
