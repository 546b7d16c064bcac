"""The Kafka client wall, checked statically: aiokafka is imported by the client layer only, and the
plugin contract hands out mirrorline's types, never aiokafka's.

``mirrorline.clients`` (``framework/clients/``) is the one package that knows the client library:
it builds aiokafka's clients from Java-style settings, translates every aiokafka error into the
contract's (:mod:`mirrorline.api.errors`), and holds every patch of aiokafka internals (metadata
without auto-creation, forwarded and captured record batches, fetch sessions, the group protocol,
the requests aiokafka lacks). Everything above it (runtime, storage, REST, boot, CLI, local
clusters, connectors) uses the contract's Admin / Consumer / Producer or the client layer's own
classes. A new ``import aiokafka`` anywhere else fails here; so does an aiokafka type appearing in
a signature or among the public names of ``mirrorline.api``.
"""

from __future__ import annotations

import importlib
import inspect
import typing

import pytest
from test_api_contract import ROOT, _module_name, _python_files, imported_modules  # same folder

#: The client layer: the only package that may import the client library.
CLIENT_LAYER = "mirrorline.clients"
LIBRARY = "aiokafka"

FILES = _python_files(ROOT / "framework") + _python_files(ROOT / "connectors")


def _in_client_layer(module: str) -> bool:
    return module == CLIENT_LAYER or module.startswith(CLIENT_LAYER + ".")


def test_only_the_client_layer_imports_aiokafka():
    found = []
    for path in FILES:
        module = _module_name(path)
        if _in_client_layer(module):
            continue
        found += [f"{path.relative_to(ROOT)}:{line} imports {name}" for line, name in imported_modules(path)
                  if name == LIBRARY or name.startswith(LIBRARY + ".")]
    assert not found, ("only mirrorline.clients may import aiokafka; use the contract's clients "
                       "(context.clients / mirrorline.clients) instead:\n" + "\n".join(found))


def test_the_client_layer_does_import_aiokafka():
    """The scan above sees the imports it forbids (it would pass vacuously on a broken scanner)."""
    importers = {_module_name(path) for path in FILES
                 if any(name.startswith(LIBRARY) for _, name in imported_modules(path))}
    assert {"mirrorline.clients.consumer", "mirrorline.clients.producer", "mirrorline.clients.admin",
            "mirrorline.clients.fetch_sessions", "mirrorline.clients.group_member"} <= importers


def _api_modules() -> list[str]:
    return sorted(_module_name(path) for path in _python_files(ROOT / "framework" / "api"))


def _from_library(obj: object) -> bool:
    return str(getattr(obj, "__module__", "") or "").split(".")[0] == LIBRARY


@pytest.mark.parametrize("module_name", _api_modules())
def test_the_contract_exposes_no_aiokafka_object(module_name):
    module = importlib.import_module(module_name)
    names = getattr(module, "__all__", None) or [n for n in vars(module) if not n.startswith("_")]
    leaked = [name for name in names if _from_library(getattr(module, name, None))]
    assert not leaked, f"{module_name} exposes aiokafka's {leaked}: give plugins mirrorline types"


def _annotations(cls: type) -> list[tuple[str, object]]:
    """``(where, annotation)`` for every public method's parameters and return value of ``cls``."""
    found = []
    for name, member in vars(cls).items():
        if name.startswith("_") and name not in ("__init__",):
            continue
        func = member.__func__ if isinstance(member, (classmethod, staticmethod)) else member
        if not inspect.isfunction(func):
            continue
        try:
            hints = typing.get_type_hints(func, vars(inspect.getmodule(func)))
        except Exception:  # noqa: BLE001 - a name only TYPE_CHECKING imports: read the strings instead
            hints = dict(func.__annotations__)
        found += [(f"{cls.__module__}.{cls.__qualname__}.{name}({param})", hint) for param, hint in hints.items()]
    return found


def _mentions_library(hint: object) -> bool:
    if isinstance(hint, str):
        return LIBRARY in hint or "AIOKafka" in hint
    if _from_library(hint):
        return True
    return any(_mentions_library(arg) for arg in typing.get_args(hint))


def test_no_contract_signature_names_an_aiokafka_type():
    leaked = []
    for module_name in _api_modules():
        module = importlib.import_module(module_name)
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if cls.__module__ != module_name:
                continue
            leaked += [where for where, hint in _annotations(cls) if _mentions_library(hint)]
    assert not leaked, "the contract's signatures name aiokafka types:\n" + "\n".join(leaked)


def test_the_runtime_clients_hand_out_the_contracts_clients():
    """What ``context.clients`` builds is the contract's Admin / Consumer / Producer (typed so)."""
    from mirrorline.api.clients import Admin, Consumer, KafkaClients, Producer
    from mirrorline.clients.runtime_clients import AioKafkaClients

    for factory, contract in (("admin", Admin), ("consumer", Consumer), ("producer", Producer)):
        implemented = typing.get_type_hints(getattr(AioKafkaClients, factory))["return"]
        assert issubclass(implemented, contract) and not _from_library(implemented), factory
        declared = typing.get_type_hints(getattr(KafkaClients, factory))["return"]
        assert declared is contract, factory
