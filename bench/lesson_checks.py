"""Full lesson checks on a ~300,000-character lesson, and a whole fix request through HTTP.

Run: `uv run python bench/lesson_checks.py [--runs 30] [--chars 300000] [--fix-runs 15]`.

Part 1, the checks (in this process).

Two generated lessons of about `--chars` characters of JSON (the fix request's limit,
MAX_FIX_DOC_CHARS): "sections" is many sections of the standard shape (2 passages, one of them
formatted with a footnote, 4 spelling words, 15 questions); "long passages" is six sections
whose passages and question lists are long, the worst case for the per-section work. Each is
checked in full (`validate_lesson`, every code) `--runs` times; the baselines, measured in the
same run on the same lesson, are `json.loads` of its JSON text and validating it with the
`Lesson` contract (what a route does before the checks). Prints p50/p90 in milliseconds and
the ratios. The target is checks p50 ≤ 100 ms.

Part 2, a whole fix request (`--fix-runs 0` skips it): lesson-fix and the llm-gateway run as
their own processes on a nats-server of their own, the scripted model (the testkit's stub,
answering the lesson's fix) and a siteverify server in this process. `POST /app/api/lessons/fix`
does everything the route does: contract, size, verification, the rate-limit transaction, the
full checks once, one model call through the gateway, checkFix (the full checks of the fixed
lesson). Baselines in the same run, on the same lessons: `POST /app/api/lessons/check` (the
route's edge and one full check) and the model call alone (`llm.v1.complete` through the
gateway with the fix's own prompt). Sequential requests; wall p50/p90 in milliseconds, and the
fix over the sum of its two baselines (what the rest of the request costs).
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import gc
import itertools
import json
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx

from quiz_contracts.lesson import MAX_FIX_DOC_CHARS, Lesson
from quiz_lesson_fix.domain.aifix import fix_context
from quiz_lesson_fix.domain.checks import validate_lesson
from quiz_lesson_fix.domain.fix import FIX_SCHEMA, SYSTEM_PROMPT, lesson_json_chars, user_prompt
from quiz_lesson_fix.domain.text import parse_markup, to_document
from quiz_lesson_fix.eval.cases import EMPTY_EDIT, load_cases
from quiz_lesson_fix.model_call import gateway_complete
from quiz_servicekit.llm import LlmClient
from quiz_testkit.anthropic_stub import AnthropicStub, StubReply
from quiz_testkit.jwt_keys import SigningKeys
from quiz_testkit.nats_server import NatsServer, nats_connect
from quiz_testkit.processes import ServiceProcess
from quiz_testkit.siteverify_stub import DEFAULT_SECRET, SiteverifyStub

LESSONS_GRANT = {"lessons": {"role": "contributor"}}

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
    parser.add_argument("--fix-runs", type=int, default=15, help="0: skip the fix requests")
    args = parser.parse_args()
    lessons = {
        "sections": lesson_of(args.chars, standard_section),
        "long passages": long_passages(args.chars),
    }
    bench_checks(lessons, args.runs)
    if args.fix_runs > 0:
        asyncio.run(bench_fix_requests(lessons["sections"], args.fix_runs))


def bench_checks(lessons: dict[str, dict[str, Any]], runs: int) -> None:
    """Part 1: the full checks of each lesson against its parse and its contract."""
    print(f"runs {runs}; milliseconds: wall p50 / p90, then CPU p50")
    print(
        f"{'lesson':<14} {'chars':>7} {'sect.':>5} {'found':>5} | {'checks':^22} | "
        f"{'json.loads':^22} | {'Lesson contract':^22} | checks/json checks/contract (CPU)"
    )
    for name, doc in lessons.items():
        text = json.dumps(doc, ensure_ascii=False, separators=(",", ":"))
        result = validate_lesson(doc)
        checks, checks_cpu = timed(lambda d=doc: validate_lesson(d), runs)
        parse, parse_cpu = timed(lambda t=text: json.loads(t), runs)
        contract, contract_cpu = timed(lambda d=doc: Lesson.model_validate(d), runs)
        c50, j50, m50 = (statistics.median(v) for v in (checks_cpu, parse_cpu, contract_cpu))
        print(
            f"{name:<14} {lesson_json_chars(doc):>7} {len(doc['sections']):>5} "
            f"{len(result.findings):>5} | {cell(checks, c50)} | {cell(parse, j50)} | "
            f"{cell(contract, m50)} | {c50 / j50:>10.1f}x {c50 / m50:>15.1f}x"
        )
    print("target: checks p50 <= 100 ms on a 300,000-character lesson")


# ---- Part 2: a whole fix request ------------------------------------------------------------


def planted(doc: dict[str, Any]) -> tuple[dict[str, Any], str, dict[str, Any]]:
    """The lesson with section 1's first green answer off the passage, the finding's key, and
    the model's reply that puts it back (one edit)."""
    doc = copy.deepcopy(doc)
    question = next(b for b in doc["sections"][0]["blocks"] if b.get("questionType") == "single")
    original, question["answer"] = question["answer"], "zzplanted"
    finding = next(f for f in validate_lesson(doc).errors if f.code == "E_GROUNDING_SINGLE")
    edit = {**EMPTY_EDIT, "blockId": question["id"], "answer": original}
    return doc, finding.key, {"explanation": "Grounded the answer.", "edits": [edit]}


async def bench_fix_requests(big: dict[str, Any], runs: int) -> None:
    """Part 2: fix, check and the model call alone, sequentially, on two lessons."""
    seeded = next(c for c in load_cases() if c.name == "fr_grounding_single")
    cases = {
        "seeded (1 section)": (seeded.lesson, seeded.finding().key, seeded.reference_reply()),
        "300,000 (100 sect.)": planted(big),
    }
    work = Path(tempfile.mkdtemp(prefix="bench-lesson-fix-"))
    nats_server = NatsServer(work / "nats").start()
    stub, siteverify = AnthropicStub().__enter__(), SiteverifyStub().start()
    keys = SigningKeys.load_or_create(work / "keys")
    common = {"NATS_URL": nats_server.url, "LOG_LEVEL": "WARNING", "QUIZ_DATA_DIR": str(work)}
    gateway = ServiceProcess(
        "quiz_llm_gateway.main",
        {
            **common,
            "DATABASE_URL": f"sqlite:///{work / 'gateway.db'}",
            "ANTHROPIC_API_KEY": "bench-key",
            "ANTHROPIC_BASE_URL": stub.base_url,
            "LLM_DAILY_CAP_USD": "1000000",
            "LLM_RATE_LIMITS": '{"lesson_fix": 0}',
        },
        work / "gateway.log",
    )
    service = ServiceProcess(
        "quiz_lesson_fix.main",
        {
            **common,
            "DATABASE_URL": f"sqlite:///{work / 'lesson-fix.db'}",
            "JWKS_FILE": str(keys.jwks_path),
            "LESSON_FIX_VERIFY_URL": siteverify.url,
            "LESSON_FIX_VERIFY_SECRET": DEFAULT_SECRET,
            "LESSON_FIX_RATE_LIMIT": "0",
        },
        work / "lesson-fix.log",
    )
    rows = []

    def service_cpu_ms() -> float:
        """CPU time lesson-fix has used so far, a figure the load cannot move, in nanoseconds
        of precision: the sum of its threads' scheduler run time (`/proc/<pid>/task/*/schedstat`,
        first field). psutil's user + system come in 10 ms clock ticks, and a small request's
        CPU read 0 there (the ratio divided by it). Threads that ended are not counted: the
        service keeps its threads (event loop, executor) for its life."""
        total_ns = 0
        for task in Path(f"/proc/{service.pid}/task").iterdir():
            try:
                total_ns += int((task / "schedstat").read_text().split()[0])
            except (FileNotFoundError, ProcessLookupError):
                continue  # a thread that ended between the listing and the read
        return total_ns / 1e6

    try:
        gateway.start()
        service.start()
        nc = await nats_connect(nats_server.url)
        llm = LlmClient(nc)
        bearer = {"authorization": f"Bearer {keys.mint('bench-author', LESSONS_GRANT)}"}
        async with httpx.AsyncClient(base_url=service.url, timeout=120, headers=bearer) as http:
            for name, (doc, key, reply) in cases.items():
                stub.default = StubReply.tool(reply)
                finding = validate_lesson(doc).find(key)
                assert finding is not None
                context = fix_context(doc, finding)
                assert context is not None
                prompt = [{"role": "user", "content": user_prompt(doc["title"], context, finding)}]
                complete = gateway_complete(llm, "bench", deadline_s=60, max_output_tokens=4000)

                async def fix(d: dict[str, Any] = doc, k: str = key) -> None:
                    body = {"lesson": d, "key": k, "verification": uuid.uuid4().hex}
                    r = await http.post("/app/api/lessons/fix", json=body)
                    assert r.status_code == 200, r.text

                async def check(d: dict[str, Any] = doc) -> None:
                    r = await http.post("/app/api/lessons/check", json={"lesson": d})
                    assert r.status_code == 200, r.text

                async def model(p: list[dict[str, str]] = prompt, c: Any = complete) -> None:
                    await c(SYSTEM_PROMPT, p, FIX_SCHEMA)

                walls: dict[str, list[float]] = {"fix": [], "check": [], "model": []}
                cpus: dict[str, list[float]] = {"fix": [], "check": [], "model": []}
                for step in (fix, check, model):  # warm every path once
                    await step()
                for _ in range(runs):  # interleaved: the machine's load falls on all three
                    for label, step in (("fix", fix), ("check", check), ("model", model)):
                        cpu = service_cpu_ms()
                        started = time.perf_counter()
                        await step()
                        walls[label].append((time.perf_counter() - started) * 1000)
                        # The request's tail (freeing a 300,000-character lesson) is its own.
                        await asyncio.sleep(0.2)
                        cpus[label].append(service_cpu_ms() - cpu)
                rows.append((name, lesson_json_chars(doc), walls, cpus))
        await nc.drain()
    finally:
        service.stop()
        gateway.stop()
        siteverify.stop()
        stub.__exit__()
        nats_server.stop()

    print()
    print(
        f"fix requests: {runs} each, sequential; wall ms p50 / p90, then lesson-fix's CPU ms "
        "p50 for the request"
    )
    print(
        f"{'lesson':<20} {'chars':>7} | {'fix':^22} | {'check (HTTP)':^22} | "
        f"{'model call':^15} | fix / (check + model), wall; fix / check, CPU"
    )
    for name, chars, w, c in rows:
        f50, c50, m50 = (statistics.median(w[k]) for k in ("fix", "check", "model"))
        fcpu, ccpu = statistics.median(c["fix"]), statistics.median(c["check"])
        print(
            f"{name:<20} {chars:>7} | {f50:>6.1f} / {p(w['fix'], 0.9):>6.1f} {fcpu:>6.1f} | "
            f"{c50:>6.1f} / {p(w['check'], 0.9):>6.1f} {ccpu:>6.1f} | "
            f"{m50:>6.1f} / {p(w['model'], 0.9):>6.1f} | {f50 / (c50 + m50):>8.2f}x "
            f"{fcpu / ccpu:>6.2f}x"
        )


if __name__ == "__main__":
    main()
