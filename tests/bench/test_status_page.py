"""The operator's page (/status.html) in headless Chromium: against a live daemon that ran test-circuit
jobs (its cells checked against /status), against a crafted status with what a CPU daemon does not
report (a GPU memory plan, key copies per device, a device failure, queued jobs), and with the
daemon gone. Each test saves a screenshot in its tmp_path."""

from __future__ import annotations

import json
import re
import subprocess
import threading
import time
import urllib.request
from collections.abc import Iterator
from html.parser import HTMLParser
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from bench.conftest import chromium
from server.conftest import LiveDaemon, free_port, start_daemon

from cuzk.server._gen import proving_pb2 as pb
from cuzk.server.client import build_submit, payload_for_test_circuit
from cuzk.server.status_page import render_status_page

_VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}


class PageCells(HTMLParser):
    """What the page drew: `rows[data-row][data-cell]` = {"text", "value"}, and `ids[id]` = {"text", attrs}."""

    def __init__(self, dom: str) -> None:
        super().__init__()
        self.rows: dict[str, dict[str, dict[str, str]]] = {}
        self.ids: dict[str, dict[str, Any]] = {}
        self._stack: list[tuple[str, dict[str, str]]] = []
        self.feed(dom)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in _VOID:
            return
        a = {k: v or "" for k, v in attrs}
        self._stack.append((tag, a))
        if "data-row" in a:
            self.rows.setdefault(a["data-row"], {})
        if "data-cell" in a:
            row = next((x["data-row"] for _, x in reversed(self._stack) if "data-row" in x), "")
            self.rows.setdefault(row, {})[a["data-cell"]] = {"text": "", "value": a.get("data-value", "")}
        if "id" in a:
            self.ids[a["id"]] = {"text": "", **a}

    def handle_endtag(self, tag: str) -> None:
        while self._stack:
            if self._stack.pop()[0] == tag:
                break

    def handle_data(self, data: str) -> None:
        row = ""
        for _, a in self._stack:
            row = a.get("data-row", row)
            if "data-cell" in a:
                self.rows[row][a["data-cell"]]["text"] += data
            if "id" in a:
                self.ids[a["id"]]["text"] += data

    def prefixed(self, prefix: str) -> list[str]:
        """Row keys starting with `prefix`, the prefix removed, in page order."""
        return [k[len(prefix):] for k in self.rows if k.startswith(prefix)]


def load_page(url: str, png: Path, *, height: int = 1900) -> str:
    """The DOM after the page's scripts ran, from headless Chromium, which also saves a screenshot
    of it at `png` (one browser start for both)."""
    exe = chromium()
    if exe is None:
        pytest.skip("chromium is not installed (apt-get install -y chromium; .ci/run installs it)")
    out = subprocess.run([exe, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                          "--hide-scrollbars", f"--window-size=1400,{height}", "--virtual-time-budget=5000",
                          f"--screenshot={png}", "--dump-dom", url],
                         capture_output=True, text=True, timeout=120, check=False)
    assert out.returncode == 0, out.stderr[-2000:]
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    print(f"screenshot: {png}")
    return out.stdout


def submit(rid: str, circuit: str, priority: str = "default", **payload: object) -> pb.SubmitProofRequest:
    return build_submit("test", request_id=rid, priority=priority,
                        vanilla_proof=payload_for_test_circuit(circuit, **payload))


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory, bench_params: Path) -> Iterator[LiveDaemon]:
    """A daemon that proved three test-circuit jobs (one of two partitions, one HIGH) and failed one."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("XDG_STATE_HOME", str(tmp_path_factory.mktemp("page-xdg")))
        d = start_daemon(tmp_path_factory.mktemp("page-daemon"), bench_params)
        try:
            with d.client() as c:
                assert c.prove(submit("page-two", "mimc-3", partitions=2), timeout=60).status == 1
                assert c.prove(submit("page-high", "mimc-4", priority="high"), timeout=60).status == 1
                bad = c.prove(submit("page-bad", "mimc-3", fail_partition=0), timeout=60)
                assert bad.status == 2 and "injected synthesis failure" in bad.error_message
                assert c.prove(submit("page-last", "mimc-3"), timeout=60).status == 1
            yield d
        finally:
            code = d.stop()
    assert code == 0, f"the daemon exited with {code} on SIGTERM; log:\n{d.log()}"


@pytest.mark.slow  # its module's daemon starts and proves four jobs first (about 20 s)
def test_operator_page_against_a_live_daemon(site: LiveDaemon, tmp_path: Path) -> None:
    url = f"http://{site.http_addr}/status.html"
    with urllib.request.urlopen(f"http://{site.http_addr}/status", timeout=10) as reply:
        status = json.loads(reply.read())
    # A window that reaches back to the fixture's jobs: the timeline below has them all.
    dom = load_page(url + "?window=600", tmp_path / "status-live.png")
    page = PageCells(dom)

    assert page.ids["conn"]["data-state"] == "live", page.ids["conn"]["text"]
    assert page.ids["title"]["text"] == f"cuzk daemon {status['instance_id']}"
    c = status["counters"]
    assert f"{c['total_completed']} completed · {c['total_failed']} failed" in page.ids["fact-jobs"]["text"]

    assert page.prefixed("device:") == [f"{d['kind']}{d['ordinal']}" for d in status["devices"]]
    for d in status["devices"]:
        row = page.rows[f"device:{d['kind']}{d['ordinal']}"]
        assert row["name"]["text"] == d["name"]
        assert row["memory_total"]["value"] == str(d["memory_total"])
        assert row["state"]["value"] == "idle" and row["current_job"]["text"] == "-"
        assert row["restarts"]["text"] == str(d["restarts"])
    assert "no-plan" in page.ids  # a CPU daemon has no device memory plan
    assert "no-keys" not in page.ids  # each device process reports the key copies it holds
    for d in status["devices"]:
        label = f"{d['kind']}{d['ordinal']}"
        if d["keys"]:
            assert [page.rows[f"key:{label}:{i}"]["key"]["text"] for i in range(len(d["keys"]))] == \
                [k["circuit_id"] for k in d["keys"]]
        else:
            assert page.rows[f"key:{label}:none"]["key"]["text"] == "no key copies"

    assert page.prefixed("queue:") == ["CRITICAL", "HIGH", "NORMAL", "LOW"]
    for q in status["queues_by_priority"]:
        row = page.rows[f"queue:{q['priority']}"]
        assert row["queued"]["value"] == str(q["queued"]) == "0"
        assert row["oldest_wait_secs"]["text"] == "-"

    recent = status["recent_jobs"]
    assert [j["job_id"] for j in recent][:4] == ["page-last", "page-bad", "page-high", "page-two"]
    assert page.prefixed("job:") == [j["job_id"] for j in recent]
    bad = page.rows["job:page-bad"]
    assert bad["state"]["text"] == "failed" and "injected synthesis failure" in bad["error"]["text"]
    two = page.rows["job:page-two"]
    assert two["partitions"]["value"] == "2" and two["priority"]["text"] == "NORMAL"
    assert float(two["phase_device"]["value"]) == next(j for j in recent if j["job_id"] == "page-two")[
        "phases_secs"]["device"] > 0
    assert page.rows["job:page-high"]["priority"]["text"] == "HIGH"

    srs = status["allocations"]["srs"]
    assert srs and page.prefixed("srs:") == [e["circuit_id"] for e in srs]
    for e in srs:
        assert page.rows[f"srs:{e['circuit_id']}"]["tier"]["value"] == e["tier"]

    # The timeline below: every partition that reached a device (page-bad's failed in synthesis).
    assert len(re.findall(r'<rect [^>]*class="partition device', dom)) >= 4
    assert {"page-two", "page-high", "page-last"} <= set(re.findall(r'data-job="([^"]+)"', dom))


def _gpu_status(now_ms: int) -> dict[str, Any]:
    """A status as a two-GPU daemon would report it: cuda0 busy with a planned key, cuda1 restarted
    after a failure, key copies per device, work queued at two priorities, one failed job."""
    gib = 1 << 30
    plan = {"memory_limit": 40 * gib, "budget": 39 * gib, "margin": 256 << 20, "context_reserve": 768 << 20,
            "peak_pool_bytes": 31 * gib, "oom_retries": 1, "preemptions": 3, "preemptions_refused": 1,
            "keys": [{"mode": "streaming", "resident": ["a", "b_g1", "l"], "streamed": ["h", "b_g2"],
                      "resident_bytes": 18 * gib, "streamed_bytes": 9 * gib, "host_pinned_bytes": 9 * gib,
                      "working_reserve": 12 * gib, "msm_batch": 1 << 22, "domain": 1 << 27}]}
    worker = {"gpu_ordinal": 0, "device_kind": "cuda", "reserved_for": None, "busy_secs": 1.0}
    phases = {"queue": 0.5, "srs_load": 0.0, "synthesis": 40.2, "device": 15.1, "verify": 0.3}
    return {
        "version": "0.0.test", "instance_id": "gpu-host", "pid": 4242, "backend": "cuda", "uptime_secs": 5000.0,
        "accepting": True,
        "memory": {"total_bytes": 256 * gib, "used_bytes": 100 * gib, "peak_bytes": 180 * gib,
                   "process_rss_bytes": 60 * gib},
        "synthesis": {"max_concurrent": 4, "active": 2, "workers": []},
        "counters": {"total_completed": 41, "total_failed": 1, "total_cancelled": 0, "queue_depth": 5,
                     "active_jobs": 2, "window": 4},
        "devices": [
            {"ordinal": 0, "kind": "cuda", "name": "cuda: NVIDIA H200", "pid": 101, "restarts": 0, "failures": 0,
             "last_failure": None, "memory_total": 141 * gib, "memory_free": 90 * gib, "memory_plan": plan,
             "keys": [{"circuit_id": "porep-32g", "tier": "HOT", "resident_bytes": 18 * gib}]},
            {"ordinal": 1, "kind": "cuda", "name": "cuda: NVIDIA H200", "pid": 102, "restarts": 1, "failures": 1,
             "last_failure": {"at_unix_ms": now_ms - 60_000, "reason": "device process exited (code -9)"},
             "memory_total": 141 * gib, "memory_free": 140 * gib, "memory_plan": None, "keys": []},
            # On another host (the Ray executor's placement keys), lost there.
            {"ordinal": 2, "kind": "cuda", "name": "cuda 2", "pid": None, "restarts": 0, "failures": 0,
             "last_failure": None, "memory_total": 0, "memory_free": 0, "memory_plan": None,
             "node_id": "n2", "node_address": "10.0.0.7", "state": "lost", "lost_reason": "node 10.0.0.7 died"},
            # Dead here, and its restart failed.
            {"ordinal": 3, "kind": "cuda", "name": "cuda: NVIDIA H200", "pid": 104, "restarts": 3, "failures": 3,
             "last_failure": {"at_unix_ms": now_ms - 30_000, "reason": "died while proving seal-6 p1"},
             "restart_error": "worker process cuzk-device-cuda3 did not start (exit code 1)",
             "memory_total": 0, "memory_free": 0, "memory_plan": None, "keys": []},
        ],
        "gpu_workers": [
            {**worker, "worker_id": "cuda0/0", "state": "proving", "current_job": "seal-7", "current_partition": 3,
             "current_proof_kind": "porep-c2"},
            {**worker, "worker_id": "cuda0/1", "state": "idle", "current_job": "", "current_partition": None,
             "current_proof_kind": ""},
            {**worker, "gpu_ordinal": 1, "worker_id": "cuda1/0", "state": "idle", "current_job": "",
             "current_partition": None, "current_proof_kind": ""},
        ],
        "pipelines": [{"job_id": "seal-7", "proof_kind": "porep-c2", "priority": "NORMAL", "state": "running",
                       "phase": "proving", "queued_secs": 2.0, "started_secs_ago": 30.5, "total_partitions": 10,
                       "partitions_done": 3}],
        "queues": [{"proof_kind": "porep-c2", "pending": 4, "planning": 0, "synthesizing": 0, "proving": 1},
                   {"proof_kind": "winning-post", "pending": 1, "planning": 0, "synthesizing": 0, "proving": 0}],
        "queues_by_priority": [
            {"priority": "CRITICAL", "queued": 1, "planning": 0, "running": 0, "oldest_queued_job": "win-1",
             "oldest_wait_secs": 0.8},
            {"priority": "HIGH", "queued": 0, "planning": 0, "running": 0, "oldest_queued_job": None,
             "oldest_wait_secs": None},
            {"priority": "NORMAL", "queued": 4, "planning": 0, "running": 1, "oldest_queued_job": "seal-8",
             "oldest_wait_secs": 95.0},
            {"priority": "LOW", "queued": 0, "planning": 0, "running": 0, "oldest_queued_job": None,
             "oldest_wait_secs": None},
        ],
        "buffers": {"synth_in_flight": 2, "waiting_for_device": 5, "queued_for_synthesis": 2, "shared_segments": 7,
                    "shared_bytes": 12 * gib},
        "allocations": {"srs": [
            {"circuit_id": "porep-32g", "tier": "HOT", "size_bytes": 47 * gib, "resident_bytes": 18 * gib,
             "mapped_bytes": 0, "pinned_bytes": 25 * gib, "ref_count": 1, "idle_ms": 0, "load_time_ms": 61_000,
             "evictable": False, "insecure": False},
            {"circuit_id": "window-32g", "tier": "COLD", "size_bytes": 30 * gib, "resident_bytes": 0,
             "ref_count": 0, "idle_ms": 4_000_000, "load_time_ms": 0, "evictable": False, "insecure": False}]},
        "recent_jobs": [
            {"job_id": "seal-6", "proof_kind": "porep-c2", "priority": "NORMAL", "state": "failed",
             "circuit_id": "porep-32g", "partitions": 10, "finished_at_unix_ms": now_ms - 5000, "total_secs": 20.0,
             "phases_secs": phases, "restored": False,
             "error": "partition 4: CUDA error: an illegal memory access was encountered"},
            {"job_id": "seal-5", "proof_kind": "porep-c2", "priority": "NORMAL", "state": "completed",
             "circuit_id": "porep-32g", "partitions": 10, "finished_at_unix_ms": now_ms - 30_000,
             "total_secs": 23.1, "phases_secs": phases, "restored": False, "error": ""},
        ],
    }


def _gpu_timeline(now_ms: int) -> dict[str, Any]:
    spans = []
    for k in range(4):
        start = now_ms - 40_000 + k * 6000
        spans.append({"job_id": "seal-7", "partition": k, "proof_kind": "porep-c2", "priority": "NORMAL",
                      "state": "done" if k < 3 else "gpu", "synth_worker": f"synth-{k % 2}",
                      "device_worker": f"cuda0/{k % 2}", "synth": [start, start + 4000],
                      "device": [start + 4500, None if k == 3 else start + 6000]})
    return {"instance_id": "gpu-host", "now_ms": now_ms, "window_s": 120.0, "synth_workers": ["synth-0", "synth-1"],
            "device_workers": ["cuda0/0", "cuda0/1", "cuda1/0"], "spans": spans}


def _shared_gpu_status(now_ms: int) -> dict[str, Any]:
    """`_gpu_status` with its second device a second logical device on GPU 0 (`gpus.devices = [0, 0]`):
    both report ordinal 0, told apart by their labels, each with its own workers."""
    status = _gpu_status(now_ms)
    status["devices"][0]["label"] = "cuda0"
    status["devices"][1].update(label="cuda0.1", ordinal=0)
    for w in status["gpu_workers"]:
        w["device"] = "cuda0.1" if w["worker_id"].startswith("cuda1") else f"cuda{w['gpu_ordinal']}"
        w["gpu_ordinal"] = 0
    return status


class _Crafted(ThreadingHTTPServer):
    daemon_threads = True
    status_answers = 10**9  #: /status answers this many times, then 503s (the daemon "goes away")
    status_of: Any = staticmethod(_gpu_status)  #: the status it serves


class _CraftedHandler(BaseHTTPRequestHandler):
    server: _Crafted

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        now_ms = round(time.time() * 1000)
        path = self.path.partition("?")[0]
        if path == "/status.html":
            body, ctype = render_status_page("cuzk daemon gpu-host", refresh_ms=1000).encode(), "text/html"
        elif path == "/status" and self.server.status_answers > 0:
            self.server.status_answers -= 1
            body, ctype = json.dumps(self.server.status_of(now_ms)).encode(), "application/json"
        elif path == "/timeline.json":
            body, ctype = json.dumps(_gpu_timeline(now_ms)).encode(), "application/json"
        else:
            body, ctype = b"gone\n", "text/plain"
            self.send_response(503)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        self.send_response(200)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def crafted() -> Iterator[_Crafted]:
    server = _Crafted(("127.0.0.1", 0), _CraftedHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def test_two_logical_devices_on_one_gpu_each_show_their_own_workers(crafted: _Crafted, tmp_path: Path) -> None:
    crafted.status_of = _shared_gpu_status
    url = f"http://127.0.0.1:{crafted.server_address[1]}/status.html"
    page = PageCells(load_page(url, tmp_path / "status-shared.png"))
    assert page.prefixed("device:") == ["cuda0", "cuda0.1", "cuda2", "cuda3"]
    assert page.rows["device:cuda0"]["state"]["text"] == "busy 1/2"  # not counting cuda0.1's worker
    assert page.rows["device:cuda0.1"]["state"]["text"] == "idle (1 worker)"
    assert "plan:cuda0" in page.rows and "plan:cuda0.1" not in page.rows


def test_operator_page_shows_memory_plans_key_copies_failures_and_waits(crafted: _Crafted, tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{crafted.server_address[1]}/status.html"
    page = PageCells(load_page(url, tmp_path / "status-gpu.png"))
    assert page.ids["conn"]["data-state"] == "live"

    busy, failed = page.rows["device:cuda0"], page.rows["device:cuda1"]
    assert busy["state"]["value"] == "busy" and busy["state"]["text"] == "busy 1/2"
    assert busy["current_job"]["text"] == "seal-7 p3 (porep-c2)"
    assert failed["state"]["value"] == "idle" and failed["restarts"]["text"] == "1"
    assert "device process exited (code -9)" in failed["last_failure"]["text"]
    assert busy["last_failure"]["text"] == "-"
    remote = page.rows["device:cuda2"]
    assert remote["state"]["value"] == "lost" and remote["name"]["text"] == "cuda 2 · node 10.0.0.7"
    assert remote["last_failure"]["text"] == "node 10.0.0.7 died"
    dead = page.rows["device:cuda3"]
    assert dead["state"]["value"] == "cannot restart"
    assert dead["last_failure"]["text"] == ("cannot restart: worker process cuzk-device-cuda3 did not start "
                                            "(exit code 1)")

    plan = page.rows["plan:cuda0"]
    assert plan["budget"]["value"] == str(39 << 30) and "39.0 GiB" in plan["budget"]["text"]
    assert plan["oom_retries"]["text"] == "OOM retries 1" and plan["peak_pool_bytes"]["value"] == str(31 << 30)
    assert plan["preemptions"]["text"] == "let through mid-phase 3, refused for memory 1"
    key = page.rows["plan:cuda0:0"]
    assert key["mode"]["text"] == "streaming" and key["domain"]["text"] == "2^27"
    assert key["resident_bytes"]["value"] == str(18 << 30) and key["streamed_bytes"]["text"] == "9.00 GiB"
    assert key["working_reserve"]["value"] == str(12 << 30)
    assert "plan:cuda1" not in page.rows  # no plan reported for it

    assert "no-keys" not in page.ids
    assert page.rows["key:cuda0:0"]["key"]["text"] == "porep-32g"
    assert "HOT" in page.rows["key:cuda0:0"]["details"]["text"]
    assert page.rows["key:cuda1:none"]["key"]["text"] == "no key copies"

    assert page.rows["queue:CRITICAL"]["oldest_queued_job"]["text"] == "win-1"
    normal = page.rows["queue:NORMAL"]
    assert normal["queued"]["text"] == "4" and normal["oldest_wait_secs"]["text"] == "95.0 s"
    assert page.rows["active:seal-7"]["partitions"]["text"] == "3 / 10"
    assert "CUDA error" in page.rows["job:seal-6"]["error"]["text"]
    assert page.rows["srs:window-32g"]["tier"]["value"] == "COLD"
    hot = page.rows["srs:porep-32g"]  # a GPU holds it: none of the file counted, its pinned copies are
    assert hot["mapped_bytes"]["value"] == "0" and hot["pinned_bytes"]["text"] == "25.0 GiB"


def test_operator_page_says_when_no_device_can_prove(crafted: _Crafted, tmp_path: Path) -> None:
    """Every device dead with its restart failed: a banner beside the connection state gives the
    daemon's reason (health is NOT_SERVING meanwhile); hidden while a device can prove."""
    why = "no device can prove: cuzk-device-cuda3 cannot restart: worker process cuzk-device-cuda3 did not start"
    url = f"http://127.0.0.1:{crafted.server_address[1]}/status.html"
    assert "none" in PageCells(load_page(url, tmp_path / "status-serving.png", height=600)).ids["unable"]["style"]
    crafted.status_of = lambda now_ms: {**_gpu_status(now_ms), "unable_to_prove": why}
    unable = PageCells(load_page(url, tmp_path / "status-unable.png", height=600)).ids["unable"]
    assert unable["text"] == f"not serving: {why}" and "inline-block" in unable["style"]


def test_operator_page_says_when_the_daemon_is_unreachable(tmp_path: Path) -> None:
    """Never reached: a page whose daemon is not listening."""
    dead = tmp_path / "dead.html"
    dead.write_text(render_status_page("cuzk daemon", status_source=f"http://127.0.0.1:{free_port()}/status",
                                       timeline_source=f"http://127.0.0.1:{free_port()}/timeline.json"))
    conn = PageCells(load_page(dead.as_uri(), tmp_path / "status-never.png", height=600)).ids["conn"]
    assert conn["data-state"] == "unreachable"
    assert conn["text"].startswith("Daemon unreachable: cannot read") and "No status received yet" in conn["text"]


def test_operator_page_keeps_the_last_status_when_the_daemon_goes_away(crafted: _Crafted, tmp_path: Path) -> None:
    """Gone after the first answer: the last status stays, dimmed, under the message."""
    crafted.status_answers = 1
    url = f"http://127.0.0.1:{crafted.server_address[1]}/status.html"
    dom = load_page(url, tmp_path / "status-gone.png", height=700)
    page = PageCells(dom)
    assert page.ids["conn"]["data-state"] == "unreachable"
    assert "HTTP 503" in page.ids["conn"]["text"] and "Showing the status of" in page.ids["conn"]["text"]
    assert "device:cuda0" in page.rows and re.search(r'<body [^>]*class="stale"', dom)
