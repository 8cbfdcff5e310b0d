"""The soak on the Ray executor (`bench_soak.py --ray-nodes 2`): the daemon's devices are actors on two
nodes of a Ray cluster on this host, and the faults include removing a node and adding another, killing
a device actor and the daemon itself. $CUZK_SOAK_RAY_SECONDS sets the length (default 160 s: the five
faults take a minute or more between them on a busy 2-core machine, and none is injected past the end)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("ray", reason="Ray is not installed (pip install 'cuzk[ray]'): the Ray soak does not run")

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "e2e" / "bench_soak.py"


@pytest.mark.slow
def test_a_ray_soak_loses_no_id_when_a_node_goes_and_another_comes(tmp_path: Path) -> None:
    seconds = float(os.environ.get("CUZK_SOAK_RAY_SECONDS") or 160)
    out = tmp_path / "out"
    # Test circuits only (no Filecoin keys to make), and the faults that concern the executor: each once.
    skip = [a for f in ("sigterm", "disconnect", "corrupt-param") for a in ("--skip-fault", f)]
    proc = subprocess.run([sys.executable, str(SCRIPT), "--duration", str(seconds), "--seed", "3", "--kinds", "",
                           "--ray-nodes", "2", "--warmup", "30", "--fault-every", str((seconds - 40) / 5), *skip,
                           "--root", str(tmp_path / "root"), "--out", str(out), "--tag", "ray"],
                          capture_output=True, text=True, timeout=seconds + 1200, check=False)
    tail = f"{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
    [path] = out.glob("soak-ray-*.json")
    record = json.loads(path.read_text())
    assert record["executor"] == "ray" and record["not_injected"] == []
    checks = record["checks"]
    detail = {k: record[k] for k in ("requests", "leftover_processes", "leftover_shm", "faults")}
    assert all(checks.values()), f"{checks}\n{json.dumps(detail, indent=1)}\n{tail}"
    assert proc.returncode == 0, tail
    [node] = [f for f in record["faults"] if f["fault"] == "ray-node"]
    # The daemon marked the old node's device lost, and the new node's device joined and proved.
    assert None not in (node["lost_after_s"], node["ready_after_s"], node["proved_after_s"]), node
    assert record["requests"]["completed"] == record["requests"]["total"] > 0
    assert {"kill-device", "kill-daemon", "ray-node"} <= {f["fault"] for f in record["faults"]}
