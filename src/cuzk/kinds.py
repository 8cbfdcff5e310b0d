"""The proof kinds of the cuzk.v1 protocol: their wire numbers and names.

The numbers are the cuzk.v1 `ProofKind` enum's, so the gRPC layer converts by value; the labels are
the names in status output, logs and metrics, spelled as the Rust daemon spells them
(docs/compatibility.md §4); each kind's default priority is its provider's. The test kind is
`PROOF_KIND_UNSPECIFIED` (0), reachable only when test circuits are enabled. The engine carries a
kind on every job without knowing what it means; the circuit providers (`cuzk.providers`) say which
kinds they serve.
"""

from __future__ import annotations

from enum import IntEnum

__all__ = ["ProofKind"]


class ProofKind(IntEnum):
    TEST = 0  #: PROOF_KIND_UNSPECIFIED carrying a test-circuit description
    POREP_SEAL_COMMIT = 1
    SNAP_DEALS_UPDATE = 2
    WINDOW_POST_PARTITION = 3
    WINNING_POST = 4

    @property
    def label(self) -> str:
        """The name in status output and logs (spelled as the Rust daemon does: docs/compatibility.md §4)."""
        return _KIND_LABELS[self]

    @property
    def metric_label(self) -> str:
        return self.label.replace("-", "_")

    @property
    def proto_name(self) -> str:
        return "PROOF_KIND_UNSPECIFIED" if self is ProofKind.TEST else self.name


_KIND_LABELS = {
    ProofKind.TEST: "test-circuit",
    ProofKind.POREP_SEAL_COMMIT: "porep-c2",
    ProofKind.SNAP_DEALS_UPDATE: "snap-update",
    ProofKind.WINDOW_POST_PARTITION: "window-post",
    ProofKind.WINNING_POST: "winning-post",
}

