"""`cuzk daemon run`: one daemon instance in the foreground, from pid file to clean exit.

In order, each step before anything expensive that depends on it:
1. the instance's own log file and the instance id on every log line;
2. the pid file lock: another live daemon on this state directory stops us at once, naming it; a
   pid file left by a dead daemon (or naming a pid since reused by another program) is taken over
   and reported;
3. every listen address is probed: a taken one stops us within a second or two, naming the holder
   (a cuzk daemon's pid, instance and config, or a program that is not cuzk); a stale unix socket
   file is removed only after a refused connection showed that nobody listens on it;
4. the instance record (phase "starting"), the job journal, then the servers and engine
   (cuzk.server.serve); "ready" is logged, written to the record and sent to systemd only once
   the listeners are bound and the engine accepts work;
5. on SIGTERM/SIGINT: STOPPING=1, drain for `daemon.shutdown_grace`, journal checkpoint, record
   and pid file removed, `last-exit.json` written, exit 0.
"""

from __future__ import annotations

import logging
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cuzk.config import Config
from cuzk.daemon.identity import Identity
from cuzk.daemon.notify import Notifier
from cuzk.daemon.pidfile import PidLock, ProcessRef, lock_holders, read_pid
from cuzk.daemon.state import StateDir, resolve_state_dir
from cuzk.errors import CuzkError
from cuzk.server.address import check_listen_address, process_summary, unix_path

if TYPE_CHECKING:
    from cuzk.server.serve import Daemon, StopSummary

log = logging.getLogger("cuzk.daemon")
#: The daemon process's interpreter switch interval (device processes set theirs too,
#: cuzk.engine.device_worker.DEVICE_SWITCH_INTERVAL_S; synthesis processes keep the default).
DAEMON_SWITCH_INTERVAL_S = 0.0005


class DaemonRunningError(CuzkError):
    """Another daemon holds this state directory."""


def running_description(state: StateDir) -> str:
    """Who holds the state directory's pid file lock, for the refusal message."""
    ident = Identity.from_record(state.read_record())
    if ident is not None and ident.process.alive:
        return f"a cuzk daemon is already running with state directory {state.root}: {ident.describe()}"
    holders = lock_holders(state.pid_path)
    who = ", ".join(f"pid {p} ({process_summary(p)})" for p in holders) or f"pid {read_pid(state.pid_path)}"
    return (f"the pid file {state.pid_path} is locked by {who}: a cuzk daemon still starting or stopping, or a cuzk "
            "command working on it")


def stale_note(lock: PidLock, previous: Identity | None) -> str | None:
    """What the pid file we just locked said about a previous daemon that did not clean up, if anything."""
    pid = lock.previous_pid()
    if previous is not None and (pid is None or pid == previous.pid):
        reason = previous.process.gone_reason() or "it no longer holds the lock"
        return (f"took over a stale pid file: the daemon it names (pid {previous.pid}, instance "
                f"{previous.instance_id}) did not stop cleanly; {reason}")
    if pid is not None:
        return f"took over a stale pid file naming pid {pid}, which no longer holds it (no instance record)"
    return None


def run_daemon(config: Config, *, instance_id: str, run_args: list[str], log_level: int,
               log_path: Path | None = None) -> int:
    """Run one instance until it is stopped; the exit status. `log_path`: the instance's log file, when
    `cuzk daemon start` already chose it (default: a new one in the state directory)."""
    from cuzk.server.logs import setup_logging

    # A thread that wants the GIL waits up to this long for one that runs Python (a PoRep request's
    # planning, seconds of it): CRITICAL work crosses this process's threads many times, each time
    # waiting out a switch interval (benchmarks/results/planning-stall-cpu-2026-12-02.jsonl).
    sys.setswitchinterval(DAEMON_SWITCH_INTERVAL_S)
    notifier = Notifier.from_environment()  # before any worker process could inherit it
    started_at = time.time()
    state = StateDir(resolve_state_dir(config))
    state.ensure()
    log_path = log_path or state.log_path(instance_id, started_at)
    setup_logging(log_level, config.logging.format, instance_id=instance_id, log_file=log_path)
    me = ProcessRef.current()
    log.info("cuzk daemon starting: pid %d, config %s (fingerprint %s), state dir %s, log %s", me.pid,
             config.source or "defaults", config.fingerprint(), state.root, log_path)
    for warning in config.warnings:
        log.warning("%s", warning)
    lock = PidLock(state.pid_path)
    try:
        if not lock.acquire():
            raise DaemonRunningError(running_description(state))
        try:
            return _run_locked(config, state, lock, me, notifier, instance_id=instance_id, started_at=started_at,
                               log_path=log_path, run_args=run_args)
        finally:
            state.remove_record()
            lock.release(remove=True)
            state.prune_logs(protect=(log_path,))
    except CuzkError as err:
        log.error("%s", err)
        notifier.status(f"failed to start: {err}")
        raise


def _run_locked(config: Config, state: StateDir, lock: PidLock, me: ProcessRef, notifier: Notifier, *,
                instance_id: str, started_at: float, log_path: Path, run_args: list[str]) -> int:
    note = stale_note(lock, Identity.from_record(state.read_record()))
    if note:
        log.warning("%s", note)
    lock.write_pid(me.pid)
    for addr in config.daemon.listen:
        path = unix_path(addr)
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
        removed = check_listen_address(addr)
        if removed:
            log.info("%s", removed)
    if config.daemon.status_listen:
        check_listen_address(config.daemon.status_listen, what="daemon.status_listen")
    identity = Identity(
        instance_id=instance_id, config_fingerprint=config.fingerprint(),
        config_path=str(Path(config.source).absolute()) if config.source else None, pid=me.pid,
        start_ticks=me.start_ticks, started_at=started_at, state_dir=str(state.root), log_path=str(log_path),
        listen=list(config.daemon.listen), status_listen=config.daemon.status_listen,
        shutdown_grace=config.daemon.shutdown_grace, run_args=run_args,
    )
    state.write_record(identity.record())
    journal = None
    if config.daemon.journal:
        from cuzk.engine.journal import Journal

        d = config.daemon
        journal = Journal(state.journal_path, instance_id=instance_id, keep_requests=d.on_restart == "requeue",
                          retention_s=d.result_retention, max_results=d.max_retained_results)

    from cuzk.server.serve import run_foreground

    def on_ready(daemon: Daemon) -> None:
        identity.listen = list(daemon.addresses)
        identity.phase = "ready"
        state.write_record(identity.record())
        notifier.ready(f"ready: instance {instance_id}, config {identity.config_fingerprint}, serving on "
                       f"{', '.join(daemon.addresses)}")

    def on_stopping(daemon: Daemon) -> None:
        identity.phase = "stopping"
        state.write_record(identity.record())
        notifier.stopping(f"stopping: draining up to {config.daemon.shutdown_grace:g} s")

    def on_stopped(summary: StopSummary | None) -> None:
        exit_info: dict[str, Any] = {
            "instance_id": instance_id, "pid": me.pid, "exit_code": 0, "stopped_at": time.time(),
            "config_fingerprint": identity.config_fingerprint, "was_ready": identity.phase != "starting",
        }
        if summary is not None:
            exit_info.update(in_flight=summary.unfinished, finished_in_grace=summary.finished,
                             cancelled=summary.cancelled, grace_s=summary.grace_s, summary=summary.text())
        state.write_last_exit(exit_info)

    identity_view = {"config_path": identity.config_path or "", "state_dir": str(state.root),
                     "log_path": str(log_path), "started_at": identity.started_at_iso}
    try:
        code = run_foreground(config, instance_id=instance_id, journal=journal, identity=identity_view,
                              on_ready=on_ready, on_stopping=on_stopping, on_stopped=on_stopped)
    except BaseException as err:
        state.write_last_exit({"instance_id": instance_id, "pid": me.pid, "exit_code": 2, "stopped_at": time.time(),
                               "config_fingerprint": identity.config_fingerprint, "was_ready": False,
                               "error": str(err) or type(err).__name__})
        raise
    log.info("exiting with status %d", code)
    return code
