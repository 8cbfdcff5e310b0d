"""`cuzk`: one entry point, subcommands per area.

User errors (`CuzkError`) print one line on stderr and exit with status 2; a failed verification
exits with 1; success is 0. A traceback means a bug in cuzk.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence
from typing import NoReturn

from cuzk import __version__
from cuzk.errors import CuzkError

EXIT_OK = 0
EXIT_INVALID = 1
EXIT_USAGE = 2


#: The module that registers each top-level command, in `--help` order. A command line naming one
#: command imports only its module: the others pull in grpc, protobuf, rich... (~0.2 s a run).
COMMAND_MODULES = {
    "demo": "demo",
    "params": "params_cmd",
    "circuit": "circuit_cmd",
    "groth16": "groth16_cmd",
    "gen-vanilla": "gen_vanilla",
    "daemon": "daemon_cmd",
    "config": "config_cmd",
    "doctor": "doctor_cmd",
    "prove": "client_cmd",
    "status": "client_cmd",
    "metrics": "client_cmd",
    "preload": "client_cmd",
    "evict": "client_cmd",
    "cancel": "client_cmd",
    "bench": "bench_cmd",
}


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The parser; given the command line, only the named command's module is imported."""
    parser = argparse.ArgumentParser(prog="cuzk", description="Groth16 (BLS12-381) proving for Filecoin.")
    parser.add_argument("--version", action="version", version=f"cuzk {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    named = argv[0] if argv else None
    modules = [COMMAND_MODULES[named]] if named in COMMAND_MODULES else list(dict.fromkeys(COMMAND_MODULES.values()))
    for module in modules:
        importlib.import_module(f"cuzk.cli.{module}").register(sub)
    return parser


def _interruption(err: BaseException) -> SystemExit | KeyboardInterrupt | None:
    """The SystemExit or KeyboardInterrupt inside `err`'s chain. A signal handler's exception raised
    while C code runs Python (a numba dispatcher loading or compiling a function) comes back as a
    SystemError "returned a result with an exception set" whose cause is that exception."""
    seen: set[int] = set()
    inner = err.__cause__ or err.__context__
    while inner is not None and id(inner) not in seen:
        if isinstance(inner, (SystemExit, KeyboardInterrupt)):
            return inner
        seen.add(id(inner))
        inner = inner.__cause__ or inner.__context__
    return None


def _run(argv: Sequence[str] | None) -> tuple[int, argparse.Namespace]:
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(argv)
    args = parser.parse_args(argv)
    try:
        return int(args.handler(args) or EXIT_OK), args
    except CuzkError as err:
        print(f"cuzk: error: {err}", file=sys.stderr)
        return EXIT_USAGE, args
    except KeyboardInterrupt:
        print("cuzk: interrupted", file=sys.stderr)
        return 130, args
    except BrokenPipeError:
        return EXIT_OK, args
    except SystemError as err:
        inner = _interruption(err)
        if inner is None:
            raise
        if isinstance(inner, KeyboardInterrupt):
            print("cuzk: interrupted", file=sys.stderr)
            return 130, args
        raise inner from None  # SIGTERM's exit status (128 + 15), not a crash's 1


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command line; the exit status."""
    return _run(argv)[0]


def entry() -> NoReturn:
    """The `cuzk` console script: `main`, then exit.

    Commands that set `exit_without_teardown` (one-shot provers whose outputs are closed when they
    return) leave through `os._exit` after flushing stdout and stderr: the interpreter's teardown
    (numba's and LLVM's finalisers, joining idle pool threads) costs ~0.1 s and does nothing for
    them."""
    code, args = _run(None)
    if getattr(args, "exit_without_teardown", False):
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)


if __name__ == "__main__":  # pragma: no cover
    entry()
