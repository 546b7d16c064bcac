"""KafkaOffsetStore applies its own writes in ``put`` and lets its tail pass over them undecoded.

A pure unit test: the store's log is replaced by one that acknowledges writes at increasing
positions and lets the test deliver records to the tail callback in any order (the real
interleavings are covered against a broker in tests/integration/test_kafka_stores.py).
"""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

from mirrorline.storage import KafkaOffsetStore


class _Log:
    """Acknowledges each write at the next offset of partition 0 and keeps what was written."""

    def __init__(self) -> None:
        self.written: list[SimpleNamespace] = []

    async def send_batch(self, records, partition=None):
        out = []
        for key, value in records:
            record = SimpleNamespace(topic="offsets", partition=0, offset=len(self.written), key=key, value=value)
            self.written.append(record)
            out.append(SimpleNamespace(partition=0, offset=record.offset))
        return out

    async def read_to_end(self) -> None:
        return None


def _store() -> tuple[KafkaOffsetStore, _Log, list]:
    store = KafkaOffsetStore("offsets", {"bootstrap.servers": "unused:9092"})
    store.log = _Log()
    applied = []
    apply = store._apply

    def recording_apply(connector, partition, offset, at, key=None):
        applied.append((partition["partition"], offset, at))
        return apply(connector, partition, offset, at, key)

    store._apply = recording_apply
    return store, store.log, applied


def _foreign(offset: int, partition: int, value: int) -> SimpleNamespace:
    key = b'["src",{"cluster":"A","partition":%d,"topic":"t"}]' % partition
    return SimpleNamespace(topic="offsets", partition=0, offset=offset, key=key, value=b'{"offset":%d}' % value)


def _tail_during_put(store: KafkaOffsetStore, log: _Log, fail_after: int | None = None, before=None) -> None:
    """Make the log deliver each record to the tail as it is written, before put's acknowledgements
    (as a flush of thousands of partitions meets its tail), failing after ``fail_after`` records;
    ``before`` runs first (e.g. another worker's write landing ahead)."""
    original = log.send_batch

    async def tail_while_writing(records, partition=None):
        if before is not None:
            before()
        records = list(records)
        metadata = await original(records[:fail_after] if fail_after is not None else records, partition)
        for record in log.written[-len(metadata):]:
            store._on_record(record)
        if fail_after is not None:
            raise RuntimeError("broker went away")
        return metadata

    log.send_batch = tail_while_writing


def test_the_tail_skips_records_put_applied_and_forgets_them():
    store, log, applied = _store()
    parts = [{"cluster": "A", "partition": p, "topic": "t"} for p in range(3)]
    asyncio.run(store.put("src", [(p, {"offset": 5}) for p in parts]))
    assert len(applied) == 3 and store._put_ahead == {(0, 0), (0, 1), (0, 2)}
    for record in log.written:
        store._on_record(record)
    assert len(applied) == 3  # nothing decoded or applied again
    assert not store._put_ahead
    assert asyncio.run(store.get("src", parts)) == [{"offset": 5}] * 3


def test_a_record_the_tail_read_first_is_not_remembered_and_a_later_foreign_one_wins():
    store, log, applied = _store()
    part = {"cluster": "A", "partition": 0, "topic": "t"}
    # the tail delivers the record before put's acknowledgement: put then applies nothing
    _tail_during_put(store, log)
    asyncio.run(store.put("src", [(part, {"offset": 1})]))
    assert [a[2] for a in applied] == [(0, 0), (0, 0)]  # the tail's (applied), then put's (refused)
    assert not store._put_ahead  # nothing for the tail to skip later: no leak
    store._on_record(_foreign(1, 0, 9))  # another worker's later write is decoded and applied
    assert asyncio.run(store.get("src", [part])) == [{"offset": 9}]


def test_kept_keys_are_the_encodings_key_order_and_value_types_included():
    store, log, _ = _store()
    ordered = {"cluster": "A", "partition": 1, "topic": "t"}
    reordered = {"topic": "t", "partition": 1, "cluster": "A"}
    as_bool = {"cluster": "A", "partition": True, "topic": "t"}
    as_float = {"cluster": "A", "partition": 1.0, "topic": "t"}
    nested = {"cluster": "A", "partition": [1], "topic": "t"}
    for _ in range(2):  # the second round is answered from the kept keys
        for partition in (ordered, reordered, as_bool, as_float, nested):
            asyncio.run(store.put("src", [(partition, {"offset": 1})]))
    keys = [record.key for record in log.written]
    assert keys[:5] == keys[5:]
    assert keys[:5] == [b'["src",{"cluster":"A","partition":1,"topic":"t"}]',
                        b'["src",{"topic":"t","partition":1,"cluster":"A"}]',
                        b'["src",{"cluster":"A","partition":true,"topic":"t"}]',
                        b'["src",{"cluster":"A","partition":1.0,"topic":"t"}]',
                        b'["src",{"cluster":"A","partition":[1],"topic":"t"}]']
    # one entry in memory for a partition whatever its key order
    assert asyncio.run(store.get("src", [reordered, as_bool, as_float])) == [{"offset": 1}] * 3
    assert len(store._data) == 4


def test_the_tail_matches_a_running_puts_bytes_without_decoding(monkeypatch):
    store, log, applied = _store()
    _tail_during_put(store, log)
    decoded = []
    monkeypatch.setattr("mirrorline.storage.kafka_offsets.json.loads", lambda raw: decoded.append(raw))
    parts = [{"cluster": "A", "partition": p, "topic": "t"} for p in range(3)]
    asyncio.run(store.put("src", [(p, {"offset": 7}) for p in parts]))
    assert decoded == []  # nothing of our own was decoded
    assert [a[2] for a in applied] == [(0, 0), (0, 1), (0, 2), (0, 0), (0, 1), (0, 2)]  # tail's, then put's (refused)
    assert not store._in_flight and not store._put_ahead
    assert [store._data[k][2] for k in sorted(store._data)] == [{"offset": 7}] * 3


def test_a_record_with_the_same_key_but_other_bytes_is_decoded_and_the_later_write_wins():
    store, log, applied = _store()
    part = {"cluster": "A", "partition": 0, "topic": "t"}

    def foreign_first():
        foreign = _foreign(len(log.written), 0, 9)
        log.written.append(foreign)
        store._on_record(foreign)  # another worker's write of the same partition, other bytes

    _tail_during_put(store, log, before=foreign_first)
    asyncio.run(store.put("src", [(part, {"offset": 1})]))
    assert asyncio.run(store.get("src", [part])) == [{"offset": 1}]  # ours came after the foreign one
    assert [a[1] for a in applied[:2]] == [{"offset": 9}, {"offset": 1}]
    assert not store._in_flight


def test_a_failed_put_leaves_nothing_to_match_and_what_it_wrote_still_counts():
    store, log, applied = _store()
    _tail_during_put(store, log, fail_after=1)
    parts = [{"cluster": "A", "partition": p, "topic": "t"} for p in range(3)]
    try:
        asyncio.run(store.put("src", [(p, {"offset": 3}) for p in parts]))
    except RuntimeError:
        pass
    else:
        raise AssertionError("put did not fail")
    assert not store._in_flight  # no entry waits for records that were never written
    assert asyncio.run(store.get("src", parts)) == [{"offset": 3}, None, None]
    # the unwritten partitions are written later by someone and decoded as usual
    store._on_record(_foreign(len(log.written), 1, 4))
    assert asyncio.run(store.get("src", parts[1:2])) == [{"offset": 4}]
