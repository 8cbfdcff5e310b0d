"""Who may talk to the daemon: bearer tokens, mutual TLS, owner-only unix sockets, management rights.

The rules (docs/security.md):

- A unix socket is created with `daemon.unix_socket_mode` (default 0600, only the daemon's user);
  its callers are trusted as the operator unless `daemon.auth_unix` asks for the token there too.
- TCP callers must present `authorization: Bearer <token>` matching `daemon.auth_token_file` (or the
  admin token) when one is configured. With `daemon.tls_client_ca_file` the TLS handshake already
  refused every client without a certificate from that CA; the token, if configured, is required
  on top.
- Management calls (PreloadSRS, EvictSRS, cancelling a job another client submitted) need the admin
  token or a client certificate named in `daemon.admin_client_names`, once either is configured.
  There is no shutdown RPC: stopping takes a signal from the daemon's user.
- Health checks and GetDaemonInfo stay open, so probes and `cuzk daemon status` can tell a starting
  daemon from a stranger; an unauthenticated GetDaemonInfo answer leaves out paths and addresses.
- A TCP address other hosts can reach (not loopback) without a token or mutual TLS is refused at
  startup unless `daemon.allow_insecure_remote = true`.

Refusals are UNAUTHENTICATED (no or wrong credentials) or PERMISSION_DENIED (authenticated, but not
for a management call), and are logged (rate-limited) with the caller's address. A request that
arrives without valid credentials is never deserialized: its bytes are dropped unparsed.
"""

from __future__ import annotations

import contextvars
import hmac
import ipaddress
import logging
import os
import stat
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc

from cuzk.config import Config, ConfigError, resolve_config_path
from cuzk.errors import CuzkError

log = logging.getLogger("cuzk.server.auth")
SERVICE = "/cuzk.v1.ProvingEngine/"
#: Methods anyone who can connect may call (identification and health only).
OPEN_METHODS = frozenset({"/grpc.health.v1.Health/Check", "/grpc.health.v1.Health/Watch",
                          SERVICE + "GetDaemonInfo"})
#: Methods that change what the daemon holds for everyone.
MANAGEMENT_METHODS = frozenset({SERVICE + "PreloadSRS", SERVICE + "EvictSRS"})
AUTH_HEADER = "authorization"
MIN_TOKEN_CHARS = 16


def read_token_file(path: Path, what: str) -> bytes:
    """A token from a file the daemon's user owns: one line of printable ASCII, at least 16 characters.
    A file every local user may read is refused (the token would not be a secret)."""
    try:
        st = path.stat()
        raw = path.read_bytes()
    except OSError as err:
        raise ConfigError(f"{what}: cannot read {path}: {err.strerror}") from None
    if not stat.S_ISREG(st.st_mode):
        raise ConfigError(f"{what}: {path} is not a regular file")
    if st.st_mode & 0o004:
        raise ConfigError(f"{what}: {path} is readable by every user (mode {stat.S_IMODE(st.st_mode):04o}); "
                          f"chmod 600 {path}")
    token = raw.strip()
    if not token:
        raise ConfigError(f"{what}: {path} is empty")
    if any(b < 0x21 or b > 0x7E for b in token):
        raise ConfigError(f"{what}: {path} must hold one token of printable ASCII without spaces")
    if len(token) < MIN_TOKEN_CHARS:
        raise ConfigError(f"{what}: the token in {path} has {len(token)} characters; use at least "
                          f"{MIN_TOKEN_CHARS} (e.g. `openssl rand -hex 32 > {path}`)")
    return token


def _read_pem(config: Config, value: str, what: str) -> bytes:
    path = resolve_config_path(config, value)
    try:
        data = path.read_bytes()
    except OSError as err:
        raise ConfigError(f"{what}: cannot read {path}: {err.strerror}") from None
    if b"-----BEGIN " not in data:
        raise ConfigError(f"{what}: {path} is not a PEM file")
    return data


def is_loopback_host(host: str) -> bool:
    host = host.strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True)
class ServerSecurity:
    """The daemon's access rules, read from the config (token files and PEM files loaded once)."""

    token: bytes | None = None
    admin_token: bytes | None = None
    admin_names: frozenset[str] = frozenset()
    auth_unix: bool = False
    tls: grpc.ServerCredentials | None = None
    mutual_tls: bool = False
    socket_mode: int = 0o600
    allow_insecure_remote: bool = False

    @classmethod
    def from_config(cls, config: Config) -> ServerSecurity:
        d = config.daemon
        token = read_token_file(resolve_config_path(config, d.auth_token_file), "daemon.auth_token_file") \
            if d.auth_token_file else None
        admin = read_token_file(resolve_config_path(config, d.admin_token_file), "daemon.admin_token_file") \
            if d.admin_token_file else None
        if token is not None and admin is not None and hmac.compare_digest(token, admin):
            raise ConfigError("daemon.admin_token_file holds the same token as daemon.auth_token_file; management "
                              "would not be restricted")
        if bool(d.tls_cert_file) != bool(d.tls_key_file):
            raise ConfigError("daemon.tls_cert_file and daemon.tls_key_file go together: set both or neither")
        if d.tls_client_ca_file and not d.tls_cert_file:
            raise ConfigError("daemon.tls_client_ca_file needs daemon.tls_cert_file and daemon.tls_key_file "
                              "(mutual TLS is TLS first)")
        if d.admin_client_names and not d.tls_client_ca_file:
            raise ConfigError("daemon.admin_client_names names client certificates, so it needs mutual TLS "
                              "(daemon.tls_client_ca_file)")
        creds = None
        if d.tls_cert_file:
            cert = _read_pem(config, d.tls_cert_file, "daemon.tls_cert_file")
            key = _read_pem(config, d.tls_key_file, "daemon.tls_key_file")
            ca = _read_pem(config, d.tls_client_ca_file, "daemon.tls_client_ca_file") if d.tls_client_ca_file \
                else None
            creds = grpc.ssl_server_credentials([(key, cert)], root_certificates=ca, require_client_auth=ca is not None)
        return cls(token, admin, frozenset(d.admin_client_names), d.auth_unix, creds, bool(d.tls_client_ca_file),
                   int(d.unix_socket_mode, 8), d.allow_insecure_remote)

    @property
    def authenticates_tcp(self) -> bool:
        return self.token is not None or self.mutual_tls

    @property
    def management_restricted(self) -> bool:
        return self.admin_token is not None or bool(self.admin_names)

    def check_tcp_address(self, addr: str) -> str | None:
        """Refuse an address other hosts can reach without authentication; a warning to log, or None."""
        host = addr.rpartition(":")[0]
        if is_loopback_host(host):
            return None
        if not self.authenticates_tcp:
            if not self.allow_insecure_remote:
                raise CuzkError(f"daemon.listen: {addr} can be reached from other hosts, but neither a token "
                                "(daemon.auth_token_file) nor mutual TLS (daemon.tls_client_ca_file) is configured: "
                                "anyone on the network could submit work or load parameters. Configure one, listen "
                                "on 127.0.0.1 or a unix socket, or set daemon.allow_insecure_remote = true")
            return f"{addr} accepts anyone who can reach it (daemon.allow_insecure_remote = true)"
        if self.tls is None:
            return f"{addr}: the token travels in clear text over TCP; configure TLS (daemon.tls_cert_file)"
        return None

    def describe(self) -> str:
        parts = []
        parts.append("bearer token" if self.token is not None else "no token")
        if self.tls is not None:
            parts.append("mutual TLS" if self.mutual_tls else "TLS (server only)")
        else:
            parts.append("plaintext TCP")
        if self.management_restricted:
            parts.append("management restricted to " + " or ".join(
                (["the admin token"] if self.admin_token is not None else [])
                + ([f"certificates {', '.join(sorted(self.admin_names))}"] if self.admin_names else [])))
        parts.append(f"unix sockets mode {self.socket_mode:04o}" + (" + token" if self.auth_unix else ""))
        return ", ".join(parts)


@dataclass(frozen=True)
class CallIdentity:
    """Who made the current call: `principal` names the client for job ownership ("unix", "token",
    "admin-token", "tls:<common name>", "anonymous"); `admin` allows management calls."""

    principal: str
    admin: bool
    authenticated: bool = True


#: The identity of the call being served (set by the interceptor around each handler).
_CURRENT: contextvars.ContextVar[CallIdentity | None] = contextvars.ContextVar("cuzk_call_identity", default=None)
#: A servicer used without the interceptor (tests serving an engine directly) acts for the operator.
LOCAL = CallIdentity("local", True)


def current_identity() -> CallIdentity:
    return _CURRENT.get() or LOCAL


class _RefusalLog:
    """Log refused calls, at most `burst` lines per `window` seconds, then a count of the rest."""

    def __init__(self, burst: int = 20, window: float = 60.0) -> None:
        self.burst, self.window = burst, window
        self._lock = threading.Lock()
        self._start = time.monotonic()
        self._logged = 0
        self._suppressed = 0

    def __call__(self, message: str) -> None:
        with self._lock:
            now = time.monotonic()
            if now - self._start > self.window:
                if self._suppressed:
                    log.warning("%d more refused call(s) in the last %.0f s were not logged", self._suppressed,
                                now - self._start)
                self._start, self._logged, self._suppressed = now, 0, 0
            if self._logged >= self.burst:
                self._suppressed += 1
                return
            self._logged += 1
        log.warning("%s", message)


def _metadata_token(metadata: Any) -> bytes | None:
    for key, value in metadata or ():
        if key.lower() == AUTH_HEADER:
            text = value.decode("latin-1") if isinstance(value, bytes) else str(value)
            scheme, _, credential = text.strip().partition(" ")
            if scheme.lower() == "bearer" and credential.strip():
                return credential.strip().encode("latin-1", "replace")
    return None


def _cert_name(context: grpc.ServicerContext) -> str | None:
    names = (context.auth_context() or {}).get("x509_common_name") or []
    return names[0].decode(errors="replace") if names else None


class RefusedError(Exception):
    """A call the rules refuse: the status code and the reason the client gets."""

    def __init__(self, code: grpc.StatusCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class AuthInterceptor(grpc.ServerInterceptor):
    """Checks every call against a `ServerSecurity` before its handler runs (see the module docstring)."""

    def __init__(self, security: ServerSecurity) -> None:
        self.security = security
        self.refusals = _RefusalLog()
        self.refused = 0

    def _matches(self, presented: bytes | None, expected: bytes | None) -> bool:
        return presented is not None and expected is not None and hmac.compare_digest(presented, expected)

    def identify(self, method: str, presented: bytes | None, context: grpc.ServicerContext) -> CallIdentity:
        """The caller's identity, or `RefusedError` with the status and reason."""
        sec = self.security
        peer = context.peer() or ""
        is_admin_token = self._matches(presented, sec.admin_token)
        has_token = is_admin_token or self._matches(presented, sec.token)
        cert = _cert_name(context)
        if peer.startswith("unix:") and not sec.auth_unix:
            principal, authenticated = "unix", True
            admin = True  # whoever may open the owner-only socket is the operator
        else:
            wrong = presented is not None and not has_token and (sec.token is not None or sec.admin_token is not None)
            needs_token = sec.token is not None or (peer.startswith("unix:") and sec.auth_unix)
            authenticated = has_token or not (needs_token or wrong)
            if not authenticated and method not in OPEN_METHODS:
                raise RefusedError(grpc.StatusCode.UNAUTHENTICATED, "the bearer token is wrong" if wrong else
                                   "this daemon needs a bearer token (client: --token-file or $CUZK_TOKEN_FILE)")
            principal = f"tls:{cert}" if cert else ("admin-token" if is_admin_token else
                                                    "token" if has_token else "anonymous")
            admin = not sec.management_restricted or is_admin_token or (cert is not None and cert in sec.admin_names)
        if method in MANAGEMENT_METHODS and not admin:
            raise RefusedError(grpc.StatusCode.PERMISSION_DENIED,
                           f"{method.rpartition('/')[2]} is a management call: it needs the admin token or a client "
                           "certificate named in daemon.admin_client_names")
        return CallIdentity(principal, admin, authenticated)

    def intercept_service(self, continuation: Callable[[grpc.HandlerCallDetails], Any],
                          details: grpc.HandlerCallDetails) -> Any:
        handler = continuation(details)
        if handler is None:
            return None
        method = details.method
        presented = _metadata_token(details.invocation_metadata)

        def check(context: grpc.ServicerContext) -> CallIdentity:
            try:
                return self.identify(method, presented, context)
            except RefusedError as refused:
                self.refused += 1
                self.refusals(f"refused {method} from {context.peer()}: {refused.code.name}: {refused.message}")
                context.abort(refused.code, refused.message)
                raise  # abort raises; this keeps type checkers informed

        if handler.unary_unary is not None:
            return self._unary(handler, check, method)
        if handler.unary_stream is not None:
            inner_stream = handler.unary_stream

            def unary_stream(request: Any, context: grpc.ServicerContext) -> Iterator[Any]:
                token = _CURRENT.set(check(context))
                try:
                    yield from inner_stream(request, context)
                finally:
                    _CURRENT.reset(token)

            return grpc.unary_stream_rpc_method_handler(unary_stream, request_deserializer=handler.request_deserializer,
                                                        response_serializer=handler.response_serializer)
        return handler  # no streaming-request methods are served

    def _unary(self, handler: Any, check: Callable[[grpc.ServicerContext], CallIdentity], method: str) -> Any:
        inner = handler.unary_unary
        parse = handler.request_deserializer

        def unary_unary(raw: bytes, context: grpc.ServicerContext) -> Any:
            identity = check(context)
            try:
                request = parse(raw) if parse is not None else raw
            except Exception as err:  # protobuf DecodeError and friends: the bytes are not this message
                context.abort(grpc.StatusCode.INVALID_ARGUMENT,
                              f"the request is not a valid {method.rpartition('/')[2]} message: {err}")
            token = _CURRENT.set(identity)
            try:
                return inner(request, context)
            finally:
                _CURRENT.reset(token)

        # The bytes are parsed only after the caller was accepted, so an unauthenticated client cannot
        # make the daemon decode a large message, and a malformed one is INVALID_ARGUMENT (gRPC's own
        # deserializer would answer INTERNAL).
        return grpc.unary_unary_rpc_method_handler(unary_unary, request_deserializer=None,
                                                   response_serializer=handler.response_serializer)


def socket_umask(mode: int) -> int:
    """The umask that creates a socket file with at most `mode` (the bind happens under it)."""
    return 0o777 & ~mode


def restrict_socket(path: Path, mode: int) -> None:
    """Set the socket file's mode exactly (the umask only removes bits); refuse if that fails."""
    try:
        os.chmod(path, mode)
    except OSError as err:
        raise CuzkError(f"daemon.listen: cannot set mode {mode:04o} on {path}: {err.strerror}") from None
