"""``ToolDefinition``: the one internal description of a tool that everything else reads.

Built once per tool version from a function (its signature, docstring and
``@tool`` options) or from a hand-written JSON Schema. It is immutable; the
provider exports derived from it are cached on it.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from agenthost._authoring import jsonschemas
from agenthost._authoring import options as check
from agenthost._authoring.decorator import ToolOptions, tool_options
from agenthost._authoring.schema import canonicalize
from agenthost._authoring.signature import (
    Signature,
    ToolKind,
    analyse,
    parameter_lines,
    source_of,
)
from agenthost._authoring.typeschema import build_input, build_output
from agenthost._authoring.validation import (
    ArgumentValidator,
    JsonSchemaArgumentValidator,
    PydanticArgumentValidator,
    RawArguments,
    SimpleArgumentValidator,
)
from agenthost._common.frozen import freeze
from agenthost._errors import DefinitionProblem, InvalidArgumentsError, ToolDefinitionError

__all__ = ["NAME_PATTERN", "NAME_RULE", "ToolDefinition", "ToolHints", "check_schema"]

# The host's own rule for tool names: what OpenAI and Anthropic accept, so a name that
# passes it only needs a look at Gemini's first character, and MCP never refuses it. Each
# provider's own rule is checked by agenthost._providers.compatibility.
NAME_PATTERN = re.compile(r"[A-Za-z0-9_-]{1,64}")
NAME_RULE = "1-64 letters, digits, '_' or '-'"
_PERMISSION_PATTERN = re.compile(r"[A-Za-z0-9_.:*-]+")


@dataclass(frozen=True, slots=True)
class ToolHints:
    """The MCP behaviour hints; None means "not said"."""

    read_only: bool | None = None
    destructive: bool | None = None
    idempotent: bool | None = None
    open_world: bool | None = None


@dataclass(frozen=True, slots=True, eq=False)
class ToolDefinition:
    """Everything the host knows about one tool, independent of any provider format.

    ``timeout`` is None when the tool leaves it to the host default and
    ``math.inf`` when the author turned it off (``@tool(timeout=False)``).
    ``warnings`` are things the author may want to fix that did not stop the
    tool from being defined (a docstring naming a missing parameter, ...).
    """

    name: str
    description: str
    input_schema: Mapping[str, Any]
    validator: ArgumentValidator
    function: Callable[..., Any] | None = None
    output_schema: Mapping[str, Any] | None = None
    kind: ToolKind = "sync"
    title: str | None = None
    permissions: frozenset[str] = frozenset()
    timeout: float | None = None
    tags: tuple[str, ...] = ()
    hints: ToolHints = ToolHints()
    definition_only: bool = False
    examples: tuple[Mapping[str, Any] | str, ...] = ()
    context_parameter: str | None = None
    cache_ttl: float | None = None
    retries: int = 0
    file: str | None = None
    line: int | None = None
    warnings: tuple[str, ...] = ()
    icons: tuple[Mapping[str, Any], ...] = ()
    meta: Mapping[str, Any] | None = None
    _exports: dict[tuple[str, bool], Any] = field(default_factory=dict, repr=False)

    @property
    def fingerprint(self) -> str:
        """A digest of everything a model or client sees, to tell real changes from reloads."""
        found = self._exports.get(("fingerprint", False))
        if found is None:
            found = self._exports["fingerprint", False] = _fingerprint(self)
        return found

    def validate(self, arguments: RawArguments) -> dict[str, Any]:
        """Validated keyword arguments for the function, or :class:`InvalidArgumentsError`."""
        return self.validator.validate(arguments)

    @property
    def location(self) -> str:
        """``file:line`` of the declaration, for messages."""
        return f"{self.file or '?'}:{self.line or '?'}"

    @classmethod
    def from_function(cls, fn: Callable[..., Any], **overrides: Any) -> ToolDefinition:
        """Build the definition of ``fn`` from its ``@tool`` options, signature and docstring.

        ``overrides`` replace ``@tool`` options (for ``host.register(fn, name=...)``).
        Raises :class:`ToolDefinitionError` listing every problem found.
        """
        options = _with_overrides(tool_options(fn) or ToolOptions(), overrides)
        target, file, line = source_of(fn)
        problems: list[DefinitionProblem] = []
        name = options.name or getattr(fn, "__name__", None) or type(fn).__name__
        checked = _check_options(name, options, problems)
        hand_schema = options.input_schema is not None
        signature = analyse(fn, target, problems, hand_schema=hand_schema)
        built = (
            _hand_written_input(name, options.input_schema or {}, signature, problems)
            if hand_schema
            else _signature_input(name, signature, problems)
        )
        output = build_output(signature.returns, signature.kind, signature.warnings)
        if built is not None:
            _check_examples(options.examples, built[1], problems)
        if problems:
            raise _definition_error(target, name, file, line, problems)
        assert built is not None
        schema, validator = built
        return cls._create(
            name=name,
            description=options.description or signature.summary,
            input_schema=schema,
            validator=validator,
            function=fn,
            output_schema=output,
            kind=signature.kind,
            context_parameter=signature.context_parameter,
            file=file,
            line=line,
            warnings=tuple(signature.warnings),
            **checked,
        )

    @classmethod
    def from_schema(
        cls,
        name: str,
        input_schema: Mapping[str, Any],
        *,
        description: str = "",
        function: Callable[..., Any] | None = None,
        output_schema: Mapping[str, Any] | None = None,
        **options: Any,
    ) -> ToolDefinition:
        """A tool described by a hand-written JSON Schema, validated with ``jsonschema``.

        Without ``function`` the tool is definition-only: the host publishes it
        and hands calls back to the client (``requires_action``).
        """
        if function is not None:
            return cls.from_function(
                function,
                name=name,
                description=description or None,
                input_schema=input_schema,
                **options,
            )
        problems: list[DefinitionProblem] = []
        opts = ToolOptions(definition_only=True, **options)
        checked = _check_options(name, opts, problems)
        built = _hand_written_input(
            name, input_schema, Signature(accepts_any_keyword=True), problems
        )
        if built is not None:
            _check_examples(opts.examples, built[1], problems)
        if output_schema is not None:
            check_schema(output_schema, "output_schema", problems)
        if problems or built is None:
            raise ToolDefinitionError(function=name, tool=name, problems=problems)
        schema, validator = built
        return cls._create(
            name=name,
            description=description,
            input_schema=schema,
            validator=validator,
            output_schema=output_schema,
            **checked,
        )

    @classmethod
    def _create(cls, **values: Any) -> ToolDefinition:
        values["input_schema"] = freeze(values["input_schema"])
        if values.get("output_schema") is not None:
            values["output_schema"] = freeze(values["output_schema"])
        return cls(**values)


def _with_overrides(options: ToolOptions, overrides: Mapping[str, Any]) -> ToolOptions:
    """``@tool`` options with those ``host.register(fn, ...)`` passed on top; names that are
    no option are kept as ``unknown``, to be reported with the rest."""
    if not overrides:
        return options
    unknown = tuple(sorted(set(overrides) - set(ToolOptions.__dataclass_fields__)))
    known = {k: v for k, v in overrides.items() if k not in unknown}
    return replace(options, **known, unknown=options.unknown + unknown)


def _definition_error(
    target: Any, name: str, file: str | None, line: int | None, problems: list[DefinitionProblem]
) -> ToolDefinitionError:
    """All of a function's problems in one error, each parameter's with its own line."""
    lines = parameter_lines(target)
    problems = [
        replace(p, line=lines.get(p.parameter)) if p.parameter and not p.line else p
        for p in problems
    ]
    function = getattr(target, "__qualname__", name)
    return ToolDefinitionError(
        function=function, tool=name, file=file, line=line, problems=problems
    )


def _fingerprint(definition: ToolDefinition) -> str:
    hints = definition.hints
    public = {
        "name": definition.name,
        "title": definition.title,
        "description": definition.description,
        "input_schema": definition.input_schema,
        "output_schema": definition.output_schema,
        "kind": definition.kind,
        "permissions": sorted(definition.permissions),
        "timeout": definition.timeout,
        "tags": list(definition.tags),
        "hints": [hints.read_only, hints.destructive, hints.idempotent, hints.open_world],
        "definition_only": definition.definition_only,
        "examples": list(definition.examples),
        "cache_ttl": definition.cache_ttl,
        "retries": definition.retries,
        "icons": list(definition.icons),
        "meta": definition.meta,
    }
    text = json.dumps(public, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _check_options(
    name: str, options: ToolOptions, problems: list[DefinitionProblem]
) -> dict[str, Any]:
    """Check the ``@tool`` options; return them in the form ToolDefinition stores."""
    for unknown in options.unknown:
        hint = check.OPTION_HINTS.get(unknown.lower())
        problems.append(
            DefinitionProblem(
                f"unknown @tool option '{unknown}'"
                + (f"; did you mean '{hint}'?" if hint else "; see help(agenthost.tool)")
            )
        )
    if not isinstance(name, str) or not NAME_PATTERN.fullmatch(name):
        problems.append(
            DefinitionProblem(
                f"tool name {name!r} is invalid: use {NAME_RULE} (set @tool(name=...))"
            )
        )
    permissions = check.strings(options.permissions, "permissions", problems)
    for permission in sorted(permissions):
        if not _PERMISSION_PATTERN.fullmatch(permission):
            problems.append(
                DefinitionProblem(
                    f"permission {permission!r} is invalid: use letters, digits and . _ : * -, "
                    "e.g. 'http.get'"
                )
            )
    tags = check.strings(options.tags, "tags", problems)
    hints = ToolHints(
        options.read_only, options.destructive, options.idempotent, options.open_world
    )
    if hints.read_only and hints.destructive:
        problems.append(
            DefinitionProblem("read_only=True and destructive=True contradict each other; pick one")
        )
    return {
        "title": options.title,
        "permissions": frozenset(permissions),
        "timeout": check.timeout(options.timeout, problems),
        "cache_ttl": check.cache_ttl(options.cache_ttl, problems),
        "retries": check.retries(options.retries, hints.idempotent, problems),
        "tags": tuple(dict.fromkeys(tags)),
        "hints": hints,
        "definition_only": bool(options.definition_only),
        "examples": tuple(check.examples(options.examples, problems)),
        "icons": tuple(check.icons(options.icons, problems)),
        "meta": check.meta(options.meta, problems),
    }


def _check_examples(
    examples: Iterable[Mapping[str, Any] | str],
    validator: ArgumentValidator,
    problems: list[DefinitionProblem],
) -> None:
    if isinstance(examples, str | Mapping):
        examples = [examples]
    for example in examples:
        if isinstance(example, Mapping):
            try:
                validator.validate(example)
            except InvalidArgumentsError as exc:
                details = "; ".join(f"{p.path}: {p.message}" for p in exc.problems)
                problems.append(
                    DefinitionProblem(
                        f"example {dict(example)!r} does not fit the schema: {details}"
                    )
                )


def _signature_input(
    name: str, signature: Signature, problems: list[DefinitionProblem]
) -> tuple[dict[str, Any], ArgumentValidator] | None:
    built = build_input(name, signature.parameters, problems)
    if built is None:
        return None
    schema = freeze(built.schema)
    if built.python:
        return schema, SimpleArgumentValidator(name, built.validator, schema)
    return schema, PydanticArgumentValidator(name, built.validator, schema, recheck=built.recheck)


def check_schema(schema: Any, what: str, problems: list[DefinitionProblem]) -> bool:
    """Whether ``schema`` is a valid JSON Schema of an object; a problem says why not."""
    if not isinstance(schema, Mapping):
        problems.append(DefinitionProblem(f"{what} must be a JSON Schema object (a dict)"))
        return False
    import jsonschema  # on first use: importing it costs up to a second

    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    try:
        cls.check_schema(dict(schema))
    except jsonschema.SchemaError as exc:
        where = "/".join(str(p) for p in exc.absolute_path) or "(root)"
        problems.append(
            DefinitionProblem(f"{what} is not a valid JSON Schema at {where}: {exc.message}")
        )
        return False
    if schema.get("type") != "object":
        problems.append(
            DefinitionProblem(f'{what} must describe an object: {{"type": "object", ...}}')
        )
        return False
    if (why := jsonschemas.reference_problem(schema)) is not None:
        problems.append(DefinitionProblem(f"{what}: {why}"))
        return False
    return True


def _hand_written_input(
    name: str,
    schema: Mapping[str, Any],
    signature: Signature,
    problems: list[DefinitionProblem],
) -> tuple[dict[str, Any], ArgumentValidator] | None:
    if not check_schema(schema, "input_schema", problems):
        return None
    properties = schema.get("properties") or {}
    required = set(schema.get("required") or ())
    for param in signature.parameters:
        if param.default is param.empty and param.name not in required:
            problems.append(
                DefinitionProblem(
                    "the function requires it but input_schema does not list it in 'required'",
                    parameter=param.name,
                )
            )
    if not signature.accepts_any_keyword:
        accepted = {p.name for p in signature.parameters}
        for prop in properties:
            if prop not in accepted:
                problems.append(
                    DefinitionProblem(
                        f"input_schema has a property '{prop}' that the function does not accept; "
                        "add the parameter or **kwargs"
                    )
                )
    canonical = canonicalize(schema)
    canonical.setdefault("properties", {})
    return canonical, JsonSchemaArgumentValidator(name, schema)
