"""The soak (`benchmarks/e2e/bench_soak.py`): a daemon under a mixed stream with faults injected from a
seed, its verdicts asserted. $CUZK_SOAK_SECONDS sets the length (default: 10 minutes under CI=true,
90 s elsewhere); $CUZK_SOAK_SEED the seed. A short one on an emulated CUDA card (`--emulate`) checks
the device's memory series and what a killed daemon or device process leaves of the card."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "e2e" / "bench_soak.py"


def soak_module():  # type: ignore[no-untyped-def]
    sys.path.insert(0, str(SCRIPT.parent))
    spec = importlib.util.spec_from_file_location("bench_soak", SCRIPT)
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    sys.modules["bench_soak"] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def test_growth_is_the_fitted_slope_over_the_window_without_restart_warm_ups() -> None:
    soak = soak_module()
    flat = [{"t": float(t), "x": 100 + (t % 2)} for t in range(60)]
    g = soak.growth(flat, "x", start=10, skip=[])
    assert abs(g["growth"]) < 1 and g["samples"] == 50
    leaking = [{"t": float(t), "x": 100 + 10 * t} for t in range(60)]
    assert soak.growth(leaking, "x", start=10, skip=[])["growth"] == pytest.approx(490)
    # a restart drops the series and it climbs back: the climb is left out, the plateau is flat
    restarted = [{"t": float(t), "x": (t - 30) * 50 if 30 <= t < 35 else 300} for t in range(60)]
    assert abs(soak.growth(restarted, "x", start=10, skip=[(30, 35)])["growth"]) < 1e-6
    assert soak.bound("tree_fds", 100, 0) == pytest.approx(26)
    assert soak.bound("log_bytes", 0, 10) == (1 << 20) + 81920
    assert soak.bound("cuda_pool_held:cuda0", 100 << 20, 0) == pytest.approx(26 << 20)


def test_a_daemon_whose_status_never_answered_fails_the_status_verdict() -> None:
    """An instance that proves but whose /status refuses every request (as one on an H100 did after
    its first restart) is named, with the error; one that answered once, or died in its warm-up, is not."""
    rows = [{"t": 5.0, "pid": 1, "budget_reserved": 10}, {"t": 30.0, "pid": 1, "budget_reserved": 10},
            {"t": 101.0, "pid": 2, "status_error": "URLError: refused"},
            {"t": 130.0, "pid": 2, "status_error": "URLError: refused", "status_listeners": ["2 127.0.0.1:9"]},
            {"t": 205.0, "pid": 3, "status_error": "URLError: refused"}]
    assert soak_module().status_gaps(rows, [0.0, 100.0, 200.0], 20.0) == [
        {"start": 100.0, "samples": 1, "error": "URLError: refused", "listening": ["2 127.0.0.1:9"]}]


def test_listeners_name_the_tcp_ports_the_daemons_processes_listen_on() -> None:
    import psutil

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        assert f"{os.getpid()} 127.0.0.1:{port}" in soak_module().listeners([psutil.Process()])


def test_a_second_soak_on_a_root_in_use_is_refused(tmp_path: Path) -> None:
    import fcntl

    with open(tmp_path / ".soak.lock", "a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        proc = subprocess.run([sys.executable, str(SCRIPT), "--duration", "1", "--root", str(tmp_path)],
                              capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "another soak is running on it" in proc.stderr


def test_device_memory_is_sampled_per_device_where_the_status_reports_it() -> None:
    soak = soak_module()
    samples = [{"t": 0.0, "cuda_driver_used:cuda1": 3, "cuda_pool_used:cuda0": 1, "tree_rss": 5},
               {"t": 1.0, "cuda_pool_used:cuda1": 2, "cuda_pool_held:cuda0": 2}]
    assert soak.device_series(samples) == ["cuda_pool_used:cuda0", "cuda_pool_used:cuda1", "cuda_pool_held:cuda0",
                                           "cuda_driver_used:cuda1"]
    assert soak.device_series([{"t": 0.0, "tree_rss": 5}]) == []  # a CPU backend: none


@pytest.mark.slow
def test_soak_answers_every_id_once_with_verified_proofs_and_nothing_left_behind(tmp_path: Path) -> None:
    seconds = float(os.environ.get("CUZK_SOAK_SECONDS") or (600 if os.environ.get("CI") == "true" else 90))
    seed = os.environ.get("CUZK_SOAK_SEED", "1")
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, str(SCRIPT), "--duration", str(seconds), "--seed", seed, "--root",
                           str(tmp_path / "root"), "--out", str(out), "--fault-every", str(min(30.0, seconds / 6))],
                          capture_output=True, text=True, timeout=seconds + 1800, check=False)
    [path] = out.glob("soak-*.json")
    record = json.loads(path.read_text())
    assert (out / path.name.replace(".json", ".png")).stat().st_size > 0
    checks = record["checks"]
    detail = {k: record[k] for k in ("requests", "deadlines_by_priority", "critical_missed_outside_restarts",
                                     "leftover_processes", "leftover_shm", "faults")}
    detail["growth"] = {n: g for n, g in record["growth"].items() if not g["ok"]}
    tail = f"{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
    assert all(checks.values()), f"{checks}\n{json.dumps(detail, indent=1)}\n{tail}"
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert record["requests"]["completed"] > 0 and {f["fault"] for f in record["faults"]}


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("g++") is None, reason="the emulated device builds its kernels with g++")
def test_an_emulated_cuda_soak_keeps_the_pool_and_driver_memory_flat_through_kills(tmp_path: Path) -> None:
    """Test circuits on a 4 GiB emulated card for 40 s (about a minute in all), a daemon and a device
    process killed: every id answered and verified, the pool's and the driver's bytes flat, the card
    not left held."""
    out = tmp_path / "out"
    others = ("kill-synth", "sigterm", "disconnect", "disk-full", "corrupt-param")
    skip = [arg for fault in others for arg in ("--skip-fault", fault)]
    proc = subprocess.run([sys.executable, str(SCRIPT), "--emulate", "4GiB", "--duration", "40", "--warmup", "12",
                           "--fault-every", "8", "--interval", "1", "--restart-warmup", "6", *skip,
                           "--root", str(tmp_path / "root"), "--out", str(out)],
                          capture_output=True, text=True, timeout=900, check=False)
    [path] = out.glob("soak-cuda-emulated-*.json")
    record = json.loads(path.read_text())
    tail = f"{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
    assert record["backend"] == "cuda-emulated" and all(record["checks"].values()), f"{record['checks']}\n{tail}"
    assert proc.returncode == 0, tail
    assert {f["fault"] for f in record["faults"]} == {"kill-daemon", "kill-device"}
    device = {n: g for n, g in record["growth"].items() if n.endswith(":cuda0")}
    assert sorted(device) == ["cuda_driver_used:cuda0", "cuda_pool_held:cuda0", "cuda_pool_used:cuda0"]
    assert all(g["ok"] and g["median"] > 0 for g in device.values()), device
    assert record["leftover_held"] == [] and not (tmp_path / "root" / "emulated-gpus").exists()
