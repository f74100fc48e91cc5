"""The ``agenthost`` command line: one module per command, over ``PluginHost``.

May import: _errors, _common, _providers, _directory, _host, _serve.
"""
