"""The daemon's own sections: [daemon] (its addresses, the gRPC server, job retention and the journal,
authentication and TLS: docs/security.md) and [logging]. The engine reads the job-retention keys of
[daemon] too (how long finished jobs stay answerable, the queue limit), which are there for
compatibility with the Rust daemon's files. Keys the Rust daemon never had are marked "cuzk-py"."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cuzk.config.values import MIB, ConfigError, expect

DEFAULT_CONFIG_PATH = Path("/data/zk/cuzk.toml")
DEFAULT_LISTEN = "unix:///run/curio/cuzk.sock"
LOG_LEVELS = ("trace", "debug", "info", "warn", "warning", "error")
LOG_FORMATS = ("text", "json")
DISCONNECT_POLICIES = ("finish", "cancel")
RESTART_POLICIES = ("requeue", "fail")


@dataclass
class DaemonConfig:
    #: gRPC addresses: "host:port" or "unix:///path"; a list listens on several (cuzk-py: list form).
    listen: list[str] = field(default_factory=lambda: [DEFAULT_LISTEN])
    #: HTTP address for GET /status (JSON) and /metrics (Prometheus); "" disables it.
    status_listen: str = ""
    #: cuzk-py: largest gRPC message either way (a request's payload may be 50-200 MB: docs/protocol.md §3).
    max_message_size: int = 256 * MIB
    #: cuzk-py: gRPC handler threads. Each waiting Prove/AwaitProof holds one, so this bounds how
    #: many clients can wait at once while status calls still get through.
    rpc_threads: int = 256
    #: cuzk-py: what happens to a job when every Prove call waiting for it disconnects.
    on_prove_disconnect: str = "finish"
    #: cuzk-py: how long finished jobs stay answerable (AwaitProof, request_id dedupe).
    result_retention: float = 3600.0
    #: cuzk-py: at most this many finished jobs are kept (oldest dropped first).
    max_retained_results: int = 10000
    #: cuzk-py: pid file, job journal and per-instance logs; "" = $XDG_STATE_HOME/cuzk (or
    #: ~/.local/state/cuzk). A relative path is relative to the config file's directory.
    state_dir: str = ""
    #: cuzk-py: on SIGTERM/SIGINT, how long queued and running jobs may still finish before the rest
    #: is cancelled (a second signal aborts at once).
    shutdown_grace: float = 60.0
    #: cuzk-py: jobs the journal shows in flight when a daemon died without finishing them: "requeue"
    #: runs them again (their inputs are kept in the journal until they finish), "fail" answers them
    #: FAILED with the reason (inputs are not kept).
    on_restart: str = "requeue"
    #: cuzk-py: keep the SQLite job journal in state_dir (accepted jobs and finished results survive a
    #: crash or restart); false keeps jobs in memory only.
    journal: bool = True
    #: cuzk-py: jobs waiting to start (queued or collecting into a batch) beyond which SubmitProof/Prove
    #: answer RESOURCE_EXHAUSTED, Curio's backpressure signal; 0 = no limit.
    max_queued_jobs: int = 256
    #: cuzk-py security (docs/security.md). Relative paths are relative to the config file's directory.
    #: A file holding the bearer token TCP clients must send ("authorization: Bearer <token>"); "" = none.
    auth_token_file: str = ""
    #: A file holding the token management calls (PreloadSRS, EvictSRS, cancelling another client's job)
    #: need; "" = management is open to every authenticated client unless admin_client_names is set.
    admin_token_file: str = ""
    #: Client certificate common names (mutual TLS) allowed management calls.
    admin_client_names: list[str] = field(default_factory=list)
    #: Server certificate chain and key (PEM) for TLS on every TCP address; "" = plaintext TCP.
    tls_cert_file: str = ""
    tls_key_file: str = ""
    #: CA bundle (PEM) client certificates must chain to: mutual TLS, a client without one is refused.
    tls_client_ca_file: str = ""
    #: Permissions of unix socket files (octal); the default lets only the daemon's user connect.
    unix_socket_mode: str = "0600"
    #: Also require the token on unix sockets (by default their file permissions are the access control).
    auth_unix: bool = False
    #: Accept a TCP address reachable from other hosts without a token or mutual TLS (refused otherwise).
    allow_insecure_remote: bool = False


@dataclass
class LoggingConfig:
    level: str = "info"
    #: "text" or "json" (one JSON object per line).
    format: str = "text"


def file_mode(value: Any, what: str) -> str:
    """An octal permission string such as "0600"; sockets others could write to are refused."""
    expect(str, value, what, "an octal mode string such as \"0600\"")
    if not re.fullmatch(r"0?[0-7]{3}", value.strip()):
        raise ConfigError(f"{what}: {value!r} is not an octal mode such as \"0600\" or \"0660\"")
    if int(value, 8) & 0o002:
        raise ConfigError(f"{what}: {value} would let every local user connect to the socket; at most \"0660\"")
    return value.strip().rjust(4, "0")


def loopback_if_no_host(addr: str) -> str:
    """":9820" means the loopback interface, never every interface: other hosts get in only when named
    ("0.0.0.0:9820"). Unix socket addresses and empty strings are returned as they are."""
    stripped = addr.strip()
    if stripped.startswith(":") and stripped[1:].isdigit():
        return f"127.0.0.1{stripped}"
    return addr
