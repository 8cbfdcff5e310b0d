"""Which executor a configuration asks for (`[executor] kind`), built where the daemon is wired.

"local" (the default): `LocalExecutor`, one process per device on this host. "ray":
`cuzk.engine.ray_executor.RayExecutor`, one actor per device on the nodes of a Ray cluster
(docs/ray.md), imported only then, since Ray is an optional dependency (`pip install 'cuzk[ray]'`).
Apart from the seam (`cuzk.engine.executor`) so that the implementations depend on the seam and
this module on them, never the other way.
"""

from __future__ import annotations

from cuzk.config import Config, ConfigError
from cuzk.engine.executor import Executor, LocalExecutor


def make_executor(config: Config) -> Executor:
    """The executor `config.executor.kind` names."""
    if config.executor.kind == "ray":
        try:
            from cuzk.engine.ray_executor import RayExecutor
        except ImportError as err:
            raise ConfigError(f"executor.kind = \"ray\" needs Ray ({err}): pip install 'cuzk[ray]'") from None
        return RayExecutor.from_config(config)
    return LocalExecutor.from_config(config)
