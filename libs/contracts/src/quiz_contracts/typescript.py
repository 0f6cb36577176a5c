"""The input of `make ts`: every wire model's JSON Schema in the role a TypeScript client has.

A client *writes* requests and the events it publishes: those are typed from pydantic's
validation schema (a field with a default is optional). It *reads* replies and the events it
receives: those from the serialization schema with every field required (our services always
write every field). The roles come from the catalogs, never from a list of names:

- written: each `catalog.OPERATIONS` request, each `catalog.CHANNELS` payload a service
  receives, each `routes.HTTP_ROUTES` body, each question type's config (`QUESTION_TYPES`);
- read: each operation's reply, each channel payload a service sends, each route's reply,
  `ErrorBody`;
- every other model of the package (found by walking its modules: internal records, shapes
  carried inside a dict) is exported too, from its serialization schema, as "other".

A model nested in both a written and a read shape whose two schemas differ is exported twice:
`Name` (its read shape) and `NameInput` (its written shape), pydantic's and zod's `input`.
`scripts/gen_ts.py` feeds `typescript_bundle()` to json-schema-to-typescript
(libs/contracts/ts/scripts/generate.mjs); docs/contracts-typescript.md tells the whole story.
"""

from __future__ import annotations

import importlib
import inspect
import json
import pkgutil
import re
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, TypeAdapter
from pydantic.json_schema import GenerateJsonSchema, JsonSchemaMode

import quiz_contracts
from quiz_contracts import subjects
from quiz_contracts.catalog import CHANNELS, OPERATIONS
from quiz_contracts.errors import ErrorBody
from quiz_contracts.questions.registry import QUESTION_TYPES
from quiz_contracts.routes import HTTP_ROUTES

Role = Literal["written", "read", "other"]
MODE: dict[Role, JsonSchemaMode] = {
    "written": "validation",
    "read": "serialization",
    "other": "serialization",
}
ROLE_NOTE: dict[Role | Literal["both"], str] = {
    "written": "Written by a client (request, published event): pydantic's validation schema, "
    "a field with a default is optional.",
    "read": "Read by a client (reply, received event): pydantic's serialization schema, every "
    "field present.",
    "both": "Part of written and read shapes alike: one schema in both roles.",
    "other": "Not a platform client's message (a record our services write and read back, or "
    "a shape carried inside a dict): pydantic's serialization schema, every field present.",
}
# The name the root type of the schema takes: every exported shape by its name.
ROOT_NAME = "WireShapes"
# Stands for one subject token when a `*_subject` function of quiz_contracts.subjects is
# turned into a template literal type.
_PLACEHOLDER = "SUBJECT0PART"
_INPUT_SUFFIX = "Input"
# Models our services write with `exclude_none=True` (quiz_servicekit's error replies, on NATS
# and HTTP): a field whose value is None is absent, so their read shape keeps such fields
# optional, as their written shape does.
SPARSE_MODELS: tuple[type[BaseModel], ...] = (ErrorBody,)


class ContractSchemaError(ValueError):
    """The contracts cannot be typed as they stand (two shapes claim one TypeScript name)."""


class _ClientSchema(GenerateJsonSchema):
    """pydantic's schema, with every serialized field required in serialization mode.

    The effect of `json_schema_serialization_defaults_required`, for every model at once:
    our services write every field (no `exclude_none`), so a reader finds every field —
    but for a field declared with `exclude_if`, which a reader may find absent.
    """

    def field_is_required(self, field: Any, total: bool) -> bool:
        if self.mode == "serialization":
            # A field with `exclude_if` (ReviewFinding.code: absent on a model's finding) may
            # be missing from what a reader gets: optional in its read shape too.
            return not field.get("serialization_exclude") and not field.get(
                "serialization_exclude_if"
            )
        return super().field_is_required(field, total)


@dataclass(frozen=True)
class Shape:
    """One top-level TypeScript type: its name, the Python type and the client's role."""

    name: str
    type: Any
    role: Role


def wire_models() -> list[type[BaseModel]]:
    """Every model class defined in quiz_contracts, in module then definition order.

    Left out: private names (`_CarriesLesson`) and field-less bases other models extend
    (`WireModel`, `CamelModel`…): they are no shape of their own.
    """
    found: list[type[BaseModel]] = []
    names = sorted(
        m.name for m in pkgutil.walk_packages(quiz_contracts.__path__, "quiz_contracts.")
    )
    for module_name in names:
        module = importlib.import_module(module_name)
        for name, value in vars(module).items():
            if not (inspect.isclass(value) and issubclass(value, BaseModel)):
                continue
            if value.__module__ != module_name or name.startswith("_"):
                continue
            if not value.model_fields and value.__subclasses__():
                continue
            found.append(value)
    return found


def client_shapes() -> list[Shape]:
    """The top-level shapes with their roles, from the catalogs (see the module docstring)."""
    shapes: list[Shape] = []
    for op in OPERATIONS:
        shapes.append(Shape(op.request.__name__, op.request, "written"))
        shapes.append(Shape(op.reply.__name__, op.reply, "read"))
    for channel in CHANNELS:
        role: Role = "written" if channel.action == "receive" else "read"
        shapes.append(Shape(channel.payload.__name__, channel.payload, role))
    for route in HTTP_ROUTES:
        if route.body is not None:
            assert route.body_type_name is not None
            shapes.append(Shape(route.body_type_name, route.body, "written"))
        shapes.append(Shape(route.reply.__name__, route.reply, "read"))
    for question_type in QUESTION_TYPES.values():
        model = question_type.config_model
        shapes.append(Shape(model.__name__, model, "written"))
    shapes.append(Shape(ErrorBody.__name__, ErrorBody, "read"))
    return _unique(shapes)


def _unique(shapes: list[Shape]) -> list[Shape]:
    """The first of each (name, role); one name for two different types is an error."""
    seen: dict[tuple[str, Role], Shape] = {}
    types: dict[str, Any] = {}
    for shape in shapes:
        if types.setdefault(shape.name, shape.type) is not shape.type:
            raise ContractSchemaError(f"two types are named {shape.name}")
        seen.setdefault((shape.name, shape.role), shape)
    return list(seen.values())


def typescript_bundle() -> dict[str, Any]:
    """What generate.mjs needs: `schema` (one root schema, every shape in `$defs`), `subjects`.

    Shapes: {"schema": {...}, "roles": {ts name: role}, "subjects": {NAME: "a.v1.b"},
    "subjectTemplates": {TypeName: "poll.v1.${string}.tally"}}. Deterministic: same contracts,
    same bytes. ContractSchemaError when two shapes claim one TypeScript name.
    """
    shapes = client_shapes()
    reached = _schemas(shapes)[1]
    named = {name.split("-")[0] for name in reached}
    others = [
        Shape(model.__name__, model, "other")
        for model in wire_models()
        if model.__name__ not in named
        and model.__name__ not in {s.name for s in shapes}
        and not model.__subclasses__()  # a base of other shapes (ProgramConfig): no message
    ]
    shapes = _unique(shapes + others)
    keys, defs = _schemas(shapes)
    for shape in shapes:
        if "$ref" not in keys[(shape.name, MODE[shape.role])]:
            # A union body (PollIdeaAction): a definition of its own, under its name.
            defs[shape.name] = keys[(shape.name, MODE[shape.role])]
    _sparse(defs)
    renames = _ts_names(defs)
    roles = _roles(shapes, keys, defs, renames)
    ts_defs: dict[str, Any] = {}
    for def_name, schema in sorted(defs.items()):
        ts_name = renames[def_name]
        ts_defs[ts_name] = _for_typescript(schema, renames, ts_name, roles[ts_name])
    properties = {name: {"$ref": f"#/$defs/{name}"} for name in sorted(ts_defs)}
    root = {
        "title": ROOT_NAME,
        "description": "Every exported shape by its name (for generic code: "
        f'`{ROOT_NAME}["ReviewRequest"]`).',
        "type": "object",
        "properties": properties,
        "required": sorted(properties),
        "additionalProperties": False,
        "$defs": ts_defs,
    }
    return {
        "schema": root,
        "roles": dict(sorted(roles.items())),
        "subjects": subject_map(),
        "subjectTemplates": subject_templates(),
    }


def _roles(
    shapes: list[Shape],
    keys: dict[tuple[str, str], Any],
    defs: dict[str, Any],
    renames: dict[str, str],
) -> dict[str, Role | Literal["both"]]:
    """Each TypeScript name's role: a top-level's own, else the roles of what reaches it."""
    reached: dict[str, set[Role]] = {}
    for shape in shapes:
        stack = [keys[(shape.name, MODE[shape.role])]]
        if "$ref" not in stack[0]:
            stack = [defs[shape.name]]
            reached.setdefault(shape.name, set()).add(shape.role)
        while stack:
            node = stack.pop()
            if isinstance(node, list):
                stack.extend(node)
            elif isinstance(node, dict):
                ref = node.get("$ref")
                if isinstance(ref, str):
                    target = ref.rsplit("/", 1)[1]
                    if shape.role not in reached.setdefault(target, set()):
                        reached[target].add(shape.role)
                        stack.append(defs[target])
                stack.extend(v for k, v in node.items() if k not in ("examples", "default"))
    own = {shape.name: shape.role for shape in shapes}
    roles: dict[str, Role | Literal["both"]] = {}
    for def_name, ts_name in renames.items():
        if ts_name in own and ts_name == def_name:
            roles[ts_name] = own[ts_name]
            continue
        modes = {MODE[r] for r in reached.get(def_name, set())}
        if modes == {"validation", "serialization"}:
            roles[ts_name] = "both"
        elif reached.get(def_name) == {"other"}:
            roles[ts_name] = "other"
        else:
            roles[ts_name] = "read" if modes == {"serialization"} else "written"
    return roles


def _schemas(shapes: list[Shape]) -> tuple[dict[tuple[str, str], Any], dict[str, Any]]:
    """The shapes' schemas by (name, mode) and their shared definitions."""
    inputs: list[tuple[str, JsonSchemaMode, TypeAdapter[Any]]] = [
        (s.name, MODE[s.role], TypeAdapter(s.type)) for s in shapes
    ]
    keys, top = TypeAdapter.json_schemas(
        inputs, ref_template="#/$defs/{model}", schema_generator=_ClientSchema
    )
    by_name: dict[tuple[str, str], Any] = {(name, mode): v for (name, mode), v in keys.items()}
    return by_name, dict(top.get("$defs", {}))


def _sparse(defs: dict[str, Any]) -> None:
    """SPARSE_MODELS' read shapes: a field with a default of None is optional (absent)."""
    for model in SPARSE_MODELS:
        optional = {
            field.alias or name
            for name, field in model.model_fields.items()
            if not field.is_required() and field.default is None
        }
        for def_name in (model.__name__, f"{model.__name__}-Output"):
            if def_name in defs and "required" in defs[def_name]:
                defs[def_name]["required"] = [
                    r for r in defs[def_name]["required"] if r not in optional
                ]


def _ts_names(defs: dict[str, Any]) -> dict[str, str]:
    """pydantic's definition names → TypeScript names: `X-Output` is `X`, `X-Input` `XInput`."""
    renames: dict[str, str] = {}
    for def_name in defs:
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*(-Input|-Output)?", def_name):
            raise ContractSchemaError(f"no TypeScript name for the definition {def_name}")
        base, _, mode = def_name.partition("-")
        renames[def_name] = base + _INPUT_SUFFIX if mode == "Input" else base
    clash = [n for n in set(renames.values()) if list(renames.values()).count(n) > 1]
    if clash:
        raise ContractSchemaError(f"two shapes would be named {sorted(clash)}")
    return renames


def _for_typescript(
    schema: Any, renames: dict[str, str], name: str, role: Role | Literal["both"]
) -> Any:
    """The definition as json-schema-to-typescript reads it: named by `title`, its role said.

    Nested titles are dropped (pydantic titles every field, which would export one alias per
    field), `$ref`s follow the renames.
    """
    out = _strip(schema, renames)
    out["title"] = name
    note = ROLE_NOTE[role]
    if "properties" not in out:  # an enum or a union: no field to be optional or present
        note = note.split(":")[0] + "."
    if name in {m.__name__ for m in SPARSE_MODELS}:
        note += " Except: written with exclude_none, so a field that would be null is absent."
    out["description"] = f"{out['description']}\n\n{note}" if out.get("description") else note
    return out


def _strip(node: Any, renames: dict[str, str]) -> Any:
    if isinstance(node, list):
        return [_strip(item, renames) for item in node]
    if not isinstance(node, dict):
        return node
    if "$ref" in node and len(node) > 1:
        # A $ref beside other keywords (a field's description, its default): json-schema-to-
        # typescript would declare the target a second time (`Effort1`); under anyOf it does not.
        siblings = {k: v for k, v in node.items() if k != "$ref"}
        return _strip({**siblings, "anyOf": [{"$ref": node["$ref"]}]}, renames)
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key == "title" and isinstance(value, str):
            continue
        if key == "$ref" and isinstance(value, str):
            out[key] = "#/$defs/" + renames[value.rsplit("/", 1)[1]]
        elif key in ("properties", "$defs", "patternProperties") and isinstance(value, dict):
            out[key] = {k: _strip(v, renames) for k, v in value.items()}
        elif key in ("examples", "default", "const", "enum"):
            out[key] = value  # data, not schema: kept as written
        else:
            out[key] = _strip(value, renames)
    return out


def subject_map() -> dict[str, str]:
    """Every subject, stream name and filter of quiz_contracts.subjects, by its Python name.

    The constants as they are; each argument-less `*_filter()` function under its upper-case
    name (`POLL_TALLY_FILTER`: `poll.v1.*.tally`).
    """
    found: dict[str, str] = {}
    for name, value in vars(subjects).items():
        if name.isupper() and isinstance(value, str):
            found[name] = value
        elif name.endswith("_filter") and inspect.isfunction(value):
            found[name.upper()] = value()
    return dict(sorted(found.items()))


def subject_templates() -> dict[str, str]:
    """Each `*_subject(token)` function of quiz_contracts.subjects as a template literal type.

    `poll_tally_subject` → {"PollTallySubject": "poll.v1.${string}.tally"}.
    """
    found: dict[str, str] = {}
    for name, value in vars(subjects).items():
        if name.endswith("_subject") and inspect.isfunction(value):
            type_name = "".join(part.capitalize() for part in name.split("_"))
            found[type_name] = value(_PLACEHOLDER).replace(_PLACEHOLDER, "${string}")
    return dict(sorted(found.items()))


def typed_examples(bundle: dict[str, Any], documents: dict[str, Any]) -> str:
    """A TypeScript module typing every example: `tsc --strict` fails on a wrong shape.

    `documents`: docs/examples/<file> → its parsed JSON, typed as the exported shape its file
    name starts with (`lesson-bees.json` is a `Lesson`, the longest kebab-case match wins).
    Every `examples` entry of a definition is typed as that shape, of a property as
    `Shape["property"]`. ContractSchemaError for a document no shape name prefixes.
    """
    defs: dict[str, Any] = bundle["schema"]["$defs"]
    lines = [
        "// Generated by `make ts-check` (scripts/gen_ts.py); not committed.",
        'import type * as T from "./index";',
        "",
    ]
    for i, (path, value) in enumerate(sorted(documents.items())):
        type_name = document_type(path, defs)
        lines.append(f"// {path}")
        lines.append(f"export const doc{i}: T.{type_name} = {_literal(value)};")
    n = 0
    for type_name, schema in sorted(defs.items()):
        for example in schema.get("examples", []):
            lines.append(f"// {type_name} (schema examples)")
            lines.append(f"export const example{n}: T.{type_name} = {_literal(example)};")
            n += 1
        for prop, prop_schema in sorted(schema.get("properties", {}).items()):
            for example in prop_schema.get("examples", []):
                lines.append(f"// {type_name}.{prop} (schema examples)")
                access = f"T.{type_name}[{json.dumps(prop)}]"
                lines.append(f"export const example{n}: {access} = {_literal(example)};")
                n += 1
    return "\n".join(lines) + "\n"


def document_type(path: str, defs: dict[str, Any]) -> str:
    """The shape a docs example is: the longest exported name whose kebab case prefixes it."""
    stem = path.rsplit("/", 1)[-1].removesuffix(".json")
    matches = [name for name in defs if stem == _kebab(name) or stem.startswith(_kebab(name) + "-")]
    if not matches:
        raise ContractSchemaError(
            f"{path}: no exported shape names it; name it <shape in kebab case>-<anything>.json "
            "(lesson-bees.json is a Lesson)"
        )
    return max(matches, key=len)


def _kebab(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "-", name).lower()


def _literal(value: Any) -> str:
    """A JSON value as a TypeScript expression (JSON is one; `as const` keeps literals)."""
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=False)
