"""docs/configuration.md, generated from the runtime's ConfigDef declarations: the worker's and every connector's own.

Run ``python -m mirrorline.runtime.config_docs > docs/configuration.md`` after changing a
declaration; tests/unit/test_config_docs.py fails while the page and the declarations differ.
Each connector class's own settings come from ``mirrorline plugins --docs``.
"""

from __future__ import annotations

from mirrorline.api.config import ConfigDef, ConfigKey, format_value
from mirrorline.runtime.connector_config import CONNECTOR_CONFIG_DEF
from mirrorline.runtime.sink_config import SINK_CONFIG_DEF
from mirrorline.runtime.source_config import SOURCE_CONFIG_DEF as EXACTLY_ONCE_CONFIG_DEF
from mirrorline.runtime.topic_creation import SOURCE_CONFIG_DEF, default_group_keys, group_keys
from mirrorline.runtime.worker_config import DISTRIBUTED_CONFIG_DEF, WORKER_CONFIG_DEF

_INTRO = """# Configuration reference

Generated from the settings' declarations (`python -m mirrorline.runtime.config_docs`): names, types,
defaults, valid values and descriptions are the ones the worker parses and `config/validate` checks.
Kafka Connect's names and defaults, unless a description says otherwise. A connector class's own
settings: `mirrorline plugins --docs` (`GET /connector-plugins/{plugin}/config` on a worker).

Client settings pass through by prefix and are not listed: `producer.*`, `consumer.*`, `admin.*`
on the worker, `producer.override.*`, `consumer.override.*`, `admin.override.*` on a connector
(Kafka's client names: `bootstrap.servers`, `security.protocol`, `sasl.*`, `ssl.*`, `acks`,
`max.block.ms`, `delivery.timeout.ms`, `buffer.memory`, `retry.backoff.ms`, `retry.backoff.max.ms`
..., and mirrorline's own `produce.connections.per.broker`: see docs/performance.md).
"""


def _table(keys: list[ConfigKey], default_of=None) -> str:
    lines = ["| Name | Type | Default | Valid values | Importance | Description |", "|---|---|---|---|---|---|"]
    for key in keys:
        if default_of is not None and default_of(key) is not None:
            default = default_of(key)
        else:
            default = "(required)" if key.required else f"`{format_value(key.default_value(), key.type)}`"
        valid = str(key.validator) if key.validator else ""
        doc = key.doc.replace("|", "\\|").replace("\n", " ")
        lines.append(f"| `{key.name}` | {key.type.value} | {default} | {valid} | {key.importance.value.lower()} "
                     f"| {doc} |")
    return "\n".join(lines) + "\n"


def _only(definition: ConfigDef, without: ConfigDef) -> list[ConfigKey]:
    return [k for name, k in definition.keys.items() if name not in without.keys]


def render() -> str:
    """The whole page."""
    inherited = (".replication.factor", ".partitions")
    listed = group_keys("<group>")
    sections = [
        _INTRO,
        "## Worker (standalone and distributed)\n", _table(list(WORKER_CONFIG_DEF.keys.values())),
        "## Distributed worker, in addition\n", _table(_only(DISTRIBUTED_CONFIG_DEF, WORKER_CONFIG_DEF)),
        "## Every connector\n", _table(list(CONNECTOR_CONFIG_DEF.keys.values())),
        "## Source connectors, in addition: topic creation (KIP-158)\n",
        "In effect when the worker's `topic.creation.enable` is true and the connector has any "
        "`topic.creation.*` setting; see docs/plugin-authoring.md, *Topics a source connector writes "
        "to*. Any other `topic.creation.<group>.<name>` is a topic config (`cleanup.policy`, "
        "`retention.ms` ...). The default group takes every topic no listed group takes: its `include` and "
        "`exclude` are declared, as in Connect, but ignored.\n",
        _table([*SOURCE_CONFIG_DEF.keys.values(), *default_group_keys().keys.values()]),
        "Each group listed in `topic.creation.groups`:\n",
        _table(listed, lambda k: "the default group's" if k.name.endswith(inherited) else None),
        "## Source connectors, in addition: exactly-once (KIP-618)\n",
        "On distributed workers with `exactly.once.source.support=enabled`; see docs/exactly-once.md.\n",
        _table(list(EXACTLY_ONCE_CONFIG_DEF.keys.values())),
        "## Sink connectors, in addition\n", _table(list(SINK_CONFIG_DEF.keys.values())),
    ]
    return "\n".join(sections)


if __name__ == "__main__":
    print(render(), end="")
