"""Process isolation: a plugin version whose tools run in a worker process of its own.

The host side (starting workers, routing calls, restarts and quarantine) and
the worker side (what runs in the child process).

May import: _errors, _common, _authoring, _directory, _calls.
"""
