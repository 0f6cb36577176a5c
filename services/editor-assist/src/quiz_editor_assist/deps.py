"""The dependencies of the wand's routes, as typed aliases (the FastAPI full-stack template's
`api/deps.py` idiom): a route names what it needs, `service: GenerateServiceDep`.

The service is the one the lifespan builds, reached through the app (`app.state.generate`, the
`ServiceRef` main.py sets): 503 `unavailable` before it is built.
"""

from typing import Annotated

from fastapi import Depends, Request

from quiz_editor_assist.service import GenerateService
from quiz_servicekit.app import ServiceRef
from quiz_servicekit.auth import Access, Identity, caller_identity, require_grant


async def generate_service(request: Request) -> GenerateService:
    """The service of `request`'s app (a coroutine: a sync dependency costs a thread hop)."""
    ref: ServiceRef[GenerateService] = request.app.state.generate
    return ref()


GenerateServiceDep = Annotated[GenerateService, Depends(generate_service)]
# A contributor grant on the path's question (404 `not_found` without it); its `type` is the
# question's type.
QuestionContributor = Annotated[Access, Depends(require_grant("question:{id}", "contributor"))]
# Any valid bearer token (401 without).
Caller = Annotated[Identity, Depends(caller_identity)]
