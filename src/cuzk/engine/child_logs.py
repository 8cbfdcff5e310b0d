"""Worker processes' log records, re-emitted by the daemon's own logging.

A spawned child starts with no logging configuration: its warnings would reach the inherited stderr
bare (no time, no instance id, not in the instance's log file when the daemon runs in the
foreground) and its INFO lines nowhere, while a job's error says "see the log". Each child gets a
pipe of its own for its records; one thread in the daemon re-emits them through the daemon's loggers
(same logger names, levels and handlers), prefixed with the worker's name. A pipe per child rather
than one shared queue: a child killed in the middle of a write can only break its own pipe.
"""

from __future__ import annotations

import logging
import threading
from multiprocessing.connection import Connection, wait
from typing import Any

__all__ = ["LogForwarder", "forward_child_logs", "log_forwarder"]

class _PipeHandler(logging.Handler):
    """Child side: every record, formatted to its message (and traceback), down the pipe."""

    def __init__(self, conn: Connection) -> None:
        super().__init__()
        self.conn = conn
        self._plain = logging.Formatter()

    def emit(self, record: logging.LogRecord) -> None:
        try:
            message = record.getMessage()
            if record.exc_info:
                message = f"{message}\n{self._plain.formatException(record.exc_info)}"
            # `handle` holds this handler's lock: the child's threads take turns on the pipe.
            self.conn.send((record.name, record.levelno, message, record.created))
        except Exception:  # the daemon went away: nothing to log to
            self.handleError(record)


def forward_child_logs(conn: Connection, level: int) -> None:
    """In a fresh child: send every record at `level` or above to the daemon through `conn`."""
    root = logging.getLogger()
    for handler in list(root.handlers):
        root.removeHandler(handler)
    root.addHandler(_PipeHandler(conn))
    root.setLevel(level)


class LogForwarder:
    """Daemon side: a thread re-emitting the records that arrive on the children's pipes."""

    def __init__(self, spawn: Any) -> None:
        self._spawn = spawn
        self._lock = threading.Lock()
        self._pipes: dict[Connection, str] = {}
        self._wake_recv, self._wake_send = spawn.Pipe(duplex=False)
        threading.Thread(target=self._run, name="cuzk-child-logs", daemon=True).start()

    def new_pipe(self, worker: str) -> Connection:
        """The sending end for a child named `worker` (give it to the child, close it here after the start)."""
        receive, send = self._spawn.Pipe(duplex=False)
        with self._lock:
            self._pipes[receive] = worker
            self._wake_send.send(None)  # the thread waits on the new pipe from its next round
        return send

    def _run(self) -> None:
        while True:
            with self._lock:
                pipes = dict(self._pipes)
            for conn in wait([self._wake_recv, *pipes]):
                if conn is self._wake_recv:
                    self._wake_recv.recv()
                    continue
                try:
                    name, level, message, created = conn.recv()
                except (EOFError, OSError):  # the child exited (or died): its pipe is done
                    with self._lock:
                        self._pipes.pop(conn, None)
                    conn.close()
                    continue
                try:
                    self._emit(pipes[conn], name, level, message, created)
                except Exception:  # a malformed record must not end the forwarding for every child
                    logging.getLogger(__name__).exception("a log record from %s could not be re-emitted",
                                                          pipes[conn])

    @staticmethod
    def _emit(worker: str, name: str, level: int, message: str, created: float) -> None:
        logger = logging.getLogger(name)
        if not logger.isEnabledFor(level):
            return
        record = logger.makeRecord(name, level, "(worker)", 0, f"{worker}: {message}", None, None)
        record.created, record.msecs = created, (created - int(created)) * 1000
        logger.handle(record)


_FORWARDER: LogForwarder | None = None
_FORWARDER_LOCK = threading.Lock()


def log_forwarder(spawn: Any) -> LogForwarder:
    """The process's forwarder, started on first use."""
    global _FORWARDER
    with _FORWARDER_LOCK:
        if _FORWARDER is None:
            _FORWARDER = LogForwarder(spawn)
        return _FORWARDER
