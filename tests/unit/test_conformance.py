"""The conformance suite (mirrorline.testing.conformance) run against every installed connector and the
PII example transform.

Connectors come from the plugin registry, not from a list here: a connector installed later is
checked too (its declarations at least; the lifecycle checks need a config from CONFIGS, and a
connector without one is reported as skipped, saying so).
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from mirrorline.plugins import PluginRegistry
from mirrorline.testing.conformance import FROM_CONNECTOR, ConnectorConformance, TransformConformance

_WORK = Path(tempfile.mkdtemp(prefix="mirrorline-conformance-"))
(_WORK / "in.txt").write_text("first line\nsecond line\n")

#: Flow settings of the MM2 connectors; 127.0.0.1:1 refuses, so nothing can reach a broker by accident.
_FLOW = {"source.cluster.alias": "A", "target.cluster.alias": "B",
         "source.cluster.bootstrap.servers": "127.0.0.1:1", "target.cluster.bootstrap.servers": "127.0.0.1:1"}

#: connector full name -> (start_config, task_config); None where that step needs a broker.
CONFIGS: dict[str, tuple[dict[str, str] | None, dict[str, str] | str | None]] = {
    "mirrorline.connectors.source_mirror.connector.MirrorSourceConnector": ({**_FLOW, "enabled": "false"}, None),
    "mirrorline.connectors.checkpoint.connector.MirrorCheckpointConnector": ({**_FLOW, "enabled": "false"}, None),
    # the heartbeat connector creates its topic on the target in start(); its task is pure
    "mirrorline.connectors.heartbeat.connector.MirrorHeartbeatConnector": (None, {**_FLOW, "emit.heartbeats.interval.seconds": "1"}),
    "mirrorline.connectors.file.source.FileStreamSourceConnector": (
        {"file": str(_WORK / "in.txt"), "topic": "lines"}, {"file": str(_WORK / "in.txt"), "topic": "lines"}),
    "mirrorline.connectors.file.sink.FileStreamSinkConnector": (
        {"file": str(_WORK / "out.txt"), "topics": "lines"}, {"file": str(_WORK / "out.txt"), "topics": "lines"}),
    "mirrorline_example.sequence.SequenceSourceConnector": ({"topic": "numbers"}, FROM_CONNECTOR),
}

REGISTRY = PluginRegistry.discover()
CONNECTORS = REGISTRY.connectors()

for _name, _cls in CONNECTORS.items():
    _start, _task = CONFIGS.get(_name, (None, None))
    _test_class = type(f"Test{_cls.__name__}", (ConnectorConformance,), {
        "connector_class": _cls, "start_config": _start, "task_config": _task, "__module__": __name__})
    globals()[_test_class.__name__] = _test_class


def test_every_installed_connector_is_checked():
    checked = {obj.connector_class for obj in globals().values()
               if isinstance(obj, type) and issubclass(obj, ConnectorConformance) and obj is not ConnectorConformance}
    assert set(CONNECTORS.values()) <= checked
    assert len(CONNECTORS) >= 6, sorted(CONNECTORS)


def test_built_in_connectors_run_a_lifecycle_check():
    """Each built-in connector has at least one lifecycle check that really runs (not only declarations)."""
    for name in CONNECTORS:
        if name.startswith("connectors."):
            start, task = CONFIGS[name]
            assert start is not None or task is not None, name


class TestPiiMask(TransformConformance):
    transform_class = REGISTRY.transforms.resolve("PiiMask")
    config = {"fields": "email", "mode": "hash", "hash.key": "secret"}


def test_pii_transform_conformance_applies_to_the_example_record():
    transform = TestPiiMask.transform_class()
    transform.configure(transform.config_def.parse(dict(TestPiiMask.config)))
    masked = transform.apply(TestPiiMask.records[0])
    assert b"ada@example.com" not in masked.value and b"Ada" in masked.value


@pytest.mark.parametrize("name", sorted(REGISTRY.transforms.all()))
def test_every_installed_transform_declares_documented_settings(name):
    from mirrorline.testing.conformance import check_config_def

    check_config_def(name, REGISTRY.transforms.all()[name].config_def)


def test_a_broken_connector_fails_the_suite():
    """The suite is not a rubber stamp: a connector returning too many task configs is caught."""
    from mirrorline.api import SourceConnector

    from mirrorline_example.sequence import SequenceSourceConnector

    class Greedy(SequenceSourceConnector):
        async def task_configs(self, max_tasks):
            return [{"topic": "t"}] * (max_tasks + 1)

    class Undocumented(SourceConnector):
        from mirrorline.api import ConfigDef, ConfigKey, Type
        config_def = ConfigDef([ConfigKey("x", Type.STRING)])

    class TestGreedy(ConnectorConformance):
        connector_class = Greedy
        start_config = {"topic": "t"}

    class TestUndocumented(ConnectorConformance):
        connector_class = Undocumented

    import asyncio
    with pytest.raises(AssertionError, match="returned 2 configs"):
        asyncio.run(TestGreedy().test_start_task_configs_stop_and_stop_again())
    with pytest.raises(AssertionError, match="setting x has no documentation"):
        TestUndocumented().test_config_def_is_documented_and_its_defaults_are_valid()

