"""circuit: a two-port box the student fills with components and wires (a schematic).

heig-quiz `packages/qt-circuit/src/schema.ts` (CIRCUIT_CONFIG_VERSION 1), `library.ts` and
`server.ts`. The box has four ports (`in+`, `in-`, `out+`, `out-`); the teacher sets the
palette, the supplies, the stimuli (source, load, analysis) and how it is graded (`manual`,
`simulation` against the reference under ngspice — a transient compared by RMS distance, or an
AC sweep by a Bode envelope — or `llm`). The reference schematic is the key. The netlist is
never stored: it is rebuilt from the schematic server-side.

Draft:

    {"configVersion": 1, "prompt": "Réalisez un filtre passe-bas RC.", "stimuli": [],
     "reference": null, "grading": {"mode": "manual", "tolerance": 0.05,
     "bode": {"magDb": 1, "floorDb": 60, "phaseDeg": 10}, "rubric": ""}}
"""

from __future__ import annotations

import math
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BeforeValidator, Discriminator, Field, Tag, model_validator

from quiz_contracts.questions.common import (
    PROMPT_MAX,
    DraftBudget,
    Issue,
    Number,
    PlatformModel,
    Prompt,
    StudentView,
    Utf16,
    int_in,
    refuse,
)

CIRCUIT_CONFIG_VERSION = 1
GRID = 20
BOX_WIDTH = 40 * GRID
BOX_HEIGHT = 25 * GRID
PORT_IDS = ("in+", "in-", "out+", "out-")
COMPONENT_KINDS = (
    "R", "C", "L", "D", "DS", "DZ", "NPN", "PNP", "NMOS", "PMOS", "NMOSD", "PMOSD", "OPAMP",
    "GND", "VCC", "VEE",
)  # fmt: skip
# A fresh question offers every kind but the supplies, which the harness decides.
DEFAULT_PALETTE = tuple(k for k in COMPONENT_KINDS if k not in ("VCC", "VEE"))
MAX_COMPONENTS = 40
MAX_WIRES = 80
MAX_STIMULI = 4
RUBRIC_MAX = 8_000

ComponentKind = Literal[
    "R", "C", "L", "D", "DS", "DZ", "NPN", "PNP", "NMOS", "PMOS", "NMOSD", "PMOSD", "OPAMP",
    "GND", "VCC", "VEE",
]  # fmt: skip


def _on_grid(value: int) -> int:
    if value % GRID:
        raise ValueError(f"a coordinate is a multiple of {GRID}")
    return value


X = Annotated[int, int_in(0, BOX_WIDTH), AfterValidator(_on_grid)]
Y = Annotated[int, int_in(0, BOX_HEIGHT), AfterValidator(_on_grid)]
Unit = Literal[-1, 0, 1]
ComponentId = Annotated[str, Utf16(pattern=r"^c[0-9]{1,6}$")]


def _orientation(m: tuple[int, int, int, int]) -> tuple[int, int, int, int]:
    # One of the eight rotations and reflections of the grid: determinant ±1.
    if abs(m[0] * m[3] - m[1] * m[2]) != 1:
        refuse([Issue((), "circuit.orientation")])
    return m


# JSON arrays: a tuple field reads a list (strict mode alone would want a Python tuple).
Orientation = Annotated[
    tuple[Unit, Unit, Unit, Unit], Field(strict=False), AfterValidator(_orientation)
]


def _tag(value: Any) -> str | None:
    # "~" tags are dropped from error paths by read_draft (zod's paths carry no tag); a model
    # (when serializing) carries its kind as an attribute.
    kind = value.get("kind") if isinstance(value, dict) else getattr(value, "kind", None)
    return "~" + kind if isinstance(kind, str) else None


class SchematicComponent(PlatformModel):
    """A placed component: kind, grid position, orientation, designator and value."""

    id: ComponentId
    kind: ComponentKind
    x: X
    y: Y
    m: Orientation = (1, 0, 0, 1)
    name: Annotated[str, Utf16(1, 12, r"^[A-Za-z][A-Za-z0-9_+-]*$")]
    value: Annotated[str, Utf16(0, 24)] = ""


class PinEnd(PlatformModel):
    """A wire end on a component's pin."""

    kind: Literal["pin"]
    c: ComponentId
    p: Annotated[int, int_in(0, 7)]


class PortEnd(PlatformModel):
    """A wire end on one of the four ports."""

    kind: Literal["port"]
    port: Literal["in+", "in-", "out+", "out-"]


class FreeEnd(PlatformModel):
    """A free wire end: a T-junction on another wire, or a dangling end."""

    kind: Literal["free"]
    x: X
    y: Y


WireEnd = Annotated[
    Annotated[PinEnd, Tag("~pin")]
    | Annotated[PortEnd, Tag("~port")]
    | Annotated[FreeEnd, Tag("~free")],
    Discriminator(_tag),
]


class Via(PlatformModel):
    """A waypoint the user placed."""

    x: X
    y: Y


class Wire(PlatformModel):
    """A wire and the orthogonal polyline the editor routed (the geometry of record)."""

    id: Annotated[str, Utf16(pattern=r"^w[0-9]{1,6}$")]
    a: WireEnd
    b: WireEnd
    via: Annotated[list[Via], Field(max_length=16)] = []
    points: Annotated[
        list[Annotated[tuple[X, Y], Field(strict=False)]], Field(min_length=2, max_length=64)
    ]


class Schematic(PlatformModel):
    """What a student (or the teacher's reference) draws."""

    components: Annotated[list[SchematicComponent], Field(max_length=MAX_COMPONENTS)]
    wires: Annotated[list[Wire], Field(max_length=MAX_WIRES)]


Volts = Annotated[float, Number(-100, 100)]
Hertz = Annotated[float, Number(0.01, 1e7)]


class DcSource(PlatformModel):
    """A constant voltage."""

    kind: Literal["dc"]
    volts: Volts


class SineSource(PlatformModel):
    """A sine wave."""

    kind: Literal["sine"]
    amplitude: Annotated[float, Number(0, 100)]
    frequency_hz: Hertz
    offset: Volts = 0


class PulseSource(PlatformModel):
    """A square wave."""

    kind: Literal["pulse"]
    low: Volts
    high: Volts
    frequency_hz: Hertz
    duty_cycle: Annotated[float, Number(0.01, 0.99)] = 0.5


class StepSource(PlatformModel):
    """A step at `atMs` milliseconds."""

    kind: Literal["step"]
    from_: Volts = Field(alias="from")
    to: Volts
    at_ms: Annotated[float, Number(0, 1000)]


Source = Annotated[
    Annotated[DcSource, Tag("~dc")]
    | Annotated[SineSource, Tag("~sine")]
    | Annotated[PulseSource, Tag("~pulse")]
    | Annotated[StepSource, Tag("~step")],
    Discriminator(_tag),
]


class OpenLoad(PlatformModel):
    """Nothing between `out+` and `out-`."""

    kind: Literal["open"]


class ResistorLoad(PlatformModel):
    """A resistor load."""

    kind: Literal["resistor"]
    ohms: Annotated[float, Number(1e-3, 1e12)]


class CapacitorLoad(PlatformModel):
    """A capacitor load."""

    kind: Literal["capacitor"]
    farads: Annotated[float, Number(1e-15, 1)]


Load = Annotated[
    Annotated[OpenLoad, Tag("~open")]
    | Annotated[ResistorLoad, Tag("~resistor")]
    | Annotated[CapacitorLoad, Tag("~capacitor")],
    Discriminator(_tag),
]


class TranAnalysis(PlatformModel):
    """A transient: the time-domain window a waveform is compared over."""

    kind: Literal["tran"]
    stop_ms: Annotated[float, Number(0.001, 1000)] = 5
    skip_ms: Annotated[float, Number(0, 1000)] = 0
    points: Annotated[int, int_in(50, 2000)] = 500


class AcAnalysis(PlatformModel):
    """A small-signal AC sweep (ADR-040): a Bode plot around the DC bias of a `dc` source."""

    kind: Literal["ac"]
    f_start_hz: Annotated[float, Number(0.01, 1e9)]
    f_stop_hz: Annotated[float, Number(0.01, 1e9)]
    points_per_decade: Annotated[int, int_in(5, 200)] = 20


# The ceiling of ADR-019 on one simulation, which an AC sweep observes too.
MAX_ANALYSIS_POINTS = 2000


def ac_point_count(analysis: AcAnalysis) -> int:
    """How many frequencies `.ac dec` produces: `pointsPerDecade` a decade, both ends included."""
    decades = math.log10(analysis.f_stop_hz / analysis.f_start_hz)
    return math.floor(decades * analysis.points_per_decade + 1e-9) + 1


def _transient_by_default(value: Any) -> Any:
    # A config written before the AC sweep has no `kind`: every one of them is a transient.
    if isinstance(value, dict) and "kind" not in value:
        return {**value, "kind": "tran"}
    return value


def _default_analysis() -> TranAnalysis:
    return TranAnalysis(kind="tran")


Analysis = Annotated[
    Annotated[TranAnalysis, Tag("~tran")] | Annotated[AcAnalysis, Tag("~ac")],
    Discriminator(_tag),
    BeforeValidator(_transient_by_default),
]


class Stimulus(PlatformModel):
    """One excitation of the box, like a test case: named, weighted, maybe hidden."""

    name: Annotated[str, Utf16(1, 40)]
    source: Source
    source_ohms: Annotated[float, Number(0, 1e9)] = 0
    load: Load
    analysis: Analysis = Field(default_factory=_default_analysis)
    points: Annotated[float, Number(0, 100)] = 1
    visible: bool = True

    @model_validator(mode="after")
    def _analysis_rules(self) -> Stimulus:
        a = self.analysis
        issues: list[Issue] = []
        if isinstance(a, TranAnalysis):
            if a.skip_ms >= a.stop_ms:
                issues.append(Issue(("analysis", "skipMs"), "circuit.skip_after_stop"))
        else:
            if not isinstance(self.source, DcSource):
                issues.append(Issue(("source",), "circuit.ac_needs_dc_source"))
            if a.f_start_hz >= a.f_stop_hz:
                issues.append(Issue(("analysis", "fStartHz"), "circuit.ac_start_after_stop"))
            elif ac_point_count(a) > MAX_ANALYSIS_POINTS:
                issues.append(Issue(("analysis", "pointsPerDecade"), "circuit.ac_too_many_points"))
        refuse(issues)
        return self


class Supplies(PlatformModel):
    """The rails the palette offers; null hides the symbol."""

    vcc: Annotated[float, Number(0, 100)] | None = None
    vee: Annotated[float, Number(-100, 0)] | None = None


class CircuitPalette(PlatformModel):
    """The kinds the student may place and how many non-terminal components."""

    kinds: Annotated[list[ComponentKind], Field(min_length=1, max_length=len(COMPONENT_KINDS))]
    max_components: Annotated[int, int_in(1, 30)] = 10


class BodeTolerance(PlatformModel):
    """The envelope an AC stimulus is judged by: in the grading block, never sent to students."""

    mag_db: Annotated[float, Number(0.01, 40)] = 1
    floor_db: Annotated[float, Number(1, 200)] = 60
    phase_deg: Annotated[float, Number(0.1, 180)] | None = 10


class Grading(PlatformModel):
    """How the answer is graded: the simulation's tolerances, the grader's rubric."""

    mode: Literal["manual", "simulation", "llm"] = "manual"
    tolerance: Annotated[float, Number(0.001, 1)] = 0.05
    bode: BodeTolerance = Field(default_factory=BodeTolerance)
    rubric: Annotated[str, Utf16(0, RUBRIC_MAX)] = ""


def _default_palette() -> CircuitPalette:
    return CircuitPalette.model_validate({"kinds": list(DEFAULT_PALETTE), "maxComponents": 10})


class CircuitConfig(PlatformModel):
    """A circuit question."""

    config_version: Literal[1]
    prompt: Prompt
    palette: CircuitPalette = Field(default_factory=_default_palette)
    supplies: Supplies = Field(default_factory=Supplies)
    common_ground: bool = True
    stimuli: Annotated[list[Stimulus], Field(max_length=MAX_STIMULI)] = []
    reference: Schematic | None = None
    grading: Grading = Field(default_factory=Grading)
    show_expected: bool = False
    simulations_per_minute: Annotated[int, int_in(1, 30)] = 10

    @model_validator(mode="after")
    def _rules(self) -> CircuitConfig:
        issues = []
        if self.grading.mode == "simulation" and self.reference is None:
            issues.append(Issue(("reference",), "circuit.simulation_needs_reference"))
        if self.grading.mode == "simulation" and not self.stimuli:
            issues.append(Issue(("stimuli",), "circuit.simulation_needs_stimulus"))
        if self.show_expected and self.reference is None:
            issues.append(Issue(("showExpected",), "circuit.expected_needs_reference"))
        refuse(issues)
        return self


def empty_circuit_draft() -> dict[str, Any]:
    """`emptyCircuitConfig()`."""
    return {
        "configVersion": CIRCUIT_CONFIG_VERSION,
        "prompt": "",
        "palette": {"kinds": list(DEFAULT_PALETTE), "maxComponents": 10},
        "supplies": {"vcc": None, "vee": None},
        "commonGround": True,
        "stimuli": [],
        "reference": None,
        "grading": {
            "mode": "manual",
            "tolerance": 0.05,
            "bode": {"magDb": 1, "floorDb": 60, "phaseDeg": 10},
            "rubric": "",
        },
        "showExpected": False,
        "simulationsPerMinute": 10,
    }


def _supplies(config: CircuitConfig) -> dict[str, Any]:
    return {"vcc": config.supplies.vcc, "vee": config.supplies.vee}


def circuit_to_student(config: CircuitConfig, view: StudentView) -> dict[str, Any]:
    """Palette, supplies, the VISIBLE stimuli; never the reference, tolerance, rubric or mode."""
    visible = [s for s in config.stimuli if s.visible]
    hidden = [s for s in config.stimuli if not s.visible]
    return {
        "prompt": config.prompt,
        "palette": config.palette.wire(),
        "supplies": _supplies(config),
        "commonGround": config.common_ground,
        "visibleStimuli": [
            {
                "name": s.name,
                "source": s.source.wire(),
                "sourceOhms": s.source_ohms,
                "load": s.load.wire(),
                "analysis": s.analysis.wire(),
                "points": s.points,
            }
            for s in visible
        ],
        "hiddenCount": len(hidden),
        "hiddenPoints": sum(s.points for s in hidden),
        "canSimulate": bool(visible),
        "showExpected": config.show_expected,
        "simulationsPerMinute": config.simulations_per_minute,
    }


def circuit_to_solution(config: CircuitConfig) -> dict[str, Any]:
    """`{reference}`: the key is the reference schematic alone (ADR-037)."""
    return {"reference": config.reference.wire() if config.reference is not None else None}


CIRCUIT_BUDGET = DraftBudget(text=PROMPT_MAX + RUBRIC_MAX + 64_000, values=16_000)
