"""mirrorline's framework: a Kafka Connect-style runtime that knows nothing about mirroring.

``mirrorline.api`` is the contract with plugin authors; everything else is the runtime.
"""

__version__ = "0.1.0"

# Before any Kafka client exists: our metadata requests never make a broker auto-create a topic.
import mirrorline.clients.no_auto_create  # noqa: E402,F401
