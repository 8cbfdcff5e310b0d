"""Which daemon produced a result: instance id and config fingerprint, for clients that report numbers.

The Rust daemon's operators benchmarked a daemon that had silently kept running with an older
configuration. A client here asks the daemon who it is (GetDaemonInfo) before it submits, refuses to
run when `--expect-config FINGERPRINT` does not match, prints the instance and fingerprint with
every result, and asks again afterwards to notice a restart in between. `cuzk prove` uses this;
`cuzk bench` is meant to use the same three calls (`add_expect_config_argument`, `identify_daemon`
+ `require_config` before, `changed_during` after).
"""

from __future__ import annotations

import argparse
from dataclasses import asdict, dataclass
from typing import Any

from cuzk.errors import CuzkError


class ConfigMismatchError(CuzkError):
    """The daemon runs another configuration than the one the caller expects."""


@dataclass(frozen=True)
class DaemonRef:
    """A daemon as a client sees it; `known` is False for a daemon without GetDaemonInfo (the Rust one)."""

    addr: str
    known: bool
    instance_id: str = ""
    config_fingerprint: str = ""
    config_path: str = ""
    version: str = ""
    pid: int = 0

    def label(self) -> str:
        if not self.known:
            return "a daemon that does not report its identity (no GetDaemonInfo RPC)"
        return f"instance {self.instance_id}, config {self.config_fingerprint} (cuzk {self.version}, pid {self.pid})"

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def add_expect_config_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--expect-config", metavar="FINGERPRINT",
                        help="refuse to run unless the daemon's config fingerprint is this (see `cuzk daemon "
                             "status` or `cuzk config show`)")


def identify_daemon(client: Any) -> DaemonRef:
    """Ask a connected `CuzkClient` who it is; an RPC failure other than UNIMPLEMENTED is an error."""
    import grpc

    try:
        info = client.info()
    except grpc.RpcError as err:
        if err.code() == grpc.StatusCode.UNIMPLEMENTED:
            return DaemonRef(client.addr, known=False)
        name = err.code().name if err.code() is not None else "UNKNOWN"
        raise CuzkError(f"{client.addr}: cannot identify the daemon: {name}: {err.details()}") from None
    return DaemonRef(client.addr, True, info.instance_id, info.config_fingerprint, info.config_path, info.version,
                     info.pid)


def require_config(ref: DaemonRef, expected: str | None) -> None:
    """Raise ConfigMismatchError unless `expected` is None or the daemon's fingerprint."""
    if not expected:
        return
    if not ref.known:
        raise ConfigMismatchError(f"--expect-config {expected}: {ref.addr} is {ref.label()}, so its configuration "
                                  "cannot be checked; refusing to run")
    if ref.config_fingerprint != expected.strip().lower():
        raise ConfigMismatchError(
            f"--expect-config {expected}: the daemon at {ref.addr} runs config fingerprint {ref.config_fingerprint} "
            f"(instance {ref.instance_id}, config {ref.config_path or 'defaults'}); refusing to run against another "
            "configuration")


def changed_during(before: DaemonRef, after: DaemonRef | None) -> str | None:
    """A warning if the daemon answering now is not the one asked before the run (it restarted)."""
    if after is None or not before.known:
        return None
    if after.instance_id != before.instance_id:
        same = "the same" if after.config_fingerprint == before.config_fingerprint else "another"
        return (f"the daemon restarted during this run: instance {before.instance_id} -> {after.instance_id}, now "
                f"with {same} configuration ({after.config_fingerprint})")
    return None
