"""The validator accepts exactly what the published schema says: formats, patterns, repairs.

The reference is jsonschema with its format checkers installed (the ``dev`` extra
brings rfc3339-validator, rfc3986-validator and isoduration), applied to the
schema agenthost publishes, so "what the schema says" is judged by an
independent implementation.
"""

from __future__ import annotations

import datetime
import decimal
import json
import re
import string
import uuid
from typing import Any

import jsonschema
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st
from pydantic import AnyUrl, HttpUrl

from agenthost import InvalidArgumentsError, ToolDefinition, tool

REFERENCE = jsonschema.Draft202012Validator.FORMAT_CHECKER
TYPES: dict[str, Any] = {
    "uuid": uuid.UUID,
    "date-time": datetime.datetime,
    "date": datetime.date,
    "time": datetime.time,
    "duration": datetime.timedelta,
    "uri": AnyUrl,
    "http-url": HttpUrl,
    "decimal": decimal.Decimal,
}


def definition_for(kind: str) -> ToolDefinition:
    def fn(value: Any) -> None:
        """One value of a format."""

    fn.__annotations__ = {"value": TYPES[kind], "return": None}
    return ToolDefinition.from_function(tool(fn))


DEFINITIONS = {kind: definition_for(kind) for kind in TYPES}


def accepted(kind: str, value: Any) -> bool:
    try:
        DEFINITIONS[kind].validate({"value": value})
    except InvalidArgumentsError:
        return False
    return True


# RFC 4122, section 3: time-low "-" time-mid "-" time-high "-" clock-seq "-" node, in hex.
RFC_4122 = re.compile(
    r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
)


def published(kind: str, value: Any) -> bool:
    """What the published schema accepts, judged by jsonschema with real format checkers.

    jsonschema checks a UUID with ``uuid.UUID()`` and the hyphens' positions, which also
    lets ``+``, ``_``, spaces and extra hyphens through; the RFC's layout decides those.
    """
    if kind == "uuid" and isinstance(value, str) and not RFC_4122.fullmatch(value):
        return False
    schema = DEFINITIONS[kind].input_schema
    return jsonschema.Draft202012Validator(schema, format_checker=REFERENCE).is_valid(
        {"value": value}
    )


CASES: dict[str, tuple[list[str], list[str]]] = {
    "uuid": (
        ["12345678-1234-5678-1234-567812345678", "ABCDEF12-1234-5678-1234-567812345678"],
        [
            "12345678123456781234567812345678",
            "{12345678-1234-5678-1234-567812345678}",
            "urn:uuid:12345678-1234-5678-1234-567812345678",
            "12345678-1234-5678-1234-56781234567",
        ],
    ),
    "date-time": (
        [
            "2024-05-01T12:00:00Z",
            "2024-05-01T12:00:00+02:00",
            "2024-05-01t12:00:00.123456z",
            "2024-02-29T23:59:59-00:00",
            "2024-05-01T12:00:00.1234567Z",
        ],
        [
            "5",
            "1700000000",
            "2024-05-01T12:00:00",
            "2024-05-01 12:00:00Z",
            "2024-05-01T12:00Z",
            "2024-05-01",
            "2023-02-29T00:00:00Z",
            "2024-05-01T24:00:00Z",
            "2024-05-01T12:00:00+24:00",
            "2024-05-01T23:59:60Z",
        ],
    ),
    "date": (["2024-05-01", "2024-02-29"], ["2024-5-1", "20240501", "1700000000", "2023-02-29"]),
    "time": (
        ["12:00:00Z", "12:00:00.5+01:00", "23:59:59-23:59"],
        ["12:00:00", "12:00", "43200", "12:00:00+24:00", "24:00:00Z"],
    ),
    "duration": (
        ["P1D", "PT1H", "P1W", "P1Y2M3DT4H5M6S", "P1Y1D", "PT1.5S", "P0D", "PT36H"],
        ["1 day", "10:00:00", "5", "P", "PT", "P1DT", "-P1D", "P1D2H", "p1d", "P1.5D", "P1W1D"],
    ),
    "uri": (
        [
            "http://x",
            "https://example.com:8443/a/b?c=d#e",
            "mailto:ann@example.com",
            "urn:isbn:0451450523",
            "file:///tmp/x",
            "http://[::1]:80/",
            "ftp://user:pw@host/dir/",
            "http://127.0.0.1:8000/",
            "http://a.0xg/",
            "x-custom://a.0",
        ],
        [
            "http://",
            "http:foo",
            "//x",
            "x",
            "http://exa mple.com",
            "http://a:99999",
            "https:///a",
            # a host ending in a number is an IPv4 address to the URL standard: not these
            "http://.0",
            "http://a.1",
            "http://a.0x",
            "http://a.%30",
            "http://%2e0",
            "http://09",
            "http://256.1.1.1",
            "http://1.2.3.4.5",
        ],
    ),
    "http-url": (["https://example.com/", "http://x:1/"], ["ftp://x", "mailto:x@y", "http://"]),
    "decimal": (
        ["1.50", "-0.5", "1e5", ".5", "5.", "+2"],
        ["abc", "NaN", "Infinity", " 1.5", "1_000", "0x10", ""],
    ),
}


@pytest.mark.parametrize("kind", list(CASES))
def test_each_format_accepts_its_valid_forms_and_refuses_the_rest(kind: str) -> None:
    good, bad = CASES[kind]
    assert [v for v in good if not accepted(kind, v)] == []
    assert [v for v in bad if accepted(kind, v)] == []


@pytest.mark.parametrize("kind", list(CASES))
def test_the_published_schema_agrees_on_every_case(kind: str) -> None:
    good, bad = CASES[kind]
    for value in good + bad:
        assert accepted(kind, value) is published(kind, value), value


def test_format_errors_say_what_is_expected() -> None:
    with pytest.raises(InvalidArgumentsError) as caught:
        DEFINITIONS["date-time"].validate({"value": "1700000000"})
    assert "RFC 3339 date-time with an offset" in str(caught.value)
    with pytest.raises(InvalidArgumentsError, match="ISO 8601 duration"):
        DEFINITIONS["duration"].validate({"value": "1 day"})
    with pytest.raises(InvalidArgumentsError, match="hyphenated UUID"):
        DEFINITIONS["uuid"].validate({"value": "12345678123456781234567812345678"})


# What a URL type refuses beyond RFC 3986 (published as its pattern, not by the format).
URL_ONLY = {"http://", "http:foo", "https:///a", "http://a:99999", "http://.0", "http://a.1",
            "http://a.0x", "http://a.%30", "http://%2e0", "http://09", "http://256.1.1.1",
            "http://1.2.3.4.5"}  # fmt: skip


def test_hand_written_schemas_check_the_same_formats() -> None:
    kinds = ("uuid", "date-time", "date", "time", "duration", "uri")
    schema = {
        "type": "object",
        "properties": {kind: {"type": "string", "format": kind} for kind in kinds},
    }
    definition = ToolDefinition.from_schema("formats", schema, function=lambda **kw: "ok")
    for kind in kinds:
        good, bad = CASES[kind]
        for value in good + [v for v in bad if v in URL_ONLY]:
            definition.validate({kind: value})
        for value in [v for v in bad if v not in URL_ONLY]:
            with pytest.raises(InvalidArgumentsError):
                definition.validate({kind: value})


# --- repairs happen only where the schema expects an integer ----------------------------------


def test_integral_floats_become_integers_only_at_integer_positions() -> None:
    def fn(
        count: int,
        ratios: dict[str, Any],
        anything: Any = None,
        items: list[int] | None = None,
        either: int | str = 0,
        scale: float = 1.0,
    ) -> None:
        """Mixed positions."""

    definition = ToolDefinition.from_function(tool(fn))
    arguments = {
        "count": 2.0,
        "ratios": {"r": 1.0, "nested": [3.0]},
        "anything": 4.0,
        "items": [5.0, 6],
        "either": 7.0,
        "scale": 8.0,
    }
    for raw in (arguments, json.dumps(arguments)):
        got = definition.validate(raw)
        assert got["count"] == 2
        assert type(got["count"]) is int
        assert got["ratios"] == {"r": 1.0, "nested": [3.0]}
        assert type(got["ratios"]["r"]) is float
        assert type(got["ratios"]["nested"][0]) is float
        assert type(got["anything"]) is float
        assert [type(i) for i in got["items"]] == [int, int]
        assert got["either"] == 7
        assert type(got["either"]) is int
        assert type(got["scale"]) is float


def test_a_repair_never_hides_a_real_problem() -> None:
    def fn(count: int, label: str) -> None:
        """Two positions."""

    definition = ToolDefinition.from_function(tool(fn))
    with pytest.raises(InvalidArgumentsError) as caught:
        definition.validate({"count": 2.0, "label": 3})
    assert [p.path for p in caught.value.problems] == ["$.label"]
    with pytest.raises(InvalidArgumentsError):
        definition.validate({"count": 2.5, "label": "x"})


# --- the property: generated values, judged by the reference --------------------------------


DIGITS = st.text(string.digits, min_size=1, max_size=4)


@st.composite
def rfc3339_date_times(draw: st.DrawFn) -> str:
    moment = draw(
        st.datetimes(
            min_value=datetime.datetime(1, 1, 1), max_value=datetime.datetime(9999, 12, 31)
        )
    )
    offset = draw(st.sampled_from(["Z", "z", "+00:00", "-05:30", "+23:59", "+14:00"]))
    separator = draw(st.sampled_from(["T", "t"]))
    text = moment.isoformat(sep=separator)
    if draw(st.booleans()):
        text += "." + draw(st.text(string.digits, min_size=1, max_size=9))
    return text + offset


@st.composite
def iso_durations(draw: st.DrawFn) -> str:
    if draw(st.booleans()) and draw(st.booleans()):
        return f"P{draw(DIGITS)}W"
    date = "".join(f"{draw(DIGITS)}{u}" for u in "YMD" if draw(st.booleans()))
    time = "".join(f"{draw(DIGITS)}{u}" for u in "HM" if draw(st.booleans()))
    if draw(st.booleans()):
        time += draw(DIGITS) + (f".{draw(DIGITS)}" if draw(st.booleans()) else "") + "S"
    assume(date or time)
    return "P" + date + (f"T{time}" if time else "")


HOSTS = st.from_regex(r"\A[a-z][a-z0-9-]{0,10}(\.[a-z]{2,5}){0,2}\Z")
PATHS = st.lists(
    st.text(string.ascii_letters + string.digits + "-._~!$&'()*+,;=:@%", max_size=6), max_size=3
)


@st.composite
def uris(draw: st.DrawFn) -> str:
    scheme = draw(
        st.sampled_from(
            ["http", "https", "HTTP", "ftp", "ws", "file", "mailto", "urn", "git+ssh", "x-custom"]
        )
    )
    if draw(st.booleans()):
        port = draw(st.none() | st.integers(0, 70000))
        authority = draw(HOSTS) + (f":{port}" if port is not None else "")
        text = f"{scheme}://{authority}" + "".join("/" + s for s in draw(PATHS))
    else:
        text = f"{scheme}:" + "/".join(draw(PATHS))
    if draw(st.booleans()):
        text += "?" + draw(st.text(string.ascii_letters + "=&/?", max_size=6))
    return text


def near_misses(valid: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    """A valid value with one character removed, replaced or inserted."""

    @st.composite
    def mutate(draw: st.DrawFn) -> str:
        text = draw(valid)
        index = draw(st.integers(0, len(text)))
        char = draw(st.sampled_from(list("0123456789TZ:+-. PWDHMSYx/%[]")))
        action = draw(st.sampled_from(["remove", "replace", "insert"]))
        if action == "remove":
            return text[:index] + text[index + 1 :]
        if action == "replace":
            return text[:index] + char + text[index + 1 :]
        return text[:index] + char + text[index:]

    return mutate()


GENERATORS: dict[str, st.SearchStrategy[str]] = {
    "date-time": rfc3339_date_times(),
    "date": st.dates(min_value=datetime.date(1, 1, 1)).map(lambda d: d.isoformat()),
    "time": st.times()
    .map(lambda t: t.isoformat())
    .flatmap(lambda t: st.sampled_from([t + "Z", t + "+01:00", t])),
    "uuid": st.uuids()
    .map(str)
    .flatmap(lambda u: st.sampled_from([u, u.upper(), u.replace("-", "")])),
    "duration": iso_durations(),
    "uri": uris(),
    "http-url": uris(),
    "decimal": st.decimals(allow_nan=False, allow_infinity=False).map(str),
}


@pytest.mark.parametrize("kind", list(GENERATORS))
@given(data=st.data())
def test_generated_values_are_accepted_exactly_when_the_schema_accepts_them(
    kind: str, data: st.DataObject
) -> None:
    value = data.draw(GENERATORS[kind])
    assert accepted(kind, value) is published(kind, value), value


@pytest.mark.parametrize("kind", list(GENERATORS))
@given(data=st.data())
def test_near_misses_are_accepted_exactly_when_the_schema_accepts_them(
    kind: str, data: st.DataObject
) -> None:
    value = data.draw(near_misses(GENERATORS[kind]) | st.text(max_size=12))
    assert accepted(kind, value) is published(kind, value), value
