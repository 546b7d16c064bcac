"""``mirrorline mm2``: a connector whose validation refuses its config stands aside; the others run."""

from __future__ import annotations

import logging

import pytest

from mirrorline.api import ConfigError
from mirrorline.connectors.mm2.mm2_config import MirrorMakerConfig
from mirrorline.connectors.mm2.command import worker_specs

BASE = {"clusters": "A, B", "A.bootstrap.servers": "a:9092", "B.bootstrap.servers": "b:9092",
        "A->B.enabled": "true", "B->A.enabled": "true"}


def names(specs) -> dict[str, list[str]]:
    return {spec.worker_id: sorted(c["name"] for c in spec.connector_configs) for spec in specs}


def test_emit_offset_syncs_disabled_runs_no_checkpoint_connector_with_one_line_per_flow(caplog):
    caplog.set_level(logging.INFO, logger="mirrorline.connectors.mm2.flow_connectors")
    specs = worker_specs(MirrorMakerConfig({**BASE, "emit.offset-syncs.enabled": "false"}), None)
    assert names(specs) == {"A->B": ["MirrorHeartbeatConnector", "MirrorSourceConnector"],
                            "B->A": ["MirrorHeartbeatConnector", "MirrorSourceConnector"]}
    lines = [r for r in caplog.records if "runs no MirrorCheckpointConnector" in r.getMessage()]
    assert len(lines) == 2 and all(r.levelno == logging.INFO for r in lines)
    assert "emit.offset-syncs.enabled = false" in lines[0].getMessage()


def test_only_the_flow_that_disables_offset_syncs_loses_its_checkpoints():
    specs = worker_specs(MirrorMakerConfig({**BASE, "A->B.emit.offset-syncs.enabled": "false"}), None)
    assert names(specs) == {"A->B": ["MirrorHeartbeatConnector", "MirrorSourceConnector"],
                            "B->A": ["MirrorCheckpointConnector", "MirrorHeartbeatConnector",
                                     "MirrorSourceConnector"]}


def test_emit_checkpoints_disabled_stands_aside_too():
    specs = worker_specs(MirrorMakerConfig({**BASE, "emit.checkpoints.enabled": "false"}), ["B"])
    assert names(specs) == {"A->B": ["MirrorHeartbeatConnector", "MirrorSourceConnector"]}


def test_a_connector_refusing_its_config_does_not_stop_the_others(monkeypatch, caplog):
    from mirrorline.connectors.mm2 import flow_connectors

    def refusal(name, config):
        return "made-up problem" if name == "MirrorSourceConnector" and config["source.cluster.alias"] == "A" else None

    monkeypatch.setattr(flow_connectors, "refusal", refusal)
    specs = worker_specs(MirrorMakerConfig(BASE), None)
    assert names(specs)["A->B"] == ["MirrorCheckpointConnector", "MirrorHeartbeatConnector"]
    assert len(names(specs)["B->A"]) == 3
    errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert errors == ["Flow A->B: connector MirrorSourceConnector is not started, its config is invalid: made-up "
                      "problem; the flow's other connectors and the other flows run"]


def test_nothing_left_to_run_is_one_config_error(monkeypatch):
    from mirrorline.connectors.mm2 import flow_connectors

    original = flow_connectors.refusal
    monkeypatch.setattr(flow_connectors, "refusal", lambda name, config: "refused" if name == "MirrorSourceConnector"
                        else original(name, config))
    props = {**BASE, "B->A.enabled": "false", "emit.heartbeats.enabled": "false", "emit.offset-syncs.enabled": "false"}
    with pytest.raises(ConfigError, match=r"^no connector can run: flow A->B: MirrorSourceConnector: refused; "
                                          r"flow A->B: MirrorCheckpointConnector: emit.offset-syncs"):
        worker_specs(MirrorMakerConfig(props), None)
