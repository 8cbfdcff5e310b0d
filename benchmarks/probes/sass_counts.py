"""SASS instruction counts per kernel of a cubin, by opcode: reading what ptxas made of a kernel change
on a machine without a GPU, before spending device time on it.

Needs nvcc (the CUDA toolkit) for --build, and cuobjdump with nvdisasm on PATH or in CUDA_BIN (e.g.
from PyPI's nvidia-cuda-cuobjdump and nvidia-cuda-nvdisasm wheels: their nvidia/cu13/bin).

    python benchmarks/probes/sass_counts.py --build curve --filter ntt_d   # the working tree's unit
    python benchmarks/probes/sass_counts.py OLD.cubin NEW.cubin --filter ntt_dif_pass_1024
    python benchmarks/probes/sass_counts.py --build curve --rev c5860f7 --filter tree_round --keep CUBINS

--rev builds the unit from a git revision's kernel sources too (the working tree's first), and --keep
copies every cubin built into a folder, named `<unit>-<rev or worktree>.cubin`: the builds that
`benchmarks/cuda/bench_cuda.py --ab label=CUBIN` times side by side on a GPU.

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


def kernel_sources_at(rev: str, into: Path) -> Path:
    """The package's kernel files as they were at git revision `rev`, written into the folder `into`."""
    from cuzk.backends.cuda.sources import KERNEL_DIR

    root = Path(subprocess.run(["git", "rev-parse", "--show-toplevel"], cwd=KERNEL_DIR, capture_output=True,
                               text=True, check=True).stdout.strip())
    folder = KERNEL_DIR.resolve().relative_to(root.resolve()).as_posix()
    names = subprocess.run(["git", "ls-tree", "--name-only", f"{rev}:{folder}"], cwd=root, capture_output=True,
                           text=True)
    if names.returncode:
        raise SystemExit(f"no kernel sources at {rev!r}: {names.stderr.strip()}")
    into.mkdir(parents=True)
    for name in names.stdout.split():
        text = subprocess.run(["git", "show", f"{rev}:{folder}/{name}"], cwd=root, capture_output=True, text=True,
                              check=True).stdout
        (into / name).write_text(text)
    return into


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("cubins", nargs="*", type=Path)
    ap.add_argument("--build", default="", help="a kernel unit of the working tree to build with nvcc first")
    ap.add_argument("--rev", action="append", default=[],
                    help="also build the --build unit from this git revision's kernel sources (repeatable)")
    ap.add_argument("--keep", type=Path, default=None, help="copy the cubins built into this folder")
    ap.add_argument("--arch", default="sm_90")
    ap.add_argument("--filter", default="", help="only kernels whose name contains this")
    ap.add_argument("--top", type=int, default=12, help="opcodes shown per kernel")
    args = ap.parse_args()
    cubins = list(args.cubins)
    if args.rev and not args.build:
        ap.error("--rev builds the --build unit: name one")
    with tempfile.TemporaryDirectory() as tmp:
        if args.build:
            from cuzk.backends.cuda.module import build_cubin

            built = {"worktree": build_cubin(args.arch, directory=Path(tmp), unit=args.build)}
            for rev in args.rev:
                built[rev] = build_cubin(args.arch, directory=Path(tmp), unit=args.build,
                                         kernel_dir=kernel_sources_at(rev, Path(tmp) / rev))
            if args.keep is not None:
                args.keep.mkdir(parents=True, exist_ok=True)
                for label, path in built.items():
                    print(f"kept {shutil.copy(path, args.keep / f'{args.build}-{label}.cubin')}")
            cubins += built.values()
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
