"""Many replicas, one tool service: ``agenthost serve --http ... --redis URL``.

* ``replica``: this process as a member of the cluster: its record in Redis
  (address, health, the plugins and tools it serves) kept alive by a heartbeat, the
  other members as last read, and the shared key ring.
* ``bus``: the SDK's ``SubscriptionBus`` over Redis pub/sub, so a change announced
  by one replica reaches the listen streams and sessions of all.
* ``edge``: the outermost layer of the HTTP app: a session id names the replica that
  owns the session, and a request for a session owned elsewhere is relayed there
  (``forward``), event streams included.
* ``keys``: the key ring (``requestState``, and the signature on a relayed request).
* ``status``: what ``agenthost cluster status`` reads.

Redis holds only what a replica can rebuild: member records that expire, the key
ring, and events. Without Redis each replica keeps serving its own directory.

May import: _errors, _version, _common, _directory, _host, _serve.
"""
