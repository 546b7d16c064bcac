"""FileStreamSourceConnector: each line appended to a file becomes a record (Connect's ``connect-file``).

One task reads the file from the last stored position, up to ``batch.size`` complete lines per
``poll`` (a line still being written, without its newline, waits for it). Each record's source
partition is ``{"filename": <file>}`` and its source offset ``{"position": <byte offset after
the line>}``, as in Connect, so a restarted task resumes after the last line stored.

Values: Connect emits strings and lets the converter make bytes. Here a record's value is a
``str`` when the connector's ``value.converter`` is set to one that takes data (String, JSON),
and the line's UTF-8 bytes otherwise: with the default ``ByteArrayConverter`` the runtime runs
no converter, and bytes are what it writes. Keys are null; the newline is not part of the value.
"""

from __future__ import annotations

import asyncio
import os

from mirrorline.api import (Config, ConfigDef, ConfigKey, Importance, NonEmptyString, Range, SourceConnector,
                           SourceRecord, SourceTask, Type)

VERSION = "0.1.0"
FILE = "file"
TOPIC = "topic"
BATCH_SIZE = "batch.size"
#: How long ``poll`` waits when the file has no new complete line.
IDLE_WAIT_S = 0.5
#: Converters after which a value is bytes (the runtime then runs none).
BYTE_CONVERTERS = ("", "ByteArrayConverter", "org.apache.kafka.connect.converters.ByteArrayConverter")

SOURCE_CONFIG_DEF = ConfigDef([
    ConfigKey(FILE, Type.STRING, importance=Importance.HIGH, validator=NonEmptyString(),
              doc="The file to read; lines appended later are read too. (Connect reads standard input when "
                  "this is unset; mirrorline needs a file.)"),
    ConfigKey(TOPIC, Type.STRING, importance=Importance.HIGH, validator=NonEmptyString(),
              doc="The topic to write each line to."),
    ConfigKey(BATCH_SIZE, Type.INT, default=2000, validator=Range(min=1), importance=Importance.LOW,
              doc="The most lines one poll returns."),
])


def emits_bytes(value_converter: str | None) -> bool:
    """Whether values must be bytes: the value converter is unset or ByteArray (no converter runs)."""
    name = (value_converter or "").strip()
    return name in BYTE_CONVERTERS or name.rsplit(".", 1)[-1] == "ByteArrayConverter"


class FileStreamSourceConnector(SourceConnector):
    """Streams the lines of one file into a topic, with one task."""

    config_def = SOURCE_CONFIG_DEF
    aliases = ("org.apache.kafka.connect.file.FileStreamSourceConnector",)

    def version(self) -> str:
        return VERSION

    def task_class(self):
        return FileStreamSourceTask

    async def start(self, config: Config) -> None:
        self.settings = {k: str(v) for k, v in config.originals.items()}

    async def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        # One file, one reader: more tasks would read the same lines twice (Connect runs one too).
        return [dict(self.settings)]

    async def stop(self) -> None:
        pass


class FileStreamSourceTask(SourceTask):
    """Reads complete lines from the stored position on and returns them as records."""

    def version(self) -> str:
        return VERSION

    async def start(self, config: dict[str, str]) -> None:
        parsed = SOURCE_CONFIG_DEF.parse(config)
        self.filename, self.topic, self.batch_size = parsed[FILE], parsed[TOPIC], parsed[BATCH_SIZE]
        self.as_bytes = emits_bytes(config.get("value.converter"))
        self.partition = {"filename": self.filename}
        stored = await self.context.offsets.offset(self.partition)
        self.position = int(stored.get("position", 0)) if stored else 0

    async def poll(self) -> list[SourceRecord]:
        lines = await asyncio.to_thread(self._read_lines)
        if not lines:
            await asyncio.sleep(IDLE_WAIT_S)
            return []
        records = []
        for line, end in lines:
            value = line if self.as_bytes else line.decode("utf-8", errors="replace")
            records.append(SourceRecord(self.partition, {"position": end}, self.topic, value=value))
        self.position = lines[-1][1]
        return records

    def _read_lines(self) -> list[tuple[bytes, int]]:
        """Up to ``batch.size`` complete lines from ``self.position``, each with the position after it."""
        try:
            with open(self.filename, "rb") as file:
                if os.fstat(file.fileno()).st_size < self.position:
                    self.position = 0  # the file was truncated or replaced: start it over, as Connect does
                file.seek(self.position)
                lines, end = [], self.position
                for raw in file:
                    if not raw.endswith(b"\n") or len(lines) >= self.batch_size:
                        break
                    end += len(raw)
                    lines.append((raw.rstrip(b"\r\n"), end))
                return lines
        except FileNotFoundError:
            return []  # not created yet: Connect waits for it too

    async def stop(self) -> None:
        pass
