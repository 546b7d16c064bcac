"""Kafka client settings in Java's names, turned into aiokafka keyword arguments.

Connect and MM2 configs spell client settings as the Java clients do (``linger.ms``,
``security.protocol``, ``sasl.jaas.config`` ...). :func:`client_kwargs` translates such a
map for an aiokafka producer, consumer or admin client, so TLS and SASL settings written for
Kafka Connect work unchanged. Settings aiokafka has no equivalent for are returned in
``ignored`` so the caller can log them once, instead of failing a whole connector.
"""

from __future__ import annotations

import re
import ssl
from collections.abc import Mapping
from typing import Any

_INT = int
_STR = str


def _bool(value: Any) -> bool:
    return str(value).strip().lower() == "true"


def _acks(value: Any) -> Any:
    text = str(value).strip()
    return "all" if text in ("all", "-1") else int(text)


_COMMON = {
    "bootstrap.servers": ("bootstrap_servers", _STR),
    "client.id": ("client_id", _STR),
    "request.timeout.ms": ("request_timeout_ms", _INT),
    "retry.backoff.ms": ("retry_backoff_ms", _INT),
    "metadata.max.age.ms": ("metadata_max_age_ms", _INT),
    "connections.max.idle.ms": ("connections_max_idle_ms", _INT),
    "security.protocol": ("security_protocol", lambda v: str(v).strip().upper()),  # Java upper-cases it
    "sasl.mechanism": ("sasl_mechanism", _STR),
    "sasl.kerberos.service.name": ("sasl_kerberos_service_name", _STR),
}
_PRODUCER = {
    "acks": ("acks", _acks),
    "compression.type": ("compression_type", lambda v: None if str(v) == "none" else str(v)),
    "batch.size": ("max_batch_size", _INT),
    "linger.ms": ("linger_ms", _INT),
    "max.request.size": ("max_request_size", _INT),
    "enable.idempotence": ("enable_idempotence", _bool),
    "transactional.id": ("transactional_id", _STR),
    "transaction.timeout.ms": ("transaction_timeout_ms", _INT),
}
_CONSUMER = {
    "group.id": ("group_id", _STR),
    "auto.offset.reset": ("auto_offset_reset", _STR),
    "enable.auto.commit": ("enable_auto_commit", _bool),
    "auto.commit.interval.ms": ("auto_commit_interval_ms", _INT),
    "fetch.max.wait.ms": ("fetch_max_wait_ms", _INT),
    "fetch.min.bytes": ("fetch_min_bytes", _INT),
    "fetch.max.bytes": ("fetch_max_bytes", _INT),
    "max.partition.fetch.bytes": ("max_partition_fetch_bytes", _INT),
    "max.poll.records": ("max_poll_records", _INT),
    "max.poll.interval.ms": ("max_poll_interval_ms", _INT),
    "session.timeout.ms": ("session_timeout_ms", _INT),
    "heartbeat.interval.ms": ("heartbeat_interval_ms", _INT),
    "isolation.level": ("isolation_level", _STR),
    "client.rack": ("client_rack", _STR),
    "check.crcs": ("check_crcs", _bool),
}
_ROLES = {"producer": _PRODUCER, "consumer": _CONSUMER, "admin": {}}

# JAAS login module options come in any order: ``username="u" password="p"`` or the reverse
_JAAS_USERNAME = re.compile(r'(?<![\w.])username\s*=\s*"([^"]*)"')
_JAAS_PASSWORD = re.compile(r'(?<![\w.])password\s*=\s*"([^"]*)"')
_SSL_KEYS = ("ssl.truststore.location", "ssl.cafile", "ssl.keystore.location", "ssl.certfile",
             "ssl.keyfile", "ssl.key.password", "ssl.endpoint.identification.algorithm")


def client_kwargs(props: Mapping[str, Any], role: str) -> tuple[dict[str, Any], list[str]]:
    """``(kwargs, ignored keys)`` for an aiokafka client of ``role`` (producer, consumer or admin).

    TLS: ``ssl.truststore.location`` / ``ssl.cafile`` (PEM CA bundle), ``ssl.keystore.location``
    / ``ssl.certfile`` plus ``ssl.keyfile`` (PEM), ``ssl.key.password``, and
    ``ssl.endpoint.identification.algorithm=`` (empty disables host-name checks).
    SASL PLAIN and SCRAM take the user and password from ``sasl.jaas.config``.
    """
    table = {**_COMMON, **_ROLES[role]}
    kwargs: dict[str, Any] = {}
    ignored: list[str] = []
    for key, value in props.items():
        if key in table:
            name, convert = table[key]
            kwargs[name] = convert(value)
        elif key == "sasl.jaas.config":
            username, password = _JAAS_USERNAME.search(str(value)), _JAAS_PASSWORD.search(str(value))
            if username and password:
                kwargs["sasl_plain_username"], kwargs["sasl_plain_password"] = username.group(1), password.group(1)
            else:
                ignored.append(key)
        elif key not in _SSL_KEYS:
            ignored.append(key)
    if str(props.get("security.protocol", "")).upper() in ("SSL", "SASL_SSL"):
        kwargs["ssl_context"] = _ssl_context(props)
    return kwargs, sorted(ignored)


def _ssl_context(props: Mapping[str, Any]) -> ssl.SSLContext:
    cafile = props.get("ssl.cafile") or props.get("ssl.truststore.location") or None
    context = ssl.create_default_context(cafile=cafile)
    certfile = props.get("ssl.certfile") or props.get("ssl.keystore.location")
    if certfile:
        context.load_cert_chain(certfile, props.get("ssl.keyfile") or None, props.get("ssl.key.password") or None)
    if props.get("ssl.endpoint.identification.algorithm", "https") == "":
        context.check_hostname = False
    return context
