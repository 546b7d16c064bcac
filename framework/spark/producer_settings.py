"""Our Java-style client settings as librdkafka (confluent-kafka) producer settings, for Spark tasks.

The backfill writer runs inside Spark's Python workers with confluent-kafka's producer: its
batching, compression and network I/O run in librdkafka's C threads, so a Spark task spends its
Python time only on handing records over (aiokafka would build every batch in Python on the
task's one core). The cost is this translation: librdkafka reads PEM files, not Java key stores.

Covered: ``bootstrap.servers``, ``security.protocol``, ``sasl.mechanism`` with the username and
password of a PLAIN/SCRAM ``sasl.jaas.config``, TLS with trust and key stores of every type the
project's other clients read — PEM files or inline PEM (``ssl.truststore.certificates`` /
``ssl.keystore.certificate.chain`` / ``ssl.keystore.key``) are passed as they are; JKS and
PKCS12 stores are read here (with :mod:`mirrorline.clients.kafka_clients`, so the same password
rules and one-line errors apply) and handed to librdkafka as inline PEM (``ssl.ca.pem``,
``ssl.certificate.pem``, ``ssl.key.pem``) — plus ``ssl.endpoint.identification.algorithm`` and
the producer tuning settings both clients share.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mirrorline.api.errors import ConfigError
from mirrorline.clients.jaas import single_login_module
from mirrorline.clients.kafka_clients import identity_pem, trust_pem

#: Settings librdkafka takes under the same name and meaning as Kafka's Java producer.
SAME_NAME = frozenset({
    "bootstrap.servers", "security.protocol", "client.id", "linger.ms", "batch.size", "compression.type",
    "acks", "request.timeout.ms", "retry.backoff.ms", "retries", "delivery.timeout.ms",
    "max.in.flight.requests.per.connection", "client.dns.lookup", "metadata.max.age.ms",
    "reconnect.backoff.ms", "reconnect.backoff.max.ms", "socket.connection.setup.timeout.ms",
    "ssl.key.password", "ssl.cipher.suites",
})
#: What the writer always needs: no duplicates and no reordering on retries.
FIXED = {"enable.idempotence": "true", "acks": "all"}
DEFAULTS = {"linger.ms": "20", "batch.size": "1000000", "queue.buffering.max.kbytes": "262144",
            "queue.buffering.max.messages": "500000", "message.max.bytes": "10000000"}


def _is_pem(props: Mapping[str, Any], type_key: str, location: str | None) -> bool:
    kind = str(props.get(type_key, "")).strip().upper()
    if kind:
        return kind == "PEM"
    if location is None:
        return False
    try:
        with open(location, "rb") as handle:
            return handle.read(64).lstrip().startswith(b"-----BEGIN")
    except OSError as exc:
        raise ConfigError(f"{location}: {exc.strerror}") from None


def librdkafka_settings(props: Mapping[str, Any]) -> dict[str, str]:
    """librdkafka producer settings equivalent to Java-style ``props``; ConfigError for what it cannot take."""
    out = dict(DEFAULTS)
    out.update({k: str(v) for k, v in props.items() if k in SAME_NAME})
    protocol = str(props.get("security.protocol", "PLAINTEXT")).upper()
    if protocol.startswith("SASL"):
        mechanism = str(props.get("sasl.mechanism", "GSSAPI")).upper()
        out["sasl.mechanism"] = mechanism
        jaas = props.get("sasl.jaas.config")
        if mechanism != "GSSAPI":
            if not jaas:
                raise ConfigError(f"sasl.jaas.config: required with sasl.mechanism={mechanism}")
            module = single_login_module(str(jaas))
            out["sasl.username"] = module.options.get("username", "")
            out["sasl.password"] = module.options.get("password", "")
    if protocol.endswith("SSL"):
        algorithm = str(props.get("ssl.endpoint.identification.algorithm", "https")).strip().lower()
        out["ssl.endpoint.identification.algorithm"] = "https" if algorithm == "https" else "none"
        trust = props.get("ssl.truststore.location")
        if props.get("ssl.truststore.certificates"):
            out["ssl.ca.pem"] = str(props["ssl.truststore.certificates"])
        elif trust and _is_pem(props, "ssl.truststore.type", trust):
            out["ssl.ca.location"] = str(trust)
        elif trust or props.get("ssl.cafile"):  # JKS or PKCS12: read here, handed over as PEM
            out["ssl.ca.pem"] = str(trust_pem(props))
        key_store = props.get("ssl.keystore.location")
        if props.get("ssl.keystore.certificate.chain"):
            out["ssl.certificate.pem"] = str(props["ssl.keystore.certificate.chain"])
            out["ssl.key.pem"] = str(props.get("ssl.keystore.key", ""))
        elif key_store and _is_pem(props, "ssl.keystore.type", key_store):
            out["ssl.certificate.location"] = out["ssl.key.location"] = str(key_store)
        elif key_store:  # JKS or PKCS12 (whatever the declared type, as Java reads both)
            found = identity_pem(props)
            if found is None:
                raise ConfigError(f"ssl.keystore.location: {key_store} holds no private key")
            out["ssl.certificate.pem"], out["ssl.key.pem"] = found
            out.pop("ssl.key.password", None)  # the key is handed over decrypted
    out.update(FIXED)
    return out
