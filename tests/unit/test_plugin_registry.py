"""Unit tests of mirrorline.plugins over real distributions written to disk (no mocks).

Each test writes importable packages plus ``*.dist-info`` folders (METADATA and
``entry_points.txt`` with a ``[mirrorline]`` group) into ``tmp_path`` and puts it on
``sys.path``, so ``importlib.metadata`` finds them exactly as it finds installed plugins.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from mirrorline.api import NotFoundError, SourceConnector
from mirrorline.plugins import ENTRY_POINT_GROUP, PluginRegistry, full_name, short_names

EXAMPLE = "mirrorline_example.sequence.SequenceSourceConnector"
MODULE_PREFIX = "mlt_"

_CONNECTOR_BODY = '''
    def version(self):
        return "1.0"

    async def start(self, config):
        pass

    def task_class(self):
        return NoTask

    async def task_configs(self, max_tasks):
        return []

    async def stop(self):
        pass
'''

_TASK = '''
class NoTask(SourceTask):
    async def start(self, config):
        pass

    async def poll(self):
        return []

    async def stop(self):
        pass
'''


def _connector_module(*class_names: str, aliases: tuple[str, ...] = ()) -> str:
    source = "from mirrorline.api import SourceConnector, SourceTask, hookimpl\n" + _TASK
    for name in class_names:
        source += f"\n\nclass {name}(SourceConnector):\n    aliases = {aliases!r}\n" + _CONNECTOR_BODY
    return source


#: package (module) name -> source
MODULES = {
    "mlt_good": _connector_module("GoodSourceConnector", aliases=("com.example.GoodSource",)) + '''

@hookimpl
def register_connectors():
    return [GoodSourceConnector]
''',
    "mlt_broken": '''
raise ImportError("mlt_broken needs libmissing, which is not installed")
''',
    "mlt_raising": '''
from mirrorline.api import hookimpl


@hookimpl
def register_connectors():
    raise RuntimeError("register_connectors exploded")
''',
    "mlt_notconn": _connector_module("MixedSourceConnector") + '''

class NotAConnector:
    pass


@hookimpl
def register_connectors():
    return [NotAConnector, MixedSourceConnector]
''',
    "mlt_dup_a": _connector_module("DupSourceConnector"),
    "mlt_dup_b": _connector_module("DupSourceConnector"),
    "mlt_dups": '''
from mirrorline.api import hookimpl
from mlt_dup_a import DupSourceConnector as A
from mlt_dup_b import DupSourceConnector as B


@hookimpl
def register_connectors():
    return [A, B]
''',
}

#: distribution name -> (entry point name, entry point value)
DISTRIBUTIONS = {
    "mirrorline-good": ("mlt-good", "mlt_good"),
    "mirrorline-broken": ("mlt-broken", "mlt_broken"),
    "mirrorline-raising": ("mlt-raising", "mlt_raising"),
    "mirrorline-notconn": ("mlt-notconn", "mlt_notconn"),
    "mirrorline-dups": ("mlt-dups", "mlt_dups"),
}


def write_plugins(root: Path) -> Path:
    """Write the packages and their dist-info folders under ``root``."""
    for module, source in MODULES.items():
        package = root / module
        package.mkdir()
        (package / "__init__.py").write_text(textwrap.dedent(source))
    for dist, (ep_name, ep_value) in DISTRIBUTIONS.items():
        info = root / f"{dist.replace('-', '_')}-1.0.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.0\n")
        (info / "entry_points.txt").write_text(f"[{ENTRY_POINT_GROUP}]\n{ep_name} = {ep_value}\n")
    return root


@pytest.fixture
def plugin_path(tmp_path, monkeypatch):
    """tmp_path holding the plugin distributions, prepended to sys.path; imported modules removed after."""
    write_plugins(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path
    for name in [m for m in sys.modules if m.startswith(MODULE_PREFIX)]:
        del sys.modules[name]


@pytest.fixture
def registry(plugin_path) -> PluginRegistry:
    return PluginRegistry.discover()


def failures_by_dist(registry: PluginRegistry):
    return {f.distribution: f for f in registry.failures}


# ---------------------------------------------------------------------------------------
# Discovery and failure isolation
# ---------------------------------------------------------------------------------------

def test_entry_points_are_visible_to_importlib(plugin_path):
    import importlib.metadata

    names = {ep.name for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)}
    assert {ep for ep, _ in DISTRIBUTIONS.values()} <= names


def test_good_plugin_loads(registry):
    connectors = registry.connectors()
    assert "mlt_good.GoodSourceConnector" in connectors
    cls = connectors["mlt_good.GoodSourceConnector"]
    assert issubclass(cls, SourceConnector) and cls.type == "source"
    assert cls().version() == "1.0"


def test_other_plugins_unaffected_by_failures(registry):
    connectors = registry.connectors()
    assert EXAMPLE in connectors  # the installed example plugin
    assert "mlt_notconn.MixedSourceConnector" in connectors  # valid class next to an invalid one
    assert {"mlt_dup_a.DupSourceConnector", "mlt_dup_b.DupSourceConnector"} <= set(connectors)
    assert list(connectors) == sorted(connectors)


def test_each_failure_recorded_with_entry_point_distribution_and_reason(registry):
    failures = failures_by_dist(registry)
    assert set(failures) == {"mirrorline-broken", "mirrorline-raising", "mirrorline-notconn"}
    assert len(registry.failures) == 3

    broken = failures["mirrorline-broken"]
    assert "mlt_broken" in broken.entry_point
    assert broken.error.startswith("ImportError: ")
    assert "mlt_broken needs libmissing" in broken.error

    raising = failures["mirrorline-raising"]
    assert "mlt_raising" in raising.entry_point and "register_connectors" in raising.entry_point
    assert raising.error == "RuntimeError: register_connectors exploded"

    notconn = failures["mirrorline-notconn"]
    assert "mlt_notconn" in notconn.entry_point
    assert notconn.error.startswith("TypeError: ")
    assert "NotAConnector" in notconn.error and "is not a Connector subclass" in notconn.error


def test_failures_are_logged(plugin_path, caplog):
    with caplog.at_level(logging.ERROR, logger="mirrorline.plugins"):
        PluginRegistry.discover()
    text = caplog.text
    for dist in ("mirrorline-broken", "mirrorline-raising", "mirrorline-notconn"):
        assert dist in text
    assert "other plugins are unaffected" in text


def test_refresh_does_not_duplicate_failures(registry):
    before = list(registry.failures)
    registry.refresh()
    registry.refresh()
    assert registry.failures == before
    assert "mlt_good.GoodSourceConnector" in registry.connectors()


def test_extra_plugins_registered_directly(plugin_path):
    from mirrorline.api import hookimpl

    class Holder:
        @staticmethod
        @hookimpl
        def register_connectors():
            from mlt_good import GoodSourceConnector
            return [GoodSourceConnector]

    registry = PluginRegistry.discover(extra_plugins=(Holder,))
    assert registry.connector_class("GoodSource").__module__ == "mlt_good"


def test_without_broken_plugins_there_are_no_failures():
    registry = PluginRegistry.discover()
    assert registry.failures == []
    assert EXAMPLE in registry.connectors()


# ---------------------------------------------------------------------------------------
# connector.class name resolution
# ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", [
    "mlt_good.GoodSourceConnector",  # full name
    "GoodSourceConnector",  # simple name
    "GoodSource",  # without the Connector suffix
    "com.example.GoodSource",  # declared alias
])
def test_name_resolution(registry, name):
    cls = registry.connector_class(name)
    assert full_name(cls) == "mlt_good.GoodSourceConnector"
    assert registry.matches(cls, name)


@pytest.mark.parametrize("name", [EXAMPLE, "SequenceSourceConnector", "SequenceSource", "com.example.SequenceSource"])
def test_example_plugin_names(registry, name):
    assert full_name(registry.connector_class(name)) == EXAMPLE


def test_short_names():
    cls = PluginRegistry.discover().connector_class(EXAMPLE)
    assert short_names(cls) == ["SequenceSourceConnector", "SequenceSource", "com.example.SequenceSource"]


def test_a_class_named_just_connector_keeps_its_name():
    class Connector(SourceConnector):  # noqa: D101 - test double
        pass

    assert short_names(Connector) == ["Connector"]


def test_matches_rejects_other_names(registry):
    cls = registry.connector_class("GoodSource")
    assert not registry.matches(cls, "Good")
    assert not registry.matches(cls, "goodsource")
    assert not registry.matches(cls, "SequenceSource")


@pytest.mark.parametrize("name", ["NoSuchConnector", "goodsource", "mlt_good.NoSuch", ""])
def test_unknown_name_lists_available(registry, name):
    with pytest.raises(NotFoundError) as info:
        registry.connector_class(name)
    message = str(info.value)
    assert info.value.http_status == 404
    assert f"which name matches {name}," in message
    assert "mlt_good.GoodSourceConnector" in message
    assert EXAMPLE in message


@pytest.mark.parametrize("name", ["DupSourceConnector", "DupSource"])
def test_ambiguous_short_name(registry, name):
    with pytest.raises(NotFoundError) as info:
        registry.connector_class(name)
    message = str(info.value)
    assert "ambiguous" in message
    assert "mlt_dup_a.DupSourceConnector" in message and "mlt_dup_b.DupSourceConnector" in message
    assert "full class name" in message


def test_full_names_of_ambiguous_classes_resolve(registry):
    a = registry.connector_class("mlt_dup_a.DupSourceConnector")
    b = registry.connector_class("mlt_dup_b.DupSourceConnector")
    assert a is not b and a.__name__ == b.__name__


# ---------------------------------------------------------------------------------------
# mirrorline plugins
# ---------------------------------------------------------------------------------------

def _mirrorline_command() -> list[str]:
    script = Path(sys.executable).parent / "mirrorline"
    if script.exists():
        return [str(script)]
    found = shutil.which("mirrorline")
    return [found] if found else [sys.executable, "-m", "mirrorline.cli.main"]


def _run_plugins(pythonpath: Path | None, cwd: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    if pythonpath is not None:
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(pythonpath), env.get("PYTHONPATH", "")) if p)
    return subprocess.run([*_mirrorline_command(), "plugins"], env=env, cwd=cwd, capture_output=True,
                          text=True, timeout=120)


def test_cli_reports_broken_plugins(tmp_path):
    write_plugins(tmp_path)
    result = _run_plugins(tmp_path, tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    failed = [line for line in lines if line.startswith("FAILED to load")]
    assert len(failed) == 3, result.stdout
    assert any("mirrorline-broken" in line and "mlt_broken" in line and "ImportError" in line for line in failed)
    assert any("mirrorline-raising" in line and "RuntimeError" in line for line in failed)
    assert any("mirrorline-notconn" in line and "TypeError" in line for line in failed)
    assert any(line.startswith(f"{EXAMPLE}  type=source") for line in lines), result.stdout
    assert any(line.startswith("mlt_good.GoodSourceConnector  type=source version=1.0") for line in lines)
    good = next(line for line in lines if line.startswith("mlt_good.GoodSourceConnector"))
    assert "aliases=GoodSourceConnector,GoodSource,com.example.GoodSource" in good


def test_cli_succeeds_without_broken_plugins(tmp_path):
    result = _run_plugins(None, tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "FAILED" not in result.stdout
    assert any(line.startswith(f"{EXAMPLE}  type=source") for line in result.stdout.splitlines())
