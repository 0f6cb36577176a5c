"""The wand's API documentation: an OpenAPI that names each type's config, the error body and
the bearer scheme. Swagger UI and ReDoc are every service's, from local assets
(`quiz_servicekit.docs`).
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

from quiz_contracts.questions import QUESTION_TYPES
from quiz_editor_assist.generators.registry import generated_types

CONFIG_DESCRIPTION = (
    "The editor's draft as it stands, in the platform's config shape of the question's type: "
    "the type is the grant's (`grants['question:<id>'].type` in the token), never the body's. "
    "The shapes below are those of a VALID config; a draft may be partial or invalid (D16)."
)


# The request bodies Swagger UI offers (the first is prefilled by "Try it out"): each type's
# fresh draft with a statement, as the README's `wand` sends them. The type is the token's grant,
# so each says which grant it needs. Before, Swagger prefilled a categorize draft built from the
# first schema of `config`, refused 422 under any other grant (issue 34).
DRAFT_EXAMPLES: dict[str, dict[str, Any]] = {
    "mcq": {
        "configVersion": 2,
        "prompt": "2 + 2 ?",
        "mode": "single",
        "policy": "inherit",
        "shuffleChoices": True,
        "choices": [{"text": "", "correct": True}, {"text": "", "correct": False}],
    },
    "short": {
        "configVersion": 3,
        "prompt": "How many legs has a spider?",
        "kind": "number",
        "constraints": {"minLength": 0, "maxLength": 255, "integer": False},
        "prefilters": {"trim": True, "lowercase": True},
        "matchers": [{"kind": "exact", "value": "", "points": 1}],
    },
    "rich": {
        "configVersion": 1,
        "prompt": "Why is the sky blue?",
        "rubric": "",
        "format": "markdown",
    },
    "categorize": {
        "configVersion": 1,
        "prompt": "Sort the animals.",
        "columns": [
            {"id": "k3v9q2xa", "label": "", "cards": []},
            {"id": "p0w7e4rt", "label": "", "cards": []},
        ],
        "cards": [],
        "ordered": False,
        "shuffleCards": True,
        "shuffleColumns": False,
        "policy": "inherit",
    },
    "code": {
        "configVersion": 1,
        "prompt": "Read two integers and print their sum.",
        "language": "python",
        "template": "",
        "referenceSolution": "",
        "tests": {
            "mode": "io",
            "cases": [
                {
                    "name": "",
                    "args": [],
                    "stdin": "",
                    "expected": "",
                    "compareStdout": True,
                    "expectedExitCode": 0,
                    "visible": True,
                    "points": 1,
                    "timeMs": None,
                }
            ],
        },
    },
    "codeimage": {
        "configVersion": 1,
        "prompt": "Draw a white square with a black centre.",
        "language": "python",
        "referenceSolution": "",
        "image": {"width": 3, "height": 3, "palette": "bw"},
        "target": None,
    },
}


def request_examples() -> dict[str, dict[str, Any]]:
    """The OpenAPI `examples` of the wand's body, the mcq draft first (Swagger's prefill)."""
    return {
        name: {
            "summary": f"{name} draft (a token with a {name} grant)",
            "description": "Mint its token with `make -s token "
            f"GRANTS='question:42=contributor:{name}'` and Authorize with it.",
            "value": {"config": config, "explanation": ""},
        }
        for name, config in DRAFT_EXAMPLES.items()
    }


def _config_schemas(components: dict[str, Any]) -> dict[str, dict[str, str]]:
    """Every type's config schema added to the components; the refs, by type."""
    refs: dict[str, dict[str, str]] = {}
    for name, qtype in QUESTION_TYPES.items():
        schema = qtype.config_model.model_json_schema(ref_template="#/components/schemas/{model}")
        for def_name, definition in schema.pop("$defs", {}).items():
            components.setdefault(def_name, definition)
        version = qtype.config_version
        schema["description"] = f"A `{name}` question's config (configVersion {version})."
        components[qtype.config_model.__name__] = schema
        refs[name] = {"$ref": f"#/components/schemas/{qtype.config_model.__name__}"}
    return refs


def openapi_document(app: FastAPI) -> dict[str, Any]:
    """The app's OpenAPI with the type configs, JSON errors and the bearer scheme."""
    schema = get_openapi(
        title=app.title,
        version=app.version,
        description="The Generate wand of the question editor (ADR-059).",
        routes=app.routes,
    )
    components = schema.setdefault("components", {})
    schemas = components.setdefault("schemas", {})
    refs = _config_schemas(schemas)
    request = schemas.get("GenerateRequest")
    if request is not None:
        request["properties"]["config"] = {
            "description": CONFIG_DESCRIPTION,
            "oneOf": [refs[name] for name in generated_types()],
        }
    body = (
        schema.get("paths", {})
        .get("/app/api/questions/{id}/generate", {})
        .get("post", {})
        .get("requestBody", {})
        .get("content", {})
        .get("application/json")
    )
    if body is not None:
        body["examples"] = request_examples()
    components["securitySchemes"] = {
        "bearer": {
            "type": "http",
            "scheme": "bearer",
            "bearerFormat": "JWT",
            "description": "EdDSA or ES256; `sub` and `grants` (`make -s token` mints one).",
        }
    }
    for path, operations in schema.get("paths", {}).items():
        if not path.startswith("/app/api/"):
            continue
        for operation in operations.values():
            operation["security"] = [{"bearer": []}]
            # Validation failures answer 400 invalid_request {code, message}, never FastAPI's 422.
            responses = operation.setdefault("responses", {})
            if "HTTPValidationError" in str(responses.get("422", "")):
                del responses["422"]
            responses.setdefault(
                "400",
                {
                    "description": "invalid_request",
                    "content": {
                        "application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}
                    },
                },
            )
    for name in ("HTTPValidationError", "ValidationError"):
        schemas.pop(name, None)
    return schema


def install_docs(app: FastAPI) -> None:
    """Serve the OpenAPI above at /openapi.json (and so in /docs and /redoc)."""

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = openapi_document(app)
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
