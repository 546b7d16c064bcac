"""The ``transforms.*`` and ``predicates.*`` settings of a connector config, as Connect reads them.

``transforms=a,b`` names aliases; each alias has ``transforms.<a>.type`` (a class a plugin
registered), the implicit ``transforms.<a>.predicate`` and ``transforms.<a>.negate``, and the
settings its class declares, as ``transforms.<a>.<setting>``. Predicates likewise under
``predicates.<p>.``. Like Connect's ``ConnectorConfig.enrich``, this module turns those into
config keys with the prefixed names (group ``Transforms: <a>`` / ``Predicates: <p>``), so
validation reports each problem on its own field, REST redacts a transform's PASSWORD
settings, and the runtime builds the chain from the same parse.

Beyond the per-setting checks, an alias is validated as a whole: ``negate`` without a
``predicate``, a ``predicate`` alias that ``predicates`` does not list, and anything the
class's ``configure`` rejects (reported on ``.type``) are errors before a task ever starts.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from mirrorline.api.config import Config, ConfigDef, ConfigKey, ConfigValue, Importance, Type, split_list
from mirrorline.api.errors import ConfigError, NotFoundError
from mirrorline.plugins import NamedClasses, PluginRegistry

TRANSFORMS = "transforms"
PREDICATES = "predicates"
PREDICATE = "predicate"
NEGATE = "negate"

#: The settings every transform has, handled by the runtime (Connect's ``PredicatedTransformation``).
IMPLICIT_TRANSFORM_KEYS = ConfigDef([
    ConfigKey(PREDICATE, Type.STRING, default=None, importance=Importance.MEDIUM,
              doc="The alias of a predicate used to determine whether to apply this transformation."),
    ConfigKey(NEGATE, Type.BOOLEAN, default=False, importance=Importance.MEDIUM,
              doc="Whether the configured predicate should be negated."),
])


@dataclass
class AliasConfig:
    """One ``transforms.<alias>`` or ``predicates.<alias>``: its class, keys and validated values."""

    alias: str
    prefix: str
    kind: str  #: "transformation" or "predicate"
    group: str  #: "Transforms: <alias>" or "Predicates: <alias>", as Connect groups them
    cls: type | None = None
    keys: list[ConfigKey] = field(default_factory=list)
    values: list[ConfigValue] = field(default_factory=list)

    @property
    def type_key(self) -> str:
        """The name of this alias's ``type`` setting."""
        return self.prefix + "type"

    def value(self, name: str) -> ConfigValue:
        """The validated value of the un-prefixed setting ``name``."""
        return next(v for v in self.values if v.name == self.prefix + name)

    @property
    def errors(self) -> list[str]:
        """Every error of this alias's settings."""
        return [e for v in self.values for e in v.errors]

    def parsed(self, raw: Mapping[str, Any]) -> Config:
        """The class's own settings as the ``Config`` its ``configure`` receives (prefix removed)."""
        own = {v.name[len(self.prefix):]: v.value for v in self.values if v.name != self.type_key}
        originals = {k[len(self.prefix):]: v for k, v in raw.items() if k.startswith(self.prefix)}
        for name in (PREDICATE, NEGATE, "type"):
            if self.kind == "transformation" or name == "type":
                own.pop(name, None)
                originals.pop(name, None)
        return Config(own, originals)


def aliases(config: Mapping[str, Any], setting: str) -> list[str]:
    """The aliases a ``transforms`` / ``predicates`` setting lists, each once, in order."""
    value = config.get(setting) or ""
    listed = value if isinstance(value, (list, tuple)) else split_list(str(value))
    return list(dict.fromkeys(str(a) for a in listed if str(a)))


def _type_key(name: str, alias: str, kind: str, group: str) -> ConfigKey:
    return ConfigKey(name, Type.CLASS, importance=Importance.HIGH, group=group, order=0,
                     display_name=f"{kind.capitalize()} type for {alias}",
                     doc=f"Class for the '{alias}' {kind}.")


def _alias_config(config: Mapping[str, Any], setting: str, alias: str, kind: str,
                  table: NamedClasses) -> AliasConfig:
    """Resolve and validate one alias's settings (no instance is made)."""
    prefix = f"{setting}.{alias}."
    group = f"{setting.capitalize()}: {alias}"
    entry = AliasConfig(alias, prefix, kind, group)
    type_key = _type_key(prefix + "type", alias, kind, group)
    type_value = ConfigValue(type_key.name, config.get(type_key.name), recommended_values=list(table.all()))
    entry.keys.append(type_key)
    entry.values.append(type_value)
    if type_value.value in (None, ""):
        type_value.errors.append(f"Missing required configuration \"{type_key.name}\" which has no default value.")
        return entry
    try:
        entry.cls = table.resolve(str(type_value.value).strip())
    except NotFoundError as exc:
        type_value.errors.append(f"Invalid value {type_value.value} for configuration {type_key.name}: {exc}")
        return entry
    own = IMPLICIT_TRANSFORM_KEYS.keys if kind == "transformation" else {}
    declared = {**own, **{k: v for k, v in entry.cls.config_def.keys.items() if k not in own}}
    prefixed = ConfigDef(dataclasses.replace(key, name=prefix + key.name, group=group, order=order)
                         for order, key in enumerate(declared.values(), start=1))
    entry.keys += prefixed.keys.values()
    entry.values += prefixed.validate(config)
    return entry


def alias_configs(config: Mapping[str, Any], plugins: PluginRegistry, *, check: bool = True) -> list[AliasConfig]:
    """Every transform alias, then every predicate alias, validated setting by setting.

    With ``check``, each alias is also validated as a whole: predicate references, and
    ``configure`` called on a throw-away instance of each class whose settings are valid, so
    what only the class can judge (two lists of different lengths ...) is found too.
    """
    predicate_aliases = aliases(config, PREDICATES)
    entries = [_alias_config(config, TRANSFORMS, a, "transformation", plugins.transforms)
               for a in aliases(config, TRANSFORMS)]
    entries += [_alias_config(config, PREDICATES, p, "predicate", plugins.predicates) for p in predicate_aliases]
    for entry in entries:
        if entry.cls is None or not check:
            continue
        if entry.kind == "transformation":
            _check_predicate_reference(entry, config, predicate_aliases)
        if not entry.errors:
            try:
                configured(entry, config).close()
            except Exception as exc:
                entry.value("type").errors.append(
                    f"Invalid configuration of {entry.kind} {entry.alias} ({entry.cls.__name__}): {exc}")
    return entries


def _check_predicate_reference(entry: AliasConfig, config: Mapping[str, Any], predicate_aliases: list[str]) -> None:
    predicate = entry.value(PREDICATE)
    if predicate.value is None or predicate.errors:
        if entry.prefix + NEGATE in config and predicate.value is None:
            entry.value(NEGATE).errors.append(
                f"Config '{entry.prefix}{NEGATE}' was provided but there is no config "
                f"'{entry.prefix}{PREDICATE}' defining a predicate to be negated.")
        return
    if predicate.value not in predicate_aliases:
        listed = ", ".join(predicate_aliases) or "none"
        predicate.errors.append(
            f"Invalid value {predicate.value} for configuration {entry.prefix}{PREDICATE}: there is no predicate "
            f"with alias {predicate.value} (the predicates setting lists: {listed})")


def configured(entry: AliasConfig, config: Mapping[str, Any]) -> Any:
    """A new instance of the alias's class, configured with its settings; raises what ``configure`` raises."""
    assert entry.cls is not None
    instance = entry.cls()
    instance.configure(entry.parsed(config))
    return instance


def transform_config_def(config: Mapping[str, Any], plugins: PluginRegistry) -> ConfigDef:
    """The prefixed keys of every transform and predicate alias ``config`` names (for secrets and docs)."""
    return ConfigDef(key for entry in alias_configs(config, plugins, check=False) for key in entry.keys)


def iter_values(entries: list[AliasConfig]) -> Iterator[tuple[ConfigKey, ConfigValue]]:
    """``(key, value)`` of every setting of ``entries``, in order."""
    for entry in entries:
        keys = {k.name: k for k in entry.keys}
        for value in entry.values:
            yield keys[value.name], value


def raise_errors(entries: list[AliasConfig]) -> None:
    """ConfigError listing every error of ``entries``, if there is any."""
    errors = [f"{value.name}: {error}" for _, value in iter_values(entries) for error in value.errors]
    if errors:
        raise ConfigError("Invalid transforms or predicates: " + "; ".join(errors))
