"""Reading config files: Java ``.properties`` (Kafka's format), YAML and JSON (plugin contract: a pure parser).

``.properties`` follows ``java.util.Properties``: ``key=value``, ``key: value`` or
``key value``; ``#`` and ``!`` start comment lines (never inline comments); a trailing
backslash continues a line; ``\\t``, ``\\n``, ``\\uXXXX`` and escaped separators are
understood. YAML files must hold a mapping; nested mappings are flattened with dots
(``producer: {linger.ms: 5}`` is ``producer.linger.ms=5``) and values become strings.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import yaml

from mirrorline.api.errors import ConfigError

_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def parse_properties(text: str, source: str = "<string>") -> dict[str, str]:
    """Parse Java properties text into a dict (later keys win, as in Java)."""
    props: dict[str, str] = {}
    for logical in _logical_lines(text):
        key, value = _split_key_value(logical)
        props[_unescape(key, source)] = _unescape(value, source)
    return props


def _logical_lines(text: str):
    pending = ""
    for raw in text.splitlines():
        line = raw.lstrip(" \t\f")
        if not pending and (not line or line[0] in "#!"):
            continue
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2 == 1:  # an odd number of backslashes continues the line
            pending += line[:-1]
            continue
        yield pending + line
        pending = ""
    if pending:
        yield pending


def _split_key_value(line: str) -> tuple[str, str]:
    i = 0
    while i < len(line):
        char = line[i]
        if char == "\\":
            i += 2
            continue
        if char in "=: \t\f":
            break
        i += 1
    key, rest = line[:i], line[i:]
    rest = rest.lstrip(" \t\f")
    if rest[:1] in ("=", ":"):
        rest = rest[1:].lstrip(" \t\f")
    return key, rest


def _unescape(text: str, source: str) -> str:
    def replace(match: re.Match) -> str:
        escaped = match.group(1)
        if escaped.startswith("u"):
            if len(escaped) != 5:  # Java requires exactly four hex digits
                raise ConfigError(f"{source}: malformed \\uXXXX escape {match.group(0)!r}")
            return chr(int(escaped[1:], 16))
        return _ESCAPES.get(escaped, escaped)

    return re.sub(r"\\(u[0-9a-fA-F]{0,4}|.)", replace, text)


def _scalar(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return ""
    return str(value)


def _flatten_item(key: str, value: Any, out: dict[str, str], source: str) -> None:
    if isinstance(value, dict):
        for sub, subvalue in value.items():
            _flatten_item(f"{key}.{sub}", subvalue, out, source)
    elif isinstance(value, (list, tuple)):
        out[key] = ",".join(_scalar(v) for v in value)
    else:
        out[key] = _scalar(value)


def _flatten(data: dict[Any, Any], source: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for key, value in data.items():
        _flatten_item(str(key), value, out, source)
    return out


def parse_yaml(text: str, source: str = "<string>") -> dict[str, str]:
    """Parse a YAML mapping into flat string settings."""
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{source} is not valid YAML: {exc}".replace("\n", " ")) from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: expected a mapping of settings, got {type(data).__name__}")
    return _flatten(data, source)


def parse_json(text: str, source: str = "<string>") -> dict[str, str]:
    """Parse a JSON object, flat or Connect's ``{"name": ..., "config": {...}}``, into flat string settings."""
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ConfigError(f"{source} is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: expected a JSON object of settings, got {type(data).__name__}")
    if isinstance(data.get("config"), dict):
        config = _flatten(data["config"], source)
        config.setdefault("name", _scalar(data.get("name", "")))
        return config
    return _flatten(data, source)


def load_config_file(path: str | Path) -> dict[str, str]:
    """Load a ``.properties``, ``.yaml``/``.yml`` or ``.json`` (Connect's REST body shape) file.

    A JSON file may be ``{"name": ..., "config": {...}}`` as POSTed to Connect, or a flat map.
    Raises ConfigError naming the file and the problem.
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"cannot read config file {path}: not UTF-8 text ({exc.reason} "
                          f"at byte {exc.start})") from None
    suffix = path.suffix.lower()
    if suffix == ".json":
        return parse_json(text, str(path))
    if suffix in (".yaml", ".yml"):
        return parse_yaml(text, str(path))
    return parse_properties(text, str(path))
