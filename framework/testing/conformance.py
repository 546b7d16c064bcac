"""A conformance suite any connector (or transform) can run: what the runtime relies on, checked without a broker.

Subclass :class:`ConnectorConformance` in a test module, name the class ``Test...`` and set
``connector_class``; pytest then runs every check on it::

    from mirrorline.testing.conformance import ConnectorConformance

    class TestMySource(ConnectorConformance):
        connector_class = MySourceConnector
        start_config = {"file": "/tmp/in.txt", "topic": "lines"}   # start() works with this, no broker
        task_config = {"file": "/tmp/in.txt", "topic": "lines"}    # a task starts with this, no broker

The checks: ``config_def`` documents every setting and its defaults pass their own validators;
``validate({})`` returns per-field errors (one on each required setting) instead of raising, on a
fresh instance; ``version()`` is a non-empty string; ``type`` and ``task_class()`` agree (a source
connector has a SourceTask); with ``start_config``: ``start`` then ``task_configs(n)`` (at most ``n``
string maps, for several ``n``), ``stop`` and ``stop`` again, with no error reported and no background
work left running; with ``task_config``: a task starts, polls (a source task) or takes an empty
``put`` (a sink task), and stops under fake contexts. A check whose config is None is skipped, saying
why (a connector that needs a broker to start is checked by integration tests instead).

:class:`TransformConformance` does the same for a transformation: documented ``config_def``, a
``configure`` with ``config``, ``apply`` on ``records`` returning a record or None, ``close`` twice.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any, ClassVar

import pytest

from mirrorline.api.config import NO_DEFAULT, ConfigDef, ConfigValue
from mirrorline.api.connector import Connector
from mirrorline.api.records import ConnectorTaskId, SourceRecord
from mirrorline.api.task import SourceTask
from mirrorline.api.transforms import Transformation
from mirrorline.testing.plugin_kit import FakeConnectorContext, FakeSinkTaskContext, FakeSourceTaskContext

try:
    from mirrorline.api.sink import SinkTask
except ImportError:  # pragma: no cover - an API without sinks
    SinkTask = None  # type: ignore[assignment,misc]

__all__ = ["FROM_CONNECTOR", "ConnectorConformance", "TransformConformance", "check_config_def"]

#: ``task_config = FROM_CONNECTOR``: start the task with the first config ``task_configs`` gives for ``start_config``.
FROM_CONNECTOR = "from-connector"

#: How long one lifecycle call may take under the suite before it counts as hanging.
CALL_TIMEOUT_S = 10.0


def check_config_def(owner: str, definition: ConfigDef) -> None:
    """Every key documented, typed, and its default (if any) accepted by its own parser and validator."""
    assert isinstance(definition, ConfigDef), f"{owner}.config_def is not a ConfigDef"
    for key in definition.keys.values():
        assert key.doc and key.doc.strip(), f"{owner}: setting {key.name} has no documentation"
        if key.default is not NO_DEFAULT:
            key.default_value()  # parses and validates it: raises if the default is not a valid value


class ConnectorConformance:
    """The checks every connector should pass; subclass as ``Test<Name>`` and set the attributes."""

    #: The connector under test.
    connector_class: ClassVar[type[Connector]]
    #: Settings with which ``start`` succeeds without a broker (None: skip the lifecycle checks).
    start_config: ClassVar[Mapping[str, str] | None] = None
    #: Settings with which one task starts without a broker (None: skip the task check), or
    #: :data:`FROM_CONNECTOR` for the first task config the connector makes from ``start_config``.
    task_config: ClassVar[Mapping[str, str] | str | None] = None
    #: ``max_tasks`` values ``task_configs`` is asked with.
    max_tasks_values: ClassVar[tuple[int, ...]] = (1, 2, 5)

    # -- declarations -----------------------------------------------------------------------
    def test_config_def_is_documented_and_its_defaults_are_valid(self):
        check_config_def(self.connector_class.__name__, self.connector_class.config_def)

    def test_validate_of_an_empty_config_reports_per_field_errors(self):
        values = self.connector_class().validate({})  # a fresh instance: never initialised nor started
        assert isinstance(values, list) and all(isinstance(v, ConfigValue) for v in values)
        by_name = {v.name: v for v in values}
        for key in self.connector_class.config_def.keys.values():
            if key.required:
                assert key.name in by_name and by_name[key.name].errors, \
                    f"validate({{}}) gives no error on the required setting {key.name}"
        for value in values:
            assert all(isinstance(e, str) and e for e in value.errors), f"{value.name}: errors must be messages"

    def test_version_is_a_string(self):
        version = self.connector_class().version()
        assert isinstance(version, str) and version.strip(), f"version() returned {version!r}"

    def test_type_and_task_class_agree(self):
        connector = self.connector_class()
        task_class = connector.task_class()
        assert isinstance(task_class, type)
        if self.connector_class.type == "source":
            assert issubclass(task_class, SourceTask), "a source connector's task must be a SourceTask"
        elif self.connector_class.type == "sink":
            assert SinkTask is not None and issubclass(task_class, SinkTask), "a sink connector's task must be a SinkTask"
        else:
            pytest.fail(f"type is {self.connector_class.type!r}: neither 'source' nor 'sink'")

    # -- lifecycle ------------------------------------------------------------------------
    def _parsed(self, settings: Mapping[str, str]) -> Any:
        from mirrorline.runtime.connector_config import CONNECTOR_CONFIG_DEF

        raw = {"name": "conformance", "connector.class": self.connector_class.__name__, **settings}
        return CONNECTOR_CONFIG_DEF.merged(self.connector_class.config_def).parse(raw)

    async def _task_config(self) -> dict[str, str]:
        if self.task_config != FROM_CONNECTOR:
            return dict(self.task_config)
        assert self.start_config is not None, "task_config = FROM_CONNECTOR needs a start_config"
        connector = self.connector_class()
        context = FakeConnectorContext("conformance")
        connector.initialize(context)
        async with asyncio.timeout(CALL_TIMEOUT_S):
            await connector.start(self._parsed(self.start_config))
        try:
            async with asyncio.timeout(CALL_TIMEOUT_S):
                configs = await connector.task_configs(1)
        finally:
            async with asyncio.timeout(CALL_TIMEOUT_S):
                await connector.stop()
            await context.close()
        assert configs, "task_configs(1) gave no task config to start a task with"
        return configs[0]

    async def test_start_task_configs_stop_and_stop_again(self):
        if self.start_config is None:
            pytest.skip(f"{self.connector_class.__name__}: no start_config (start needs a broker)")
        connector = self.connector_class()
        context = FakeConnectorContext("conformance")
        connector.initialize(context)
        async with asyncio.timeout(CALL_TIMEOUT_S):
            await connector.start(self._parsed(self.start_config))
        try:
            for max_tasks in self.max_tasks_values:
                async with asyncio.timeout(CALL_TIMEOUT_S):
                    configs = await connector.task_configs(max_tasks)
                assert isinstance(configs, list) and len(configs) <= max_tasks, \
                    f"task_configs({max_tasks}) returned {len(configs)} configs"
                for config in configs:
                    assert all(isinstance(k, str) and isinstance(v, str) for k, v in config.items()), \
                        f"task configs must map strings to strings: {config!r}"
        finally:
            async with asyncio.timeout(CALL_TIMEOUT_S):
                await connector.stop()
        async with asyncio.timeout(CALL_TIMEOUT_S):
            await connector.stop()  # a second stop is harmless
        await context.close()
        context.raise_errors()

    async def test_a_task_starts_and_stops_with_fake_contexts(self):
        if self.task_config is None:
            pytest.skip(f"{self.connector_class.__name__}: no task_config (its tasks need a broker)")
        task_config = await self._task_config()
        task = self.connector_class().task_class()()
        task_id = ConnectorTaskId("conformance", 0)
        sink = SinkTask is not None and isinstance(task, SinkTask)
        context = FakeSinkTaskContext(task_id) if sink else FakeSourceTaskContext(task_id)
        task.initialize(context)
        assert isinstance(task.version(), str)
        async with asyncio.timeout(CALL_TIMEOUT_S):
            await task.start(dict(task_config))
        try:
            if sink:
                async with asyncio.timeout(CALL_TIMEOUT_S):
                    await task.put([])
            else:
                async with asyncio.timeout(CALL_TIMEOUT_S):
                    records = await task.poll()
                assert records is None or all(isinstance(r, SourceRecord) for r in records)
        finally:
            async with asyncio.timeout(CALL_TIMEOUT_S):
                await task.stop()
        await context.close()
        context.raise_errors()


class TransformConformance:
    """The checks every transformation should pass; subclass as ``Test<Name>`` and set the attributes."""

    #: The transformation under test.
    transform_class: ClassVar[type[Transformation]]
    #: Settings ``configure`` accepts.
    config: ClassVar[Mapping[str, str]] = {}
    #: Records to apply it to (default: one record with a JSON value).
    records: ClassVar[tuple[SourceRecord, ...]] = (
        SourceRecord({"p": 0}, {"o": 0}, "topic", 0, b"key", b'{"name": "Ada", "email": "ada@example.com"}',
                     [("h", b"v")], 1_700_000_000_000),
    )

    def test_config_def_is_documented_and_its_defaults_are_valid(self):
        check_config_def(self.transform_class.__name__, self.transform_class.config_def)

    def test_validate_of_its_config_has_no_errors(self):
        errors = {v.name: v.errors for v in self.transform_class.config_def.validate(dict(self.config)) if v.errors}
        assert not errors, errors

    def test_version_is_a_string(self):
        version = self.transform_class().version()
        assert isinstance(version, str) and version.strip(), f"version() returned {version!r}"

    def test_configure_apply_close_and_close_again(self):
        transform = self.transform_class()
        transform.configure(self.transform_class.config_def.parse(dict(self.config)))
        for record in self.records:
            result = transform.apply(record)
            assert result is None or isinstance(result, type(record)), f"apply returned {result!r}"
        transform.close()
        transform.close()
