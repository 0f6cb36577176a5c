"""NATS endpoints of editor-assist: decode → call the service → encode."""

from __future__ import annotations

from quiz_contracts import subjects
from quiz_contracts.base import WireModel
from quiz_contracts.generate import GenerateAvailability
from quiz_editor_assist.service import GenerateService
from quiz_servicekit.micro import EndpointSpec, MsgContext


class AvailabilityQuery(WireModel):
    """`generate.v1.availability` takes no field."""


def endpoints(service: GenerateService) -> list[EndpointSpec[AvailabilityQuery]]:
    """The micro endpoints: availability, for other services that offer the wand."""

    async def availability(_: AvailabilityQuery, __: MsgContext) -> GenerateAvailability:
        return await service.availability()

    return [
        EndpointSpec(
            "availability", subjects.GENERATE_AVAILABILITY, AvailabilityQuery, availability
        )
    ]
