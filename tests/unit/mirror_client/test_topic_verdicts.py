"""A flow's topic verdicts are remembered per topic filter, and a new filter decides afresh."""

from mirrorline.connectors.mirror_client.filters import TopicFilter
from mirrorline.connectors.mirror_client.policies import DefaultReplicationPolicy
from mirrorline.connectors.source_mirror.topics import TopicSelection


class CountingFilter(TopicFilter):
    """A TopicFilter that counts the names it is asked about."""

    asked = 0

    def should_replicate_topic(self, topic: str) -> bool:
        self.asked += 1
        return super().should_replicate_topic(topic)


def test_verdicts_are_remembered_until_the_filter_is_replaced():
    first = CountingFilter({"topics": "orders.*"})
    selection = TopicSelection("A", "B", DefaultReplicationPolicy(), first, heartbeats_enabled=True)
    names = ["orders", "orders-eu", "payments", "heartbeats", "mm2-offset-syncs.B.internal", "B.orders"]
    assert [selection.should_replicate(n) for n in names] == [True, True, False, True, False, False]
    asked = first.asked
    for _ in range(3):  # three more refreshes over the same topics
        assert [selection.should_replicate(n) for n in names] == [True, True, False, True, False, False]
    assert first.asked == asked

    selection.topic_filter = CountingFilter({"topics": "payments"})  # a new stored topic selection
    assert [selection.should_replicate(n) for n in names] == [False, False, True, True, False, False]
    assert selection.topic_filter.asked == len(names)


def test_an_illegal_remote_name_is_skipped_and_reported_once():
    reports = []
    selection = TopicSelection("A" * 250, "B", DefaultReplicationPolicy(), TopicFilter({"topics": ".*"}),
                               heartbeats_enabled=False, on_skip=reports.append)
    for _ in range(3):
        assert selection.should_replicate("orders") is False
    assert len(reports) == 1 and "over Kafka's limit" in reports[0]
    assert "orders" in selection.skipped
