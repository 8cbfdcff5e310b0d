"""A daemon benchmark in one command: start `cuzk daemon run` with test circuits, run `cuzk bench batch`
and `cuzk bench stress` against it, stop it, and keep the records (JSON, PNG timelines) in results/.

The daemon is configured here (backend, workers per device, memory budget) and its config
fingerprint is in every record. Test circuits get insecure parameters generated on first use.

    python benchmarks/e2e/bench_daemon.py --backend cuda --circuit mimc-14 --partitions 4 -c 12 -j 3
    python benchmarks/e2e/bench_daemon.py --backend cpu --circuit mimc-8 -c 6 --quick
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import subprocess
import sys
import tempfile
from pathlib import Path

RESULTS = Path(__file__).resolve().parents[1] / "results"


def _bench(args: argparse.Namespace, addr: str, *extra: str) -> int:
    cmd = [sys.executable, "-m", "cuzk.cli.main", "bench", *extra, "--addr", addr, "--no-progress"]
    print("+", " ".join(cmd), flush=True)
    return subprocess.run(cmd, check=False).returncode


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--backend", default="auto", choices=("auto", "cpu", "cuda"))
    p.add_argument("--circuit", default="mimc-12", help="test circuit (mimc-K, bits-N)")
    p.add_argument("--partitions", type=int, default=4)
    p.add_argument("-c", "--count", type=int, default=12)
    p.add_argument("-j", "--concurrency", type=int, default=2)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--workers-per-device", type=int, default=2)
    p.add_argument("--budget", default="32GiB", help="memory.total_budget")
    p.add_argument("--stress-duration", type=float, default=30.0)
    p.add_argument("--commit", default="", help="record this commit when the tree has no .git (a copied tree)")
    p.add_argument("--tag", default="", help="file name tag (default: the backend)")
    p.add_argument("--out", type=Path, default=RESULTS)
    args = p.parse_args()

    from cuzk.config import config_from_dict
    from cuzk.server.client import CuzkClient

    args.out.mkdir(parents=True, exist_ok=True)
    tag = f"{args.tag or args.backend}-{dt.date.today().isoformat()}"
    with tempfile.TemporaryDirectory(prefix="cuzk-bench-") as tmp:
        root = Path(tmp)
        addr = f"unix://{root / 'cuzk.sock'}"
        config = config_from_dict({
            "daemon": {"listen": [addr], "state_dir": str(root / "state"), "shutdown_grace": "0s"},
            "srs": {"param_cache": str(root / "params")},
            "memory": {"total_budget": args.budget},
            "gpus": {"backend": args.backend, "gpu_workers_per_device": args.workers_per_device},
            "debug": {"test_circuits": True},
        })
        (root / "params").mkdir()
        (root / "cuzk.toml").write_text(config.to_toml())
        log = open(root / "daemon.log", "wb")  # noqa: SIM115 - the daemon writes it until stopped
        daemon = subprocess.Popen([sys.executable, "-m", "cuzk.cli.main", "daemon", "run", "--config",
                                   str(root / "cuzk.toml")], stdout=log, stderr=subprocess.STDOUT)
        try:
            with CuzkClient(addr, timeout=5) as client:
                client.wait_ready(900, alive=lambda: daemon.poll() is None)
            what = ["-t", args.circuit, "--partitions", str(args.partitions)]
            batch = args.out / f"bench-batch-{tag}"
            _bench(args, addr, "batch", *what, "-c", str(args.count), "-j", str(args.concurrency), "--warmup", "2",
                   "--repeat", str(args.repeat), "--json", f"{batch}.json", "--timeline", f"{batch}.png")
            stress = args.out / f"bench-stress-{tag}"
            _bench(args, addr, "stress", "--duration", str(args.stress_duration),
                   "--stream", f"{args.circuit},rate=1,priority=critical,deadline=5,name=winning-like",
                   "--stream", f"{args.circuit},rate=2,partitions={args.partitions},name=porep-like",
                   "--json", f"{stress}.json", "--timeline", f"{stress}.png")
        finally:
            daemon.terminate()
            daemon.wait(60)
            log.close()
            print((root / "daemon.log").read_text(errors="replace")[-3000:])
    # The records name the config by fingerprint; keep the config itself next to it.
    for path in args.out.glob(f"bench-*-{tag}.json"):
        record = json.loads(path.read_text())
        if not record["host"]["commit"] and args.commit:
            record["host"]["commit"] = args.commit
        record["daemon"]["config_toml"] = config.to_toml()
        path.write_text(json.dumps(record, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
