"""The example configs under deploy/examples parse and validate exactly as the worker would take them."""

from __future__ import annotations

from pathlib import Path

from mirrorline.connectors.mm2.mm2_config import CONNECTOR_NAMES, MirrorMakerConfig
from mirrorline.connectors.mm2.command import worker_specs
from mirrorline.clients.configfile import load_config_file
from mirrorline.plugins import PluginRegistry
from mirrorline.runtime.connector_config import CONNECTOR_CONFIG_DEF
from mirrorline.runtime.worker_config import DISTRIBUTED_CONFIG_DEF, WORKER_CONFIG_DEF

EXAMPLES = Path(__file__).resolve().parents[2] / "deploy" / "examples"


def errors_of(registry: PluginRegistry, config: dict[str, str]) -> list[str]:
    connector = registry.connector_class(config["connector.class"])
    values = CONNECTOR_CONFIG_DEF.validate(config) + connector().validate(config)
    return [f"{v.name}: {e}" for v in values for e in v.errors]


def test_mm2_properties_gives_valid_flows_and_connectors(tmp_path):
    config = MirrorMakerConfig(load_config_file(EXAMPLES / "mm2.properties"))
    flows = {flow.name: flow for flow in config.flows()}
    assert flows["primary->dr"].enabled and not flows["dr->primary"].enabled
    registry = PluginRegistry.discover()
    for flow in flows.values():
        DISTRIBUTED_CONFIG_DEF.parse(flow.worker_config)
        for name in CONNECTOR_NAMES:
            assert errors_of(registry, flow.connector_configs[name]) == [], (flow.name, name)
    source = flows["primary->dr"].connector_configs["MirrorSourceConnector"]
    assert source["tasks.max"] == "4" and source["source.cluster.bootstrap.servers"].startswith("primary-kafka-0")
    assert flows["primary->dr"].worker_config["offset.flush.interval.ms"] == "10000"
    specs = {spec.worker_id: spec for spec in worker_specs(config, None)}
    assert [c["name"] for c in specs["primary->dr"].connector_configs] == [
        "MirrorSourceConnector", "MirrorCheckpointConnector", "MirrorHeartbeatConnector"]
    assert [c["name"] for c in specs["dr->primary"].connector_configs] == ["MirrorHeartbeatConnector"]


def test_connector_json_and_worker_properties_validate():
    connector = load_config_file(EXAMPLES / "mirror-source-connector.json")
    assert connector["name"] == "primary-to-dr-source"
    assert errors_of(PluginRegistry.discover(), connector) == []
    worker = WORKER_CONFIG_DEF.parse(load_config_file(EXAMPLES / "worker.properties"))
    assert worker["listeners"] == ["http://0.0.0.0:8083"]
