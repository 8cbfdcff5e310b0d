"""A live daemon whose state directory fills up: new work is refused with UNAVAILABLE naming the
directory, accepted work finishes and is journaled once space returns, the daemon takes new work
again by itself, and its log file on that disk is said unwritable in one line, not a traceback a
record. The state directory is a small tmpfs (skipped where mounting is not allowed)."""

from __future__ import annotations

import contextlib
import json
import sqlite3
import subprocess
import threading
import urllib.request
from pathlib import Path

import grpc
import pytest
from server.conftest import start_daemon
from server.test_live_daemon import check_proof, rpc_error, submit

from cuzk.server._gen import proving_pb2 as pb

pytestmark = pytest.mark.slow


def fill(directory: Path) -> Path:
    """Write a ballast file until the file system is full, then fill the last pages of the daemon's
    log files (a byte at a time: small writes fit where a page still has room); the ballast file
    (remove it to free the space)."""
    ballast = directory / "ballast"
    with open(ballast, "wb", buffering=0) as f, contextlib.suppress(OSError):
        while True:
            f.write(b"\0" * 65536)
    for log in (directory / "logs").glob("*.log"):
        with open(log, "ab", buffering=0) as f, contextlib.suppress(OSError):
            while True:
                f.write(b"\n")
    return ballast


def journal_status(daemon: object) -> dict:
    with urllib.request.urlopen(f"http://{daemon.http_addr}/status", timeout=10) as r:  # type: ignore[attr-defined]
        return json.loads(r.read())["journal"]


def test_a_full_state_directory_refuses_new_jobs_until_space_returns(tmp_path: Path, server_params: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m,mode=0700", "tmpfs", str(state)], capture_output=True,
                      check=False).returncode != 0:
        pytest.skip("cannot mount a tmpfs here")
    daemon = None
    try:
        daemon = start_daemon(tmp_path, server_params)
        with daemon.client(timeout=60) as client:
            running = client.submit(submit("running", synth_delay_ms=3000)).job_id
            results: dict[str, pb.AwaitProofResponse] = {}
            waiter = threading.Thread(target=lambda: results.update(running=client.await_proof(running)))
            waiter.start()
            ballast = fill(state)
            refused = None
            for k in range(64):  # pages the journal already holds take a few writes to use up
                try:
                    client.submit(submit(f"while-full-{k}", seed=k + 1))
                except grpc.RpcError as err:
                    refused = err
                    break
            assert refused is not None, "the daemon kept accepting jobs on a full disk"
            assert refused.code() is grpc.StatusCode.UNAVAILABLE
            assert str(state) in refused.details() and "database or disk is full" in refused.details()
            assert rpc_error(client.submit, submit("refused", seed=100)).code() is grpc.StatusCode.UNAVAILABLE
            waiter.join(120)
            check_proof(results["running"], server_params)  # accepted before: finished, answered
            status = journal_status(daemon)
            assert not status["writable"] and status["unwritten_results"] >= 1
            ballast.unlink()
            accepted = client.submit(submit("refused", seed=100))  # the same call, accepted now
            check_proof(client.await_proof(accepted.job_id), server_params, seed=100)
            status = journal_status(daemon)
            assert status["writable"] and status["unwritten_results"] == 0
        assert daemon.stop() == 0
        # Its log file is on that disk too: that it could not be written was said in one line and
        # its recovery in another, never with a traceback per record.
        out = daemon.log()
        assert "Logging error" not in out and "Traceback" not in out
        logs = str(state / "logs")
        failed = [line for line in out.splitlines() if "cannot write the log " + logs in line]
        back = [line for line in out.splitlines() if "the log " + logs in line and "could not be written" in line]
        assert len(failed) == len(back) == 1, (failed, back)
        assert "No space left on device" in failed[0]
        with sqlite3.connect(state / "journal.sqlite3") as db:
            rows = dict(db.execute("SELECT job_id, state FROM jobs WHERE job_id IN ('running', 'refused')"))
        assert rows == {"running": "completed", "refused": "completed"}
    finally:
        if daemon is not None:
            daemon.stop()
        subprocess.run(["umount", "-l", str(state)], check=False)
