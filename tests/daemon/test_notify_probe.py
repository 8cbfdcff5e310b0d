"""systemd notification datagrams, address probing and unix socket handling (no daemon needed)."""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path

import pytest

from cuzk.daemon.notify import Notifier
from cuzk.errors import CuzkError
from cuzk.server.address import (
    AddressInUseError,
    address_free,
    check_listen_address,
    connect_target,
    remove_stale_unix_socket,
    unix_socket_state,
)


def _receiver(address: str | bytes) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(address)
    sock.settimeout(5)
    return sock


def test_notify_to_a_socket_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "notify.sock"
    with _receiver(str(path)) as rx:
        monkeypatch.setenv("NOTIFY_SOCKET", str(path))
        notifier = Notifier.from_environment()
        assert "NOTIFY_SOCKET" not in os.environ  # worker processes must not inherit it
        assert notifier.ready("ready: instance abc")
        fields = dict(line.split("=", 1) for line in rx.recv(4096).decode().splitlines())
        assert fields == {"READY": "1", "STATUS": "ready: instance abc", "MAINPID": str(os.getpid())}
        assert notifier.stopping("stopping")
        assert rx.recv(4096).decode().splitlines() == ["STOPPING=1", "STATUS=stopping"]


def test_notify_to_an_abstract_socket() -> None:
    name = f"cuzk-test-{os.getpid()}-{time.monotonic_ns()}"
    with _receiver(b"\0" + name.encode()) as rx:
        assert Notifier("@" + name).status("draining 2 jobs")
        assert rx.recv(4096) == b"STATUS=draining 2 jobs"


def test_notify_without_a_socket_is_a_no_op(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NOTIFY_SOCKET", raising=False)
    assert not Notifier.from_environment().enabled and not Notifier(None).ready("x")
    assert not Notifier(str(tmp_path / "nobody-listens")).ready("x")  # logged, not raised


def test_connect_targets() -> None:
    assert connect_target("0.0.0.0:9820") == "127.0.0.1:9820"
    assert connect_target("[::]:9820") == "[::1]:9820"
    assert connect_target("10.1.2.3:9820") == "10.1.2.3:9820"
    assert connect_target("unix:///run/cuzk.sock") == "unix:///run/cuzk.sock"


def test_a_tcp_port_held_by_another_program_is_named_as_not_cuzk() -> None:
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        addr = f"127.0.0.1:{held.getsockname()[1]}"
        assert not address_free(addr)
        t0 = time.monotonic()
        with pytest.raises(AddressInUseError) as info:
            check_listen_address(addr)
        assert time.monotonic() - t0 < 2.0
    message = str(info.value)
    assert f"cannot listen on {addr}" in message and "not a cuzk daemon" in message
    assert f"pid {os.getpid()}" in message  # this test process holds it
    assert not info.value.holder.is_cuzk
    assert address_free(addr)


def test_unix_socket_files_are_removed_only_after_a_refused_connection(tmp_path: Path) -> None:
    live_path = tmp_path / "live.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as live:
        live.bind(str(live_path))
        live.listen()
        assert unix_socket_state(live_path) == "live"
        assert not remove_stale_unix_socket(live_path) and live_path.exists()
        with pytest.raises(AddressInUseError, match=r"another process is already listening on unix://.*not a cuzk"):
            check_listen_address(f"unix://{live_path}")
    stale_path = tmp_path / "stale.sock"
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(str(stale_path))
    s.close()  # the file stays, nobody listens: what a killed daemon leaves
    assert unix_socket_state(stale_path) == "stale" and address_free(f"unix://{stale_path}")
    note = check_listen_address(f"unix://{stale_path}")
    assert note and "removed stale socket file" in note and not stale_path.exists()
    regular = tmp_path / "file.sock"
    regular.write_text("data")
    with pytest.raises(CuzkError, match="exists and is not a socket"):
        check_listen_address(f"unix://{regular}")
    assert regular.read_text() == "data" and unix_socket_state(tmp_path / "absent.sock") == "absent"
