"""A live daemon for the bench tests (the server tests' start_daemon), with test-circuit parameters
generated once per session, and one real `cuzk bench batch` run whose record several tests read."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from server.conftest import LiveDaemon, start_daemon

from cuzk.cli.main import main
from cuzk.providers.debug import debug_params_path, generate_debug_params

BENCH_CIRCUITS = ("mimc-3", "mimc-4")


@pytest.fixture(scope="session")
def bench_params(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("bench-params")
    for circuit in BENCH_CIRCUITS:
        generate_debug_params(circuit, str(debug_params_path(root, circuit)))
    return root


@pytest.fixture(scope="module")
def bench_daemon(tmp_path_factory: pytest.TempPathFactory, bench_params: Path) -> LiveDaemon:
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("XDG_STATE_HOME", str(tmp_path_factory.mktemp("bench-xdg")))
        d = start_daemon(tmp_path_factory.mktemp("bench-daemon"), bench_params)
        yield d
        code = d.stop()
    assert code == 0, f"the daemon exited with {code} on SIGTERM; log:\n{d.log()}"


def run_cli(*argv: str) -> int:
    return main(list(argv))


@pytest.fixture(scope="module")
def batch_run(bench_daemon: LiveDaemon, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """`cuzk bench batch`: 2 repetitions of 5 two-partition proofs, 2 in flight, one warm-up, with a
    40 ms synthesis delay so that synthesis is long enough to compare at millisecond resolution."""
    out = tmp_path_factory.mktemp("batch")
    code = run_cli("bench", "batch", "--addr", bench_daemon.unix_addr, "-t", "mimc-4", "--partitions", "2",
                   "--synth-delay-ms", "40", "-c", "5", "-j", "2", "--warmup", "1", "--repeat", "2",
                   "--json", str(out / "batch.json"), "--timeline", str(out / "batch.png"), "--no-progress")
    record = json.loads((out / "batch.json").read_text())
    return {"code": code, "record": record, "dir": out}


def chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def dump_dom(url: str) -> str:
    """The DOM after the page's scripts ran, from headless Chromium."""
    exe = chromium()
    if exe is None:
        pytest.skip("chromium is not installed (apt-get install -y chromium; .ci/run installs it)")
    out = subprocess.run([exe, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                          "--virtual-time-budget=5000", "--dump-dom", url],
                         capture_output=True, text=True, timeout=120, check=False)
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout
