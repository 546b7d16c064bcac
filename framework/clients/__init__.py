"""Kafka client helpers of the runtime: admin requests, client settings, producers, config files.

These were part of ``mirrorline.api`` until the plugin contract was narrowed to interfaces
only. Connectors reach Kafka clients through their context (``context.clients``, the contract
:class:`mirrorline.api.clients.KafkaClients`), which the runtime backs with this package
(:data:`mirrorline.clients.runtime_clients.KAFKA_CLIENTS`); nothing in ``mirrorline.api`` and
nothing in ``connectors`` imports it. The config-file parser is contract (a pure function that
plugins outside a worker need): :mod:`mirrorline.api.configfile`, re-exported here.
"""
