"""Daemon logging: level precedence and the JSON line format (timeline fields become keys)."""

from __future__ import annotations

import json
import logging
from pathlib import Path

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


def test_a_log_file_that_cannot_be_written_is_said_once_then_again_when_it_can(
        tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The state directory's disk full: the log file's failed writes are one line on stderr (not a
    traceback per record), and the first write that succeeds again says how many records it missed."""
    import io

    from cuzk.server.logs import QuietLogFile, text_format

    err = io.StringIO()
    monkeypatch.setattr("sys.stderr", err)
    handler = QuietLogFile(Path("/dev/full"), encoding="utf-8")  # every write: ENOSPC
    handler.setFormatter(logging.Formatter(text_format("abc")))
    log = logging.getLogger("cuzk.test.full")
    log.propagate, saved = False, log.level
    log.setLevel(logging.INFO)
    log.addHandler(handler)
    try:
        for k in range(5):
            log.info("record %d", k)
        said = err.getvalue().splitlines()
        assert len(said) == 1, said
        assert "ERROR instance=abc" in said[0] and "cannot write the log /dev/full" in said[0]
        assert "No space left on device" in said[0] and "Traceback" not in err.getvalue()
        assert handler.dropped == 5
        assert handler.stream is None  # dropped with the records it could not write
        good = tmp_path / "daemon.log"
        handler.baseFilename = str(good)  # space again: the file it opens next takes its writes
        log.info("after")
        said = err.getvalue().splitlines()
        assert len(said) == 2, said
        assert "the log " + str(good) + " can be written again; 5 record(s) could not be written" in said[1]
        assert "WARNING instance=abc" in said[1]
        lines = good.read_text().splitlines()
        assert len(lines) == 1 and lines[0].endswith("cuzk.test.full: after")  # none of the five came late
        assert handler.dropped == 0
    finally:
        log.removeHandler(handler)
        log.propagate = True
        log.setLevel(saved)
        handler.close()
