"""Settings every connector has, whatever its class (Kafka Connect's ``ConnectorConfig``)."""

from __future__ import annotations

from framework.api.config import ConfigDef, ConfigKey, Importance, NonEmptyString, Range, Type

COMMON_GROUP = "Common"

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
    ConfigKey("key.converter", Type.CLASS, default=None, importance=Importance.LOW, group=COMMON_GROUP, order=4,
              doc="Accepted for compatibility with Kafka Connect configs; mirrorline writes keys as the "
                  "bytes the task returns (ByteArrayConverter behaviour)."),
    ConfigKey("value.converter", Type.CLASS, default=None, importance=Importance.LOW, group=COMMON_GROUP, order=5,
              doc="Accepted for compatibility; values are written as returned (ByteArrayConverter behaviour)."),
    ConfigKey("header.converter", Type.CLASS, default=None, importance=Importance.LOW, group=COMMON_GROUP, order=6,
              doc="Accepted for compatibility; header values are written as returned."),
])

#: Connector settings starting with this prefix override the worker's producer settings.
PRODUCER_OVERRIDE_PREFIX = "producer.override."
