"""The state directory (`daemon.state_dir`, `--state-dir`): everything one daemon instance leaves on disk.

Layout (one daemon per directory, enforced by the pid file's lock):

    daemon.pid          the running daemon's pid, exclusively flock()ed while it runs
    daemon.json         its instance record: pid and process start time, instance id, config path and
                        fingerprint, listen addresses, phase (starting, ready, stopping), log file
    last-exit.json      how the previous instance ended (exit code, jobs finished and cancelled)
    journal.sqlite3     the job journal (accepted jobs, finished results), WAL mode
    logs/<UTC start>-<instance id>.log
                        one log file per instance, so a line from an earlier run can never be read
                        as coming from the current one

The default is per user: $XDG_STATE_HOME/cuzk, else ~/.local/state/cuzk. A relative `state_dir` in a
config file is taken relative to that file, so `cuzk daemon stop --config X` finds the daemon that
`cuzk daemon start --config X` started, whatever the working directory.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cuzk.errors import CuzkError

if TYPE_CHECKING:
    from cuzk.config import Config

PID_FILE = "daemon.pid"
RECORD_FILE = "daemon.json"
LAST_EXIT_FILE = "last-exit.json"
JOURNAL_FILE = "journal.sqlite3"
LOGS_DIR = "logs"
#: Per-instance log files kept (the newest; a running instance's file is never removed).
KEEP_LOGS = 20
_LOG_NAME_RE = re.compile(r"^(\d{8}T\d{6}Z)-([0-9a-f]+)\.log$")


def default_state_dir() -> Path:
    """$XDG_STATE_HOME/cuzk (XDG base directory spec: only an absolute value counts), else ~/.local/state/cuzk."""
    base = os.environ.get("XDG_STATE_HOME", "")
    root = Path(base) if base and os.path.isabs(base) else Path.home() / ".local" / "state"
    return root / "cuzk"


def resolve_state_dir(config: Config, override: str | os.PathLike | None = None) -> Path:
    """The absolute state directory: `--state-dir`, else daemon.state_dir (relative to its file), else default."""
    if override:
        return Path(override).expanduser().absolute()
    value = config.daemon.state_dir
    if not value:
        return default_state_dir()
    path = Path(value).expanduser()
    if not path.is_absolute() and config.source:
        path = Path(config.source).absolute().parent / path
    return path.absolute()


@dataclass(frozen=True)
class LogFile:
    path: Path
    instance_id: str
    started: str  #: the UTC start stamp in the name, e.g. 20250101T120000Z


def write_json_atomic(path: Path, data: dict[str, Any]) -> None:
    """Write via a temporary file and rename, so a reader sees the old or the new content, never half."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(data, f, indent=1, sort_keys=True)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def read_json(path: Path) -> dict[str, Any] | None:
    """The JSON object in `path`, or None if it is missing or unreadable (a torn or foreign file)."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


@dataclass(frozen=True)
class StateDir:
    root: Path

    @property
    def pid_path(self) -> Path:
        return self.root / PID_FILE

    @property
    def record_path(self) -> Path:
        return self.root / RECORD_FILE

    @property
    def last_exit_path(self) -> Path:
        return self.root / LAST_EXIT_FILE

    @property
    def journal_path(self) -> Path:
        return self.root / JOURNAL_FILE

    @property
    def logs_dir(self) -> Path:
        return self.root / LOGS_DIR

    def ensure(self) -> None:
        """Create the directory (private to the user) and its logs/, or say why it cannot be used."""
        try:
            self.logs_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        except OSError as err:
            raise CuzkError(f"state directory {self.root}: cannot create it: {err.strerror}") from None
        if not os.access(self.root, os.W_OK | os.X_OK):
            raise CuzkError(f"state directory {self.root}: not writable by this user (set daemon.state_dir or "
                            "--state-dir)")

    # -- instance record ----------------------------------------------------------------------------------
    def read_record(self) -> dict[str, Any] | None:
        return read_json(self.record_path)

    def write_record(self, record: dict[str, Any]) -> None:
        write_json_atomic(self.record_path, record)

    def remove_record(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.record_path.unlink()

    def read_last_exit(self) -> dict[str, Any] | None:
        return read_json(self.last_exit_path)

    def write_last_exit(self, data: dict[str, Any]) -> None:
        write_json_atomic(self.last_exit_path, data)

    # -- logs ---------------------------------------------------------------------------------------------------
    def log_path(self, instance_id: str, started_at: float) -> Path:
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(started_at))
        return self.logs_dir / f"{stamp}-{instance_id}.log"

    def logs(self) -> list[LogFile]:
        """Per-instance log files, oldest first (files not named by a daemon are ignored)."""
        out = []
        try:
            names = sorted(os.listdir(self.logs_dir))
        except OSError:
            return []
        for name in names:
            m = _LOG_NAME_RE.match(name)
            if m:
                out.append(LogFile(self.logs_dir / name, m.group(2), m.group(1)))
        return out

    def log_for(self, instance_id: str) -> Path | None:
        matches = [f.path for f in self.logs() if f.instance_id == instance_id]
        return matches[-1] if matches else None

    def prune_logs(self, keep: int = KEEP_LOGS, protect: tuple[Path, ...] = ()) -> list[Path]:
        """Remove all but the newest `keep` instance logs (never one in `protect`); the removed paths."""
        files = self.logs()
        removed = []
        for f in files[:max(0, len(files) - keep)]:
            if f.path in protect:
                continue
            with contextlib.suppress(OSError):
                f.path.unlink()
                removed.append(f.path)
        return removed
