"""diagram: the student places labels on the zones of a picture (an `asset:` image).

Zones are rectangles in percent of the picture. Each zone's `label` is the key; the labels, and
the distractors, reach the student as one bank sorted by text, so the bank says nothing of which
zone takes which.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field, model_validator

from quiz_contracts.base import WireModel
from quiz_contracts.questions.common import (
    ASSET_LINK,
    ItemId,
    QuestionConfig,
    normalized_text,
    unique_ids,
)

Percent = float


class DiagramZone(WireModel):
    """A zone of the picture and the label it takes."""

    id: ItemId
    x: Percent = Field(ge=0, le=100)
    y: Percent = Field(ge=0, le=100)
    width: Percent = Field(gt=0, le=100)
    height: Percent = Field(gt=0, le=100)
    label: str = Field(min_length=1, max_length=200)


class DiagramConfig(QuestionConfig):
    """A labelling question on an image."""

    image: str = Field(description="An asset: link, e.g. 'asset:heart.png'.")
    zones: list[DiagramZone] = Field(min_length=1, max_length=30)
    distractors: list[str] = Field(default_factory=list, max_length=30)

    @model_validator(mode="after")
    def _image_and_labels(self) -> DiagramConfig:
        if not ASSET_LINK.fullmatch(self.image):
            raise ValueError("image: an asset: link")
        unique_ids(self.zones, "zones")
        labels = [normalized_text(t) for t in [*(z.label for z in self.zones), *self.distractors]]
        if any(not t for t in labels) or len(set(labels)) != len(labels):
            raise ValueError("labels: every label and distractor is distinct and non-empty")
        return self


def diagram_to_student(config: DiagramConfig) -> dict[str, Any]:
    """The image, the zones without labels and the sorted bank of labels."""
    bank = sorted([*(z.label for z in config.zones), *config.distractors], key=normalized_text)
    return {
        "prompt": config.prompt,
        "image": config.image,
        "zones": [
            {"id": z.id, "x": z.x, "y": z.y, "width": z.width, "height": z.height}
            for z in config.zones
        ],
        "labels": bank,
    }


def diagram_to_solution(config: DiagramConfig) -> dict[str, Any]:
    """The label of each zone."""
    return {"labels": {z.id: z.label for z in config.zones}}
