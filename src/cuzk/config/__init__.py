"""The daemon's TOML configuration: the Rust cuzk daemon's sections and keys, strictly checked.

Every key the Rust daemon reads is accepted with the same meaning and default, and each one has an
effect (what differs from the Rust daemon: docs/compatibility.md §2). Keys it never had are marked
"cuzk-py" below. Nothing is silently wrong: an unknown section or key, a
value of the wrong type, a size or duration that does not parse, or a missing config file that was
named explicitly is a `ConfigError` naming the file and `section.key`.

Sizes: integer bytes, or a number with B, KB, MB, GB, TB (powers of 1000) or KiB, MiB, GiB, TiB
(powers of 1024), e.g. "5GiB", "1.5 TB". Durations: integer seconds, or number+unit groups with
ms, s, m, h, d, e.g. "5m", "300s", "1h30m".

The package: `values` (sizes, durations, checks), `engine` (the sections the engine reads),
`daemon` (the daemon's own: [daemon] with its TLS and authentication keys, [logging]) and `file`
(all of them as one `Config`, read and written). What callers use is imported from here; the
sections' classes from their modules.

`Config.fingerprint()` hashes the settings as written (with "auto" kept symbolic), so two daemons
started from equivalent files share a fingerprint whatever the machine's free memory.
"""

from cuzk.config.daemon import DEFAULT_CONFIG_PATH, DEFAULT_LISTEN, LOG_FORMATS, LOG_LEVELS, loopback_if_no_host
from cuzk.config.file import Config, config_from_dict, load_config, resolve_config_path
from cuzk.config.values import (
    GIB,
    MIB,
    ConfigError,
    format_duration,
    format_size,
    mem_available,
    parse_duration,
    parse_size,
)

__all__ = [
    "DEFAULT_CONFIG_PATH", "DEFAULT_LISTEN", "GIB", "LOG_FORMATS", "LOG_LEVELS", "MIB", "Config", "ConfigError",
    "config_from_dict", "format_duration", "format_size", "load_config", "loopback_if_no_host", "mem_available",
    "parse_duration", "parse_size", "resolve_config_path",
]
