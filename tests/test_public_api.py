"""The public surface: one sorted list, every name importable, nothing private leaking."""

from __future__ import annotations

import agenthost


def test_all_is_sorted_and_unique() -> None:
    assert list(agenthost.__all__) == sorted(set(agenthost.__all__))


def test_every_exported_name_exists_and_is_public() -> None:
    for name in agenthost.__all__:
        assert hasattr(agenthost, name), name
        assert not name.startswith("_")


def test_public_names_of_the_package_are_all_exported() -> None:
    public = {
        name
        for name, value in vars(agenthost).items()
        if not name.startswith("_") and not isinstance(value, type(agenthost))
    }
    assert public - {"logger"} == set(agenthost.__all__)
