"""Config providers: values kept outside connector configs, referenced as ``${provider:path:key}``.

As in Kafka Connect (KIP-297, KIP-421), a worker names its providers::

    config.providers = file, env
    config.providers.file.class = FileConfigProvider        # or Connect's Java class name
    config.providers.file.param.allowed.paths = /etc/secrets

and a connector config (or an ``mm2.properties``) says ``sasl.jaas.config =
${file:/etc/secrets/kafka.properties:jaas}``. The worker resolves the references when a connector
or task starts; the config topic and REST keep the references, never the values.

A plugin adds a provider by returning its class from the ``register_config_providers`` hook.
The class needs a no-argument constructor; ``aliases`` lists other names it answers to.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping


class ConfigProvider(ABC):
    """Looks up configuration values by path and key (Connect's ``ConfigProvider``)."""

    #: Other names (e.g. Connect's Java class name) a worker config may use for this provider.
    aliases: tuple[str, ...] = ()

    def configure(self, params: Mapping[str, str]) -> None:
        """Receive the provider's ``config.providers.<name>.param.*`` settings (prefix removed)."""

    @abstractmethod
    def get(self, path: str, keys: set[str]) -> dict[str, str]:
        """The values of ``keys`` at ``path`` (``path`` is "" for ``${provider:key}``).

        Keys that do not exist are left out of the answer; the worker reports them. Raise
        :class:`~mirrorline.api.errors.ConfigError` for a path that cannot be read or is not allowed.
        Called off the event loop, so reading files or calling a vault is fine.
        """

    def close(self) -> None:
        """Release what the provider holds (the worker calls it when it stops)."""
