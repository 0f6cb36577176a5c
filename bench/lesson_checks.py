"""Full lesson checks on a ~300,000-character lesson, against parsing the same lesson.

Run: `uv run python bench/lesson_checks.py [--runs 30] [--chars 300000]`.

Two generated lessons of about `--chars` characters of JSON (the fix request's limit,
MAX_FIX_DOC_CHARS): "sections" is many sections of the standard shape (2 passages, one of them
formatted with a footnote, 4 spelling words, 15 questions); "long passages" is six sections
whose passages and question lists are long, the worst case for the per-section work. Each is
checked in full (`validate_lesson`, every code) `--runs` times; the baselines, measured in the
same run on the same lesson, are `json.loads` of its JSON text and validating it with the
`Lesson` contract (what a route does before the checks). Prints p50/p90 in milliseconds and
the ratios. The target is checks p50 ≤ 100 ms.
"""

from __future__ import annotations

import argparse
import gc
import itertools
import json
import statistics
import time
from collections.abc import Callable, Iterator
from typing import Any

from quiz_contracts.lesson import MAX_FIX_DOC_CHARS, Lesson
from quiz_lesson_fix.domain.checks import validate_lesson
from quiz_lesson_fix.domain.fix import lesson_json_chars
from quiz_lesson_fix.domain.text import parse_markup, to_document

_SYLLABLES = ["ka", "lo", "mi", "ne", "ru", "sa", "ti", "vo", "ze", "pa", "do", "gu"]


def words() -> Iterator[str]:
    """Distinct made-up words of 4 syllables, so answers do not collide by accident."""
    for parts in itertools.product(_SYLLABLES, repeat=4):
        yield "".join(parts)


def standard_section(n: int, w: Iterator[str], filler: int = 1) -> dict[str, Any]:
    """A section of the default shape; `filler` repeats its passage sentences."""
    greens = [next(w) for _ in range(3)]
    lists = [[next(w) for _ in range(3)], [next(w) for _ in range(3)]]
    fill, problem = 1000 + 2 * n, 100_000 + 2 * n
    background = next(w) + "x"
    prose = " ".join(
        f"The {next(w)} watched the {next(w)} near the {next(w)} every morning."
        for _ in range(filler * 3)
    )
    first = (
        f"People speak of the {greens[0]} and the {greens[1]}. {prose} They carried "
        f"{lists[0][0]}, {lists[0][1]}, and {lists[0][2]} to the VALLEY. The trip took "
        f"{fill} steps."
    )
    second = (
        f"Later the {greens[2]} came home. Around it grew {lists[1][0]}, {lists[1][1]}, and "
        f"{lists[1][2]}, which everyone *loved*^[@atlas, p. {n}]. {prose}"
    )
    sid = f"s{n}"
    blocks: list[dict[str, Any]] = [
        {"id": f"{sid}t1", "type": "text", "text": first},
        {"id": f"{sid}t2", "type": "text", "content": to_document(parse_markup(second))},
        {
            "id": f"{sid}sp",
            "type": "spelling",
            "words": [{"id": f"{sid}w{i}", "text": next(w)} for i in range(4)],
        },
    ]
    questions: list[dict[str, Any]] = [
        {"questionType": "single", "prompt": f"Which one is number {i + 1}?", "answer": g}
        for i, g in enumerate(greens)
    ]
    questions += [
        {"questionType": "number", "prompt": "How many steps?", "answer": str(fill), "steps": []},
        {
            "questionType": "number",
            "prompt": "Twice as far?",
            "answer": str(problem),
            "steps": [{"id": f"{sid}st", "text": "work it out"}],
        },
    ]
    questions += [
        {
            "questionType": "multiple",
            "prompt": f"They had ______ ({k}). Name one.",
            "answers": [{"id": f"{sid}o{k}{i}", "text": a} for i, a in enumerate(items)],
        }
        for k, items in enumerate(lists)
    ]
    questions.append({"questionType": "background", "prompt": "What else?", "answer": background})
    questions += [
        {"questionType": "open", "prompt": f"Name something found in a room {i}."} for i in range(4)
    ]
    questions += [{"questionType": "open", "prompt": "In your own words, explain why."}] * 3
    for qi, question in enumerate(questions):
        blocks.append({"id": f"{sid}q{qi}", "type": "question", **question})
    return {"id": sid, "name": f"Part {n}", "blocks": blocks}


def lesson_of(size: int, make: Callable[[int, Iterator[str]], dict[str, Any]]) -> dict[str, Any]:
    """Sections added until the lesson's JSON reaches `size` characters (the last one dropped
    if it went over)."""
    doc: dict[str, Any] = {
        "title": "Bench",
        "sources": [{"id": "atlas", "title": "Atlas"}],
        "sections": [],
    }
    w = words()
    while lesson_json_chars(doc) < size:
        doc["sections"].append(make(len(doc["sections"]) + 1, w))
    if lesson_json_chars(doc) > size and len(doc["sections"]) > 1:
        doc["sections"].pop()
    return doc


def long_passages(size: int) -> dict[str, Any]:
    """Six sections whose passages carry most of the characters."""
    w = words()
    filler = 1
    while True:
        doc = {
            "title": "Bench",
            "sources": [{"id": "atlas", "title": "Atlas"}],
            "sections": [standard_section(n + 1, w, filler) for n in range(6)],
        }
        if lesson_json_chars(doc) >= size * 0.95:
            return doc
        filler = max(filler + 1, int(filler * size / lesson_json_chars(doc)))
        w = words()


def timed(fn: Callable[[], object], runs: int) -> tuple[list[float], list[float]]:
    """Wall and CPU milliseconds of each of `runs` calls (garbage collection off while timing).

    CPU time is this process's: on a shared machine it moves less than the wall time.
    """
    fn()  # warm: the regexes, the character tables
    wall, cpu = [], []
    gc.disable()
    try:
        for _ in range(runs):
            started, started_cpu = time.perf_counter(), time.process_time()
            fn()
            wall.append((time.perf_counter() - started) * 1000)
            cpu.append((time.process_time() - started_cpu) * 1000)
    finally:
        gc.enable()
    return wall, cpu


def p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * len(ordered)) - 1))]


def cell(wall: list[float], cpu: float) -> str:
    """Wall p50 / p90 and CPU p50."""
    return f"{statistics.median(wall):>6.1f} / {p(wall, 0.9):>6.1f} {cpu:>6.1f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--chars", type=int, default=MAX_FIX_DOC_CHARS)
    args = parser.parse_args()
    lessons = {
        "sections": lesson_of(args.chars, standard_section),
        "long passages": long_passages(args.chars),
    }
    print(f"runs {args.runs}; milliseconds: wall p50 / p90, then CPU p50")
    print(
        f"{'lesson':<14} {'chars':>7} {'sect.':>5} {'found':>5} | {'checks':^22} | "
        f"{'json.loads':^22} | {'Lesson contract':^22} | checks/json checks/contract (CPU)"
    )
    for name, doc in lessons.items():
        text = json.dumps(doc, ensure_ascii=False, separators=(",", ":"))
        result = validate_lesson(doc)
        checks, checks_cpu = timed(lambda d=doc: validate_lesson(d), args.runs)
        parse, parse_cpu = timed(lambda t=text: json.loads(t), args.runs)
        contract, contract_cpu = timed(lambda d=doc: Lesson.model_validate(d), args.runs)
        c50, j50, m50 = (statistics.median(v) for v in (checks_cpu, parse_cpu, contract_cpu))
        print(
            f"{name:<14} {lesson_json_chars(doc):>7} {len(doc['sections']):>5} "
            f"{len(result.findings):>5} | {cell(checks, c50)} | {cell(parse, j50)} | "
            f"{cell(contract, m50)} | {c50 / j50:>10.1f}x {c50 / m50:>15.1f}x"
        )
    print("target: checks p50 <= 100 ms on a 300,000-character lesson")


if __name__ == "__main__":
    main()
