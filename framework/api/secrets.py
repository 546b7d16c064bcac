"""Which settings are secrets, and how they are kept out of REST responses, statuses and logs.

One rule, used by the runtime at the REST boundary and available to connectors for their own
log lines. A setting is secret when

- its :class:`~mirrorline.api.config.ConfigDef` declares it with type ``PASSWORD``, or
- its name, at any prefix, ends in ``password``, ``secret``, ``sasl.jaas.config`` or
  ``ssl.keystore.key`` (the last segment after a dot is compared, so
  ``source.cluster.sasl.jaas.config``, ``A.ssl.keystore.password`` and
  ``sasl.oauthbearer.client.secret`` all are; ``password.policy.url`` is not).

Secret values print as :data:`HIDDEN`. The stores keep the real values; only what leaves the
worker is redacted. A client that reads a config and writes it back unchanged sends
``[hidden]`` for each secret: the herder then keeps the stored value
(:func:`restore_hidden`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["HIDDEN", "is_secret", "redact", "restore_hidden", "scrub", "secret_values"]

HIDDEN = "[hidden]"
"""What a secret value reads as wherever it would otherwise be shown."""

_SECRET_SUFFIXES = ("password", "secret", "sasl.jaas.config", "ssl.keystore.key")

# Inside a JAAS config an error may quote one option rather than the whole value.
_JAAS_OPTION = re.compile(r"""([\w.\-]*(?:password|secret|token|key)[\w.\-]*)\s*=\s*("[^"]*"|'[^']*'|[^\s;]+)""",
                          re.IGNORECASE)


def _declared_password(key: str, config_def: Any) -> bool:
    if config_def is None:
        return False
    definition = config_def.keys.get(key) if hasattr(config_def, "keys") else None
    # duck-typed so this module does not import mirrorline.api.config (which imports it)
    return definition is not None and getattr(definition.type, "value", definition.type) == "PASSWORD"


def is_secret(key: str, config_def: Any = None) -> bool:
    """True when the setting ``key`` holds a secret (see the module docstring for the rule).

    :param config_def: a :class:`~mirrorline.api.config.ConfigDef` whose ``PASSWORD`` keys are
        secret too, whatever their names.
    """
    name = str(key).strip().lower()
    for suffix in _SECRET_SUFFIXES:
        if name == suffix or name.endswith("." + suffix):
            return True
    return _declared_password(str(key), config_def)


def redact(config: Mapping[str, Any], config_def: Any = None) -> dict[str, Any]:
    """A copy of ``config`` with the value of every secret setting replaced by ``[hidden]``.

    None values stay None (there is nothing to hide, and Connect shows them as null).
    """
    return {key: (HIDDEN if value is not None and is_secret(key, config_def) else value)
            for key, value in config.items()}


def secret_values(config: Mapping[str, Any], config_def: Any = None) -> list[str]:
    """The secret strings in ``config``: each secret value, and each quoted credential option
    inside a JAAS config; longest first, so :func:`scrub` replaces a whole before its parts."""
    found: set[str] = set()
    for key, value in config.items():
        if value is None or not is_secret(key, config_def):
            continue
        text = getattr(value, "value", value)  # a Password holds its secret in .value
        text = str(text)
        if not text or text == HIDDEN:
            continue
        found.add(text)
        for match in _JAAS_OPTION.finditer(text):
            option = match.group(2).strip("\"'")
            if option:
                found.add(option)
    return sorted(found, key=len, reverse=True)


def scrub(text: str, secrets: Iterable[str] | Mapping[str, Any], config_def: Any = None) -> str:
    """``text`` with every occurrence of a secret replaced by ``[hidden]``.

    :param secrets: the secret strings, or a config map whose secret values are meant
        (:func:`secret_values`). Use it on error messages and traces that may quote a config.
    """
    values = secret_values(secrets, config_def) if isinstance(secrets, Mapping) else \
        sorted({s for s in secrets if s}, key=len, reverse=True)
    for value in values:
        text = text.replace(value, HIDDEN)
    return text


def restore_hidden(incoming: Mapping[str, Any], stored: Mapping[str, Any] | None,
                   config_def: Any = None) -> tuple[dict[str, Any], list[str]]:
    """Put stored secrets back where a client sent ``[hidden]`` (a read config written back).

    :return: the config with each secret ``[hidden]`` value replaced by the stored value, and
        the names of secret keys that were ``[hidden]`` but have no stored value (the caller
        refuses those: writing the placeholder as the secret would silently break the connector).
    """
    stored = stored or {}
    out = dict(incoming)
    missing = []
    for key, value in incoming.items():
        if value == HIDDEN and is_secret(key, config_def):
            if stored.get(key) is not None:
                out[key] = stored[key]
            else:
                missing.append(key)
    return out, missing
