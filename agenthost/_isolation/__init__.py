"""Process isolation: a plugin version whose tools run in a worker process of its own.

* ``options``: the isolation levels, the sandbox modes, the worker's limits.
* ``sandbox``: the kernel sandbox (bubblewrap's namespaces) and whether this
  system can make one; ``syscalls``: the system calls it denies; ``cgroups``: a
  worker's memory and process limits.
* ``processes``: worker processes started ahead of need, and ended whole.
* ``protocol``: the messages, and the host's checks of everything a worker says.
* ``supervisor``: the host's side of a worker: calls, streams, restarts, quarantine.
* ``proxy``: loading a version into a worker; its tools are proxies in the host.
* ``logs``: what workers print, relayed to the host's stderr, bounded.
* ``worker``: the child's side: lock down, load the plugin, serve calls.

May import: _errors, _common, _authoring, _directory, _calls.
"""
