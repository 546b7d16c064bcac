"""Settings every source connector has (Kafka Connect's ``SourceConnectorConfig``): exactly-once.

KIP-618's connector-level settings, with Connect's names, defaults, documentation and
validation messages: ``exactly.once.support`` (``requested`` | ``required``),
``transaction.boundary`` (``poll`` | ``interval`` | ``connector``),
``transaction.boundary.interval.ms`` and ``offsets.storage.topic``. They are merged into each
source connector's settings for parsing, ``config/validate`` and REST create, as
:mod:`~mirrorline.runtime.sink_config` does for sinks. Whether a value can be honoured (the
worker's ``exactly.once.source.support``, the connector's own answers) is checked by
:mod:`~mirrorline.runtime.exactly_once`.
"""

from __future__ import annotations

from typing import Any

from mirrorline.api.config import ConfigDef, ConfigKey, Importance, Type, Validator, ValidString

EXACTLY_ONCE_SUPPORT = "exactly.once.support"
TRANSACTION_BOUNDARY = "transaction.boundary"
TRANSACTION_BOUNDARY_INTERVAL_MS = "transaction.boundary.interval.ms"
OFFSETS_STORAGE_TOPIC = "offsets.storage.topic"

REQUESTED, REQUIRED = "requested", "required"
POLL, INTERVAL, CONNECTOR = "poll", "interval", "connector"
EXACTLY_ONCE_SUPPORT_LEVELS = (REQUESTED, REQUIRED)
TRANSACTION_BOUNDARIES = (POLL, INTERVAL, CONNECTOR)

EXACTLY_ONCE_GROUP = "Exactly Once Support"
OFFSETS_TOPIC_GROUP = "offsets.topic"


class _NullOrAtLeastZero(Validator):
    """Unset, or a number >= 0 (Connect's message)."""

    def __call__(self, name: str, value: Any) -> None:
        if value is not None and value < 0:
            raise ValueError("Value must be at least 0")

    def __str__(self) -> str:
        return "[0,...]"


class _NullOrNonEmpty(Validator):
    """Unset, or a non-empty string (Connect's ``ConfigDef.NonEmptyString`` and its message)."""

    def __call__(self, name: str, value: Any) -> None:
        if value is not None and not str(value):
            raise ValueError("String may not be empty")

    def __str__(self) -> str:
        return "non-empty string"


SOURCE_CONFIG_DEF = ConfigDef([
    ConfigKey(EXACTLY_ONCE_SUPPORT, Type.STRING, default=REQUESTED, importance=Importance.MEDIUM,
              validator=ValidString(EXACTLY_ONCE_SUPPORT_LEVELS, ignore_case=True), group=EXACTLY_ONCE_GROUP,
              order=1, display_name="Exactly once support",
              doc='Permitted values are requested, required. If set to "required", forces a preflight check for the '
                  'connector to ensure that it can provide exactly-once semantics with the given configuration. '
                  'Some connectors may be capable of providing exactly-once semantics but not signal to Connect '
                  'that they support this; in that case, documentation for the connector should be consulted '
                  'carefully before creating it, and the value for this property should be set to "requested". '
                  'Additionally, if the value is set to "required" but the worker that performs preflight '
                  'validation does not have exactly-once support enabled for source connectors, requests to '
                  'create or validate the connector will fail. (mirrorline: standalone workers never have it.)'),
    ConfigKey(TRANSACTION_BOUNDARY, Type.STRING, default=POLL, importance=Importance.MEDIUM,
              validator=ValidString(TRANSACTION_BOUNDARIES, ignore_case=True), group=EXACTLY_ONCE_GROUP, order=2,
              display_name="Transaction Boundary",
              doc="Permitted values are: poll, interval, connector. If set to 'poll', a new producer transaction "
                  "will be started and committed for every batch of records that each task from this connector "
                  "provides to Connect. If set to 'connector', relies on connector-defined transaction boundaries; "
                  "note that not all connectors are capable of defining their own transaction boundaries, and in "
                  "that case, attempts to instantiate a connector with this value will fail. Finally, if set to "
                  "'interval', commits transactions only after a user-defined time interval has passed."),
    ConfigKey(TRANSACTION_BOUNDARY_INTERVAL_MS, Type.LONG, default=None, importance=Importance.LOW,
              validator=_NullOrAtLeastZero(), group=EXACTLY_ONCE_GROUP, order=3,
              display_name="Transaction boundary interval",
              doc="If 'transaction.boundary' is set to 'interval', determines the interval for producer transaction "
                  "commits by connector tasks. If unset, defaults to the value of the worker-level "
                  "'offset.flush.interval.ms' property. It has no effect if a different transaction.boundary is "
                  "specified."),
    ConfigKey(OFFSETS_STORAGE_TOPIC, Type.STRING, default=None, importance=Importance.LOW,
              validator=_NullOrNonEmpty(), group=OFFSETS_TOPIC_GROUP, order=1, display_name="Offsets topic",
              doc="The name of a separate offsets topic to use for this connector. If empty or not specified, the "
                  "worker's global offsets topic name will be used. If specified, the offsets topic will be created "
                  "if it does not already exist on the Kafka cluster targeted by this connector (which may be "
                  "different from the one used for the worker's global offsets topic if the bootstrap.servers "
                  "property of the connector's producer has been overridden from the worker's). Only applicable in "
                  "distributed mode; in standalone mode, setting this property will have no effect."),
])
