"""Kafka client helpers of the runtime: admin requests, client settings, producers, config files.

These were part of ``framework.api`` until the plugin contract was narrowed to interfaces
only. Connectors reach Kafka clients through their context (``context.clients``, the contract
:class:`framework.api.clients.KafkaClients`), which the runtime backs with this package
(:data:`framework.clients.runtime_clients.KAFKA_CLIENTS`); nothing in ``framework.api`` and
nothing in ``connectors`` imports it. The config-file parser is contract (a pure function that
plugins outside a worker need): :mod:`framework.api.configfile`, re-exported here.
"""
