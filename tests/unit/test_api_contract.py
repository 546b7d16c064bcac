"""The plugin contract, checked statically: what mirrorline.api and connectors may import, and that
every hook, public API object and config key is documented."""

from __future__ import annotations

import ast
import importlib
import inspect
import re
import sys
from pathlib import Path

import pytest

import mirrorline.api
import mirrorline.api.hookspecs as hookspecs
from mirrorline.api.config import ConfigDef
from mirrorline.api.connector import Connector

ROOT = Path(__file__).resolve().parents[2]
API_DIR = ROOT / "framework" / "api"
CONNECTORS_DIR = ROOT / "connectors"
PLUGIN_DOC = ROOT / "docs" / "plugin-authoring.md"

#: Runtime internals the API must never depend on.
FORBIDDEN_FROM_API = ("mirrorline.runtime", "mirrorline.storage", "mirrorline.rest", "mirrorline.cli",
                      "mirrorline.plugins", "mirrorline.localkafka", "mirrorline.clients")


def _python_files(directory: Path) -> list[Path]:
    return sorted(p for p in directory.rglob("*.py") if "__pycache__" not in p.parts)


#: Repository folder -> the import name it installs as (setup.py's ROOTS).
FOLDER_IMPORT_NAMES = {"framework": ["mirrorline"], "connectors": ["mirrorline", "connectors"]}


def _module_name(path: Path, root: Path = ROOT) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    parts[:1] = FOLDER_IMPORT_NAMES.get(parts[0], parts[:1])
    return ".".join(parts)


def _resolve_relative(module: str | None, level: int, importer: str, is_package: bool) -> str:
    """The absolute module name of ``from <.. module> import`` inside ``importer``."""
    if level == 0:
        return module or ""
    base = importer.split(".")
    if not is_package:
        base = base[:-1]
    if level > 1:
        base = base[: len(base) - (level - 1)]
    return ".".join([*base, module] if module else base)


def imported_modules(path: Path, root: Path = ROOT) -> list[tuple[int, str]]:
    """(line, absolute module name) for every import in the file: top level, nested, TYPE_CHECKING,
    ``from x import y`` (both ``x`` and ``x.y``, since y may be a submodule) and literal
    ``importlib.import_module("...")`` / ``__import__("...")`` calls."""
    importer = _module_name(path, root)
    is_package = path.name == "__init__.py"
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = _resolve_relative(node.module, node.level, importer, is_package)
            found.append((node.lineno, base))
            found.extend((node.lineno, f"{base}.{alias.name}") for alias in node.names if alias.name != "*")
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant) \
                and isinstance(node.args[0].value, str):
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if called in ("import_module", "__import__"):
                found.append((node.lineno, node.args[0].value))
    return found


def _is_within(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


# ---------------------------------------------------------------------------------------
# (a) import boundaries
# ---------------------------------------------------------------------------------------

API_FILES = _python_files(API_DIR)
CONNECTOR_FILES = _python_files(CONNECTORS_DIR)


def test_there_are_files_to_check():
    assert len(API_FILES) >= 8
    assert CONNECTOR_FILES


@pytest.mark.parametrize("path", API_FILES, ids=lambda p: p.name)
def test_api_imports_nothing_from_runtime_internals(path):
    bad = [f"{path.name}:{line}: {module}" for line, module in imported_modules(path)
           if any(_is_within(module, forbidden) for forbidden in FORBIDDEN_FROM_API)]
    assert not bad, "mirrorline.api must not import runtime internals:\n" + "\n".join(bad)


@pytest.mark.parametrize("path", CONNECTOR_FILES, ids=lambda p: str(p.relative_to(CONNECTORS_DIR)))
def test_connectors_import_only_framework_api(path):
    bad = [f"{path.relative_to(ROOT)}:{line}: {module}" for line, module in imported_modules(path)
           if _is_within(module, "mirrorline") and not _is_within(module, "mirrorline.api")
           and not _is_within(module, "mirrorline.connectors")]
    assert not bad, "connectors may import from the framework only mirrorline.api:\n" + "\n".join(bad)


def test_import_scanner_sees_every_form(tmp_path):
    package = tmp_path / "framework" / "api"
    package.mkdir(parents=True)
    source = package / "sample.py"
    source.write_text(
        "import mirrorline.runtime.worker\n"
        "from mirrorline.storage import offsets\n"
        "from .. import rest\n"
        "from ..plugins import PluginRegistry\n"
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    from mirrorline.cli import main\n"
        "def f():\n"
        "    import mirrorline.localkafka\n"
        "    importlib.import_module('mirrorline.runtime.herder')\n"
        "from . import config\n"
        "from mirrorline.clients.kafka_admin import describe_acls\n"
    )
    modules = {module for _, module in imported_modules(source, root=tmp_path)}
    for forbidden in FORBIDDEN_FROM_API:
        assert any(_is_within(m, forbidden) for m in modules), forbidden
    assert "mirrorline.api.config" in modules


# ---------------------------------------------------------------------------------------
# (b) hook specifications are documented
# ---------------------------------------------------------------------------------------

HOOKSPECS = sorted(name for name, obj in vars(hookspecs).items()
                   if callable(obj) and getattr(obj, "mirrorline_spec", None) is not None)


def test_hookspecs_found():
    assert "register_connectors" in HOOKSPECS


@pytest.mark.parametrize("name", HOOKSPECS)
def test_hookspec_documented_in_plugin_authoring(name):
    text = PLUGIN_DOC.read_text()
    assert re.search(rf"`{re.escape(name)}(\(\))?`", text), \
        f"hook {name} from framework/api/hookspecs.py is not documented in docs/plugin-authoring.md"


@pytest.mark.parametrize("name", HOOKSPECS)
def test_hookspec_has_docstring(name):
    doc = inspect.getdoc(getattr(hookspecs, name))
    assert doc and doc.strip(), f"hook {name} has no docstring"


def _doc_code_blocks(text: str) -> list[ast.Module]:
    """Every ```python block of the document that parses (shell and TOML blocks are skipped)."""
    trees = []
    for block in re.findall(r"```python\n(.*?)```", text, flags=re.S):
        try:
            trees.append(ast.parse(block))
        except SyntaxError:
            continue
    return trees


def _documented_hookimpls(name: str) -> list[ast.FunctionDef]:
    """The ``def <name>(...)`` examples of hook ``name`` in docs/plugin-authoring.md."""
    return [node for tree in _doc_code_blocks(PLUGIN_DOC.read_text()) for node in ast.walk(tree)
            if isinstance(node, ast.FunctionDef) and node.name == name]


def _returns(function: ast.FunctionDef) -> list[ast.expr]:
    return [node.value for node in ast.walk(function) if isinstance(node, ast.Return) and node.value is not None]


@pytest.mark.parametrize("name", HOOKSPECS)
def test_documented_hook_signature_matches_its_spec(name):
    """The doc's example of each hook takes the spec's parameters and returns what the spec's annotation says."""
    spec = inspect.signature(getattr(hookspecs, name))
    examples = _documented_hookimpls(name)
    assert examples, f"docs/plugin-authoring.md has no `def {name}(...)` example in a python block"
    assert spec.return_annotation is not inspect.Signature.empty, f"hook {name} has no return annotation"
    returns_list = str(spec.return_annotation).startswith("list")
    doc = inspect.getdoc(getattr(hookspecs, name)) or ""
    assert doc.lower().startswith("return"), f"the docstring of hook {name} does not say what it returns"
    for example in examples:
        params = [a.arg for a in (*example.args.posonlyargs, *example.args.args, *example.args.kwonlyargs)]
        assert params == list(spec.parameters), \
            f"docs: {name}({', '.join(params)}) but the hook is {name}({', '.join(spec.parameters)})"
        if example.returns is not None:
            assert ast.unparse(example.returns) == str(spec.return_annotation), \
                f"docs: {name} returns {ast.unparse(example.returns)}, the spec {spec.return_annotation}"
        if returns_list:
            bad = [ast.unparse(value) for value in _returns(example)
                   if not isinstance(value, (ast.List, ast.ListComp, ast.Name, ast.Call))]
            assert _returns(example) and not bad, f"docs: {name} must return a list ({spec.return_annotation})"


def test_signature_check_catches_a_wrong_example(tmp_path, monkeypatch):
    wrong = tmp_path / "doc.md"
    wrong.write_text("```python\n@hookimpl\ndef register_connectors(config):\n    return {}\n```\n")
    monkeypatch.setattr(sys.modules[__name__], "PLUGIN_DOC", wrong)
    with pytest.raises(AssertionError, match=r"register_connectors\(config\)"):
        test_documented_hook_signature_matches_its_spec("register_connectors")


# ---------------------------------------------------------------------------------------
# (c) the public API is documented
# ---------------------------------------------------------------------------------------

def _public_definitions():
    """(module name, qualified name, ast node) of every public class, function and method in mirrorline.api."""
    for path in API_FILES:
        module = _module_name(path)
        tree = ast.parse(path.read_text())
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) \
                    and not node.name.startswith("_"):
                yield module, node.name, node
                if isinstance(node, ast.ClassDef):
                    for item in node.body:
                        if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) \
                                and not item.name.startswith("_"):
                            yield module, f"{node.name}.{item.name}", item


PUBLIC = list(_public_definitions())


def test_public_definitions_found():
    names = {name for _, name, _ in PUBLIC}
    assert {"ConfigDef", "ConfigDef.parse", "SourceTask.poll", "KafkaClients.consumer", "register_connectors"} <= names


@pytest.mark.parametrize("module, name, node", PUBLIC, ids=[f"{m}.{n}" for m, n, _ in PUBLIC])
def test_public_api_has_docstring(module, name, node):
    if ast.get_docstring(node):
        return
    # a method overriding a documented one inherits its documentation
    obj = importlib.import_module(module)
    for part in name.split("."):
        obj = getattr(obj, part)
    assert "." in name and inspect.getdoc(obj), f"{module}.{name} has no docstring"


def test_package_exports_resolve():
    for name in mirrorline.api.__all__:
        assert hasattr(mirrorline.api, name), name


# ---------------------------------------------------------------------------------------
# (d) every config key is documented
# ---------------------------------------------------------------------------------------

CONFIG_MODULES = ["mirrorline_example.sequence", "mirrorline.runtime.connector_config",
                  "mirrorline.runtime.worker_config"]


def _installed_plugin_classes() -> list[tuple[str, type]]:
    """(kind, class) of every plugin class the installed plugins register, from the registry itself:
    connectors, transforms, predicates, converters, header converters, config providers, jobs."""
    from mirrorline.plugins import PluginRegistry, full_name

    registry = PluginRegistry.discover()
    found: dict[str, tuple[str, type]] = {}
    tables = [("connector", registry.connectors())]
    for kind, attribute in (("transformation", "transforms"), ("predicate", "predicates"),
                            ("converter", "converters"), ("header converter", "header_converters")):
        table = getattr(registry, attribute, None)
        if table is not None:
            tables.append((kind, table.all()))
    from mirrorline.runtime.config_providers import provider_classes  # built-in providers and the plugins'

    tables.append(("config provider", {full_name(c): c for c in
                                       provider_classes(registry.config_provider_classes()).values()}))
    if hasattr(registry, "jobs"):
        tables.append(("job", registry.jobs()))
    for kind, classes in tables:
        for name, cls in classes.items():
            found.setdefault(name, (kind, cls))
    return sorted(found.values(), key=lambda item: full_name(item[1]))


def _config_defs():
    for module_name in CONFIG_MODULES:
        module = importlib.import_module(module_name)
        seen: set[int] = set()
        for attr, value in vars(module).items():
            candidates = []
            if isinstance(value, ConfigDef):
                candidates.append((attr, value))
            elif isinstance(value, type) and issubclass(value, Connector) and value.__module__ == module_name:
                candidates.append((f"{attr}.config_def", value.config_def))
            for label, definition in candidates:
                if id(definition) in seen:
                    continue
                seen.add(id(definition))
                for key in definition.keys.values():
                    yield f"{module_name}.{label}", key


def _plugin_config_keys():
    from mirrorline.plugins import full_name

    for kind, cls in _installed_plugin_classes():
        definition = getattr(cls, "config_def", None)
        if isinstance(definition, ConfigDef):
            for key in definition.keys.values():
                yield f"{kind} {full_name(cls)}", key


CONFIG_KEYS = list(_config_defs()) + list(_plugin_config_keys())


def test_config_defs_found():
    owners = {owner for owner, _ in CONFIG_KEYS}
    assert "mirrorline_example.sequence.SequenceSourceConnector.config_def" in owners \
        or "mirrorline_example.sequence.CONFIG_DEF" in owners
    assert "mirrorline.runtime.connector_config.CONNECTOR_CONFIG_DEF" in owners
    assert "mirrorline.runtime.worker_config.WORKER_CONFIG_DEF" in owners
    example = importlib.import_module("mirrorline_example.sequence").SequenceSourceConnector
    assert example.config_def.keys, "the example connector declares settings"
    # every installed plugin, found through the registry rather than listed here
    assert any(o.startswith("connector mirrorline.connectors.source_mirror.connector.MirrorSourceConnector") for o in owners)
    assert any(o.startswith("transformation ") for o in owners)
    assert any(o.startswith("transformation mirrorline_pii.") for o in owners), "the PII example plugin's transform"
    kinds = {kind for kind, _ in _installed_plugin_classes()}
    assert {"connector", "transformation", "predicate", "config provider"} <= kinds


@pytest.mark.parametrize("owner, key", CONFIG_KEYS, ids=[f"{o}:{k.name}" for o, k in CONFIG_KEYS])
def test_config_key_documented(owner, key):
    assert key.doc and key.doc.strip(), f"{owner} declares {key.name} without documentation"
