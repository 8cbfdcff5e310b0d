"""Who a daemon instance is: a random instance id per start, plus what it runs and where it listens.

The instance id is what makes "ready" unforgeable: `cuzk daemon start` picks it, passes it to the
process it spawns, and returns only when an RPC on the daemon's address answers with that id, and
every log line carries it. The config fingerprint (`Config.fingerprint()`) says which settings the
instance runs; clients print both with every result so a measurement names what it measured.
"""

from __future__ import annotations

import re
import secrets
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from cuzk import __version__
from cuzk.daemon.pidfile import ProcessRef
from cuzk.errors import CuzkError

INSTANCE_ID_RE = re.compile(r"^[0-9a-f]{8,32}$")
RECORD_VERSION = 1
PHASES = ("starting", "ready", "stopping")


def new_instance_id() -> str:
    """12 random hex digits: unique enough per host, short enough for every log line."""
    return secrets.token_hex(6)


def check_instance_id(value: str) -> str:
    if not INSTANCE_ID_RE.match(value):
        raise CuzkError(f"--instance-id: {value!r} is not 8-32 lowercase hex digits")
    return value


def iso_time(unix: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(unix))


@dataclass
class Identity:
    """The instance record written to `daemon.json` (and reported by status commands and RPCs)."""

    instance_id: str
    config_fingerprint: str
    config_path: str | None
    pid: int
    start_ticks: int
    started_at: float
    state_dir: str
    log_path: str
    listen: list[str] = field(default_factory=list)
    status_listen: str = ""
    shutdown_grace: float = 0.0
    #: The `daemon run` options beyond --config (overrides), so `restart` can start the same way.
    run_args: list[str] = field(default_factory=list)
    phase: str = "starting"
    version: str = __version__

    @property
    def process(self) -> ProcessRef:
        return ProcessRef(self.pid, self.start_ticks)

    @property
    def started_at_iso(self) -> str:
        return iso_time(self.started_at)

    def record(self) -> dict[str, Any]:
        return {"record_version": RECORD_VERSION, **asdict(self), "started_at_iso": self.started_at_iso}

    @classmethod
    def from_record(cls, data: dict[str, Any] | None) -> Identity | None:
        """The identity in a record, or None for a missing, foreign or damaged one."""
        if not data or data.get("record_version") != RECORD_VERSION:
            return None
        try:
            return cls(
                instance_id=str(data["instance_id"]), config_fingerprint=str(data["config_fingerprint"]),
                config_path=data.get("config_path"), pid=int(data["pid"]), start_ticks=int(data["start_ticks"]),
                started_at=float(data["started_at"]), state_dir=str(data["state_dir"]),
                log_path=str(data["log_path"]), listen=[str(a) for a in data.get("listen", [])],
                status_listen=str(data.get("status_listen", "")),
                shutdown_grace=float(data.get("shutdown_grace", 0.0)),
                run_args=[str(a) for a in data.get("run_args", [])], phase=str(data.get("phase", "starting")),
                version=str(data.get("version", "?")),
            )
        except (KeyError, TypeError, ValueError):
            return None

    def describe(self) -> str:
        """One line naming the instance, for messages."""
        config = self.config_path or "defaults"
        return (f"pid {self.pid}, instance {self.instance_id}, config {config} (fingerprint "
                f"{self.config_fingerprint}), listening on {', '.join(self.listen) or '?'}, started "
                f"{self.started_at_iso}, {self.phase}")
