"""The Ray executor's cost per partition, against the local executor on the same device (docs/ray.md).

One engine with the local executor (one CPU device process), then one with the Ray executor on a
local Ray cluster (`ray.cluster_utils.Cluster`, loopback only) whose one node lends the same CPU as
one device (`cuzk_device`), each proving the same test-circuit job. Every `executor.prove` call is
timed from the lane; its overhead is the round trip less what the executor reported doing (the
synthesis, the proof, its verification), per partition: the hand-offs to the synthesis process and
to the device. One lane per device (no lane synthesizing ahead), so no partition waits for the
device. Then the throughput of the Ray executor with 2 nodes
against 1 (both nodes on this host: they share its cores).

    python benchmarks/e2e/bench_ray_overhead.py                      # mimc-3, 40 partitions
    python benchmarks/e2e/bench_ray_overhead.py --partitions 80 --throughput-circuit mimc-10
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

# Ray resolves a loopback address to the host's outward one unless told it runs one host's cluster.
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/, for _common
from _common import envelope, write

NODE = {"node_ip_address": "127.0.0.1", "num_cpus": 1, "object_store_memory": 80 << 20,
        "resources": {"cuzk_device": 1}}


def _engine(root: Path, executor: dict[str, Any], name: str) -> tuple[Any, list[dict[str, Any]]]:
    """An engine with test circuits, one lane per device, whose executor's prove calls are timed."""
    import json

    from cuzk.config import config_from_dict
    from cuzk.engine.engine import Engine
    from cuzk.engine.executors import make_executor

    cache = root / "params"
    cache.mkdir(exist_ok=True)
    config = config_from_dict({
        "srs": {"param_cache": str(cache)}, "memory": {"total_budget": "4GiB"}, "debug": {"test_circuits": True},
        "gpus": {"backend": "cpu", "gpu_workers_per_device": 1}, "pipeline": {"max_parallel_synthesis": 1},
        "daemon": {"state_dir": str(root / f"state-{name}")}, "executor": executor,
    }, source=f"<bench {name}>")
    if config.executor.kind == "local":  # its one lane: no second lane synthesizing ahead waits for the device
        from cuzk.engine.executor import LocalExecutor

        ex = LocalExecutor.from_config(config, synthesis_ahead=0)
    else:
        ex = make_executor(config)
    calls: list[dict[str, Any]] = []
    prove = ex.prove

    def timed(device: Any, lane: int, items: list[Any], verify: bool, report: Any = None) -> Any:
        start = time.monotonic()
        results = prove(device, lane, items, verify, report)
        calls.append({"round_trip": time.monotonic() - start, "results": results, "items": len(items),
                      "device": device.worker_name})
        return results

    ex.prove = timed  # type: ignore[method-assign]
    try:  # the daemon's providers, from the package that builds them where the tree has one
        from cuzk.providers import default_providers

        engine = Engine(config, executor=ex, providers=default_providers(config))
    except ImportError:
        engine = Engine(config, executor=ex)
    engine.start()
    json.dumps(engine.status()["devices"])  # the status is serializable with this executor
    return engine, calls


def _run_job(engine: Any, rid: str, circuit: str, partitions: int, seed: int = 0) -> float:
    import json

    from cuzk.engine.jobs import Priority, ProofKind, ResultStatus
    from cuzk.providers.fields import submit_request

    body = json.dumps({"test_circuit": circuit, "partitions": partitions, "seed": seed}).encode()
    start = time.monotonic()
    engine.submit(submit_request(rid, ProofKind.TEST, Priority.NORMAL, vanilla_proof=body))
    result = engine.await_result(rid, timeout=1800)
    wall = time.monotonic() - start
    if result.status is not ResultStatus.COMPLETED:
        raise SystemExit(f"{rid}: {result.status.name}: {result.error}")
    return wall


def _overheads(calls: list[dict[str, Any]]) -> list[float]:
    """Per partition: the lane's round trip less the device's own synthesis, proof and verification."""
    out = []
    for c in calls:
        work = 0.0
        for r in c["results"]:
            work += (r.device_end - r.device_start) + r.verify_s
            if r.synth is not None:
                work += r.synth[1] - r.synth[0]
        out.append((c["round_trip"] - work) / c["items"])
    return out


def _summary(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {"median_ms": round(statistics.median(ordered) * 1000, 3),
            "p90_ms": round(ordered[int(0.9 * (len(ordered) - 1))] * 1000, 3),
            "mean_ms": round(statistics.fmean(ordered) * 1000, 3), "n": len(ordered)}


def _overhead_run(root: Path, name: str, executor: dict[str, Any], args: argparse.Namespace) -> dict[str, Any]:
    engine, calls = _engine(root, executor, name)
    try:
        _run_job(engine, f"{name}-warm", args.circuit, 4, seed=99)  # parameters, kernels, first calls
        calls.clear()
        wall = _run_job(engine, f"{name}-job", args.circuit, args.partitions)
        records = engine.jobs[f"{name}-job"].partitions
        device = [p.device_end - p.device_start for p in records]
        synth = [p.synth_end - p.synth_start for p in records]
        return {"executor": name, "partitions": args.partitions, "job_wall_s": round(wall, 3),
                "per_partition_wall_ms": round(wall / args.partitions * 1000, 3),
                "overhead_per_partition": _summary(_overheads(calls)),
                "device_ms": _summary(device), "synthesis_ms": _summary(synth),
                "devices": [d.worker_name for d in engine.executor.devices]}
    finally:
        engine.shutdown(0)


def _throughput_run(root: Path, name: str, address: str, args: argparse.Namespace) -> dict[str, Any]:
    engine, _ = _engine(root, {"kind": "ray", "address": address}, name)
    try:
        _run_job(engine, f"{name}-warm", args.throughput_circuit, 2, seed=98)
        wall = _run_job(engine, f"{name}-job", args.throughput_circuit, args.throughput_partitions)
        used = sorted({p.device_worker.split(":", 1)[0] for p in engine.jobs[f"{name}-job"].partitions})
        return {"nodes": name, "devices": len(engine.executor.devices), "partitions": args.throughput_partitions,
                "job_wall_s": round(wall, 3), "partitions_per_s": round(args.throughput_partitions / wall, 3),
                "nodes_used": used}
    finally:
        engine.shutdown(0)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--circuit", default="mimc-3", help="test circuit of the overhead runs (tiny: overhead dominates)")
    p.add_argument("--partitions", type=int, default=40)
    p.add_argument("--throughput-circuit", default="mimc-10")
    p.add_argument("--throughput-partitions", type=int, default=16)
    p.add_argument("--no-throughput", action="store_true", help="skip the 1-node vs 2-node throughput runs")
    p.add_argument("--tag", default="cpu")
    p.add_argument("--out", type=Path, default=None)
    args = p.parse_args()

    import ray
    from ray.cluster_utils import Cluster

    results: dict[str, Any] = {}
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="cuzk-bench-ray-") as tmp:
        root = Path(tmp)
        local = _overhead_run(root, "local", {"kind": "local"}, args)
        print(f"local: {local['overhead_per_partition']}", flush=True)
        cluster = Cluster(initialize_head=True, head_node_args=dict(NODE))
        try:
            # One driver connection for all the Ray runs: the executors find it and leave it (a second
            # ray.init after ray.shutdown in one process has crashed Ray's core worker).
            ray.init(address=cluster.address, logging_level=logging.WARNING, configure_logging=False)
            # One lane per device, as the local run has: no lanes synthesizing ahead.
            remote = _overhead_run(root, "ray", {"kind": "ray", "address": cluster.address, "synthesis_ahead": 0},
                                   args)
            print(f"ray:   {remote['overhead_per_partition']}", flush=True)
            results["overhead"] = [local, remote]
            results["ray_minus_local_overhead_ms"] = round(remote["overhead_per_partition"]["median_ms"]
                                                           - local["overhead_per_partition"]["median_ms"], 3)
            if not args.no_throughput:
                one = _throughput_run(root, "1-node", cluster.address, args)
                print(f"1 node:  {one['partitions_per_s']} partitions/s", flush=True)
                cluster.add_node(**NODE)
                two = _throughput_run(root, "2-nodes", cluster.address, args)
                print(f"2 nodes: {two['partitions_per_s']} partitions/s", flush=True)
                results["throughput"] = [one, two]
                results["throughput_ratio_2_vs_1"] = round(two["partitions_per_s"] / one["partitions_per_s"], 3)
        finally:
            if ray.is_initialized():
                ray.shutdown()
            cluster.shutdown()
    # Other work on the host inflates every round trip: the load averages say how busy it was.
    payload = envelope("ray-overhead", results, ray_version=ray.__version__,
                       load_average={"before": [round(x, 2) for x in load_before],
                                     "after": [round(x, 2) for x in os.getloadavg()]},
                       method="overhead = lane round trip of executor.prove less the reported synthesis, proof "
                              "and verification, per partition; one lane per device (synthesis_ahead = 0: local, each "
                              "partition synthesized in the host's synthesis process; Ray, in its lane's synthesis "
                              "process on the node); throughput "
                              "runs with the default synthesis_ahead; local Ray cluster on loopback, every node on "
                              "this host")
    path = write(f"ray-overhead-{args.tag}", payload, args.out)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
