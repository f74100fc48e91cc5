"""Helpers every room needs: text from untrusted objects, read-only JSON, secret masking.

They know nothing of tools, plugins or calls, so any room can use them.

May import: _errors.
"""
