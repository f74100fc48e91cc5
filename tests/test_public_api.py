"""The public surface: one sorted list, every name importable, nothing private leaking."""

from __future__ import annotations

import inspect
import subprocess
import sys
from pathlib import Path

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


CALL_API = (
    "execute", "aexecute", "execute_many", "aexecute_many",
    "stream", "astream", "stream_many", "astream_many", "add_interceptor",
)  # fmt: skip


def test_the_call_api_is_documented_methods_of_plugin_host() -> None:
    """help(PluginHost) and an editor's go-to-definition land on real methods with real
    parameters, not on attributes copied from a private object at run time."""
    for name in CALL_API:
        method = inspect.getattr_static(agenthost.PluginHost, name)
        assert inspect.isfunction(method), name
        assert method.__qualname__ == f"PluginHost.{name}"
        assert method.__doc__, name
        parameters = inspect.signature(method).parameters
        if name != "add_interceptor":
            assert {"session", "timeout", "interceptors"} <= set(parameters), name
            assert all(p.kind is not p.VAR_KEYWORD for p in parameters.values()), name


def test_a_plain_tool_sees_one_context_object_for_its_whole_call(tmp_path: Path) -> None:
    seen: list[object] = []

    def probe(x: int) -> int:
        """Looks at its context twice."""
        seen.extend([agenthost.current_context(), agenthost.current_context()])
        return x

    with agenthost.PluginHost(tmp_path, installed=False) as host:
        host.register(probe)
        result = host.execute("probe", '{"x": 3}', session="s1")
    assert result.success, result.error
    first, second = seen
    assert isinstance(first, agenthost.ToolContext)
    assert first is second
    assert (first.name, first.session, first.call_id, first.arguments, first.attributes) == (
        "probe",
        "s1",
        result.call_id,
        {"x": 3},
        {},
    )


def test_importing_agenthost_leaves_jsonschema_for_when_it_is_needed() -> None:
    """jsonschema's format module takes most of a second to import when rfc3987-syntax is
    installed; a host without hand-written schemas should not pay for it at start."""
    code = (
        "import sys, agenthost\n"
        "assert 'jsonschema' not in sys.modules, 'imported at start'\n"
        "d = agenthost.ToolDefinition.from_schema('t', {'type': 'object', 'properties': "
        "{'when': {'type': 'string', 'format': 'date'}}})\n"
        "assert 'jsonschema' in sys.modules\n"
        "try:\n"
        "    d.validate({'when': 'soon'})\n"
        "except agenthost.InvalidArgumentsError as exc:\n"
        "    print(exc.problems[0].path)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert (done.returncode, done.stdout, done.stderr) == (0, "$.when\n", "")
