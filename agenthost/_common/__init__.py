"""Helpers every room needs, that know nothing of tools, plugins or calls.

* ``text``: text from untrusted objects (a plugin's ``__str__`` may raise or hang
  on surrogates), never raising, always valid UTF-8.
* ``frozen``: read-only dicts and lists for schemas shared by every caller.
* ``masking``: secret values masked in logs, traces and ``ToolContext`` reprs.
* ``install``: the command that installs an extra, from a checkout or not.

May import: _errors.
"""
