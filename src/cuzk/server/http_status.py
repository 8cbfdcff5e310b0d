"""HTTP endpoint (`daemon.status_listen`): GET /status (JSON), /status.html (the operator's page),
/timeline and /timeline.json (the live timeline), /metrics (Prometheus), /healthz.

/status is the engine's status dict: pipelines with their partitions and states, workers, devices,
memory, SRS allocations, counters. /metrics is the same text as the GetMetrics RPC, so Prometheus
can scrape the daemon directly. /healthz answers
200 "ok" while accepting jobs and some device can prove, else 503 with the reason (draining, or why
no device can prove). /status.html is the operator's page
(cuzk.server.status_page): it polls /status and /timeline.json and shows devices, queues, recent
jobs, SRS tiers and the timeline. /timeline is the timeline alone: a page that polls /timeline.json
(every partition's synthesis and device spans of the last `?window=` seconds, default 120, per
worker) and draws them as a Gantt chart with device idle gaps marked; both pages pass their
`?window=` on. Anything else is 404; only GET is served.
"""

from __future__ import annotations

import json
import logging
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs

from prometheus_client import CONTENT_TYPE_LATEST

from cuzk.engine import status as status_views
from cuzk.engine.engine import Engine
from cuzk.errors import CuzkError
from cuzk.server.status_page import render_status_page
from cuzk.server.timeline_page import render_page

log = logging.getLogger("cuzk.server.http")


def parse_host_port(addr: str, *, what: str) -> tuple[str, int]:
    host, sep, port = addr.rpartition(":")
    if not sep or not port.isdigit() or int(port) > 65535:
        raise CuzkError(f"{what}: {addr!r} is not host:port")
    return host.strip("[]") or "0.0.0.0", int(port)


class _Handler(BaseHTTPRequestHandler):
    server: StatusServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("%s %s", self.address_string(), format % args)

    def _send(self, code: int, body: bytes, content_type: str) -> None:
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        path, _, query = self.path.partition("?")
        engine = self.server.engine
        try:
            if path == "/status":
                body = json.dumps(engine.status(), indent=1).encode()
                self._send(200, body, "application/json")
            elif path == "/timeline.json":
                window = _window_seconds(query)
                if window is None:
                    self._send(400, b"window: a number of seconds between 1 and 86400\n", "text/plain")
                    return
                self._send(200, json.dumps(status_views.timeline(engine, window)).encode(), "application/json")
            elif path == "/status.html":
                page = render_status_page(f"cuzk daemon {engine.instance_id}",
                                          timeline_source="/timeline.json" + (f"?{query}" if query else ""))
                self._send(200, page.encode(), "text/html; charset=utf-8")
            elif path == "/timeline":
                page = render_page(f"cuzk daemon {engine.instance_id}: partitions per worker",
                                   source="/timeline.json" + (f"?{query}" if query else ""))
                self._send(200, page.encode(), "text/html; charset=utf-8")
            elif path == "/metrics":
                self._send(200, engine.metrics_text().encode(), CONTENT_TYPE_LATEST)
            elif path == "/healthz":
                why = "draining" if not engine.accepting else engine.unable_to_prove()
                self._send(200 if why is None else 503, f"{why or 'ok'}\n".encode(), "text/plain")
            else:
                self._send(404, b"not found: try /status, /status.html, /timeline, /timeline.json, /metrics "
                                b"or /healthz\n", "text/plain")
        except Exception:
            log.exception("HTTP %s failed", path)
            self._send(500, b"internal error\n", "text/plain")


def _window_seconds(query: str) -> float | None:
    """`window=S` from a query string (default the status module's window); None when invalid."""
    values = parse_qs(query).get("window")
    if not values:
        return status_views.TIMELINE_WINDOW_S
    try:
        window = float(values[-1])
    except ValueError:
        return None
    return window if 1 <= window <= 86400 else None


class StatusServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, addr: str, engine: Engine) -> None:
        self.engine = engine
        host, port = parse_host_port(addr, what="daemon.status_listen")
        try:
            super().__init__((host, port), _Handler)
        except OSError as err:
            raise CuzkError(f"daemon.status_listen: cannot listen on {addr}: {err.strerror}") from None
        self._thread: threading.Thread | None = None

    @property
    def serving(self) -> bool:
        return self._thread is not None

    @property
    def address(self) -> str:
        host, port = self.server_address[:2]
        return f"{host}:{port}"

    def start(self) -> None:
        self._thread = threading.Thread(target=self.serve_forever, name="cuzk-http", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self.shutdown()
        self.server_close()
