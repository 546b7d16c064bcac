"""Mirroring controls shared by the REST extension and the CLI: selections and active topics of connectors.

A :class:`MirrorTarget` is one MirrorSource connector as the controls see it: its name, its
stored config, and the key of its selection in the store on its target cluster
(:mod:`mirrorline.connectors.source_mirror.topic_selection`). The functions read and write selections,
find the topics a connector's tasks mirror, and build the JSON answers, which follow IBM Event
Streams' admin API (``{"includes": [...]}``, ``{"active_topics": [...]}``) and add a
``"connectors"`` map when more than one connector is addressed.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from mirrorline.api import BadRequestError, ConnectError, KafkaClients

from mirrorline.connectors.mirror_client.config import SOURCE_CLUSTER_ALIAS, TARGET_CLUSTER_ALIAS, client_props
from mirrorline.connectors.mirror_client.filters import TOPICS_INCLUDE_CONFIG
from mirrorline.connectors.source_mirror.topic_selection import INCLUDES, SelectionKey, TopicSelectionStore, check_includes
from mirrorline.connectors.source_mirror.config import SOURCE_CONFIG_DEF

#: The field of ``GET /admin/mirroring/active-topics`` (IBM Event Streams' name).
ACTIVE_TOPICS = "active_topics"
#: How long one read or write of a selection may take before it is reported as failed.
STORE_TIMEOUT_S = 30.0

T = TypeVar("T")


class MirroringUnavailableError(ConnectError):
    """The selection store on a connector's target cluster could not be read or written (HTTP 503)."""

    http_status = 503


def mirror_source_names() -> frozenset[str]:
    """Every ``connector.class`` value that names the MirrorSource connector."""
    from mirrorline.connectors.source_mirror.connector import MirrorSourceConnector

    cls = MirrorSourceConnector
    return frozenset({f"{cls.__module__}.{cls.__qualname__}", cls.__name__, cls.__name__[: -len("Connector")],
                      *cls.aliases})


def is_mirror_source(config: Mapping[str, Any]) -> bool:
    """Whether a connector config is a MirrorSource connector's."""
    return str(config.get("connector.class", "")).strip() in mirror_source_names()


@dataclass(frozen=True)
class MirrorTarget:
    """One MirrorSource connector addressed by the controls: its name and stored config, and the
    Kafka clients (from the caller's context or launcher) that reach its target cluster."""

    name: str
    config: dict[str, str]
    clients: KafkaClients | None = None

    def setting(self, key: str) -> Any:
        """The parsed value of one of its settings (the declared default when it is not set)."""
        definition = SOURCE_CONFIG_DEF.keys[key]
        raw = self.config.get(key)
        return definition.default_value() if raw is None else definition.parse(raw)

    @property
    def key(self) -> SelectionKey:
        """The key of its selection: connector name and flow aliases."""
        return SelectionKey(self.name, str(self.setting(SOURCE_CLUSTER_ALIAS)), str(self.setting(TARGET_CLUSTER_ALIAS)))

    @property
    def configured_includes(self) -> list[str]:
        """Its configured ``topics`` patterns (what applies while no selection is stored)."""
        return list(self.setting(TOPICS_INCLUDE_CONFIG))

    def store(self) -> TopicSelectionStore:
        """A store on the connector's target cluster (close it after use)."""
        if self.clients is None:
            raise ConnectError(f"Connector {self.name}: no Kafka clients to reach its target cluster with")
        return TopicSelectionStore(self.clients, self.config, f"mirrorline-mirroring-admin|{self.name}")


async def _bounded(target: MirrorTarget, what: str, work: Awaitable[T]) -> T:
    """``work`` within :data:`STORE_TIMEOUT_S`; a failure becomes one MirroringUnavailableError naming the cluster."""
    try:
        async with asyncio.timeout(STORE_TIMEOUT_S):
            return await work
    except ConnectError as exc:
        if exc.http_status >= 500:
            detail = str(exc) or type(exc).__name__
        else:  # the request or the settings are wrong (400), or access is denied (403): keep the status
            raise type(exc)(f"Connector {target.name}: {exc}") from None
    except TimeoutError:
        detail = f"no answer within {STORE_TIMEOUT_S:.0f} s"
    except Exception as exc:  # noqa: BLE001 - Kafka client errors of every kind, reported as one line
        detail = str(exc) or type(exc).__name__
    bootstrap = client_props(target.config, "target", "admin").get("bootstrap.servers", "?")
    raise MirroringUnavailableError(
        f"Connector {target.name}: cannot {what} the topic selection on target cluster {target.key.target} "
        f"({bootstrap}): {detail}")


async def read_selection(target: MirrorTarget) -> list[str]:
    """The connector's effective include patterns: the stored selection, else its configured ``topics``."""
    async def read() -> list[str] | None:
        async with target.store() as store:
            stored = await store.read(target.key)
        return None if stored is None else list(stored.includes)

    stored = await _bounded(target, "read", read())
    return target.configured_includes if stored is None else stored


async def write_selection(target: MirrorTarget, includes: list[str] | None) -> list[str]:
    """Store ``includes`` for the connector (None: remove it, back to ``topics``); returns the effective patterns."""
    async def write() -> None:
        async with target.store() as store:
            await store.write(target.key, includes, int(target.setting("replication.factor")))

    await _bounded(target, "write", write())
    return target.configured_includes if includes is None else list(includes)


def parse_selection_request(body: Any) -> list[str]:
    """The include patterns of a ``POST /admin/mirroring/topic-selection`` body; BadRequestError saying what is wrong."""
    if not isinstance(body, dict):
        kind = "an array" if isinstance(body, list) else "a JSON value of another type"
        raise BadRequestError(f'Request body must be a JSON object {{"{INCLUDES}": [regex, ...]}}, not {kind}')
    unknown = sorted(set(body) - {INCLUDES})
    if unknown:
        raise BadRequestError(f"Request body has unknown field(s) {', '.join(repr(k) for k in unknown)}; "
                              f"it takes only '{INCLUDES}'")
    if INCLUDES not in body:
        raise BadRequestError(f"Request body must have '{INCLUDES}': an array of regular expressions "
                              f"([\"\"] or [] selects no topic)")
    try:
        return check_includes(body[INCLUDES])
    except ValueError as exc:
        raise BadRequestError(str(exc)) from None


def _per_connector(values: dict[str, list[str]], field: str, combined: list[str] | None) -> dict[str, Any]:
    body: dict[str, Any] = {} if combined is None else {field: combined}
    if len(values) > 1:
        body["connectors"] = {name: {field: value} for name, value in values.items()}
    return body


def selection_body(selections: dict[str, list[str]]) -> dict[str, Any]:
    """``{"includes": [...]}`` when every addressed connector has the same selection; with several
    connectors also ``"connectors": {name: {"includes": [...]}}`` (and no top-level ``includes``
    when they differ)."""
    values = list(selections.values())
    same = all(value == values[0] for value in values)
    return _per_connector(selections, INCLUDES, values[0] if values and same else None)


def active_topics_body(active: dict[str, list[str]]) -> dict[str, Any]:
    """``{"active_topics": [...]}`` (the union, sorted); with several connectors also each one's list."""
    union = sorted({topic for topics in active.values() for topic in topics})
    return _per_connector(active, ACTIVE_TOPICS, union)
