"""MirrorMaker 2 commands: dedicated mode (``mirrorline mm2``) and failover tools, as plugin commands."""

from framework.api import hookimpl


@hookimpl
def register_commands():
    """The ``mm2``, ``offsets``, ``failover`` and ``failback`` subcommands."""
    from connectors.mm2.command import MirrorMakerCommand
    from connectors.mm2.failover import FailbackCommand, FailoverCommand, TranslateCommand

    return [MirrorMakerCommand(), TranslateCommand(), FailoverCommand(), FailbackCommand()]
