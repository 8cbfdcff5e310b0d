"""The access rules without a daemon: security settings, token files, unprotected network addresses,
and the interceptor's decisions for each kind of caller."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import grpc
import pytest

from cuzk.config import ConfigError, config_from_dict, loopback_if_no_host
from cuzk.errors import CuzkError
from cuzk.server.auth import AuthInterceptor, RefusedError, ServerSecurity, is_loopback_host, read_token_file

TOKEN = "t" * 24
ADMIN = "A" * 24


def secret(path: Path, text: str, mode: int = 0o600) -> Path:
    path.write_text(text + "\n")
    path.chmod(mode)
    return path


def security(tmp_path: Path, **daemon: Any) -> ServerSecurity:
    return ServerSecurity.from_config(config_from_dict({"daemon": daemon}, source=str(tmp_path / "cuzk.toml")))


def test_defaults_are_owner_only_and_local() -> None:
    config = config_from_dict({})
    assert all(a.startswith("unix://") for a in config.daemon.listen)
    assert config.daemon.unix_socket_mode == "0600" and config.daemon.status_listen == ""
    assert config.daemon.max_queued_jobs > 0 and not config.daemon.allow_insecure_remote
    # a missing host means loopback, for gRPC and for HTTP /status alike
    parsed = config_from_dict({"daemon": {"listen": [":9820"], "status_listen": ":9821"}})
    assert parsed.daemon.listen == ["127.0.0.1:9820"] and parsed.daemon.status_listen == "127.0.0.1:9821"
    assert loopback_if_no_host("unix:///x.sock") == "unix:///x.sock" and loopback_if_no_host("") == ""


@pytest.mark.parametrize(("mode", "message"), [("0666", "every local user"), ("77", "not an octal mode"),
                                               ("rw", "not an octal mode")])
def test_socket_modes_that_are_refused(mode: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        config_from_dict({"daemon": {"unix_socket_mode": mode}})


def test_token_files(tmp_path: Path) -> None:
    assert read_token_file(secret(tmp_path / "ok", TOKEN), "t") == TOKEN.encode()
    for path, message in ((secret(tmp_path / "world", TOKEN, 0o644), "readable by every user"),
                          (secret(tmp_path / "short", "abc"), "at least 16"),
                          (secret(tmp_path / "empty", ""), "is empty"),
                          (secret(tmp_path / "spaces", "two words that are long"), "printable ASCII"),
                          (tmp_path / "missing", "cannot read")):
        with pytest.raises(ConfigError, match=message):
            read_token_file(path, "daemon.auth_token_file")


def test_relative_token_paths_are_relative_to_the_config_file(tmp_path: Path) -> None:
    secret(tmp_path / "token", TOKEN)
    assert security(tmp_path, auth_token_file="token").token == TOKEN.encode()


def test_inconsistent_security_settings(tmp_path: Path) -> None:
    secret(tmp_path / "token", TOKEN)
    for settings, message in (({"auth_token_file": "token", "admin_token_file": "token"}, "same token"),
                              ({"tls_cert_file": "c.pem"}, "go together"),
                              ({"tls_client_ca_file": "ca.pem"}, "mutual TLS is TLS first"),
                              ({"admin_client_names": ["op"]}, "needs mutual TLS"),
                              ({"tls_cert_file": "token", "tls_key_file": "token"}, "not a PEM file")):
        with pytest.raises(ConfigError, match=message):
            security(tmp_path, **settings)


def test_network_addresses_need_authentication(tmp_path: Path) -> None:
    open_sec = security(tmp_path)
    for addr in ("127.0.0.1:9820", "[::1]:9820", "localhost:9820"):
        assert open_sec.check_tcp_address(addr) is None
    for addr in ("0.0.0.0:9820", "[::]:9820", "10.1.2.3:9820", "prover.example:9820"):
        with pytest.raises(CuzkError, match="can be reached from other hosts"):
            open_sec.check_tcp_address(addr)
    assert "accepts anyone" in security(tmp_path, allow_insecure_remote=True).check_tcp_address("0.0.0.0:1")
    secret(tmp_path / "token", TOKEN)
    assert "clear text" in security(tmp_path, auth_token_file="token").check_tcp_address("0.0.0.0:1")
    assert is_loopback_host("127.8.9.10") and not is_loopback_host("")


def test_the_daemon_refuses_to_start_on_an_unprotected_network_address(tmp_path: Path) -> None:
    config = tmp_path / "cuzk.toml"
    config.write_text(f'[daemon]\nlisten = ["0.0.0.0:0"]\nstate_dir = "{tmp_path / "state"}"\njournal = false\n'
                      f'[srs]\nparam_cache = "{tmp_path}"\n[memory]\ntotal_budget = "1GiB"\n')
    run = subprocess.run([sys.executable, "-m", "cuzk.cli.main", "daemon", "run", "--config", str(config)],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 2, run.stderr
    assert "0.0.0.0:0 can be reached from other hosts" in run.stderr and "allow_insecure_remote" in run.stderr


class FakeContext:
    def __init__(self, peer: str, cert: str | None = None) -> None:
        self._peer, self._cert = peer, cert

    def peer(self) -> str:
        return self._peer

    def auth_context(self) -> dict[str, list[bytes]]:
        return {"x509_common_name": [self._cert.encode()]} if self._cert else {}


def decide(sec: ServerSecurity, method: str, token: str | None, peer: str = "ipv4:10.0.0.1:5555",
           cert: str | None = None) -> tuple[str, bool] | grpc.StatusCode:
    try:
        who = AuthInterceptor(sec).identify(f"/cuzk.v1.ProvingEngine/{method}",
                                            token.encode() if token else None, FakeContext(peer, cert))
    except RefusedError as refused:
        return refused.code
    return who.principal, who.admin


def test_interceptor_decisions(tmp_path: Path) -> None:
    sec = ServerSecurity(token=TOKEN.encode(), admin_token=ADMIN.encode())
    denied, unauthenticated = grpc.StatusCode.PERMISSION_DENIED, grpc.StatusCode.UNAUTHENTICATED
    assert decide(sec, "SubmitProof", None) == unauthenticated
    assert decide(sec, "SubmitProof", "x" * 24) == unauthenticated
    assert decide(sec, "SubmitProof", TOKEN) == ("token", False)
    assert decide(sec, "PreloadSRS", TOKEN) == denied
    assert decide(sec, "PreloadSRS", ADMIN) == ("admin-token", True)
    assert decide(sec, "GetDaemonInfo", None) == ("anonymous", False)  # open, but not authenticated
    assert decide(sec, "EvictSRS", None, peer="unix:/run/cuzk.sock") == ("unix", True)
    strict_unix = ServerSecurity(token=TOKEN.encode(), auth_unix=True)
    assert decide(strict_unix, "GetStatus", None, peer="unix:") == unauthenticated
    assert decide(strict_unix, "GetStatus", TOKEN, peer="unix:") == ("token", True)
    mtls = ServerSecurity(mutual_tls=True, admin_names=frozenset({"operator"}))
    assert decide(mtls, "GetStatus", None, cert="curio") == ("tls:curio", False)
    assert decide(mtls, "EvictSRS", None, cert="curio") == denied
    assert decide(mtls, "EvictSRS", None, cert="operator") == ("tls:operator", True)
    assert decide(ServerSecurity(), "PreloadSRS", None, peer="ipv4:127.0.0.1:1") == ("anonymous", True)
