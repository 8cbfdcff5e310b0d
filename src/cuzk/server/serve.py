"""The daemon's servers around the engine: gRPC listeners, HTTP endpoint, health, graceful stop.

Startup order, each step only after the previous one succeeded:
1. bind every gRPC address (a taken one fails at once, naming the address; unix sockets owner-only,
   TCP with the token/TLS rules of cuzk.server.auth, an unprotected network address refused) and start serving
   GetDaemonInfo only (ready = false), so a probe can tell a starting cuzk daemon from a stranger;
   every other RPC answers UNAVAILABLE "starting";
2. bind the HTTP status address;
3. start the engine (worker processes, srs.preload);
4. take over the job journal: restore finished results, re-queue or fail jobs left in flight;
5. ready: health SERVING, GetDaemonInfo ready = true, the "ready" log line, `on_ready` (which tells
   systemd and writes the instance record).

Stop (SIGTERM, SIGINT, `cuzk daemon stop`): health NOT_SERVING and new jobs refused at once; jobs
queued or running get `daemon.shutdown_grace` seconds to finish while the gRPC server keeps
answering AwaitProof/Prove, so their clients get the proofs; what is left is cancelled (its waiters
get CANCELLED with the reason); the journal is checkpointed; the listeners close and unix socket
files are removed. A second signal exits at once (status 130); the journal then still shows the
unfinished jobs, for the next start to re-queue.

`cuzk daemon run` (cuzk.daemon.runner) wraps this with the pid file, address probes, instance
record and systemd notification.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

import grpc

from cuzk.config import Config, loopback_if_no_host
from cuzk.engine.engine import Engine
from cuzk.engine.executors import make_executor
from cuzk.engine.jobs import JobState, ProofRequest
from cuzk.engine.memory import BudgetError
from cuzk.errors import CuzkError
from cuzk.providers import default_providers
from cuzk.server._gen import proving_pb2_grpc as pb_grpc
from cuzk.server.address import UNIX_PREFIX, check_listen_address, unix_path
from cuzk.server.auth import AuthInterceptor, ServerSecurity, is_loopback_host, restrict_socket, socket_umask
from cuzk.server.grpc_service import ProvingService
from cuzk.server.health import DaemonHealth
from cuzk.server.http_status import StatusServer

if TYPE_CHECKING:
    from cuzk.engine.journal import Journal

log = logging.getLogger("cuzk.daemon")
#: Seconds between the health watch's looks at the devices.
HEALTH_WATCH_S = 1.0
__all__ = ["UNIX_PREFIX", "Daemon", "StopSummary", "prepare_unix_socket", "run_foreground", "unix_path"]
#: Exit status after a second signal aborted the drain.
ABORT_EXIT = 130


def prepare_unix_socket(path: Path) -> None:
    """Make the path bindable: create parent directories, remove a stale socket, refuse a live one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    note = check_listen_address(f"{UNIX_PREFIX}{path}")
    if note:
        log.info("%s", note)


@dataclass(frozen=True)
class StopSummary:
    """How a stop went: jobs unfinished when it began, how many of them finished, how many were cancelled."""

    grace_s: float
    unfinished: int
    finished: int
    cancelled: int

    def text(self) -> str:
        if not self.unfinished:
            return "no jobs were in flight"
        return (f"{self.unfinished} job(s) in flight: {self.finished} finished within the {self.grace_s:g} s grace, "
                f"{self.cancelled} cancelled")


class Daemon:
    def __init__(self, config: Config, *, instance_id: str | None = None, journal: Journal | None = None,
                 identity: dict[str, Any] | None = None) -> None:
        self.config = config
        self.engine = Engine(config, executor=make_executor(config), providers=default_providers(config),
                             instance_id=instance_id)
        self.engine.identity.update(identity or {})
        self.engine.identity.update(ready=False, draining=False)
        self.journal = journal
        self.health = DaemonHealth()
        #: Set once the daemon is ready; job RPCs are refused (UNAVAILABLE, "starting") until then.
        self.started = threading.Event()
        self.grpc_server: grpc.Server | None = None
        #: Who may call (tokens, TLS, socket mode), read once from the config's files.
        self.security = ServerSecurity.from_config(config)
        self.http: StatusServer | None = None
        self.addresses: list[str] = []
        self._sockets: list[Path] = []
        self._stop = threading.Event()
        self._stopped = threading.Event()
        #: Keeps the watch from turning health SERVING again once `stop` has turned it off.
        self._health_lock = threading.Lock()

    @property
    def instance_id(self) -> str:
        return self.engine.instance_id

    def start(self) -> None:
        """Bind and answer GetDaemonInfo, start the engine, take over the journal, then be ready."""
        try:
            self._bind_grpc()
            assert self.grpc_server is not None
            self.grpc_server.start()
            if self.config.daemon.status_listen:
                status_addr = loopback_if_no_host(self.config.daemon.status_listen)
                if not is_loopback_host(status_addr.rpartition(":")[0]):
                    log.warning("daemon.status_listen %s: /status and /metrics are readable without credentials by "
                                "anyone who can reach it", status_addr)
                self.http = StatusServer(status_addr, self.engine)
        except BaseException:
            self._shutdown_servers()
            raise
        try:
            self.engine.start()
            self._take_over_journal()
            if self.http is not None:
                self.http.start()
                log.info("status HTTP server listening on http://%s (/status, /metrics, /healthz)", self.http.address)
        except BaseException:
            self._shutdown_servers()
            self.engine.shutdown(0)
            raise
        self.engine.identity["ready"] = True
        self.started.set()
        self.health.set_serving(True)
        threading.Thread(target=self._watch_devices, name="cuzk-health", daemon=True).start()
        log.info("cuzk daemon ready, serving on %s (instance %s, config %s, pid %d)", ", ".join(self.addresses),
                 self.engine.instance_id, self.config.fingerprint(), os.getpid())

    def _watch_devices(self) -> None:
        """Health NOT_SERVING while no device can prove (`Engine.unable_to_prove`), SERVING again once
        one can: jobs sent meanwhile are queued, but a balancer should send them elsewhere."""
        serving = True
        while not self._stopped.wait(HEALTH_WATCH_S):
            reason = self.engine.unable_to_prove()
            if (reason is None) == serving:
                continue
            with self._health_lock:
                if self._stopped.is_set():
                    return
                serving = reason is None
                self.health.set_serving(serving)
            if serving:
                log.warning("health SERVING again: a device can prove")
            else:
                log.error("health NOT_SERVING: %s", reason)

    def _bind_grpc(self) -> None:
        d = self.config.daemon
        sec = self.security
        listen = [loopback_if_no_host(a) for a in d.listen]
        for addr in listen:  # refuse an unprotected network address before anything is bound
            if unix_path(addr) is None:
                warning = sec.check_tcp_address(addr)
                if warning:
                    log.warning("%s", warning)
        size = d.max_message_size
        options = [("grpc.max_receive_message_length", size), ("grpc.max_send_message_length", size),
                   ("grpc.so_reuseport", 0)]
        # Calls beyond the handler threads are refused (RESOURCE_EXHAUSTED) instead of queuing, each
        # holding its received message, without bound.
        server = grpc.server(ThreadPoolExecutor(max_workers=d.rpc_threads, thread_name_prefix="cuzk-rpc"),
                             options=options, interceptors=[AuthInterceptor(sec)],
                             maximum_concurrent_rpcs=d.rpc_threads)
        service = ProvingService(self.engine, listen_addresses=self.addresses, started=self.started)
        pb_grpc.add_ProvingEngineServicer_to_server(service, server)
        self.health.add_to_server(server)
        self.grpc_server = server
        for addr in listen:
            path = unix_path(addr)
            if path is not None:
                prepare_unix_socket(path)
            try:
                if path is not None:
                    port = self._bind_unix(server, addr, path)
                elif sec.tls is not None:
                    port = server.add_secure_port(addr, sec.tls)
                else:
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
        self.engine.identity["listen"] = list(self.addresses)
        log.info("access: %s; requests up to %d bytes, %s queued jobs", sec.describe(), size,
                 d.max_queued_jobs or "unlimited")

    def _bind_unix(self, server: grpc.Server, addr: str, path: Path) -> int:
        """Bind a unix socket that is never, not even for an instant, more open than unix_socket_mode."""
        mode = self.security.socket_mode
        # umask is per process: a file another thread creates meanwhile only comes out more private
        previous = os.umask(socket_umask(mode))
        try:
            port = server.add_insecure_port(addr)
        finally:
            os.umask(previous)
        restrict_socket(path, mode)
        return port

    def _take_over_journal(self) -> None:
        """Restore finished results, then re-queue (or fail) what a previous instance left in flight.

        Jobs are re-queued one at a time, in their original order, their inputs read from the journal
        only when it is their turn; a job whose inputs do not fit the memory budget yet waits while
        earlier jobs are planned (which frees their inputs), and fails only if nothing is left to wait for."""
        journal = self.journal
        if journal is None:
            return
        policy = self.config.daemon.on_restart
        recovery = journal.recover(policy)
        restored = self.engine.restore_finished(recovery.finished)
        self.engine.attach_journal(journal)
        requeued = 0
        for job_id, digest in recovery.requeue:
            try:
                self._requeue(job_id, journal.load_request(digest, self.engine.providers))
                requeued += 1
            except CuzkError as err:
                journal.fail(job_id, f"the daemon restarted while this job was in flight and it cannot be run "
                                     f"again: {err}")
                self.engine.restore_finished([j for j in journal.finished_jobs() if j.job_id == job_id])
                recovery.failed_now.append(job_id)
        log.info("job journal %s: %d finished result(s) restored, %d job(s) found in flight: %d re-queued, %d failed "
                 "(daemon.on_restart = %s)", journal.path, restored - len(recovery.failed_now),
                 requeued + len(recovery.failed_now), requeued, len(recovery.failed_now), policy)
        for job_id in recovery.failed_now:
            row = journal.row(job_id)
            log.warning("job %s: failed after restart: %s", job_id, row["error"] if row else "?")

    def _requeue(self, job_id: str, request: ProofRequest) -> None:
        while True:
            try:
                self.engine.submit(request, job_id=job_id, origin="journal")
                return
            except BudgetError:
                if not self.engine.unfinished_jobs() or self._stop.is_set():
                    raise
                time.sleep(0.2)  # earlier re-queued jobs are being planned, which releases their inputs

    def request_stop(self) -> None:
        self._stop.set()

    @property
    def stop_requested(self) -> bool:
        return self._stop.is_set()

    def wait(self) -> None:
        while not self._stop.wait(0.5):
            pass

    def stop(self, grace: float = 0.0) -> StopSummary | None:
        """Refuse new work, drain for `grace` seconds, cancel the rest, stop everything (once)."""
        if self._stopped.is_set():
            return None
        with self._health_lock:
            self._stopped.set()
            self.health.set_serving(False)
        unfinished = self.engine.unfinished_jobs()
        log.info("stopping: %d job(s) in flight get up to %g s to finish (a second signal aborts at once)",
                 len(unfinished), grace)
        self.engine.identity.update(ready=False, draining=True)
        self.engine.shutdown(grace)
        cancelled = sum(j.state is JobState.CANCELLED for j in unfinished)
        summary = StopSummary(grace, len(unfinished), len(unfinished) - cancelled, cancelled)
        self._shutdown_servers()
        if self.journal is not None:
            self.journal.close()
        log.info("cuzk daemon stopped: %s", summary.text())
        return summary

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


def run_foreground(config: Config, *, instance_id: str | None = None, journal: Journal | None = None,
                   identity: dict[str, Any] | None = None, on_ready: Callable[[Daemon], None] | None = None,
                   on_stopping: Callable[[Daemon], None] | None = None,
                   on_stopped: Callable[[StopSummary | None], None] | None = None) -> int:
    """Start, serve until SIGTERM/SIGINT, drain for daemon.shutdown_grace, stop; the exit status (0).

    A second signal exits at once with status 130 (the journal keeps what was unfinished)."""
    daemon = Daemon(config, instance_id=instance_id, journal=journal, identity=identity)
    signals_seen: list[int] = []

    def on_signal(signum: int, frame: FrameType | None) -> None:
        signals_seen.append(signum)
        if len(signals_seen) > 1:
            log.warning("second signal (%s): aborting at once, without waiting for jobs in flight",
                        signal.Signals(signum).name)
            logging.shutdown()
            os._exit(ABORT_EXIT)
        log.info("received %s: stopping", signal.Signals(signum).name)
        daemon.request_stop()

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
    failed = True
    try:
        daemon.start()
        if on_ready is not None:
            on_ready(daemon)
        daemon.wait()
        failed = False
    finally:
        grace = config.daemon.shutdown_grace if daemon.stop_requested else 0.0
        if on_stopping is not None:
            on_stopping(daemon)
        summary = daemon.stop(grace)
        for s, handler in previous.items():
            signal.signal(s, handler)
        if on_stopped is not None and not failed:
            on_stopped(summary)
    return 0
