"""`cuzk config show`: the resolved daemon configuration and its fingerprint.

Also home of `resolve_config`, shared with `cuzk daemon run`: a config file named with --config must
exist; without --config the default path is used if present, otherwise the defaults.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from cuzk.config import DEFAULT_CONFIG_PATH, Config, load_config


def add_config_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", "-c", type=Path, default=None,
                        help=f"daemon TOML file (default: {DEFAULT_CONFIG_PATH} if it exists, else the defaults)")


def resolve_config(path: Path | None) -> Config:
    if path is not None:
        return load_config(path, explicit=True)
    return load_config(DEFAULT_CONFIG_PATH, explicit=False)


def register(sub: argparse._SubParsersAction) -> None:
    config = sub.add_parser("config", help="inspect the daemon configuration")
    csub = config.add_subparsers(dest="config_command", metavar="SUBCOMMAND", required=True)
    show = csub.add_parser("show", help="print the resolved configuration (TOML) and its fingerprint")
    add_config_argument(show)
    show.add_argument("--json", action="store_true", help="print JSON instead of TOML")
    show.set_defaults(handler=cmd_show)


def cmd_show(args: argparse.Namespace) -> int:
    from cuzk.config.host import cpu_limit

    config = resolve_config(args.config)
    budget, source = config.memory.resolve()
    cpus = cpu_limit()
    if args.json:
        print(json.dumps({"source": config.source, "fingerprint": config.fingerprint(), "settings": config.settings(),
                          "resolved": {"memory_budget_bytes": budget, "memory_budget_source": source,
                                       "cpus": cpus.cpus, "cpus_source": cpus.source},
                          "warnings": config.warnings}, indent=2))
        return 0
    print(f"# source: {config.source or 'defaults'}")
    print(f"# fingerprint: {config.fingerprint()}")
    print(f"# memory budget: {budget:,} bytes ({source})")
    print(f"# cpus: {cpus.cpus} ({cpus.source})")
    for warning in config.warnings:
        print(f"# warning: {warning}")
    print()
    print(config.to_toml(), end="")
    return 0
