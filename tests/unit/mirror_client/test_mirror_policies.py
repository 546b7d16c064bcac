"""Table tests for MM2 replication policies and cycle detection (mm2.md §2)."""

import pytest

from mirrorline.connectors.mirror_client.policies import (
    DefaultReplicationPolicy,
    IdentityReplicationPolicy,
    ReplicationPolicy,
    SuffixReplicationPolicy,
    is_cycle,
    java_split,
)

SEP = "replication.policy.separator"
ISEP = "replication.policy.internal.topic.separator.enabled"


@pytest.mark.parametrize(
    "text, sep, parts",
    [
        ("a.b", ".", ["a", "b"]),
        ("a.", ".", ["a"]),
        (".a", ".", ["", "a"]),
        ("a..b", ".", ["a", "", "b"]),
        ("...", ".", []),
        ("a..", ".", ["a"]),
        ("", ".", [""]),
        ("abc", ".", ["abc"]),
        ("a__b__", "__", ["a", "b"]),
        ("a___b", "__", ["a", "_b"]),
        ("a.b", "", ["a", ".", "b"]),
        ("", "", [""]),
    ],
)
def test_java_split(text, sep, parts):
    assert java_split(text, sep) == parts


def test_base_class_is_abstract():
    with pytest.raises(TypeError):
        ReplicationPolicy()


# ---- DefaultReplicationPolicy ----------------------------------------------------------------


@pytest.mark.parametrize(
    "topic, source, upstream, original",
    [
        ("orders", None, None, "orders"),
        ("A.orders", "A", "orders", "orders"),
        ("B.A.t", "B", "A.t", "t"),
        ("a.", None, None, "a."),
        (".a", "", "a", "a"),
        ("a..b", "a", ".b", "b"),
        ("...", None, None, "..."),
        ("A.heartbeats", "A", "heartbeats", "heartbeats"),
        ("", None, None, ""),
    ],
)
def test_default_policy_table(topic, source, upstream, original):
    p = DefaultReplicationPolicy()
    assert p.topic_source(topic) == source
    assert p.upstream_topic(topic) == upstream
    assert p.original_topic(topic) == original


def test_default_policy_names():
    p = DefaultReplicationPolicy()
    assert p.separator == "."
    assert p.format_remote_topic("A", "orders") == "A.orders"
    assert p.heartbeats_topic() == "heartbeats"
    assert p.offset_syncs_topic("B") == "mm2-offset-syncs.B.internal"
    assert p.checkpoints_topic("A") == "A.checkpoints.internal"


@pytest.mark.parametrize(
    "topic, heartbeats, checkpoints, mm2_internal, internal",
    [
        ("heartbeats", True, False, False, False),
        ("A.heartbeats", True, False, False, False),
        ("B.A.heartbeats", True, False, False, False),
        ("heartbeats.x", False, False, False, False),
        ("A.checkpoints.internal", False, True, True, True),
        ("mm2-offset-syncs.B.internal", False, False, True, True),
        ("mm2-offsets.A.internal", False, False, True, True),
        ("connect-offsets-internal", False, False, False, True),
        ("__consumer_offsets", False, False, False, True),
        (".hidden", False, False, False, True),
        ("orders", False, False, False, False),
        ("A.orders", False, False, False, False),
    ],
)
def test_default_policy_classification(topic, heartbeats, checkpoints, mm2_internal, internal):
    p = DefaultReplicationPolicy()
    assert p.is_heartbeats_topic(topic) is heartbeats
    assert p.is_checkpoints_topic(topic) is checkpoints
    assert p.is_mm2_internal_topic(topic) is mm2_internal
    assert p.is_internal_topic(topic) is internal


def test_custom_separator():
    p = DefaultReplicationPolicy({SEP: "_"})
    assert p.format_remote_topic("A", "orders") == "A_orders"
    assert p.offset_syncs_topic("B") == "mm2-offset-syncs_B_internal"
    assert p.checkpoints_topic("A") == "A_checkpoints_internal"
    assert p.heartbeats_topic() == "heartbeats"
    assert p.topic_source("B_A_orders") == "B"
    assert p.upstream_topic("B_A_orders") == "A_orders"
    assert p.original_topic("B_A_orders") == "orders"
    assert p.topic_source("A.orders") is None
    assert p.is_checkpoints_topic("A_checkpoints_internal")
    assert not p.is_checkpoints_topic("A.checkpoints.internal")
    assert p.is_mm2_internal_topic("mm2-offset-syncs_B_internal")
    assert not p.is_mm2_internal_topic("mm2-offset-syncs.B.internal")
    # the fixed Connect/Kafka rules still apply
    assert p.is_internal_topic("mm2-offset-syncs.B.internal")
    assert p.is_heartbeats_topic("B_A_heartbeats")


def test_multichar_separator():
    p = DefaultReplicationPolicy({SEP: "__"})
    assert p.format_remote_topic("A", "t") == "A__t"
    assert p.topic_source("A__B__t") == "A"
    assert p.upstream_topic("A__B__t") == "B__t"
    assert p.original_topic("A__B__t") == "t"
    assert p.topic_source("t__") is None


@pytest.mark.parametrize("flag", ["false", "FALSE", "no", "0", False])
def test_internal_separator_disabled(flag):
    p = DefaultReplicationPolicy({SEP: "_", ISEP: flag})
    assert p.format_remote_topic("A", "orders") == "A_orders"
    assert p.offset_syncs_topic("B") == "mm2-offset-syncs.B.internal"
    assert p.checkpoints_topic("A") == "A.checkpoints.internal"
    assert p.is_checkpoints_topic("A.checkpoints.internal")
    assert p.is_mm2_internal_topic("x.internal")
    assert not p.is_mm2_internal_topic("x_internal")


@pytest.mark.parametrize("flag", ["true", "True", True])
def test_internal_separator_enabled_explicitly(flag):
    p = DefaultReplicationPolicy({SEP: "_", ISEP: flag})
    assert p.offset_syncs_topic("B") == "mm2-offset-syncs_B_internal"


def test_internal_separator_flag_ignored_without_separator_key():
    p = DefaultReplicationPolicy({ISEP: "false"})
    assert p.internal_topic_separator_enabled is True
    p.configure({SEP: "_"})
    assert p.offset_syncs_topic("B") == "mm2-offset-syncs_B_internal"


def test_configure_without_separator_keeps_previous():
    p = DefaultReplicationPolicy({SEP: "-"})
    p.configure({"unrelated": "x"})
    assert p.separator == "-"


def test_configure_rejects_null_separator():
    with pytest.raises(ValueError):
        DefaultReplicationPolicy({SEP: None})


# ---- IdentityReplicationPolicy ---------------------------------------------------------------


def test_identity_policy_without_alias():
    p = IdentityReplicationPolicy()
    assert p.format_remote_topic("A", "orders") == "orders"
    assert p.topic_source("orders") is None
    assert p.upstream_topic("orders") == "orders"
    assert p.original_topic("orders") == "orders"


def test_identity_policy_with_alias():
    p = IdentityReplicationPolicy({"source.cluster.alias": "A"})
    assert p.format_remote_topic("A", "orders") == "orders"
    assert p.topic_source("orders") == "A"
    assert p.topic_source("B.orders") == "A"
    assert p.upstream_topic("B.orders") == "B.orders"
    assert p.original_topic("B.orders") == "B.orders"


def test_identity_policy_heartbeats_use_default_rules():
    p = IdentityReplicationPolicy({"source.cluster.alias": "X"})
    assert p.format_remote_topic("A", "heartbeats") == "A.heartbeats"
    assert p.topic_source("A.heartbeats") == "A"
    assert p.upstream_topic("B.A.heartbeats") == "A.heartbeats"
    assert p.original_topic("B.A.heartbeats") == "heartbeats"
    assert p.is_heartbeats_topic("B.A.heartbeats")
    # suffix match, not equality
    assert p.format_remote_topic("A", "myheartbeats") == "A.myheartbeats"
    assert p.topic_source("myheartbeats") is None
    assert not p.is_heartbeats_topic("myheartbeats")
    assert p.format_remote_topic("A", "heartbeats.x") == "heartbeats.x"


def test_identity_policy_honours_separator():
    p = IdentityReplicationPolicy({SEP: "_", "source.cluster.alias": "A"})
    assert p.format_remote_topic("A", "heartbeats") == "A_heartbeats"
    assert p.checkpoints_topic("A") == "A_checkpoints_internal"


# ---- SuffixReplicationPolicy (mirrorline extension) --------------------------------------------


@pytest.mark.parametrize(
    "topic, source, upstream, original",
    [
        ("orders", None, None, "orders"),
        ("orders.A", "A", "orders", "orders"),
        ("orders.A.B", "B", "orders.A", "orders"),
        ("orders.", None, None, "orders."),
        (".A", None, None, ".A"),
        ("heartbeats.A", "A", "heartbeats", "heartbeats"),
    ],
)
def test_suffix_policy_table(topic, source, upstream, original):
    p = SuffixReplicationPolicy()
    assert p.topic_source(topic) == source
    assert p.upstream_topic(topic) == upstream
    assert p.original_topic(topic) == original


def test_suffix_policy_names_and_separator():
    p = SuffixReplicationPolicy()
    assert p.format_remote_topic("A", "orders") == "orders.A"
    assert p.is_heartbeats_topic("heartbeats.A.B")
    assert p.offset_syncs_topic("B") == "mm2-offset-syncs.B.internal"
    p = SuffixReplicationPolicy({SEP: "__"})
    assert p.format_remote_topic("A", "orders") == "orders__A"
    assert p.topic_source("my_orders__A") == "A"
    assert p.upstream_topic("my_orders__A") == "my_orders"


# ---- cycle detection ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "target, topic, cycle",
    [
        ("A", "orders", False),
        ("B", "A.orders", False),
        ("A", "A.orders", True),  # B->A flow sees A.orders on B
        ("A", "A.B.x", True),
        ("B", "A.B.x", True),  # passed through B
        ("C", "A.B.x", False),
        ("A", "B.A.orders", True),  # on C, flow C->A
        ("D", "B.A.orders", False),
        ("A", "a.", False),
        ("", ".a", True),
    ],
)
def test_is_cycle_default(target, topic, cycle):
    assert is_cycle(DefaultReplicationPolicy(), target, topic) is cycle


def test_is_cycle_custom_separator():
    p = DefaultReplicationPolicy({SEP: "_"})
    assert is_cycle(p, "B", "A_B_x")
    assert not is_cycle(p, "B", "A.B.x")


def test_is_cycle_identity():
    p = IdentityReplicationPolicy({"source.cluster.alias": "A"})
    assert not is_cycle(p, "B", "orders")
    assert not is_cycle(p, "B", "B.orders")
    assert is_cycle(p, "B", "A.B.heartbeats")
    assert not is_cycle(IdentityReplicationPolicy(), "B", "orders")


def test_is_cycle_suffix():
    p = SuffixReplicationPolicy()
    assert is_cycle(p, "A", "x.B.A")
    assert is_cycle(p, "B", "x.B.A")
    assert not is_cycle(p, "C", "x.B.A")


def test_is_cycle_terminates_on_looping_policy():
    class Looping(DefaultReplicationPolicy):
        def upstream_topic(self, topic):
            return "y" if topic == "x" else "x"

        def topic_source(self, topic):
            return "Z"

    assert not is_cycle(Looping(), "B", "x")
    assert Looping().original_topic("x") in {"x", "y"}
