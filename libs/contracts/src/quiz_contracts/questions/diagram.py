"""diagram: the student draws a diagram of the notation the teacher chose; graded by hand.

heig-quiz `packages/qt-diagram/src/schema.ts` (DIAGRAM_CONFIG_VERSION 1), `server.ts` and the
scene of `packages/diagram/src/scene.ts` and `kinds.ts`. A scene is elements (`nodes`, each of a
type `t`) and `links`; it is a strict object (an unknown key is refused) and bounded as a whole
(50,000 characters of text, no control character in a name). The reference scene is the key.

Draft:

    {"configVersion": 1, "prompt": "Dessinez le diagramme de classes d'une bibliothèque.",
     "kind": "class", "reference": {"nodes": [], "links": []}, "rubric": ""}
"""

from __future__ import annotations

import unicodedata
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field, model_validator

from quiz_contracts.questions.common import (
    PROMPT_MAX,
    DraftBudget,
    Issue,
    PlatformModel,
    Prompt,
    StrictPlatformModel,
    StudentView,
    Utf16,
    int_in,
    refuse,
    utf16_len,
)

DIAGRAM_CONFIG_VERSION = 1
DIAGRAM_KINDS = ("class", "usecase", "state", "er", "flow", "automaton", "graph", "free")
COORD_LIMIT = 20_000
MAX_NODES = 200
MAX_LINKS = 160
MAX_VIA = 16
NAME_MAX = 120
LABEL_MAX = 40
BODY_LINES_MAX = 40
BODY_LINE_MAX = 200
MAX_INK_POINTS = 4_000
MAX_TEXT = 50_000
RUBRIC_MAX = 20_000

NodeType = Literal[
    "class", "actor", "usecase", "system", "initial", "state", "final", "entity", "terminal",
    "action", "decision", "astate", "vertex", "stroke", "line", "rect", "square", "circle",
    "ellipse", "triangle",
]  # fmt: skip
LinkType = Literal[
    "assoc", "nav", "inh", "impl", "dep", "agg", "comp", "incl", "ext", "strans", "erel", "flow",
    "trans", "edge", "arc",
]  # fmt: skip
DiagramKind = Literal["class", "usecase", "state", "er", "flow", "automaton", "graph", "free"]

# No control, format or separator character: a new line or a bidi override in a name would let
# a scene forge the structure of the text form a grader reads.
_FORBIDDEN_CATEGORIES = {"Cc", "Cf", "Zl", "Zp"}


def _one_line(text: str) -> str:
    if any(unicodedata.category(ch) in _FORBIDDEN_CATEGORIES for ch in text):
        raise ValueError("no control or format character")
    return text


DiagramId = Annotated[str, Utf16(pattern=r"^[a-z0-9]{4,40}$")]
Coord = Annotated[int, int_in(-COORD_LIMIT, COORD_LIMIT)]
Size = Annotated[int, int_in(1, COORD_LIMIT)]
Offset = Annotated[int, int_in(0, COORD_LIMIT)]
Name = Annotated[str, Utf16(0, NAME_MAX), AfterValidator(_one_line)]
Label = Annotated[str, Utf16(0, LABEL_MAX), AfterValidator(_one_line)]
BodyLine = Annotated[str, Utf16(0, BODY_LINE_MAX), AfterValidator(_one_line)]


class ScenePoint(StrictPlatformModel):
    """A point on the canvas."""

    x: Coord
    y: Coord


class DiagramNode(StrictPlatformModel):
    """An element; which optional fields it may carry depends on its type `t`."""

    id: DiagramId
    t: NodeType
    x: Coord
    y: Coord
    name: Name | None = None
    stereo: Name | None = None
    abstract: bool | None = None
    body: Annotated[list[BodyLine], Field(max_length=BODY_LINES_MAX)] | None = None
    w: Size | None = None
    h: Size | None = None
    initial: bool | None = None
    accept: bool | None = None
    pts: (
        Annotated[
            list[Annotated[tuple[Offset, Offset], Field(strict=False)]],
            Field(min_length=2, max_length=MAX_INK_POINTS),
        ]
        | None
    ) = None

    def fields_fit(self) -> bool:
        """A field only on the types that use it (`fieldsFit`, scene.ts)."""
        t = self.t
        return (
            ((self.stereo is None and self.abstract is None) or t == "class")
            and (self.body is None or t in ("class", "entity", "state"))
            and ((self.pts is None) == (t not in ("stroke", "line")))
            and ((self.initial is None and self.accept is None) or t == "astate")
        )


class DiagramLink(StrictPlatformModel):
    """A link from element `a` to element `b`, maybe through elbows."""

    id: DiagramId
    type: LinkType
    a: DiagramId
    b: DiagramId
    via: Annotated[list[ScenePoint], Field(max_length=MAX_VIA)] | None = None
    name: Name | None = None
    ma: Label | None = None
    mb: Label | None = None


class Scene(StrictPlatformModel):
    """A diagram: elements and links, bounded as a whole."""

    nodes: Annotated[list[DiagramNode], Field(max_length=MAX_NODES)]
    links: Annotated[list[DiagramLink], Field(max_length=MAX_LINKS)]

    @model_validator(mode="after")
    def _scene_rules(self) -> Scene:
        issues: list[Issue] = []
        ids = [n.id for n in self.nodes] + [link.id for link in self.links]
        if len(set(ids)) != len(ids):
            issues.append(Issue((), "diagram.duplicate_id"))
        nodes = {n.id for n in self.nodes}
        if any(link.a not in nodes or link.b not in nodes for link in self.links):
            issues.append(Issue((), "diagram.dangling_link"))
        if sum(len(n.pts or []) for n in self.nodes) > MAX_INK_POINTS:
            issues.append(Issue((), "diagram.too_much_ink"))
        if text_length(self) > MAX_TEXT:
            issues.append(Issue((), "diagram.too_much_text"))
        if not all(n.fields_fit() for n in self.nodes):
            issues.append(Issue((), "diagram.field_type"))
        refuse(issues)
        return self


def text_length(scene: Scene) -> int:
    """Characters of every text of a scene: names, stereotypes, bodies, labels."""
    total = 0
    for node in scene.nodes:
        total += utf16_len(node.name or "") + utf16_len(node.stereo or "")
        total += sum(map(utf16_len, node.body or []))
    for link in scene.links:
        total += utf16_len(link.name or "") + utf16_len(link.ma or "") + utf16_len(link.mb or "")
    return total


class DiagramConfig(PlatformModel):
    """A diagram question: the notation, the reference (the key), a starter, a rubric."""

    config_version: Literal[1]
    prompt: Prompt
    kind: DiagramKind
    reference: Scene
    starter: Scene | None = None
    rubric: Annotated[str, Utf16(0, RUBRIC_MAX)] = ""


def empty_diagram_draft() -> dict[str, Any]:
    """`emptyDiagramDraft()`: a class diagram with an empty reference."""
    return {
        "configVersion": DIAGRAM_CONFIG_VERSION,
        "prompt": "",
        "kind": "class",
        "reference": {"nodes": [], "links": []},
        "rubric": "",
    }


def diagram_to_student(config: DiagramConfig, view: StudentView) -> dict[str, Any]:
    """`{prompt, kind, starter?}`: the reference and the rubric never leave."""
    student: dict[str, Any] = {"prompt": config.prompt, "kind": config.kind}
    if config.starter is not None:
        student["starter"] = config.starter.wire()
    return student


def diagram_to_solution(config: DiagramConfig) -> dict[str, Any]:
    """`{reference, rubric}`."""
    return {"reference": config.reference.wire(), "rubric": config.rubric}


DIAGRAM_BUDGET = DraftBudget(
    text=PROMPT_MAX + RUBRIC_MAX + 2 * (MAX_TEXT + (MAX_NODES + MAX_LINKS) * 96),
    values=64 + 2 * (MAX_NODES * 16 + MAX_LINKS * (12 + 3 * MAX_VIA) + 2 * MAX_INK_POINTS * 3),
)
