"""Source offsets: the last position each connector's tasks have safely written, per source partition.

Records: ``(connector name, source partition dict) -> source offset dict``. A ``None``
offset is a tombstone: the partition is forgotten. Partitions compare by value, whatever
their key order (:func:`partition_key`). Writes are whole batches: a flush either lands
completely or not at all, so a crash mid-flush leaves the previous offsets intact.

The file store keeps everything in one JSON file, rewritten atomically (temporary file,
fsync, rename) on each flush, as Kafka Connect's ``offset.storage.file.filename`` does.
"""

from __future__ import annotations

import asyncio
import json
import os
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

Offset = dict[str, Any]
Partition = dict[str, Any]


def partition_key(connector: str, partition: Mapping[str, Any]) -> str:
    """A canonical string for (connector, partition): key order inside the partition does not matter."""
    return json.dumps([connector, partition], sort_keys=True, separators=(",", ":"))


class OffsetStore(ABC):
    """Reads and writes committed source offsets."""

    async def start(self) -> None:
        """Load existing offsets. Called once before use."""

    async def stop(self, writes_wait_s: float | None = None) -> None:
        """Release resources. Called once at shutdown. ``writes_wait_s``: how long to wait for writes
        not yet stored (None: the store's own bound; 0 when the caller has already waited for its
        cluster in vain)."""

    @abstractmethod
    async def get(self, connector: str, partitions: Sequence[Mapping[str, Any]]) -> list[Offset | None]:
        """The stored offset of each partition, in order; None where there is none."""

    @abstractmethod
    async def put(self, connector: str, offsets: Iterable[tuple[Mapping[str, Any], Offset | None]]) -> None:
        """Store a batch atomically; a None offset removes the partition."""

    @abstractmethod
    async def all(self, connector: str) -> list[tuple[Partition, Offset]]:
        """Every stored (partition, offset) of a connector."""


class MemoryOffsetStore(OffsetStore):
    """Offsets in a dict; lost when the process ends."""

    def __init__(self) -> None:
        self._data: dict[str, tuple[str, Partition, Offset]] = {}

    async def get(self, connector, partitions):
        return [self._lookup(connector, p) for p in partitions]

    def _lookup(self, connector: str, partition: Mapping[str, Any]) -> Offset | None:
        entry = self._data.get(partition_key(connector, partition))
        return None if entry is None else dict(entry[2])

    async def put(self, connector, offsets):
        self._apply(connector, offsets)

    def _apply(self, connector: str, offsets: Iterable[tuple[Mapping[str, Any], Offset | None]]) -> None:
        for partition, offset in offsets:
            key = partition_key(connector, partition)
            if offset is None:
                self._data.pop(key, None)
            else:
                self._data[key] = (connector, json.loads(json.dumps(partition)), json.loads(json.dumps(offset)))

    async def all(self, connector):
        return [(dict(p), dict(o)) for c, p, o in self._data.values() if c == connector]


class FileOffsetStore(MemoryOffsetStore):
    """Offsets in memory, persisted to one JSON file on every put (standalone mode)."""

    def __init__(self, path: str | os.PathLike[str]):
        super().__init__()
        self.path = Path(path)
        self._lock = asyncio.Lock()

    async def start(self) -> None:
        data = await asyncio.to_thread(self._read)
        for entry in data.get("offsets", []):
            self._apply(entry["connector"], [(entry["partition"], entry["offset"])])

    def _read(self) -> dict[str, Any]:
        try:
            return json.loads(self.path.read_text())
        except FileNotFoundError:
            return {}
        except ValueError as exc:
            raise ValueError(f"offset file {self.path} is not valid JSON ({exc}); "
                             f"restore it from a backup or remove it to start from scratch") from None

    async def put(self, connector, offsets):
        async with self._lock:
            self._apply(connector, list(offsets))
            snapshot = {"version": 1, "offsets": [
                {"connector": c, "partition": p, "offset": o} for c, p, o in self._data.values()]}
            await asyncio.to_thread(self._write, snapshot)

    def _write(self, snapshot: dict[str, Any]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(self.path.name + ".tmp")
        with open(tmp, "w") as handle:
            json.dump(snapshot, handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, self.path)
