"""circuit: the student draws a logic circuit whose outputs follow a truth table.

`expected` is the key: for each output, its bits over every input combination, in binary order
of the inputs as listed (inputs A,B: 00, 01, 10, 11). `reference` is the teacher's own drawing
of a solution, also the grader's. A drawing is nodes (gates, inputs, outputs) and wires.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import Field, model_validator

from quiz_contracts.base import WireModel
from quiz_contracts.questions.common import ItemId, QuestionConfig, unique_ids

Gate = Literal["and", "or", "not", "xor", "nand", "nor"]
_NAME = r"^[A-Za-z][A-Za-z0-9_]{0,15}$"
CIRCUIT_MAX_INPUTS = 6


class CircuitNode(WireModel):
    """A gate or a terminal at a position of the drawing."""

    id: ItemId
    kind: Literal["input", "output", "gate"]
    gate: Gate | None = None
    label: str = Field(default="", max_length=100)
    x: float = 0.0
    y: float = 0.0


class CircuitWire(WireModel):
    """A wire from one node's output to another node's input."""

    id: ItemId
    source: ItemId
    target: ItemId


class CircuitDrawing(WireModel):
    """A drawn circuit."""

    nodes: list[CircuitNode] = Field(default_factory=list, max_length=200)
    wires: list[CircuitWire] = Field(default_factory=list, max_length=400)

    @model_validator(mode="after")
    def _wires_join_nodes(self) -> CircuitDrawing:
        unique_ids(self.nodes, "nodes")
        unique_ids(self.wires, "wires")
        known = {n.id for n in self.nodes}
        if any(w.source not in known or w.target not in known for w in self.wires):
            raise ValueError("wires: a wire joins a node that does not exist")
        return self


class CircuitConfig(QuestionConfig):
    """A logic-circuit question."""

    inputs: list[str] = Field(min_length=1, max_length=CIRCUIT_MAX_INPUTS)
    outputs: list[str] = Field(min_length=1, max_length=4)
    gates: list[Gate] = Field(min_length=1, description="The gates the student may use.")
    expected: dict[str, str] = Field(description="Output name → bits over 2^len(inputs) rows.")
    reference: CircuitDrawing | None = None

    @model_validator(mode="after")
    def _table_complete(self) -> CircuitConfig:
        names = [*self.inputs, *self.outputs]
        if any(not re.match(_NAME, n) for n in names) or len(set(names)) != len(names):
            raise ValueError("inputs/outputs: names are distinct identifiers")
        rows = 2 ** len(self.inputs)
        if set(self.expected) != set(self.outputs):
            raise ValueError("expected: one row of bits per output")
        if any(not re.fullmatch(rf"[01]{{{rows}}}", bits) for bits in self.expected.values()):
            raise ValueError(f"expected: {rows} bits of 0 and 1 per output")
        return self


def circuit_to_student(config: CircuitConfig) -> dict[str, Any]:
    """The statement, the terminals and the gates allowed."""
    return {
        "prompt": config.prompt,
        "inputs": list(config.inputs),
        "outputs": list(config.outputs),
        "gates": list(config.gates),
    }


def circuit_to_solution(config: CircuitConfig) -> dict[str, Any]:
    """The truth table and the teacher's drawing."""
    return {
        "expected": dict(config.expected),
        "reference": config.reference.model_dump() if config.reference else None,
    }
