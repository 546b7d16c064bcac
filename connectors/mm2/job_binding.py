"""Jobs that take their settings from a MirrorSource connector of a worker cluster (``"connector": ...``).

A backfill or reconcile job submitted with ``POST /jobs`` and ``"connector": "my-mirror"`` runs
on the flow that connector mirrors: its clusters and their client settings (security
included), its topic filter, its replication policy, and the worker cluster's offset store
(where the connector's offsets live, under the connector's name). So the jobs work for
connectors created over REST, not only for ``mm2.properties`` flows.

:func:`mm2_properties` writes a connector's config as the ``mm2.properties`` of its one flow,
for the jobs that read a flow the way ``mirrorline reconcile`` does; reading it back with
:class:`~mirrorline.connectors.mm2.mm2_config.MirrorMakerConfig` gives the same MirrorSource
settings (tested). :func:`flow_topic_filter` gives the topics the connector mirrors now, its
stored topic selection (``POST /admin/mirroring/topic-selection``) included.
"""

from __future__ import annotations

from collections.abc import Mapping

from mirrorline.api import ConfigError, KafkaClients

from mirrorline.connectors.mirror_client.config import SOURCE_CLUSTER_ALIAS, TARGET_CLUSTER_ALIAS, client_props
from mirrorline.connectors.mirror_client.filters import TopicFilter
from mirrorline.connectors.source_mirror.topic_selection import SelectionAccessDenied, SelectionKey, TopicSelectionStore
from mirrorline.connectors.source_mirror.topics import topic_filter_for

#: The connector classes these jobs take their settings from.
MIRROR_SOURCE_CLASSES = ("MirrorSourceConnector",)
#: Settings of a connector config that are Connect's, not the flow's.
CONNECT_KEYS = ("name", "connector.class", "tasks.max", "tasks.max.enforce", "tasks.share.clients", "key.converter",
                "value.converter", "header.converter", "transforms", "predicates", "config.action.reload")
CONNECT_PREFIXES = ("errors.", "transforms.", "predicates.", "key.converter.", "value.converter.",
                    "header.converter.", "producer.override.", "consumer.override.", "admin.override.",
                    # the connector's own settings for the jobs it submits
                    "backfill.", "reconcile.")
#: Cluster roles of client settings.
_ROLES = ("consumer.", "producer.", "admin.")


def mirror_originals(connector_config: Mapping[str, str]) -> dict[str, str]:
    """A MirrorSource connector's flow settings: its config without Connect's own settings."""
    return {str(k): str(v) for k, v in connector_config.items()
            if k not in CONNECT_KEYS and not str(k).startswith(CONNECT_PREFIXES)}


def aliases(originals: Mapping[str, str]) -> tuple[str, str]:
    """``(source alias, target alias)`` of a MirrorSource config; ConfigError naming a missing one."""
    source, target = originals.get(SOURCE_CLUSTER_ALIAS), originals.get(TARGET_CLUSTER_ALIAS)
    if not source or not target:
        missing = SOURCE_CLUSTER_ALIAS if not source else TARGET_CLUSTER_ALIAS
        raise ConfigError(f"{missing}: required (the flow's cluster aliases)")
    return str(source), str(target)


def flow_client_settings(originals: Mapping[str, str], purpose: str) -> dict[str, dict[str, str]]:
    """Java-style client settings of the flow's ``source`` (consumer) and ``target`` (producer) clusters."""
    source, target = aliases(originals)
    return {"source": client_props(originals, "source", "consumer"),
            "target": {**client_props(originals, "target", "producer"), "client.id": f"{source}->{target}|{purpose}"}}


def mm2_properties(connector_config: Mapping[str, str]) -> dict[str, str]:
    """The ``mm2.properties`` of the one flow a MirrorSource connector config describes.

    ``source.cluster.X`` becomes ``<source>.X`` (``target.cluster.X`` likewise), the side's client
    layers ``source.consumer.X`` become ``<source>.consumer.X``, ``config.providers*`` stay at the top,
    and every other flow setting (``topics``, ``replication.policy.class`` ...) becomes a flow
    override ``<source>-><target>.X``; the flow is enabled.
    """
    originals = mirror_originals(connector_config)
    source, target = aliases(originals)
    props = {"clusters": f"{source}, {target}", f"{source}->{target}.enabled": "true"}
    for key, value in originals.items():
        if key in (SOURCE_CLUSTER_ALIAS, TARGET_CLUSTER_ALIAS, "enabled"):
            continue
        placed = False
        for side, alias in (("source", source), ("target", target)):
            if key.startswith(f"{side}.cluster."):
                props[f"{alias}.{key[len(side) + 9:]}"] = value
                placed = True
            elif key.startswith(tuple(f"{side}.{role}" for role in _ROLES)):
                props[f"{alias}.{key[len(side) + 1:]}"] = value
                placed = True
        if placed:
            continue
        if key.startswith("config.providers"):
            props[key] = value
        else:
            props[f"{source}->{target}.{key}"] = value
    return props


async def flow_topic_filter(clients: KafkaClients, originals: Mapping[str, str], connector: str, source_alias: str,
                            target_alias: str) -> TopicFilter:
    """The topic filter MirrorSource uses: the connector's stored topic selection if any, else ``topics``."""
    store = TopicSelectionStore(clients, originals, f"{source_alias}->{target_alias}|backfill-topic-selection")
    try:
        stored = await store.read(SelectionKey(connector, source_alias, target_alias))
    except SelectionAccessDenied:
        stored = None
    finally:
        await store.close()
    return topic_filter_for(originals, None if stored is None else stored.includes)
