"""Daemon logging: level precedence and the JSON line format (timeline fields become keys)."""

from __future__ import annotations

import json
import logging

import pytest

from cuzk.server.logs import JsonFormatter, resolve_level, setup_logging


def test_level_precedence(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CUZK_LOG_LEVEL", raising=False)
    assert resolve_level("info") == logging.INFO and resolve_level("info", "warn") == logging.WARNING
    assert resolve_level("trace") == logging.DEBUG
    monkeypatch.setenv("CUZK_LOG_LEVEL", "error")
    assert resolve_level("info", "debug") == logging.ERROR
    monkeypatch.setenv("CUZK_LOG_LEVEL", "loud")
    with pytest.raises(ValueError, match="unknown log level 'loud'"):
        resolve_level("info")


def test_json_lines_carry_fields_and_context() -> None:
    formatter = JsonFormatter({"instance": "abc"})
    record = logging.LogRecord("cuzk.timeline", logging.INFO, __file__, 1, "TIMELINE SYNTH_START job=j", None, None)
    record.fields = {"event": "SYNTH_START", "job_id": "j", "partition": 2, "t_ms": 15}
    line = json.loads(formatter.format(record))
    assert line["msg"] == "TIMELINE SYNTH_START job=j" and line["level"] == "info" and line["instance"] == "abc"
    assert (line["event"], line["partition"], line["t_ms"]) == ("SYNTH_START", 2, 15)
    assert line["ts"].endswith("Z")


def test_setup_replaces_root_handlers() -> None:
    root = logging.getLogger()
    saved = (list(root.handlers), root.level)
    try:
        setup_logging(logging.WARNING, "json")
        assert len(root.handlers) == 1 and isinstance(root.handlers[0].formatter, JsonFormatter)
        assert root.level == logging.WARNING
    finally:
        for h in list(root.handlers):
            root.removeHandler(h)
        for h in saved[0]:
            root.addHandler(h)
        root.setLevel(saved[1])
