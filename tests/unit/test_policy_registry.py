"""Classes named in configs resolve to registered plugins only: nothing is imported because a
config names it (``replication.policy.class``, ``connector.class``)."""

from __future__ import annotations

import sys
import textwrap

import pluggy
import pytest

from mirrorline.connectors.mirror_client.config import (
    COMMON_CONFIG_DEF,
    REPLICATION_POLICY_CLASS,
    load_replication_policy,
    replication_policies,
)
from mirrorline.connectors.mirror_client.policies import (
    DefaultReplicationPolicy,
    IdentityReplicationPolicy,
    SuffixReplicationPolicy,
)
from mirrorline.api import ConfigError, hookimpl
from mirrorline.api import hookspecs
from mirrorline.api.errors import BadRequestError
from mirrorline.plugins import PluginRegistry
from mirrorline.runtime.abstract_herder import validate_or_raise


class PrefixOnlyPolicy(DefaultReplicationPolicy):
    """A plugin's policy."""

    aliases = ("prefix-only",)


class NotAPolicy:
    """Registered by mistake."""


@pytest.fixture
def plugin_policies():
    """Register policies through the hook on a fresh registry; restore what was published after."""
    before = hookspecs.registered_replication_policies()
    manager = pluggy.PluginManager("mirrorline")
    manager.add_hookspecs(hookspecs)

    def register(*classes: type) -> PluginRegistry:
        class Plugin:
            @staticmethod
            @hookimpl
            def register_replication_policies():
                return list(classes)

        manager.register(Plugin(), name=f"policies-{len(manager.get_plugins())}")
        registry = PluginRegistry(manager)
        registry.refresh()
        return registry

    yield register
    hookspecs.publish_replication_policies(list(before))


@pytest.fixture
def sentinel_module(tmp_path, monkeypatch):
    """A module on sys.path whose import would leave a file behind: (module name, side-effect file)."""
    marker = tmp_path / "imported.txt"
    name = "mirrorline_sentinel_policy_module"
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(f"""
        import pathlib
        pathlib.Path({str(marker)!r}).write_text("imported")
        from mirrorline.connectors.mirror_client.policies import DefaultReplicationPolicy

        class Evil(DefaultReplicationPolicy):
            pass

        class EvilConnector:
            pass
    """))
    monkeypatch.syspath_prepend(str(tmp_path))
    assert name not in sys.modules
    yield name, marker
    assert not marker.exists(), "the sentinel module was imported"
    assert name not in sys.modules


@pytest.mark.parametrize("name, cls", [
    ("org.apache.kafka.connect.mirror.DefaultReplicationPolicy", DefaultReplicationPolicy),
    ("DefaultReplicationPolicy", DefaultReplicationPolicy),
    ("mirrorline.connectors.mirror_client.policies.DefaultReplicationPolicy", DefaultReplicationPolicy),
    ("org.apache.kafka.connect.mirror.IdentityReplicationPolicy", IdentityReplicationPolicy),
    ("IdentityReplicationPolicy", IdentityReplicationPolicy),
    ("mirrorline.connectors.mirror_client.policies.IdentityReplicationPolicy", IdentityReplicationPolicy),
    ("SuffixReplicationPolicy", SuffixReplicationPolicy),
    ("mirrorline.connectors.mirror_client.policies.SuffixReplicationPolicy", SuffixReplicationPolicy),
])
def test_built_in_policies_by_java_and_python_names(name, cls):
    assert type(load_replication_policy({REPLICATION_POLICY_CLASS: name})) is cls


def test_default_when_unset():
    assert type(load_replication_policy({})) is DefaultReplicationPolicy


@pytest.mark.parametrize("name", ["json.tool.main", "os.system", "subprocess.Popen", "builtins.eval",
                                  "mirrorline.connectors.mirror_client.policies.ReplicationPolicy", "nope"])
def test_unknown_policy_is_a_config_error_listing_the_known_names(name):
    modules = set(sys.modules)
    with pytest.raises(ConfigError) as raised:
        load_replication_policy({REPLICATION_POLICY_CLASS: name})
    message = str(raised.value)
    assert message.startswith(f"{REPLICATION_POLICY_CLASS}: unknown replication policy {name!r}")
    assert "org.apache.kafka.connect.mirror.DefaultReplicationPolicy" in message
    assert "SuffixReplicationPolicy" in message
    assert set(sys.modules) - modules == set()


def test_a_module_on_the_path_is_never_imported(sentinel_module):
    name, _ = sentinel_module
    with pytest.raises(ConfigError):
        load_replication_policy({REPLICATION_POLICY_CLASS: f"{name}.Evil"})
    errors = [e for v in COMMON_CONFIG_DEF.validate({REPLICATION_POLICY_CLASS: f"{name}.Evil"}) for e in v.errors]
    assert any("unknown replication policy" in e for e in errors), errors


def test_unknown_policy_is_refused_by_validation():
    (value,) = [v for v in COMMON_CONFIG_DEF.validate({REPLICATION_POLICY_CLASS: "json.tool.main"})
                if v.name == REPLICATION_POLICY_CLASS]
    assert value.errors and "known policies are" in value.errors[0]
    assert "DefaultReplicationPolicy" in value.recommended_values


def test_plugins_register_policies_through_the_hook(plugin_policies):
    registry = plugin_policies(PrefixOnlyPolicy, NotAPolicy)
    assert registry.replication_policies() == [PrefixOnlyPolicy, NotAPolicy]
    known = replication_policies()
    for name in (f"{__name__}.PrefixOnlyPolicy", "PrefixOnlyPolicy", "prefix-only"):
        assert known[name] is PrefixOnlyPolicy
        assert type(load_replication_policy({REPLICATION_POLICY_CLASS: name})) is PrefixOnlyPolicy
    assert "NotAPolicy" not in known  # registered, but not a ReplicationPolicy: skipped
    with pytest.raises(ConfigError, match="prefix-only"):  # the error lists plugin names too
        load_replication_policy({REPLICATION_POLICY_CLASS: "other"})


def test_a_plugin_cannot_take_a_built_in_name(plugin_policies):
    class DefaultReplicationPolicy(IdentityReplicationPolicy):  # same simple name as the built-in
        aliases = ("org.apache.kafka.connect.mirror.DefaultReplicationPolicy",)

    plugin_policies(DefaultReplicationPolicy)
    known = replication_policies()
    assert known["DefaultReplicationPolicy"].__module__ == "mirrorline.connectors.mirror_client.policies"
    assert known["org.apache.kafka.connect.mirror.DefaultReplicationPolicy"].__module__ == \
        "mirrorline.connectors.mirror_client.policies"


def test_a_failing_hook_is_reported_not_raised(plugin_policies):
    manager = pluggy.PluginManager("mirrorline")
    manager.add_hookspecs(hookspecs)

    class Broken:
        @staticmethod
        @hookimpl
        def register_replication_policies():
            raise RuntimeError("broken plugin")

    manager.register(Broken(), name="broken")
    registry = PluginRegistry(manager)
    registry.refresh()
    assert registry.replication_policies() == []
    assert any("broken plugin" in f.error for f in registry.failures)


# -- connector.class ----------------------------------------------------------------------------------

@pytest.mark.parametrize("connector_class", ["os.system", "subprocess.Popen", "json.tool.main", "builtins.exec"])
def test_connector_class_resolves_only_through_the_registry(connector_class):
    registry = PluginRegistry.discover()  # importing the installed plugins is expected
    modules = set(sys.modules)
    with pytest.raises(BadRequestError, match="Failed to find any class that implements Connector"):
        validate_or_raise(registry, {"connector.class": connector_class, "name": "x"})
    assert "json.tool" not in sys.modules
    assert set(sys.modules) - modules == set()


def test_connector_class_naming_a_module_on_the_path_does_not_import_it(sentinel_module):
    name, _ = sentinel_module
    registry = PluginRegistry.discover()
    with pytest.raises(BadRequestError):
        validate_or_raise(registry, {"connector.class": f"{name}.EvilConnector", "name": "x"})


async def test_connector_class_over_rest_is_400_without_import(sentinel_module):
    from aiohttp.test_utils import TestClient, TestServer

    from mirrorline.rest import create_app
    from support.herder_fakes import registry_of, start_distributed_herder

    name, _ = sentinel_module
    rig = await start_distributed_herder(registry_of())
    try:
        await rig.rebalance()
        async with TestClient(TestServer(create_app(rig.herder))) as client:
            for connector_class in ("os.system", "subprocess.Popen", f"{name}.EvilConnector"):
                resp = await client.post("/connectors", json={"name": "x", "config": {
                    "connector.class": connector_class}})
                assert resp.status == 400, await resp.text()
                resp = await client.put(f"/connector-plugins/{connector_class}/config/validate",
                                        json={"connector.class": connector_class})
                assert resp.status in (400, 404)
    finally:
        await rig.stop()
