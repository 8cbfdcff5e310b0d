"""`cuzk params info|gen|check`: inspect parameter files, make insecure test parameters, check a file
against a circuit."""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import random
import signal
import sys
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from cuzk.errors import CuzkError


def register(sub: argparse._SubParsersAction) -> None:
    params = sub.add_parser("params", help="inspect or generate Groth16 parameter files")
    psub = params.add_subparsers(dest="params_command", metavar="SUBCOMMAND", required=True)

    info = psub.add_parser("info", help="header, vector lengths and sizes of a .params or .vk file")
    info.add_argument("file", type=Path)
    info.add_argument("--digest", action="store_true",
                      help="also compute the parameters.json digest (BLAKE2b-512, reads the whole file)")
    info.add_argument("--check", action="store_true",
                      help="validate every point (on curve; with --subgroup also in the subgroup)")
    info.add_argument("--subgroup", action="store_true", help="with --check: subgroup checks too (slow)")
    info.add_argument("--json", action="store_true", help="print JSON instead of a table")
    info.set_defaults(handler=cmd_info)

    gen = psub.add_parser("gen", help="generate INSECURE random parameters for a test circuit")
    gen.add_argument("--insecure", action="store_true", required=True,
                     help="acknowledge that the toxic waste is known to this process (required)")
    gen.add_argument("circuit", help="circuit id, e.g. mimc-16 or bits-64")
    gen.add_argument("out", type=Path, help="output .params path (the .vk is written next to it)")
    gen.add_argument("--vk", type=Path, help="where to write the .vk (default: OUT with suffix .vk)")
    gen.add_argument("--seed", type=int, help="deterministic toxic waste from this seed (tests only)")
    gen.add_argument("--compiled", type=Path, metavar="FILE",
                     help="take the circuit from this compiled file (`cuzk circuit compile`) instead of compiling it "
                          "here (PoRep-32GiB: saves minutes)")
    gen.add_argument("--backend", choices=("cpu", "cuda"), default="cpu",
                     help="where the points are computed (default cpu; cuda: a PoRep-32GiB key in ~100 s on an "
                          "H200 host)")
    gen.add_argument("--device", type=int, default=0, help="with --backend cuda: the GPU ordinal (default 0)")
    gen.add_argument("--force-official-name", action="store_true",
                     help="allow writing under an official v28-* file name (Filecoin's published parameters)")
    gen.set_defaults(handler=cmd_gen)

    check = psub.add_parser("check", help="can a circuit use this .params file? compares the header's lengths "
                                          "with the circuit's shape (reads no points)")
    check.add_argument("file", type=Path)
    check.add_argument("circuit", help="circuit id, e.g. porep-32g, winning-2k or mimc-16 (see `cuzk circuit list`)")
    check.add_argument("--count", action="store_true",
                       help="count the circuit's shape by synthesis instead of taking it from the table")
    check.add_argument("--json", action="store_true", help="print JSON instead of text")
    check.set_defaults(handler=cmd_check)


def _digest(path: Path) -> str:
    h = hashlib.blake2b(digest_size=64)
    with open(path, "rb") as f:
        while chunk := f.read(1 << 24):
            h.update(chunk)
    return h.hexdigest()[:32]


def cmd_info(args: argparse.Namespace) -> int:
    from cuzk.groth16.formats.params_file import OFFICIAL_PREFIX, check_params_points, read_vk, scan_layout

    if not args.file.is_file():
        raise CuzkError(f"{args.file}: no such file")
    layout = scan_layout(args.file)
    vk = read_vk(args.file)  # the verifying key is small: always checked in full
    report: dict = {
        "file": str(args.file),
        "kind": "vk" if layout.is_vk_only else "params",
        "file_size": layout.file_size,
        "official_name": args.file.name.startswith(OFFICIAL_PREFIX),
        "public_inputs": vk.num_public_inputs,
        "ic": layout.num_ic,
    }
    if not layout.is_vk_only:
        h = layout.vector("h")
        report["domain_size"] = h.count + 1
        report["vectors"] = {v.name: {"count": v.count, "offset": v.offset, "bytes": v.nbytes}
                             for v in layout.vectors}
        report["num_aux"] = layout.vector("l").count
    if args.digest:
        report["blake2b_digest"] = _digest(args.file)
    if args.check and not layout.is_vk_only:
        check_params_points(args.file, check_subgroup=args.subgroup)
        report["points_checked"] = "on curve and in subgroup" if args.subgroup else "on curve"
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    console = Console()
    table = Table(title=str(args.file), show_header=True)
    table.add_column("field")
    table.add_column("value", justify="right")
    table.add_row("kind", report["kind"])
    table.add_row("file size", f"{layout.file_size:,} B")
    table.add_row("public inputs (IC − 1)", str(vk.num_public_inputs))
    if not layout.is_vk_only:
        table.add_row("domain size (|H| + 1)", f"{report['domain_size']:,}")
        table.add_row("aux variables (|L|)", f"{report['num_aux']:,}")
        for v in layout.vectors:
            table.add_row(f"{v.name} points", f"{v.count:,} ({v.nbytes:,} B at offset {v.offset:,})")
    table.add_row("official v28-* name", "yes" if report["official_name"] else "no")
    if "blake2b_digest" in report:
        table.add_row("digest (parameters.json)", report["blake2b_digest"])
    if "points_checked" in report:
        table.add_row("points", f"all valid ({report['points_checked']})")
    console.print(table)
    return 0


def _multiplier(args: argparse.Namespace) -> object:
    if args.backend == "cpu":
        from cuzk.groth16.setup import CpuFixedBase

        return CpuFixedBase()
    from cuzk.backends.cuda import CudaBackend, cuda_available

    reason = cuda_available()
    if reason is not None:
        raise CuzkError(f"--backend cuda: {reason}")
    return CudaBackend(args.device)


def cmd_gen(args: argparse.Namespace) -> int:
    from cuzk.circuits.filecoin.shapes import known_constraints
    from cuzk.circuits.registry import lookup
    from cuzk.engine.compiled_store import record_in_parallel
    from cuzk.groth16.formats.params_file import check_output_name, write_vk
    from cuzk.groth16.setup import ToxicWaste, qap_at_tau_compiled, write_insecure_parameters
    from cuzk.groth16.synthesis import compile_circuit
    from cuzk.r1cs.compiled_file import load_compiled

    spec = lookup(args.circuit)
    vk_path = args.vk or args.out.with_suffix(".vk")
    for path in (args.out, vk_path):
        check_output_name(path, force_official_name=args.force_official_name)
        if not path.parent.is_dir():
            raise CuzkError(f"{path.parent}: output directory does not exist")
    if args.compiled is not None and not args.compiled.is_file():
        raise CuzkError(f"--compiled {args.compiled}: no such file")
    if args.device < 0:
        raise CuzkError(f"--device {args.device}: must be a GPU ordinal >= 0")
    multiplier = _multiplier(args)
    # SIGTERM (a service manager, `timeout`) unwinds like Ctrl-C, so the half-written file's temporary is
    # removed instead of left behind (tens of GB for a large key).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    console = Console(stderr=True)
    rng = random.Random(args.seed) if args.seed is not None else None
    waste = ToxicWaste.random(rng)
    steps: list[tuple[str, float]] = []
    start = time.perf_counter()

    def step(status, msg: str) -> None:
        steps.append((msg, time.perf_counter()))
        status.update(f"{spec.circuit_id}: {msg}")

    with console.status(f"generating insecure parameters for {spec.circuit_id}") as status:
        if args.compiled is not None:
            step(status, "loading the compiled circuit")
            compiled = load_compiled(args.compiled, expect_circuit_id=spec.circuit_id)
            step(status, "QAP at tau")
            qap = qap_at_tau_compiled(compiled, waste.tau)
        else:
            # Block by block for the large Filecoin circuits (`compile_circuit`): a PoRep-32GiB partition
            # takes minutes and ~9 GB this way, where recording it whole would not fit in memory.
            step(status, "compiling the circuit")
            parallel = record_in_parallel(known_constraints(spec.circuit_id))
            compiled = compile_circuit(spec.blank(), spec.circuit_id, parallel=parallel)
            step(status, "QAP at tau")
            qap = qap_at_tau_compiled(compiled, waste.tau)
        del compiled
        vk = write_insecure_parameters(args.out, qap, waste, multiplier=multiplier,
                                       progress=lambda msg: step(status, msg),
                                       force_official_name=args.force_official_name)
        write_vk(vk_path, vk, force_official_name=args.force_official_name)
    end = time.perf_counter()
    steps.append(("done", end))
    timings = ", ".join(f"{msg.split(' (')[0]} {b - a:.1f} s" for (msg, a), (_, b) in itertools.pairwise(steps))
    console.print(f"wrote {args.out} and {vk_path} ({qap.domain.size:,}-point domain, {end - start:.1f} s on "
                  f"{args.backend}: {timings}) — INSECURE, for testing only")
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    """Exit 0 (fits), 1 (header lengths differ, each named), 2 (unreadable, truncated, not a .params)."""
    from cuzk.cli.circuit_cmd import circuits_with_layout, official_name_owner, resolve_shape, source_text
    from cuzk.groth16.formats.params_file import scan_layout

    if not args.file.is_file():
        raise CuzkError(f"{args.file}: {'not a regular file' if args.file.exists() else 'no such file'}")
    layout = scan_layout(args.file)  # length fields only; truncation or trailing bytes are errors here
    if layout.is_vk_only:
        raise CuzkError(f"{args.file}: a verifying key ({layout.num_ic} IC points, no H, L, A, B vectors); "
                        "check the .params file instead")
    report = resolve_shape(args.circuit, count=args.count, console=None if args.json else Console(stderr=True))
    expected = report.expected_layout
    mismatches = expected.mismatches(layout)
    found = {"ic": layout.num_ic, **{v.name: v.count for v in layout.vectors}}
    others = [cid for cid in circuits_with_layout(found) if cid != report.circuit_id] if mismatches else []
    owner = official_name_owner(args.file.name)
    notes = []
    if owner is not None and owner != report.circuit_id:
        notes.append(f"the file name is the official parameter file name of {owner}, not of {report.circuit_id}")
    if args.json:
        print(json.dumps({
            "file": str(args.file), "circuit_id": report.circuit_id, "ok": not mismatches, "source": report.source,
            "expected": expected.counts(), "found": found,
            "mismatches": [{"vector": m.vector, "expected": m.expected, "found": m.found, "meaning": m.meaning}
                           for m in mismatches],
            "header_matches": others, "notes": notes}, indent=2))
        return 1 if mismatches else 0
    if not mismatches:
        lengths = ", ".join(f"{name.upper()} {count:,}" for name, count in found.items())
        print(f"OK: {args.file} fits {report.circuit_id} ({lengths}; circuit shape: {source_text(report)})"
              + "".join(f"; note: {n}" for n in notes))
        return 0
    print(f"MISMATCH: {args.file} cannot be used for {report.circuit_id}: {len(mismatches)} header length(s) "
          f"differ (circuit shape: {source_text(report)})")
    for m in mismatches:
        print(f"  {m}")
    if others:
        print(f"  the header fits {', '.join(others)}")
    for n in notes:
        print(f"  note: {n}")
    return 1
