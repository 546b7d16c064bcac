"""MirrorMaker 2's ``mm2.properties`` (``MirrorMakerConfig``): flows, worker and connector configs.

Pure (no Kafka, no asyncio). Given the flat settings of an ``mm2.properties`` file this
module answers what MM2's dedicated driver asks (reference mm2.md §6):

* which source->target flows ("herders") this node runs (:meth:`MirrorMakerConfig.flows`, §6.2);
* the settings of each cluster (:meth:`MirrorMakerConfig.cluster_props`, §6.3);
* the worker config of a flow, which talks to the **target** cluster
  (:meth:`MirrorMakerConfig.worker_config`, §6.4);
* the config of each of the three MM2 connectors of a flow
  (:meth:`MirrorMakerConfig.connector_config`, §6.5).

The file is Java ``Properties`` syntax: ``#``/``!`` start comment *lines* only, so
``topics = .* # x`` makes the value ``.* # x``; ``A->B.enabled`` is an ordinary key.

Config-provider placeholders (``${provider:path:key}``) are never resolved here; the
``config.providers*`` settings are passed through to the worker and connector configs.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from mirrorline.api import ConfigError, split_list
from mirrorline.connectors.checkpoint.config import CHECKPOINT_CONFIG_DEF
from mirrorline.connectors.heartbeat.connector import HEARTBEAT_CONFIG_DEF
from mirrorline.connectors.source_mirror.config import SOURCE_CONFIG_DEF

CLUSTERS = "clusters"
#: MM2's switch for its internal REST server (KIP-710): mirrorline accepts it and needs no such server.
ENABLE_INTERNAL_REST = "dedicated.mode.enable.internal.rest"
EMIT_HEARTBEATS_ENABLED = "emit.heartbeats.enabled"
ENABLED = "enabled"

SOURCE_CONNECTOR = "MirrorSourceConnector"
CHECKPOINT_CONNECTOR = "MirrorCheckpointConnector"
HEARTBEAT_CONNECTOR = "MirrorHeartbeatConnector"
#: The three MM2 connectors every flow configures, by simple class name (= connector name).
CONNECTOR_NAMES: tuple[str, ...] = (SOURCE_CONNECTOR, CHECKPOINT_CONNECTOR, HEARTBEAT_CONNECTOR)
JAVA_PACKAGE = "org.apache.kafka.connect.mirror"

BYTE_ARRAY_CONVERTER = "org.apache.kafka.connect.converters.ByteArrayConverter"

#: Top-level prefixes copied into every worker config (top level wins over ``<target>.`` keys), §6.4.
WORKER_TOP_LEVEL_PREFIXES: tuple[str, ...] = (
    "offset.storage", "config.storage", "status.storage", "key.converter", "value.converter",
    "header.converter", "task", "worker", "replication.policy")

CONFIG_PROVIDERS = "config.providers"

#: Connector-level keys of MM2's checkpoint and heartbeat connectors and of MirrorConnectorConfig
#: (§6.7) that our MirrorSourceConnector ConfigDef may not define.
EXTRA_MM2_CONNECTOR_KEYS: frozenset[str] = frozenset({
    # checkpoint connector
    "groups", "groups.exclude", "group.filter.class", "refresh.groups.enabled",
    "refresh.groups.interval.seconds", "emit.checkpoints.enabled", "emit.checkpoints.interval.seconds",
    "sync.group.offsets.enabled", "sync.group.offsets.interval.seconds", "checkpoints.topic.replication.factor",
    # heartbeat connector
    "emit.heartbeats.enabled", "emit.heartbeats.interval.seconds", "heartbeats.topic.replication.factor",
    # all MM2 connectors (MirrorConnectorConfig) / source connector
    "forwarding.admin.class", "metric.reporters", "topic.filter.class", "config.property.filter.class",
    # Kafka Connect ConnectorConfig (name/connector.class deliberately left out, see connector_config)
    "tasks.max", "tasks.max.enforce", "tasks.share.clients", "key.converter", "value.converter", "header.converter",
    "config.action.reload", "transforms", "predicates",
})
#: Top-level key prefixes also copied into connector configs: Connect's ``errors.*`` settings, the
#: per-alias ``transforms.<alias>.*`` / ``predicates.<alias>.*`` settings and the converters' own
#: settings (``value.converter.schemas.enable``...).
CONNECTOR_KEY_PREFIXES: tuple[str, ...] = ("errors.", "transforms.", "predicates.", "key.converter.",
                                           "value.converter.", "header.converter.")

#: Connection/security keys shared by a cluster's producer, consumer and admin clients (§6.3).
CLIENT_CONNECTION_KEYS: tuple[str, ...] = ("bootstrap.servers", "security.protocol")
CLIENT_CONNECTION_PREFIXES: tuple[str, ...] = ("ssl.", "sasl.")
_CLIENT_ROLES: tuple[str, ...] = ("producer", "consumer", "admin")


def is_client_connection_key(key: str) -> bool:
    """Whether ``key`` is a connection/security client setting (bootstrap.servers, security.protocol,
    ``ssl.*``, ``sasl.*``) that MM2 copies to a cluster's producer, consumer and admin clients."""
    return key in CLIENT_CONNECTION_KEYS or key.startswith(CLIENT_CONNECTION_PREFIXES)


def connector_class_name(simple_name: str) -> str:
    """Java FQCN of an MM2 connector.

    ``MirrorSourceConnector`` -> ``org.apache.kafka.connect.mirror.MirrorSourceConnector``.
    """
    return f"{JAVA_PACKAGE}.{simple_name}"


def mm2_connector_key_names() -> frozenset[str]:
    """Names of the keys the three MM2 connector ConfigDefs define (top-level copies of these reach connectors).

    Our MirrorSourceConnector ConfigDef plus :data:`EXTRA_MM2_CONNECTOR_KEYS` (checkpoint and heartbeat
    connector keys, Connect's connector keys). ``errors.*``, ``transforms.*`` and ``predicates.*``
    are matched by prefix (:data:`CONNECTOR_KEY_PREFIXES`).
    """
    return frozenset(SOURCE_CONFIG_DEF.keys) | EXTRA_MM2_CONNECTOR_KEYS


def check_connector_configs(flows: Iterable[Flow]) -> None:
    """Raise one ConfigError naming every invalid value in the flows' connector configs.

    Checked against the three connectors' ConfigDefs before any worker or client starts, so a
    bad ``topics`` regex or an empty ``replication.policy.separator`` is reported at once.
    Values holding a ``${provider:...}`` placeholder are left to the worker, which resolves them.
    Each problem is named once, with the first flow it was found in.
    """
    config_defs = {SOURCE_CONNECTOR: SOURCE_CONFIG_DEF, CHECKPOINT_CONNECTOR: CHECKPOINT_CONFIG_DEF,
                   HEARTBEAT_CONNECTOR: HEARTBEAT_CONFIG_DEF}
    problems: dict[str, str] = {}
    for flow in flows:
        for name, config_def in config_defs.items():
            config = flow.connector_configs[name]
            for value in config_def.validate(config):
                if "${" in str(config.get(value.name, "")):
                    continue
                for error in value.errors:
                    problems.setdefault(error, flow.name)
    if problems:
        raise ConfigError("; ".join(f"flow {flow}: {error}" for error, flow in problems.items()))


def _parse_bool(props: Mapping[str, str], key: str, default: bool) -> bool:
    value = props.get(key)
    if value is None:
        return default
    text = value.strip().lower()
    if text not in ("true", "false"):
        raise ConfigError(f"{key}: expected true or false, got {value!r}")
    return text == "true"


@dataclass
class Flow:
    """One source->target replication flow (MM2 "herder") and everything needed to run it.

    ``enabled`` is ``<source>-><target>.enabled`` (data and checkpoint replication);
    ``heartbeats_enabled`` is ``<source>-><target>.emit.heartbeats.enabled`` falling back to the
    top-level ``emit.heartbeats.enabled`` (default true). A flow exists when either is true.
    ``worker_config`` talks to the target cluster; ``connector_configs`` maps each of
    ``MirrorSourceConnector``, ``MirrorCheckpointConnector`` and ``MirrorHeartbeatConnector`` to its
    config (all three are always present; the source and checkpoint connectors carry
    ``enabled=false`` and do nothing when the flow is heartbeat-only).
    """

    source: str
    target: str
    enabled: bool
    heartbeats_enabled: bool
    worker_config: dict[str, str] = field(default_factory=dict)
    connector_configs: dict[str, dict[str, str]] = field(default_factory=dict)

    @property
    def name(self) -> str:
        """``"<source>-><target>"``, MM2's worker id and default client.id for this flow."""
        return f"{self.source}->{self.target}"


class MirrorMakerConfig:
    """The settings of an ``mm2.properties`` file, interpreted as MM2's ``MirrorMakerConfig``.

    ``props`` are the raw (string) settings. Raises :class:`mirrorline.api.ConfigError` when
    ``clusters`` is missing or empty, or when a listed cluster has no bootstrap servers
    (``<alias>.bootstrap.servers``, or a top-level ``bootstrap.servers``).
    """

    def __init__(self, props: Mapping[str, str]):
        self._props: dict[str, str] = {str(k): str(v) for k, v in props.items()}
        raw = self._props.get(CLUSTERS)
        if raw is None:
            raise ConfigError("mm2 config: 'clusters' is required: list the cluster aliases, e.g. "
                              "'clusters = A, B', and give each '<alias>.bootstrap.servers'")
        aliases: list[str] = []
        for alias in split_list(raw):
            if not alias:
                raise ConfigError(f"mm2 config: 'clusters' has an empty alias: {raw!r}")
            if alias not in aliases:
                aliases.append(alias)
        if not aliases:
            raise ConfigError("mm2 config: 'clusters' is empty: list the cluster aliases, e.g. 'clusters = A, B'")
        self._clusters = aliases
        internal_rest = self._props.get(ENABLE_INTERNAL_REST, "false").strip().lower()
        if internal_rest not in ("true", "false"):
            raise ConfigError(f"Invalid value {self._props[ENABLE_INTERNAL_REST]} for configuration "
                              f"{ENABLE_INTERNAL_REST}: Expected value to be either true or false")
        #: ``dedicated.mode.enable.internal.rest`` (MM2's default false). Java MM2 needs it for several nodes and
        #: for exactly-once; mirrorline's workers coordinate through the config topic, so it changes nothing.
        self.enable_internal_rest = internal_rest == "true"
        missing = [a for a in aliases if not self.cluster_props(a).get("bootstrap.servers", "").strip()]
        if missing:
            raise ConfigError("mm2 config: no bootstrap servers for cluster(s) "
                              + ", ".join(repr(a) for a in missing) + ": set "
                              + ", ".join(f"'{a}.bootstrap.servers'" for a in missing))

    # ------------------------------------------------------------------ basics

    @property
    def props(self) -> dict[str, str]:
        """A copy of the raw settings."""
        return dict(self._props)

    @property
    def clusters(self) -> list[str]:
        """The cluster aliases of ``clusters``, in file order, without duplicates."""
        return list(self._clusters)

    def _with_prefix(self, prefix: str) -> dict[str, str]:
        """Top-level settings whose key starts with ``prefix`` (key kept whole)."""
        return {k: v for k, v in self._props.items() if k.startswith(prefix)}

    def _with_prefix_stripped(self, prefix: str) -> dict[str, str]:
        """Settings whose key starts with ``prefix``, with the prefix removed."""
        return {k[len(prefix):]: v for k, v in self._props.items() if k.startswith(prefix)}

    # ------------------------------------------------------------------ §6.3

    def cluster_props(self, alias: str) -> dict[str, str]:
        """Settings of cluster ``alias`` (mm2.md §6.3, ``clusterProps``).

        1. every ``<alias>.X`` becomes ``X``;
        2. each connection/security key K (bootstrap.servers, security.protocol, ``ssl.*``,
           ``sasl.*``) from step 1 is also set as ``producer.K``, ``consumer.K``, ``admin.K`` if absent;
        3. each such K at top level is set as ``producer.K``, ``consumer.K``, ``admin.K`` and ``K`` if absent.
        """
        props = self._with_prefix_stripped(f"{alias}.")
        for key, value in list(props.items()):
            if is_client_connection_key(key):
                for role in _CLIENT_ROLES:
                    props.setdefault(f"{role}.{key}", value)
        for key, value in self._props.items():
            if is_client_connection_key(key):
                for role in _CLIENT_ROLES:
                    props.setdefault(f"{role}.{key}", value)
                props.setdefault(key, value)
        return props

    # ------------------------------------------------------------------ §6.2

    def flow_enabled(self, source: str, target: str) -> bool:
        """``<source>-><target>.enabled`` (default false)."""
        return _parse_bool(self._props, f"{source}->{target}.{ENABLED}", False)

    def heartbeats_enabled(self, source: str, target: str) -> bool:
        """``<source>-><target>.emit.heartbeats.enabled``, else top-level ``emit.heartbeats.enabled`` (default true)."""
        default = _parse_bool(self._props, EMIT_HEARTBEATS_ENABLED, True)
        return _parse_bool(self._props, f"{source}->{target}.{EMIT_HEARTBEATS_ENABLED}", default)

    def cluster_pairs(self, target_filter: Iterable[str] | None = None) -> list[tuple[str, str]]:
        """Ordered ``(source, target)`` pairs, source != target, with the flow or its heartbeats enabled.

        ``target_filter`` (``--clusters``) keeps only pairs whose target is listed; ``None`` keeps all.
        May be empty (unlike :meth:`flows`).
        """
        targets = None if target_filter is None else set(target_filter)
        if targets is not None:
            unknown = sorted(targets - set(self._clusters))
            if unknown:
                raise ConfigError(f"--clusters: unknown cluster alias(es) {', '.join(unknown)}; "
                                  f"'clusters' lists {', '.join(self._clusters)}")
        pairs = []
        for source in self._clusters:
            for target in self._clusters:
                if source == target or (targets is not None and target not in targets):
                    continue
                if self.flow_enabled(source, target) or self.heartbeats_enabled(source, target):
                    pairs.append((source, target))
        return pairs

    def flows(self, target_filter: list[str] | None = None) -> list[Flow]:
        """The flows this node runs (mm2.md §6.2), each with its worker and three connector configs.

        A flow exists for every ordered pair (s, t), s != t, where ``s->t.enabled`` is true or
        heartbeats are enabled for the pair (so with defaults every ordered pair has one).
        ``target_filter`` (the ``--clusters`` option) keeps only flows whose target is listed.
        Raises ConfigError ``"No source->target replication flows."`` when none is left, and
        for a ``target_filter`` alias not in ``clusters``.
        """
        flows = []
        for source, target in self.cluster_pairs(target_filter):
            flows.append(Flow(
                source=source,
                target=target,
                enabled=self.flow_enabled(source, target),
                heartbeats_enabled=self.heartbeats_enabled(source, target),
                worker_config=self.worker_config(source, target),
                connector_configs={name: self.connector_config(source, target, name) for name in CONNECTOR_NAMES},
            ))
        if not flows:
            raise ConfigError("No source->target replication flows.")
        check_connector_configs(flows)
        return flows

    # ------------------------------------------------------------------ §6.4

    def worker_config(self, source: str, target: str) -> dict[str, str]:
        """Worker config of flow ``source->target``; the worker talks to the target cluster (mm2.md §6.4).

        ``cluster_props(target)`` (so ``bootstrap.servers`` is the target's, and any other worker
        setting comes from ``<target>.X``, e.g. ``B.offset.flush.interval.ms``), overlaid with
        top-level keys starting with offset.storage, config.storage, status.storage, key.converter,
        value.converter, header.converter, task, worker, replication.policy, plus
        ``config.providers*``. Other top-level keys (e.g. ``offset.flush.interval.ms``) are ignored.
        Defaults: ``client.id=s->t``, ``group.id=s-mm2``, ``{offset,config,status}.storage.topic =
        mm2-{offsets,configs,status}.s.internal``, ByteArrayConverter for keys, values and headers.
        """
        self._check_pair(source, target)
        props = self.cluster_props(target)
        for prefix in WORKER_TOP_LEVEL_PREFIXES:
            props.update(self._with_prefix(prefix))
        props.update(self._with_prefix(CONFIG_PROVIDERS))
        props.setdefault("group.id", f"{source}-mm2")
        props.setdefault("offset.storage.topic", f"mm2-offsets.{source}.internal")
        props.setdefault("status.storage.topic", f"mm2-status.{source}.internal")
        props.setdefault("config.storage.topic", f"mm2-configs.{source}.internal")
        props.setdefault("key.converter", BYTE_ARRAY_CONVERTER)
        props.setdefault("value.converter", BYTE_ARRAY_CONVERTER)
        props.setdefault("header.converter", BYTE_ARRAY_CONVERTER)
        props.setdefault("client.id", f"{source}->{target}")
        return props

    # ------------------------------------------------------------------ §6.5

    def connector_config(self, source: str, target: str, connector_class_simple_name: str) -> dict[str, str]:
        """Config of MM2 connector ``connector_class_simple_name`` for flow ``source->target`` (mm2.md §6.5).

        Layers, later wins:

        1. top-level keys the MM2 connector ConfigDefs define (:func:`mm2_connector_key_names`,
           plus ``errors.*``, ``transforms.*``, ``predicates.*``);
        2. top-level ``config.providers*`` and ``replication.policy*``;
        3. source cluster props: client keys (starting with consumer/producer/admin) as
           ``source.<k>``, others as ``source.cluster.<k>``; target likewise;
        4. if absent: ``name`` = the simple class name, ``connector.class`` =
           ``org.apache.kafka.connect.mirror.<Name>``, ``source.cluster.alias``, ``target.cluster.alias``;
        5. every ``source->target.<k>`` as ``<k>`` (flow overrides);
        6. ``enabled=false`` if still absent.

        Unlike Java, top-level ``name``/``connector.class`` are not copied in step 1 (they would give
        all three connectors one name); ``s->t.name`` still overrides. Placeholders are not resolved.
        """
        if connector_class_simple_name not in CONNECTOR_NAMES:
            raise ConfigError(f"unknown MM2 connector {connector_class_simple_name!r}; "
                              f"expected one of {', '.join(CONNECTOR_NAMES)}")
        self._check_pair(source, target)
        names = mm2_connector_key_names()
        props = {k: v for k, v in self._props.items() if k in names or k.startswith(CONNECTOR_KEY_PREFIXES)}
        props.update(self._with_prefix(CONFIG_PROVIDERS))
        props.update(self._with_prefix("replication.policy"))
        for side, alias in (("source", source), ("target", target)):
            for key, value in self.cluster_props(alias).items():
                if key.startswith(_CLIENT_ROLES):
                    props[f"{side}.{key}"] = value
                else:
                    props[f"{side}.cluster.{key}"] = value
        props.setdefault("name", connector_class_simple_name)
        props.setdefault("connector.class", connector_class_name(connector_class_simple_name))
        props.setdefault("source.cluster.alias", source)
        props.setdefault("target.cluster.alias", target)
        props.update(self._with_prefix_stripped(f"{source}->{target}."))
        props.setdefault(ENABLED, "false")
        return props

    def _check_pair(self, source: str, target: str) -> None:
        for alias in (source, target):
            if alias not in self._clusters:
                raise ConfigError(f"unknown cluster alias {alias!r}; 'clusters' lists {', '.join(self._clusters)}")
        if source == target:
            raise ConfigError(f"a flow needs two different clusters, got {source}->{target}")

