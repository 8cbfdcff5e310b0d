"""Process identity, the pid file lock, the state directory, instance records and the new config keys."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from daemon.conftest import wait_for

from cuzk.config import Config, ConfigError, config_from_dict
from cuzk.daemon.identity import Identity, check_instance_id, new_instance_id
from cuzk.daemon.pidfile import PidLock, ProcessRef, lock_holders, proc_stat, process_start_ticks
from cuzk.daemon.state import StateDir, default_state_dir, resolve_state_dir
from cuzk.errors import CuzkError


def test_a_process_is_its_pid_and_start_time() -> None:
    me = ProcessRef.current()
    assert me.alive and me.pid == os.getpid() and me.start_ticks == process_start_ticks(os.getpid())
    reused = ProcessRef(me.pid, me.start_ticks - 1)  # same pid, another start: a reused pid
    assert not reused.alive and "now belongs to another program" in (reused.gone_reason() or "")
    assert not reused.signal(0)  # nothing is sent to a process that is not the recorded one


def test_exited_and_zombie_processes_are_gone() -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    ref = ProcessRef(child.pid, process_start_ticks(child.pid) or 0)
    # It exits at once, and stays a zombie until we reap it: gone already (it holds no socket, no lock).
    state = wait_for(lambda: (proc_stat(child.pid) or ("gone",))[0] in ("Z", "gone"), 30, "the child to exit")
    assert state and not ref.alive and "zombie" in (ref.gone_reason() or "")
    child.wait()
    assert not ref.alive and "no longer exists" in (ref.gone_reason() or "")


def test_the_pid_lock_is_exclusive_and_released_with_its_holder(tmp_path: Path) -> None:
    path = tmp_path / "daemon.pid"
    first = PidLock(path)
    assert first.acquire()
    first.write_pid(12345)
    assert path.read_text() == "12345\n" and lock_holders(path) == [os.getpid()]
    assert not PidLock(path).acquire(wait_s=0.05)  # another open file description: refused
    first.release(remove=True)
    assert not path.exists()
    # A holder that dies without cleaning up leaves the file but not the lock.
    code = ("import fcntl, os, sys; fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT); "
            "fcntl.flock(fd, fcntl.LOCK_EX); os.write(fd, b'999999\\n'); os._exit(9)")
    subprocess.run([sys.executable, "-c", code, str(path)], check=False)
    second = PidLock(path)
    assert second.acquire(wait_s=0) and second.previous_pid() == 999999
    second.release()


def test_a_lock_on_an_unlinked_pid_file_is_not_kept(tmp_path: Path) -> None:
    path = tmp_path / "daemon.pid"
    lock = PidLock(path)
    assert lock.acquire()
    old_fd = os.open(path, os.O_RDWR)  # someone who opened the file before its holder removed it
    lock.release(remove=True)
    again = PidLock(path)
    assert again.acquire() and path.exists()
    assert os.fstat(old_fd).st_ino != os.stat(path).st_ino
    os.close(old_fd)
    again.release()


def test_state_dir_resolution(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
    assert default_state_dir() == tmp_path / "xdg" / "cuzk"
    monkeypatch.setenv("XDG_STATE_HOME", "relative/ignored")  # the XDG spec: only absolute values count
    assert default_state_dir() == Path.home() / ".local" / "state" / "cuzk"
    config = config_from_dict({"daemon": {"state_dir": "st"}}, source=str(tmp_path / "etc" / "cuzk.toml"))
    assert resolve_state_dir(config) == tmp_path / "etc" / "st"  # relative to the config file
    assert resolve_state_dir(config, tmp_path / "cli") == tmp_path / "cli"
    assert resolve_state_dir(Config()) == default_state_dir()


def test_state_dir_layout_and_log_files(tmp_path: Path) -> None:
    state = StateDir(tmp_path / "s")
    state.ensure()
    assert state.logs_dir.is_dir()
    paths = [state.log_path(f"{k:012x}", 1_700_000_000 + k) for k in range(25)]
    for p in paths:
        p.write_text("x\n")
    (state.logs_dir / "notes.txt").write_text("not a daemon log")
    assert [f.instance_id for f in state.logs()] == [f"{k:012x}" for k in range(25)]
    assert state.log_for(f"{3:012x}") == paths[3]
    removed = state.prune_logs(keep=20, protect=(paths[0],))
    assert len(removed) == 4 and paths[0].exists() and not paths[1].exists()
    assert (state.logs_dir / "notes.txt").exists()


def test_unusable_state_dir_is_reported(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(CuzkError, match="cannot create it"):
        StateDir(blocker / "state").ensure()


def test_instance_record_round_trip(tmp_path: Path) -> None:
    me = ProcessRef.current()
    ident = Identity(new_instance_id(), "0123456789abcdef", "/etc/cuzk.toml", me.pid, me.start_ticks, 1.7e9,
                     str(tmp_path), str(tmp_path / "l.log"), ["127.0.0.1:1"], run_args=["--log-level", "debug"])
    state = StateDir(tmp_path)
    state.write_record(ident.record())
    again = Identity.from_record(state.read_record())
    assert again == ident and again.process.alive and "instance " + ident.instance_id in again.describe()
    assert Identity.from_record({"record_version": 99}) is None and Identity.from_record(None) is None
    (tmp_path / "daemon.json").write_text("{torn")
    assert state.read_record() is None
    assert len(new_instance_id()) == 12 and check_instance_id("abcdef012345")
    with pytest.raises(CuzkError, match="instance-id"):
        check_instance_id("../../etc")


def test_lifecycle_config_keys() -> None:
    c = Config()
    assert (c.daemon.state_dir, c.daemon.shutdown_grace, c.daemon.on_restart, c.daemon.journal) == ("", 60.0,
                                                                                                      "requeue", True)
    c = config_from_dict({"daemon": {"shutdown_grace": "2m", "on_restart": "FAIL", "journal": False,
                                     "state_dir": "/var/lib/cuzk"}})
    assert (c.daemon.shutdown_grace, c.daemon.on_restart, c.daemon.journal) == (120.0, "fail", False)
    assert c.settings()["daemon"]["shutdown_grace"] == "2m"
    with pytest.raises(ConfigError, match=r"daemon\.on_restart: 'retry' is not one of requeue, fail"):
        config_from_dict({"daemon": {"on_restart": "retry"}})
    with pytest.raises(ConfigError, match=r"daemon\.shutdown_grace"):
        config_from_dict({"daemon": {"shutdown_grace": "soon"}})
    assert Config().fingerprint() != c.fingerprint()
