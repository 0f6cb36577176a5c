"""NATS endpoints of editor-assist: decode → call the service → encode."""

from __future__ import annotations

from typing import Any

from quiz_contracts import subjects
from quiz_contracts.catalog import EmptyRequest
from quiz_contracts.generate import GenerateAvailability
from quiz_editor_assist.service import GenerateService
from quiz_servicekit.app import ServiceRef
from quiz_servicekit.micro import EndpointSpec, MsgContext, endpoint


def endpoints(service: ServiceRef[GenerateService]) -> list[EndpointSpec[Any]]:
    """The micro endpoints: availability, for other services that offer the wand."""

    async def availability(_: EmptyRequest, __: MsgContext) -> GenerateAvailability:
        return await service().availability()

    return [endpoint(subjects.GENERATE_AVAILABILITY, availability)]
