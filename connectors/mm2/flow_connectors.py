"""Which of MM2's connectors a flow runs, and why one stands aside.

As in MM2's dedicated mode, every flow runs MirrorHeartbeatConnector, and an enabled flow also
MirrorSourceConnector and MirrorCheckpointConnector. A connector whose own validation refuses
its config (``Connector.validate``, what ``PUT /connector-plugins/{plugin}/config/validate``
reports) is not created, with one log line, and the flow's other connectors and the other flows
run: MM2 logs "Failed to configure" for it and goes on. The common case is KIP-1031's
``emit.offset-syncs.enabled = false``: the flow mirrors records and heartbeats, writes no offset
syncs, and so has nothing to translate consumer offsets with; the checkpoint connector stands
aside (an info line, not an error).

Values that do not parse (a bad regex, an empty separator...) are caught earlier, for the whole
file, by :func:`~mirrorline.connectors.mm2.mm2_config.check_connector_configs`: the file
is wrong and ``mirrorline mm2`` stops with one line before anything runs.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from mirrorline.connectors.mm2.mm2_config import (
    CHECKPOINT_CONNECTOR,
    HEARTBEAT_CONNECTOR,
    SOURCE_CONNECTOR,
    Flow,
)

log = logging.getLogger(__name__)

#: Connectors an enabled flow runs; the heartbeat connector runs for every flow, enabled or not.
FLOW_CONNECTORS = (SOURCE_CONNECTOR, CHECKPOINT_CONNECTOR)


def _connector_class(name: str):
    # lazy: the connectors import much more than this module needs for its names
    if name == SOURCE_CONNECTOR:
        from mirrorline.connectors.source_mirror.connector import MirrorSourceConnector
        return MirrorSourceConnector
    if name == CHECKPOINT_CONNECTOR:
        from mirrorline.connectors.checkpoint.connector import MirrorCheckpointConnector
        return MirrorCheckpointConnector
    from mirrorline.connectors.heartbeat.connector import MirrorHeartbeatConnector
    return MirrorHeartbeatConnector


def _is_false(config: dict[str, str], key: str) -> bool:
    return str(config.get(key, "true")).strip().lower() == "false"


def refusal(name: str, config: dict[str, str]) -> str | None:
    """Why connector ``name`` does not run with ``config`` (its own validation errors), or None.

    Values holding a config-provider reference (``${...}``) are left to the worker, which resolves them.
    """
    if name == CHECKPOINT_CONNECTOR and _is_false(config, "emit.offset-syncs.enabled"):
        return "emit.offset-syncs.enabled = false: no offset syncs to translate consumer offsets with"
    if name == CHECKPOINT_CONNECTOR and _is_false(config, "emit.checkpoints.enabled"):
        return "emit.checkpoints.enabled = false"
    errors = [f"{value.name}: {error}" for value in _connector_class(name)().validate(config)
              if "${" not in str(config.get(value.name, "")) for error in value.errors]
    return "; ".join(errors) or None


@dataclass
class FlowConnectors:
    """The connector configs a flow runs, and the connectors left out with the reason."""

    flow: Flow
    configs: list[dict[str, str]] = field(default_factory=list)
    left_out: dict[str, str] = field(default_factory=dict)


def flow_connectors(flow: Flow) -> FlowConnectors:
    """What ``flow`` runs: enabled data connectors that validate, and its heartbeat connector."""
    chosen = FlowConnectors(flow)
    names = [n for n in FLOW_CONNECTORS if _is_enabled(flow.connector_configs[n])]
    if flow.heartbeats_enabled:
        names.append(HEARTBEAT_CONNECTOR)
    for name in names:
        config = flow.connector_configs[name]
        why = refusal(name, config)
        if why is None:
            chosen.configs.append(config)
        else:
            chosen.left_out[config.get("name", name)] = why
    return chosen


def _is_enabled(config: dict[str, str]) -> bool:
    return str(config.get("enabled", "false")).strip().lower() == "true"


def log_left_out(chosen: FlowConnectors) -> None:
    """One line per connector a flow does not run: info when it stands aside by design, else an error."""
    for name, why in chosen.left_out.items():
        if why.startswith(("emit.offset-syncs.enabled = false", "emit.checkpoints.enabled = false")):
            log.info("Flow %s runs no %s (%s); it mirrors records and heartbeats, as MM2 does", chosen.flow.name,
                     name, why)
        else:
            log.error("Flow %s: connector %s is not started, its config is invalid: %s; the flow's other "
                      "connectors and the other flows run", chosen.flow.name, name, why)
