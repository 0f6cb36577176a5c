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
