"""CreateTopics split under a KRaft controller's per-request record limit (mirrorline.clients.kafka_admin)."""

from __future__ import annotations

from mirrorline.clients import kafka_admin


def test_requests_are_split_by_records_in_order():
    topics = [(f"t{i}", 4, 1, {}) for i in range(2_000)]  # the scale benchmark's 8,000 partitions
    chunks = kafka_admin.create_topics_chunks(topics)
    assert [t for chunk in chunks for t in chunk] == topics
    assert all(sum(1 + t[1] + len(t[3]) for t in chunk) <= kafka_admin.MAX_RECORDS_PER_CREATE_TOPICS
               for chunk in chunks)
    assert len(chunks) == 2
    assert kafka_admin.create_topics_chunks([("huge", 20_000, 1, {})]) == [[("huge", 20_000, 1, {})]]
