"""`cuzk bench single|batch|stress|compare|local`: throughput, latency and where the time went.

Against a running daemon (--addr), with the Rust cuzk-bench's proof options (-t porep|snap|wpost|
winning, --c1, --vanilla, --registered-proof, sector and miner ids, randomness, SnapDeals
commitments) or a test circuit (-t mimc-8 --partitions 3, daemons with [debug] test_circuits).
`--inputs DIR` takes what `cuzk gen-vanilla` wrote; `--gen-vanilla SIZE --inputs DIR` writes it first.

Every report names the daemon (instance, config fingerprint, version, backend, devices) and refuses
to run with `--expect-config FINGERPRINT` against another configuration. `--json FILE` writes the
full record (every sample with per-partition timings; `cuzk bench compare` reads it) and
`--timeline FILE.png|FILE.html` a Gantt chart of the run. The method is in benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from cuzk.errors import CuzkError

PRIORITIES = ("default", "low", "normal", "high", "critical")


# -- arguments ---------------------------------------------------------------------------------------

def _proof_options(p: argparse.ArgumentParser, *, default_type: str | None = None) -> None:
    g = p.add_argument_group("what to prove")
    g.add_argument("-t", "--type", default=default_type, required=default_type is None,
                   help="porep|snap|wpost|winning (and the Rust aliases), or a test circuit such as mimc-8")
    g.add_argument("--c1", type=Path, help="PoRep: commit phase-1 output")
    g.add_argument("--vanilla", type=Path, help="PoSt/SnapDeals vanilla proofs: JSON array of base64, or one raw proof")
    g.add_argument("--inputs", type=Path, help="a `cuzk gen-vanilla` output directory (public.json and proofs)")
    g.add_argument("--gen-vanilla", metavar="SIZE",
                   help="first run `cuzk gen-vanilla TYPE --sector-size SIZE --out INPUTS` (needs --inputs)")
    g.add_argument("--sparse", action="store_true", help="with --gen-vanilla: a sparse synthetic sector")
    g.add_argument("--registered-proof", type=int, default=0)
    g.add_argument("--sector-size", type=int, default=0)
    g.add_argument("--sector-num", type=int, default=0)
    g.add_argument("--miner-id", type=int, default=0)
    g.add_argument("--partition", type=int, default=0, help="WindowPoSt partition index")
    g.add_argument("--randomness", default="", help="PoSt challenge seed, 64 hex digits")
    g.add_argument("--comm-r-old", default="", help="SnapDeals: 64 hex digits")
    g.add_argument("--comm-r-new", default="", help="SnapDeals: 64 hex digits")
    g.add_argument("--comm-d-new", default="", help="SnapDeals: 64 hex digits")
    g.add_argument("--partitions", type=int, default=1, help="test circuits: partitions per proof")
    g.add_argument("--seed", type=int, default=0, help="test circuits: witness seed")
    g.add_argument("--synth-delay-ms", type=int, default=0,
                   help="test circuits: extra synthesis time per partition (to try the tools on a known change)")


def _daemon_options(p: argparse.ArgumentParser) -> None:
    from cuzk.daemon.attribution import add_expect_config_argument
    from cuzk.server.client import default_address

    p.add_argument("--addr", "-a", default=None,
                   help=f"daemon address, host:port or unix:///path (default: $CUZK_ADDR or {default_address()})")
    add_expect_config_argument(p)
    p.add_argument("--priority", default="default", choices=PRIORITIES)


def _output_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", type=Path, metavar="FILE", help="write the full record (samples, summaries) here")
    p.add_argument("--timeline", type=Path, metavar="FILE", help="Gantt chart of the run: FILE.png or FILE.html")
    p.add_argument("--no-progress", action="store_true", help="no live progress bar")


def _batch_options(p: argparse.ArgumentParser, *, count: int, warmup: int) -> None:
    p.add_argument("-c", "--count", type=int, default=count, help=f"proofs per repetition (default {count})")
    p.add_argument("--warmup", type=int, default=warmup,
                   help=f"proofs before the measured ones, left out of every number (default {warmup})")
    p.add_argument("--repeat", type=int, default=1,
                   help="repetitions of the measured proofs (their spread is compare's noise estimate)")
    p.add_argument("--trim", type=int, default=1,
                   help="steady state leaves out this many first and last completions (default 1)")


def register(sub: argparse._SubParsersAction) -> None:
    bench = sub.add_parser("bench", help="benchmark proofs: throughput, latency, per-phase timelines",
                           description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    bsub = bench.add_subparsers(dest="bench_command", metavar="MODE", required=True)

    single = bsub.add_parser("single", help="one proof, with its per-partition phases")
    _proof_options(single)
    _daemon_options(single)
    _output_options(single)
    single.set_defaults(handler=cmd_single)

    batch = bsub.add_parser("batch", help="COUNT proofs with CONCURRENCY in flight: s/proof, latency, phases")
    _proof_options(batch)
    _daemon_options(batch)
    _batch_options(batch, count=3, warmup=1)
    batch.add_argument("-j", "--concurrency", type=int, default=1, help="proofs in flight (default 1)")
    batch.add_argument("--max-seconds", type=float, default=None,
                       help="submit no proof later than this many seconds after the start; the record says how "
                            "many were left out (the proofs in flight are waited for)")
    _output_options(batch)
    batch.set_defaults(handler=cmd_batch)

    stress = bsub.add_parser("stress", help="a mix of proof kinds at given rates: latency percentiles and "
                             "deadline misses per priority and kind, preemptions")
    _proof_options(stress, default_type="")
    _daemon_options(stress)
    stress.add_argument("--duration", type=float, required=True, help="seconds of arrivals")
    stress.add_argument("--stream", action="append", default=[], metavar="SPEC",
                        help="KIND[,rate=PER_S][,priority=P][,deadline=S][,name=N][,partitions=N][,seed=N]"
                             "[,delay=MS][,inputs=DIR]; repeat for a mix (default: -t at --rate)")
    stress.add_argument("--rate", type=float, default=1.0, help="proofs per second for -t without --stream")
    stress.add_argument("--deadline", type=float, default=None, help="seconds, for -t without --stream")
    stress.add_argument("--arrival-seed", type=int, default=0, help="seed of the Poisson arrivals")
    stress.add_argument("--drain-timeout", type=float, default=600.0,
                        help="seconds to wait after the last arrival; then unanswered proofs are cancelled")
    _output_options(stress)
    stress.set_defaults(handler=cmd_stress)

    comp = bsub.add_parser("compare", help="which phases changed between two --json records, beyond noise")
    comp.add_argument("a", type=Path, help="baseline record")
    comp.add_argument("b", type=Path, help="new record")
    comp.add_argument("--min-change", type=float, default=5.0, help="percent (default 5)")
    comp.add_argument("--sigmas", type=float, default=3.0, help="noise multiples a change must exceed (default 3)")
    comp.add_argument("--json", type=Path, metavar="FILE", help="write the comparison here")
    comp.set_defaults(handler=cmd_compare)

    local = bsub.add_parser("local", help="the same measurements in this process, without a daemon")
    _proof_options(local)
    _batch_options(local, count=3, warmup=1)
    local.add_argument("--param-cache", type=Path, default=None,
                       help="parameter files (default: ~/.cache/cuzk/bench; test parameters are generated there)")
    local.add_argument("--backend", default="cpu", choices=("cpu", "cuda"))
    local.add_argument("--no-verify", action="store_true", help="skip verifying each partition proof")
    local.add_argument("--threads", type=int, default=0,
                       help="numba threads for this process, as gpus.gpu_threads sizes a device process (default: "
                            "all cores; on a busy machine 1 avoids threads waiting for each other on small circuits)")
    _output_options(local)
    local.set_defaults(handler=cmd_local)


# -- inputs ------------------------------------------------------------------------------------------

def _generate_inputs(kind: str, size: str, out: Path, sparse: bool) -> None:
    from cuzk.cli import gen_vanilla

    if kind == "test":
        raise CuzkError("--gen-vanilla is for porep, snap, wpost and winning, not test circuits")
    parser = argparse.ArgumentParser(prog="cuzk")
    gen_vanilla.register(parser.add_subparsers())
    argv = ["gen-vanilla", kind, "--sector-size", size, "--out", str(out)] + (["--sparse"] if sparse else [])
    ns = parser.parse_args(argv)
    if ns.handler(ns) != 0:
        raise CuzkError(f"--gen-vanilla {size}: generating {kind} inputs failed")


def proof_inputs(args: argparse.Namespace, type_name: str | None = None,
                 overrides: dict[str, str] | None = None) -> Any:
    """ProofInputs from the command line (and a stress stream's key=value overrides)."""
    from cuzk.bench.inputs import ProofInputs, from_gen_vanilla, resolve_kind
    from cuzk.cli.client_cmd import hex32, read_vanilla

    opts = dict(overrides or {})
    kind, circuit = resolve_kind(type_name if type_name is not None else args.type)

    def integer(key: str, default: int) -> int:
        if key not in opts:
            return default
        try:
            return int(opts.pop(key))
        except ValueError:
            raise CuzkError(f"{key}: not an integer") from None

    inputs = ProofInputs(
        kind=kind, test_circuit=circuit, partitions=integer("partitions", args.partitions),
        seed=integer("seed", args.seed), synth_delay_ms=integer("delay", args.synth_delay_ms),
        registered_proof=args.registered_proof, sector_size=args.sector_size, sector_number=args.sector_num,
        miner_id=args.miner_id, partition_index=args.partition, randomness=hex32(args.randomness, "--randomness"),
        comm_r_old=hex32(args.comm_r_old, "--comm-r-old"), comm_r_new=hex32(args.comm_r_new, "--comm-r-new"),
        comm_d_new=hex32(args.comm_d_new, "--comm-d-new"))
    inputs_dir = Path(opts.pop("inputs")) if "inputs" in opts else args.inputs
    if opts:
        raise CuzkError(f"unknown stream option(s): {', '.join(sorted(opts))}")
    if args.gen_vanilla:
        if inputs_dir is None:
            raise CuzkError("--gen-vanilla needs --inputs DIR to write the inputs into")
        _generate_inputs(kind, args.gen_vanilla, inputs_dir, args.sparse)
    if inputs_dir is not None:
        inputs = from_gen_vanilla(inputs_dir, inputs)
    if args.c1 is not None and kind == "porep":
        try:
            inputs = replace(inputs, c1=args.c1.read_bytes())
        except OSError as err:
            raise CuzkError(f"--c1 {args.c1}: {err.strerror}") from None
    if args.vanilla is not None and kind in ("snap", "wpost", "winning"):
        inputs = replace(inputs, vanilla=tuple(read_vanilla(args.vanilla)))
    inputs.check()
    return inputs


def _check_outputs(args: argparse.Namespace) -> None:
    timeline = getattr(args, "timeline", None)
    if timeline is not None and timeline.suffix.lower() not in (".png", ".html", ".htm"):
        raise CuzkError(f"--timeline {timeline}: the file name must end in .png or .html")
    for flag in ("count", "repeat", "trim"):
        if getattr(args, flag, 1) < 1:
            raise CuzkError(f"--{flag} must be at least 1, got {getattr(args, flag)}")


# -- the daemon --------------------------------------------------------------------------------------

class _Daemon:
    """A connected client, plus who the daemon is (asked before the run and again after)."""

    def __init__(self, args: argparse.Namespace) -> None:
        from cuzk.daemon.attribution import identify_daemon, require_config
        from cuzk.server.client import CuzkClient

        self.client = CuzkClient(args.addr, timeout=30.0)
        self.ref = identify_daemon(self.client)
        require_config(self.ref, args.expect_config)
        self.facts = self._facts()

    def _facts(self) -> dict[str, Any]:
        import grpc

        facts: dict[str, Any] = {**self.ref.as_dict()}
        try:
            info = self.client.info()
            facts["backend"] = info.backend
            status = self.client.status()
            facts["devices"] = [{"ordinal": g.ordinal, "kind": g.device_kind, "name": g.name,
                                 "vram_total_bytes": g.vram_total_bytes, "workers": g.workers} for g in status.gpus]
            facts["memory_budget_bytes"] = status.memory_budget_bytes
        except grpc.RpcError:
            pass  # a daemon without GetDaemonInfo (the Rust one): identity says so already
        return facts

    def after(self) -> str | None:
        from cuzk.daemon.attribution import changed_during, identify_daemon

        try:
            return changed_during(self.ref, identify_daemon(self.client))
        except CuzkError as err:
            return f"the daemon could not be asked who it is after the run: {err}"

    def close(self) -> None:
        self.client.close()


# -- progress and output -----------------------------------------------------------------------------

class _Progress:
    """A rich progress bar on stderr (completed / failed so far), or nothing."""

    def __init__(self, total: int | None, label: str, enabled: bool) -> None:
        self.bar = None
        self.completed = self.failed = 0
        if not enabled:
            return
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self.bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                            TextColumn("{task.fields[status]}"), TimeElapsedColumn(),
                            console=Console(stderr=True), transient=True)
        self.task = self.bar.add_task(label, total=total, status="")

    def __enter__(self) -> _Progress:
        if self.bar is not None:
            self.bar.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.bar is not None:
            self.bar.stop()

    def sample(self, sample: dict[str, Any]) -> None:
        if sample["status"] == "COMPLETED":
            self.completed += 1
        else:
            self.failed += 1
        if self.bar is not None:
            self.bar.update(self.task, advance=1,
                            status=f"{self.completed} ok, {self.failed} failed, last {sample['latency_s']:.2f} s")


def _fmt(value: Any, digits: int = 3) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def _print_report(record: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console(soft_wrap=True)
    s = record["summary"]
    daemon = record.get("daemon")
    if daemon:
        devices = ", ".join(f"{d['kind']} {d['name']}" for d in daemon.get("devices", [])) or "?"
        console.print(f"daemon: instance {daemon.get('instance_id') or '?'}, "
                      f"config {daemon.get('config_fingerprint') or '?'}, cuzk {daemon.get('version') or '?'}, "
                      f"backend {daemon.get('backend', '?')}, devices: {devices}", highlight=False)
    host = record["host"]
    console.print(f"client: {host['cpu']} ({host['cores']} cores), commit {host['commit'] or '?'}", highlight=False)
    console.print(f"{record['mode']} {record['params'].get('what')}: submitted {s['submitted']}, completed "
                  f"{s['completed']}, failed {s['failed']}, wall {_fmt(s.get('wall_s'))} s", highlight=False)
    steady = s.get("steady_state")
    steady_text = (f"{steady['s_per_proof']:.3f} s/proof over {steady['proofs']} proofs (first and last "
                   f"{steady['trim']} left out{', median of the repeats' if 'per_repeat' in steady else ''})"
                   if steady else f"per kind below ({', '.join(s['mixed_kinds'])})" if s.get("mixed_kinds")
                   else "needs at least 3 completed proofs")
    console.print(f"raw {_fmt(s.get('raw_s_per_proof'))} s/proof (wall / completed, fill and drain included); "
                  f"steady state {steady_text}", highlight=False)
    lat = s["latency_s"]
    if lat.get("n"):
        console.print(f"latency: p50 {lat['p50']:.3f} s, p95 {lat['p95']:.3f} s, p99 {lat['p99']:.3f} s, "
                      f"max {lat['max']:.3f} s", highlight=False)
    phases = s["phases_ms"]
    if s.get("partitions"):
        table = Table(title=f"per-partition phases, ms ({s['partitions']} partitions)")
        for col in ("phase", "median", "mean", "p95", "max"):
            table.add_column(col, justify="right" if col != "phase" else "left")
        for name, d in phases.items():
            if d.get("n"):
                table.add_row(name, _fmt(d["p50"], 1), _fmt(d["mean"], 1), _fmt(d["p95"], 1), _fmt(d["max"], 1))
        console.print(table)
    if s["failures"]:
        console.print("failures:", highlight=False)
        for reason, n in s["failures"].items():
            console.print(f"  {n} x {reason}", highlight=False)
    stress = record.get("stress")
    if stress:
        for title, key, first in (("deadlines and latency per priority", "by_priority", "priority"),
                                  ("deadlines and latency per proof kind", "by_kind", "kind")):
            groups = stress.get(key)
            if not groups:
                continue
            table = Table(title=title)
            for col in (first, "submitted", "completed", "failed", "late", "deadline misses", "p50 s", "p95 s",
                        "p99 s", "steady s/proof", "device s"):
                table.add_column(col, justify="right" if col != first else "left")
            for name, g in groups.items():
                lat = g["latency_s"]
                steady = g.get("steady_state") or {}
                table.add_row(name, str(g["submitted"]), str(g["completed"]), str(g["failed"]), str(g["late"]),
                              _fmt(g["deadline_misses"]), _fmt(lat.get("p50")), _fmt(lat.get("p95")),
                              _fmt(lat.get("p99")), _fmt(steady.get("s_per_proof")), _fmt(g.get("device_s")))
            console.print(table)
        pre = stress.get("preemptions")
        if pre is not None:
            kinds = ", ".join(f"{n} {prio}" for prio, n in pre["by_priority"].items()) or "none"
            console.print(f"preemptions: {pre['partitions']} partitions ({kinds}) took the device ahead of "
                          f"{pre['partitions_overtaken']} lower-priority partitions queued earlier, "
                          f"or went into {pre['phases_interrupted']} lower-priority device phases",
                          highlight=False)
    if record.get("warning"):
        console.print(f"[bold red]warning:[/] {record['warning']}")


def _finish(args: argparse.Namespace, record: dict[str, Any], samples: list[dict[str, Any]]) -> int:
    from cuzk.bench import record as records
    from cuzk.bench.timeline import write_timeline

    # The record is saved before the chart is drawn: a run whose proofs all failed has no timings
    # to draw, and its record (with the failure reasons) is what the user needs then.
    if args.timeline is not None:
        record["timeline"] = str(args.timeline)
    if args.json is not None:
        records.save(record, args.json)
    _print_report(record)
    if record.get("warning"):
        print(f"cuzk: warning: {record['warning']}", file=sys.stderr)
    if args.timeline is not None:
        write_timeline(samples, args.timeline, f"cuzk bench {record['mode']} {record['params'].get('what')}")
    return 0 if record["summary"]["failed"] == 0 else 1


def _record(mode: str, args: argparse.Namespace, params: dict[str, Any], runs: list[list[dict[str, Any]]],
            daemon: _Daemon | None) -> dict[str, Any]:
    from cuzk.bench import record as records
    from cuzk.bench.stats import combined_summary, run_summary

    record: dict[str, Any] = {
        "schema": records.SCHEMA, "mode": mode, "created_at": records.now_iso(), "command": sys.argv[1:],
        "host": records.host_info(), "daemon": daemon.facts if daemon is not None else None,
        "params": params, "runs": [{"summary": run_summary(run, trim=params.get("trim", 1)), "samples": run}
                                   for run in runs],
        "summary": combined_summary(runs, trim=params.get("trim", 1)),
    }
    if daemon is not None:
        warning = daemon.after()
        if warning:
            record["warning"] = warning
    return record


# -- commands ----------------------------------------------------------------------------------------

def _what(inputs: Any) -> str:
    return inputs.label


def cmd_single(args: argparse.Namespace) -> int:
    from cuzk.bench.phases import partition_phases
    from cuzk.bench.runner import prove_one

    _check_outputs(args)
    inputs = proof_inputs(args)
    daemon = _Daemon(args)
    try:
        sample = prove_one(daemon.client, inputs, index=0, priority=args.priority)
        record = _record("single", args, {"what": _what(inputs), "count": 1, "priority": args.priority}, [[sample]],
                         daemon)
    finally:
        daemon.close()
    code = _finish(args, record, [sample])
    if sample["result"] and sample["status"] == "COMPLETED":
        from rich.console import Console
        from rich.table import Table

        from cuzk.bench.phases import PHASES

        table = Table(title=f"job {sample['job_id']}: phases per partition, ms")
        table.add_column("partition")
        for name in (*PHASES, "wall"):
            table.add_column(name, justify="right")
        for row in partition_phases(sample["result"]):
            table.add_row(str(row["partition"]), *(f"{row['phases'][n]:.0f}" for n in PHASES), f"{row['wall_ms']:.0f}")
        Console().print(table)
    elif sample["error"]:
        print(f"error: {sample['error']}")
    return code


def _repeat(args: argparse.Namespace, run_once: Callable[[_Progress], list[dict[str, Any]]],
            total: int) -> list[list[dict[str, Any]]]:
    runs = []
    for k in range(args.repeat):
        label = "proving" if args.repeat == 1 else f"repeat {k + 1}/{args.repeat}"
        with _Progress(total, label, not args.no_progress) as progress:
            runs.append(run_once(progress))
    return runs


def cmd_batch(args: argparse.Namespace) -> int:
    from cuzk.bench.runner import run_batch

    _check_outputs(args)
    if args.concurrency < 1:
        raise CuzkError(f"-j/--concurrency must be at least 1, got {args.concurrency}")
    inputs = proof_inputs(args)
    daemon = _Daemon(args)
    try:
        runs = _repeat(args, lambda progress: run_batch(
            daemon.client, inputs, count=args.count, concurrency=args.concurrency, warmup=args.warmup,
            priority=args.priority, on_sample=progress.sample, max_seconds=args.max_seconds),
            args.count + args.warmup)
        params = {"what": _what(inputs), "count": args.count, "concurrency": args.concurrency, "warmup": args.warmup,
                  "repeat": args.repeat, "trim": args.trim, "priority": args.priority,
                  "max_seconds": args.max_seconds}
        record = _record("batch", args, params, runs, daemon)
        left_out = sum(args.count + args.warmup - len(run) for run in runs)
        if left_out:
            record["stopped"] = {"max_seconds": args.max_seconds, "proofs_left_out": left_out}
            note = (f"--max-seconds {args.max_seconds:g}: {left_out} of {(args.count + args.warmup) * len(runs)} "
                    f"proofs were not submitted")
            record["warning"] = f"{record['warning']}; {note}" if record.get("warning") else note
    finally:
        daemon.close()
    return _finish(args, record, [s for run in runs for s in run])


def cmd_stress(args: argparse.Namespace) -> int:
    from cuzk.bench.runner import StreamSpec, arrivals, parse_stream, run_stress, stress_summary

    _check_outputs(args)
    if args.stream:
        streams = [parse_stream(spec, lambda head, opts: proof_inputs(args, head, opts)) for spec in args.stream]
    elif args.type:
        inputs = proof_inputs(args)
        if args.rate <= 0:
            raise CuzkError(f"--rate must be > 0 proofs per second, got {args.rate}")
        from cuzk.bench.runner import DEFAULT_DEADLINE_S

        deadline = args.deadline if args.deadline is not None else DEFAULT_DEADLINE_S.get(inputs.kind)
        streams = [StreamSpec(inputs.label, inputs, args.rate, args.priority, deadline)]
    else:
        raise CuzkError("bench stress needs --stream SPEC (repeatable) or -t KIND with --rate")
    total = len(arrivals(streams, args.duration, args.arrival_seed)) if args.duration > 0 else 0
    daemon = _Daemon(args)
    try:
        with _Progress(total, "stress", not args.no_progress) as progress:
            samples = run_stress(daemon.client, streams, duration_s=args.duration, seed=args.arrival_seed,
                                 drain_timeout_s=args.drain_timeout, on_sample=progress.sample)
        params = {"what": " + ".join(f"{s.name}@{s.rate:g}/s" for s in streams), "duration_s": args.duration,
                  "streams": [{"name": s.name, "kind": s.inputs.label, "rate_per_s": s.rate,
                               "priority": s.effective_priority, "deadline_s": s.deadline_s} for s in streams],
                  "arrival_seed": args.arrival_seed, "trim": 1}
        record = _record("stress", args, params, [samples], daemon)
    finally:
        daemon.close()
    record["stress"] = stress_summary(samples)
    return _finish(args, record, samples)


def _limit_numba_threads(threads: int) -> None:
    """NUMBA_NUM_THREADS before numba is imported (the CLI imports it lazily), else the runtime limit."""
    import os

    if "numba" not in sys.modules:
        os.environ["NUMBA_NUM_THREADS"] = str(threads)
        return
    import numba

    numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))


def cmd_local(args: argparse.Namespace) -> int:
    from cuzk.bench.local import LocalProver, run_local

    _check_outputs(args)
    if args.threads < 0:
        raise CuzkError(f"--threads must be 0 (all cores) or more, got {args.threads}")
    if args.threads:
        _limit_numba_threads(args.threads)
    inputs = proof_inputs(args)
    cache = args.param_cache or Path.home() / ".cache" / "cuzk" / "bench"
    prover = LocalProver(inputs, param_cache=cache, backend=args.backend, verify=not args.no_verify)
    runs = _repeat(args, lambda progress: run_local(prover, count=args.count, warmup=args.warmup,
                                                    on_sample=progress.sample), args.count + args.warmup)
    params = {"what": _what(inputs), "count": args.count, "warmup": args.warmup, "repeat": args.repeat,
              "trim": args.trim, "backend": args.backend, "circuit_id": prover.circuit_id,
              "srs_load_s": prover.srs_load_s}
    record = _record("local", args, params, runs, None)
    return _finish(args, record, [s for run in runs for s in run])


def cmd_compare(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table

    from cuzk.bench import record as records
    from cuzk.bench.compare import compare

    a, b = records.load(args.a), records.load(args.b)
    result = compare(a, b, min_change=args.min_change, sigmas=args.sigmas)
    console = Console(soft_wrap=True)
    for side, path in (("a", args.a), ("b", args.b)):
        ident = result[side]
        console.print(f"{side.upper()}: {path} ({ident['mode']}, {ident['created_at']}, config "
                      f"{ident['config_fingerprint'] or '-'}, commit {ident['commit'] or '-'}, {ident['runs']} runs)",
                      highlight=False)
    if result["a"]["config_fingerprint"] != result["b"]["config_fingerprint"]:
        console.print("note: the two runs used different daemon configurations", highlight=False)
    for title, rows, unit in (("phases (median per partition)", result["phases"], "ms"),
                              ("totals", result["totals"], "")):
        table = Table(title=title)
        for col in ("", "A", "B", "change", "noise", "verdict"):
            table.add_column(col, justify="left" if col in ("", "verdict") else "right")
        for r in rows:
            change = "-" if r["change_pct"] is None else f"{r['change_pct']:+.1f}%"
            noise = "-" if r["noise_pct"] is None else f"±{r['noise_pct']:.1f}%"
            verdict = ("[bold red]slower[/]" if r["b"] > r["a"] else "[bold green]faster[/]") if r["flagged"] else ""
            table.add_row(r["name"] + (f" {unit}" if unit else ""), f"{r['a']:.3f}", f"{r['b']:.3f}", change, noise,
                          verdict)
        console.print(table)
    flagged = result["flagged_phases"]
    console.print(f"changed phases: {', '.join(flagged) if flagged else 'none'}", highlight=False)
    if args.json is not None:
        try:
            args.json.write_text(json.dumps(result, indent=1) + "\n")
        except OSError as err:
            raise CuzkError(f"--json {args.json}: {err.strerror}") from None
    return 0
