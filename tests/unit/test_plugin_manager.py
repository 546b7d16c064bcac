"""The plugin manager: hooks are called through pluggy (``pm.hook``), and ``check_pending()`` turns a
misspelt ``@hookimpl`` into a load failure naming the plugin, without taking the other plugins down.

Plugins are real: classes registered directly, and a distribution written to disk with an entry
point in the ``mirrorline`` group, found by ``importlib.metadata`` as an installed one would be.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from mirrorline.api import SourceConnector, SourceTask, hookimpl
from mirrorline.plugins import ENTRY_POINT_GROUP, PluginRegistry, UnknownHookError


class _Task(SourceTask):
    async def start(self, config):
        pass

    async def poll(self):
        return []

    async def stop(self):
        pass


def _connector(name: str) -> type[SourceConnector]:
    async def noop(self, *args):
        return [] if args else None
    return type(name, (SourceConnector,), {"start": noop, "stop": noop, "task_configs": noop,
                                           "task_class": lambda self: _Task, "__module__": __name__})


FirstConnector = _connector("FirstConnector")
SecondConnector = _connector("SecondConnector")
TypoConnector = _connector("TypoConnector")


class FirstPlugin:
    @staticmethod
    @hookimpl
    def register_connectors():
        return [FirstConnector]


class SecondPlugin:
    @staticmethod
    @hookimpl
    def register_connectors():
        return [SecondConnector]


class MisspeltPlugin:
    """``register_conectors`` (one n) matches no hook: without check_pending it would be ignored in silence."""

    @staticmethod
    @hookimpl
    def register_conectors():
        return [TypoConnector]

    @staticmethod
    @hookimpl
    def register_predicates():
        return []


class OptionalHookPlugin:
    """A hook of another, optional plugin, declared optional: accepted."""

    @staticmethod
    @hookimpl(optionalhook=True)
    def register_widgets():
        return []

    @staticmethod
    @hookimpl
    def register_connectors():
        return [TypoConnector]


class RaisingPlugin:
    @staticmethod
    @hookimpl
    def register_connectors():
        raise RuntimeError("register_connectors exploded")


def test_a_misspelt_hookimpl_is_a_load_failure_naming_the_plugin_and_the_hook():
    registry = PluginRegistry.discover(extra_plugins=(FirstPlugin, MisspeltPlugin, SecondPlugin))
    failures = [f for f in registry.failures if "MisspeltPlugin" in f.entry_point]
    assert len(failures) == 1, registry.failures
    assert "register_conectors" in failures[0].error
    assert "did you mean register_connectors" in failures[0].error
    assert UnknownHookError.__name__ in failures[0].error.split(":")[0]
    # the plugin is not loaded at all, and the others are
    assert registry.pm.get_plugin("MisspeltPlugin") is None
    names = set(registry.connectors())
    assert {f"{__name__}.FirstConnector", f"{__name__}.SecondConnector"} <= names
    assert f"{__name__}.TypoConnector" not in names
    registry.pm.check_pending()  # nothing left pending


def test_an_optional_hook_is_not_a_failure():
    registry = PluginRegistry.discover(extra_plugins=(OptionalHookPlugin,))
    assert not [f for f in registry.failures if "OptionalHookPlugin" in f.entry_point]
    assert f"{__name__}.TypoConnector" in registry.connectors()


def test_the_failure_survives_refresh():
    registry = PluginRegistry.discover(extra_plugins=(MisspeltPlugin,))
    before = [f for f in registry.failures if "MisspeltPlugin" in f.entry_point]
    registry.refresh()
    assert [f for f in registry.failures if "MisspeltPlugin" in f.entry_point] == before


def test_hooks_are_called_through_pluggy_once_per_plugin_in_registration_order():
    pm_calls: list[tuple[str, list[str]]] = []
    registry = PluginRegistry.discover(extra_plugins=(FirstPlugin, SecondPlugin))

    def before(hook_name, hook_impls, kwargs):
        pm_calls.append((hook_name, [impl.plugin_name for impl in hook_impls]))

    undo = registry.pm.add_hookcall_monitoring(before, lambda *args: None)
    try:
        registry.refresh()
    finally:
        undo()
    connector_calls = [impls for hook, impls in pm_calls if hook == "register_connectors"]
    # each plugin's implementation is its own pluggy call, so a result is attributable to its plugin
    assert all(len(impls) == 1 for impls in connector_calls)
    called = [impls[0] for impls in connector_calls]
    assert called.index("FirstPlugin") < called.index("SecondPlugin")
    assert len(called) == len(set(called))


def test_a_hook_that_raises_fails_only_its_plugin():
    registry = PluginRegistry.discover(extra_plugins=(FirstPlugin, RaisingPlugin, SecondPlugin))
    failures = [f for f in registry.failures if "RaisingPlugin" in f.entry_point]
    assert len(failures) == 1 and failures[0].entry_point.endswith(".register_connectors")
    assert "exploded" in failures[0].error
    assert {f"{__name__}.FirstConnector", f"{__name__}.SecondConnector"} <= set(registry.connectors())


def _write_distribution(root, module: str, source: str, dist: str) -> None:
    package = root / module
    package.mkdir()
    (package / "__init__.py").write_text(textwrap.dedent(source))
    info = root / f"{dist.replace('-', '_')}-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(f"[{ENTRY_POINT_GROUP}]\n{module} = {module}\n")


MISSPELT_MODULE = '''
from mirrorline.api import hookimpl


@hookimpl
def register_transfroms():
    return []
'''


@pytest.fixture
def misspelt_distribution(tmp_path, monkeypatch):
    _write_distribution(tmp_path, "mltpm_misspelt", MISSPELT_MODULE, "mirrorline-misspelt")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path
    sys.modules.pop("mltpm_misspelt", None)


def test_an_installed_plugin_with_a_misspelt_hook_is_named_with_its_distribution(misspelt_distribution):
    registry = PluginRegistry.discover()
    failures = [f for f in registry.failures if f.entry_point == "mltpm_misspelt"]
    assert len(failures) == 1, registry.failures
    assert failures[0].distribution == "mirrorline-misspelt"
    assert "register_transfroms (did you mean register_transforms?)" in failures[0].error
    assert registry.connectors(), "the built-in connectors still load"


def test_mirrorline_plugins_reports_it_and_exits_1(misspelt_distribution):
    result = subprocess.run([sys.executable, "-c", "import sys; from mirrorline.cli.main import main; sys.exit(main())",
                             "plugins"], capture_output=True, text=True, timeout=120,
                            env={**os.environ, "PYTHONPATH": str(misspelt_distribution)})
    assert result.returncode == 1, result.stdout + result.stderr
    assert "FAILED to load mltpm_misspelt (from mirrorline-misspelt)" in result.stdout
    assert "register_transfroms" in result.stdout
    assert "MirrorSourceConnector" in result.stdout  # the others are listed
