"""Daemon logging: `logging.level` and `logging.format` ("text" or "json"), on stderr.

Precedence for the level: the CUZK_LOG_LEVEL environment variable, then `--log-level`, then the
config (as RUST_LOG, --log-level and logging.level do for the Rust daemon). "trace" is DEBUG.
JSON lines carry timestamp, level, logger, message, any structured `fields` a record has (timeline
events put theirs there) and the static context given to `setup_logging` (e.g. the instance id).
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
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


def setup_logging(level: int, fmt: str, context: dict[str, Any] | None = None) -> None:
    """Replace the root logger's handlers with one stderr handler in the chosen format."""
    handler = logging.StreamHandler(sys.stderr)
    if fmt == "json":
        handler.setFormatter(JsonFormatter(context))
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    for h in list(root.handlers):
        root.removeHandler(h)
    root.addHandler(handler)
    root.setLevel(level)
