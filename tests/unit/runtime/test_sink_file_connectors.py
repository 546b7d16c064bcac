"""The file connectors' own logic without a broker: lines read from a position, values written as lines."""

from __future__ import annotations

from mirrorline.connectors.file.sink import FileStreamSinkConnector, FileStreamSinkTask, line_of
from mirrorline.connectors.file.source import FileStreamSourceTask, emits_bytes
from mirrorline.api import ConfigDef, OffsetReader, SinkRecord


class StoredOffsets(OffsetReader):
    def __init__(self, stored):
        self.stored = stored

    async def offsets(self, partitions):
        return [self.stored.get(p["filename"]) for p in partitions]


class Context:
    def __init__(self, stored):
        self.offsets = StoredOffsets(stored)


async def started_source(path, stored=None, **config):
    task = FileStreamSourceTask()
    task.initialize(Context(stored or {}))
    await task.start({"file": str(path), "topic": "lines", **config})
    return task


async def test_source_reads_complete_lines_in_batches_and_resumes_from_the_position(tmp_path):
    path = tmp_path / "in.txt"
    path.write_bytes(b"one\ntwo\r\nthree\nfour-without-newline")
    task = await started_source(path, **{"batch.size": "2"})
    first = await task.poll()
    assert [(r.value, r.source_offset["position"]) for r in first] == [(b"one", 4), (b"two", 9)]
    assert first[0].source_partition == {"filename": str(path)} and first[0].topic == "lines"
    second = await task.poll()
    assert [r.value for r in second] == [b"three"]  # the unfinished line waits for its newline
    with path.open("ab") as file:
        file.write(b"\n")
    assert [r.value for r in await task.poll()] == [b"four-without-newline"]

    resumed = await started_source(path, {str(path): {"position": 9}})
    assert [r.value for r in await resumed.poll()] == [b"three", b"four-without-newline"]


async def test_source_values_are_text_with_a_data_converter_and_bytes_otherwise(tmp_path):
    path = tmp_path / "in.txt"
    path.write_text("é\n")
    text = await started_source(path, **{"value.converter": "org.apache.kafka.connect.storage.StringConverter"})
    assert [r.value for r in await text.poll()] == ["é"]
    assert emits_bytes(None) and emits_bytes("org.apache.kafka.connect.converters.ByteArrayConverter")
    assert not emits_bytes("JsonConverter")


async def test_sink_appends_one_line_per_value_and_fsyncs_on_flush(tmp_path):
    path = tmp_path / "out.txt"
    task = FileStreamSinkTask()
    await task.start({"file": str(path)})
    records = [SinkRecord("t", 0, i, None, v) for i, v in enumerate([b"bytes", "text", {"a": 1}, None])]
    await task.put(records)
    await task.put([])
    await task.flush({})
    await task.stop()
    assert path.read_text() == 'bytes\ntext\n{"a":1}\nnull\n'
    assert line_of("x") == b"x\n"


async def test_sink_connector_gives_every_task_the_settings():
    connector = FileStreamSinkConnector()
    await connector.start(ConfigDef().parse({"file": "/tmp/x", "topics": "a"}))
    assert await connector.task_configs(3) == [{"file": "/tmp/x", "topics": "a"}] * 3


async def test_the_plugin_authoring_example_holds(tmp_path):
    """The test shown in docs/plugin-authoring.md, "Sink connectors"."""
    from mirrorline.testing.plugin_kit import run_sink_task

    out = tmp_path / "out.txt"
    run = await run_sink_task(FileStreamSinkTask, {"file": str(out)},
                              [[SinkRecord("t", 0, 0, None, b"a"), SinkRecord("t", 0, 1, None, "b")]])
    assert out.read_text() == "a\nb\n"
    assert run.committed == {("t", 0): 2}


def test_mirrorline_plugins_lists_the_file_connectors_with_their_types(capsys):
    from mirrorline.cli import main as cli

    assert cli.main(["plugins"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert any(line.startswith("mirrorline.connectors.file.sink.FileStreamSinkConnector  type=sink ") and
               "org.apache.kafka.connect.file.FileStreamSinkConnector" in line for line in lines)
    assert any(line.startswith("mirrorline.connectors.file.source.FileStreamSourceConnector  type=source ") for line in lines)
