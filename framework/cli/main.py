"""Entry point of the ``mirrorline`` console command.

Every subcommand module exposes ``register(subparsers)``, which adds its parser and sets
``func``. Errors a user can act on (bad config, missing Java, a taken port ...) end the
command with exit code 1 and one readable line on stderr, never a traceback.
"""

from __future__ import annotations

import argparse
import logging
import sys

from framework import __version__
from framework.cli import distributed, local_kafka, plugins, standalone

SUBCOMMANDS = [local_kafka, standalone, distributed, plugins]


class UserError(Exception):
    """An error whose message alone tells the user what went wrong; printed without a traceback."""


def user_error_types() -> tuple[type[BaseException], ...]:
    """Exception types the CLI reports as one line (imported lazily to keep start-up fast)."""
    from framework.localkafka.errors import LocalKafkaError

    types: list[type[BaseException]] = [UserError, LocalKafkaError]
    try:
        from framework.api.errors import ConnectError
        types.append(ConnectError)
    except ImportError:
        pass
    return tuple(types)


def build_parser() -> argparse.ArgumentParser:
    """The full argument parser, with every subcommand registered."""
    parser = argparse.ArgumentParser(prog="mirrorline", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"mirrorline {__version__}")
    parser.add_argument("--log-level", default="INFO", help="root log level (default INFO)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for module in SUBCOMMANDS:
        module.register(sub)
    _register_plugin_commands(sub)
    return parser


def _register_plugin_commands(sub: argparse._SubParsersAction) -> None:
    """Add the subcommands plugins contribute through the ``register_commands`` hook."""
    import asyncio

    from framework.plugins import PluginRegistry

    registry = PluginRegistry.discover()
    taken = set(sub.choices)
    for command in registry.commands():
        if command.name in taken:
            logging.getLogger(__name__).error("Plugin command %r clashes with another command and is skipped",
                                              command.name)
            continue
        taken.add(command.name)
        command_parser = sub.add_parser(command.name, help=command.help)
        command.configure_parser(command_parser)

        def run(args: argparse.Namespace, command=command, registry=registry) -> int:
            from framework.runtime.launcher import ProcessLauncher

            async def main() -> int:
                return await command.run(args, ProcessLauncher(registry))

            return asyncio.run(main())

        command_parser.set_defaults(func=run)


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the process exit code."""
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        return 130
    except user_error_types() as exc:
        print(f"mirrorline: error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
