"""A lesson written to the standard, and helpers to break it one rule at a time.

The approach is the lesson tool's own (apps/mcp/test/validate.test.js): a clean six-section
lesson must give no finding at all, so any finding after a mutation is the mutation's. The
lesson itself is ours.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from quiz_lesson_fix.domain.checks import CheckResult, validate_lesson

TIGHT_OPENS = [
    "Name something you keep in a backpack.",
    "Name a fruit that is red.",
    "Name something that makes a loud noise.",
    "Name a place where people swim.",
]
EXTENDED_OPENS = [
    "In your own words, describe what happens in this section.",
    "Which part would you most like to see? Explain your thinking.",
    "Is this something people should protect? Defend your answer.",
]

SECTIONS: list[dict[str, Any]] = [
    {
        "name": "Bees",
        "paragraphs": [
            "A honeybee colony lives in a HIVE built from wax. The workers bring back nectar, "
            "pollen, and water, and each load is stored in its own cell.",
            "The queen lays the eggs while the drones wait for a mating flight. Around the hive "
            "grow clover, heather, and lavender, which the foragers visit from dawn. A forager "
            "may travel 5 kilometres from home and finds the way back by the SUN.",
        ],
        "spelling": ["swarming", "beekeeper", "orchard", "blossom"],
        "greens": [
            ("What are the cells built from?", "wax"),
            ("Who lays the eggs?", "queen"),
            ("Who waits for a mating flight?", "drones"),
        ],
        "fill": ("How many kilometres may a forager travel from home?", "5"),
        "problem": (
            "A forager makes 12 trips of 5 kilometres. How far does she fly?",
            "60",
            ["12 x 5 = 60"],
        ),
        "oranges": [["nectar", "pollen", "water"], ["clover", "heather", "lavender"]],
        "background": ("What kind of animal is a bee?", "insect"),
    },
    {
        "name": "Bridges",
        "paragraphs": [
            "A bridge carries a road across a gap, and engineers choose between stone, steel, "
            "and timber for the deck. The oldest kind is the arch, which pushes its weight out "
            "into the banks.",
            "A suspension bridge hangs from cables strung over tall towers. Wind, rain, and "
            "traffic all make it sway a little. The longest span in the country is 1,991 "
            "metres across the STRAIT.",
        ],
        "spelling": ["engineer", "crossing", "railing", "pillars"],
        "greens": [
            ("What is the oldest kind of bridge?", "arch"),
            ("What does a suspension bridge hang from?", "cables"),
            ("What stands tall to hold the road up?", "towers"),
        ],
        "fill": ("How many metres long is the longest span?", "1991"),
        "problem": (
            "A deck has 80 planks in each of 3 rows. How many planks?",
            "240",
            ["80 x 3 = 240"],
        ),
        "oranges": [["stone", "steel", "timber"], ["wind", "rain", "traffic"]],
        "background": ("What grey material are many new bridges made of?", "concrete"),
    },
    {
        "name": "Glaciers",
        "paragraphs": [
            "A glacier is a river of ice that moves too slowly to watch. As it grinds forward "
            "it scrapes up boulders, gravel, and clay and carries them for miles. Some glaciers "
            "advance 30 metres in a single year.",
            "At the front of the glacier, blocks of ice break away and fall into the water, a "
            "process called CALVING. Seals, terns, and gulls gather where the ice ends. "
            "Underneath, meltwater runs through a TUNNEL.",
        ],
        "spelling": ["crevasse", "frozen", "snowfield", "moraine"],
        "greens": [
            ("What is a glacier a river of?", "ice"),
            ("What runs through the tunnel underneath?", "meltwater"),
            ("What breaks away at the front?", "blocks"),
        ],
        "fill": ("How many metres may a glacier advance in a year?", "30"),
        "problem": (
            "A glacier advances 30 metres a year for 5 years. How far?",
            "150",
            ["30 x 5 = 150"],
        ),
        "oranges": [["boulders", "gravel", "clay"], ["seals", "terns", "gulls"]],
        "background": ("What is a floating piece of a glacier called?", "iceberg"),
    },
    {
        "name": "Markets",
        "paragraphs": [
            "Every Saturday the square fills with stalls before the sun is up. Farmers sell "
            "apples, cheese, and bread, and the first customers arrive with baskets. Prices "
            "are written on a small BOARD.",
            "A trader may pay 12 francs a week for a pitch. By noon the crowd thins, and the "
            "sellers count their coins, notes, and tokens. Whatever is left over goes to the "
            "KITCHEN of the town shelter.",
        ],
        "spelling": ["shopping", "vendor", "bargain", "receipt"],
        "greens": [
            ("What fills the square on Saturday?", "stalls"),
            ("Who sells the food?", "farmers"),
            ("What does a trader pay for each week?", "pitch"),
        ],
        "fill": ("How many francs does a trader pay each week?", "12"),
        "problem": (
            "A trader pays 12 francs a week for 52 weeks. How much in all?",
            "624",
            ["12 x 52 = 624"],
        ),
        "oranges": [["apples", "cheese", "bread"], ["coins", "notes", "tokens"]],
        "background": ("What do we call the money of a country?", "currency"),
    },
    {
        "name": "Trains",
        "paragraphs": [
            "The first railways carried loads from the mines to the harbour. Early engines "
            "burned wood, coal, and coke to boil their water into steam. A driver and a fireman "
            "worked side by side on the FOOTPLATE.",
            "Today a fast train can reach 320 kilometres an hour. Passengers buy tickets for "
            "first, second, or standard class. The SIGNAL at each station tells the driver "
            "when the line ahead is clear.",
        ],
        "spelling": ["platform", "carriage", "timetable", "tunnels"],
        "greens": [
            ("Where did early railways carry loads from?", "mines"),
            ("What did the engines make from water?", "steam"),
            ("Who worked beside the fireman?", "driver"),
        ],
        "fill": ("How many kilometres an hour can a fast train reach?", "320"),
        "problem": (
            "A train runs at 320 kilometres an hour for 3 hours. How far?",
            "960",
            ["320 x 3 = 960"],
        ),
        "oranges": [["wood", "coal", "coke"], ["first", "second", "standard"]],
        "background": ("What is the engine at the front of a train called?", "locomotive"),
    },
    {
        "name": "Caves",
        "paragraphs": [
            "Rainwater seeps through cracks in limestone and slowly hollows out a cave. Drops "
            "that hang from the roof leave behind a STALACTITE. Inside live bats, spiders, and "
            "beetles, none of which need much light.",
            "Explorers carry a helmet, a lamp, and a rope into the dark. The deepest cave known "
            "is 2,212 metres deep. Every visitor must follow the marked path.",
        ],
        "spelling": ["darkness", "echoing", "dripping", "chamber"],
        "greens": [
            ("What rock does rainwater hollow out?", "limestone"),
            ("Where do the drops hang from?", "roof"),
            ("What must every visitor follow?", "path"),
        ],
        "fill": ("How many metres deep is the deepest cave known?", "2212"),
        "problem": (
            "Two explorers each carry 12 candles. How many candles?",
            "24",
            ["2 x 12 = 24"],
        ),
        "oranges": [["bats", "spiders", "beetles"], ["helmet", "lamp", "rope"]],
        "background": ("What do we call the remains of an old animal kept in rock?", "fossil"),
    },
]


def _items(prefix: str, texts: list[str]) -> list[dict[str, str]]:
    return [{"id": f"{prefix}{i + 1}", "text": text} for i, text in enumerate(texts)]


def build_section(number: int, spec: dict[str, Any]) -> dict[str, Any]:
    """A stored section from a spec: 2 text blocks, spelling, then the 15 questions in order."""
    sid = f"s{number}"
    blocks: list[dict[str, Any]] = [
        {"id": f"{sid}t{i + 1}", "type": "text", "text": text}
        for i, text in enumerate(spec["paragraphs"])
    ]
    blocks.append(
        {"id": f"{sid}sp", "type": "spelling", "words": _items(f"{sid}w", spec["spelling"])}
    )
    questions: list[dict[str, Any]] = []
    for prompt, answer in spec["greens"]:
        questions.append({"questionType": "single", "prompt": prompt, "answer": answer})
    prompt, answer = spec["fill"]
    questions.append({"questionType": "number", "prompt": prompt, "answer": answer, "steps": []})
    prompt, answer, steps = spec["problem"]
    questions.append(
        {
            "questionType": "number",
            "prompt": prompt,
            "answer": answer,
            "steps": _items(f"{sid}st", steps),
        }
    )
    for k, answers in enumerate(spec["oranges"]):
        questions.append(
            {
                "questionType": "multiple",
                "prompt": f"The passage names three of them: ______. Name one ({k + 1}).",
                "answers": _items(f"{sid}o{k + 1}a", answers),
            }
        )
    prompt, answer = spec["background"]
    questions.append({"questionType": "background", "prompt": prompt, "answer": answer})
    for prompt in TIGHT_OPENS + EXTENDED_OPENS:
        questions.append({"questionType": "open", "prompt": prompt})
    for qi, question in enumerate(questions):
        blocks.append({"id": f"{sid}q{qi + 1}", "type": "question", **question})
    return {"id": sid, "name": spec["name"], "blocks": blocks}


def standard_lesson() -> dict[str, Any]:
    """A fresh, independently mutable lesson written to the standard."""
    return {
        "title": "Landscapes and places",
        "sources": [{"id": "atlas", "title": "A school atlas"}],
        "sections": [build_section(i + 1, spec) for i, spec in enumerate(copy.deepcopy(SECTIONS))],
    }


def question(doc: dict[str, Any], section: int, index: int) -> dict[str, Any]:
    """The `index`-th question (0-based) of the `section`-th section (0-based)."""
    return [b for b in doc["sections"][section]["blocks"] if b["type"] == "question"][index]


def block(doc: dict[str, Any], block_id: str) -> dict[str, Any]:
    """The block with this id."""
    return next(b for s in doc["sections"] for b in s["blocks"] if b.get("id") == block_id)


def codes(findings: list[Any]) -> list[str]:
    """The codes of findings, in order."""
    return [f.code for f in findings]


def check(mutate: Any = None) -> CheckResult:
    """Validate the standard lesson after `mutate(doc)`."""
    doc = standard_lesson()
    if mutate is not None:
        mutate(doc)
    return validate_lesson(doc)


@pytest.fixture
def lesson() -> dict[str, Any]:
    """The standard lesson, fresh for each test."""
    return standard_lesson()


def set_markup(doc: dict[str, Any], block_id: str, markup: str) -> None:
    """Store a text block's markup the way the editor stores formatted text: as a document."""
    from quiz_lesson_fix.domain.text import parse_markup, to_document

    target = block(doc, block_id)
    target.pop("text", None)
    target["content"] = to_document(parse_markup(markup))


def append_text(doc: dict[str, Any], block_id: str, extra: str) -> None:
    """Add prose at the end of a plain text block."""
    block(doc, block_id)["text"] += extra
