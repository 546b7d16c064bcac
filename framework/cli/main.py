"""Entry point of the ``mirrorline`` console command.

Every subcommand module exposes ``register(subparsers)``, which adds its parser and sets
``func``. Errors a user can act on (bad config, missing Java, a taken port ...) end the
command with exit code 1 and one readable line on stderr, never a traceback.
"""

from __future__ import annotations

import argparse
import logging
import sys
import traceback

from mirrorline import __version__
from mirrorline.boot import event_loop, gc_tuning, heap_trim
from mirrorline.clients import process_patches
from mirrorline.cli import distributed, jobs, local_kafka, plugin_new, plugins, standalone

SUBCOMMANDS = [local_kafka, standalone, distributed, plugins, plugin_new, jobs]


class UserError(Exception):
    """An error whose message alone tells the user what went wrong; printed without a traceback."""


def user_error_types() -> tuple[type[BaseException], ...]:
    """Exception types the CLI reports as one line (imported lazily to keep start-up fast).

    Ours (UserError, LocalKafkaError, ConnectError and so ConfigError and the Kafka clients'
    KafkaError), the Kafka client library's own errors (a plugin command using it directly: a
    broker that is down or refuses), and OSError (a taken port, an unreachable host, a file).
    """
    from mirrorline.localkafka.errors import LocalKafkaError

    types: list[type[BaseException]] = [UserError, LocalKafkaError, OSError]
    try:
        from mirrorline.api.errors import ConnectError
        types.append(ConnectError)
    except ImportError:
        pass
    try:
        from mirrorline.clients.errors import LIBRARY_ERRORS
        types.extend(LIBRARY_ERRORS)
    except ImportError:
        pass
    return tuple(types)


def one_line(exc: BaseException) -> str:
    """The message of ``exc`` on one line, with a hint for errors that carry none."""
    text = " ".join(part.strip() for part in str(exc).splitlines() if part.strip())
    if not text:
        text = exc.__class__.__name__
    if exc.__class__.__name__ == "KafkaConnectionError":
        text += "; check that the Kafka brokers run and the bootstrap servers are right"
    return text


def _log_level(text: str) -> str:
    """``--log-level``: a logging level name, any case (argparse reports a wrong one as a usage error)."""
    if not isinstance(logging.getLevelName(text.upper()), int):
        raise argparse.ArgumentTypeError(f"unknown log level {text!r}: use DEBUG, INFO, WARNING or ERROR")
    return text.upper()


def build_parser() -> argparse.ArgumentParser:
    """The full argument parser, with every subcommand registered."""
    parser = argparse.ArgumentParser(prog="mirrorline", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"mirrorline {__version__}")
    parser.add_argument("--log-level", default="INFO", type=_log_level,
                        help="root log level: DEBUG, INFO, WARNING, ERROR (default INFO)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for module in SUBCOMMANDS:
        module.register(sub)
    _register_plugin_commands(sub)
    return parser


def _register_plugin_commands(sub: argparse._SubParsersAction) -> None:
    """Add the subcommands plugins contribute through the ``register_commands`` hook."""
    from mirrorline.plugins import PluginRegistry

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
            from mirrorline.boot.launcher import ProcessLauncher

            async def main() -> int:
                return await command.run(args, ProcessLauncher(registry))

            return event_loop.run(main())

        command_parser.set_defaults(func=run)


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the process exit code.

    This is the one place where failures become output. Every failure exits 1 and ends with a
    single ``mirrorline: error: ...`` line on stderr:

    * errors of :func:`user_error_types` (bad config, broker down, port taken ...): their own
      message, folded onto one line; it says what happened and what to do;
    * anything else is a bug: one line naming the exception, and its traceback only with
      ``--log-level DEBUG`` (printed before that line), which the line suggests.

    Ctrl-C exits 130 without output; argparse's usage errors keep their exit code 2.
    """
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    process_patches.install()  # before any Kafka client exists in this process
    try:
        gc_tuning.tune()  # a malformed MIRRORLINE_GC_THRESHOLDS is a one-line error
        with heap_trim.trimming():  # as is a malformed MIRRORLINE_HEAP_TRIM_INTERVAL_MS
            return int(args.func(args) or 0)
    except KeyboardInterrupt:
        return 130
    except user_error_types() as exc:
        print(f"mirrorline: error: {one_line(exc)}", file=sys.stderr)
        return 1
    except Exception as exc:  # noqa: BLE001 - a bug: still one line, the traceback on request
        debug = args.log_level == "DEBUG"
        if debug:
            traceback.print_exc()
        detail = f": {one_line(exc)}" if str(exc).strip() else ""
        hint = "" if debug else " (run with --log-level DEBUG for the traceback)"
        print(f"mirrorline: error: unexpected {exc.__class__.__name__}{detail}{hint}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
