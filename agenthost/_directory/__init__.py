"""The plugin directory: what it holds, watching it, loading it, and the live registry.

* ``scan``: which entries are plugins, litter or look-alikes, and their content.
* ``watcher``: watchdog events in, settled plugin keys out (debounced).
* ``wheel``: pure-Python wheels verified and extracted safely.
* ``namespace``: each plugin version's modules under a name of its own.
* ``loader``: an entry to a ``PluginVersion`` or a ``LoadFailure``, never raising;
  ``version`` is a loaded version's life (calls in flight, retirement, hooks).
* ``reconcile``: the registry brought in line with the disk, one change at a time.
* ``registry``: snapshots swapped whole, first claim wins; ``records`` are what
  readers of it see.

May import: _errors, _common, _authoring, _providers.
"""
