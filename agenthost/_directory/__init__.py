"""The plugin directory: what it holds, watching it, loading it, and the live registry.

Scanning entries, the debounced watcher, safe wheel extraction, per-version
module namespaces, the loader that turns an entry into a plugin version or a
failure, reconciling the registry with the disk, and the registry itself
(immutable snapshots, first claim wins).

May import: _errors, _common, _authoring, _providers.
"""
