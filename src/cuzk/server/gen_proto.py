"""Regenerate the Python gRPC modules in `cuzk/server/_gen/` from `cuzk/server/proto/cuzk/v1/proving.proto`.

One command, run from anywhere (grpcio-tools must be installed, it is in the `test` extra):

    python -m cuzk.server.gen_proto            # rewrite the generated files
    python -m cuzk.server.gen_proto --check    # exit 1 if the committed files are stale

protoc names the message module after the proto's path (`cuzk/v1/proving.proto`, the same path as the
published interface, so reflection shows the usual file name); the grpc module would therefore
import `cuzk.v1.proving_pb2`, which collides with this package. The one import line is rewritten to
`cuzk.server._gen`, and each file gets a header saying it is generated.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

SERVER_DIR = Path(__file__).resolve().parent
PROTO_ROOT = SERVER_DIR / "proto"
PROTO_FILE = "cuzk/v1/proving.proto"
GEN_DIR = SERVER_DIR / "_gen"
GENERATED = ("proving_pb2.py", "proving_pb2.pyi", "proving_pb2_grpc.py")
HEADER = (
    "# Generated from cuzk/server/proto/cuzk/v1/proving.proto by `python -m cuzk.server.gen_proto`; do not edit.\n"
    "# ruff: noqa\n"
)
_GRPC_IMPORT = "from cuzk.v1 import proving_pb2 as"
_GRPC_IMPORT_FIXED = "from cuzk.server._gen import proving_pb2 as"


def generate() -> dict[str, str]:
    """Run protoc (from grpcio-tools) and return {file name: text} after post-processing."""
    try:
        from grpc_tools import protoc
    except ImportError as err:  # pragma: no cover - depends on the environment
        raise SystemExit("grpcio-tools is not installed (pip install -e '.[test]')") from err
    with tempfile.TemporaryDirectory() as tmp:
        args = ["protoc", f"-I{PROTO_ROOT}", f"--python_out={tmp}", f"--pyi_out={tmp}",
                f"--grpc_python_out={tmp}", PROTO_FILE]
        if protoc.main(args) != 0:
            raise SystemExit(f"protoc failed on {PROTO_ROOT / PROTO_FILE}")
        out = {}
        for name in GENERATED:
            text = (Path(tmp) / "cuzk" / "v1" / name).read_text()
            if name.endswith("_grpc.py"):
                if _GRPC_IMPORT not in text:
                    raise SystemExit(f"unexpected protoc output: no {_GRPC_IMPORT!r} line in {name}")
                text = text.replace(_GRPC_IMPORT, _GRPC_IMPORT_FIXED)
            out[name] = HEADER + text
        return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m cuzk.server.gen_proto", description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="only compare with the committed files")
    args = parser.parse_args(argv)
    files = generate()
    if args.check:
        stale = [n for n, text in files.items()
                 if not (GEN_DIR / n).is_file() or (GEN_DIR / n).read_text() != text]
        if stale:
            print(f"stale generated files in {GEN_DIR}: {', '.join(stale)}", file=sys.stderr)
            return 1
        print("generated files are up to date")
        return 0
    GEN_DIR.mkdir(exist_ok=True)
    for name, text in files.items():
        (GEN_DIR / name).write_text(text)
    print(f"wrote {', '.join(files)} in {GEN_DIR}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
