"""The soak's Ray cluster: nodes on this host (`ray.cluster_utils.Cluster`, a raylet per node, loopback
only) for a daemon with the Ray executor, and the fault that removes a node and adds another.

The cluster lives in the soak's process, not the daemon's: the daemon joins it by address, so that a
daemon killed or restarted by the other faults finds the same nodes again, and a removed node takes
its device actor and synthesis processes with it, as a host that goes away does.
"""

from __future__ import annotations

import contextlib
import os
import random
import time
from collections.abc import Callable
from typing import Any

from _common import still_running  # benchmarks/ is on the path of the soak that imports this

# Ray resolves "127.0.0.1" to the host's outward address unless told the cluster is one host's (read when
# Ray is imported).
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")

#: Per node: one CPU for Ray's bookkeeping, one CPU device, the smallest object store Ray allows.
NODE = {"node_ip_address": "127.0.0.1", "num_cpus": 1, "object_store_memory": 80 << 20,
        "resources": {"cuzk_device": 1}}


class RayNodes:
    """A head node and `count - 1` more, each offering one device."""

    def __init__(self, count: int) -> None:
        from ray.cluster_utils import Cluster

        self.cluster = Cluster(initialize_head=True, head_node_args=dict(NODE))
        for _ in range(count - 1):
            self.cluster.add_node(**NODE)
        self.pids_seen: dict[int, float] = {}  # pid -> create time, of every node's processes

    @property
    def address(self) -> str:
        return self.cluster.address

    def processes(self) -> list[Any]:
        """psutil processes of every node: raylets, their workers (device actors, synthesis processes
        under them), the head's GCS. Remembered, so that the end can tell which are left."""
        import psutil

        procs = []
        for node in self.cluster.list_all_nodes():
            for infos in node.all_processes.values():
                for info in infos:
                    with contextlib.suppress(psutil.Error):
                        root = psutil.Process(info.process.pid)
                        procs += [root, *root.children(recursive=True)]
        for p in procs:
            with contextlib.suppress(psutil.Error):
                self.pids_seen.setdefault(p.pid, p.create_time())
        return procs

    def replace_node(self, status: Callable[[], dict[str, Any]], rng: random.Random, *,
                     on_ready: Callable[[], str], join_timeout: float = 180.0) -> dict[str, Any]:
        """Remove a node other than the head (one whose device is proving, if any) and add a new one;
        wait for the daemon to report the removed node's device lost, and the new one's ready and then
        with a partition proven (`on_ready` starts work enough for every device once it is ready, and
        names it)."""
        head = self.cluster.head_node.node_id
        others = [n for n in self.cluster.list_all_nodes() if n.node_id != head]
        if not others:
            raise RuntimeError("no node but the head to remove (--ray-nodes 2 or more)")
        snapshot = status()
        busy_nodes = {w["worker_id"].split(":", 1)[0] for w in snapshot.get("gpu_workers", []) if w["state"] != "idle"}
        label_of = {d.get("node_id"): d.get("node") for d in snapshot["devices"]}
        busy = [n for n in others if label_of.get(n.node_id) in busy_nodes]
        victim = rng.choice(busy or others)
        self.processes()  # remember its processes before they go
        self.cluster.remove_node(victim)
        added = self.cluster.add_node(**NODE)
        began = time.monotonic()
        seen: dict[str, float | None] = {"lost": None, "ready": None, "proved": None}
        load = None
        while time.monotonic() - began < join_timeout and None in seen.values():
            time.sleep(1.0)
            with contextlib.suppress(Exception):
                devices = status()["devices"]
                now = round(time.monotonic() - began, 1)
                for event, node, test in (("lost", victim, lambda d: d.get("state") == "lost"),
                                          ("ready", added, lambda d: d.get("state") == "ready"),
                                          ("proved", added, lambda d: d.get("partitions_proven", 0) > 0)):
                    if seen[event] is None and any(d.get("node_id") == node.node_id and test(d) for d in devices):
                        seen[event] = now
                        if event == "ready":
                            load = on_ready()
        out: dict[str, Any] = {"removed": victim.node_id[:12], "was_proving": victim in busy,
                               "added": added.node_id[:12], "lost_after_s": seen["lost"],
                               "ready_after_s": seen["ready"], "proved_after_s": seen["proved"], "load": load}
        if None in seen.values():
            raise RuntimeError(f"the daemon did not report the node change within {join_timeout:g} s: {out}")
        return out

    def shutdown(self) -> list[dict[str, Any]]:
        """Stop every node; the processes of any node still alive afterwards (pid and create time as seen)."""
        self.processes()
        self.cluster.shutdown()
        time.sleep(2.0)
        return still_running(self.pids_seen)
