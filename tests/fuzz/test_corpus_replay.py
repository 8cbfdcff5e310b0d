"""Replay the committed fuzzing corpus (fuzz/corpus/<target>/) through every parser.

Each input must be accepted or refused with a CuzkError, within a few seconds: no other exception, no
crash, no hang. The corpus holds the seeds, what the atheris runs kept for new coverage, and every
input that once found a bug (fuzz/corpus/*/regression-*)."""

from __future__ import annotations

import time

import pytest
from fuzz.targets import corpus_files, fuzz_targets

from cuzk.errors import CuzkError

#: An input slower than this is a hang (the atheris runs use the same limit).
PER_INPUT_S = 10.0


def test_every_target_has_a_corpus() -> None:
    for target in fuzz_targets.TARGETS:
        assert corpus_files(target), f"fuzz/corpus/{target} is empty"


def _replay(target: str, name: str, data: bytes) -> tuple[bool, float]:
    start = time.monotonic()
    try:
        ok = fuzz_targets.run_clean(target, data)
    except CuzkError:  # pragma: no cover - run_clean returns False for these
        raise
    except Exception as err:
        raise AssertionError(f"fuzz/corpus/{target}/{name}: {type(err).__name__}: {err}") from err
    return ok, time.monotonic() - start


@pytest.mark.parametrize("target", sorted(fuzz_targets.TARGETS))
def test_corpus_replays_cleanly(target: str) -> None:
    accepted = refused = 0
    for path in corpus_files(target):
        data = path.read_bytes()
        ok, elapsed = _replay(target, path.name, data)
        if elapsed >= PER_INPUT_S:
            # The first input reaching a numba kernel pays its compilation (seconds on a fresh checkout,
            # once per process): only a second slow run is a hang.
            ok, elapsed = _replay(target, path.name, data)
        assert elapsed < PER_INPUT_S, f"fuzz/corpus/{target}/{path.name} took {elapsed:.1f} s, twice"
        accepted += ok
        refused += not ok
    assert accepted + refused == len(corpus_files(target))
    assert accepted >= 1, f"no input of fuzz/corpus/{target} is valid: the seeds are missing"
