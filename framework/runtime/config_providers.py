"""Resolving ``${provider:path:key}`` references with the worker's config providers.

Connect's three built-in providers, under their Python and Java class names:

- ``FileConfigProvider``: ``${file:/etc/app/secrets.properties:password}``, a key of a
  Java properties file;
- ``DirectoryConfigProvider``: ``${directory:/run/secrets:db-password}``, the whole content of
  a file in a directory (Kubernetes secret volumes);
- ``EnvVarConfigProvider``: ``${env:DB_PASSWORD}``, an environment variable
  (``allowlist.pattern`` limits which).

The file and directory providers accept ``allowed.paths`` (a comma-separated list; default:
anywhere), as Connect's do. A reference to a provider the worker does not configure is left as
it is, as Connect leaves it; a key a configured provider does not have is a ConfigError naming
the setting, so a connector never starts with a literal ``${...}`` as its password.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mirrorline.api.config_provider import ConfigProvider
from mirrorline.clients.configfile import parse_properties
from mirrorline.api.errors import ConfigError

#: Worker setting listing the provider names.
CONFIG_PROVIDERS = "config.providers"
_REFERENCE = re.compile(r"\$\{([^}]*?):(?:([^}]*?):)?([^}]*?)\}")
_JAVA_PACKAGE = "org.apache.kafka.common.config.provider."


def _allowed_paths(params: Mapping[str, str]) -> list[Path] | None:
    raw = params.get("allowed.paths", "").strip()
    if not raw:
        return None
    return [Path(p.strip()).resolve() for p in raw.split(",") if p.strip()]


def _check_allowed(path: Path, allowed: list[Path] | None) -> Path:
    resolved = path.resolve()
    if allowed is not None and not any(resolved == a or a in resolved.parents for a in allowed):
        raise ConfigError(f"path {path} is not under the provider's allowed.paths "
                          f"({', '.join(str(a) for a in allowed)})")
    return resolved


class FileConfigProvider(ConfigProvider):
    """Values from a Java properties file: ``${file:/path/to/file.properties:key}``."""

    aliases = (_JAVA_PACKAGE + "FileConfigProvider",)

    def configure(self, params: Mapping[str, str]) -> None:
        """``allowed.paths``: the directories (or files) references may read."""
        self.allowed = _allowed_paths(params)

    def get(self, path: str, keys: set[str]) -> dict[str, str]:
        """The keys of the properties file at ``path`` that exist."""
        if not path:
            raise ConfigError("the file provider needs a path: ${file:/path/to/file.properties:key}")
        file = _check_allowed(Path(path), getattr(self, "allowed", None))
        try:
            props = parse_properties(file.read_text(), str(file))
        except OSError as exc:
            raise ConfigError(f"cannot read {path}: {exc.strerror or exc}") from None
        return {k: props[k] for k in keys if k in props}


class DirectoryConfigProvider(ConfigProvider):
    """File contents from a directory: ``${directory:/run/secrets:name}`` is the file ``name``."""

    aliases = (_JAVA_PACKAGE + "DirectoryConfigProvider",)

    def configure(self, params: Mapping[str, str]) -> None:
        """``allowed.paths``: the directories references may read."""
        self.allowed = _allowed_paths(params)

    def get(self, path: str, keys: set[str]) -> dict[str, str]:
        """The content of each file ``key`` directly in directory ``path`` that exists."""
        if not path:
            raise ConfigError("the directory provider needs a path: ${directory:/path/to/dir:file}")
        directory = _check_allowed(Path(path), getattr(self, "allowed", None))
        if not directory.is_dir():
            raise ConfigError(f"{path} is not a directory")
        out = {}
        for key in keys:
            file = directory / key
            if "/" in key or key in ("", ".", "..") or not file.is_file():
                continue
            out[key] = file.read_text()
        return out


class EnvVarConfigProvider(ConfigProvider):
    """Environment variables: ``${env:NAME}``; ``allowlist.pattern`` (default ``.*``) limits which."""

    aliases = (_JAVA_PACKAGE + "EnvVarConfigProvider",)

    def configure(self, params: Mapping[str, str]) -> None:
        """``allowlist.pattern``: a regex every variable name read must match."""
        pattern = params.get("allowlist.pattern", ".*")
        try:
            self.allowlist = re.compile(pattern)
        except re.error as exc:
            raise ConfigError(f"allowlist.pattern {pattern!r} is not a valid regex: {exc}") from None

    def get(self, path: str, keys: set[str]) -> dict[str, str]:
        """The variables among ``keys`` that are set and allowed (``path`` must be empty)."""
        allow = getattr(self, "allowlist", re.compile(".*"))
        return {k: os.environ[k] for k in keys if k in os.environ and allow.fullmatch(k)}


BUILTIN_PROVIDERS: tuple[type[ConfigProvider], ...] = (FileConfigProvider, DirectoryConfigProvider,
                                                       EnvVarConfigProvider)


def provider_classes(extra: Iterable[type[ConfigProvider]] = ()) -> dict[str, type[ConfigProvider]]:
    """Every known provider class by short name, full Python name and aliases (plugins' after built-ins)."""
    out: dict[str, type[ConfigProvider]] = {}
    for cls in (*BUILTIN_PROVIDERS, *extra):
        for name in (cls.__name__, f"{cls.__module__}.{cls.__qualname__}", *getattr(cls, "aliases", ())):
            out.setdefault(name, cls)
    return out


def has_references(config: Mapping[str, Any]) -> bool:
    """True when any value holds a ``${provider:...}`` reference."""
    return any(isinstance(v, str) and _REFERENCE.search(v) for v in config.values())


@dataclass
class Resolved:
    """A config with its references replaced, and the values that came from providers (secrets)."""

    values: dict[str, Any]
    secrets: list[str] = field(default_factory=list)


class ConfigResolver:
    """The worker's providers, resolving references in connector and task configs."""

    def __init__(self, providers: Mapping[str, ConfigProvider] | None = None):
        self.providers = dict(providers or {})

    @classmethod
    def from_worker_config(cls, settings: Mapping[str, Any],
                           known: Mapping[str, type[ConfigProvider]] | None = None) -> ConfigResolver:
        """Build the providers named by ``config.providers`` (ConfigError naming a bad one)."""
        known = dict(known) if known is not None else provider_classes()
        names = [n.strip() for n in str(settings.get(CONFIG_PROVIDERS, "") or "").split(",") if n.strip()]
        providers: dict[str, ConfigProvider] = {}
        for name in names:
            class_key = f"{CONFIG_PROVIDERS}.{name}.class"
            class_name = str(settings.get(class_key, "") or "").strip()
            if not class_name:
                raise ConfigError(f"{class_key} is required: config.providers lists {name!r}; e.g. "
                                  f"{class_key} = FileConfigProvider")
            provider_class = known.get(class_name)
            if provider_class is None:
                raise ConfigError(f"{class_key}: unknown config provider {class_name!r}; known: "
                                  f"{', '.join(sorted(k for k in known if '.' not in k))}")
            prefix = f"{CONFIG_PROVIDERS}.{name}.param."
            provider = provider_class()
            provider.configure({k[len(prefix):]: str(v) for k, v in settings.items() if k.startswith(prefix)})
            providers[name] = provider
        return cls(providers)

    def resolve(self, config: Mapping[str, Any]) -> Resolved:
        """Replace every reference to a configured provider; ConfigError for a missing key.

        Blocking (providers read files): call it off the event loop.
        """
        wanted: dict[tuple[str, str], set[str]] = {}
        for value in config.values():
            if isinstance(value, str):
                for provider, path, key in _REFERENCE.findall(value):
                    if provider in self.providers:
                        wanted.setdefault((provider, path), set()).add(key)
        if not wanted:
            return Resolved(dict(config))
        found: dict[tuple[str, str], dict[str, str]] = {}
        for (provider, path), keys in wanted.items():
            try:
                found[(provider, path)] = self.providers[provider].get(path, keys)
            except ConfigError as exc:
                raise ConfigError(f"config provider {provider!r}: {exc}") from None
        secrets: set[str] = set()
        out: dict[str, Any] = {}
        for name, value in config.items():
            if not isinstance(value, str) or "${" not in value:
                out[name] = value
                continue

            def replace(match: re.Match, name=name) -> str:
                provider, path, key = match.group(1), match.group(2) or "", match.group(3)
                if provider not in self.providers:
                    return match.group(0)
                values = found[(provider, path)]
                if key not in values:
                    where = f" at {path}" if path else ""
                    raise ConfigError(f"{name}: {match.group(0)}: config provider {provider!r} has no key "
                                      f"{key!r}{where}")
                secrets.add(values[key])
                return values[key]

            out[name] = _REFERENCE.sub(replace, value)
        return Resolved(out, sorted((s for s in secrets if s), key=len, reverse=True))

    @staticmethod
    def restore(generated: Mapping[str, str], raw: Mapping[str, Any], resolved: Mapping[str, Any]) -> dict[str, str]:
        """``generated`` (e.g. task configs a connector made from its resolved config) with the
        references of ``raw`` put back wherever a value is still the resolved one, so resolved
        values are never stored."""
        out = dict(generated)
        for key, value in out.items():
            original = raw.get(key)
            if isinstance(original, str) and _REFERENCE.search(original) and value == str(resolved.get(key)):
                out[key] = original
        return out

    def close(self) -> None:
        """Close every provider."""
        for provider in self.providers.values():
            provider.close()


def resolve_worker_settings(settings: Mapping[str, Any],
                            extra: Iterable[type[ConfigProvider]] = ()) -> dict[str, Any]:
    """A worker config with references to its own providers resolved (blocking: run it off the loop).

    As Connect does for worker configs: e.g. ``sasl.jaas.config = ${file:/etc/kafka/jaas.properties:jaas}``
    in a worker file or an ``mm2.properties``. ConfigError for a bad provider or a missing key.
    """
    resolver = ConfigResolver.from_worker_config(settings, provider_classes(extra))
    try:
        if not resolver.providers or not has_references(settings):
            return dict(settings)
        return resolver.resolve(settings).values
    finally:
        resolver.close()

