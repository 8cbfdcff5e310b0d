"""HTTP endpoint (`daemon.status_listen`): GET /status (JSON), /metrics (Prometheus), /healthz.

/status is the engine's status dict: pipelines with their partitions and states, workers, devices,
memory, SRS allocations, counters. /metrics is the same text as the GetMetrics RPC, so Prometheus
can scrape the daemon directly (the Rust daemon offered metrics only over gRPC). /healthz answers
200 "ok" while accepting jobs and 503 while draining. Anything else is 404; only GET is served.
"""

from __future__ import annotations

import json
import logging
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST

from cuzk.engine.engine import Engine
from cuzk.errors import CuzkError

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
        path = self.path.split("?", 1)[0]
        engine = self.server.engine
        try:
            if path == "/status":
                body = json.dumps(engine.status(), indent=1).encode()
                self._send(200, body, "application/json")
            elif path == "/metrics":
                self._send(200, engine.metrics_text().encode(), CONTENT_TYPE_LATEST)
            elif path == "/healthz":
                ok = engine.accepting
                self._send(200 if ok else 503, b"ok\n" if ok else b"draining\n", "text/plain")
            else:
                self._send(404, b"not found: try /status, /metrics or /healthz\n", "text/plain")
        except Exception:
            log.exception("HTTP %s failed", path)
            self._send(500, b"internal error\n", "text/plain")


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
