"""The dependencies of poll's routes, as typed aliases (the FastAPI full-stack template's
`api/deps.py` idiom): a route names what it needs, `service: PollServiceDep`, `access: StaffAccess`.

The service is the one the lifespan builds, reached through the app (`app.state.poll`, the
`ServiceRef` main.py sets): 503 `unavailable` before it is built. Grants (JWT `grants`) on
`evaluation:{evaluationId}`: staff is role `contributor` (or `owner`), anyone is `viewer`; without
the grant every route answers 404 `not_found`, a bad token 401.
"""

from typing import Annotated

from fastapi import Depends, Request

from quiz_poll.service import PollService
from quiz_servicekit.app import ServiceRef
from quiz_servicekit.auth import Access, require_grant

RESOURCE = "evaluation:{evaluationId}"


async def poll_service(request: Request) -> PollService:
    """The service of `request`'s app (a coroutine: a sync dependency costs a thread hop)."""
    ref: ServiceRef[PollService] = request.app.state.poll
    return ref()


PollServiceDep = Annotated[PollService, Depends(poll_service)]
StaffAccess = Annotated[Access, Depends(require_grant(RESOURCE, "contributor"))]
AnyoneAccess = Annotated[Access, Depends(require_grant(RESOURCE, "viewer"))]
