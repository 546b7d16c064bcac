"""Process wiring: the one package that knows every layer and puts a worker process together.

The runtime (herders, workers, stores) knows nothing of HTTP and the REST layer knows only the
:class:`~mirrorline.runtime.herder.Herder` interface; this package builds both and connects
them, as Kafka Connect's ``ConnectDistributed``/``ConnectStandalone`` (``AbstractConnectCli``)
do: :mod:`.standalone` and :mod:`.distributed` run a worker from its settings, :mod:`.launcher`
runs the workers a CLI command describes (``mirrorline mm2``), :mod:`.health_server` serves
``/health`` and ``/metrics`` for processes without the REST API, and :mod:`.process` holds what
they share (listeners, TLS, signals, the plugin registry); :mod:`.event_loop` picks the event
loop every mirrorline process runs on (uvloop where installed), :mod:`.gc_tuning` sets the garbage
collector's thresholds of every mirrorline process, and :mod:`.heap_trim` gives the C heap's free
pages back to the system after a burst.
"""
