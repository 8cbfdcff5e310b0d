"""Worker processes (`cuzk.engine.procs`): a restart reads its child's "ready" even while another
thread asks the child for its info (the status's refresh every few seconds), and a dead child's
exit is said in words."""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time

from cuzk.engine.procs import WorkerCrashedError, WorkerProcess, _how_it_ended


def _slow_child(name: str, control, *args) -> None:  # type: ignore[no-untyped-def]
    time.sleep(0.5)  # imports and a device's start take time: the window other requests fall into
    control.send(("ready", {"pid": os.getpid()}))
    while True:
        try:
            msg = control.recv()
        except EOFError:
            return
        control.send(("ok", ("info", msg)))


def test_a_restart_is_not_confused_by_info_requests_meanwhile() -> None:
    proc = WorkerProcess("cuzk-test-restart", _slow_child)
    proc.start()
    try:
        first = proc.wait_ready(60)["pid"]
        os.kill(first, signal.SIGKILL)
        proc.process.join(10)
        errors: list[BaseException] = []

        def restart() -> None:
            try:
                proc.restart("killed by the test")
            except BaseException as err:  # the assertion below names it
                errors.append(err)

        thread = threading.Thread(target=restart)
        thread.start()
        replies = []
        while thread.is_alive():
            with contextlib.suppress(WorkerCrashedError):  # the old connection, closed by the restart
                replies.append(proc.request_if_idle(("info",)))
            time.sleep(0.005)
        thread.join()
        assert errors == []
        assert proc.info["pid"] != first and proc.alive
        assert all(r is None or r == ("ok", ("info", ("info",))) for r in replies)
        assert proc.request(("info",)) == ("ok", ("info", ("info",)))
    finally:
        proc.stop()


def test_a_dead_childs_exit_is_said_in_words() -> None:
    assert "SIGKILL" in _how_it_ended(-9) and "out-of-memory" in _how_it_ended(-9)
    assert _how_it_ended(-15) == "was killed by signal 15 (SIGTERM)"
    assert _how_it_ended(3) == "exited with code 3"
    assert _how_it_ended(None) == "closed its connection (not yet exited)"
    assert str(WorkerCrashedError("w", -9)).startswith("worker process w was killed by SIGKILL")
