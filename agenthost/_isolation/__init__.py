"""Process isolation: a plugin version whose tools run in a worker process of its own.

* ``options``: the isolation levels, the worker's limits, what a plugin asks for.
* ``processes``: interpreters started ahead of need, and their channels.
* ``supervisor``: the host's side of a worker: calls, restarts, quarantine.
* ``proxy``: loading a version into a worker; its tools are proxies in the host.
* ``worker``: the child's side: harden, load the plugin, serve calls.

May import: _errors, _common, _authoring, _directory, _calls.
"""
