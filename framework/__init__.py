"""mirrorline's framework: a Kafka Connect-style runtime that knows nothing about mirroring.

``mirrorline.api`` is the contract with plugin authors, ``mirrorline.testing`` their test kit;
``mirrorline.connectors`` holds the built-in connectors, registered as any plugin is. Importing
mirrorline changes nothing in other libraries: the process-wide patches of aiokafka
(:mod:`mirrorline.clients.process_patches`: no topic auto-creation, response frames released once
read) are installed by the command line at start and by
:func:`mirrorline.clients.kafka_clients.client_kwargs` before any client is configured.
"""

__version__ = "0.1.0"
