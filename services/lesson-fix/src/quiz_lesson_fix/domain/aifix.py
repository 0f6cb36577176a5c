"""The shared half of "Fix with AI" (seed 003; FACTS C; the tool's lessonAiFixes.js).

- `AI_FIX_CODES` / `has_ai_fix`: which findings a model may be asked to fix (the code is in
  the list AND the finding has a section id).
- `fix_context`: the finding's section as the model sees it, block by block in the MCP input
  shape (text as markup so formatting and footnotes survive, every list as strings, blocks
  other than text, question and spelling as `{id, type}` and marked not editable), with the
  spelling words and answers other sections use.
- `ai_edits_to_operations`: the model's edits as `replace_block` operations, each merged with
  the block as it was; refuses a block outside the section, one that may not change, the same
  block twice, and a reply that changes nothing.
- `apply_fix_operations`: only `replace_block`; untouched objects stay the same objects.
- `check_fix`: the finding's key gone, no new error, no edited text block lost a footnote;
  new warnings counted, never blocking; formatting findings re-keyed by a reworded passage are
  not new when their code already fired in the section.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from quiz_contracts.lesson import Finding
from quiz_lesson_fix.domain.checks import (
    CheckResult,
    is_formatting_finding,
    new_findings,
    validate_lesson,
)
from quiz_lesson_fix.domain.jsval import js_string, js_trim
from quiz_lesson_fix.domain.patch import NewId, PatchError, apply_operations, new_id
from quiz_lesson_fix.domain.text import block_markup, block_paragraphs, footnotes

AI_FIX_CODES: tuple[str, ...] = (
    "E_GROUNDING_SINGLE",
    "E_GROUNDING_MULTIPLE",
    "E_ORANGE_PARAPHRASED",
    "E_GROUNDING_NUMBER_FILL",
    "E_BACKGROUND_IN_TEXT",
    "E_ORANGE_ANSWER_IN_PROMPT",
    "E_ORANGE_NOT_A_LIST",
    "E_RETIRED_STEM",
    "E_ANSWER_REVEALED_CROSS",
    "E_SPELLING_LENGTH",
    "E_SPELLING_DUPLICATE",
    "E_SPELLING_COLLISION",
    "E_ANSWER_WORD_REUSED",
    "E_NUMBER_DUPLICATE",
    "W_ORANGE_MULTIWORD",
    "W_ORANGE_ANSWER_COUNT",
    "W_ORANGE_NO_BLANK",
    "W_WYR_SHAPE",
    "W_ANSWER_REVEALED_OPEN",
    "W_NUMBER_NO_STEPS",
    "W_SPELLING_IN_CAPS",
    "W_OPEN_SPLIT",
)
"""The 22 codes a model may be asked to fix, in the tool's order (lessonAiFixes.js)."""

_AI_FIXABLE = frozenset(AI_FIX_CODES)
EDITABLE_TYPES = frozenset({"text", "question", "spelling"})
_ORANGE = frozenset({"multiple", "multiple_open"})
_ONE_ANSWER = frozenset({"single", "background", "number"})


class FixRefused(ValueError):
    """A model's edits that cannot become operations; the message is for the model's retry."""


def has_ai_fix(finding: Finding) -> bool:
    """Whether a model may be asked to fix this finding: an AI code, about one section."""
    return finding.code in _AI_FIXABLE and bool(finding.sectionId)


def _texts(items: Any) -> list[str]:
    out = []
    for item in items if isinstance(items, list) else []:
        text = item if isinstance(item, str) else item.get("text") if isinstance(item, dict) else ""
        text = js_trim(text) if isinstance(text, str) else ""
        if text:
            out.append(text)
    return out


def block_for_model(block: Any) -> dict[str, Any]:
    """A block in the MCP input shape: text as markup, every list as plain strings."""
    if not isinstance(block, dict):
        return {"id": None, "type": None}
    kind = block.get("type")
    if kind == "text":
        return {"id": block.get("id"), "type": "text", "text": block_markup(block)}
    if kind == "spelling":
        return {"id": block.get("id"), "type": "spelling", "words": _texts(block.get("words"))}
    if kind == "question":
        prompt = block.get("prompt")
        out: dict[str, Any] = {
            "id": block.get("id"),
            "type": "question",
            "questionType": block.get("questionType"),
            "prompt": prompt if isinstance(prompt, str) and prompt else "",
        }
        if block.get("answer") is not None:
            out["answer"] = js_string(block["answer"])
        if isinstance(block.get("answers"), list):
            out["answers"] = _texts(block["answers"])
        if isinstance(block.get("steps"), list):
            out["steps"] = _texts(block["steps"])
        return out
    return {"id": block.get("id"), "type": kind}


def _section_of(doc: Mapping[str, Any], section_id: str | None) -> tuple[int, Mapping[str, Any]]:
    sections = doc.get("sections")
    for i, section in enumerate(sections if isinstance(sections, list) else []):
        if isinstance(section, dict) and section_id and section.get("id") == section_id:
            return i, section
    return -1, {}


def _blocks(section: Mapping[str, Any]) -> list[Any]:
    blocks = section.get("blocks")
    return blocks if isinstance(blocks, list) else []


@dataclass(frozen=True)
class FixContext:
    """The finding's section for the model, and the words the fix must not reuse."""

    section_number: int
    section_name: str
    blocks: list[dict[str, Any]]
    used_elsewhere: list[str] = field(default_factory=list)


def fix_context(doc: Mapping[str, Any], finding: Finding) -> FixContext | None:
    """What a model needs to fix a finding (fixContext), or None when its section is gone.

    `used_elsewhere` holds, once each and trimmed, the spelling words and the answers of the
    other sections; `multiple_open` suggestions are left out (the checks hold them to nothing).
    """
    index, section = _section_of(doc, finding.sectionId)
    if index == -1:
        return None
    used: dict[str, None] = {}
    for i, other in enumerate(doc.get("sections") or []):
        if i == index or not isinstance(other, dict):
            continue
        for block in _blocks(other):
            if not isinstance(block, dict):
                continue
            if block.get("type") == "spelling":
                words = _texts(block.get("words"))
            elif block.get("type") == "question":
                answer = block.get("answer")
                words = _texts([js_string(answer) if answer is not None else ""])
                if block.get("questionType") != "multiple_open":
                    words += _texts(block.get("answers"))
            else:
                words = []
            for word in words:
                used[word] = None
    name = section.get("name")
    return FixContext(
        section_number=index + 1,
        section_name=name if isinstance(name, str) else "",
        blocks=[
            {
                **block_for_model(block),
                "editable": isinstance(block, dict) and block.get("type") in EDITABLE_TYPES,
            }
            for block in _blocks(section)
        ],
        used_elsewhere=list(used),
    )


def _non_empty(value: Any) -> str:
    return js_trim(value) if isinstance(value, str) and js_trim(value) else ""


def ai_edits_to_operations(
    doc: Mapping[str, Any], finding: Finding, edits: Any
) -> list[dict[str, Any]]:
    """The model's edits as `replace_block` operations (aiEditsToOperations).

    Each edit is merged with its block as the model saw it: an empty field keeps what was
    there; text is trimmed; lists are trimmed with blanks dropped. A change of kind moves the
    answer between `answer` and `answers`. An edit that changes nothing is skipped. Raises
    FixRefused (in words for the model) when the section is gone, an edit names a block
    outside it or one that may not change, names a block twice, or nothing changes at all.
    """
    index, section = _section_of(doc, finding.sectionId)
    if index == -1:
        raise FixRefused("That section is no longer in the lesson.")
    by_id = {b.get("id"): b for b in _blocks(section) if isinstance(b, dict)}
    seen: set[Any] = set()
    operations: list[dict[str, Any]] = []
    for i, edit in enumerate(edits if isinstance(edits, list) else []):
        edit = edit if isinstance(edit, dict) else {}
        block_id = edit.get("blockId")
        block = by_id.get(block_id) if isinstance(block_id, str) else None
        if block is None:
            raise FixRefused(
                f'Edit {i + 1} names block "{block_id}", which is not in this section; edit '
                "only the blocks listed, by their id."
            )
        kind = block.get("type")
        if kind not in EDITABLE_TYPES:
            raise FixRefused(f"Edit {i + 1}: a {kind} block may not be changed (editable: false).")
        if block_id in seen:
            raise FixRefused(
                f'Edit {i + 1} changes block "{block_id}" a second time; give one edit per block.'
            )
        seen.add(block_id)

        current = block_for_model(block)
        del current["id"]
        proposed = dict(current)
        if kind == "text":
            if text := _non_empty(edit.get("text")):
                proposed["text"] = text
        elif kind == "spelling":
            if words := _texts(edit.get("words")):
                proposed["words"] = words
        else:
            if question_type := _non_empty(edit.get("questionType")):
                proposed["questionType"] = question_type
            if prompt := _non_empty(edit.get("prompt")):
                proposed["prompt"] = prompt
            raw_answer = edit.get("answer")
            if answer := _non_empty("" if raw_answer is None else js_string(raw_answer)):
                proposed["answer"] = answer
            if answers := _texts(edit.get("answers")):
                proposed["answers"] = answers
            if steps := _texts(edit.get("steps")):
                proposed["steps"] = steps
            if (
                proposed.get("questionType") in _ORANGE
                and not proposed.get("answers")
                and proposed.get("answer")
            ):
                proposed["answers"] = [proposed["answer"]]
            if (
                proposed.get("questionType") in _ONE_ANSWER
                and not proposed.get("answer")
                and proposed.get("answers")
            ):
                proposed["answer"] = proposed["answers"][0]
        if proposed == current:
            continue
        operations.append({"op": "replace_block", "blockId": block_id, "block": proposed})
    if not operations:
        raise FixRefused(
            "The edits do not change anything; change the blocks the problem is about."
        )
    return operations


def apply_fix_operations(
    doc: Mapping[str, Any], operations: Sequence[Any], make_id: NewId = new_id
) -> dict[str, Any]:
    """The lesson with a fix made (applyFixOperations): `replace_block` operations only.

    Untouched sections and blocks are the very same objects; a rebuilt list keeps the ids of
    items whose text did not change; a changed text block is stored as a `content` document.
    Raises PatchError for any other operation or one that cannot be made.
    """
    if not isinstance(operations, Sequence) or isinstance(operations, str):
        raise PatchError("A fix needs a list of operations.")
    for op in operations:
        kind = op.get("op") if isinstance(op, dict) else None
        if kind != "replace_block":
            raise PatchError(f'A fix can only replace blocks, not "{kind}".')
    return apply_operations(doc, operations, make_id)


@dataclass(frozen=True)
class FixCheck:
    """checkFix's verdict: `problems` is prose for the model's second try."""

    ok: bool
    doc: dict[str, Any] | None
    new_errors: list[Finding]
    new_warnings: list[Finding]
    problems: list[str]


def _not_rekeyed(found: list[Finding], prior: list[Finding]) -> list[Finding]:
    # A formatting finding's key is its formatted words, so rewording a passage re-keys a
    # formatting defect that predates the fix; one whose code already fired in the same
    # section is not new. Formatting only: any other changed key is the fix's doing.
    fired = {(f.code, f.sectionId) for f in prior if is_formatting_finding(f)}
    return [f for f in found if not (is_formatting_finding(f) and (f.code, f.sectionId) in fired)]


def _footnote_count(block: Any) -> int:
    if not isinstance(block, dict) or block.get("type") != "text":
        return 0
    return len(footnotes(block_paragraphs(block)))


def _blocks_by_id(doc: Mapping[str, Any]) -> dict[Any, Any]:
    return {
        b.get("id"): b
        for s in (doc.get("sections") or [])
        if isinstance(s, dict)
        for b in _blocks(s)
        if isinstance(b, dict)
    }


def check_fix(
    doc: Mapping[str, Any],
    operations: Sequence[Any],
    finding: Finding,
    *,
    before: CheckResult | None = None,
    make_id: NewId = new_id,
) -> FixCheck:
    """Whether a fix does its job (checkFix), judged on a copy of the lesson.

    `before` is `validate_lesson(doc)` when the caller already ran it, so one request checks
    the unchanged lesson once. The fix passes when the finding's key is gone (from errors and
    warnings), no error is new (key not among the keys before), and no edited text block has
    fewer footnotes than before.
    """
    try:
        fixed = apply_fix_operations(doc, operations, make_id)
    except PatchError as exc:
        return FixCheck(False, None, [], [], [str(exc)])
    prior = before if before is not None else validate_lesson(doc)
    after = validate_lesson(fixed, reuse=prior)
    new_errors = _not_rekeyed(new_findings(prior.errors, after.errors), prior.errors)
    new_warnings = _not_rekeyed(new_findings(prior.warnings, after.warnings), prior.warnings)
    resolved = after.find(finding.key) is None
    was, now = _blocks_by_id(doc), _blocks_by_id(fixed)
    lost_footnote = any(
        isinstance(op, dict)
        and isinstance(was.get(op.get("blockId")), dict)
        and was[op["blockId"]].get("type") == "text"
        and _footnote_count(was[op["blockId"]]) > _footnote_count(now.get(op["blockId"]))
        for op in operations
    )
    problems = []
    if not resolved:
        problems.append(f"The problem is still there: {finding.message}")
    problems += [f"The fix causes a new problem: {f.message}" for f in new_errors]
    if lost_footnote:
        problems.append(
            "The fix drops a footnote from the passage. Keep every ^[...] footnote exactly as it "
            "was, where it was."
        )
    return FixCheck(not problems, fixed, new_errors, new_warnings, problems)
