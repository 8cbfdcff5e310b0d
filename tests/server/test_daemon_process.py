"""`cuzk daemon run` as a process: startup errors that name their cause, socket handling, SIGTERM."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from server.conftest import start_daemon

from cuzk.server._gen import proving_pb2 as pb
from cuzk.server.client import build_submit, payload_for_test_circuit


def run_daemon_cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cuzk.cli.main", "daemon", "run", *args], capture_output=True,
                          text=True, timeout=timeout, check=False, stdin=subprocess.DEVNULL)


@pytest.mark.parametrize(("config", "message"), [
    ("[memory]\ntotal_budget = \"512G\"\n", "memory.total_budget: '512G' is not a size"),
    ("[scheduler]\nsort_by_kind = true\n", "unknown key scheduler.sort_by_kind"),
    ("[gpus]\nbackend = \"cuda\"\n", "gpus.backend = \"cuda\""),  # no CUDA backend or no GPU here
])
def test_bad_configs_stop_the_daemon_with_the_reason(tmp_path: Path, config: str, message: str) -> None:
    path = tmp_path / "cuzk.toml"
    path.write_text(config + f"[daemon]\nlisten = \"unix://{tmp_path / 's.sock'}\"\n")
    proc = run_daemon_cli("--config", str(path))
    assert proc.returncode == 2 and message in proc.stderr and "Traceback" not in proc.stderr, proc.stderr


def test_a_missing_config_file_is_an_error(tmp_path: Path) -> None:
    proc = run_daemon_cli("--config", str(tmp_path / "absent.toml"))
    assert proc.returncode == 2 and "absent.toml does not exist" in proc.stderr


def test_taken_addresses_are_refused_before_any_work_starts(tmp_path: Path) -> None:
    config = tmp_path / "cuzk.toml"
    config.write_text(f"[srs]\nparam_cache = \"{tmp_path}\"\n[memory]\ntotal_budget = \"3GiB\"\n")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = run_daemon_cli("--config", str(config), "--listen", f"127.0.0.1:{port}", timeout=60)
    assert proc.returncode == 2 and f"cannot listen on 127.0.0.1:{port}" in proc.stderr, proc.stderr
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as live:
        live.bind(str(tmp_path / "live.sock"))
        live.listen()
        proc = run_daemon_cli("--config", str(config), "--listen", f"unix://{tmp_path / 'live.sock'}", timeout=60)
    assert proc.returncode == 2 and "another process is already listening on unix://" in proc.stderr
    not_a_socket = tmp_path / "file.sock"
    not_a_socket.write_text("x")
    proc = run_daemon_cli("--config", str(config), "--listen", f"unix://{not_a_socket}", timeout=60)
    assert proc.returncode == 2 and "exists and is not a socket" in proc.stderr


def test_stale_socket_is_replaced_and_sigterm_cancels_work(tmp_path: Path, server_params: Path) -> None:
    root = tmp_path / "d"
    root.mkdir()
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(str(root / "cuzk.sock"))  # a socket file nobody listens on, as a killed daemon leaves
    stale.close()
    d = start_daemon(root, server_params)
    results: list[pb.AwaitProofResponse] = []
    try:
        with d.client() as c:
            c.submit(build_submit("test", request_id="long", vanilla_proof=payload_for_test_circuit(
                "mimc-3", partitions=4, synth_delay_ms=3000)))

            def wait() -> None:
                results.append(c.await_proof("long", 60_000, rpc_timeout=60))

            waiter = threading.Thread(target=wait)
            waiter.start()
            assert c.status().queues  # the daemon answers while the job runs
            code = d.stop()
            waiter.join(30)
    finally:
        d.stop()
    assert code == 0, d.log()
    assert results and results[0].status == pb.AwaitProofResponse.CANCELLED
    assert "shutting down" in results[0].error_message
    assert not (root / "cuzk.sock").exists()
