"""Maps the repository's layout onto one import namespace, ``mirrorline``.

``framework/`` installs as ``mirrorline`` and ``connectors/`` as ``mirrorline.connectors``, so the
distribution's only top-level import name is ``mirrorline`` while the folders keep showing the
architecture (runtime at the top, connectors beside it, as Kafka keeps ``connect/runtime`` and
``connect/mirror``). pyproject.toml's ``packages.find`` cannot rename a folder, hence this file;
everything else about the distribution is in pyproject.toml.
"""

from setuptools import find_packages, setup

#: Import name -> folder.
ROOTS = {"mirrorline": "framework", "mirrorline.connectors": "connectors"}


def packages_under(name: str, folder: str) -> list[str]:
    """``name`` and every package below ``folder``, named under ``name``."""
    return [name] + [f"{name}.{sub}" for sub in find_packages(folder)]


setup(package_dir=ROOTS, packages=[p for name, folder in ROOTS.items() for p in packages_under(name, folder)])
