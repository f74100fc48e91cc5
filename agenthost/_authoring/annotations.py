"""Small helpers over Python type annotations, shared by signature reading and schemas."""

from __future__ import annotations

import inspect
import re
import types
import typing
from typing import Annotated, Any

__all__ = ["strip_annotated", "type_name", "union_args"]


def strip_annotated(annotation: Any) -> Any:
    while typing.get_origin(annotation) is Annotated:
        annotation = annotation.__origin__
    return annotation


def union_args(annotation: Any) -> tuple[Any, ...]:
    annotation = strip_annotated(annotation)
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return typing.get_args(annotation)
    return (annotation,)


def type_name(annotation: Any) -> str:
    annotation = strip_annotated(annotation)
    if inspect.isclass(annotation) and typing.get_origin(annotation) is None:
        return annotation.__qualname__
    return re.sub(r"\b(typing|collections\.abc|builtins)\.", "", repr(annotation))
