"""``mirrorline plugin new``: a ready-to-install plugin project, written from templates.

One command gives a Python author what Kafka Connect's Maven archetypes give a Java one: a
project that installs, is found, passes its tests and runs on a worker as generated. For a
``source`` or ``sink`` connector, or a ``transform``, it writes:

- ``pyproject.toml`` with the ``mirrorline`` entry point (and no dependency on mirrorline, the host);
- a skeleton of the connector and its task, or of the transformation, using ``mirrorline.api`` only;
- ``tests/`` using the plugin test kit (``mirrorline.testing.conformance`` and ``plugin_kit``);
- a README saying how to install, configure and test it.

Templates are the files under ``templates/<kind>/`` and ``templates/common/`` (``.tmpl`` removed);
``{{module}}``, ``{{Name}}``, ``{{name}}``, ``{{dist}}`` and ``{{description}}`` in their paths and
text are replaced by :class:`Names`.
"""

from __future__ import annotations

import keyword
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from mirrorline.api.errors import ConnectError

KINDS = ("source", "sink", "transform")
TEMPLATES = Path(__file__).with_name("templates")
_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_-]*")
#: Package names a plugin must not take: the host, the project's own tests folder, test and build tools.
_TAKEN = frozenset({"mirrorline", "tests", "pytest", "pluggy", "setuptools", "pip", "aiokafka"})
_DESCRIPTIONS = {"source": "A mirrorline source connector plugin", "sink": "A mirrorline sink connector plugin",
                 "transform": "A mirrorline single message transform plugin"}


class ScaffoldError(ConnectError):
    """The project cannot be written as asked (a bad name, a directory in the way); the message says why
    (the CLI prints it as its one error line)."""


@dataclass(frozen=True)
class Names:
    """The names a plugin called ``name`` gets: its import package, class prefix and distribution."""

    name: str  #: as given: the project directory, topic and header names in examples
    module: str  #: the import package (and entry point name)
    Name: str  #: the class-name prefix: ``<Name>SourceConnector``, ``<Name>`` for a transform
    dist: str  #: the distribution name pip knows

    @classmethod
    def of(cls, name: str) -> Names:
        """The names of plugin ``name``; :class:`ScaffoldError` if it cannot make a Python package name."""
        if not _NAME.fullmatch(name):
            raise ScaffoldError(f"plugin name {name!r}: use letters, digits, '-' and '_', starting with a letter "
                                f"(e.g. acme-orders)")
        module = name.lower().replace("-", "_")
        if keyword.iskeyword(module) or module in sys.stdlib_module_names or module in _TAKEN:
            raise ScaffoldError(f"plugin name {name!r}: its package {module!r} would hide the module of that name; "
                                f"choose another name (e.g. acme-{name})")
        title = "".join(part[:1].upper() + part[1:] for part in re.split(r"[-_]+", name) if part)
        dist = name if name.lower().startswith("mirrorline-") else f"mirrorline-{name}"
        return cls(name, module, title, dist)


def _fill(text: str, names: Names, kind: str) -> str:
    for key, value in (("module", names.module), ("Name", names.Name), ("name", names.name), ("dist", names.dist),
                       ("description", f"{_DESCRIPTIONS[kind]}: {names.Name}")):
        text = text.replace("{{" + key + "}}", value)
    return text


def new_plugin(name: str, kind: str, directory: Path | None = None) -> list[Path]:
    """Write the project of a ``kind`` plugin called ``name`` into ``directory`` (default ``./name``).

    Returns the files written. Refuses (:class:`ScaffoldError`) a bad name, an unknown kind, or a
    ``directory`` that exists and is not empty: nothing is overwritten."""
    if kind not in KINDS:
        raise ScaffoldError(f"plugin kind {kind!r}: choose one of {', '.join(KINDS)}")
    names = Names.of(name)
    target = Path(name) if directory is None else Path(directory)
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        raise ScaffoldError(f"{target} already exists and is not an empty directory: nothing was written")
    templates = sorted([*(TEMPLATES / "common").rglob("*.tmpl"), *(TEMPLATES / kind).rglob("*.tmpl")])
    written = []
    for template in templates:
        relative = template.relative_to(TEMPLATES / ("common" if template.is_relative_to(TEMPLATES / "common")
                                                     else kind))
        path = target / _fill(str(relative), names, kind).removesuffix(".tmpl")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(_fill(template.read_text(), names, kind))
        written.append(path)
    return written
