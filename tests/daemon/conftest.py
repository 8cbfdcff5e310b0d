"""Fixtures for lifecycle tests: real `cuzk daemon ...` processes, each found by pid file and start time.

Every daemon a test starts is killed in the finalizer if it is still alive (by pid, after checking its
start time), with its worker processes, whatever the test did. State directories, sockets and
parameters live in the test's temporary directory; $XDG_STATE_HOME points there too.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from cuzk.config import config_from_dict
from cuzk.daemon.identity import Identity
from cuzk.daemon.pidfile import ProcessRef, process_start_ticks
from cuzk.daemon.state import StateDir
from cuzk.providers.debug import debug_params_path, generate_debug_params
from cuzk.server.client import CuzkClient

CLI = (sys.executable, "-m", "cuzk.cli.main")
LIFECYCLE_CIRCUITS = ("mimc-3", "mimc-4")
READY_S = 300  # a fresh checkout compiles numba kernels in the first workers


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cuzk(*args: str | Path, timeout: float = 180, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """Run the cuzk CLI as a separate process (as an operator would)."""
    return subprocess.run([*CLI, *map(str, args)], capture_output=True, text=True, timeout=timeout, check=False,
                          stdin=subprocess.DEVNULL, env=env)


def wait_for(condition: Callable[[], Any], timeout: float, what: str, poll: float = 0.05) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(poll)
    raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")


def port_bindable(addr: str) -> bool:
    host, _, port = addr.rpartition(":")
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, int(port)))
        except OSError:
            return False
    return True


class Reaper:
    """Kills, at teardown, every daemon process (and its workers) a test left alive."""

    def __init__(self) -> None:
        self.states: list[Path] = []
        self.refs: list[ProcessRef] = []
        self.popens: list[subprocess.Popen] = []

    def watch(self, ref: ProcessRef) -> None:
        """Remember a process and its current descendants (call before killing it, while they exist)."""
        self.refs += [ref, *ref.children()]

    def track(self, proc: subprocess.Popen) -> subprocess.Popen:
        self.popens.append(proc)
        ticks = process_start_ticks(proc.pid)
        if ticks is not None:
            self.refs.append(ProcessRef(proc.pid, ticks))
        return proc

    def cleanup(self) -> None:
        for root in self.states:
            ident = Identity.from_record(StateDir(root).read_record())
            if ident is not None and ident.process.alive:
                self.watch(ident.process)
        for ref in list(self.refs):
            if ref.alive:
                self.refs += ref.children()
        for ref in self.refs:
            ref.signal(signal.SIGKILL)
        for proc in self.popens:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(10)


@pytest.fixture
def reaper() -> Iterator[Reaper]:
    r = Reaper()
    try:
        yield r
    finally:
        r.cleanup()


@pytest.fixture(scope="session")
def lifecycle_params(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("lifecycle-params")
    for circuit in LIFECYCLE_CIRCUITS:
        generate_debug_params(circuit, str(debug_params_path(root, circuit)))
    return root


@pytest.fixture(scope="session", autouse=True)
def private_state_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    home = tmp_path_factory.mktemp("xdg-state")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("XDG_STATE_HOME", str(home))
        yield home


@dataclass
class Site:
    """A directory with a daemon config (test circuits, tiny budget, 1 synthesis and 1 prover worker)."""

    root: Path
    params: Path
    reaper: Reaper
    unix_addr: str = ""
    tcp_addr: str = ""
    http_addr: str = ""
    settings: dict[str, dict[str, Any]] = field(default_factory=dict)
    last_start: subprocess.CompletedProcess | None = None

    def __post_init__(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        cache = self.root / "params"
        if not cache.exists():
            shutil.copytree(self.params, cache)
        self.unix_addr = f"unix://{self.root / 'cuzk.sock'}"
        self.tcp_addr = f"127.0.0.1:{free_port()}"
        self.http_addr = f"127.0.0.1:{free_port()}"
        self.settings = {
            "daemon": {"listen": [self.unix_addr, self.tcp_addr], "status_listen": self.http_addr,
                       "state_dir": "state", "shutdown_grace": "30s"},
            "srs": {"param_cache": str(cache)},
            "memory": {"total_budget": "3GiB", "eviction_min_idle": "0s"},
            "pipeline": {"max_parallel_synthesis": 1},
            "gpus": {"gpu_workers_per_device": 1},
            "debug": {"test_circuits": True},
        }
        self.reaper.states.append(self.state_dir)
        self.write()

    @property
    def config(self) -> Path:
        return self.root / "cuzk.toml"

    @property
    def state_dir(self) -> Path:
        return self.root / "state"

    @property
    def state(self) -> StateDir:
        return StateDir(self.state_dir)

    def write(self, **sections: dict[str, Any]) -> str:
        """Update the config file; its fingerprint."""
        for name, values in sections.items():
            self.settings.setdefault(name, {}).update(values)
        config = config_from_dict(self.settings, source=str(self.config))
        self.config.write_text(config.to_toml())
        return config.fingerprint()

    def cli(self, *args: str | Path, timeout: float = 180) -> subprocess.CompletedProcess:
        return cuzk(*args, timeout=timeout)

    def start(self, *extra: str) -> dict[str, Any]:
        """`cuzk daemon start --json`; the new instance's status (fails the test if start fails)."""
        proc = self.cli("daemon", "start", "--config", self.config, "--json", "--wait-ready", str(READY_S), *extra,
                        timeout=READY_S + 60)
        self.last_start = proc
        ident = Identity.from_record(self.state.read_record())
        if ident is not None:
            self.reaper.watch(ident.process)
        assert proc.returncode == 0, f"start failed ({proc.returncode}):\n{proc.stderr}\n{proc.stdout}"
        return json.loads(proc.stdout)

    def status(self) -> tuple[int, dict[str, Any]]:
        proc = self.cli("daemon", "status", "--config", self.config, "--json")
        return proc.returncode, json.loads(proc.stdout)

    def stop(self, *extra: str) -> subprocess.CompletedProcess:
        return self.cli("daemon", "stop", "--config", self.config, *extra)

    def client(self, *, timeout: float | None = 30.0) -> CuzkClient:
        return CuzkClient(self.unix_addr, timeout=timeout)

    def run_foreground(self, *, env: dict[str, str] | None = None) -> subprocess.Popen:
        """`cuzk daemon run` as this test's child (for exit codes and signals), in its own process group
        (as in a terminal, where Ctrl-C signals the whole group), output in run.log."""
        with open(self.root / "run.log", "ab") as log:
            proc = subprocess.Popen([*CLI, "daemon", "run", "--config", str(self.config)], stdout=log,
                                    stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, process_group=0,
                                    env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})})
        return self.reaper.track(proc)

    def wait_ready(self, proc: subprocess.Popen | None = None) -> None:
        with self.client(timeout=2) as c:
            alive = (lambda: proc.poll() is None) if proc is not None else None
            try:
                c.wait_ready(READY_S, alive=alive)
            except Exception:
                raise AssertionError(f"not ready; run.log:\n{self.run_log()}") from None

    def run_log(self) -> str:
        path = self.root / "run.log"
        return path.read_text(errors="replace") if path.exists() else ""


@pytest.fixture
def site(tmp_path: Path, lifecycle_params: Path, reaper: Reaper) -> Site:
    return Site(tmp_path / "site", lifecycle_params, reaper)


def measure_cli_startup() -> float:
    """Seconds `cuzk --version` takes here now: the interpreter and CLI imports every command pays."""
    t0 = time.monotonic()
    subprocess.run([*CLI, "--version"], capture_output=True, check=True, timeout=60)
    return time.monotonic() - t0
