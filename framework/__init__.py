"""mirrorline's framework: a Kafka Connect-style runtime that knows nothing about mirroring.

``framework.api`` is the contract with plugin authors; everything else is the runtime.
"""

__version__ = "0.1.0"
