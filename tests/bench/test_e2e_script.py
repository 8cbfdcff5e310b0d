"""`benchmarks/e2e/bench_porep_e2e.py`'s own logic: with `--deadline` each memory limit's batch stops
submitting in time for its proofs in flight, the verification and the daemon's stop to fit the
budget, and is stopped outright only just before it (limits given explicitly stay when tighter);
the host memory sampler keeps the least memory available while the daemon ran."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "e2e" / "bench_porep_e2e.py"


@pytest.fixture(scope="module")
def e2e():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("bench_porep_e2e", SCRIPT)
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def test_without_a_deadline_the_limits_are_as_given(e2e) -> None:  # type: ignore[no-untyped-def]
    assert e2e.batch_limits(None, None, None, 90, 1, 0.0) == (None, None)
    assert e2e.batch_limits(120, 300, None, 90, 1, 0.0) == (120, 300)


def test_a_deadline_leaves_the_reserve_and_shares_the_rest_among_the_runs_left(e2e) -> None:  # type: ignore
    # 400 s left: one run submits for 310 s and is stopped at 370; two runs get 155 s each.
    assert e2e.batch_limits(None, None, 1000.0, 90, 1, 600.0) == (310.0, 370.0)
    assert e2e.batch_limits(None, None, 1000.0, 90, 2, 600.0) == (155.0, 370.0)
    # explicit limits stay when they are the tighter ones
    assert e2e.batch_limits(100, 200, 1000.0, 90, 1, 600.0) == (100, 200)
    assert e2e.batch_limits(500, 500, 1000.0, 90, 1, 600.0) == (310.0, 370.0)
    # past the budget: the batch still gets a second, and says so in the record rather than hanging
    assert e2e.batch_limits(None, None, 1000.0, 90, 1, 1100.0) == (1.0, 1.0)


def test_a_deadline_that_is_not_positive_is_refused() -> None:
    out = subprocess.run([sys.executable, str(SCRIPT), "--root", "/nonexistent", "--deadline", "0"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 2 and "--deadline must be > 0 seconds, got 0" in out.stderr


def test_the_host_memory_sampler_keeps_the_least_available_memory_seen(e2e, tmp_path: Path) -> None:  # type: ignore
    import time

    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:       1000 kB\nMemFree:  10 kB\nMemAvailable:    600 kB\n")
    sampler = e2e.HostMemorySampler(interval=0.01, meminfo=meminfo)
    deadline = time.monotonic() + 10
    while sampler.samples < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    meminfo.write_text("MemTotal:       1000 kB\nMemAvailable:    200 kB\n")
    while sampler.min_available != 200 << 10 and time.monotonic() < deadline:
        time.sleep(0.01)
    meminfo.write_text("MemTotal:       1000 kB\nMemAvailable:    900 kB\n")
    time.sleep(0.05)
    got = sampler.stop()
    assert got["total_bytes"] == 1000 << 10 and got["min_available_bytes"] == 200 << 10
    assert got["peak_used_bytes"] == 800 << 10 and got["samples"] >= 3
    assert e2e.HostMemorySampler(meminfo=tmp_path / "absent").stop() == {
        "error": f"{tmp_path / 'absent'} could not be read", "samples": 0}
