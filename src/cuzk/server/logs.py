"""Daemon logging: `logging.level` and `logging.format` ("text" or "json"), on stderr and in the
instance's own log file.

Precedence for the level: the CUZK_LOG_LEVEL environment variable, then `--log-level`, then the
config (the Rust daemon's order: docs/compatibility.md §7). "trace" is DEBUG.
JSON lines carry timestamp, level, logger, message, any structured `fields` a record has (timeline
events put theirs there) and the static context given to `setup_logging` (e.g. the instance id).

Every line names the daemon instance (`instance=<id>` in text, "instance_id" in JSON), and each
instance writes its own file (state_dir/logs/<start>-<id>.log): a line left by an earlier run can
never pass for the current one, whatever a `grep` on an old file finds. When stderr already is that
file (`cuzk daemon start` points the process's stderr there, to keep tracebacks of a crash), lines
are written once. A destination that cannot be written (the state directory's disk full) is said
once, in one line on stderr, and again once it can be written (`QuietOnFailure`), rather than with
logging's traceback for every record.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sys
import time
from pathlib import Path
from typing import Any

_LEVELS = {"trace": logging.DEBUG, "debug": logging.DEBUG, "info": logging.INFO, "warn": logging.WARNING,
           "warning": logging.WARNING, "error": logging.ERROR}


class JsonFormatter(logging.Formatter):
    def __init__(self, context: dict[str, Any] | None = None) -> None:
        super().__init__()
        self.context = dict(context or {})

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(), "logger": record.name, "msg": record.getMessage(),
            **self.context,
        }
        fields = getattr(record, "fields", None)
        if isinstance(fields, dict):
            out.update(fields)
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        return json.dumps(out, default=str)


def resolve_level(config_level: str, cli_level: str | None = None) -> int:
    name = os.environ.get("CUZK_LOG_LEVEL") or cli_level or config_level
    try:
        return _LEVELS[name.lower()]
    except KeyError:
        raise ValueError(f"unknown log level {name!r} (one of {', '.join(_LEVELS)})") from None


def text_format(instance_id: str | None = None) -> str:
    instance = f"instance={instance_id} " if instance_id else ""
    return f"%(asctime)s %(levelname)s {instance}%(name)s: %(message)s"


def _same_file(stream: Any, path: Path) -> bool:
    try:
        a, b = os.fstat(stream.fileno()), os.stat(path)
    except (OSError, ValueError, AttributeError):
        return False
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


class QuietOnFailure(logging.StreamHandler):
    """A stream handler whose failed writes (OSError: no space left, say) are said once on stderr, not
    with a traceback and call stack for every record (logging's `handleError`), and whose first
    write that succeeds afterwards says how many records that destination missed. Other errors (a
    record that cannot be formatted) keep logging's report."""

    #: Records not written since the last write that succeeded (set per instance once one fails).
    dropped = 0

    @property
    def destination(self) -> str:
        return getattr(self, "baseFilename", None) or getattr(self.stream, "name", None) or repr(self.stream)

    def emit(self, record: logging.LogRecord) -> None:
        missed = self.dropped  # emit runs under the handler's lock
        try:
            super().emit(record)
        except OSError:  # a FileHandler reopens its file outside StreamHandler's handling
            self.handleError(record)
        if missed and self.dropped == missed:  # this record was written
            self._say(logging.WARNING, f"the log {self.destination} can be written again; {missed} record(s) "
                                       "could not be written to it")
            self.dropped = 0

    def handleError(self, record: logging.LogRecord) -> None:
        err = sys.exc_info()[1]
        if not isinstance(err, OSError):
            super().handleError(record)
            return
        if not self.dropped:
            self._say(logging.ERROR, f"cannot write the log {self.destination} ({err}); its records are dropped "
                                     "until it can be written again")
        self.dropped += 1

    def _say(self, level: int, message: str) -> None:
        record = logging.makeLogRecord({"name": __name__, "levelno": level, "levelname": logging.getLevelName(level),
                                        "msg": message})
        try:
            sys.stderr.write((self.formatter or logging.Formatter()).format(record) + "\n")
            sys.stderr.flush()
        except (OSError, ValueError):  # stderr is that destination, or closed: nothing more to do
            pass


class QuietLogFile(QuietOnFailure, logging.FileHandler):
    """The instance's log file, with `QuietOnFailure`'s handling of failed writes. A failed write
    also drops the open file, whose buffer still holds the records it could not write (they would
    otherwise land late, or cut short, among later ones); the next record opens it again."""

    def handleError(self, record: logging.LogRecord) -> None:
        super().handleError(record)
        if isinstance(sys.exc_info()[1], OSError) and self.stream is not None:
            stream, self.stream = self.stream, None
            with contextlib.suppress(OSError, ValueError):
                stream.close()


def setup_logging(level: int, fmt: str, context: dict[str, Any] | None = None, *, instance_id: str | None = None,
                  log_file: Path | None = None) -> None:
    """Replace the root logger's handlers: stderr, plus `log_file` unless stderr already writes there."""
    if instance_id:
        context = {**(context or {}), "instance_id": instance_id}
    handlers: list[logging.Handler] = [QuietOnFailure(sys.stderr)]
    if log_file is not None:
        log_file.parent.mkdir(parents=True, exist_ok=True)
        log_file.touch(exist_ok=True)
        if not _same_file(sys.stderr, log_file):
            handlers.append(QuietLogFile(log_file, encoding="utf-8"))
    formatter = JsonFormatter(context) if fmt == "json" else logging.Formatter(text_format(instance_id))
    root = logging.getLogger()
    for h in list(root.handlers):
        root.removeHandler(h)
    for handler in handlers:
        handler.setFormatter(formatter)
        root.addHandler(handler)
    root.setLevel(level)
