"""The dependencies of review's routes, as typed aliases (the FastAPI full-stack template's
`api/deps.py` idiom): a route names what it needs, `service: ReviewServiceDep`,
`identity: QuestionContributor`.

The service is the one the lifespan builds, reached through the app (`app.state.review`, the
`ServiceRef` main.py sets): 503 `unavailable` before it is built. What the caller may not reach
answers 404 `not_found` (invariant 6), before any work; a bad token 401.
"""

from typing import Annotated

from fastapi import Depends, Request

from quiz_contracts.errors import ContractError, ErrorCode
from quiz_review.service import ReviewService
from quiz_servicekit.app import ServiceRef
from quiz_servicekit.auth import Access, Identity, current_identity, require_grant


async def review_service(request: Request) -> ReviewService:
    """The service of `request`'s app (a coroutine: a sync dependency costs a thread hop)."""
    ref: ServiceRef[ReviewService] = request.app.state.review
    return ref()


ReviewServiceDep = Annotated[ReviewService, Depends(review_service)]


def reaches(identity: Identity, resource: str, role: str) -> bool:
    """Whether `identity` holds a grant on `resource` of at least `role`."""
    grant = identity.grants.get(resource)
    return grant is not None and grant.reaches(role)


async def question_contributor(request: Request, service: ReviewServiceDep) -> Identity:
    """The caller, when contributor on the path's question or on its pool; 404 otherwise."""
    identity = await current_identity(request)
    question_id = request.path_params["question_id"]
    if reaches(identity, f"question:{question_id}", "contributor"):
        return identity
    pool = await service.question_pool(question_id)
    if pool is not None and reaches(identity, f"pool:{pool}", "contributor"):
        return identity
    raise ContractError(ErrorCode.not_found, "question not found")


QuestionContributor = Annotated[Identity, Depends(question_contributor)]
# Any grant on the path's pool (a question grant alone does not reach the pool's routes).
PoolViewer = Annotated[Access, Depends(require_grant("pool:{pool_id}", "viewer"))]
PoolOwner = Annotated[Access, Depends(require_grant("pool:{pool_id}", "owner"))]
