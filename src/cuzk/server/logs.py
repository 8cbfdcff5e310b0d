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
are written once.
"""

from __future__ import annotations

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


def setup_logging(level: int, fmt: str, context: dict[str, Any] | None = None, *, instance_id: str | None = None,
                  log_file: Path | None = None) -> None:
    """Replace the root logger's handlers: stderr, plus `log_file` unless stderr already writes there."""
    if instance_id:
        context = {**(context or {}), "instance_id": instance_id}
    handlers: list[logging.Handler] = [logging.StreamHandler(sys.stderr)]
    if log_file is not None:
        log_file.parent.mkdir(parents=True, exist_ok=True)
        log_file.touch(exist_ok=True)
        if not _same_file(sys.stderr, log_file):
            handlers.append(logging.FileHandler(log_file, encoding="utf-8"))
    formatter = JsonFormatter(context) if fmt == "json" else logging.Formatter(text_format(instance_id))
    root = logging.getLogger()
    for h in list(root.handlers):
        root.removeHandler(h)
    for handler in handlers:
        handler.setFormatter(formatter)
        root.addHandler(handler)
    root.setLevel(level)
