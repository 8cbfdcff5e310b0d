"""Spawned worker processes with request/reply pipes, crash detection and restart.

Synthesis and proving run in child processes: synthesis is pure Python (the GIL would serialise it),
and the field kernels of `cuzk.field.fr_vec`/`ntt` are numba `parallel=True` functions without
`nogil`, so an NTT in the daemon process would stall every gRPC thread. numba's OpenMP threading
layer is not fork-safe, hence the `spawn` start method.

A `WorkerProcess` owns one child and one or more duplex pipes to it. `request(conn, msg)` sends a
message and waits for the reply *or* the child's death, so a crash becomes a `WorkerCrashedError`
exception for the one caller whose work was lost, and `restart()` brings up a fresh child.
Children exit on their own when the daemon goes away (their pipe reaches EOF).
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import signal
import threading
import time
from collections.abc import Callable
from multiprocessing.connection import Connection, wait
from typing import Any

from cuzk.engine.child_logs import forward_child_logs, log_forwarder
from cuzk.errors import CuzkError

log = logging.getLogger("cuzk.engine.procs")
SPAWN = multiprocessing.get_context("spawn")
#: A first start on a fresh checkout compiles the numba kernels in every worker: allow for it.
READY_TIMEOUT_S = 600.0


class WorkerCrashedError(CuzkError):
    """The worker process died while it held a request."""

    def __init__(self, name: str, exitcode: int | None) -> None:
        self.exitcode = exitcode
        super().__init__(f"worker process {name} {_how_it_ended(exitcode)} while working on this request")


def _how_it_ended(exitcode: int | None) -> str:
    """A dead child's exit code in words. SIGKILL is named because the daemon sends it only to a
    device process it restarts after a fatal error (logged as such): otherwise it is most often the
    kernel's out-of-memory killer (see the kernel log)."""
    if exitcode is None:
        return "closed its connection (not yet exited)"
    if exitcode == -signal.SIGKILL:
        return ("was killed by SIGKILL (the kernel's out-of-memory killer, unless the daemon restarted it "
                "after a fatal error or someone else sent it)")
    if exitcode < 0:
        try:
            name = signal.Signals(-exitcode).name
        except ValueError:
            name = "unknown"
        return f"was killed by signal {-exitcode} ({name})"
    return f"exited with code {exitcode}"


def running(proc: multiprocessing.process.BaseProcess) -> bool:
    """Whether a started child is still running. Its sentinel decides, not `is_alive()`: threads
    joining one dead child race to reap it, and for the losers `is_alive()` (waitpid: no such child)
    reads it as running until the winner has stored its exit code. A restart then took a killed
    device process for a live one and did nothing."""
    return proc.exitcode is None and not wait([proc.sentinel], 0)


class WorkerProcess:
    """One spawned child running `target(name, ready_conn, *conns, *args)`.

    The first connection is the control connection: the child sends ("ready", info) on it once its
    imports are done. `channels` extra connections carry independent request streams (one per
    prover worker thread); each may be used by one thread at a time.
    """

    def __init__(self, name: str, target: Callable[..., None], args: tuple[Any, ...] = (), *, channels: int = 0,
                 on_restart: Callable[[WorkerProcess], None] | None = None) -> None:
        self.name = name
        self._target = target
        #: What `target` gets after its connections; a restart passes them again.
        self.args = args
        self._channels = channels
        self.on_restart = on_restart
        self._lock = threading.Lock()
        self._control_lock = threading.Lock()
        self.process: multiprocessing.process.BaseProcess | None = None
        self.control: Connection | None = None
        self.conns: list[Connection] = []
        self.info: Any = None
        self.restarts = 0
        self.started_at = 0.0
        self.stopping = False

    # -- lifecycle ---------------------------------------------------------------------------------------
    def start(self) -> None:
        """Spawn the child (does not wait for it to be ready; see `wait_ready`)."""
        parent_ends, child_ends = [], []
        for _ in range(1 + self._channels):
            a, b = SPAWN.Pipe(duplex=True)
            parent_ends.append(a)
            child_ends.append(b)
        logs = log_forwarder(SPAWN).new_pipe(self.name)
        proc = SPAWN.Process(target=_child_main,
                             args=(logs, logging.getLogger().getEffectiveLevel(), self._target, self.name,
                                   *child_ends, *self.args), name=self.name, daemon=True)
        proc.start()
        for end in (*child_ends, logs):
            end.close()
        self.process = proc
        self.control = parent_ends[0]
        self.conns = parent_ends[1:]
        self.started_at = time.monotonic()

    def wait_ready(self, timeout: float = READY_TIMEOUT_S) -> Any:
        """Block until the child reports ready; returns what it reported."""
        assert self.control is not None and self.process is not None
        ready = wait([self.control, self.process.sentinel], timeout)
        if self.control not in ready:
            self.process.join(0.5)
            code = self.process.exitcode
            if code is None:  # hung: killed, so that it counts as dead (restarted later, never sent work)
                self.process.kill()
                self.process.join(5.0)
            raise CuzkError(f"worker process {self.name} did not start "
                            f"({'exit code ' + str(code) if code is not None else 'timed out'})")
        kind, info = self.control.recv()
        if kind != "ready":
            raise CuzkError(f"worker process {self.name} failed to start: {info}")
        self.info = info
        return info

    @property
    def pid(self) -> int | None:
        return None if self.process is None else self.process.pid

    @property
    def alive(self) -> bool:
        return self.process is not None and running(self.process)

    def restart(self, reason: str) -> None:
        """Replace a dead (or wedged) child; callers whose requests were lost got WorkerCrashedError."""
        with self._lock:
            if self.stopping:
                return
            if self.alive:
                return
            log.warning("restarting worker process %s (%s)", self.name, reason)
            # The control lock keeps other requests (the status's info) off the new control
            # connection until the child's "ready" has been read from it: a request sent meanwhile
            # would read "ready" as its reply, and `wait_ready` the request's reply as a failure.
            with self._control_lock:
                self._close_conns()
                self.restarts += 1
                self.start()
                try:
                    self.wait_ready()
                except (OSError, EOFError, CuzkError):
                    if self.stopping:  # stopped meanwhile (`stop` closed its pipes): nothing to restart
                        return
                    raise
        if self.on_restart is not None:
            self.on_restart(self)

    def _close_conns(self) -> None:
        for c in [self.control, *self.conns]:
            if c is not None:
                with contextlib.suppress(OSError):
                    c.close()

    def stop(self, timeout: float = 5.0) -> None:
        """Ask the child to exit (EOF on its pipes), then terminate it if it does not."""
        self.stopping = True
        proc = self.process
        self._close_conns()
        if proc is None:
            return
        proc.join(timeout)
        if running(proc):
            proc.terminate()
            proc.join(2.0)
        if running(proc):  # pragma: no cover - a child ignoring SIGTERM
            proc.kill()
            proc.join(1.0)

    # -- requests ----------------------------------------------------------------------------------------
    def request(self, msg: Any, *, channel: int | None = None) -> Any:
        """Send `msg` on a channel (None: the control connection) and return the child's reply."""
        if channel is None:
            with self._control_lock:
                return self._roundtrip(self.control, msg)
        return self._roundtrip(self.conns[channel], msg)

    def request_if_idle(self, msg: Any) -> Any | None:
        """A control request, or None at once if another control request is in progress (a load)."""
        if not self._control_lock.acquire(blocking=False):
            return None
        try:
            return self._roundtrip(self.control, msg)
        finally:
            self._control_lock.release()

    def _roundtrip(self, conn: Connection | None, msg: Any) -> Any:
        proc = self.process
        if conn is None or proc is None:
            raise WorkerCrashedError(self.name, None)
        try:
            conn.send(msg)
            while True:
                ready = wait([conn, proc.sentinel])
                if conn in ready:
                    return conn.recv()
                if proc.sentinel in ready:
                    proc.join(0.1)
                    raise WorkerCrashedError(self.name, proc.exitcode)
        except (EOFError, BrokenPipeError, ConnectionResetError, OSError):
            proc.join(5.0)  # a killed child with much pinned memory takes seconds to exit
            raise WorkerCrashedError(self.name, proc.exitcode) from None


def _child_main(logs: Connection, level: int, target: Callable[..., None], *args: Any) -> None:
    """A child's entry: its log records go to the daemon (`cuzk.engine.child_logs`), then `target`."""
    forward_child_logs(logs, level)
    target(*args)


def resolve_call(ref: str) -> Callable[..., Any]:
    """"package.module:function" -> the function (worker-side)."""
    import importlib

    module, _, attr = ref.partition(":")
    if not module or not attr:
        raise ValueError(f"a worker call is 'module:function', got {ref!r}")
    return getattr(importlib.import_module(module), attr)


def set_thread_env(threads: int) -> None:
    """Thread counts for numba in a fresh child, before numba is imported."""
    import os

    if threads > 0:
        os.environ["NUMBA_NUM_THREADS"] = str(threads)
