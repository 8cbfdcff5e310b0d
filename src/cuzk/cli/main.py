"""`cuzk`: one entry point, subcommands per area.

User errors (`CuzkError`) print one line on stderr and exit with status 2; a failed verification
exits with 1; success is 0. A traceback means a bug in cuzk.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from cuzk import __version__
from cuzk.errors import CuzkError

EXIT_OK = 0
EXIT_INVALID = 1
EXIT_USAGE = 2


def build_parser() -> argparse.ArgumentParser:
    from cuzk.cli import (
        bench_cmd,
        circuit_cmd,
        client_cmd,
        config_cmd,
        daemon_cmd,
        demo,
        gen_vanilla,
        groth16_cmd,
        params_cmd,
    )

    parser = argparse.ArgumentParser(prog="cuzk", description="Groth16 (BLS12-381) proving for Filecoin.")
    parser.add_argument("--version", action="version", version=f"cuzk {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    demo.register(sub)
    params_cmd.register(sub)
    circuit_cmd.register(sub)
    groth16_cmd.register(sub)
    gen_vanilla.register(sub)
    daemon_cmd.register(sub)
    config_cmd.register(sub)
    client_cmd.register(sub)
    bench_cmd.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.handler(args) or EXIT_OK)
    except CuzkError as err:
        print(f"cuzk: error: {err}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("cuzk: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return EXIT_OK


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
