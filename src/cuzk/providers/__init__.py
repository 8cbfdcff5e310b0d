"""Circuit plug-ins: the proof kinds a daemon serves, on the floor above the engine.

A provider (`cuzk.engine.providers.CircuitProvider`) turns requests of some kinds into partition
recipes; the engine knows them only through that interface. Here are the providers and where they
are put together:

- `cuzk.providers.fields`: a request's payload, the fields of the cuzk.v1 SubmitProofRequest both
  providers below read (`SubmitFields`: made from the message, hashed, encoded for the journal);
- `cuzk.providers.filecoin`: PoRep C2, WinningPoSt, WindowPoSt and SnapDeals (`payload`: what each
  request carries and its submit-time checks; `recipe`: one partition's synthesis; `provider`: the
  providers, their parameter files, shapes and plans);
- `cuzk.providers.debug`: cuzk's example circuits as proof jobs (`[debug] test_circuits`), and the
  synthesis warm-up every daemon runs.

`default_providers(config)` is what the daemon, the benchmarks and the tests hand to `Engine`;
`build_providers` makes a registry directly (a client-side check, a local benchmark).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cuzk.config import Config
    from cuzk.engine.providers import ProviderRegistry

__all__ = ["build_providers", "default_providers"]

#: The circuit ids the providers know, in words, for the error on an unknown id.
_FILECOIN_IDS = "porep-|winning-|wpost-|snap- followed by 2k, 8m, 512m, 32g or 64g"
_TEST_IDS = "a test circuit such as mimc-8 or bits-1"
_TEST_CIRCUITS_DISABLED = ("invalid proof_kind: 0 (PROOF_KIND_UNSPECIFIED); test circuits are disabled on this "
                           "daemon ([debug] test_circuits = false)")


def build_providers(param_cache: str, *, test_circuits: bool) -> ProviderRegistry:
    """The providers of a daemon: the four Filecoin kinds always (a job whose parameters are missing
    from `param_cache` fails naming the file), test circuits when enabled."""
    from cuzk.engine.jobs import ProofKind
    from cuzk.engine.providers import CircuitProvider, ProviderRegistry
    from cuzk.providers.debug import SYNTHESIS_WARM_UP, DebugCircuitProvider
    from cuzk.providers.filecoin.provider import filecoin_providers

    providers: list[CircuitProvider] = filecoin_providers(param_cache)
    if test_circuits:
        providers.append(DebugCircuitProvider(param_cache))
    return ProviderRegistry(providers, test_circuits_enabled=test_circuits,
                            refusals={} if test_circuits else {ProofKind.TEST: _TEST_CIRCUITS_DISABLED},
                            known_circuits=f"{_FILECOIN_IDS}, or {_TEST_IDS}" if test_circuits else _FILECOIN_IDS,
                            warm_up=[SYNTHESIS_WARM_UP])


def default_providers(config: Config) -> ProviderRegistry:
    """The providers of a daemon of `config` (`srs.param_cache`, `[debug] test_circuits`), for
    `Engine(config, executor=..., providers=default_providers(config))`."""
    return build_providers(config.srs.param_cache, test_circuits=config.debug.test_circuits)
