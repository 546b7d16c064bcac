"""Topic ACL sync: the source's topic ACLs become ACLs on the remote topics (MM2's syncTopicAcls, §3.5).

MM2 4.x rules, kept exactly for LITERAL bindings (:func:`remote_acls`):

- only TOPIC bindings of topics the flow mirrors (``shouldReplicateTopic``, whether or not the
  topic exists yet), renamed with the replication policy: ``orders`` -> ``A.orders``;
- ALLOW WRITE is never synced (only the mirror writes to remote topics);
- ALLOW ALL is downgraded to ALLOW READ;
- everything else (other ALLOW operations, every DENY) is copied with its principal and host.

Beyond MM2, which syncs LITERAL bindings only:

- PREFIXED bindings are synced too, as PREFIXED bindings on the remote prefix (``orders-`` ->
  ``A.orders-``), when the prefix selects only mirrored topics: at least one source topic
  starts with it, every source topic that starts with it is mirrored, and the policy renames
  each of them to a name that starts with the remote prefix (true of DefaultReplicationPolicy
  and IdentityReplicationPolicy, not of SuffixReplicationPolicy). A prefix that also covers
  topics the flow leaves out is not synced, so a prefixed grant on the target never reaches
  further than the copies of the topics it covered on the source (topics created on the
  source later are checked at the next interval);
- the wildcard LITERAL name ``*`` (every topic) is not synced: it names no topic to mirror.

The target's ACLs are never deleted: each round describes the target's topic ACLs and creates
only the missing bindings, so a round with nothing new writes nothing. A principal that may
not describe ACLs on the source (DESCRIBE on the source cluster) or create them on the target
(ALTER on the target cluster) gets one WARNING per condition, a warning in the connector's
status and a count in ``acl_sync_errors_total``; records are mirrored all the same.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable

from mirrorline.api import ClusterAuthorizationFailedError, SecurityDisabledError
from mirrorline.api.clients import (
    AclBinding,
    AclFilter,
    AclOperation,
    AclPermissionType,
    Admin,
    PatternType,
    ResourceType,
)

from mirrorline.connectors.mirror_client.policies import ReplicationPolicy
from mirrorline.connectors.source_mirror import metrics

log = logging.getLogger(__name__)

#: ``reason`` label values of ``acl_sync_errors_total``.
SOURCE_DESCRIBE_DENIED = "source-describe-denied"
TARGET_ALTER_DENIED = "target-alter-denied"

_TOPIC_ACLS = AclFilter(resource_type=ResourceType.TOPIC)
_WILDCARD = "*"


def remote_acls(source_acls: Iterable[AclBinding], source_alias: str, policy: ReplicationPolicy,
                should_replicate: Callable[[str], bool], source_topics: Iterable[str]) -> list[AclBinding]:
    """The bindings the target should have for ``source_acls`` (the rules in this module's docstring).

    ``should_replicate``: whether the flow mirrors a topic name; ``source_topics``: every topic
    now on the source (for PREFIXED bindings). Returns each binding once, in a stable order.
    """
    topics = sorted(set(source_topics))
    out: set[AclBinding] = set()
    for acl in source_acls:
        if acl.resource_type != ResourceType.TOPIC:
            continue
        if acl.permission_type == AclPermissionType.ALLOW and acl.operation == AclOperation.WRITE:
            continue
        if acl.pattern_type == PatternType.LITERAL:
            if acl.resource_name == _WILDCARD or not should_replicate(acl.resource_name):
                continue
        elif acl.pattern_type == PatternType.PREFIXED:
            if not _prefix_selects_only_mirrored(acl.resource_name, source_alias, policy, should_replicate, topics):
                continue
        else:
            continue
        operation = acl.operation
        if acl.permission_type == AclPermissionType.ALLOW and operation == AclOperation.ALL:
            operation = AclOperation.READ
        out.add(AclBinding(ResourceType.TOPIC, policy.format_remote_topic(source_alias, acl.resource_name),
                           acl.pattern_type, acl.principal, acl.host, operation, acl.permission_type))
    return sorted(out, key=_order)


def _prefix_selects_only_mirrored(prefix: str, source_alias: str, policy: ReplicationPolicy,
                                  should_replicate: Callable[[str], bool], topics: list[str]) -> bool:
    selected = [t for t in topics if t.startswith(prefix)]
    if not selected:
        return False
    remote_prefix = policy.format_remote_topic(source_alias, prefix)
    return all(should_replicate(t) and policy.format_remote_topic(source_alias, t).startswith(remote_prefix)
               for t in selected)


def missing_acls(wanted: Iterable[AclBinding], existing: Iterable[AclBinding]) -> list[AclBinding]:
    """The bindings of ``wanted`` not in ``existing``, in a stable order (nothing is ever removed)."""
    have = set(existing)
    return sorted({b for b in wanted if b not in have}, key=_order)


def _order(binding: AclBinding) -> tuple:
    return (binding.resource_name, int(binding.pattern_type), binding.principal, binding.host,
            int(binding.operation), int(binding.permission_type))


class TopicAclSync:
    """One flow's ACL sync; :meth:`sync_topic_acls` is one round, run every ``sync.topic.acls.interval.seconds``.

    ``should_replicate``: the flow's topic selection; ``report_warning``: the connector
    context's, to show a condition in the connector's status.
    """

    def __init__(self, source_admin: Admin, target_admin: Admin, source_alias: str, target_alias: str,
                 policy: ReplicationPolicy, should_replicate: Callable[[str], bool],
                 report_warning: Callable[[str], None]):
        self.source_admin = source_admin
        self.target_admin = target_admin
        self.source_alias = source_alias
        self.target_alias = target_alias
        self.policy = policy
        self.should_replicate = should_replicate
        self.report_warning = report_warning
        self._reported: set[str] = set()
        self._failed: set[AclBinding] = set()
        # Series at 0 from the start, so increase() and alerts see the first error too.
        for reason in (SOURCE_DESCRIBE_DENIED, TARGET_ALTER_DENIED):
            metrics.ACL_SYNC_ERRORS.labels(source_alias, target_alias, reason)

    async def sync_topic_acls(self) -> None:
        """Describe the source's topic ACLs, translate them, and create the ones the target lacks."""
        try:
            source_acls = await self.source_admin.describe_acls(_TOPIC_ACLS)
        except SecurityDisabledError:
            self._once("source-no-authorizer", logging.INFO,
                       f"Source cluster {self.source_alias} runs no authorizer: there are no topic ACLs to sync")
            return
        except ClusterAuthorizationFailedError as exc:
            self._denied(SOURCE_DESCRIBE_DENIED,
                         f"Topic ACLs are not synced from {self.source_alias} to {self.target_alias}: the source "
                         f"cluster refuses to describe ACLs to the mirror's principal ({exc}). Grant it DESCRIBE on "
                         f"the source cluster (kafka-acls.sh --add --allow-principal User:<mirror> --operation "
                         f"Describe --cluster), or set sync.topic.acls.enabled=false. Records are still mirrored.")
            return
        self._recovered(SOURCE_DESCRIBE_DENIED)
        wanted = remote_acls(source_acls, self.source_alias, self.policy, self.should_replicate,
                             await self.source_admin.list_topics())
        if not wanted:
            return
        try:
            missing = missing_acls(wanted, await self.target_admin.describe_acls(_TOPIC_ACLS))
            failures = await self.target_admin.create_acls(missing) if missing else []
        except SecurityDisabledError:
            self._once("target-no-authorizer", logging.WARNING,
                       f"Target cluster {self.target_alias} runs no authorizer: the {len(wanted)} topic ACL(s) "
                       f"synced from {self.source_alias} cannot be created there")
            return
        except ClusterAuthorizationFailedError as exc:
            self._denied(TARGET_ALTER_DENIED,
                         f"Topic ACLs are not synced from {self.source_alias} to {self.target_alias}: the target "
                         f"cluster refuses to describe or create ACLs for the mirror's principal ({exc}). Grant it "
                         f"ALTER on the target cluster (kafka-acls.sh --add --allow-principal User:<mirror> "
                         f"--operation Alter --cluster), or set sync.topic.acls.enabled=false. Records are still "
                         f"mirrored.")
            return
        self._recovered(TARGET_ALTER_DENIED)
        failed = {binding for binding, _ in failures}
        for binding, error in failures:
            if binding not in self._failed:
                log.warning("Could not create ACL %s on %s (retrying every interval, logged once): %s",
                            binding, self.target_alias, error)
        self._failed = failed
        for binding in missing:
            if binding not in failed:
                log.info("Synced ACL to %s: %s", self.target_alias, binding)

    def _denied(self, reason: str, message: str) -> None:
        metrics.ACL_SYNC_ERRORS.labels(self.source_alias, self.target_alias, reason).inc()
        if reason not in self._reported:
            self.report_warning(message)
        self._once(reason, logging.WARNING, message)

    def _recovered(self, reason: str) -> None:
        if reason in self._reported:
            self._reported.discard(reason)
            log.info("Topic ACL sync from %s to %s works again (%s no longer)", self.source_alias,
                     self.target_alias, reason)

    def _once(self, condition: str, level: int, message: str) -> None:
        if condition not in self._reported:
            self._reported.add(condition)
            log.log(level, message)
