"""`cuzk daemon run|start|stop|restart|status|logs`: the proving daemon and its lifecycle.

`run` serves in the foreground until SIGTERM/SIGINT (for systemd, Type=notify); `start` runs it in
the background and returns once that very instance is ready; `stop`, `restart`, `status` and `logs`
find it through the state directory (`--state-dir`, else daemon.state_dir of --config, else the
per-user default), never by process name.

Command-line options override the configuration file: --listen (repeatable) replaces
daemon.listen, --status-listen daemon.status_listen, --state-dir daemon.state_dir, --log-level
logging.level (CUZK_LOG_LEVEL in the environment wins over both), --log-format logging.format. The
overrides are part of the configuration the fingerprint describes.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from cuzk.cli.config_cmd import add_config_argument, resolve_config
from cuzk.config import LOG_FORMATS, LOG_LEVELS, Config, ConfigError

#: `cuzk daemon start` waits this long for readiness by default (a first start compiles kernels).
DEFAULT_WAIT_READY_S = 600.0
EXIT_NOT_RUNNING = 3  #: `daemon status` when no daemon runs (the LSB convention)


def _add_overrides(parser: argparse.ArgumentParser) -> None:
    add_config_argument(parser)
    parser.add_argument("--listen", "-l", action="append", metavar="ADDR",
                        help="gRPC address, host:port or unix:///path (repeatable; replaces daemon.listen)")
    parser.add_argument("--status-listen", metavar="HOST:PORT", help="HTTP /status and /metrics address")
    parser.add_argument("--state-dir", metavar="DIR",
                        help="pid file, job journal and logs (default: daemon.state_dir, else $XDG_STATE_HOME/cuzk)")
    parser.add_argument("--log-level", choices=LOG_LEVELS, help="override logging.level")
    parser.add_argument("--log-format", choices=LOG_FORMATS, help="override logging.format")


def _add_locator(parser: argparse.ArgumentParser) -> None:
    add_config_argument(parser)
    parser.add_argument("--state-dir", metavar="DIR", help="the daemon's state directory (default: from the config)")


def register(sub: argparse._SubParsersAction) -> None:
    daemon = sub.add_parser("daemon", help="run and manage the proving daemon")
    dsub = daemon.add_subparsers(dest="daemon_command", metavar="SUBCOMMAND", required=True)

    run = dsub.add_parser("run", help="run the daemon in the foreground until SIGTERM/SIGINT (systemd Type=notify)")
    _add_overrides(run)
    run.add_argument("--instance-id", help=argparse.SUPPRESS)  # chosen by `cuzk daemon start`
    run.add_argument("--log-file", type=Path, help=argparse.SUPPRESS)  # likewise
    run.set_defaults(handler=cmd_run)

    start = dsub.add_parser("start", help="start the daemon in the background; return once it is ready")
    _add_overrides(start)
    start.add_argument("--wait-ready", type=float, default=DEFAULT_WAIT_READY_S, metavar="SECONDS",
                       help=f"give up (and stop it) if not ready in this time (default {DEFAULT_WAIT_READY_S:g})")
    start.add_argument("--json", action="store_true", help="print the new instance's status as JSON")
    start.set_defaults(handler=cmd_start)

    stop = dsub.add_parser("stop", help="stop the daemon (SIGTERM, then SIGKILL after --timeout)")
    _add_locator(stop)
    stop.add_argument("--timeout", type=float, metavar="SECONDS",
                      help="SIGKILL if it has not exited by then (default: its daemon.shutdown_grace + 30)")
    stop.add_argument("--json", action="store_true")
    stop.set_defaults(handler=cmd_stop)

    restart = dsub.add_parser("restart", help="validate the config, stop the daemon, start it, confirm the new one")
    _add_overrides(restart)
    restart.add_argument("--wait-ready", type=float, default=DEFAULT_WAIT_READY_S, metavar="SECONDS")
    restart.add_argument("--timeout", type=float, metavar="SECONDS", help="stop timeout before SIGKILL")
    restart.add_argument("--json", action="store_true")
    restart.set_defaults(handler=cmd_restart)

    status = dsub.add_parser("status", help="is a daemon running and ready, and which instance (exit 3: not running)")
    _add_locator(status)
    status.add_argument("--json", action="store_true")
    status.set_defaults(handler=cmd_status)

    logs = dsub.add_parser("logs", help="the log of the running (or last, or a given) daemon instance")
    _add_locator(logs)
    logs.add_argument("--instance", help="an instance id (default: the running one, else the last)")
    logs.add_argument("--lines", "-n", type=int, help="only the last N lines")
    logs.add_argument("--follow", "-f", action="store_true", help="keep printing while the instance runs")
    logs.add_argument("--list", action="store_true", help="list the instance log files")
    logs.set_defaults(handler=cmd_logs)


# -- configuration -------------------------------------------------------------------------------------------
def override_args(args: argparse.Namespace) -> list[str]:
    """The overrides as `daemon run` arguments (recorded, so `restart` can start the same way)."""
    out: list[str] = []
    for addr in args.listen or []:
        if not addr.strip():
            raise ConfigError("--listen: empty address")
        out += ["--listen", addr]
    if args.status_listen is not None:
        out += ["--status-listen", args.status_listen]
    if args.state_dir:
        out += ["--state-dir", str(Path(args.state_dir).expanduser().absolute())]
    if args.log_level:
        out += ["--log-level", args.log_level]
    if args.log_format:
        out += ["--log-format", args.log_format]
    return out


def apply_overrides(config: Config, run_args: list[str]) -> Config:
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--listen", action="append")
    parser.add_argument("--status-listen")
    parser.add_argument("--state-dir")
    parser.add_argument("--log-level")
    parser.add_argument("--log-format")
    ns, rest = parser.parse_known_args(run_args)
    if rest:
        raise ConfigError(f"unexpected daemon arguments: {' '.join(rest)}")
    if ns.listen:
        config.daemon.listen = list(ns.listen)
    if ns.status_listen is not None:
        config.daemon.status_listen = ns.status_listen
    if ns.state_dir:
        config.daemon.state_dir = ns.state_dir
    if ns.log_format:
        config.logging.format = ns.log_format
    if ns.log_level:
        config.logging.level = ns.log_level
    return config


def daemon_config(config_path: Path | None, run_args: list[str]) -> Config:
    return apply_overrides(resolve_config(config_path), run_args)


def _state(args: argparse.Namespace) -> Any:
    from cuzk.daemon.state import StateDir, resolve_state_dir

    return StateDir(resolve_state_dir(resolve_config(args.config), args.state_dir))


def _print(say_json: bool) -> Any:
    """Progress lines: stdout, or stderr when stdout carries JSON."""
    return (lambda line: print(line, file=sys.stderr)) if say_json else print


# -- commands ----------------------------------------------------------------------------------------------------
def cmd_run(args: argparse.Namespace) -> int:
    from cuzk.daemon.identity import check_instance_id, new_instance_id
    from cuzk.daemon.runner import run_daemon
    from cuzk.server.logs import resolve_level

    run_args = override_args(args)
    config = daemon_config(args.config, run_args)
    try:
        level = resolve_level(config.logging.level)
    except ValueError as err:
        raise ConfigError(f"CUZK_LOG_LEVEL: {err}") from None
    instance_id = check_instance_id(args.instance_id) if args.instance_id else new_instance_id()
    return run_daemon(config, instance_id=instance_id, run_args=run_args, log_level=level, log_path=args.log_file)


def _started_line(ident: Any, seconds: float) -> str:
    return (f"started cuzk daemon: pid {ident.pid}, instance {ident.instance_id}, config "
            f"{ident.config_path or 'defaults'} (fingerprint {ident.config_fingerprint}), listening on "
            f"{', '.join(ident.listen)}, ready after {seconds:.1f} s\nlog: {ident.log_path}")


def cmd_start(args: argparse.Namespace) -> int:
    from cuzk.daemon import control

    run_args = override_args(args)
    config = daemon_config(args.config, run_args)
    say = _print(args.json)
    started = control.start(config, run_args=run_args, wait_ready=args.wait_ready, say=say)
    if args.json:
        out = control.inspect(started_state(config)).as_dict()
        out["ready_after_s"] = round(started.seconds, 3)
        print(json.dumps(out, indent=2))
    else:
        print(_started_line(started.identity, started.seconds))
    return 0


def started_state(config: Config) -> Any:
    from cuzk.daemon.state import StateDir, resolve_state_dir

    return StateDir(resolve_state_dir(config))


def cmd_stop(args: argparse.Namespace) -> int:
    from cuzk.daemon import control

    result = control.stop(_state(args), timeout=args.timeout, say=_print(args.json))
    if args.json:
        ident = result.identity
        print(json.dumps({"was_running": result.was_running, "how": result.how, "seconds": round(result.seconds, 3),
                          "pid": ident.pid if ident else None, "instance_id": ident.instance_id if ident else None,
                          "last_exit": result.last_exit, "messages": result.messages}, indent=2))
    return 0


def cmd_restart(args: argparse.Namespace) -> int:
    from cuzk.daemon import control
    from cuzk.daemon.identity import Identity

    run_args = override_args(args)
    config_path = args.config
    if config_path is None and not run_args:  # same file and overrides as the running instance
        ident = Identity.from_record(_state(args).read_record())
        if ident is not None and ident.process.alive:
            config_path = Path(ident.config_path) if ident.config_path else None
            run_args = list(ident.run_args)
    try:
        config = daemon_config(config_path, run_args)
    except ConfigError as err:
        raise ConfigError(f"not restarting, the running daemon is left as it is: {err}") from None
    say = _print(args.json)
    result = control.restart(config, run_args=run_args, wait_ready=args.wait_ready, timeout=args.timeout, say=say)
    new, old = result.new, result.old
    if args.json:
        out = control.inspect(started_state(config)).as_dict()
        out["previous"] = None if old is None else {"instance_id": old.instance_id, "pid": old.pid,
                                                    "config_fingerprint": old.config_fingerprint}
        print(json.dumps(out, indent=2))
    else:
        before = f"instance {old.instance_id} (config {old.config_fingerprint})" if old else "nothing running"
        print(f"restarted: {before} -> instance {new.instance_id} (config {new.config_fingerprint}), pid {new.pid}, "
              f"listening on {', '.join(new.listen)}")
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    from cuzk.daemon import control

    ds = control.inspect(_state(args))
    if args.json:
        print(json.dumps(ds.as_dict(), indent=2))
    else:
        print(control.format_status(ds))
    return 0 if ds.running else EXIT_NOT_RUNNING


def cmd_logs(args: argparse.Namespace) -> int:
    from cuzk.daemon import control

    state = _state(args)
    if args.list:
        for f in state.logs():
            print(f"{f.started}  {f.instance_id}  {f.path}")
        return 0
    return control.show_log(state, instance=args.instance, lines=args.lines, follow=args.follow, out=sys.stdout,
                            err=sys.stderr)
