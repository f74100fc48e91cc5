"""Text from untrusted objects: plugin exceptions, tool return values, model input.

Turning a plugin's object into text runs the plugin's code (``__str__``,
``__repr__``), which may raise anything, hang on nothing we control, or yield
strings that cannot be encoded. Every message the host builds from such an
object goes through these helpers, which never raise and always return text
that encodes as UTF-8.
"""

from __future__ import annotations

import re

__all__ = ["clip", "describe", "exception_text", "inert", "printable", "type_name", "utf8"]

# C0 and C1 controls but tab and newline, and the characters that move, reorder or hide
# text on a screen: bidi marks and overrides, zero-width ones, line and paragraph separators.
_CONTROL = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2060\u2066-\u2069\ufeff]"
)


def utf8(text: str) -> str:
    """``text`` with lone surrogates replaced by U+FFFD, so it always encodes as UTF-8."""
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        # a surrogate pair becomes its character, a lone surrogate becomes U+FFFD
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return text


def type_name(obj: object) -> str:
    """The name of ``obj``'s type, even if a metaclass makes ``__name__`` hostile."""
    try:
        name = type(obj).__name__
    except BaseException:  # noqa: BLE001 - plugin code
        return "object"
    return utf8(name) if isinstance(name, str) else "object"


def printable(value: object) -> str:
    """``str(value)``, else ``repr(value)``, else a placeholder; never raises."""
    for to_text in (str, repr):
        try:
            text = to_text(value)
        except BaseException:  # noqa: BLE001 - plugin code: any failure means "try the next"
            continue
        if isinstance(text, str):
            return utf8(text)
    return f"<unprintable {type_name(value)} object>"


def exception_text(exc: BaseException) -> str:
    """``Type: message`` (or ``Type`` alone), whatever the exception's ``__str__`` does."""
    name = type_name(exc)
    try:
        message = str(exc)
    except BaseException:  # noqa: BLE001 - a broken __str__ must not hide the exception
        return f"{name} (its message cannot be shown: str() failed)"
    return f"{name}: {utf8(message)}" if message else name


def describe(value: object, limit: int = 60) -> str:
    """A short printable form of ``value`` for messages."""
    return clip(printable(value), limit)


def clip(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, with an ellipsis when cut."""
    return text if len(text) <= limit else text[: max(0, limit - 3)] + "..."


def inert(text: str, *, lines: bool = True) -> str:
    """``text`` safe to show on a terminal: controls become escapes (``\\x1b``), so text
    from a plugin cannot clear the screen, move the cursor or reorder what is shown.
    Newlines stay only with ``lines``: a one-line field must not pass off a second line
    as the host's own."""
    text = _CONTROL.sub(_escape, utf8(text))
    return text if lines else text.replace("\n", "\\n")


def _escape(match: re.Match[str]) -> str:
    return repr(match.group())[1:-1]
