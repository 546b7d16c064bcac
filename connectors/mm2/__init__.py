"""MirrorMaker 2 commands: dedicated mode (``mirrorline mm2``) and failover tools, as plugin commands."""

from mirrorline.api import hookimpl


@hookimpl
def register_commands():
    """The ``mm2``, ``offsets``, ``failover``, ``failback``, ``reconcile``, ``backfill`` and ``mirroring`` subcommands."""
    from mirrorline.connectors.mm2.backfill import BackfillCommand
    from mirrorline.connectors.mm2.command import MirrorMakerCommand
    from mirrorline.connectors.mm2.failover import FailbackCommand, FailoverCommand, TranslateCommand
    from mirrorline.connectors.mm2.mirroring_command import MirroringCommand
    from mirrorline.connectors.mm2.reconcile_command import ReconcileCommand

    return [MirrorMakerCommand(), TranslateCommand(), FailoverCommand(), FailbackCommand(), ReconcileCommand(),
            BackfillCommand(), MirroringCommand()]


@hookimpl
def register_jobs():
    """The Spark jobs: ``mm2-reconcile`` (``mirrorline reconcile``) and ``backfill`` (``mirrorline backfill``)."""
    from mirrorline.connectors.mm2.backfill_job import BackfillJob
    from mirrorline.connectors.mm2.reconcile import ReconcileJob

    return [ReconcileJob, BackfillJob]
