"""What every configuration section is made of: the error, sizes and durations, and the checks of a
value's type, range and choice (each names the `section.key` it was read for)."""

from __future__ import annotations

import math
import re
from typing import Any

from cuzk.errors import CuzkError

GIB = 1 << 30
MIB = 1 << 20

_SIZE_UNITS = {
    "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
    "kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40,
}
_DURATION_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([A-Za-z]*)\s*$")
_DURATION_PART_RE = re.compile(r"(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)")


class ConfigError(CuzkError):
    """A configuration value, key or file that cannot be used; the message names it."""


def parse_size(text: str | int, *, what: str) -> int:
    """Bytes from "5GiB", "500 MB", "1048576" or an int; `what` names the setting in errors."""
    if isinstance(text, bool):
        raise ConfigError(f"{what}: expected a size such as \"5GiB\", got {text!r}")
    if isinstance(text, int):
        if text < 0:
            raise ConfigError(f"{what}: a size cannot be negative, got {text}")
        return text
    if not isinstance(text, str):
        raise ConfigError(f"{what}: expected a size such as \"5GiB\", got {text!r}")
    m = _SIZE_RE.match(text)
    unit = m.group(2).lower() if m else ""
    if not m or (unit and unit not in _SIZE_UNITS):
        raise ConfigError(f"{what}: {text!r} is not a size (use bytes or a number with B, KB, MB, GB, TB, "
                          "KiB, MiB, GiB or TiB, e.g. \"5GiB\")")
    return int(float(m.group(1)) * _SIZE_UNITS[unit or "b"])


def parse_duration(text: str | int | float, *, what: str) -> float:
    """Seconds from "5m", "300s", "1h30m", "250ms" or a bare number of seconds."""
    if isinstance(text, bool):
        raise ConfigError(f"{what}: expected a duration such as \"5m\", got {text!r}")
    if isinstance(text, int | float):
        if text < 0 or not math.isfinite(text):
            raise ConfigError(f"{what}: a duration must be a non-negative number of seconds, got {text}")
        return float(text)
    if not isinstance(text, str):
        raise ConfigError(f"{what}: expected a duration such as \"5m\", got {text!r}")
    s = text.strip()
    if re.fullmatch(r"\d+(?:\.\d+)?", s):
        return float(s)
    compact = s.replace(" ", "")
    parts = _DURATION_PART_RE.findall(compact)
    if not parts or "".join(n + u for n, u in parts) != compact:
        raise ConfigError(f"{what}: {text!r} is not a duration (use seconds or number+unit groups with ms, s, m, "
                          "h, d, e.g. \"5m\" or \"1h30m\")")
    return sum(float(n) * _DURATION_UNITS[u] for n, u in parts)


def format_size(n: int) -> str:
    """The shortest exact binary-unit spelling (for `config show`)."""
    for unit, scale in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n and n % scale == 0:
            return f"{n // scale}{unit}"
    return str(n)


def format_duration(seconds: float) -> str:
    if seconds and seconds % 3600 == 0:
        return f"{int(seconds // 3600)}h"
    if seconds and seconds % 60 == 0:
        return f"{int(seconds // 60)}m"
    if seconds == int(seconds):
        return f"{int(seconds)}s"
    return f"{round(seconds * 1000)}ms"


def mem_available() -> int | None:
    """MemAvailable from /proc/meminfo (what can be allocated without swapping), or None."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def expect(kind: type | tuple[type, ...], value: Any, what: str, description: str) -> Any:
    if isinstance(value, bool) and kind is not bool and not (isinstance(kind, tuple) and bool in kind):
        raise ConfigError(f"{what}: expected {description}, got {value!r}")
    if not isinstance(value, kind):
        raise ConfigError(f"{what}: expected {description}, got {value!r}")
    return value


def non_negative_int(value: Any, what: str, *, minimum: int = 0) -> int:
    expect(int, value, what, "an integer")
    if value < minimum:
        raise ConfigError(f"{what}: must be >= {minimum}, got {value}")
    return value


def choice(value: Any, what: str, choices: tuple[str, ...]) -> str:
    expect(str, value, what, "a string")
    if value.lower() not in choices:
        raise ConfigError(f"{what}: {value!r} is not one of {', '.join(choices)}")
    return value.lower()


def string_list(value: Any, what: str) -> list[str]:
    if isinstance(value, str):
        return [value]
    expect(list, value, what, "a string or a list of strings")
    for item in value:
        expect(str, item, what, "a list of strings")
    return list(value)
