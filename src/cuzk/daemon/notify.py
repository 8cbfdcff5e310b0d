"""systemd readiness (`Type=notify`): datagrams to $NOTIFY_SOCKET, written directly (no libsystemd).

The protocol is newline-separated KEY=VALUE assignments in one datagram on a unix socket. A socket
name starting with "@" is in the abstract namespace (the "@" stands for a leading NUL byte). The
daemon sends READY=1 only once it is ready (listeners bound, engine accepting), STATUS= lines while
it runs and drains, and STOPPING=1 when a stop begins; systemd then knows the real state instead of
guessing from the process being alive.

The variable is taken out of the environment when read, so worker processes cannot send anything
in the daemon's name.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket

log = logging.getLogger("cuzk.daemon.notify")


def _address(name: str) -> str | bytes:
    if name.startswith("@"):
        return b"\0" + name[1:].encode()
    return name


class Notifier:
    """Sends to the socket named at construction; every method is a no-op without one."""

    def __init__(self, socket_name: str | None) -> None:
        self.socket_name = socket_name or None

    @classmethod
    def from_environment(cls) -> Notifier:
        """Read and unset $NOTIFY_SOCKET (only unix socket paths and abstract names are supported)."""
        name = os.environ.pop("NOTIFY_SOCKET", "")
        if name and not (name.startswith("/") or name.startswith("@")):
            log.warning("NOTIFY_SOCKET=%r is not a unix socket path or abstract name: not notifying systemd", name)
            name = ""
        return cls(name)

    @property
    def enabled(self) -> bool:
        return self.socket_name is not None

    def send(self, **fields: str | int) -> bool:
        """Send KEY=VALUE lines in one datagram; False (logged) if it could not be delivered."""
        if self.socket_name is None:
            return False
        message = "\n".join(f"{key}={value}" for key, value in fields.items()).encode()
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)
        try:
            sock.connect(_address(self.socket_name))
            sock.sendall(message)
        except OSError as err:
            log.warning("cannot notify systemd on %s: %s", self.socket_name, err)
            return False
        finally:
            with contextlib.suppress(OSError):
                sock.close()
        return True

    def ready(self, status: str) -> bool:
        return self.send(READY=1, STATUS=status, MAINPID=os.getpid())

    def status(self, status: str) -> bool:
        return self.send(STATUS=status)

    def stopping(self, status: str) -> bool:
        return self.send(STOPPING=1, STATUS=status)
