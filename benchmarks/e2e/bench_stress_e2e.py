"""Proof kinds at once through one daemon, with deadlines: `cuzk bench stress`, a stream per kind, on a
daemon that preloads every kind's key, and on the same daemon first each `--isolated` kind alone
(`cuzk bench batch -j 1`), so that a kind's latency under load sits beside its isolated latency.

`bench_porep_e2e.py` prepares each kind on the same --root first (compiled circuit, key under its
official name in <root>/params, vanilla proofs in <root>/vanilla-<kind>; `--stop-after vanilla`):

    for k in porep winning; do python benchmarks/e2e/bench_porep_e2e.py --kind $k --sector-size 32GiB \
        --backend cuda --root R --stop-after vanilla; done
    python benchmarks/e2e/bench_stress_e2e.py --sector-size 32GiB --backend cuda --root R --isolated winning \\
        --stream porep,rate=0.12 --stream winning,rate=0.2,deadline=5 --duration 180

`--kind-size porep=2KiB` prepares and runs one kind at another size (prepare it with that
--sector-size on the same --root): a PoRep-2KiB-shaped load beside WindowPoSt-32GiB, whose key and
PoRep-32GiB's do not both fit a 128 GiB host.

A stream is `cuzk bench stress --stream`'s spec without `inputs=` (added here from the kind). The
record (JSON with hardware, date and commit) holds the isolated runs' summaries, the stress summary
per priority, kind and stream (latency percentiles, late proofs, deadline misses, preemptions), each
device's memory plan and the driver's peak used memory; the stress timeline goes beside it.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/, for _common
sys.path.insert(0, str(Path(__file__).resolve().parent))  # the e2e steps
from _common import RESULTS, git_revision, hardware, nvidia_smi
from bench_porep_e2e import (
    KINDS,
    StepTimeoutError,
    _cuzk,
    _device_memory,
    daemon_status,
    running_daemon,
    vanilla_dir_of,
)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sector-size", default="2KiB", help="every kind's sector size, unless --kind-size says otherwise")
    p.add_argument("--kind-size", action="append", default=[], metavar="KIND=SIZE",
                   help="one kind's sector size (e.g. porep=2KiB: a PoRep-2KiB-shaped load beside WindowPoSt-32GiB "
                        "where both 32GiB keys do not fit the host)")
    p.add_argument("--backend", default="cpu", choices=("cpu", "cuda"))
    p.add_argument("--root", type=Path, required=True, help="the root bench_porep_e2e.py prepared the kinds in")
    p.add_argument("--stream", action="append", default=[], help="KIND[,rate=..][,priority=..][,deadline=..]...")
    p.add_argument("--duration", type=float, default=120.0, help="seconds of arrivals")
    p.add_argument("--drain-timeout", type=float, default=600.0)
    p.add_argument("--isolated", action="append", default=[], help="a kind to run alone first (cuzk bench batch)")
    p.add_argument("--isolated-count", type=int, default=20)
    p.add_argument("--workers-per-device", type=int, default=2)
    p.add_argument("--memory-limit", default="none", help="the daemon's [gpus] memory_limit ('none': unset)")
    p.add_argument("--devices", default="", help="the daemon's [gpus] devices, comma-separated ordinals")
    p.add_argument("--ready-timeout", type=float, default=900.0)
    p.add_argument("--status-listen", default="127.0.0.1:9876")
    p.add_argument("--py-spy", type=float, default=0.0, metavar="SECONDS",
                   help="record each device process with py-spy for this long from the stress run's start "
                        "(threads apart, idle samples kept; speedscope JSON per device beside the record; needs "
                        "py-spy on PATH)")
    p.add_argument("--tag", default="")
    p.add_argument("--out", type=Path, default=RESULTS)
    args = p.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))

    from cuzk.errors import CuzkError
    from cuzk.filecoin.sizes import CircuitKind, circuit_id, parameter_file_name, sector_params

    size = sector_params(args.sector_size)
    sizes: dict[str, Any] = {}
    for item in args.kind_size:
        kind, sep, value = item.partition("=")
        if not sep or kind.strip().lower() not in KINDS:
            p.error(f"--kind-size {item!r}: expected KIND=SIZE with KIND one of {', '.join(KINDS)}")
        try:
            sizes[kind.strip().lower()] = sector_params(value.strip())
        except CuzkError as err:
            p.error(f"--kind-size {item!r}: {err}")
    root = args.root.resolve()
    streams = [(spec.split(",", 1)[0].strip().lower(), spec) for spec in args.stream]
    kinds = sorted({k for k, _ in streams} | set(args.isolated), key=lambda k: (*KINDS, k).index(k))
    if not streams:
        p.error("give at least one --stream")
    for kind in kinds:
        if kind not in KINDS:
            p.error(f"{kind!r} is not a proof kind ({', '.join(KINDS)})")
        kind_size = sizes.get(kind, size)
        key = root / "params" / parameter_file_name(CircuitKind(kind), kind_size)
        if not key.is_file() or not (vanilla_dir_of(root, kind) / "public.json").is_file():
            print(f"error: {kind} is not prepared under {root} (no {key.name} or {vanilla_dir_of(root, kind)}): run "
                  f"bench_porep_e2e.py --kind {kind} --sector-size {kind_size.name} --root {root} --stop-after "
                  "vanilla", file=sys.stderr)
            return 2
    args.out.mkdir(parents=True, exist_ok=True)
    tag = args.tag or f"{args.backend}-{size.short}-{'-'.join(k for k, _ in streams)}"
    stamp = dt.date.today().isoformat()
    log = args.out / f"stress-e2e-{tag}-{stamp}.log"
    record: dict = {"benchmark": "bench_stress_e2e", "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
                    "git": git_revision(), "hardware": hardware(), "gpu": nvidia_smi(), "backend": args.backend,
                    "sector_size": size.name, "kind_sizes": {k: v.name for k, v in sizes.items()},
                    "streams": args.stream, "duration_s": args.duration,
                    "memory_limit": args.memory_limit, "isolated": {}, "run": {}}
    record_path = args.out / f"stress-e2e-{tag}-{stamp}.json"

    def save() -> None:
        record_path.write_text(json.dumps(record, indent=1) + "\n")

    gpus = {"backend": args.backend, "gpu_workers_per_device": args.workers_per_device,
            **({"memory_limit": args.memory_limit} if args.memory_limit != "none" else {}),
            **({"devices": [int(d) for d in args.devices.split(",")]} if args.devices else {})}
    circuits = [circuit_id(CircuitKind(k), sizes.get(k, size)) for k in kinds]
    run = record["run"]
    try:
        with running_daemon(root, circuits, gpus, {}, log_path=args.out / f"stress-e2e-daemon-{tag}-{stamp}.log",
                            status_listen=args.status_listen, ready_timeout=args.ready_timeout, run=run,
                            cuda=args.backend == "cuda") as (addr, sampler):
            save()
            for kind in args.isolated:
                out = args.out / f"stress-e2e-isolated-{kind}-{tag}-{stamp}.json"
                seconds = _cuzk("bench", "batch", "-t", kind, "--inputs", str(vanilla_dir_of(root, kind)), "-c",
                                str(args.isolated_count), "-j", "1", "--warmup", "2", "--json", str(out), "--addr",
                                addr, "--no-progress", log=log)
                record["isolated"][kind] = {"seconds": seconds,
                                            "summary": json.loads(out.read_text()).get("summary", {})}
                save()
            specs = [f"{spec},inputs={vanilla_dir_of(root, kind)}" for kind, spec in streams]
            stress = args.out / f"stress-e2e-{tag}-{stamp}-stress"
            profilers = _profile_devices(args, tag, stamp, run) if args.py_spy > 0 else []
            try:
                run["stress_seconds"] = _cuzk(
                    "bench", "stress", *[a for s in specs for a in ("--stream", s)], "--duration", str(args.duration),
                    "--drain-timeout", str(args.drain_timeout), "--json", f"{stress}.json", "--timeline",
                    f"{stress}.png", "--addr", addr, "--no-progress", log=log,
                    timeout=args.duration + args.drain_timeout + 120)
            finally:
                run["device_memory"] = _device_memory(args.status_listen, sampler)
                for proc, path in profilers:
                    _finish_profile(proc, path, run)
            written = json.loads(Path(f"{stress}.json").read_text())
            run["stress_summary"] = {"overall": written.get("summary", {}), **written.get("stress", {})}
    except StepTimeoutError as err:
        run["error"] = str(err)
        print(f"error: {err}", file=sys.stderr)
        return 1
    finally:
        save()
    by_kind = run["stress_summary"].get("by_kind", {})
    print(json.dumps({"isolated": {k: v["summary"].get("latency_s") for k, v in record["isolated"].items()},
                      "under_load": {k: {"latency_s": v.get("latency_s"), "deadline_misses": v.get("deadline_misses")}
                                     for k, v in by_kind.items()}}, indent=1))
    return 0


def _profile_devices(args: argparse.Namespace, tag: str, stamp: str, run: dict) -> list[tuple[Any, Path]]:
    """A `py-spy record` per device process, whose pids the daemon's /status lists (never found by
    name); non-blocking, so the device is not paused to be sampled."""
    started = []
    for d in daemon_status(args.status_listen)["devices"]:
        if not d.get("pid"):
            continue
        path = args.out / f"stress-e2e-pyspy-{d['label']}-{tag}-{stamp}.json"
        cmd = ["py-spy", "record", "--pid", str(d["pid"]), "--duration", str(round(args.py_spy)), "--rate", "50",
               "--threads", "--idle", "--nonblocking", "--format", "speedscope", "--output", str(path)]
        try:
            proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        except OSError as err:
            run.setdefault("py_spy", []).append({"device": d["label"], "error": f"cannot start py-spy: {err}"})
            continue
        started.append((proc, path))
    return started


def _finish_profile(proc: Any, path: Path, run: dict) -> None:
    try:
        _, err = proc.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
    entry = {"file": path.name, "returncode": proc.returncode}
    if proc.returncode:
        entry["error"] = (err or "").strip()[-500:]
    run.setdefault("py_spy", []).append(entry)


if __name__ == "__main__":
    sys.exit(main())
