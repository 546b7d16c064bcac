"""MirrorMaker 2's client pieces, as its ``mirror-client`` module holds them: a leaf the connectors share.

Record formats (:mod:`.formats`), replication policies (:mod:`.policies`), topic and group
filters (:mod:`.filters`), the client config (:mod:`.config`) and client construction
(:mod:`.clients`), the offset-sync store and its exact runs (:mod:`.offset_sync_store`,
:mod:`.offset_sync_runs`) and :class:`~.client.MirrorClient` (MM2's MirrorClient and
RemoteClusterUtils). It imports no connector; import each module directly.
"""
