"""Makes an AIOKafkaConsumer return whole record batches instead of decoded records.

The batch-forwarding fast path (``batch.forwarding.enabled``) needs the bytes the source broker
sent, batch by batch. aiokafka's fetcher already does everything else a mirror relies on —
leader tracking, positions, seeks, out-of-range and authorisation errors, high watermarks — so
rather than writing a second fetcher, :func:`capture_batches` attaches to one consumer:

1. it wraps that consumer's client ``send`` so the raw bytes and aborted-transaction list of each
   partition in a Fetch response are kept until the fetcher has processed the response (which
   it does right after the ``await``, before anything else runs on the loop);
2. it gives the fetcher a result dict that swaps each partition's record iterator for
   :class:`BatchIterator`, which yields :class:`~mirrorline.api.kafka.FetchedBatch` items (control
   and aborted batches skipped, read_committed as MM2; :func:`~.fetched_batches.split_fetched`) and
   moves the fetch position exactly as aiokafka's own iterator does.

``getmany`` then returns FetchedBatch items in place of ConsumerRecords. This is how a consumer
made with ``fetch_batches`` (:meth:`mirrorline.api.clients.KafkaClients.consumer`) works; a
connector never touches the hooks. If aiokafka's
internals ever stop matching (the consumer is pinned to a minor version for this), a partition
whose raw bytes were not captured keeps aiokafka's record iterator, so the task receives
ConsumerRecords and copies them record by record: slower, never wrong. Both hooks belong to the
one consumer and go away with it.
"""

from __future__ import annotations

import collections
from collections.abc import Sequence

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.consumer.fetcher import FetchResult

from mirrorline.api.kafka import FetchedBatch
from mirrorline.clients.fetched_batches import split_fetched

_FETCH_API_KEY = 1


class BatchIterator:
    """Stands in for aiokafka's PartitionRecords: yields forwardable batches, tracks the next fetch offset."""

    def __init__(self, raw: bytes, fetch_offset: int, aborted: Sequence[tuple[int, int]] | None,
                 read_committed: bool, check_crcs: bool, counters: collections.Counter):
        self.next_fetch_offset = fetch_offset
        self._raw = raw
        self._aborted = aborted
        self._read_committed = read_committed
        self._check_crcs = check_crcs
        self._counters = counters
        self._iterator = self._batches()

    def __iter__(self):
        return self

    def __next__(self) -> FetchedBatch:
        return next(self._iterator)

    def _batches(self):
        result = split_fetched(self._raw, self.next_fetch_offset, self._aborted,
                               read_committed=self._read_committed, check_crcs=self._check_crcs)
        self._raw = None
        self._counters["skipped_records"] += result.skipped_records
        for batch in result.batches:
            self._counters["reencoded" if batch.reencoded else "forwarded"] += 1
            self.next_fetch_offset = batch.source_offsets[-1] + 1
            yield batch
        self.next_fetch_offset = max(self.next_fetch_offset, result.next_offset)


class _BatchResults(collections.OrderedDict):
    """The fetcher's per-partition results, with captured partitions' iterators replaced on arrival."""

    def __init__(self, capture: BatchCapture):
        super().__init__()
        self._capture = capture

    def __setitem__(self, tp, value):
        if isinstance(value, FetchResult):
            self._capture.attach(tp, value)
        super().__setitem__(tp, value)


class BatchCapture:
    """The hooks on one consumer (see the module docstring); ``counters`` says how batches went."""

    def __init__(self, consumer: AIOKafkaConsumer, *, read_committed: bool, check_crcs: bool):
        self._read_committed = read_committed
        self._check_crcs = check_crcs
        self._raw: dict[TopicPartition, tuple[bytes, list]] = {}
        #: forwarded (header only), reencoded (rebuilt batches), skipped_records, uncaptured (fell back)
        self.counters: collections.Counter = collections.Counter()
        client = consumer._client
        original_send = client.send

        async def send(node_id, request, **kwargs):
            response = await original_send(node_id, request, **kwargs)
            if getattr(request, "API_KEY", None) == _FETCH_API_KEY and response is not None:
                self._keep(response)
            return response

        client.send = send
        fetcher = consumer._fetcher
        results = _BatchResults(self)
        results.update(fetcher._records)
        fetcher._records = results

    def _keep(self, response) -> None:
        # The fetcher processed the previous response before this one returned: what it did not
        # attach then (partitions it discarded, e.g. after a seek) is dropped, not held.
        v11 = response.API_VERSION >= 11
        kept: dict[TopicPartition, tuple[bytes, list]] = {}
        for topic, partitions in response.topics:
            for partition, error_code, _highwater, *rest in partitions:
                if error_code == 0:
                    aborted = rest[2] if v11 else rest[-2]
                    kept[TopicPartition(topic, partition)] = (rest[-1], aborted)
        self._raw = kept

    def attach(self, tp: TopicPartition, result: FetchResult) -> None:
        """Replace the record iterator of a fresh fetch result with a batch iterator, if its bytes were kept."""
        kept = self._raw.pop(tp, None)
        records = result._partition_records
        if kept is None or records is None:
            self.counters["uncaptured"] += 1
            return
        raw, aborted = kept
        result._partition_records = BatchIterator(raw, records.next_fetch_offset, aborted, self._read_committed,
                                                  self._check_crcs, self.counters)
        # aiokafka's PartitionRecords and its record generator refer to each other (the generator's
        # frame holds it), and only running the generator out breaks that. Dropped unread, the pair
        # and the partition's fetched bytes would wait for the cyclic garbage collector, which runs
        # rarely in a mirror process (boot.gc_tuning): 1 GB held by one task copying 1 GB.
        records._records_iterator = None


def capture_batches(consumer: AIOKafkaConsumer, *, read_committed: bool = True,
                    check_crcs: bool = True) -> BatchCapture:
    """Attach to a started consumer so ``getmany`` returns FetchedBatch items (module docstring)."""
    if consumer._fetcher is None:
        raise RuntimeError("capture_batches needs a started consumer")
    return BatchCapture(consumer, read_committed=read_committed, check_crcs=check_crcs)
