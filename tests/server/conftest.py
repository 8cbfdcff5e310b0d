"""Live-daemon fixtures: `cuzk daemon run` as a real process, found and stopped by its pid.

Readiness is polled through grpc.health.v1 (never by sleeping or reading logs). The daemon listens
on a unix socket in the test's directory, on a free loopback TCP port and serves HTTP /status and
/metrics on another. Test-circuit parameters are generated once per session and copied in.

Each daemon keeps its state (pid file, journal, logs) in its own directory, and stops without a
shutdown grace unless a test asks for one; $XDG_STATE_HOME points into the session's temporary
directory so that a daemon started without a state directory never touches the user's.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
import pytest

from cuzk.config import config_from_dict
from cuzk.providers.debug import debug_params_path, generate_debug_params
from cuzk.server.client import CuzkClient

SERVER_CIRCUITS = ("mimc-3", "mimc-4", "bits-1")
READY_TIMEOUT_S = 600  # a fresh checkout compiles numba kernels in every worker on first start


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session", autouse=True)
def private_state_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("xdg-state")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("XDG_STATE_HOME", str(home))
        yield home


@dataclass
class LiveDaemon:
    proc: subprocess.Popen
    unix_addr: str
    tcp_addr: str
    http_addr: str
    root: Path
    log_path: Path
    config_path: Path

    def client(self, *, tcp: bool = False, timeout: float | None = 30.0) -> CuzkClient:
        return CuzkClient(self.tcp_addr if tcp else self.unix_addr, timeout=timeout)

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def tree_rss(self) -> int:
        """RSS of the daemon and all its worker processes."""
        try:
            root = psutil.Process(self.proc.pid)
            procs = [root, *root.children(recursive=True)]
        except psutil.NoSuchProcess:
            return 0
        total = 0
        for p in procs:
            try:
                total += p.memory_info().rss
            except psutil.NoSuchProcess:
                continue
        return total

    def stop(self, timeout: float = 30.0) -> int:
        """SIGTERM by pid, then SIGKILL if it does not exit; returns the exit status."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        return self.proc.returncode


def start_daemon(root: Path, params: Path, *, expect_ready: bool = True, **sections: dict[str, Any]) -> LiveDaemon:
    """Write a config under `root`, start the daemon, wait until it serves (or, if not expected to, exits)."""
    root.mkdir(parents=True, exist_ok=True)
    cache = root / "params"
    cache.mkdir(exist_ok=True)
    for f in params.iterdir():
        shutil.copy(f, cache / f.name)
    unix_addr = f"unix://{root / 'cuzk.sock'}"
    tcp_addr = f"127.0.0.1:{free_port()}"
    http_addr = f"127.0.0.1:{free_port()}"
    data: dict[str, dict[str, Any]] = {
        "daemon": {"listen": [unix_addr, tcp_addr], "status_listen": http_addr, "state_dir": str(root / "state"),
                   "shutdown_grace": "0s"},
        "srs": {"param_cache": str(cache)},
        "memory": {"total_budget": "3GiB", "eviction_min_idle": "0s"},
        "debug": {"test_circuits": True},
    }
    for name, values in sections.items():
        data.setdefault(name, {}).update(values)
    config_path = root / "cuzk.toml"
    config_path.write_text(config_from_dict(data).to_toml())
    log_path = root / "daemon.log"
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    env.pop("CUZK_LOG_LEVEL", None)
    with open(log_path, "wb") as log:
        proc = subprocess.Popen([sys.executable, "-m", "cuzk.cli.main", "daemon", "run", "--config", str(config_path)],
                                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env, cwd=root)
    daemon = LiveDaemon(proc, unix_addr, tcp_addr, http_addr, root, log_path, config_path)
    if expect_ready:
        try:
            with daemon.client(timeout=2) as client:
                client.wait_ready(READY_TIMEOUT_S, alive=lambda: daemon.alive)
        except BaseException:
            daemon.stop()
            raise RuntimeError(f"the daemon did not become ready; its log:\n{daemon.log()}") from None
    return daemon


@pytest.fixture(scope="session")
def server_params(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("server-params")
    for circuit in SERVER_CIRCUITS:
        generate_debug_params(circuit, str(debug_params_path(root, circuit)))
    return root


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory, server_params: Path) -> LiveDaemon:
    """One daemon for a module's RPC tests: 3 GiB budget, eviction without idle delay, and Prove
    disconnects cancel their job."""
    d = start_daemon(tmp_path_factory.mktemp("daemon"), server_params,
                     daemon={"on_prove_disconnect": "cancel"})
    yield d
    code = d.stop()
    assert code == 0, f"the daemon exited with {code} on SIGTERM; log:\n{d.log()}"


def read_config(d: LiveDaemon) -> dict[str, Any]:
    return tomllib.loads(d.config_path.read_text())
