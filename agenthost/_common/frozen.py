"""Read-only JSON containers for schemas that are built once and shared.

Exported tool definitions are cached and handed to every caller; one caller
editing its copy in place would silently change what every later caller gets.
These subclasses stay real ``dict``/``list`` instances (``json.dumps``, SDKs and
``isinstance`` checks accept them) but refuse mutation. ``copy.deepcopy`` or
:func:`thaw` gives a plain, mutable copy.
"""

from __future__ import annotations

from typing import Any, NoReturn, SupportsIndex

__all__ = ["FrozenDict", "FrozenList", "freeze", "thaw"]


def _refuse(self: object, *args: object, **kwargs: object) -> NoReturn:
    raise TypeError(
        f"this {type(self).__name__} is shared and read-only; "
        "use copy.deepcopy() or agenthost.thaw() for a copy you can change"
    )


class FrozenDict(dict[str, Any]):
    """A ``dict`` that cannot be changed after construction."""

    __slots__ = ()
    __setitem__ = __delitem__ = clear = pop = popitem = setdefault = update = _refuse
    __ior__ = _refuse

    def __reduce__(self) -> tuple[Any, ...]:
        return (FrozenDict, (dict(self),))

    def __copy__(self) -> FrozenDict:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> dict[str, Any]:
        return thaw(self)  # type: ignore[no-any-return]

    def __hash__(self) -> int:  # type: ignore[override]
        raise TypeError("unhashable type: 'FrozenDict'")


class FrozenList(list[Any]):
    """A ``list`` that cannot be changed after construction."""

    __slots__ = ()
    __setitem__ = __delitem__ = append = extend = insert = pop = remove = _refuse
    clear = reverse = sort = _refuse
    __iadd__ = __imul__ = _refuse

    def __reduce__(self) -> tuple[Any, ...]:
        return (FrozenList, (list(self),))

    def __copy__(self) -> FrozenList:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> list[Any]:
        return thaw(self)  # type: ignore[no-any-return]

    def __getitem__(self, index: SupportsIndex | slice) -> Any:
        item = list.__getitem__(self, index)
        return FrozenList(item) if isinstance(index, slice) else item


_SCALARS = (str, int, float, bool, type(None))


def freeze(value: Any) -> Any:
    """Return ``value`` with every dict and list replaced by its read-only form."""
    kind = type(value)
    if kind in _SCALARS or kind is FrozenDict or kind is FrozenList:
        return value
    if isinstance(value, dict):
        return FrozenDict({key: freeze(item) for key, item in value.items()})
    if isinstance(value, list | tuple):
        return FrozenList([freeze(item) for item in value])
    return value


def thaw(value: Any) -> Any:
    """Return a plain, mutable deep copy of a (possibly frozen) JSON value."""
    if isinstance(value, dict):
        return {key: thaw(item) for key, item in value.items()}
    if isinstance(value, list):
        return [thaw(item) for item in value]
    return value
