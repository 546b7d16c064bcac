"""Settings every connector has, whatever its class (Kafka Connect's ``ConnectorConfig``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mirrorline.api.config import ConfigDef, ConfigKey, Importance, NonEmptyString, Range, Type, Validator
from mirrorline.runtime.converters import converter_keys
from mirrorline.runtime.error_handling import ERROR_CONFIG_KEYS

COMMON_GROUP = "Common"
TRANSFORMS_GROUP = "Transforms"
PREDICATES_GROUP = "Predicates"


@dataclass(frozen=True)
class UniqueAliases(Validator):
    """A list of aliases in which no alias appears twice."""

    kind: str

    def __call__(self, name: str, value: Any) -> None:
        if value and len(set(value)) < len(value):
            raise ValueError("Duplicate alias provided.")

    def __str__(self) -> str:
        return f"unique {self.kind} aliases"


CONNECTOR_CONFIG_DEF = ConfigDef([
    ConfigKey("name", Type.STRING, importance=Importance.HIGH, validator=NonEmptyString(), group=COMMON_GROUP,
              doc="Globally unique name to use for this connector.", order=1, display_name="Connector name"),
    ConfigKey("connector.class", Type.STRING, importance=Importance.HIGH, group=COMMON_GROUP, order=2,
              doc="Name or alias of the connector's class: its full name (module.ClassName), its simple "
                  "class name, that name without the 'Connector' suffix, or an alias the plugin declares.",
              display_name="Connector class"),
    ConfigKey("tasks.max", Type.INT, default=1, importance=Importance.HIGH, validator=Range(min=1),
              group=COMMON_GROUP, order=3, doc="Maximum number of tasks to use for this connector.",
              display_name="Tasks max"),
    ConfigKey("tasks.share.clients", Type.BOOLEAN, default=False, importance=Importance.LOW, group=COMMON_GROUP,
              order=4, display_name="Tasks share clients",
              doc="Whether the connector's source tasks that run in the same worker process share one "
                  "producer, and, for connectors that ask for it (MirrorSourceConnector), one source "
                  "consumer: one connection and one fetch per broker for all of them, so two tasks make "
                  "half the fetch and produce round trips, for less CPU and a few ms more latency. Beyond "
                  "Kafka Connect, where every task has its own clients (false, the default). Exactly-once "
                  "source tasks never share."),
    *converter_keys(),  # key.converter, value.converter, header.converter: overrides of the worker's
    ConfigKey("transforms", Type.LIST, default="", importance=Importance.LOW, validator=UniqueAliases("transformation"),
              group=TRANSFORMS_GROUP, order=7, display_name="Transforms",
              doc="Aliases for the transformations to be applied to records, in order."),
    ConfigKey("predicates", Type.LIST, default="", importance=Importance.LOW, validator=UniqueAliases("predicate"),
              group=PREDICATES_GROUP, order=8, display_name="Predicates",
              doc="Aliases for the predicates used by transformations."),
    *ERROR_CONFIG_KEYS,  # errors.tolerance, errors.retry.*, errors.log.*
])

#: Connector settings starting with this prefix override the worker's producer settings.
PRODUCER_OVERRIDE_PREFIX = "producer.override."
#: Connector settings starting with this prefix override the worker's ``admin.*`` settings (the admin
#: client a source task creates its topics with).
ADMIN_OVERRIDE_PREFIX = "admin.override."
