"""Base model of every wire payload: strict about unknown fields on input we own."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class WireModel(BaseModel):
    """A versioned wire payload. Unknown fields are ignored so v1 can grow additively."""

    model_config = ConfigDict(extra="ignore", populate_by_name=True)
