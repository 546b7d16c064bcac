"""The hooks a mirrorline plugin may implement.

A plugin is a module (or object) registered with mirrorline's pluggy ``PluginManager``.
Installed distributions make themselves known through an entry point in the
``mirrorline`` group; the built-in connectors register exactly the same way::

    # pyproject.toml of a third-party plugin
    [project.entry-points.mirrorline]
    my_plugin = "my_package.plugin"

    # my_package/plugin.py
    from mirrorline.api import hookimpl

    @hookimpl
    def register_connectors():
        return [MySourceConnector]

Hooks are plain functions (synchronous): they only declare what a plugin provides. The
data path goes through the Connector/Task classes, never through hooks. A plugin that
fails to import, or whose hook raises, is reported by ``mirrorline plugins`` and
``GET /connector-plugins`` stays available with the others. So is a plugin with an
``@hookimpl`` that matches no hook here (a misspelt name, found by pluggy's
``check_pending()`` at load): it is not loaded, and the report names the unknown hook.
"""

from __future__ import annotations

import pluggy

#: Marks hook specifications (used by mirrorline and by plugins that define new hooks).
hookspec = pluggy.HookspecMarker("mirrorline")
#: Marks hook implementations in a plugin module.
hookimpl = pluggy.HookimplMarker("mirrorline")


# ---------------------------------------------------------------------------------------
# Discovery: what a plugin provides
# ---------------------------------------------------------------------------------------

@hookspec
def register_connectors() -> list[type]:
    """Return the connector classes this plugin provides.

    :return: a list of :class:`~mirrorline.api.connector.Connector` subclasses. Each is known
        by its full name (``module.ClassName``), its simple class name, that name without a
        ``Connector`` suffix, and the names in its ``aliases`` attribute.

    Called once per plugin when the worker (or ``mirrorline plugins``) loads plugins. The
    results of all plugins are combined; a name claimed by two connectors resolves to
    neither and is reported as ambiguous.
    """


@hookspec
def register_replication_policies() -> list[type]:
    """Return the replication policy classes this plugin provides.

    :return: a list of ``mirrorline.connectors.mirror_client.policies.ReplicationPolicy`` subclasses.
        Each becomes a value ``replication.policy.class`` accepts: its full name
        (``module.ClassName``), its simple class name, and the names in its ``aliases``
        attribute. A name a built-in policy already answers to stays the built-in's.

    This is the only way to add a policy: ``replication.policy.class`` never imports a module
    a config names, so a REST caller cannot make the worker import arbitrary code.
    """


_replication_policies: tuple[type, ...] = ()


def registered_replication_policies() -> tuple[type, ...]:
    """The classes plugins returned from ``register_replication_policies``, as collected by the
    worker's plugin registry when it last loaded plugins (empty before that).

    How connectors reach plugin-provided policies without importing the runtime; the classes
    are not type-checked here, the connector that uses them checks them.
    """
    return _replication_policies


def publish_replication_policies(classes: list[type]) -> None:
    """Called by the runtime's plugin registry after collecting the hook's results (not by plugins)."""
    global _replication_policies
    _replication_policies = tuple(classes)


# ---------------------------------------------------------------------------------------
# Command line: subcommands a plugin adds to ``mirrorline``
# ---------------------------------------------------------------------------------------

@hookspec
def register_commands() -> list:
    """Return the CLI subcommands this plugin provides.

    :return: a list of :class:`~mirrorline.api.launcher.Command` instances. Each becomes
        ``mirrorline <command.name>``; its ``run`` receives the parsed arguments and a
        :class:`~mirrorline.api.launcher.WorkerLauncher` to run workers with.

    Called once when the ``mirrorline`` command builds its argument parser. A name that
    clashes with a built-in subcommand or another plugin's is reported and skipped.
    """


# ---------------------------------------------------------------------------------------
# REST API: routes a plugin adds to every worker's REST API
# ---------------------------------------------------------------------------------------

@hookspec
def register_rest_extensions() -> list[type]:
    """Return the REST extension classes this plugin provides.

    :return: a list of :class:`~mirrorline.api.rest_extension.RestExtension` subclasses (Kafka
        Connect's ``ConnectRestExtension``). Each worker's REST app instantiates each class
        without arguments and calls its ``register(context)`` once, before it listens; the
        extension adds routes with ``context.add_route`` and reads the worker cluster's
        connectors, configs, task configs and statuses through ``context.cluster_state``.

    Every installed plugin's extensions are served (unlike Connect, no
    ``rest.extension.classes`` entry is needed: installing the plugin is the decision). Their
    routes get the API's JSON errors, body-size limit and authentication. A class that is not a
    RestExtension, or whose ``register`` raises, is reported and left out; the rest of the API
    is served as usual. Not called in processes that serve no REST API (``mirrorline mm2``).
    """


# ---------------------------------------------------------------------------------------
# Config providers: where ${provider:path:key} references in configs are looked up
# ---------------------------------------------------------------------------------------

@hookspec
def register_config_providers() -> list[type]:
    """Return the config provider classes this plugin provides.

    :return: a list of :class:`~mirrorline.api.config_provider.ConfigProvider` subclasses. A
        worker uses one when its ``config.providers.<name>.class`` names the class (short name,
        full Python name, or one of its ``aliases``), configures it with
        ``config.providers.<name>.param.*``, and asks it for the values of
        ``${<name>:path:key}`` references when a connector or task starts.

    Built in: ``FileConfigProvider``, ``DirectoryConfigProvider``, ``EnvVarConfigProvider``
    (also under Connect's Java class names). A class that is not a ConfigProvider is reported
    and left out.
    """



# ---------------------------------------------------------------------------------------
# Records: single message transforms and predicates a plugin provides
# ---------------------------------------------------------------------------------------

@hookspec
def register_transforms() -> list[type]:
    """Return the single message transform classes this plugin provides.

    :return: a list of :class:`~mirrorline.api.transforms.Transformation` subclasses. Each
        becomes a value ``transforms.<alias>.type`` accepts: its full name (``module.ClassName``),
        its simple class name and the names in its ``aliases`` attribute. A short name two
        classes claim resolves to neither (the full name still works).

    Called once per plugin when the worker (or ``mirrorline plugins``) loads plugins. The
    classes are listed by ``GET /connector-plugins?connectorsOnly=false`` with type
    ``transformation``. A returned value that is not a Transformation subclass is reported as
    a load failure of the plugin and left out; the plugin's other classes still count.
    The built-in transforms (``RegexRouter``, ``Filter``, ``InsertField$Value`` ...) are
    registered through this hook by ``mirrorline.transforms``, like any plugin's.
    """


@hookspec
def register_predicates() -> list[type]:
    """Return the predicate classes this plugin provides.

    :return: a list of :class:`~mirrorline.api.transforms.Predicate` subclasses, named in
        ``predicates.<alias>.type`` as transforms are (full name, class name, ``aliases``).

    Called once per plugin when plugins load. Listed by
    ``GET /connector-plugins?connectorsOnly=false`` with type ``predicate``; anything that is
    not a Predicate subclass is reported and left out, as for ``register_transforms``.
    """


@hookspec
def register_converters() -> list[type]:
    """Return the converter classes this plugin provides.

    :return: a list of :class:`~mirrorline.api.converters.Converter` and/or
        :class:`~mirrorline.api.converters.HeaderConverter` subclasses (a class may be both).
        Each becomes a value ``key.converter`` / ``value.converter`` (Converter) or
        ``header.converter`` (HeaderConverter) accepts, at worker or connector level: its full
        name, its simple class name and the names in its ``aliases`` attribute.

    Called once per plugin when plugins load. Listed by
    ``GET /connector-plugins?connectorsOnly=false`` with type ``converter`` and/or
    ``header_converter``; anything that is neither is reported as a load failure and left out.
    The built-ins (``ByteArrayConverter``, ``StringConverter``, ``JsonConverter``,
    ``SimpleHeaderConverter``) are registered through this hook by ``mirrorline.converters``.
    """


# ---------------------------------------------------------------------------------------
# Bulk jobs: batch work on Spark beside the connectors
# ---------------------------------------------------------------------------------------

@hookspec
def register_jobs() -> list[type]:
    """Return the bulk job classes this plugin provides.

    :return: a list of :class:`~mirrorline.api.jobs.Job` subclasses. Each is known by its
        ``name`` attribute; a plugin command runs one with
        :meth:`~mirrorline.api.launcher.WorkerLauncher.run_job`, which builds the SparkSession
        (embedded ``local[*]``, or ``spark.master``) on the job's first use of ``context.spark``.

    Called once per plugin when plugins load; listed by ``mirrorline plugins`` with type
    ``job``. A returned value that is not a Job subclass, or a name two jobs claim, is reported
    as a load failure and left out. The built-in ``backfill`` job is registered this way by
    ``mirrorline.connectors.mm2``.
    """
