"""`cuzk daemon start|stop|restart|status|logs`: managing a background daemon without guessing.

- start: refuses if a daemon runs on the state directory; probes the addresses (fast failure naming
  the holder); picks the instance id, spawns `cuzk daemon run` in its own session with its output in
  that instance's log file, and returns 0 only when this very instance (same id, same pid) answers
  GetDaemonInfo with ready = true on its address. No log file is read to decide readiness.
- stop: SIGTERM to the process named by the instance record (pid and start time checked right
  before every signal), waits up to its timeout (default: the instance's shutdown grace + 30 s),
  then SIGKILL; returns once the process is gone and every address it listened on is free, and says
  which of these happened (and, after a clean exit, what became of the jobs in flight).
- restart: validates the new configuration first (an invalid one leaves the running daemon
  untouched), refuses if a new address is held by anyone but the old instance, stops the old
  instance (verified gone), starts the new one and confirms its instance id and fingerprint.
- status: running, ready, identity, from the record and the daemon's own answer.
- logs: the log file of the running (or a given, or the last) instance.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from cuzk.config import Config, ConfigError
from cuzk.daemon.identity import Identity, iso_time, new_instance_id
from cuzk.daemon.pidfile import PidLock, ProcessRef, lock_holders, read_pid
from cuzk.daemon.runner import DaemonRunningError
from cuzk.daemon.state import StateDir, resolve_state_dir
from cuzk.errors import CuzkError
from cuzk.server.address import (
    AddressInUseError,
    address_free,
    check_listen_address,
    daemon_info,
    process_summary,
    remove_stale_unix_socket,
    tcp_host_port,
    unix_path,
)

Say = Callable[[str], None]
#: Extra time `stop` allows beyond the instance's shutdown grace before it escalates to SIGKILL.
STOP_MARGIN_S = 30.0
#: How long `stop` waits for the process to vanish after SIGKILL, and for its addresses to be free.
KILL_WAIT_S = 10.0
ADDRESS_WAIT_S = 5.0
POLL_S = 0.05


class StartError(CuzkError):
    """The daemon did not become ready; the message says why and ends with its last log lines."""


# -- inspection ----------------------------------------------------------------------------------------------
@dataclass
class DaemonState:
    """What is known about the daemon of a state directory."""

    state: StateDir
    identity: Identity | None = None
    running: bool = False
    #: Why a pid file or record left behind does not name a running daemon.
    stale: str | None = None
    #: The daemon's own GetDaemonInfo answer (None: not asked, or it did not answer).
    info: dict[str, Any] | None = None
    rpc_error: str | None = None
    #: Pid of a process holding the lock while no record names it (a daemon in its first moments).
    lock_holder: int | None = None

    @property
    def ready(self) -> bool:
        return (self.running and self.info is not None and bool(self.info.get("ready"))
                and self.identity is not None and self.info.get("instance_id") == self.identity.instance_id)

    def as_dict(self) -> dict[str, Any]:
        ident = self.identity if self.running else None
        out: dict[str, Any] = {
            "running": self.running, "ready": self.ready, "phase": ident.phase if ident else None,
            "pid": ident.pid if ident else self.lock_holder, "instance_id": ident.instance_id if ident else None,
            "config_fingerprint": ident.config_fingerprint if ident else None,
            "config_path": ident.config_path if ident else None, "listen": ident.listen if ident else [],
            "status_listen": ident.status_listen if ident else "", "version": ident.version if ident else None,
            "started_at": ident.started_at_iso if ident else None,
            "uptime_s": round(time.time() - ident.started_at, 3) if ident else None,
            "log_path": ident.log_path if ident else None, "state_dir": str(self.state.root),
            "stale": self.stale, "answering": self.info is not None, "rpc_error": self.rpc_error,
        }
        if self.info is not None:
            out["draining"] = self.info.get("draining", False)
            out["serving"] = self.info.get("serving")
        out["last_exit"] = self.state.read_last_exit()
        return out


def inspect(state: StateDir, *, rpc: bool = True, rpc_timeout: float = 2.0) -> DaemonState:
    """The daemon of `state` as its record, its process and (with `rpc`) its own answer show it."""
    out = DaemonState(state)
    ident = Identity.from_record(state.read_record())
    out.identity = ident
    if ident is not None and ident.process.alive:
        out.running = True
    else:
        holders = lock_holders(state.pid_path) if state.pid_path.exists() else []
        if holders:  # locked, but no (current) record yet: a daemon in its first milliseconds
            out.running, out.lock_holder, out.identity = True, holders[0], None
        elif ident is not None:
            out.stale = (f"the instance record names pid {ident.pid} (instance {ident.instance_id}), but "
                         f"{ident.process.gone_reason()}")
        elif (pid := read_pid(state.pid_path)) is not None:
            out.stale = f"the pid file names pid {pid}, which holds no lock on it (the daemon that wrote it is gone)"
    if out.running and rpc and out.identity is not None:
        out.info, out.rpc_error = _ask(out.identity, rpc_timeout, health=True)
    return out


def _ask(ident: Identity, timeout: float, *, health: bool = False) -> tuple[dict[str, Any] | None, str | None]:
    """GetDaemonInfo (with `health`, and its health) from the first of the instance's addresses that
    answers as this instance."""
    errors = []
    for addr in ident.listen:
        info = daemon_info(addr, timeout=timeout, health=health)
        if info is None:
            errors.append(f"{addr}: no answer")
            continue
        if info.get("instance_id") != ident.instance_id:
            errors.append(f"{addr}: answered by instance {info.get('instance_id')}, not {ident.instance_id}")
            continue
        return info, None
    return None, "; ".join(errors) or "no listen address recorded"


def format_status(ds: DaemonState) -> str:
    d = ds.as_dict()
    if not ds.running:
        lines = [f"not running (state dir {ds.state.root})"]
        if ds.stale:
            lines.append(f"stale: {ds.stale}")
        last = d["last_exit"]
        if last:
            lines.append(f"last instance {last.get('instance_id')} exited with status {last.get('exit_code')} at "
                         f"{iso_time(float(last.get('stopped_at', 0)))}" + (f": {last['summary']}"
                                                                           if last.get("summary") else ""))
        return "\n".join(lines)
    if ds.identity is None:
        return f"starting: pid {ds.lock_holder} holds {ds.state.pid_path} (no instance record yet)"
    state = "ready" if ds.ready else ("draining" if d.get("draining") else ds.identity.phase)
    if ds.ready and d.get("serving") is False:  # health NOT_SERVING: every device down, /status says why
        state = "ready but not serving (no device can prove: see /status unable_to_prove or the log)"
    lines = [
        f"running, {state}: pid {d['pid']}, instance {d['instance_id']}",
        f"config:      {d['config_path'] or 'defaults'} (fingerprint {d['config_fingerprint']})",
        f"listen:      {', '.join(d['listen'])}" + (f"; status http://{d['status_listen']}" if d["status_listen"]
                                                     else ""),
        f"version:     {d['version']}, started {d['started_at']} (up {d['uptime_s']:.0f} s)",
        f"state dir:   {d['state_dir']}",
        f"log:         {d['log_path']}",
    ]
    if ds.info is None:
        lines.append(f"not answering: {ds.rpc_error}")
    return "\n".join(lines)


# -- start -----------------------------------------------------------------------------------------------------
def _tail(path: Path, lines: int = 20) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return "(no log)"
    return "\n".join(text.splitlines()[-lines:])


def check_addresses(config: Config, *, allowed_instance: str | None = None) -> list[str]:
    """Probe every address the config listens on; notes about stale sockets removed.

    An address held by the cuzk instance `allowed_instance` (the one a restart is about to stop) is fine."""
    notes = []
    targets = [(a, "daemon.listen") for a in config.daemon.listen]
    if config.daemon.status_listen:
        targets.append((config.daemon.status_listen, "daemon.status_listen"))
    for addr, what in targets:
        try:
            note = check_listen_address(addr, what=what)
        except AddressInUseError as err:
            info = err.holder.info
            if allowed_instance is not None and info is not None and info.get("instance_id") == allowed_instance:
                continue
            raise
        if note:
            notes.append(note)
    return notes


@dataclass
class Started:
    identity: Identity
    seconds: float
    notes: list[str] = field(default_factory=list)


def start(config: Config, *, run_args: list[str], wait_ready: float, say: Say) -> Started:
    """Spawn `cuzk daemon run` for `config` and return once this instance answers ready."""
    state = StateDir(resolve_state_dir(config))
    state.ensure()
    current = inspect(state, rpc=False)
    if current.running:
        who = current.identity.describe() if current.identity else f"pid {current.lock_holder} (starting)"
        raise DaemonRunningError(f"a cuzk daemon is already running with state directory {state.root}: {who}; "
                                 "use `cuzk daemon restart` or `cuzk daemon stop`")
    notes = []
    if current.stale:
        notes.append(f"stale pid file: {current.stale}; the new daemon takes it over")
    notes += check_addresses(config)
    for note in notes:
        say(f"note: {note}")
    instance_id = new_instance_id()
    started = time.time()
    log_path = state.log_path(instance_id, started)
    argv = [sys.executable, "-m", "cuzk.cli.main", "daemon", "run"]
    if config.source:
        argv += ["--config", str(Path(config.source).absolute())]
    argv += [*run_args, "--instance-id", instance_id, "--log-file", str(log_path)]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    env.pop("NOTIFY_SOCKET", None)  # systemd's main process is not this background daemon
    with open(log_path, "ab") as log_file:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log_file, stderr=subprocess.STDOUT, env=env,
                                start_new_session=True, close_fds=True)
    ident = _wait_ready(proc, state, instance_id, log_path, wait_ready)
    return Started(ident, time.time() - started, notes)


def _wait_ready(proc: subprocess.Popen, state: StateDir, instance_id: str, log_path: Path,
                wait_ready: float) -> Identity:
    """Poll until the record and the RPC both show this instance (id and pid) ready; stop it on timeout."""
    deadline = time.monotonic() + wait_ready
    while True:
        code = proc.poll()
        if code is not None:
            raise StartError(f"the daemon (pid {proc.pid}, instance {instance_id}) exited with status {code} "
                             f"before it was ready. The end of its log {log_path}:\n{_tail(log_path)}")
        ident = Identity.from_record(state.read_record())
        if ident is not None and ident.instance_id == instance_id and ident.pid == proc.pid:
            info, _ = _ask(ident, 1.0)
            if info is not None and info.get("ready") and info.get("pid") == proc.pid:
                ident.phase = "ready"
                return ident
        if time.monotonic() > deadline:
            break
        time.sleep(0.1)
    proc.terminate()
    try:
        proc.wait(30)
        how = "stopped it with SIGTERM"
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)
        how = "killed it (it ignored SIGTERM for 30 s)"
    raise StartError(f"the daemon (pid {proc.pid}, instance {instance_id}) was not ready within {wait_ready:g} s; "
                     f"{how}. The end of its log {log_path}:\n{_tail(log_path)}")


# -- stop --------------------------------------------------------------------------------------------------------
@dataclass
class Stopped:
    was_running: bool
    identity: Identity | None = None
    #: "SIGTERM" (it exited by itself within the timeout), "SIGKILL", or "" when nothing ran.
    how: str = ""
    seconds: float = 0.0
    last_exit: dict[str, Any] | None = None
    messages: list[str] = field(default_factory=list)


def _wait_gone(proc: ProcessRef, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while proc.alive:
        if time.monotonic() > deadline:
            return False
        time.sleep(POLL_S)
    return True


def _clean_leftovers(state: StateDir, ident: Identity | None) -> list[str]:
    """After a daemon died without cleaning up: its pid file and record, and socket files nobody listens on."""
    notes = []
    lock = PidLock(state.pid_path)
    if lock.acquire(wait_s=1.0):  # nobody else holds it: whatever it and the record say is stale
        had_record = state.record_path.exists()
        state.remove_record()
        lock.release(remove=True)
        notes.append(f"removed the stale pid file{' and instance record' if had_record else ''} in {state.root}")
    if ident is not None:
        for addr in ident.listen:
            path = unix_path(addr)
            if path is not None and remove_stale_unix_socket(path):
                notes.append(f"removed stale socket file {path} (a connection to it was refused)")
    return notes


def stop(state: StateDir, *, timeout: float | None, say: Say) -> Stopped:
    """Stop the daemon of `state`: SIGTERM, wait, SIGKILL after `timeout`; return once it is gone and its
    addresses are free."""
    ds = inspect(state, rpc=False)
    if not ds.running:
        out = Stopped(False, ds.identity)
        if ds.stale:
            out.messages.append(f"stale: {ds.stale}")
            out.messages += _clean_leftovers(state, ds.identity)
        out.messages.insert(0, f"no cuzk daemon is running with state directory {state.root}: nothing to stop")
        for m in out.messages:
            say(m)
        return out
    ident = ds.identity
    if ident is None:  # the lock is held but no record exists yet: wait for the record, briefly
        deadline = time.monotonic() + 5.0
        while ident is None and time.monotonic() < deadline:
            time.sleep(POLL_S)
            ident = Identity.from_record(state.read_record())
        if ident is None or not ident.process.alive:
            holder = ds.lock_holder or 0
            raise CuzkError(f"{state.pid_path} is locked by pid {holder} ({process_summary(holder)}) but no instance "
                            "record appeared: not stopping a process it cannot identify")
    proc = ident.process
    limit = ident.shutdown_grace + STOP_MARGIN_S if timeout is None else timeout
    workers = proc.children()
    out = Stopped(True, ident)
    t0 = time.monotonic()
    say(f"stopping cuzk daemon pid {ident.pid} (instance {ident.instance_id}): SIGTERM, waiting up to {limit:g} s")
    if proc.signal(signal.SIGTERM) and not _wait_gone(proc, limit):
        say(f"it did not exit within {limit:g} s after SIGTERM: sending SIGKILL")
        proc.signal(signal.SIGKILL)
        out.how = "SIGKILL"
        if not _wait_gone(proc, KILL_WAIT_S):
            raise CuzkError(f"pid {ident.pid} is still there {KILL_WAIT_S:g} s after SIGKILL (stuck in the kernel?)")
        out.messages += _reap_workers(workers)
        out.messages += _clean_leftovers(state, ident)
    else:
        out.how = "SIGTERM"
    out.seconds = time.monotonic() - t0
    last = state.read_last_exit()
    if last is not None and last.get("instance_id") == ident.instance_id:
        out.last_exit = last
    out.messages += _wait_addresses_free(ident)
    if out.how == "SIGTERM":
        detail = f"exit status {out.last_exit.get('exit_code')}; {out.last_exit.get('summary', '')}" \
            if out.last_exit else "it left no exit record"
        say(f"stopped: it exited by itself after SIGTERM in {out.seconds:.1f} s ({detail.rstrip('; ')})")
    else:
        say(f"stopped: killed with SIGKILL after {out.seconds:.1f} s (jobs in flight stay in the journal for the "
            "next start)")
    for m in out.messages:
        say(m)
    return out


def _reap_workers(workers: list[ProcessRef]) -> list[str]:
    """Worker processes of a killed daemon exit when their pipes close; kill those that have not after 2 s."""
    deadline = time.monotonic() + 2.0
    while any(w.alive for w in workers) and time.monotonic() < deadline:
        time.sleep(POLL_S)
    killed = [w.pid for w in workers if w.signal(signal.SIGKILL)]
    return [f"killed {len(killed)} worker process(es) of the killed daemon: {killed}"] if killed else []


def _wait_addresses_free(ident: Identity) -> list[str]:
    addresses = list(ident.listen) + ([ident.status_listen] if ident.status_listen else [])
    deadline = time.monotonic() + ADDRESS_WAIT_S
    pending = [a for a in addresses if not _is_ephemeral(a)]
    while pending and time.monotonic() < deadline:
        pending = [a for a in pending if not address_free(a)]
        if pending:
            time.sleep(POLL_S)
    if pending:
        raise CuzkError(f"the daemon is gone but {', '.join(pending)} is still in use (by another process?)")
    return [f"free: {', '.join(a for a in addresses if not _is_ephemeral(a))}"] if addresses else []


def _is_ephemeral(addr: str) -> bool:
    return unix_path(addr) is None and tcp_host_port(addr)[1] == 0


# -- restart -----------------------------------------------------------------------------------------------------
def validate_config(config: Config) -> None:
    """Everything a new daemon would check before serving, short of binding and spawning workers."""
    config.memory.resolve_budget()
    from cuzk.engine.devices import detect_devices
    from cuzk.providers import build_providers

    providers = build_providers(config.srs.param_cache, test_circuits=config.debug.test_circuits)
    for circuit_id in config.srs.preload:
        try:
            providers.srs_source(circuit_id)
        except CuzkError as err:
            raise ConfigError(f"srs.preload: {err}") from None
    detect_devices(config)
    for addr in [*config.daemon.listen, *([config.daemon.status_listen] if config.daemon.status_listen else [])]:
        if unix_path(addr) is None:
            try:
                tcp_host_port(addr)
            except CuzkError as err:
                raise ConfigError(f"daemon.listen: {err}") from None
    from cuzk.server.auth import ServerSecurity

    security = ServerSecurity.from_config(config)  # token and PEM files readable, settings consistent
    for addr in config.daemon.listen:
        if unix_path(addr) is None:
            security.check_tcp_address(addr)  # no unprotected address other hosts can reach


@dataclass
class Restarted:
    old: Identity | None
    new: Identity
    stopped: Stopped | None


def restart(config: Config, *, run_args: list[str], wait_ready: float, timeout: float | None, say: Say) -> Restarted:
    """Validate `config`, stop the running instance (verified gone), start the new one, confirm it."""
    try:
        validate_config(config)
    except CuzkError as err:
        raise ConfigError(f"not restarting, the running daemon is left as it is: {err}") from None
    state = StateDir(resolve_state_dir(config))
    ds = inspect(state, rpc=False)
    old = ds.identity if ds.running else None
    try:
        check_addresses(config, allowed_instance=old.instance_id if old else None)
    except CuzkError as err:
        raise CuzkError(f"not restarting, the running daemon is left as it is: {err}") from None
    stopped = stop(state, timeout=timeout, say=say) if ds.running else None
    if stopped is None:
        say(f"no cuzk daemon was running with state directory {state.root}: starting one")
    started = start(config, run_args=run_args, wait_ready=wait_ready, say=say)
    new = started.identity
    expected = config.fingerprint()
    if new.config_fingerprint != expected:
        raise CuzkError(f"the new instance {new.instance_id} runs config fingerprint {new.config_fingerprint}, "
                        f"not the {expected} this restart asked for")
    if old is not None and new.instance_id == old.instance_id:  # pragma: no cover - ids are random
        raise CuzkError(f"the daemon still reports the old instance {old.instance_id}")
    return Restarted(old, new, stopped)


# -- logs ----------------------------------------------------------------------------------------------------------
def pick_log(state: StateDir, instance: str | None) -> tuple[Path, str, bool]:
    """(log file, instance id, whether that instance runs now) for `instance`, else the running or last one."""
    ds = inspect(state, rpc=False)
    running_id = ds.identity.instance_id if ds.running and ds.identity else None
    if instance:
        path = state.log_for(instance)
        if path is None:
            raise CuzkError(f"no log file for instance {instance!r} in {state.logs_dir}")
        return path, instance, instance == running_id
    if running_id is not None and ds.identity is not None:
        return Path(ds.identity.log_path), running_id, True
    files = state.logs()
    if not files:
        raise CuzkError(f"no daemon log files in {state.logs_dir}")
    return files[-1].path, files[-1].instance_id, False


def show_log(state: StateDir, *, instance: str | None, lines: int | None, follow: bool, out: TextIO,
             err: TextIO) -> int:
    path, instance_id, running = pick_log(state, instance)
    print(f"==> {path} (instance {instance_id}, {'running' if running else 'not running'}) <==", file=err)
    with open(path, errors="replace") as f:
        text = f.read()
        shown = text.splitlines(keepends=True)
        out.writelines(shown if lines is None else shown[-lines:] if lines > 0 else [])
        out.flush()
        if not follow:
            return 0
        ident = Identity.from_record(state.read_record())
        proc = ident.process if ident is not None and ident.instance_id == instance_id else None
        with contextlib.suppress(KeyboardInterrupt):
            while True:
                chunk = f.read()
                if chunk:
                    out.write(chunk)
                    out.flush()
                elif proc is None or not proc.alive:
                    break
                else:
                    time.sleep(0.2)
    return 0
