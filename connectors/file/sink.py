"""FileStreamSinkConnector: writes each record's value as one line of a file (Connect's ``connect-file``).

``put`` appends a batch with one ``write`` to a file opened with ``O_APPEND`` (so several tasks,
even in several workers, may share a file without tearing lines), and ``flush`` makes it
durable with ``fsync``; the runtime commits offsets only after ``flush``, so a line is never
lost, and after a crash the lines after the last commit are written again (at-least-once).
File I/O runs in a thread, never on the event loop.

A value is written as it is when it is a string, decoded as UTF-8 when it is bytes (the default
ByteArrayConverter), as JSON when it is other data (JsonConverter), and as ``null`` when null.
"""

from __future__ import annotations

import asyncio
import json
import os
from typing import Any

from mirrorline.api import (Config, ConfigDef, ConfigKey, Importance, NonEmptyString, SinkConnector, SinkRecord,
                           SinkTask, Type)

VERSION = "0.1.0"
FILE = "file"

SINK_CONFIG_DEF = ConfigDef([
    ConfigKey(FILE, Type.STRING, importance=Importance.HIGH, validator=NonEmptyString(),
              doc="The file to append lines to (created if missing). (Connect writes to standard output when "
                  "this is unset; mirrorline needs a file.)"),
])


def line_of(value: Any) -> bytes:
    """One record value as a line of the file, with its newline."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        text = bytes(value).decode("utf-8", errors="replace")
    elif isinstance(value, str):
        text = value
    else:
        text = json.dumps(value, separators=(",", ":"), default=str)
    return text.encode("utf-8") + b"\n"


class FileStreamSinkConnector(SinkConnector):
    """Writes the values of the records of ``topics`` (or ``topics.regex``) to a file, one per line."""

    config_def = SINK_CONFIG_DEF
    aliases = ("org.apache.kafka.connect.file.FileStreamSinkConnector",)

    def version(self) -> str:
        return VERSION

    def task_class(self):
        return FileStreamSinkTask

    async def start(self, config: Config) -> None:
        self.settings = {k: str(v) for k, v in config.originals.items()}

    async def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        # The consumer group spreads the partitions over the tasks; each gets the same settings.
        return [dict(self.settings) for _ in range(max_tasks)]

    async def stop(self) -> None:
        pass


class FileStreamSinkTask(SinkTask):
    """Appends record values to the file; ``flush`` fsyncs it."""

    fd: int | None = None

    def version(self) -> str:
        return VERSION

    async def start(self, config: dict[str, str]) -> None:
        self.filename = SINK_CONFIG_DEF.parse(config)[FILE]
        self.fd = await asyncio.to_thread(os.open, self.filename, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    async def put(self, records: list[SinkRecord]) -> None:
        if records:
            await asyncio.to_thread(self._write, b"".join(line_of(r.value) for r in records))

    def _write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:  # a regular file takes it all at once; loop for the odd partial write
            view = view[os.write(self.fd, view):]

    async def flush(self, offsets) -> None:
        if self.fd is not None:
            await asyncio.to_thread(os.fsync, self.fd)

    async def stop(self) -> None:
        if self.fd is not None:
            fd, self.fd = self.fd, None
            await asyncio.to_thread(os.close, fd)
