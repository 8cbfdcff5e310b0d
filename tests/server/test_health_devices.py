"""Health follows the devices: a daemon whose every device is dead and cannot be restarted (a GPU
gone from the bus) says NOT_SERVING on grpc.health.v1 and 503 with the reason on /healthz, while it
still queues jobs; once a device is back it serves again and proves them."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from engine.engine_helpers import wait_until
from server.conftest import free_port
from server.test_live_daemon import check_proof, http_get, submit

from cuzk.config import config_from_dict
from cuzk.daemon import control
from cuzk.daemon.identity import Identity
from cuzk.daemon.pidfile import ProcessRef
from cuzk.daemon.state import StateDir
from cuzk.errors import CuzkError
from cuzk.server._gen import proving_pb2 as pb
from cuzk.server.client import CuzkClient
from cuzk.server.serve import Daemon


def test_health_is_not_serving_while_no_device_can_prove(tmp_path: Path, server_params: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    unix_addr, http_addr = f"unix://{tmp_path / 'cuzk.sock'}", f"127.0.0.1:{free_port()}"
    site = SimpleNamespace(http_addr=http_addr)  # what http_get reads of a live daemon
    config = config_from_dict({
        "daemon": {"listen": [unix_addr], "status_listen": http_addr, "shutdown_grace": "0s"},
        "srs": {"param_cache": str(server_params)}, "memory": {"total_budget": "3GiB"},
        "debug": {"test_circuits": True}, "gpus": {"backend": "cpu", "devices": [0]},
    })
    daemon = Daemon(config)
    daemon.start()
    try:
        device = daemon.engine.executor.devices[0]
        real_restart = device.proc.restart

        def cannot_start(reason: str) -> None:  # as WorkerProcess.restart fails: a new incarnation, dead
            device.proc.restarts += 1
            raise CuzkError(f"worker process {device.proc.name} did not start (exit code 1)")

        with CuzkClient(unix_addr, timeout=30) as client:
            assert client.serving() and http_get(site, "/healthz")[::2] == (200, "ok\n")
            monkeypatch.setattr(device.proc, "restart", cannot_start)
            os.kill(device.pid, signal.SIGKILL)
            wait_until(lambda: not client.serving(), 60, "health NOT_SERVING")
            code, body = http_get(site, "/healthz")[::2]
            assert code == 503 and device.worker_name in body and "cannot restart" in body \
                and "did not start" in body, body
            assert f"{json.loads(http_get(site, '/status')[2])['unable_to_prove']}\n" == body
            # `cuzk daemon status`, from the instance record and the daemon's own answers.
            me = ProcessRef.current()
            record = Identity(daemon.instance_id, config.fingerprint(), None, me.pid, me.start_ticks, time.time(),
                              str(tmp_path), str(tmp_path / "daemon.log"), [unix_addr], phase="ready")
            StateDir(tmp_path).write_record(record.record())
            shown = control.format_status(control.inspect(StateDir(tmp_path)))
            assert shown.startswith("running, ready but not serving (no device can prove"), shown
            # Work sent meanwhile is queued, not refused: the device may come back.
            job = client.submit(submit("while-down", seed=31)).job_id
            assert client.await_proof(job, timeout_ms=500).status == pb.AwaitProofResponse.TIMEOUT
            monkeypatch.setattr(device.proc, "restart", real_restart)
            wait_until(client.serving, 120, "health SERVING again (the housekeeper's retry after its back-off)")
            assert http_get(site, "/healthz")[::2] == (200, "ok\n")
            assert json.loads(http_get(site, "/status")[2])["unable_to_prove"] is None
            assert control.format_status(control.inspect(StateDir(tmp_path))).startswith("running, ready: pid")
            check_proof(client.await_proof(job, timeout_ms=120_000), server_params, seed=31)
    finally:
        daemon.stop(0)
