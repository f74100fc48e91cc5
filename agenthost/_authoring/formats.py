"""String formats, checked the way the published JSON Schema defines them.

pydantic parses more than the formats it publishes: ``"5"`` as a date-time (a
Unix time), ``"1 day"`` as a duration, a UUID without hyphens. A model reads
the schema, so the validator must accept exactly what the schema says. These
checks run before pydantic's own parsing (and inside the ``jsonschema``
validator of hand-written schemas), so both kinds of tool agree:

============  ================================================================
date-time     RFC 3339 ``date-time``: ``2024-05-01T12:00:00Z``; the offset is
              required; ``T`` may be lower case, a fraction of any length
date, time    RFC 3339 ``full-date``, ``full-time`` (a time needs its offset)
duration      ISO 8601, components in order, integers (a fraction only in the
              seconds), weeks alone: ``P1Y2M3DT4H5M6.5S``, ``P2W``; at most 4
              digits for years and months and 6 for the others, so that every
              value fits a timedelta; also published as a ``pattern``
uuid          the hyphenated form, hex digits in either case
uri           RFC 3986 ``URI``; URL types also publish a ``pattern`` for what
              a URL needs beyond that (a host after ``http://``, a port up to
              65535)
decimal       a number, or a string such as ``"1.50"`` or ``"-2e3"`` (the
              string form is published as a ``pattern``; exponents up to 6
              digits)
============  ================================================================

Calendar and clock ranges (a 30th of February, an hour 24, a leap second,
which Python's datetime cannot hold) are left to pydantic, which refuses the
same values as the RFC 3339 checkers do.
"""

from __future__ import annotations

import datetime
import functools
import ipaddress
import re
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import jsonschema

__all__ = [
    "CHECKS",
    "DECIMAL_PATTERN",
    "DURATION_PATTERN",
    "format_checker",
    "is_ours",
    "MESSAGES",
    "url_pattern",
]

# ASCII digits only: Python's \d also matches other scripts' digits.
_DATE = r"(?P<year>[0-9]{4})-(?P<month>[0-9]{2})-(?P<day>[0-9]{2})"
_TIME = (
    r"(?P<hour>[0-9]{2}):(?P<minute>[0-9]{2}):(?P<second>[0-9]{2})(?:\.[0-9]+)?"
    r"(?:[Zz]|[+-](?P<offset_hour>[0-9]{2}):(?P<offset_minute>[0-9]{2}))"
)
_DATE_TIME = re.compile(rf"{_DATE}[Tt]{_TIME}")
_FULL_DATE = re.compile(_DATE)
_FULL_TIME = re.compile(_TIME)
_UUID = re.compile(r"[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}")

# Written for both Python and ECMA-262 (JSON Schema's regex dialect): no inline flags.
DURATION_PATTERN = (
    r"^P(?:[0-9]{1,6}W|(?=[0-9]|T[0-9])(?:[0-9]{1,4}Y)?(?:[0-9]{1,4}M)?(?:[0-9]{1,6}D)?"
    r"(?:T(?=[0-9])(?:[0-9]{1,6}H)?(?:[0-9]{1,6}M)?(?:[0-9]{1,6}(?:\.[0-9]{1,9})?S)?)?)$"
)
_DURATION = re.compile(DURATION_PATTERN)
# An exponent of at most 6 digits (the default decimal context's range): Python's Decimal
# cannot hold every longer one, so the schema must not promise them.
DECIMAL_PATTERN = r"^[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]{1,6})?$"
_DECIMAL = re.compile(DECIMAL_PATTERN)

# RFC 3986, appendix A.
_UNRESERVED = r"A-Za-z0-9\-._~"
_SUB_DELIMS = r"!$&'()*+,;="
_PCT = r"%[0-9A-Fa-f]{2}"
_PCHAR = rf"(?:[{_UNRESERVED}{_SUB_DELIMS}:@]|{_PCT})"
_SEGMENT = rf"{_PCHAR}*"
_IP_LITERAL = r"\[(?P<ip>[0-9A-Fa-f:.]+|[vV][0-9A-Fa-f]+\.[" + _UNRESERVED + _SUB_DELIMS + r":]+)\]"
_REG_NAME = rf"(?:[{_UNRESERVED}{_SUB_DELIMS}]|{_PCT})*"
_AUTHORITY = (
    rf"(?:(?:[{_UNRESERVED}{_SUB_DELIMS}:]|{_PCT})*@)?(?:{_IP_LITERAL}|{_REG_NAME})(?::[0-9]*)?"
)
_URI = re.compile(
    rf"[A-Za-z][A-Za-z0-9+\-.]*:"
    rf"(?://{_AUTHORITY}(?:/{_SEGMENT})*|/(?:{_PCHAR}+(?:/{_SEGMENT})*)?|{_PCHAR}+(?:/{_SEGMENT})*|)"
    rf"(?:\?(?:{_PCHAR}|[/?])*)?(?:#(?:{_PCHAR}|[/?])*)?"
)


def _is_moment(pattern: re.Pattern[str], text: str) -> bool:
    """RFC 3339 shape and ranges (no leap second, which Python's datetime cannot hold)."""
    match = pattern.fullmatch(text)
    if match is None:
        return False
    parts = {k: int(v) for k, v in match.groupdict().items() if v is not None}
    if "year" in parts:
        try:
            datetime.date(parts["year"], parts["month"], parts["day"])
        except ValueError:
            return False
    return (
        parts.get("hour", 0) <= 23
        and parts.get("minute", 0) <= 59
        and parts.get("second", 0) <= 59
        and parts.get("offset_hour", 0) <= 23
        and parts.get("offset_minute", 0) <= 59
    )


def _is_uri(text: str) -> bool:
    match = _URI.fullmatch(text)
    if match is None:
        return False
    literal = match.group("ip")
    if literal is None or literal[:1] in "vV":
        return True
    try:
        ipaddress.IPv6Address(literal)
    except ValueError:
        return False
    return True


CHECKS: dict[str, Callable[[str], bool]] = {
    "date-time": lambda text: _is_moment(_DATE_TIME, text),
    "date": lambda text: _is_moment(_FULL_DATE, text),
    "time": lambda text: _is_moment(_FULL_TIME, text),
    "duration": lambda text: _DURATION.fullmatch(text) is not None,
    "uuid": lambda text: _UUID.fullmatch(text) is not None,
    "uri": _is_uri,
    "decimal": lambda text: _DECIMAL.fullmatch(text) is not None,
}

MESSAGES = {
    "date-time": "an RFC 3339 date-time with an offset, e.g. 2024-05-01T12:00:00Z",
    "date": "an RFC 3339 date, e.g. 2024-05-01",
    "time": "an RFC 3339 time with an offset, e.g. 12:00:00Z or 12:00:00+02:00",
    "duration": "an ISO 8601 duration, e.g. P1DT2H30M or PT90S",
    "uuid": "a hyphenated UUID, e.g. 123e4567-e89b-12d3-a456-426614174000",
    "uri": "an absolute URI (RFC 3986), e.g. https://example.com/path",
    "decimal": "a decimal number, e.g. 1.50 or -2e3",
}

# What a URL parser (WHATWG, as pydantic's) needs beyond RFC 3986: a port up to 65535 in
# any authority; for the web schemes, an authority with a host; for "file", an authority
# without a port or user.
_SPECIAL = r"[Hh][Tt][Tt][Pp][Ss]?|[Ww][Ss][Ss]?|[Ff][Tt][Pp]"
_FILE = r"[Ff][Ii][Ll][Ee]"
_PORT = (
    r"(?::0*(?:6553[0-5]|655[0-2][0-9]|65[0-4][0-9]{2}|6[0-4][0-9]{3}|[1-5][0-9]{4}|[0-9]{1,4})?)?"
)
_USER = r"(?:[^/?#@]*@)?"
_IPV6 = r"\[[^\]]*\]"
_END = r"(?:[/?#]|$)"
# A special scheme's host whose last label is a number (after percent-decoding: "a.1",
# "a.0x", "%2e0") is an IPv4 address to the URL standard, and most such hosts are not
# valid ones; the pattern takes plain dotted quads only.
_DIGIT = r"(?:[0-9]|%3[0-9])"
_DOT = r"(?:\.|%2[eE])"
_NUMBER = rf"(?:(?:0|%30)(?:[xX]|%[57]8)(?:[0-9a-fA-F]|%3[0-9]|%[46][1-6])*|{_DIGIT}+)"
_ENDS_IN_A_NUMBER = rf"(?![^/?#@\[\]:]*?(?:(?<=[/@.])|(?<=%2[eE])){_NUMBER}{_DOT}?(?=[:/?#]|$))"
_OCTET = r"(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])"
_IPV4 = rf"{_OCTET}(?:\.{_OCTET}){{3}}\.?(?=[:/?#]|$)"


def url_pattern(schemes: list[str] | None) -> str:
    """What a URL type needs beyond RFC 3986, as a JSON Schema ``pattern``."""
    host = rf"(?:[^/?#@\[\]:]+|{_IPV6})"
    special = rf"(?:{_IPV4}|{_ENDS_IN_A_NUMBER}[^/?#@\[\]:]+|{_IPV6})"
    if schemes:
        allowed = "|".join(_any_case(scheme) for scheme in schemes)
        return rf"^(?:{allowed})://{_USER}{special}{_PORT}{_END}"
    other = rf"(?!(?:{_SPECIAL}|{_FILE}):)[A-Za-z][A-Za-z0-9+.\-]*:"
    return (
        rf"^(?:{other}(?!//)"
        # without a host, a URL takes no user or port (only an empty "@" or ":@" survives)
        rf"|{other}//(?:{_USER}{host}{_PORT}{_END}|:@{_END}|@$|{_END})"
        rf"|(?:{_SPECIAL})://{_USER}{special}{_PORT}{_END}"
        rf"|{_FILE}://(?:[^/?#@\[\]:]*|{_IPV6}){_END})"
    )


def _any_case(scheme: str) -> str:
    return "".join(f"[{c.lower()}{c.upper()}]" if c.isalpha() else re.escape(c) for c in scheme)


# Ours, written with look-around (which the linear pattern engine cannot match) and safe to
# match with ``re``: no nested repetition. A worker's schema may carry them (see jsonschemas).
LOOKAROUND_PATTERNS = frozenset({url_pattern(None), DURATION_PATTERN})
_SCHEMES_OF = re.compile(
    r"\^\(\?:((?:\[[a-z][A-Z]\]|\\?[0-9+.\-])+(?:\|(?:\[[a-z][A-Z]\]|\\?[0-9+.\-])+)*)\)://"
)


@functools.lru_cache(maxsize=256)
def is_ours(pattern: str) -> bool:
    """Whether ``pattern`` is one of ours (see :data:`LOOKAROUND_PATTERNS`), a URL type's
    with its schemes included."""
    if pattern in LOOKAROUND_PATTERNS:
        return True
    found = _SCHEMES_OF.match(pattern)
    if found is None:
        return False
    schemes = [re.sub(r"\[([a-z])[A-Z]\]", r"\1", s).replace("\\", "") for s in found[1].split("|")]
    return url_pattern(schemes) == pattern


@functools.cache
def format_checker() -> jsonschema.FormatChecker:
    """Ours, and jsonschema's checks for the formats whose checkers need no optional library
    (so hand-written schemas are checked alike wherever agenthost is installed).

    Built on first use: importing jsonschema's format module costs most of a second
    when ``rfc3987-syntax`` is installed, and most hosts have no hand-written schema."""
    import jsonschema

    builtin = jsonschema.Draft202012Validator.FORMAT_CHECKER.checkers
    checker = jsonschema.FormatChecker([])
    for name in ("email", "idn-email", "ipv4", "ipv6", "regex"):
        if name in builtin:
            checker.checkers[name] = builtin[name]
    for name, check in CHECKS.items():
        if name != "decimal":
            checker.checks(name)(_for_strings(check))
    return checker


def _for_strings(check: Callable[[str], bool]) -> Callable[[object], bool]:
    return lambda value: not isinstance(value, str) or check(value)
