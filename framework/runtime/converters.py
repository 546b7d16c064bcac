"""A task's converters: ``key.converter``, ``value.converter`` and ``header.converter``, resolved and configured.

Each role is set on the worker and may be overridden per connector; as in Connect, the
settings of a converter (``value.converter.schemas.enable``...) come from the same place as its
class: a connector that names its own ``value.converter`` takes its own ``value.converter.*``
settings, otherwise the worker's converter and the worker's settings are used. The default of
every role is ``ByteArrayConverter`` (Connect has no default for keys and values, and
``SimpleHeaderConverter`` for headers; mirrorline's defaults keep the mirror path byte for byte).

:class:`RecordConverters` applies them to a record: ``to_bytes`` on the source path (after the
transforms, before the producer) and ``to_data`` on the sink path (after the consumer, before
the transforms). When all three are pass-through (``is_passthrough``) callers skip conversion
altogether, so the mirror path runs no converter code. A converter's failure is raised as a
:class:`~mirrorline.runtime.error_handling.StageError` naming the stage (key, value or header
converter) and the class, for the :class:`~mirrorline.runtime.error_handling.ErrorHandler`.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping
from typing import Any

from mirrorline.api.config import ConfigKey, ConfigValue, Importance, Type
from mirrorline.api.converters import Converter, HeaderConverter, infer_schema
from mirrorline.api.errors import ConfigError, NotFoundError
from mirrorline.api.records import SinkRecord, SourceRecord
from mirrorline.converters.bytearray import ByteArrayConverter
from mirrorline.plugins import NamedClasses, PluginRegistry, full_name
from mirrorline.runtime.error_handling import Stage, StageError

log = logging.getLogger(__name__)

BYTE_ARRAY = "org.apache.kafka.connect.converters.ByteArrayConverter"
_BYTE_ARRAY_NAMES = {BYTE_ARRAY, "ByteArrayConverter", full_name(ByteArrayConverter)}
CONVERTERS_GROUP = "Common"  # as Connect's ConnectorConfig

#: role -> (setting, stage, is_key)
ROLES = {
    "key": ("key.converter", Stage.KEY_CONVERTER, True),
    "value": ("value.converter", Stage.VALUE_CONVERTER, False),
    "header": ("header.converter", Stage.HEADER_CONVERTER, False),
}


def converter_keys(worker: bool = False) -> list[ConfigKey]:
    """The three ``*.converter`` settings, for the worker (defaults) or a connector (overrides)."""
    where = ("Converter class used for {what} of every connector that does not set its own; its settings are "
             "{name}.* (e.g. value.converter.schemas.enable=false). Default ByteArrayConverter: bytes through "
             "unchanged, the mirror path.") if worker else (
            "Converter class used for {what} of this connector, overriding the worker's; its settings are "
            "{name}.* of this connector. Unset: the worker's converter and settings.")
    return [
        ConfigKey(name, Type.CLASS, default=BYTE_ARRAY if worker else None, importance=Importance.LOW,
                  group=CONVERTERS_GROUP, order=4 + i, display_name=name.title().replace(".", " "),
                  doc=where.format(name=name, what=what) + " Names: a class's full name, simple name or Connect's "
                      "Java name (org.apache.kafka.connect.json.JsonConverter...).")
        for i, (name, what) in enumerate((("key.converter", "record keys"), ("value.converter", "record values"),
                                          ("header.converter", "header values")))
    ]


def _table(plugins: PluginRegistry, role: str) -> NamedClasses:
    return plugins.header_converters if role == "header" else plugins.converters


def _source(role: str, connector: Mapping[str, Any], worker: Mapping[str, Any]) -> tuple[str, Mapping[str, Any]]:
    """The class name a role uses and the settings map it comes from (connector wins over worker)."""
    setting = ROLES[role][0]
    for where in (connector, worker):
        name = where.get(setting)
        if name not in (None, ""):
            return str(name), where
    return BYTE_ARRAY, {}


def _originals(settings: Any) -> Mapping[str, Any]:
    return getattr(settings, "originals", settings) or {}


def configure_converter(plugins: PluginRegistry, role: str, name: str, settings: Mapping[str, Any]):
    """A configured instance of the converter ``name`` for ``role`` (key/value/header), its settings read
    from ``<role>.converter.*`` of ``settings``; NotFoundError or ConfigError saying what is wrong."""
    setting, _, is_key = ROLES[role]
    try:
        cls = _table(plugins, role).resolve(name)
    except NotFoundError:
        if name not in _BYTE_ARRAY_NAMES:
            raise
        cls = ByteArrayConverter  # the default needs no plugin registry (registries built for tests...)
    prefix = setting + "."
    raw = {k[len(prefix):]: v for k, v in settings.items() if k.startswith(prefix)}
    instance = cls()
    try:
        parsed = cls.config_def.parse(raw)
    except ConfigError as exc:
        raise ConfigError(f"{setting} {name}: {exc}") from None
    instance.configure(parsed, is_key)
    return instance


def validate_converters(connector_config: Mapping[str, Any], plugins: PluginRegistry) -> list[ConfigValue]:
    """The problems of a connector's own ``*.converter`` settings (unknown class, bad settings), one
    ConfigValue per role it sets: what ``config/validate`` shows on those fields."""
    values = []
    for role, (setting, _, _) in ROLES.items():
        name = connector_config.get(setting)
        if name in (None, ""):
            continue
        value = ConfigValue(setting, name)
        try:
            configure_converter(plugins, role, str(name), connector_config).close()
        except (NotFoundError, ConfigError) as exc:
            value.errors.append(str(exc))
        except Exception as exc:  # a plugin's configure() must not turn bad input into a 500
            value.errors.append(f"{setting} {name}: configure() raised {exc!r}")
        values.append(value)
    return values


class RecordConverters:
    """The key, value and header converters of one task, and how they apply to records."""

    def __init__(self, key: Converter, value: Converter, header: HeaderConverter):
        self.key = key
        self.value = value
        self.header = header
        self._key_class = full_name(type(key))
        self._value_class = full_name(type(value))
        self._header_class = full_name(type(header))
        #: True when all three hand bytes through unchanged: callers then skip conversion entirely.
        self.is_passthrough = bool(type(key).passthrough and type(value).passthrough and type(header).passthrough)

    def to_bytes(self, record: SourceRecord) -> SourceRecord:
        """The record with its key, value and header values as the bytes to write (source path).

        Header values that are already bytes (or None) are written unchanged, whatever the header
        converter: they are what transforms such as ``InsertHeader`` produce."""
        topic = record.topic
        key, value, headers = record.key, record.value, record.headers
        if not type(self.key).passthrough or not isinstance(key, (bytes, type(None))):
            key = self._call(Stage.KEY_CONVERTER, self._key_class, self.key.from_data, topic, record.key_schema, key)
        if not type(self.value).passthrough or not isinstance(value, (bytes, type(None))):
            value = self._call(Stage.VALUE_CONVERTER, self._value_class, self.value.from_data, topic,
                               record.value_schema, value)
        if headers and any(not isinstance(v, (bytes, type(None))) for _, v in headers):
            headers = [(name, v if isinstance(v, (bytes, type(None))) else self._call(
                Stage.HEADER_CONVERTER, self._header_class, self.header.from_connect_header, topic, name,
                infer_schema(v), v)) for name, v in headers]
        return dataclasses.replace(record, key=key, value=value, headers=headers)

    def to_data(self, record: SinkRecord) -> SinkRecord:
        """The record with its key, value and header values read by the converters (sink path);
        ``key_schema`` / ``value_schema`` are what the converters read with them."""
        topic = record.topic
        key_schema, key = self._call(Stage.KEY_CONVERTER, self._key_class, self.key.to_data, topic, record.key)
        value_schema, value = self._call(Stage.VALUE_CONVERTER, self._value_class, self.value.to_data, topic,
                                         record.value)
        headers = record.headers
        if headers and not type(self.header).passthrough:
            headers = [(name, self._call(Stage.HEADER_CONVERTER, self._header_class, self.header.to_connect_header,
                                         topic, name, v)[1]) for name, v in headers]
        return dataclasses.replace(record, key=key, value=value, headers=headers, key_schema=key_schema,
                                   value_schema=value_schema)

    @staticmethod
    def _call(stage: Stage, class_name: str, method, *args):
        try:
            return method(*args)
        except Exception as exc:
            raise StageError(f"{class_name} failed: {type(exc).__name__}: {exc}", stage, class_name) from exc

    def close(self) -> None:
        """Close each converter once (one instance may serve two roles only if a plugin shares it)."""
        for converter in {id(c): c for c in (self.key, self.value, self.header)}.values():
            try:
                converter.close()
            except Exception:
                log.exception("Closing converter %s raised; continuing", type(converter).__name__)


def build_converters(connector_settings: Any, worker_settings: Any, plugins: PluginRegistry) -> RecordConverters:
    """The converters a task of this connector uses: each role's class from the connector config if
    it names one, else from the worker config, else ByteArrayConverter; each configured with the
    ``<role>.converter.*`` settings of the config its class came from. ConfigError / NotFoundError
    if a class is unknown or its settings are invalid."""
    connector, worker = _originals(connector_settings), _originals(worker_settings)
    built: dict[str, Any] = {}
    try:
        for role in ROLES:
            name, source = _source(role, connector, worker)
            built[role] = configure_converter(plugins, role, name, source)
    except BaseException:
        for converter in built.values():
            converter.close()
        raise
    return RecordConverters(built["key"], built["value"], built["header"])


def source_converters(connector_settings: Any, worker_settings: Any,
                      plugins: PluginRegistry) -> RecordConverters | None:
    """:func:`build_converters` for a source task, or None when all three are pass-through (then
    the task's loop runs no converter code)."""
    converters = build_converters(connector_settings, worker_settings, plugins)
    if converters.is_passthrough:
        converters.close()
        return None
    return converters
