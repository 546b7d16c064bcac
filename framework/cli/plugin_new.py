"""``mirrorline plugin new NAME [--source|--sink|--transform]``: write a ready-to-install plugin project."""

from __future__ import annotations

import argparse
from pathlib import Path

from mirrorline.scaffold import new_plugin

_NEXT_STEPS = """
Next:
  cd {directory}
  pip install -e '.[test]'      # into the environment mirrorline runs in
  pytest                        # the generated tests, with mirrorline's plugin test kit
  mirrorline plugins            # lists the new {kind}
Restart the workers to load it. The README says how to configure it; the guide is docs/plugin-authoring.md."""


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``plugin`` subcommand and its ``new`` action."""
    parser = sub.add_parser("plugin", help="create a plugin project (mirrorline plugin new NAME --source)")
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    new = actions.add_parser("new", help="write a ready-to-install plugin project: pyproject.toml with the entry "
                                         "point, a skeleton, tests with the plugin test kit, a README")
    new.add_argument("name", metavar="NAME", help="the plugin's name, e.g. acme-orders (package acme_orders)")
    kind = new.add_mutually_exclusive_group()
    for option in ("source", "sink", "transform"):
        kind.add_argument(f"--{option}", dest="kind", action="store_const", const=option,
                          help=f"a {option}{' connector' if option != 'transform' else ' (single message transform)'}"
                               f"{' (the default)' if option == 'source' else ''}")
    new.add_argument("--directory", type=Path, default=None, help="where to write it (default ./NAME; must not "
                                                                  "exist or be empty)")
    new.set_defaults(func=_new, kind="source")


def _new(args: argparse.Namespace) -> int:
    written = new_plugin(args.name, args.kind, args.directory)  # a ScaffoldError is the CLI's one error line
    directory = args.directory if args.directory is not None else Path(args.name)
    print(f"Created the {args.kind} plugin {args.name} in {directory}:")
    for path in written:
        print(f"  {path}")
    print(_NEXT_STEPS.format(directory=directory, kind="connector" if args.kind != "transform" else "transform"))
    return 0
