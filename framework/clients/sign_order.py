"""Topic-change signs kept in order with the batches a fetch loop hands out (:mod:`.batch_fetcher`).

A topic-change sign is a fetch error that can mean the topic was deleted and made again, or a
gap in a fetch session's view of it (:mod:`.fetch_errors`). A MirrorSource task that sees one
checks the topic's identity and drops the batches of that poll, so the reader must get what was
fetched before the sign without it, and nothing fetched after it before it. A loop that fetches
ahead can hold batches of both sides at once; so while partitions of the topic have batches
waiting for the reader, the sign is held, and the loop fetches nothing of the topic (it asks
:attr:`SignOrder.held`). The reader's next call releases it (:meth:`SignOrder.release_due`).
"""

from __future__ import annotations

from collections.abc import Callable

from mirrorline.clients.fetch_errors import FetchErrorWatch

__all__ = ["SignOrder"]


class SignOrder:
    """The held signs of one fetch loop and, per topic, how many partitions have batches waiting.

    ``on_release(topic)`` is called when a held sign goes to the watch: the loop fetches the
    topic again. Without a watch nothing is held (nobody reads the signs)."""

    __slots__ = ("_watch", "_waiting", "held", "_on_release")

    def __init__(self, watch: FetchErrorWatch | None, on_release: Callable[[str], None]):
        self._watch = watch
        self._on_release = on_release
        #: topic -> how many of its partitions have batches waiting for the reader
        self._waiting: dict[str, int] = {}
        #: topic -> the broker of a sign held back until what was fetched before it is handed over
        self.held: dict[str, int] = {}

    def batches_waiting(self, topic: str) -> None:
        """A partition of ``topic`` now has batches waiting for the reader."""
        self._waiting[topic] = self._waiting.get(topic, 0) + 1

    def batches_taken(self, topic: str) -> None:
        """A partition of ``topic`` has no batches waiting any more (handed over or dropped)."""
        left = self._waiting[topic] - 1
        if left:
            self._waiting[topic] = left
        else:
            del self._waiting[topic]

    def sign(self, topic: str, node_id: int, error: bool = False) -> None:
        """A sign that ``topic`` may have been re-created, seen at ``node_id``: to the watch now, or
        held while batches of the topic wait (or a sign of it is held already). ``error``: it came
        as a partition error (counted by the watch), not as a session gap."""
        watch = self._watch
        if watch is None:
            return
        if error:
            watch.noted += 1
        if topic in self._waiting or topic in self.held:
            self.held[topic] = node_id
        else:
            watch.sign(topic, node_id)

    def release_due(self) -> None:
        """Let go the held signs whose topic has no batches waiting any more: what was fetched
        before them went out with the reader's last call."""
        if self.held:
            for topic in [topic for topic in self.held if topic not in self._waiting]:
                self._release(topic)

    def forget_batches(self) -> None:
        """Nothing waits any more (a new assignment): every held sign goes to the watch."""
        self._waiting.clear()
        for topic in list(self.held):
            self._release(topic)

    def _release(self, topic: str) -> None:
        node_id = self.held.pop(topic)
        if self._watch is not None:
            self._watch.sign(topic, node_id)
        self._on_release(topic)
