"""The dependencies of lesson-fix's routes, as typed aliases (the FastAPI full-stack template's
`api/deps.py` idiom): a route names what it needs, `service: LessonFixServiceDep`.

The service is the one the lifespan builds, reached through the app (`app.state.lessons`, the
`ServiceRef` main.py sets): 503 `unavailable` before it is built. The routes take no lesson id
(the editor sends the whole lesson), so they are guarded by the platform-wide `lessons` grant:
`viewer` to run the checks, `contributor` (a lesson author) to ask for a fix; 404 without it.
"""

from typing import Annotated

from fastapi import Depends, Request

from quiz_lesson_fix.service import LessonFixService
from quiz_servicekit.app import ServiceRef
from quiz_servicekit.auth import Access, require_grant

LESSONS = "lessons"
"""The grant's resource: `{"lessons": {"role": "viewer" | "contributor"}}` in the token."""


async def lesson_service(request: Request) -> LessonFixService:
    """The service of `request`'s app (a coroutine: a sync dependency costs a thread hop)."""
    ref: ServiceRef[LessonFixService] = request.app.state.lessons
    return ref()


LessonFixServiceDep = Annotated[LessonFixService, Depends(lesson_service)]
LessonsViewer = Annotated[Access, Depends(require_grant(LESSONS, "viewer"))]
LessonsContributor = Annotated[Access, Depends(require_grant(LESSONS, "contributor"))]
