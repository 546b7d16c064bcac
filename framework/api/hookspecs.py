"""The hooks a mirrorline plugin may implement.

A plugin is a module (or object) registered with mirrorline's pluggy ``PluginManager``.
Installed distributions make themselves known through an entry point in the
``mirrorline`` group; the built-in connectors register exactly the same way::

    # pyproject.toml of a third-party plugin
    [project.entry-points.mirrorline]
    my_plugin = "my_package.plugin"

    # my_package/plugin.py
    from framework.api import hookimpl

    @hookimpl
    def register_connectors():
        return [MySourceConnector]

Hooks are plain functions (synchronous): they only declare what a plugin provides. The
data path goes through the Connector/Task classes, never through hooks. A plugin that
fails to import, or whose hook raises, is reported by ``mirrorline plugins`` and
``GET /connector-plugins`` stays available with the others.
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

    :return: a list of :class:`~framework.api.connector.Connector` subclasses. Each is known
        by its full name (``module.ClassName``), its simple class name, that name without a
        ``Connector`` suffix, and the names in its ``aliases`` attribute.

    Called once per plugin when the worker (or ``mirrorline plugins``) loads plugins. The
    results of all plugins are combined; a name claimed by two connectors resolves to
    neither and is reported as ambiguous.
    """


@hookspec
def register_replication_policies() -> list[type]:
    """Return the replication policy classes this plugin provides.

    :return: a list of ``connectors.mirror_client.policies.ReplicationPolicy`` subclasses.
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

    :return: a list of :class:`~framework.api.launcher.Command` instances. Each becomes
        ``mirrorline <command.name>``; its ``run`` receives the parsed arguments and a
        :class:`~framework.api.launcher.WorkerLauncher` to run workers with.

    Called once when the ``mirrorline`` command builds its argument parser. A name that
    clashes with a built-in subcommand or another plugin's is reported and skipped.
    """
