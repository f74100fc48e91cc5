"""The package version, in one place: the package metadata and ``--version`` read it here.

May import: nothing.
"""

__version__ = "0.1.0"
