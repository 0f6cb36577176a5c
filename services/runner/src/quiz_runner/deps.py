"""The dependencies of the runner's routes, as typed aliases (the FastAPI full-stack template's
`api/deps.py` idiom): a route names what it needs, `svc: RunnerDep`.

The service is the one the lifespan builds, reached through the app (`app.state.runner`, the
`ServiceRef` main.py sets): 503 `unavailable` before it is built.
"""

from typing import Annotated

from fastapi import Depends, Request

from quiz_runner.service import RunnerService
from quiz_servicekit.app import ServiceRef
from quiz_servicekit.auth import require_grant


async def runner_service(request: Request) -> RunnerService:
    """The service of `request`'s app (a coroutine: a sync dependency costs a thread hop)."""
    ref: ServiceRef[RunnerService] = request.app.state.runner
    return ref()


RunnerDep = Annotated[RunnerService, Depends(runner_service)]
# Operators only: anybody else gets the 404 of a route that does not exist for them.
ops_viewer = require_grant("ops", "viewer")
