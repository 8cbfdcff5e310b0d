"""Worker processes' log records reach the daemon's logging (`cuzk.engine.child_logs`): a child's
warning and its INFO line (when the daemon logs INFO) come out of the daemon's loggers, under their
own logger names and levels, prefixed with the worker's name, with a traceback where one was logged;
below the daemon's level nothing is sent."""

from __future__ import annotations

import logging
import time

import pytest

from cuzk.engine.procs import WorkerProcess


def _child(name: str, control, *args) -> None:  # type: ignore[no-untyped-def]
    log = logging.getLogger("cuzk.engine.compiled_store")
    control.send(("ready", {}))
    while True:
        try:
            msg = control.recv()
        except EOFError:
            return
        log.debug("debug line %d", 0)
        log.info("info line %d", 1)
        log.warning("compiled circuit %s not used: %s", msg, "digest differs")
        try:
            raise ValueError("boom")
        except ValueError:
            log.exception("with a traceback")
        control.send(("ok", None))


def _run_child(worker: str, caplog: pytest.LogCaptureFixture, count: int) -> list[logging.LogRecord]:
    """One request to a fresh child named `worker`; the records of it that reached this process
    (waiting up to 20 s for `count` of them)."""
    proc = WorkerProcess(worker, _child)
    proc.start()
    try:
        proc.wait_ready(60)
        proc.request("porep-32g")
        deadline = time.monotonic() + 20
        while True:
            got = [r for r in caplog.records if r.getMessage().startswith(f"{worker}: ")]
            if len(got) >= count or time.monotonic() > deadline:
                return got
            time.sleep(0.05)
    finally:
        proc.stop()


def test_a_childs_records_come_out_of_the_daemons_loggers(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    got = _run_child("cuzk-test-logs", caplog, 3)
    assert [(r.name, r.levelno) for r in got] == [("cuzk.engine.compiled_store", logging.INFO),
                                                  ("cuzk.engine.compiled_store", logging.WARNING),
                                                  ("cuzk.engine.compiled_store", logging.ERROR)]
    assert got[1].getMessage() == "cuzk-test-logs: compiled circuit porep-32g not used: digest differs"
    assert "Traceback" in got[2].getMessage() and "ValueError: boom" in got[2].getMessage()
    assert not any("debug line" in r.getMessage() for r in caplog.records)


def test_below_the_daemons_level_nothing_is_sent(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING)
    got = _run_child("cuzk-test-quiet", caplog, 2)
    assert [r.levelno for r in got] == [logging.WARNING, logging.ERROR]
