"""SASS instruction counts per kernel of a cubin, by opcode: reading what ptxas made of a kernel change
on a machine without a GPU, before spending device time on it.

Needs nvcc (the CUDA toolkit) for --build, and cuobjdump with nvdisasm on PATH or in CUDA_BIN (e.g.
from PyPI's nvidia-cuda-cuobjdump and nvidia-cuda-nvdisasm wheels: their nvidia/cu13/bin).

    python benchmarks/probes/sass_counts.py --build curve --filter ntt_d   # the working tree's unit
    python benchmarks/probes/sass_counts.py OLD.cubin NEW.cubin --filter ntt_dif_pass_1024

IMAD.* opcodes are kept whole (IMAD.WIDE.U32 and IMAD.HI.U32 use the multiplier differently); other
opcodes are counted by their first part (IADD3.X as IADD3).
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

_FUNCTION = re.compile(r"\s+Function : (\S+)")
_INSTRUCTION = re.compile(r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)")


def cuobjdump() -> str:
    where = os.environ.get("CUDA_BIN")
    found = shutil.which("cuobjdump", path=f"{where}{os.pathsep}{os.environ.get('PATH', '')}" if where else None)
    if found is None:
        raise SystemExit("cuobjdump not found: put it (with nvdisasm) on PATH or name its folder in CUDA_BIN")
    return found


def counts(cubin: Path) -> dict[str, collections.Counter[str]]:
    """Function name -> opcode counts."""
    env = dict(os.environ)
    if os.environ.get("CUDA_BIN"):
        env["PATH"] = f"{os.environ['CUDA_BIN']}{os.pathsep}{env.get('PATH', '')}"
    text = subprocess.run([cuobjdump(), "-sass", str(cubin)], capture_output=True, text=True, check=True,
                          env=env).stdout
    out: dict[str, collections.Counter[str]] = {}
    name = None
    for line in text.splitlines():
        if m := _FUNCTION.match(line):
            name = m.group(1)
            out[name] = collections.Counter()
        elif name and (m := _INSTRUCTION.search(line)):
            op = m.group(1)
            out[name][op if op.startswith("IMAD") else op.split(".")[0]] += 1
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("cubins", nargs="*", type=Path)
    ap.add_argument("--build", default="", help="a kernel unit of the working tree to build with nvcc first")
    ap.add_argument("--arch", default="sm_90")
    ap.add_argument("--filter", default="", help="only kernels whose name contains this")
    ap.add_argument("--top", type=int, default=12, help="opcodes shown per kernel")
    args = ap.parse_args()
    cubins = list(args.cubins)
    with tempfile.TemporaryDirectory() as tmp:
        if args.build:
            from cuzk.backends.cuda.module import build_cubin

            cubins.append(build_cubin(args.arch, directory=Path(tmp), unit=args.build))
        if not cubins:
            ap.error("name a cubin or --build a unit")
        for cubin in cubins:
            print(f"== {cubin.name}")
            for name, c in counts(cubin).items():
                if args.filter in name:
                    imad = sum(v for k, v in c.items() if k.startswith("IMAD"))
                    top = ", ".join(f"{k} {v}" for k, v in c.most_common(args.top))
                    print(f"{name}: {sum(c.values())} instructions, {imad} IMAD*: {top}")


if __name__ == "__main__":
    main()
