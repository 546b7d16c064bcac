"""``mirrorline plugins``: the installed connectors, transforms and predicates, their names, and
plugins that failed to load."""

from __future__ import annotations

import argparse

from mirrorline.plugins import PluginRegistry, full_name, short_names


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``plugins`` subcommand."""
    parser = sub.add_parser("plugins", help="list installed connector plugins")
    parser.add_argument("--docs", action="store_true", help="print each connector's settings as Markdown")
    parser.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    registry = PluginRegistry.discover()
    for name, cls in registry.connectors().items():
        version = cls().version()
        print(f"{name}  type={cls.type} version={version} aliases={','.join(short_names(cls))}")
        if args.docs:
            print()
            print(cls.config_def.to_markdown())
    for kind, table in (("transformation", registry.transforms), ("predicate", registry.predicates),
                        ("converter", registry.converters), ("header_converter", registry.header_converters)):
        for name, cls in table.all().items():
            print(f"{name}  type={kind} version={cls().version()} aliases={','.join((cls.__name__, *cls.aliases))}")
            if args.docs and cls.config_def.keys:
                print()
                print(cls.config_def.to_markdown())
    for name, cls in registry.jobs().items():
        print(f"{name}  type=job version={cls().version()} class={full_name(cls)}"
              + (f"  {cls.description}" if cls.description else ""))
        if args.docs and cls.config_def.keys:
            print()
            print(cls.config_def.to_markdown())
    for failure in registry.failures:
        print(f"FAILED to load {failure.entry_point} (from {failure.distribution}): {failure.error}")
    if not registry.connectors() and not registry.failures:
        print("no connector plugins installed")
    return 1 if registry.failures else 0
