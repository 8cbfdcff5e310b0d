#!/usr/bin/env python3
"""atheris (libFuzzer) harness for one cuzk fuzz target.

    .venv/bin/python fuzz/run_atheris.py TARGET [libFuzzer options] [CORPUS_DIR ...]

e.g. `fuzz/run_atheris.py c1_json -max_total_time=600 -timeout=10 /tmp/work fuzz/corpus/c1_json`
(new inputs go into the first directory). A `CuzkError` is a clean refusal; any other exception is
reported as a crash and the input is written to crash-<sha1> in the current directory; an input that
takes longer than -timeout seconds is a hang. Targets: fuzz/cuzk_fuzz_targets.py. For -merge=1, run
it as an executable with the virtual environment first on PATH (libFuzzer re-runs argv[0]). atheris is the
part of the test extra (Linux x86_64).
"""

from __future__ import annotations

import contextlib
import importlib
import os
import sys
from pathlib import Path

import atheris

sys.path.insert(0, str(Path(__file__).resolve().parent))

SRC = Path(__file__).resolve().parent.parent / "src"
TARGET_ENV = "CUZK_FUZZ_TARGET"
#: The parser modules whose branches guide the fuzzer (atheris instruments cuzk modules imported below).
PARSERS = (
    "cuzk.cli.groth16_cmd", "cuzk.config", "cuzk.engine.engine", "cuzk.engine.providers",
    "cuzk.providers.debug", "cuzk.providers.filecoin.payload", "cuzk.filecoin.c1", "cuzk.filecoin.codec",
    "cuzk.filecoin.merkle", "cuzk.filecoin.post", "cuzk.filecoin.snap", "cuzk.groth16.formats.binfile",
    "cuzk.groth16.formats.params_file", "cuzk.groth16.proof", "cuzk.groth16.formats.snarkjs_json",
    "cuzk.groth16.formats.wtns", "cuzk.groth16.formats.zkey", "cuzk.server.grpc_service",
)


def numba_modules() -> set[str]:
    """cuzk modules that mention numba: atheris's bytecode hooks would break their compiled kernels."""
    out = set()
    for path in (SRC / "cuzk").rglob("*.py"):
        if "numba" in path.read_text(errors="replace") or "njit" in path.read_text(errors="replace"):
            parts = path.relative_to(SRC).with_suffix("").parts
            out.add(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return out


with atheris.instrument_imports(include=["cuzk"], exclude=sorted(numba_modules() - set(PARSERS))):
    for _name in PARSERS:
        importlib.import_module(_name)

import cuzk_fuzz_targets  # noqa: E402 - needs the path set up above

from cuzk.errors import CuzkError  # noqa: E402


def main() -> None:
    # libFuzzer re-runs this script for -merge/-fork with the libFuzzer arguments only, so the target
    # name travels in the environment as well.
    args = sys.argv[1:]
    if args and args[0] in cuzk_fuzz_targets.TARGETS:
        os.environ[TARGET_ENV] = args.pop(0)
    name = os.environ.get(TARGET_ENV, "")
    if name not in cuzk_fuzz_targets.TARGETS:
        sys.exit(f"usage: run_atheris.py TARGET [libFuzzer args]; targets: {', '.join(cuzk_fuzz_targets.TARGETS)}")
    target = cuzk_fuzz_targets.TARGETS[name]

    def one_input(data: bytes) -> None:
        with contextlib.suppress(CuzkError):  # a clean refusal; anything else is a finding
            target(data)

    atheris.Setup([sys.argv[0], *args], one_input)
    atheris.Fuzz()

if __name__ == "__main__":
    main()
