"""`cuzk demo`: prove and verify a real circuit end to end on the CPU, with timings.

Today's circuit is a MiMC-5 preimage proof of exactly 2^16 constraints. Its insecure parameters
are generated on first use and cached; the proof is checked by cuzk's verifier and, independently,
by py_ecc.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import time
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console
from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

if TYPE_CHECKING:
    from cuzk.groth16.keys import ProvingKey


DEFAULT_CIRCUIT = "mimc-16"


def default_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "cuzk" / "demo"


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("demo", help="prove and verify a circuit end to end on the CPU")
    p.add_argument("--circuit", default=DEFAULT_CIRCUIT, help=f"circuit id (default {DEFAULT_CIRCUIT})")
    p.add_argument("--cache-dir", type=Path, default=None,
                   help="where insecure demo parameters are kept (default ~/.cache/cuzk/demo)")
    p.add_argument("--regenerate", action="store_true", help="generate fresh parameters even if cached")
    p.add_argument("--json", type=Path, help="also write the timings as JSON to this file")
    p.set_defaults(handler=run)


def _load_or_generate(circuit_id: str, cache: Path, regenerate: bool, say) -> tuple[ProvingKey, str]:
    from cuzk.circuits.registry import lookup
    from cuzk.errors import FormatError
    from cuzk.groth16.formats.params_file import read_params, write_params
    from cuzk.groth16.setup import generate_insecure_parameters

    path = cache / f"{circuit_id}.insecure.params"
    if path.exists() and not regenerate:
        try:
            return read_params(path), f"loaded from {path}"
        except FormatError as err:
            say(f"cached parameters unusable ({err}); regenerating")
    pk = generate_insecure_parameters(lookup(circuit_id).blank(), progress=say)
    cache.mkdir(parents=True, exist_ok=True)
    write_params(path, pk)
    return pk, f"generated (insecure) and cached in {path}"


def run(args: argparse.Namespace) -> int:
    # Heavy imports (numba kernels) only when the demo really runs: `cuzk --help` stays fast.
    from cuzk.circuits.registry import lookup
    from cuzk.curve.msm import prepare_bases
    from cuzk.groth16 import reference_verifier
    from cuzk.groth16.assignment import Assignment
    from cuzk.groth16.formats.params_file import vk_to_bytes
    from cuzk.groth16.keys import prepare_verifying_key
    from cuzk.groth16.prover import prove
    from cuzk.groth16.synthesis import synthesize_for_proving
    from cuzk.groth16.verifier import verify_proof

    console = Console()
    spec = lookup(args.circuit)
    cache = args.cache_dir or default_cache_dir()
    rows: list[tuple[str, float, str]] = []
    steps = 5
    clock = time.perf_counter
    with Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), TimeElapsedColumn(),
                  console=console, transient=False) as bar:
        task = bar.add_task("parameters", total=steps)

        def say(msg: str) -> None:
            bar.update(task, description=f"parameters: {msg}")

        start = clock()
        pk, origin = _load_or_generate(spec.circuit_id, cache, args.regenerate, say)
        rows.append(("parameters", clock() - start, origin))
        bar.update(task, advance=1, description="synthesis")

        circuit = spec.example(random.Random())
        start = clock()
        asg = Assignment.from_proving_assignment(synthesize_for_proving(circuit))
        rows.append(("synthesis", clock() - start, f"{asg.num_constraints:,} constraints, "
                     f"{asg.aux.shape[0]:,} aux variables"))
        bar.update(task, advance=1, description="proving")

        for bases in (pk.h, pk.l, pk.a, pk.b_g1, pk.b_g2):
            prepare_bases(bases)  # convert once, outside the timed prove (the daemon keeps keys resident)
        timings: dict[str, float] = {}
        start = clock()
        proof = prove(pk, asg, timings=timings)
        prove_s = clock() - start
        rows.append(("prove", prove_s, "total"))
        rows.append(("  H polynomial (NTTs)", timings["h"], f"domain {pk.domain_size:,}"))
        for name in ("msm_h", "msm_l", "msm_a", "msm_b_g1", "msm_b_g2"):
            rows.append((f"  MSM {name[4:].upper().replace('_G', ' G')}", timings[name], ""))
        bar.update(task, advance=1, description="verifying (cuzk)")

        publics = asg.public_inputs()
        start = clock()
        ok_ours = verify_proof(prepare_verifying_key(pk.vk), proof, publics)
        rows.append(("verify (cuzk)", clock() - start, "OK" if ok_ours else "REJECTED"))
        bar.update(task, advance=1, description="verifying (py_ecc, independent)")

        start = clock()
        ok_ref = reference_verifier.verify(vk_to_bytes(pk.vk), proof.to_bytes(), publics)
        rows.append(("verify (py_ecc)", clock() - start, "OK" if ok_ref else "REJECTED"))
        bar.update(task, advance=1, description="done")

    table = Table(title=f"cuzk demo: {spec.circuit_id} — {spec.description}")
    table.add_column("step")
    table.add_column("seconds", justify="right")
    table.add_column("notes")
    for name, secs, note in rows:
        table.add_row(name, f"{secs:.3f}", note)
    console.print(table)
    console.print(f"proof: {proof.to_bytes().hex()}")
    console.print(f"public inputs: {[hex(x) for x in publics]}")
    if args.json:
        args.json.write_text(json.dumps({"circuit": spec.circuit_id, "steps": [
            {"step": n.strip(), "seconds": s, "notes": note} for n, s, note in rows]}, indent=2))
    if not (ok_ours and ok_ref):
        console.print("[bold red]verification FAILED[/]")
        return 1
    console.print("[bold green]proof verified by cuzk and by py_ecc[/]")
    return 0


__all__ = ["run"]
