"""Run the same Faust application on its home cluster (A) or, after a failover, on the target (B).

MirrorMaker 2 renames what it copies: with the default policy, topic ``words`` on A is
``A.words`` on B, and a table's changelog ``wordcount-counts-changelog`` is
``A.wordcount-counts-changelog``. A Faust app that moves to B keeps its app id (so its consumer
group, whose offsets ``mirrorline failover`` translated, is the same), but it must read the
*remote* names: its source topics, to continue where it stopped, and its tables' changelogs, to
recover its state from what the mirror copied. :class:`FaustTopicNames` gives those names::

    names = FaustTopicNames.from_env()          # no MIRRORLINE_FAILOVER_SOURCE: names unchanged
    app = faust.App("wordcount", broker=..., **names.faust_settings())
    words = app.topic(names.topic("words"), value_type=bytes)
    counts = app.Table("counts", default=int, partitions=3)   # changelog renamed by faust_settings()

``faust_settings()`` replaces Faust's table classes (the ``Table``, ``GlobalTable``,
``SetTable`` and ``SetGlobalTable`` app settings) by subclasses whose changelog topic is the
remote name, so Faust keeps building the changelog topic itself (compaction, window retention,
serializers, partitions) and its partition assignor, recovery and windowed tables all see one
name. Passing ``changelog_topic=app.topic(names.changelog(app_id, "counts"))`` to a table also
works for a plain, unwindowed ``Table``, but that topic then lacks Faust's changelog settings
and a windowed table (``.tumbling()``/``.hopping()``) drops it; see docs/faust-failover.md.

With ``IdentityReplicationPolicy`` remote names equal local names and nothing needs mapping
(:attr:`FaustTopicNames.renames` is False and ``faust_settings()`` is empty).

:func:`topics_to_mirror` lists the topics (home-cluster names) an app needs mirrored, and
:func:`mm2_topics_value` formats them for ``A->B.topics``.

This module never imports Faust at import time (the core never loads it); only
:meth:`FaustTopicNames.faust_settings` and :meth:`FaustTopicNames.table_classes` do, when called,
and Faust comes with the ``mirrorline[faust]`` extra.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from mirrorline.api import ConfigError
from mirrorline.api.configfile import load_config_file

from mirrorline.connectors.mirror_client.config import REPLICATION_POLICY_CLASS, load_replication_policy
from mirrorline.connectors.mm2.mm2_config import SOURCE_CONNECTOR, MirrorMakerConfig
from mirrorline.connectors.mirror_client.policies import SEPARATOR_CONFIG, SOURCE_CLUSTER_ALIAS_CONFIG, ReplicationPolicy

__all__ = [
    "ENV_SOURCE",
    "ENV_TARGET",
    "ENV_MM2_PROPERTIES",
    "ENV_POLICY_CLASS",
    "ENV_SEPARATOR",
    "FaustTopicNames",
    "changelog_topic_name",
    "topics_to_mirror",
    "mm2_topics_value",
]

#: Alias of the cluster the app's topics come from (``A``). Unset or empty: the app runs on its
#: home cluster and every name stays as written.
ENV_SOURCE = "MIRRORLINE_FAILOVER_SOURCE"
#: An ``mm2.properties``: the replication policy is read from it, as the mirror reads it.
ENV_MM2_PROPERTIES = "MIRRORLINE_FAILOVER_MM2_PROPERTIES"
#: Alias of the cluster the app runs on now (``B``): selects the ``A->B.*`` overrides of the
#: mm2.properties. Needed only when the file has several enabled flows from the source.
ENV_TARGET = "MIRRORLINE_FAILOVER_TARGET"
#: Without an mm2.properties: the policy's ``replication.policy.class`` (default: MM2's default policy).
ENV_POLICY_CLASS = "MIRRORLINE_FAILOVER_REPLICATION_POLICY_CLASS"
#: Without an mm2.properties: ``replication.policy.separator`` (default ``.``).
ENV_SEPARATOR = "MIRRORLINE_FAILOVER_REPLICATION_POLICY_SEPARATOR"

#: Faust app settings naming table classes, and the faust attribute holding each default class.
_TABLE_SETTINGS = ("Table", "GlobalTable", "SetTable", "SetGlobalTable")
#: Topics Faust creates for itself on whichever cluster the app runs: never mirrored.
_FAUST_OWN_TOPIC = re.compile(r".*-__assignor-__leader")
#: Characters of a topic name that a regular expression does not take literally.
_NOT_LITERAL = re.compile(r"[^A-Za-z0-9_-]")


def changelog_topic_name(app_id: str, table: str) -> str:
    """Faust's name for the changelog topic of table ``table`` of app ``app_id``:
    ``<app_id>-<table>-changelog`` (``faust.tables.base.Collection._changelog_topic_name``)."""
    return f"{app_id}-{table}-changelog"


@dataclass(frozen=True)
class FaustTopicNames:
    """Where a Faust app's topics are, on the cluster it runs on now.

    ``source_alias`` is the alias of the app's home cluster when the app runs on a mirror of it
    (after a failover), ``None`` on the home cluster itself. ``policy`` is the replication policy
    the mirror uses (``None`` on the home cluster). Build one with :meth:`from_env`,
    :meth:`from_mm2_properties`, :meth:`for_policy` or :meth:`home`.
    """

    source_alias: str | None = None
    policy: ReplicationPolicy | None = None

    # ------------------------------------------------------------------ construction

    @classmethod
    def home(cls) -> FaustTopicNames:
        """Names on the home cluster: nothing renamed."""
        return cls()

    @classmethod
    def for_policy(cls, source_alias: str, config: Mapping[str, Any] | None = None) -> FaustTopicNames:
        """Names on a cluster that mirrors ``source_alias`` with the policy ``config`` describes
        (``replication.policy.class``, ``replication.policy.separator`` ...; MM2's default policy
        when absent). Only built-in policies are known here; for a plugin's policy, construct
        ``FaustTopicNames(source_alias, policy_instance)`` directly."""
        if not source_alias:
            raise ConfigError("a failover source alias is required (the cluster the app ran on, e.g. A)")
        settings = {str(k): str(v) for k, v in (config or {}).items()}
        settings[SOURCE_CLUSTER_ALIAS_CONFIG] = source_alias  # IdentityReplicationPolicy reads it
        return cls(source_alias, load_replication_policy(settings))

    @classmethod
    def from_mm2_properties(cls, path: str | os.PathLike, source_alias: str,
                            target_alias: str | None = None) -> FaustTopicNames:
        """Names on ``target_alias`` for flow ``source_alias->target_alias`` of an mm2.properties,
        with the policy settings the mirror itself uses (top level, then ``A->B.*`` overrides).

        Without ``target_alias`` the file must have exactly one enabled flow from the source.
        """
        config = MirrorMakerConfig(load_config_file(path))
        if target_alias is None:
            targets = [t for t in config.clusters if t != source_alias and config.flow_enabled(source_alias, t)]
            if len(targets) != 1:
                found = ", ".join(f"{source_alias}->{t}" for t in targets) or "none"
                raise ConfigError(f"{path}: cannot tell which flow from {source_alias} the app follows (enabled "
                                  f"flows: {found}); set {ENV_TARGET} to the cluster the app runs on now")
            target_alias = targets[0]
        connector = config.connector_config(source_alias, target_alias, SOURCE_CONNECTOR)
        policy_settings = {k: v for k, v in connector.items() if k.startswith("replication.policy")}
        return cls.for_policy(source_alias, policy_settings)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> FaustTopicNames:
        """Names from the environment, so one app module runs unchanged on A and on B.

        * :data:`ENV_SOURCE` unset or empty: home cluster, names unchanged;
        * :data:`ENV_SOURCE` and :data:`ENV_MM2_PROPERTIES` (and :data:`ENV_TARGET` if the file has
          several flows from the source): the policy of that flow;
        * :data:`ENV_SOURCE` alone: :data:`ENV_POLICY_CLASS` / :data:`ENV_SEPARATOR`, defaulting to
          MM2's default policy (``A.words``).
        """
        env = os.environ if environ is None else environ
        source = env.get(ENV_SOURCE, "").strip()
        if not source:
            return cls.home()
        properties = env.get(ENV_MM2_PROPERTIES, "").strip()
        if properties:
            return cls.from_mm2_properties(properties, source, env.get(ENV_TARGET, "").strip() or None)
        config = {}
        if env.get(ENV_POLICY_CLASS, "").strip():
            config[REPLICATION_POLICY_CLASS] = env[ENV_POLICY_CLASS].strip()
        if env.get(ENV_SEPARATOR):
            config[SEPARATOR_CONFIG] = env[ENV_SEPARATOR]
        return cls.for_policy(source, config)

    # ------------------------------------------------------------------ names

    @property
    def failed_over(self) -> bool:
        """True when the app runs on a mirror of its home cluster."""
        return self.source_alias is not None and self.policy is not None

    @property
    def renames(self) -> bool:
        """True when some name differs from the home cluster's (False with IdentityReplicationPolicy)."""
        return self.failed_over and self.topic("faust-failover-probe") != "faust-failover-probe"

    def topic(self, name: str) -> str:
        """The name, on the cluster the app runs on, of the home cluster's topic ``name``."""
        if not self.failed_over:
            return name
        return self.policy.format_remote_topic(self.source_alias, name)

    def changelog(self, app_id: str, table: str) -> str:
        """The name, on the cluster the app runs on, of table ``table``'s changelog topic."""
        return self.topic(changelog_topic_name(app_id, table))

    def home_name(self, name: str) -> str:
        """The inverse of :meth:`topic`: the home cluster's name of topic ``name`` as seen here."""
        if not self.failed_over or self.policy.topic_source(name) != self.source_alias:
            return name
        upstream = self.policy.upstream_topic(name)
        return name if upstream is None else upstream

    # ------------------------------------------------------------------ Faust

    def table_classes(self) -> dict[str, type]:
        """Faust's four table classes, subclassed so that each table's changelog topic gets its
        remote name (Faust's ``_changelog_topic_name`` is the one place it forms the name).

        Imports Faust. Returns ``{"Table": ..., "GlobalTable": ..., "SetTable": ...,
        "SetGlobalTable": ...}``, ready to pass to ``faust.App(...)`` as settings.
        """
        import faust  # the optional extra; imported only when an app asks for its tables

        names = self

        def _changelog_topic_name(table: Any) -> str:
            return names.changelog(table.app.conf.id, table.name)

        return {setting: type(f"Failover{setting}", (getattr(faust, setting),), {
            "_changelog_topic_name": _changelog_topic_name,
            "__doc__": f"faust.{setting} whose changelog topic is named for the cluster the app runs on.",
            "__module__": __name__,
        }) for setting in _TABLE_SETTINGS}

    def faust_settings(self) -> dict[str, type]:
        """Settings to pass to ``faust.App(...)``: :meth:`table_classes` when names change,
        otherwise nothing (so an app on its home cluster runs with Faust's own classes)."""
        return self.table_classes() if self.renames else {}


def topics_to_mirror(app: Any, names: FaustTopicNames | None = None, extra: Iterable[str] = ()) -> list[str]:
    """The topics a Faust app needs mirrored to fail over with its state, by their home-cluster names.

    Its agents' source topics and its tables' changelog topics, plus ``extra`` (e.g. topics read
    with ``app.stream`` outside agents). Not listed: pattern subscriptions (add their regular
    expression to ``A->B.topics`` yourself), topics Faust makes at run time (``group_by``
    repartition topics) and its leader-election topic, which is Faust's own on each cluster.
    ``names`` maps names back when ``app`` was built with remote names.
    """
    names = names or FaustTopicNames.home()
    found: list[str] = []
    for agent in app.agents.values():
        found.extend(getattr(agent.channel, "topics", None) or ())  # in-memory channels have no topics
    for table in app.tables.values():
        found.append(table.changelog_topic.get_topic_name())
    found.extend(extra)
    home = (names.home_name(t) for t in found)
    return sorted({t for t in home if not _FAUST_OWN_TOPIC.fullmatch(t)})


def mm2_topics_value(topics: Iterable[str]) -> str:
    """``topics`` as a value for MM2's ``A->B.topics``: comma-separated regular expressions, each
    matching exactly one of the names (MM2 matches each expression against the whole name).

    Kafka topic names hold only ASCII letters, digits, ``.``, ``_`` and ``-``; of these only ``.``
    means something in a regular expression, so it is written ``[.]``. No backslash is used, as a
    ``.properties`` file would swallow it (``\\.`` reads as ``.``, which matches any character).
    """
    return ", ".join(_NOT_LITERAL.sub(lambda m: "[.]" if m.group() == "." else re.escape(m.group()), t)
                      for t in topics)
