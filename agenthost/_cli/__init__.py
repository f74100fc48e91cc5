"""The ``agenthost`` command line: a thin layer over ``PluginHost``.

``main`` parses and dispatches; each command is a module with ``add_parser``
and ``run`` (``watch``, ``listing``, ``check``, ``new``, ``call``, ``serve``,
``schema``, ``cluster``); ``arguments`` holds what they share, ``events`` prints the
plugin log and ``hidden`` says which tools a caller's grants leave out.

May import: _errors, _version, _common, _providers, _directory, _calls, _isolation, _host,
_serve, _cluster.
"""
