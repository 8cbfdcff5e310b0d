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
from cuzk.errors import CuzkError


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


def test_a_child_reaped_by_another_waiter_counts_as_dead() -> None:
    """Lanes join a killed device process from several threads; the one that loses the race to reap
    it must not read it as alive (a restart would then skip it)."""
    proc = WorkerProcess("cuzk-test-reaped", _slow_child)
    proc.start()
    try:
        pid = proc.wait_ready(60)["pid"]
        assert proc.alive
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)  # reaped behind the Process object's back, as another thread's join does
        assert proc.process.is_alive()  # what the standard library says here
        assert not proc.alive
        proc.restart("killed by the test")
        assert proc.alive and proc.info["pid"] != pid and proc.restarts == 1
    finally:
        proc.stop()


def test_a_dead_childs_exit_is_said_in_words() -> None:
    assert "SIGKILL" in _how_it_ended(-9) and "out-of-memory" in _how_it_ended(-9)
    assert _how_it_ended(-15) == "was killed by signal 15 (SIGTERM)"
    assert _how_it_ended(3) == "exited with code 3"
    assert _how_it_ended(None) == "closed its connection (not yet exited)"
    assert str(WorkerCrashedError("w", -9)).startswith("worker process w was killed by SIGKILL")


def test_a_local_device_failure_is_counted_once_per_incarnation() -> None:
    """Two lanes fail on one device process: the first restarts it (one failure); the second, which
    called the process that was replaced, neither counts a second failure nor kills the new process,
    nor lets lanes reach it before its keys are loaded again. The housekeeper leaves a process a lane
    is replacing (dead, its successor not yet spawned) to that lane, and restarts one found dead
    twice at the same incarnation."""
    from types import SimpleNamespace

    from cuzk.engine.devices import DeviceSpec
    from cuzk.engine.executor import LocalDevice, LocalExecutor

    class Proc:
        name, stopping = "cuzk-device-stand-in", False

        def __init__(self) -> None:
            self.restarts, self.alive, self.kills = 0, True, 0
            self.reloading, self.reloaded = threading.Event(), threading.Event()
            self.reloaded.set()
            self.process = SimpleNamespace(kill=self._kill, join=lambda timeout: None)

        def _kill(self) -> None:
            self.kills += 1
            self.alive = False

        def restart(self, reason: str) -> None:
            if not self.alive:
                self.restarts += 1
                self.alive = True
                self.reloading.set()  # `on_restart`: the keys loaded again into the new process
                assert self.reloaded.wait(10)

    proc = Proc()
    device = LocalDevice(DeviceSpec(0, "cpu"), proc, 1)  # type: ignore[arg-type]
    executor = LocalExecutor.__new__(LocalExecutor)
    executor._devices, executor._dead_before, executor._lane_saw = [device], {}, threading.local()

    def lane_failed_on(incarnation: int, force: bool) -> None:
        executor._lane_saw.incarnation = incarnation  # what this lane's `prove` call saw
        executor.restart(device, "unusable", force=force)

    lane_failed_on(0, force=True)
    assert (device.failures, proc.kills, proc.restarts, device.ready.is_set()) == (1, 1, 1, True)
    lane_failed_on(0, force=True)  # a second lane's report about the process already replaced
    assert (device.failures, proc.kills, proc.restarts) == (1, 1, 1)

    # A lane whose call died with the process reports it while another lane's restart still loads the
    # keys: it waits for that restart, and lanes stay held (`ready`) until the keys are back.
    proc.reloading.clear()
    proc.reloaded.clear()
    first = threading.Thread(target=lane_failed_on, args=(1, True))
    first.start()
    assert proc.reloading.wait(10)
    second = threading.Thread(target=lane_failed_on, args=(1, False))
    second.start()
    second.join(0.3)
    assert second.is_alive() and not device.ready.is_set()
    proc.reloaded.set()
    first.join(10)
    second.join(10)
    assert (device.failures, proc.kills, proc.restarts, device.ready.is_set()) == (2, 2, 2, True)

    proc.alive = False  # dead while a lane replaces it: the housekeeper sees it dead, then a new incarnation
    assert executor.revive() == 0
    proc.restarts += 1
    assert executor.revive() == 0 and device.failures == 2
    assert executor.revive() == 1  # dead twice at one incarnation: its own restart
    assert (device.failures, proc.restarts, proc.alive) == (3, 4, True)


def _hung_child(name: str, control, *args) -> None:  # type: ignore[no-untyped-def]
    time.sleep(3600)  # e.g. a driver call that never returns: it never says "ready"


def test_a_child_that_never_says_ready_is_killed_and_counts_as_dead() -> None:
    """A start that times out leaves no live child behind: a live one would count as a usable device
    (`LocalDevice.can_prove`) that never answers, and would hold its memory until the daemon exits."""
    proc = WorkerProcess("cuzk-test-hung", _hung_child)
    proc.start()
    try:
        try:
            proc.wait_ready(2.0)
        except CuzkError as err:
            assert "did not start (timed out)" in str(err)
        else:
            raise AssertionError("a child that never said ready was taken as started")
        assert not proc.alive and proc.process.exitcode == -signal.SIGKILL
    finally:
        proc.stop()
