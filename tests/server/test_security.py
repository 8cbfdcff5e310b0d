"""Who may talk to a live daemon: bearer tokens, mutual TLS, owner-only unix sockets, management rights."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import grpc
import pytest
from server.conftest import LiveDaemon, start_daemon
from server.pki import make_ca, openssl_missing

from cuzk.server._gen import proving_pb2 as pb
from cuzk.server.client import ClientAuth, CuzkClient, build_submit, payload_for_test_circuit

USER_TOKEN = "u" * 20 + "-user-token"
ADMIN_TOKEN = "a" * 20 + "-admin-token"


def secret_file(path: Path, text: str) -> Path:
    path.write_text(text + "\n")
    path.chmod(0o600)
    return path


def mimc_request(rid: str, **payload: object) -> pb.SubmitProofRequest:
    return build_submit("test", request_id=rid, vanilla_proof=payload_for_test_circuit("mimc-3", **payload))


def code_of(call: object) -> tuple[grpc.StatusCode, str]:
    with pytest.raises(grpc.RpcError) as info:
        call()  # type: ignore[operator]
    return info.value.code(), info.value.details() or ""


# -- bearer tokens ---------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def token_daemon(tmp_path_factory: pytest.TempPathFactory, server_params: Path) -> LiveDaemon:
    root = tmp_path_factory.mktemp("token-daemon")
    tokens = root / "secrets"
    tokens.mkdir()
    d = start_daemon(root / "d", server_params, daemon={
        "auth_token_file": str(secret_file(tokens / "token", USER_TOKEN)),
        "admin_token_file": str(secret_file(tokens / "admin", ADMIN_TOKEN)),
    })
    d.secrets = tokens  # type: ignore[attr-defined]
    yield d
    assert d.stop() == 0, d.log()


def tcp(d: LiveDaemon, token_file: Path | None = None, **tls: str) -> CuzkClient:
    return CuzkClient(d.tcp_addr, timeout=20, auth=ClientAuth(token_file=str(token_file) if token_file else None,
                                                              **tls))


def test_tcp_without_or_with_a_wrong_token_is_refused_and_logged(token_daemon: LiveDaemon, tmp_path: Path) -> None:
    wrong = secret_file(tmp_path / "wrong", "w" * 32)
    for token_file, reason in ((None, "needs a bearer token"), (wrong, "the bearer token is wrong")):
        with tcp(token_daemon, token_file) as c:
            for call in (c.status, c.metrics, lambda c=c: c.submit(mimc_request("nope")),
                         lambda c=c: c.cancel("any"), lambda c=c: c.preload("mimc-3")):
                code, details = code_of(call)
                assert code == grpc.StatusCode.UNAUTHENTICATED and reason in details, (code, details)
            # identification and health stay open, without paths or addresses
            info = c.info()
            assert info.instance_id and info.ready and not info.config_path and not info.listen_addresses
            assert c.serving()
    log = token_daemon.log()
    assert "refused /cuzk.v1.ProvingEngine/SubmitProof from ipv4:127.0.0.1" in log
    assert "UNAUTHENTICATED" in log and USER_TOKEN not in log


def test_the_token_lets_a_client_prove(token_daemon: LiveDaemon) -> None:
    with tcp(token_daemon, token_daemon.secrets / "token") as c:  # type: ignore[attr-defined]
        assert c.info().config_path == str(token_daemon.config_path)
        result = c.prove(mimc_request("with-token", seed=5), timeout=120)
        assert result.status == pb.AwaitProofResponse.COMPLETED, result.error_message
        assert len(result.proof) == 192


def test_management_needs_the_admin_token(token_daemon: LiveDaemon) -> None:
    secrets = token_daemon.secrets  # type: ignore[attr-defined]
    with tcp(token_daemon, secrets / "token") as user, tcp(token_daemon, secrets / "admin") as admin:
        for call in (lambda: user.preload("mimc-3"), lambda: user.evict("mimc-3")):
            code, details = code_of(call)
            assert code == grpc.StatusCode.PERMISSION_DENIED and "management call" in details
        assert admin.preload("mimc-3") is not None
        assert admin.evict("mimc-3").was_loaded
        # a user may cancel its own jobs, not another client's; the admin may cancel any
        mine = user.submit(mimc_request("mine", synth_delay_ms=3000, partitions=2)).job_id
        theirs = admin.submit(mimc_request("theirs", synth_delay_ms=3000, partitions=2)).job_id
        code, details = code_of(lambda: user.cancel(theirs))
        assert code == grpc.StatusCode.PERMISSION_DENIED and "not submitted by this client" in details
        user.cancel(mine)
        admin.cancel(theirs)
        for job in (mine, theirs):
            assert user.await_proof(job, 60_000).status == pb.AwaitProofResponse.CANCELLED


def test_the_unix_socket_is_owner_only_and_trusted(token_daemon: LiveDaemon) -> None:
    path = Path(token_daemon.unix_addr.removeprefix("unix://"))
    mode = path.stat().st_mode
    assert stat.S_ISSOCK(mode) and stat.S_IMODE(mode) == 0o600 and path.stat().st_uid == os.getuid()
    with CuzkClient(token_daemon.unix_addr, timeout=20, auth=ClientAuth()) as c:
        assert c.status().instance_id
        assert c.preload("mimc-3") is not None  # the socket's owner is the operator


def test_cli_takes_the_token_from_a_file_only(token_daemon: LiveDaemon) -> None:
    cli = [sys.executable, "-m", "cuzk.cli.main", "status", "--addr", token_daemon.tcp_addr, "--json"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("CUZK_")}
    refused = subprocess.run(cli, capture_output=True, text=True, env=env, timeout=120)
    assert refused.returncode == 2 and "UNAUTHENTICATED" in refused.stderr, refused.stderr
    token_file = str(token_daemon.secrets / "token")  # type: ignore[attr-defined]
    by_option = subprocess.run([*cli, "--token-file", token_file], capture_output=True, text=True, env=env,
                               timeout=120)
    assert by_option.returncode == 0 and '"instance_id"' in by_option.stdout, by_option.stderr
    by_env = subprocess.run(cli, capture_output=True, text=True, env={**env, "CUZK_TOKEN_FILE": token_file},
                            timeout=120)
    assert by_env.returncode == 0, by_env.stderr
    helped = subprocess.run([*cli, "--help"], capture_output=True, text=True, env=env, timeout=120)
    assert "--token-file" in helped.stdout and "--token " not in helped.stdout


# -- mutual TLS ------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def tls_daemon(tmp_path_factory: pytest.TempPathFactory, server_params: Path) -> LiveDaemon:
    missing = openssl_missing()
    if missing:
        pytest.skip(missing)
    root = tmp_path_factory.mktemp("tls-daemon")
    ca = make_ca(root / "pki", "cuzk-test-ca")
    server = ca.issue("localhost", server=True)
    other = make_ca(root / "other-pki", "someone-elses-ca")
    d = start_daemon(root / "d", server_params, daemon={
        "tls_cert_file": str(server.cert), "tls_key_file": str(server.key), "tls_client_ca_file": str(ca.cert),
        "admin_client_names": ["operator"],
    })
    d.pki = {"ca": ca, "curio": ca.issue("curio"), "operator": ca.issue("operator"),  # type: ignore[attr-defined]
             "stranger": other.issue("curio")}
    yield d
    assert d.stop() == 0, d.log()


def mtls(d: LiveDaemon, who: str | None, *, server_ca: bool = True) -> CuzkClient:
    pki = d.pki  # type: ignore[attr-defined]
    tls = {"tls_ca": str(pki["ca"].cert) if server_ca else None, "tls_server_name": "localhost"}
    if who is not None:
        tls.update(tls_cert=str(pki[who].cert), tls_key=str(pki[who].key))
    return CuzkClient(d.tcp_addr, timeout=20, auth=ClientAuth(**tls))


def test_a_certificate_from_the_ca_works(tls_daemon: LiveDaemon) -> None:
    with mtls(tls_daemon, "curio") as c:
        assert c.status().instance_id
        result = c.prove(mimc_request("over-mtls", seed=9), timeout=120)
        assert result.status == pb.AwaitProofResponse.COMPLETED, result.error_message


@pytest.mark.parametrize("who", ["stranger", None])
def test_a_certificate_from_another_ca_or_none_is_refused(tls_daemon: LiveDaemon, who: str | None) -> None:
    with mtls(tls_daemon, who) as c:
        code, _ = code_of(c.status)
        assert code == grpc.StatusCode.UNAVAILABLE  # the TLS handshake fails: no call reaches the daemon
    with CuzkClient(tls_daemon.tcp_addr, timeout=20, auth=ClientAuth()) as plain:
        code, _ = code_of(plain.status)
        assert code == grpc.StatusCode.UNAVAILABLE
    with tls_daemon.client() as local:
        assert local.serving()


def test_management_needs_an_admin_certificate(tls_daemon: LiveDaemon) -> None:
    with mtls(tls_daemon, "curio") as curio, mtls(tls_daemon, "operator") as operator:
        code, details = code_of(lambda: curio.preload("mimc-3"))
        assert code == grpc.StatusCode.PERMISSION_DENIED and "admin_client_names" in details
        assert operator.preload("mimc-3") is not None
        job = operator.submit(mimc_request("operators", synth_delay_ms=3000, partitions=2)).job_id
        code, _ = code_of(lambda: curio.cancel(job))
        assert code == grpc.StatusCode.PERMISSION_DENIED
        operator.cancel(job)
