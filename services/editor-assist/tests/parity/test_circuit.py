"""circuit parity: the platform's schema and views; the wand has none (ADR-059 §7).

Cases derived from heig-quiz `packages/qt-circuit/src/schema.test.ts` (the empty draft, the
refinements and their keys, transient and AC analyses, the grid, orientations, the Bode
envelope's defaults) and `server.ts` (the student never sees the reference, the hidden stimuli,
the tolerance, the rubric nor the grading mode).
"""

from __future__ import annotations

from typing import Any

import pytest

from quiz_contracts.questions import question_type, read_draft
from quiz_contracts.questions.circuit import empty_circuit_draft

CIRCUIT = question_type("circuit")
BASE = {**empty_circuit_draft(), "prompt": "Draw it."}
SIMULATION = {"mode": "simulation", "tolerance": 0.05, "rubric": ""}
R1 = {"id": "c1", "kind": "R", "x": 200, "y": 100, "name": "R1", "value": "1k"}
C1 = {"id": "c2", "kind": "C", "x": 400, "y": 200, "m": [0, 1, -1, 0], "name": "C1", "value": "1n"}
RC = {
    "components": [R1, C1],
    "wires": [
        {
            "id": "w1",
            "a": {"kind": "port", "port": "in+"},
            "b": {"kind": "pin", "c": "c1", "p": 0},
            "points": [[0, 100], [160, 100]],
        },
        {
            "id": "w2",
            "a": {"kind": "pin", "c": "c1", "p": 1},
            "b": {"kind": "port", "port": "out+"},
            "points": [[240, 100], [800, 100]],
        },
    ],
}


def stimulus(**over: Any) -> dict[str, Any]:
    return {"name": "s", "source": {"kind": "dc", "volts": 0}, "load": {"kind": "open"}, **over}


def keys(config: dict[str, Any]) -> list[tuple[str, str]]:
    return [(p.path, p.message) for p in read_draft("circuit", config).problems]


def test_the_empty_draft_parses_once_it_has_a_prompt() -> None:
    draft = empty_circuit_draft()
    assert (draft["prompt"], draft["stimuli"], draft["reference"]) == ("", [], None)
    assert read_draft("circuit", BASE).valid


@pytest.mark.parametrize(
    ("over", "found"),
    [
        (
            {"stimuli": [stimulus()], "grading": SIMULATION},
            ("reference", "circuit.simulation_needs_reference"),
        ),
        (
            {"reference": RC, "grading": SIMULATION},
            ("stimuli", "circuit.simulation_needs_stimulus"),
        ),
        ({"showExpected": True}, ("showExpected", "circuit.expected_needs_reference")),
        (
            {
                "stimuli": [
                    stimulus(analysis={"kind": "tran", "stopMs": 1, "skipMs": 2, "points": 500})
                ]
            },
            ("stimuli.0.analysis.skipMs", "circuit.skip_after_stop"),
        ),
        (
            {
                "stimuli": [
                    stimulus(
                        source={"kind": "sine", "amplitude": 1, "frequencyHz": 1000},
                        analysis={"kind": "ac", "fStartHz": 10, "fStopHz": 1e5},
                    )
                ]
            },
            ("stimuli.0.source", "circuit.ac_needs_dc_source"),
        ),
        (
            {"stimuli": [stimulus(analysis={"kind": "ac", "fStartHz": 1e4, "fStopHz": 1e4})]},
            ("stimuli.0.analysis.fStartHz", "circuit.ac_start_after_stop"),
        ),
        (
            {
                "stimuli": [
                    stimulus(
                        analysis={
                            "kind": "ac",
                            "fStartHz": 0.01,
                            "fStopHz": 1e9,
                            "pointsPerDecade": 200,
                        }
                    )
                ]
            },
            ("stimuli.0.analysis.pointsPerDecade", "circuit.ac_too_many_points"),
        ),
    ],
)
def test_refinements(over: dict[str, Any], found: tuple[str, str]) -> None:
    assert found in keys({**BASE, **over})


def test_analyses_and_the_bode_envelope() -> None:
    old = read_draft(
        "circuit",
        {**BASE, "stimuli": [stimulus(analysis={"stopMs": 2, "skipMs": 1, "points": 100})]},
    )
    assert old.config is not None
    assert old.config.model_dump(by_alias=True)["stimuli"][0]["analysis"] == {
        "kind": "tran",
        "stopMs": 2,
        "skipMs": 1,
        "points": 100,
    }
    ac = read_draft(
        "circuit",
        {**BASE, "stimuli": [stimulus(analysis={"kind": "ac", "fStartHz": 10, "fStopHz": 1e5})]},
    )
    assert ac.config is not None
    assert ac.config.model_dump(by_alias=True)["stimuli"][0]["analysis"]["pointsPerDecade"] == 20
    for bad in (
        {"fStartHz": 0.001, "fStopHz": 10},
        {"fStartHz": 1, "fStopHz": 2e9},
        {"fStartHz": 1, "fStopHz": 10, "pointsPerDecade": 4},
    ):
        assert not read_draft(
            "circuit", {**BASE, "stimuli": [stimulus(analysis={"kind": "ac", **bad})]}
        ).valid
    nine_decades = stimulus(
        analysis={"kind": "ac", "fStartHz": 1, "fStopHz": 1e9, "pointsPerDecade": 200}
    )
    assert read_draft("circuit", {**BASE, "stimuli": [nine_decades]}).valid
    older = read_draft(
        "circuit", {**BASE, "grading": {"mode": "manual", "tolerance": 0.05, "rubric": ""}}
    ).config
    assert older is not None
    assert older.model_dump(by_alias=True)["grading"]["bode"] == {
        "magDb": 1,
        "floorDb": 60,
        "phaseDeg": 10,
    }


def test_the_schematic_grid_and_orientation() -> None:
    assert read_draft("circuit", {**BASE, "reference": RC}).valid
    off_grid = {**RC, "wires": [{**RC["wires"][0], "points": [[0, 100], [30, 100]]}]}
    assert not read_draft("circuit", {**BASE, "reference": off_grid}).valid
    turned = {**RC, "components": [{**RC["components"][0], "m": [1, 1, 1, 1]}]}
    assert ("reference.components.0.m", "circuit.orientation") in keys(
        {**BASE, "reference": turned}
    )


def test_views() -> None:
    config = {
        **BASE,
        "reference": RC,
        "grading": {**SIMULATION, "rubric": "secret rubric"},
        "stimuli": [
            stimulus(name="shown", points=2),
            stimulus(name="unseen stimulus", visible=False, points=3),
        ],
    }
    student = CIRCUIT.to_student(config)
    assert [s["name"] for s in student["visibleStimuli"]] == ["shown"]
    assert (student["hiddenCount"], student["hiddenPoints"], student["canSimulate"]) == (1, 3, True)
    assert (
        "unseen" not in str(student) and "secret" not in str(student) and "R1" not in str(student)
    )
    assert set(student) == {
        "prompt", "palette", "supplies", "commonGround", "visibleStimuli", "hiddenCount",
        "hiddenPoints", "canSimulate", "showExpected", "simulationsPerMinute",
    }  # fmt: skip
    assert student["supplies"] == {"vcc": None, "vee": None}
    solution = CIRCUIT.to_solution(config)
    assert solution is not None and list(solution) == ["reference"]
    assert solution["reference"]["components"][1]["m"] == [0, 1, -1, 0]


@pytest.mark.integration
async def test_the_wand_is_unsupported_through_http(wand: Any) -> None:
    r = await wand.generate("circuit", BASE)
    assert (r.status_code, r.json()["code"]) == (422, "generate_unsupported")
