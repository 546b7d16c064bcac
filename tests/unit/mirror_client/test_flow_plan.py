"""The pure parts of whole-flow failover plans: topic choice, group changes, bad input, the printed plan."""

from __future__ import annotations

import pytest
from aiokafka import TopicPartition

from mirrorline.connectors.mirror_client.filters import TopicFilter
from mirrorline.connectors.mirror_client.policies import DefaultReplicationPolicy
from mirrorline.connectors.mm2.rpo import PartitionRpo, TopicRpo
from mirrorline.connectors.mm2.flow_plan import FlowPlan, GroupMove, PartitionMove, format_plan, group_pattern, mirrored_topics
from mirrorline.api import ConfigError


def test_mirrored_topics_follow_the_flow_filter_and_leave_out_internal_heartbeat_and_cyclic_topics():
    policy = DefaultReplicationPolicy()
    source = {"orders": 3, "payments": 1, "heartbeats": 1, "B.orders": 2, "mm2-offsets.A.internal": 5, "__consumer_offsets": 50}
    chosen = mirrored_topics(policy, TopicFilter({"topics": ".*"}), "A", "B", source, {})
    assert chosen == [("orders", "A.orders"), ("payments", "A.payments")]
    only_orders = mirrored_topics(policy, TopicFilter({"topics": "orders"}), "A", "B", source, {})
    assert only_orders == [("orders", "A.orders")]


def test_group_pattern_rejects_a_bad_regex_naming_it():
    assert group_pattern("app-.*").fullmatch("app-1")
    with pytest.raises(ConfigError, match=r"--groups 'app-\(\[' is not a valid regular expression"):
        group_pattern("app-([")


def test_group_changes_skip_known_positions_backwards_moves_and_unknown_positions():
    tp = [TopicPartition("A.orders", p) for p in range(4)]
    move = GroupMove("app", "Empty", [
        PartitionMove(tp[0], None, 5, 10, None),          # new: committed
        PartitionMove(tp[1], None, 5, 10, 10),            # already there: unchanged
        PartitionMove(tp[2], None, 5, 10, 12),            # further ahead: kept unless allowed
        PartitionMove(tp[3], None, 5, None, None),        # cannot be placed: never committed
    ])
    assert move.changes(allow_backwards=False) == {tp[0]: (10, "")}
    assert move.changes(allow_backwards=True) == {tp[0]: (10, ""), tp[2]: (10, "")}
    assert not move.active and GroupMove("app", "Stable").active


def test_the_printed_plan_shows_the_recovery_point_groups_and_steps():
    partitions = [PartitionRpo(TopicPartition("orders", 0), TopicPartition("A.orders", 0), 7, 2.5, 1000),
                  PartitionRpo(TopicPartition("orders", 1), TopicPartition("A.orders", 1), 0, 0.0, 1000)]
    move = GroupMove("app", "Dead", [PartitionMove(TopicPartition("A.orders", 0), TopicPartition("orders", 0),
                                                   30, 30, None, how="exact", rereads=0)])
    plan = FlowPlan("Failover", "A", "B", [TopicRpo("orders", "A.orders", partitions)], "", [move],
                    ["commit 1 offset(s) of group app on B"])
    text = format_plan(plan)
    assert plan.missing == 7
    assert "orders" in text and "total: 7 record(s), up to 2.5 s of data" in text
    assert "group app (Dead on B): 1 partition(s), 0 re-read(s)" in text
    assert "1. commit 1 offset(s) of group app on B" in text
    unknown = FlowPlan("Failover", "A", "B", None, "cluster A is unreachable (refused)", [], [])
    assert unknown.missing is None and "unknown: cluster A is unreachable (refused)" in format_plan(unknown)


def test_untranslated_partitions_are_listed_counted_and_refused_unless_allowed(capsys):
    from mirrorline.api import ConnectError
    from mirrorline.connectors.mm2.untranslated import Untranslated, refuse_partial, report_partial

    tp = [TopicPartition("A.orders", p) for p in range(3)]
    move = GroupMove("app", "Dead", [PartitionMove(tp[0], TopicPartition("orders", 0), 30, 30, None, rereads=0)],
                     untranslated=[Untranslated("app", tp[1], 1234, 3766, 1234, "no checkpoint"),
                                   Untranslated("app", tp[2], 0, 0, 0, "no checkpoint")])  # an empty partition
    lost = GroupMove("audit", "Empty", [], [Untranslated("audit", tp[0], None, None, None, "unknown")])
    plan = FlowPlan("Failover", "A", "B", [], "", [move, lost], [])
    text = format_plan(plan)
    assert ("without translation: 2 partition(s) of 2 group(s) with a position on A (listed below): at "
            "auto.offset.reset=latest a consumer skips 3766 (+ unknown on 1 partition(s)) record(s), at earliest "
            "it re-reads 1234 (+ unknown on 1 partition(s))") in text
    assert "group app (Dead on B): 1 partition(s), 0 re-read(s), 1 WITHOUT TRANSLATION" in text
    assert ("NO TRANSLATION: A.orders-1 (position 1234 on A): no checkpoint; at auto.offset.reset=latest it skips "
            "3766 record(s), at earliest it re-reads 1234") in text
    assert "no translation needed: A.orders-2 (position 0 on A): nothing to read there" in text
    with pytest.raises(ConnectError) as refused:
        refuse_partial(plan.untranslated, "A", "B", allow_partial=False)
    message = str(refused.value)
    assert "\n" not in message and message.startswith("no translation on B for 2 partition(s) with a position on A: "
                                                      "group app: A.orders-1; group audit: A.orders-0;")
    assert "--allow-partial moves the rest; nothing was changed" in message
    refuse_partial(plan.untranslated, "A", "B", allow_partial=True)
    refuse_partial(move.untranslated[1:], "A", "B", allow_partial=False)  # harmless alone: no refusal
    report_partial(plan.untranslated, "B")
    assert "left without translation on B (--allow-partial; a consumer starts them at auto.offset.reset): group " \
           "app: A.orders-1; group audit: A.orders-0" in capsys.readouterr().out
