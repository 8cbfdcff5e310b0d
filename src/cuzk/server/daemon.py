"""Running the daemon in the foreground: engine, gRPC listeners, HTTP endpoint, health, signals.

Order matters: the engine and its worker processes start first, then every listener binds (a bind
failure stops the daemon with an error naming the address), and only then is "ready" logged and
health set to SERVING. A unix socket path left by a dead daemon is replaced; one a live daemon is
listening on is an error. SIGTERM or SIGINT: health goes NOT_SERVING, new jobs are refused, jobs
still queued or running are cancelled (their waiters get CANCELLED), the worker processes stop and
the process exits 0; a second signal exits at once. `Daemon.stop(grace)` drains first for `grace`
seconds: the hook for the graceful-drain lifecycle work.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import stat
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import FrameType

import grpc

from cuzk.engine.config import Config
from cuzk.engine.engine import Engine
from cuzk.errors import CuzkError
from cuzk.server._gen import proving_pb2_grpc as pb_grpc
from cuzk.server.grpc_service import ProvingService
from cuzk.server.health import DaemonHealth
from cuzk.server.http_status import StatusServer

log = logging.getLogger("cuzk.daemon")
UNIX_PREFIX = "unix://"


def unix_path(addr: str) -> Path | None:
    """The socket path of a "unix:///abs" or "unix:rel" address; None for TCP."""
    if addr.startswith(UNIX_PREFIX):
        return Path(addr[len(UNIX_PREFIX):])
    if addr.startswith("unix:"):
        return Path(addr[len("unix:"):])
    return None


def prepare_unix_socket(path: Path) -> None:
    """Make the path bindable: create parent directories, remove a stale socket, refuse a live one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists() and not path.is_symlink():
        return
    if not stat.S_ISSOCK(path.lstat().st_mode):
        raise CuzkError(f"unix://{path} exists and is not a socket; refusing to replace it")
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.settimeout(1.0)
        probe.connect(str(path))
    except OSError:
        log.info("removing stale socket %s (no process is listening on it)", path)
        path.unlink()
        return
    finally:
        probe.close()
    raise CuzkError(f"another process is already listening on unix://{path}")


class Daemon:
    def __init__(self, config: Config, *, instance_id: str | None = None) -> None:
        self.config = config
        self.engine = Engine(config, instance_id=instance_id)
        self.health = DaemonHealth()
        self.grpc_server: grpc.Server | None = None
        self.http: StatusServer | None = None
        self.addresses: list[str] = []
        self._sockets: list[Path] = []
        self._stop = threading.Event()
        self._stopped = threading.Event()

    def start(self) -> None:
        """Bind every listener (so a taken address fails fast), start the engine, then serve."""
        try:
            self._bind_grpc()
            if self.config.daemon.status_listen:
                self.http = StatusServer(self.config.daemon.status_listen, self.engine)
        except BaseException:
            self._shutdown_servers()
            raise
        try:
            self.engine.start()
            assert self.grpc_server is not None
            self.grpc_server.start()
            if self.http is not None:
                self.http.start()
                log.info("status HTTP server listening on http://%s (/status, /metrics, /healthz)", self.http.address)
        except BaseException:
            self._shutdown_servers()
            self.engine.shutdown(0)
            raise
        self.health.set_serving(True)
        log.info("cuzk daemon ready, serving on %s (instance %s, config %s)", ", ".join(self.addresses),
                 self.engine.instance_id, self.config.fingerprint())

    def _bind_grpc(self) -> None:
        size = self.config.daemon.max_message_size
        options = [("grpc.max_receive_message_length", size), ("grpc.max_send_message_length", size),
                   ("grpc.so_reuseport", 0)]
        server = grpc.server(ThreadPoolExecutor(max_workers=self.config.daemon.rpc_threads,
                                                thread_name_prefix="cuzk-rpc"), options=options)
        service = ProvingService(self.engine, listen_addresses=self.addresses)
        pb_grpc.add_ProvingEngineServicer_to_server(service, server)
        self.health.add_to_server(server)
        for addr in self.config.daemon.listen:
            path = unix_path(addr)
            if path is not None:
                prepare_unix_socket(path)
            try:
                port = server.add_insecure_port(addr)
            except RuntimeError as err:
                raise CuzkError(f"daemon.listen: cannot listen on {addr}: {err}") from None
            if path is None and port == 0:
                raise CuzkError(f"daemon.listen: cannot listen on {addr}")
            if path is not None:
                self._sockets.append(path)
                self.addresses.append(addr)
            else:
                host = addr.rpartition(":")[0]
                self.addresses.append(f"{host}:{port}")
        self.grpc_server = server

    def request_stop(self) -> None:
        self._stop.set()

    def wait(self) -> None:
        while not self._stop.wait(0.5):
            pass

    def stop(self, grace: float = 0.0) -> None:
        """Refuse new work, drain for `grace` seconds, cancel the rest, stop everything."""
        if self._stopped.is_set():
            return
        self._stopped.set()
        log.info("shutting down (grace %.0f s)", grace)
        self.health.set_serving(False)
        self.engine.shutdown(grace)
        self._shutdown_servers()
        log.info("cuzk daemon stopped")

    def _shutdown_servers(self) -> None:
        self.health.shutdown()
        if self.grpc_server is not None:
            self.grpc_server.stop(2.0).wait(5.0)
        if self.http is not None:
            if self.http.serving:
                self.http.stop()
            else:
                self.http.server_close()
        for path in self._sockets:
            with contextlib.suppress(OSError):
                path.unlink()


def run_foreground(config: Config, *, instance_id: str | None = None) -> int:
    """Start, serve until SIGTERM/SIGINT, stop; the exit status."""
    daemon = Daemon(config, instance_id=instance_id)
    signals_seen = []

    def on_signal(signum: int, frame: FrameType | None) -> None:
        signals_seen.append(signum)
        if len(signals_seen) > 1:
            log.warning("second signal (%s): exiting at once", signal.Signals(signum).name)
            os._exit(130)
        log.info("received %s, shutting down", signal.Signals(signum).name)
        daemon.request_stop()

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        daemon.start()
        daemon.wait()
    finally:
        daemon.stop(0.0)
        for s, handler in previous.items():
            signal.signal(s, handler)
    return 0
