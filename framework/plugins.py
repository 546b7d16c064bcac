"""Plugin discovery: pluggy hooks, fed by entry points in the ``mirrorline`` group.

Built-in and third-party connectors load the same way: each entry point names a module
(or object) implementing hooks from :mod:`mirrorline.api.hookspecs`. Entry points are loaded
one at a time, so a plugin that fails to import is recorded (with its distribution and the
reason) and the others still load; pluggy's own ``load_setuptools_entrypoints`` would stop
at the first failure.

``connector.class`` resolution follows Kafka Connect: a connector answers to its full name
(``module.ClassName``), its simple class name, that name without a ``Connector`` suffix,
and any name in its ``aliases``. A short name claimed by two different connectors resolves
to neither, and the error lists the full names to choose from.

Other plugin-provided classes (replication policies, REST extensions) are collected here too,
as classes the plugins registered; the connectors that use policies check their type and
resolve names, and REST extensions are checked here. No setting ever makes mirrorline import a
module by name. Transforms and predicates (``register_transforms``, ``register_predicates``)
resolve by name like connectors do, in their own tables (:class:`NamedClasses`), and so do
converters (``register_converters``: a class may be a ``Converter``, a ``HeaderConverter`` or both).
"""

from __future__ import annotations

import difflib
import importlib.metadata
import logging
import traceback
from dataclasses import dataclass

import pluggy

from mirrorline.api import hookspecs
from mirrorline.api.connector import Connector
from mirrorline.api.errors import NotFoundError
from mirrorline.api.rest_extension import RestExtension

log = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "mirrorline"


@dataclass(frozen=True)
class PluginLoadFailure:
    """A plugin that could not be loaded: which entry point, from which distribution, and why."""

    entry_point: str
    distribution: str
    error: str


class UnknownHookError(NameError):
    """A plugin implements (``@hookimpl``) a hook no specification declares: most likely a misspelt name."""

    def __init__(self, hooks: list[str]):
        known = sorted(name for name, obj in vars(hookspecs).items()
                       if callable(obj) and getattr(obj, "mirrorline_spec", None) is not None)
        hints = []
        for hook in hooks:
            close = difflib.get_close_matches(hook, known, n=1)
            hints.append(f"{hook} (did you mean {close[0]}?)" if close else hook)
        super().__init__(f"unknown hook(s) {', '.join(hints) or '?'}: no mirrorline hook has that name "
                         f"(known hooks: {', '.join(known)}); the plugin is not loaded")


def full_name(cls: type) -> str:
    """A class's full name, as ``connector.class`` spells it: ``module.ClassName``."""
    return f"{cls.__module__}.{cls.__qualname__}"


def short_names(cls: type[Connector]) -> list[str]:
    """Every name a connector answers to besides its full name."""
    names = [cls.__name__]
    if cls.__name__.endswith("Connector") and len(cls.__name__) > len("Connector"):
        names.append(cls.__name__[: -len("Connector")])
    names.extend(getattr(cls, "aliases", ()))
    return names


class PluginRegistry:
    """The connectors (and load failures) of every plugin known to this process."""

    def __init__(self, plugin_manager: pluggy.PluginManager):
        self.pm = plugin_manager
        self.failures: list[PluginLoadFailure] = []
        self._load_failures: list[PluginLoadFailure] = []  # import failures, kept across refresh()
        self._origins: dict[str, tuple[str, str]] = {}  # plugin name -> (entry point value, distribution)
        self._connectors: dict[str, type[Connector]] = {}
        self._aliases: dict[str, set[str]] = {}
        self._policies: list[type] = []
        self._rest_extensions: list[type[RestExtension]] = []
        self._transforms = NamedClasses("transformation")
        self._predicates = NamedClasses("predicate")
        self._converters = NamedClasses("converter")
        self._header_converters = NamedClasses("header converter")

    @classmethod
    def discover(cls, extra_plugins: tuple[object, ...] = ()) -> PluginRegistry:
        """Build a registry from installed entry points plus any plugin objects given directly."""
        pm = pluggy.PluginManager("mirrorline")
        pm.add_hookspecs(hookspecs)
        registry = cls(pm)
        for entry_point in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
            registry._load_entry_point(entry_point)
        for plugin in extra_plugins:
            pm.register(plugin)
        registry._reject_unknown_hooks()
        registry.refresh()
        return registry

    def _reject_unknown_hooks(self) -> None:
        """Unregister, as a load failure naming it, every plugin with an ``@hookimpl`` that matches no hook.

        pluggy's ``check_pending()`` finds them (a misspelt hook name would otherwise be ignored in
        silence); ``@hookimpl(optionalhook=True)`` opts out, for hooks of optional other plugins.
        """
        while True:
            try:
                self.pm.check_pending()
                return
            except pluggy.PluginValidationError as exc:
                plugin = exc.plugin
                name = self.pm.get_name(plugin) or repr(plugin)
                where, dist = self._origins.get(name, (name, name))
                unknown = sorted(hook for hook in vars(self.pm.hook)
                                 if not getattr(self.pm.hook, hook).has_spec()
                                 and any(impl.plugin is plugin for impl in getattr(self.pm.hook, hook).get_hookimpls()))
                self.pm.unregister(plugin)
                self._origins.pop(name, None)
                self._load_failures.append(self._fail(where, dist, UnknownHookError(unknown)))

    def _load_entry_point(self, entry_point: importlib.metadata.EntryPoint) -> None:
        dist = entry_point.dist.name if entry_point.dist else "unknown distribution"
        if self.pm.is_blocked(entry_point.name):
            return
        if self.pm.get_plugin(entry_point.name) is not None:
            self._fail(entry_point.value, dist, NameError(
                f"entry point name {entry_point.name!r} is already used by another plugin; rename one of them"))
            return
        try:
            plugin = entry_point.load()
            self.pm.register(plugin, name=entry_point.name)
        except Exception as exc:
            self._load_failures.append(self._fail(entry_point.value, dist, exc))
        else:
            self._origins[entry_point.name] = (entry_point.value, dist)

    def _fail(self, where: str, dist: str, exc: BaseException) -> PluginLoadFailure:
        reason = "".join(traceback.format_exception_only(type(exc), exc)).strip()
        failure = PluginLoadFailure(where, dist, reason)
        self.failures.append(failure)
        log.error("Plugin %s from %s could not be loaded and is skipped: %s. "
                  "Fix or uninstall that package; other plugins are unaffected.", where, dist, reason)
        return failure

    def refresh(self) -> None:
        """Re-collect connectors from every registered plugin (after registering more plugins)."""
        self._connectors.clear()
        self._aliases.clear()
        self._policies.clear()
        self._rest_extensions.clear()
        self.failures = list(self._load_failures)  # hook failures are found afresh below
        self._collect_policies()
        self._collect_rest_extensions()
        self._collect_config_providers()
        self._collect_transforms()
        self._collect_converters()
        self._collect_jobs()
        for where, dist, classes in self._each_plugin("register_connectors"):
            for connector_class in classes:
                if not (isinstance(connector_class, type) and issubclass(connector_class, Connector)):
                    self._fail(where, dist, TypeError(f"{connector_class!r} is not a Connector subclass"))
                    continue
                self._add(connector_class)

    def _each_plugin(self, hook: str):
        """``(where, distribution, results)`` of every plugin implementing ``hook``, in registration order.

        Each plugin's implementation is called through pluggy (``pm.hook.<hook>``, narrowed to that
        plugin with ``subset_hook_caller``), so results stay attributable: a plugin whose hook raises
        is recorded as a load failure and skipped, and the others still count.
        """
        caller = getattr(self.pm.hook, hook)
        impls = caller.get_hookimpls()
        plugins = [impl.plugin for impl in impls if not impl.hookwrapper and not impl.wrapper]
        for plugin in plugins:
            others = [p for p in self.pm.get_plugins() if p is not plugin]
            name = self.pm.get_name(plugin) or repr(plugin)
            where, dist = self._origins.get(name, (name, name))
            try:
                results = [item for result in self.pm.subset_hook_caller(hook, remove_plugins=others)()
                           for item in (result or [])]
            except Exception as exc:
                self._fail(f"{where}.{hook}", dist, exc)
                continue
            yield where, dist, results

    def _collect_policies(self) -> None:
        for where, dist, classes in self._each_plugin("register_replication_policies"):
            for policy_class in classes:
                if not isinstance(policy_class, type):
                    self._fail(where, dist, TypeError(f"{policy_class!r} is not a class"))
                elif policy_class not in self._policies:
                    self._policies.append(policy_class)
        hookspecs.publish_replication_policies(self._policies)

    def _collect_rest_extensions(self) -> None:
        for where, dist, classes in self._each_plugin("register_rest_extensions"):
            for extension_class in classes:
                if not (isinstance(extension_class, type) and issubclass(extension_class, RestExtension)):
                    self._fail(where, dist, TypeError(f"{extension_class!r} is not a RestExtension subclass"))
                elif extension_class not in self._rest_extensions:
                    self._rest_extensions.append(extension_class)

    def _collect_config_providers(self) -> None:
        from mirrorline.api.config_provider import ConfigProvider

        self._config_providers = []
        for where, dist, classes in self._each_plugin("register_config_providers"):
            for provider_class in classes:
                if not (isinstance(provider_class, type) and issubclass(provider_class, ConfigProvider)):
                    self._fail(where, dist, TypeError(f"{provider_class!r} is not a ConfigProvider subclass"))
                elif provider_class not in self._config_providers:
                    self._config_providers.append(provider_class)

    def config_provider_classes(self) -> list[type]:
        """The config provider classes plugins registered (``register_config_providers``), in load order."""
        return list(getattr(self, "_config_providers", []))

    def rest_extensions(self) -> list[type[RestExtension]]:
        """The REST extension classes plugins registered (``register_rest_extensions``), in load order."""
        return list(self._rest_extensions)

    def _collect_transforms(self) -> None:
        from mirrorline.api.transforms import Predicate, Transformation

        self._transforms = NamedClasses("transformation")
        self._predicates = NamedClasses("predicate")
        for hook, base, table in (("register_transforms", Transformation, self._transforms),
                                  ("register_predicates", Predicate, self._predicates)):
            for where, dist, classes in self._each_plugin(hook):
                for plugin_class in classes:
                    if not (isinstance(plugin_class, type) and issubclass(plugin_class, base)):
                        self._fail(where, dist, TypeError(f"{plugin_class!r} is not a {base.__name__} subclass"))
                    else:
                        table.add(plugin_class)

    def _collect_converters(self) -> None:
        from mirrorline.api.converters import Converter, HeaderConverter

        self._converters = NamedClasses("converter")
        self._header_converters = NamedClasses("header converter")
        for where, dist, classes in self._each_plugin("register_converters"):
            for plugin_class in classes:
                kinds = [table for base, table in ((Converter, self._converters),
                                                   (HeaderConverter, self._header_converters))
                         if isinstance(plugin_class, type) and issubclass(plugin_class, base)]
                if not kinds:
                    self._fail(where, dist, TypeError(f"{plugin_class!r} is neither a Converter nor a "
                                                      f"HeaderConverter subclass"))
                for table in kinds:
                    table.add(plugin_class)

    @property
    def converters(self) -> NamedClasses:
        """The key/value converter classes plugins registered (``register_converters``), by name."""
        return self._converters

    @property
    def header_converters(self) -> NamedClasses:
        """The header converter classes plugins registered (``register_converters``), by name."""
        return self._header_converters

    def _collect_jobs(self) -> None:
        from mirrorline.api.jobs import Job

        self._jobs: dict[str, type] = {}
        for where, dist, classes in self._each_plugin("register_jobs"):
            for job_class in classes:
                if not (isinstance(job_class, type) and issubclass(job_class, Job)):
                    self._fail(where, dist, TypeError(f"{job_class!r} is not a Job subclass"))
                elif job_class.name in self._jobs and self._jobs[job_class.name] is not job_class:
                    self._fail(where, dist, NameError(f"job name {job_class.name!r} is already taken by "
                                                      f"{full_name(self._jobs[job_class.name])}"))
                else:
                    self._jobs[job_class.name] = job_class

    def jobs(self) -> dict[str, type]:
        """The bulk job classes plugins registered (``register_jobs``), by job name, sorted."""
        return dict(sorted(getattr(self, "_jobs", {}).items()))

    def job_class(self, name: str) -> type:
        """The job class registered as ``name``; NotFoundError listing the known jobs otherwise."""
        jobs = self.jobs()
        if name not in jobs:
            raise NotFoundError(f"no job named {name!r} is installed; installed jobs: {', '.join(jobs) or 'none'}")
        return jobs[name]

    @property
    def transforms(self) -> NamedClasses:
        """The transformation classes plugins registered (``register_transforms``), by name."""
        return self._transforms

    @property
    def predicates(self) -> NamedClasses:
        """The predicate classes plugins registered (``register_predicates``), by name."""
        return self._predicates

    def replication_policies(self) -> list[type]:
        """The replication policy classes plugins registered (``register_replication_policies``)."""
        return list(self._policies)

    def _add(self, connector_class: type[Connector]) -> None:
        name = full_name(connector_class)
        self._connectors[name] = connector_class
        for alias in short_names(connector_class):
            self._aliases.setdefault(alias, set()).add(name)

    def commands(self) -> list:
        """CLI commands (``mirrorline.api.launcher.Command``) every plugin contributes."""
        return [command for _, _, commands in self._each_plugin("register_commands") for command in commands]

    def connectors(self) -> dict[str, type[Connector]]:
        """Connector classes by full name, sorted."""
        return dict(sorted(self._connectors.items()))

    def connector_names(self) -> list[str]:
        """Every name ``connector.class`` resolves with (full names, and short names that are not ambiguous)."""
        return sorted({*self._connectors, *(alias for alias, names in self._aliases.items() if len(names) == 1)})

    def connector_class(self, name: str) -> type[Connector]:
        """The connector class ``connector.class`` names; NotFoundError saying why if none or ambiguous."""
        if name in self._connectors:
            return self._connectors[name]
        candidates = self._aliases.get(name, set())
        if len(candidates) == 1:
            return self._connectors[next(iter(candidates))]
        if candidates:
            raise NotFoundError(f"Connector class {name} is ambiguous: it matches {', '.join(sorted(candidates))}; "
                                f"use the full class name")
        known = ", ".join(sorted(self._connectors)) or "none"
        raise NotFoundError(f"Failed to find any class that implements Connector and which name matches {name}, "
                            f"available connectors are: {known}")

    def matches(self, connector_class: type[Connector], name: str) -> bool:
        """True when ``name`` is one of the names ``connector_class`` answers to."""
        return name == full_name(connector_class) or name in short_names(connector_class)


class NamedClasses:
    """Plugin classes of one kind (transformations, predicates) and the names a config may use for
    them: the full name, the simple class name and each of the class's ``aliases``. A short name
    two classes claim resolves to neither."""

    def __init__(self, kind: str):
        self.kind = kind
        self._classes: dict[str, type] = {}
        self._aliases: dict[str, set[str]] = {}

    def add(self, cls: type) -> None:
        """Register ``cls`` under its full name and its short names."""
        name = full_name(cls)
        self._classes[name] = cls
        for alias in (cls.__name__, *getattr(cls, "aliases", ())):
            self._aliases.setdefault(alias, set()).add(name)

    def all(self) -> dict[str, type]:
        """Classes by full name, sorted."""
        return dict(sorted(self._classes.items()))

    def resolve(self, name: str) -> type:
        """The class ``name`` means; NotFoundError saying why when none or several."""
        if name in self._classes:
            return self._classes[name]
        candidates = self._aliases.get(name, set())
        if len(candidates) == 1:
            return self._classes[next(iter(candidates))]
        if candidates:
            raise NotFoundError(f"{self.kind.capitalize()} class {name} is ambiguous: it matches "
                                f"{', '.join(sorted(candidates))}; use the full class name")
        raise NotFoundError(f"Class {name} could not be found: no installed {self.kind} is named so")
