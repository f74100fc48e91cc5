"""The ``agenthost`` command line: one module per command, over ``PluginHost``.

May import: _errors, _version, _common, _providers, _directory, _calls, _host, _serve.
"""
