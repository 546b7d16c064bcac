"""MirrorMaker 2 commands: dedicated mode (``mirrorline mm2``) and failover tools, as plugin commands."""

from framework.api import hookimpl


@hookimpl
def register_commands():
    """The ``mm2``, ``offsets`` and ``failover`` subcommands."""
    from connectors.mm2.command import MirrorMakerCommand
    from connectors.mm2.failover import FailoverCommand, TranslateCommand

    return [MirrorMakerCommand(), TranslateCommand(), FailoverCommand()]
