"""Who holds an address: a cuzk daemon (its pid, instance and config, from its own GetDaemonInfo
answer), or a program that is not cuzk (named by pid and command line when /proc shows it).

Used before anything else when a daemon starts, so a taken address fails within a second or two with
the holder named, instead of after minutes of engine startup or (the Rust daemon's way) after
logging "ready". Also used by `cuzk daemon stop` to confirm an address is free before returning.

A unix socket file is removed only after a connection attempt was refused: a refused connect means
no process has it open for listening. Any other outcome (accepted, timed out, backlog full) means
something may be serving there, and the file is left alone.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import socket
import stat
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cuzk.errors import CuzkError

UNIX_PREFIX = "unix://"
#: How long a holder gets to answer an identification RPC; the whole probe stays well under 2 s.
IDENTIFY_TIMEOUT_S = 0.8
_WILDCARDS = {"", "0.0.0.0", "::", "[::]", "*"}


class AddressInUseError(CuzkError):
    """The address is held; the message names the holder."""

    def __init__(self, message: str, holder: Holder) -> None:
        super().__init__(message)
        self.holder = holder


def unix_path(addr: str) -> Path | None:
    """The socket path of a "unix:///abs" or "unix:rel" address; None for TCP."""
    if addr.startswith(UNIX_PREFIX):
        return Path(addr[len(UNIX_PREFIX):])
    if addr.startswith("unix:"):
        return Path(addr[len("unix:"):])
    return None


def tcp_host_port(addr: str) -> tuple[str, int]:
    host, sep, port = addr.strip().rpartition(":")
    if not sep or not port.isdigit() or int(port) > 65535:
        raise CuzkError(f"{addr!r} is not host:port or unix:///path")
    return host.strip("[]"), int(port)


def connect_target(addr: str) -> str:
    """An address a client can dial: wildcards become loopback, unix addresses stay as they are."""
    if unix_path(addr) is not None:
        return addr
    host, port = tcp_host_port(addr)
    if host in _WILDCARDS:
        host = "::1" if ":" in addr.rpartition(":")[0] else "127.0.0.1"
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


@dataclass
class Holder:
    """What holds an address."""

    address: str
    #: GetDaemonInfo (or /status) of a cuzk daemon, None if it is not one.
    info: dict[str, Any] | None = None
    owner_pid: int | None = None

    @property
    def is_cuzk(self) -> bool:
        return self.info is not None

    def describe(self) -> str:
        if self.info is not None:
            i = self.info
            ready = "ready" if i.get("ready") else "not ready"
            return (f"a cuzk daemon: pid {i.get('pid')}, instance {i.get('instance_id')}, config "
                    f"{i.get('config_path') or 'defaults'} (fingerprint {i.get('config_fingerprint')}), state dir "
                    f"{i.get('state_dir') or '?'}, version {i.get('version')}, {ready}")
        who = (f"pid {self.owner_pid}: {process_summary(self.owner_pid)}" if self.owner_pid is not None
               else "its process is not visible to this user")
        return f"a program that is not a cuzk daemon ({who}; it does not answer cuzk's GetDaemonInfo RPC)"


def process_summary(pid: int, limit: int = 120) -> str:
    """The command line of `pid` for messages ("?" if it cannot be read)."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        raw = b""
    text = " ".join(part.decode(errors="replace") for part in raw.split(b"\0") if part)
    if not text:
        try:
            text = f"[{Path(f'/proc/{pid}/comm').read_text().strip()}]"
        except OSError:
            text = "?"
    return text if len(text) <= limit else text[:limit - 3] + "..."


# -- identification --------------------------------------------------------------------------------------
def daemon_info(addr: str, timeout: float = IDENTIFY_TIMEOUT_S, *, health: bool = False) -> dict[str, Any] | None:
    """The GetDaemonInfo answer of a cuzk daemon at `addr`, or None if nothing there answers it;
    with `health`, also its grpc.health.v1 answer as "serving" (None where it has no such service)."""
    import grpc

    from cuzk.server.client import CuzkClient

    try:
        with CuzkClient(connect_target(addr), timeout=timeout) as client:
            reply = client.info()
            serving: bool | None = None
            if health:
                with contextlib.suppress(grpc.RpcError):  # no health service: an older daemon
                    serving = client.serving()
    except grpc.RpcError:
        return None
    return {
        "serving": serving,
        "version": reply.version, "instance_id": reply.instance_id, "config_fingerprint": reply.config_fingerprint,
        "pid": reply.pid, "started_at_unix_ms": reply.started_at_unix_ms, "ready": reply.ready,
        "config_path": reply.config_path, "state_dir": reply.state_dir, "draining": reply.draining,
        "listen": list(reply.listen_addresses), "log_path": reply.log_path,
    }


def http_status_info(addr: str, timeout: float = IDENTIFY_TIMEOUT_S) -> dict[str, Any] | None:
    """The identity in a cuzk daemon's HTTP /status, or None if `addr` does not serve one."""
    try:
        with urllib.request.urlopen(f"http://{connect_target(addr)}/status", timeout=timeout) as r:
            data = json.loads(r.read())
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or "instance_id" not in data or "config_fingerprint" not in data:
        return None
    return data


def _socket_inode_owner(inode: int, budget_s: float = 0.5) -> int | None:
    """The pid with `socket:[inode]` among its open files (only processes this user may inspect)."""
    target = f"socket:[{inode}]"
    deadline = time.monotonic() + budget_s
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit() or time.monotonic() > deadline:
            continue
        try:
            for fd in os.scandir(f"/proc/{entry.name}/fd"):
                with contextlib.suppress(OSError):
                    if os.readlink(fd.path) == target:
                        return int(entry.name)
        except OSError:
            continue
    return None


def tcp_listener_owner(port: int) -> int | None:
    """The pid listening on TCP `port` (any local address), from /proc/net/tcp{,6}."""
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            parts = line.split()
            if len(parts) > 9 and parts[3] == "0A" and int(parts[1].rpartition(":")[2], 16) == port:
                owner = _socket_inode_owner(int(parts[9]))
                if owner is not None:
                    return owner
    return None


def unix_listener_owner(path: Path) -> int | None:
    try:
        lines = Path("/proc/net/unix").read_text().splitlines()[1:]
    except OSError:
        return None
    for line in lines:
        parts = line.split()
        if len(parts) >= 8 and parts[7] == str(path):
            owner = _socket_inode_owner(int(parts[6]))
            if owner is not None:
                return owner
    return None


def identify(addr: str, *, http: bool = False) -> Holder:
    """Who holds `addr` (a gRPC address, or with `http` an HTTP status address)."""
    info = http_status_info(addr) if http else daemon_info(addr)
    path = unix_path(addr)
    owner = unix_listener_owner(path) if path is not None else tcp_listener_owner(tcp_host_port(addr)[1])
    return Holder(addr, info, owner)


# -- checks ---------------------------------------------------------------------------------------------------
def tcp_bind_error(addr: str) -> OSError | None:
    """Try to bind `addr` the way gRPC does (SO_REUSEADDR); the error, or None if it is free."""
    host, port = tcp_host_port(addr)
    if port == 0:
        return None
    try:
        infos = socket.getaddrinfo(None if host in ("", "*") else host, port, type=socket.SOCK_STREAM,
                                   flags=socket.AI_PASSIVE)
    except socket.gaierror as err:
        return OSError(errno.EADDRNOTAVAIL, f"cannot resolve {host!r}: {err.strerror}")
    for family, kind, proto, _, sockaddr in infos:
        with socket.socket(family, kind, proto) as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind(sockaddr)
            except OSError as err:
                return err
    return None


def unix_socket_state(path: Path) -> str:
    """"absent", "stale" (a socket file nobody listens on), "live", or "not-socket"."""
    try:
        mode = path.lstat().st_mode
    except FileNotFoundError:
        return "absent"
    if not stat.S_ISSOCK(mode):
        return "not-socket"
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.settimeout(1.0)
        probe.connect(str(path))
    except (ConnectionRefusedError, FileNotFoundError):
        return "stale"
    except OSError:
        return "live"  # timed out or backlog full: someone listens there
    finally:
        probe.close()
    return "live"


def remove_stale_unix_socket(path: Path) -> bool:
    """Remove `path` only if probing shows a socket file nobody listens on; True if it was removed."""
    if unix_socket_state(path) != "stale":
        return False
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
    return True


def check_listen_address(addr: str, *, what: str = "daemon.listen") -> str | None:
    """Raise AddressInUseError naming the holder if `addr` is taken; a note if a stale socket was removed."""
    path = unix_path(addr)
    if path is not None:
        state = unix_socket_state(path)
        if state == "not-socket":
            raise CuzkError(f"{what}: unix://{path} exists and is not a socket; refusing to replace it")
        if state == "live":
            holder = identify(addr)
            raise AddressInUseError(f"{what}: another process is already listening on unix://{path}: "
                                    f"{holder.describe()}", holder)
        if state == "stale" and remove_stale_unix_socket(path):
            return f"removed stale socket file {path} (a connection to it was refused: nobody listens on it)"
        return None
    err = tcp_bind_error(addr)
    if err is None:
        return None
    if err.errno == errno.EADDRINUSE:
        holder = identify(addr, http=what == "daemon.status_listen")
        raise AddressInUseError(f"{what}: cannot listen on {addr}: address in use by {holder.describe()}", holder)
    raise CuzkError(f"{what}: cannot listen on {addr}: {err.strerror or err}")


def address_free(addr: str) -> bool:
    """True if a daemon could bind `addr` now (a unix path that is absent or stale counts as free)."""
    path = unix_path(addr)
    if path is not None:
        return unix_socket_state(path) in ("absent", "stale")
    return tcp_bind_error(addr) is None
