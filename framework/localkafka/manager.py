"""A set of named local clusters sharing one state directory: what the CLI and fixtures drive.

Each cluster keeps its ports once chosen (recorded in ``<state>/<name>/cluster.json``), so
``start`` after ``stop`` brings back the same cluster with its data, and ``start`` while it
runs is harmless.
"""

from __future__ import annotations

import dataclasses
import json
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from mirrorline.localkafka.artifacts import resolve_kafka_classpath
from mirrorline.localkafka.cluster import ClusterSpec, LocalCluster
from mirrorline.localkafka.errors import LocalKafkaError

DEFAULT_BASE_PORT = 19092
PORT_STRIDE = 10


def default_state_dir() -> Path:
    """``$MIRRORLINE_LOCAL_KAFKA_HOME`` or ``~/.local/state/mirrorline/local-kafka``."""
    return Path(os.environ.get("MIRRORLINE_LOCAL_KAFKA_HOME")
                or os.path.expanduser("~/.local/state/mirrorline/local-kafka"))


class LocalKafka:
    """Starts, lists and stops named local clusters under one state directory."""

    def __init__(self, state_dir: Path | None = None, base_port: int = DEFAULT_BASE_PORT):
        self.state_dir = Path(state_dir or default_state_dir())
        self.base_port = base_port

    def known(self) -> dict[str, LocalCluster]:
        """Every cluster ever started under this state directory, by name."""
        clusters: dict[str, LocalCluster] = {}
        if not self.state_dir.is_dir():
            return clusters
        for meta in sorted(self.state_dir.glob("*/cluster.json")):
            try:
                spec = json.loads(meta.read_text())["spec"]
            except (OSError, ValueError, KeyError):
                continue
            clusters[spec["name"]] = LocalCluster(ClusterSpec(
                name=spec["name"], port=spec["port"], controller_port=spec["controller_port"],
                home=Path(spec["home"]), sasl_users=spec.get("sasl_users"),
                authorizer=bool(spec.get("authorizer", False)), tls=bool(spec.get("tls", False)),
                scram=bool(spec.get("scram", False)), super_users=spec.get("super_users")))
        return clusters

    def cluster(self, name: str, sasl_users: dict[str, str] | None = None,
                authorizer: bool | None = None, *, tls: bool | None = None, scram: bool | None = None,
                super_users: list[str] | None = None) -> LocalCluster:
        """The named cluster, with the ports it had before or the next free slot.

        ``sasl_users`` (username -> password) makes its client listener SASL_PLAINTEXT/PLAIN;
        ``authorizer=True`` adds Kafka's ACL authorizer (needs SASL users); ``tls=True`` puts TLS
        on the client listener (SASL_SSL with SASL users); ``scram=True`` adds SCRAM-SHA-256/512
        users (made when the storage is first formatted); ``super_users`` are SASL users the
        authorizer lets do anything. None keeps what the cluster had before (plain, without any of
        these, for a new one).
        """
        known = self.known()
        options = {"tls": tls, "scram": scram, "super_users": None if super_users is None else list(super_users)}
        if name in known:
            if scram and not known[name].spec.scram:
                # SCRAM users are written when the storage is formatted, which happens once
                raise LocalKafkaError(f"cluster {name} already exists without SCRAM users; give this cluster "
                                      f"another name, or delete {known[name].spec.home} first")
            changes: dict = {k: v for k, v in options.items() if v is not None}
            if sasl_users is not None:
                changes["sasl_users"] = dict(sasl_users)
            if authorizer is not None:
                changes["authorizer"] = authorizer
            if changes:
                return LocalCluster(dataclasses.replace(known[name].spec, **changes))
            return known[name]
        used = {c.spec.port for c in known.values()}
        slot = 0
        while self.base_port + slot * PORT_STRIDE in used:
            slot += 1
        port = self.base_port + slot * PORT_STRIDE
        return LocalCluster(ClusterSpec(name=name, port=port, controller_port=port + 1,
                                        home=self.state_dir / name,
                                        sasl_users=dict(sasl_users) if sasl_users else None,
                                        authorizer=bool(authorizer), tls=bool(tls), scram=bool(scram),
                                        super_users=options["super_users"] or None))

    def start(self, names: list[str], timeout: float = 90.0, sasl_users: dict[str, str] | None = None,
              authorizer: bool | None = None, **options) -> list[LocalCluster]:
        """Start the named clusters in parallel; return them once all answer.

        ``sasl_users``, ``authorizer`` and ``options`` (``tls``, ``scram``, ``super_users``): see
        :meth:`cluster` (apply to every named cluster).
        """
        resolve_kafka_classpath()  # once, before the parallel starts
        clusters = []
        for name in names:  # allot ports one by one so two new clusters never share a slot
            cluster = self.cluster(name, sasl_users, authorizer, **options)
            cluster.record()
            clusters.append(cluster)
        with ThreadPoolExecutor(max_workers=len(clusters) or 1) as pool:
            for future in [pool.submit(c.start, timeout) for c in clusters]:
                future.result()
        return clusters

    def stop(self, names: list[str] | None = None) -> list[str]:
        """Stop the named clusters (all when None); return the names that were running."""
        targets = [c for n, c in self.known().items() if names is None or n in names]
        with ThreadPoolExecutor(max_workers=len(targets) or 1) as pool:
            stopped = list(pool.map(lambda c: c.stop(), targets))
        return [c.spec.name for c, was in zip(targets, stopped) if was]
