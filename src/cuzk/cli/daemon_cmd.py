"""`cuzk daemon run`: the proving daemon in the foreground (SIGTERM or Ctrl-C stops it).

Command-line options override the configuration file: --listen (repeatable) replaces
daemon.listen, --status-listen daemon.status_listen, --log-level logging.level (CUZK_LOG_LEVEL in
the environment wins over both), --log-format logging.format.
"""

from __future__ import annotations

import argparse
import logging

from cuzk.cli.config_cmd import add_config_argument, resolve_config
from cuzk.engine.config import LOG_FORMATS, LOG_LEVELS, ConfigError


def register(sub: argparse._SubParsersAction) -> None:
    daemon = sub.add_parser("daemon", help="run the proving daemon")
    dsub = daemon.add_subparsers(dest="daemon_command", metavar="SUBCOMMAND", required=True)
    run = dsub.add_parser("run", help="run the daemon in the foreground until SIGTERM/SIGINT")
    add_config_argument(run)
    run.add_argument("--listen", "-l", action="append", metavar="ADDR",
                     help="gRPC address, host:port or unix:///path (repeatable; replaces daemon.listen)")
    run.add_argument("--status-listen", metavar="HOST:PORT", help="HTTP /status and /metrics address")
    run.add_argument("--log-level", choices=LOG_LEVELS, help="override logging.level")
    run.add_argument("--log-format", choices=LOG_FORMATS, help="override logging.format")
    run.set_defaults(handler=cmd_run)


def cmd_run(args: argparse.Namespace) -> int:
    from cuzk.server.daemon import run_foreground
    from cuzk.server.logs import resolve_level, setup_logging

    config = resolve_config(args.config)
    if args.listen:
        if any(not a.strip() for a in args.listen):
            raise ConfigError("--listen: empty address")
        config.daemon.listen = list(args.listen)
    if args.status_listen is not None:
        config.daemon.status_listen = args.status_listen
    if args.log_format:
        config.logging.format = args.log_format
    if args.log_level:
        config.logging.level = args.log_level
    try:
        level = resolve_level(config.logging.level)
    except ValueError as err:
        raise ConfigError(f"CUZK_LOG_LEVEL: {err}") from None
    setup_logging(level, config.logging.format)
    log = logging.getLogger("cuzk.daemon")
    log.info("cuzk daemon starting (config %s, fingerprint %s)", config.source or "defaults", config.fingerprint())
    for warning in config.warnings:
        log.warning("%s", warning)
    return run_foreground(config)
