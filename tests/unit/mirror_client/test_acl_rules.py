"""Topic ACL sync rules (mm2.md §3.5, plus PREFIXED bindings) and one sync round against fake admins."""

from __future__ import annotations

import logging

import pytest
from mirrorline.api import ClusterAuthorizationFailedError, KafkaError
from mirrorline.api import SecurityDisabledError as SecurityDisabled
from prometheus_client import REGISTRY

from mirrorline.api.clients import AclBinding, AclFilter, AclOperation, AclPermissionType, PatternType, ResourceType

from mirrorline.connectors.mirror_client.filters import TopicFilter
from mirrorline.connectors.mirror_client.policies import (
    DefaultReplicationPolicy,
    IdentityReplicationPolicy,
    SuffixReplicationPolicy,
)
from mirrorline.connectors.source_mirror import acls as acl_sync
from mirrorline.connectors.source_mirror.acls import TopicAclSync, missing_acls, remote_acls
from mirrorline.connectors.source_mirror.topics import TopicSelection

ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
LITERAL, PREFIXED = PatternType.LITERAL, PatternType.PREFIXED
ALL, READ, WRITE, DESCRIBE = AclOperation.ALL, AclOperation.READ, AclOperation.WRITE, AclOperation.DESCRIBE

#: Topics on the source; the flow mirrors ``orders``, ``payments`` and ``events-*`` but not ``events-secret``.
SOURCE_TOPICS = ["orders", "payments", "events-1", "events-2", "events-secret", "audit-1", "other"]
FILTER = {"topics": "orders, payments, events-.*, audit-.*", "topics.exclude": "events-secret"}


def acl(name: str, operation=READ, permission=ALLOW, pattern=LITERAL, principal="User:app", host="*",
        resource=ResourceType.TOPIC) -> AclBinding:
    return AclBinding(resource, name, pattern, principal, host, operation, permission)


def selection(policy) -> TopicSelection:
    return TopicSelection("A", "B", policy, TopicFilter(FILTER), heartbeats_enabled=True)


def translate(policy, *source_acls: AclBinding) -> list[AclBinding]:
    return remote_acls(source_acls, "A", policy, selection(policy).should_replicate, SOURCE_TOPICS)


DEFAULT = DefaultReplicationPolicy()
IDENTITY = IdentityReplicationPolicy({"source.cluster.alias": "A"})


@pytest.mark.parametrize("policy, source, expected", [
    # LITERAL bindings of mirrored topics, renamed by the policy (MM2)
    (DEFAULT, acl("orders"), [acl("A.orders")]),
    (IDENTITY, acl("orders"), [acl("orders")]),
    (DEFAULT, acl("orders", DESCRIBE, host="10.0.0.7", principal="User:ops"),
     [acl("A.orders", DESCRIBE, host="10.0.0.7", principal="User:ops")]),
    # ALLOW WRITE is never synced; ALLOW ALL becomes ALLOW READ
    (DEFAULT, acl("orders", WRITE), []),
    (DEFAULT, acl("orders", ALL), [acl("A.orders", READ)]),
    (IDENTITY, acl("orders", ALL), [acl("orders", READ)]),
    # DENY bindings are copied as they are, DENY WRITE and DENY ALL included
    (DEFAULT, acl("orders", WRITE, DENY), [acl("A.orders", WRITE, DENY)]),
    (DEFAULT, acl("orders", ALL, DENY, host="192.0.2.1"), [acl("A.orders", ALL, DENY, host="192.0.2.1")]),
    # topics the flow does not mirror, the wildcard, other resource types
    (DEFAULT, acl("other"), []),
    (DEFAULT, acl("events-secret"), []),
    (DEFAULT, acl("__consumer_offsets"), []),
    (DEFAULT, acl("*"), []),
    (DEFAULT, acl("orders", resource=ResourceType.GROUP), []),
    (DEFAULT, acl("kafka-cluster", DESCRIBE, resource=ResourceType.CLUSTER), []),
    # a mirrored name that does not exist yet on the source is synced (MM2 asks the filter only)
    (DEFAULT, acl("payments"), [acl("A.payments")]),
    # PREFIXED (beyond MM2): synced with the remote prefix when every topic it selects is mirrored
    (DEFAULT, acl("audit-", pattern=PREFIXED), [acl("A.audit-", pattern=PREFIXED)]),
    (IDENTITY, acl("audit-", pattern=PREFIXED), [acl("audit-", pattern=PREFIXED)]),
    (DEFAULT, acl("audit-", ALL, pattern=PREFIXED), [acl("A.audit-", READ, pattern=PREFIXED)]),
    (DEFAULT, acl("audit-", WRITE, pattern=PREFIXED), []),
    (DEFAULT, acl("audit-", WRITE, DENY, pattern=PREFIXED), [acl("A.audit-", WRITE, DENY, pattern=PREFIXED)]),
    # ... but not when it also selects a topic the flow leaves out, or selects no topic at all
    (DEFAULT, acl("events-", pattern=PREFIXED), []),
    (DEFAULT, acl("ord", pattern=PREFIXED), [acl("A.ord", pattern=PREFIXED)]),
    (DEFAULT, acl("o", pattern=PREFIXED), []),  # also selects "other"
    (DEFAULT, acl("nothing-", pattern=PREFIXED), []),
    # MATCH/ANY are filter-only pattern types
    (DEFAULT, acl("orders", pattern=PatternType.MATCH), []),
], ids=lambda v: str(v) if isinstance(v, AclBinding) else None)
def test_translation(policy, source, expected):
    assert translate(policy, source) == expected


def test_prefixed_binding_is_not_synced_when_the_policy_does_not_keep_the_prefix():
    suffix = SuffixReplicationPolicy()
    assert translate(suffix, acl("orders")) == [acl("orders.A")]
    assert translate(suffix, acl("audit-", pattern=PREFIXED)) == []


def test_identity_policy_keeps_renaming_heartbeats_so_a_prefix_covering_them_is_not_synced():
    topics = ["heartbeats", "hb-1"]
    sel = TopicSelection("A", "B", IDENTITY, TopicFilter({"topics": "hb-.*"}), heartbeats_enabled=True)
    assert remote_acls([acl("h", pattern=PREFIXED)], "A", IDENTITY, sel.should_replicate, topics) == []
    assert remote_acls([acl("heartbeats")], "A", IDENTITY, sel.should_replicate, topics) == [acl("A.heartbeats")]


def test_bindings_that_translate_alike_are_returned_once_in_a_stable_order():
    result = translate(DEFAULT, acl("payments"), acl("orders", ALL), acl("orders"), acl("orders", WRITE))
    assert result == [acl("A.orders"), acl("A.payments")]


@pytest.mark.parametrize("wanted, existing, missing", [
    ([acl("A.orders")], [], [acl("A.orders")]),
    ([acl("A.orders")], [acl("A.orders")], []),
    # a binding differing in any field is another binding
    ([acl("A.orders")], [acl("A.orders", host="10.0.0.1"), acl("A.orders", DESCRIBE),
                         acl("A.orders", pattern=PREFIXED), acl("A.orders", principal="User:x")], [acl("A.orders")]),
    # the target's own bindings are never removed: only what is missing comes back
    ([acl("A.orders"), acl("A.payments")], [acl("A.orders"), acl("A.orders", WRITE), acl("local")],
     [acl("A.payments")]),
])
def test_diff_against_the_target(wanted, existing, missing):
    assert missing_acls(wanted, existing) == missing


# --- one sync round, with the admin requests replaced ------------------------------------------


class FakeCluster:
    """One cluster's admin client, as far as the ACL sync asks it; ``error`` is raised by every ACL request."""

    def __init__(self, acls=(), topics=(), error=None, refuse=()):
        self.acls = list(acls)
        self.topics = list(topics)
        self.error = error
        self.refuse = set(refuse)
        self.created: list[AclBinding] = []

    async def list_topics(self):
        return self.topics

    async def describe_acls(self, acl_filter=AclFilter()):
        if self.error:
            raise self.error("refused")
        return [b for b in self.acls if b.resource_type == acl_filter.resource_type]

    async def create_acls(self, bindings):
        if self.error:
            raise self.error("refused")
        failures = []
        for binding in bindings:
            if binding in self.refuse:
                failures.append((binding, KafkaError("[Error 42] InvalidRequestError: bad binding", code=42)))
            else:
                self.acls.append(binding)
                self.created.append(binding)
        return failures


@pytest.fixture
def fake_requests():
    return None


def make_sync(source, target, warnings):
    return TopicAclSync(source, target, "A", "B", DEFAULT, selection(DEFAULT).should_replicate, warnings.append)


def errors(reason: str) -> float:
    value = REGISTRY.get_sample_value("kafka_connect_mirror_source_connector_acl_sync_errors_total",
                                      {"source": "A", "target": "B", "reason": reason})
    return value or 0.0


async def test_a_round_creates_only_missing_bindings_and_a_second_round_writes_nothing(fake_requests):
    source = FakeCluster([acl("orders"), acl("orders", WRITE), acl("payments", ALL),
                          acl("orders", resource=ResourceType.GROUP)], SOURCE_TOPICS)
    target = FakeCluster([acl("A.orders"), acl("A.orders", WRITE, principal="User:local")])
    warnings: list[str] = []
    sync = make_sync(source, target, warnings)
    await sync.sync_topic_acls()
    assert target.created == [acl("A.payments")]
    assert acl("A.orders", WRITE, principal="User:local") in target.acls
    await sync.sync_topic_acls()
    assert target.created == [acl("A.payments")]
    assert warnings == []


async def test_no_authorizer_on_the_source_is_not_an_error(fake_requests):
    target = FakeCluster()
    warnings: list[str] = []
    before = errors(acl_sync.SOURCE_DESCRIBE_DENIED)
    await make_sync(FakeCluster(error=SecurityDisabled, topics=SOURCE_TOPICS), target, warnings).sync_topic_acls()
    assert warnings == [] and target.created == []
    assert errors(acl_sync.SOURCE_DESCRIBE_DENIED) == before


@pytest.mark.parametrize("denied_side, reason, needed", [
    ("source", acl_sync.SOURCE_DESCRIBE_DENIED, "DESCRIBE on the source cluster"),
    ("target", acl_sync.TARGET_ALTER_DENIED, "ALTER on the target cluster"),
])
async def test_a_denied_principal_is_reported_once_and_counted_every_round(fake_requests, caplog, denied_side,
                                                                           reason, needed):
    source = FakeCluster([acl("orders")], SOURCE_TOPICS)
    target = FakeCluster()
    (source if denied_side == "source" else target).error = ClusterAuthorizationFailedError
    warnings: list[str] = []
    sync = make_sync(source, target, warnings)
    before = errors(reason)
    with caplog.at_level(logging.WARNING, logger=acl_sync.__name__):
        for _ in range(3):
            await sync.sync_topic_acls()
    assert len(warnings) == 1 and needed in warnings[0], warnings
    assert [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING] == warnings
    assert errors(reason) == before + 3

    # once the grant is there the bindings are synced, and a later refusal is reported again
    (source if denied_side == "source" else target).error = None
    await sync.sync_topic_acls()
    assert target.created == [acl("A.orders")]
    (source if denied_side == "source" else target).error = ClusterAuthorizationFailedError
    with caplog.at_level(logging.WARNING, logger=acl_sync.__name__):
        caplog.clear()
        await sync.sync_topic_acls()
    assert len([r for r in caplog.records if r.levelno == logging.WARNING]) == 1


async def test_a_binding_the_target_refuses_is_logged_once_and_the_others_are_created(fake_requests, caplog):
    source = FakeCluster([acl("orders"), acl("payments")], SOURCE_TOPICS)
    target = FakeCluster(refuse=[acl("A.orders")])
    sync = make_sync(source, target, [])
    with caplog.at_level(logging.WARNING, logger=acl_sync.__name__):
        await sync.sync_topic_acls()
        await sync.sync_topic_acls()
    assert target.created == [acl("A.payments")]
    assert len([r for r in caplog.records if r.levelno == logging.WARNING]) == 1
