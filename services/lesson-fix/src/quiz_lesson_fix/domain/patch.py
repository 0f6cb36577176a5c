"""Operations on a lesson: `replace_block` and `move_block`, as the tool's lessonPatch.js.

A replaced block is rebuilt from the input shape by the tool's block builder
(lessonBuild.js `buildBlock`), so a fix is validated like a block written from scratch:

- text: `text` is markup (or `content` a stored document when `text` is absent);
- spelling: at least one non-blank word;
- question: a known `questionType` and a non-blank `prompt`; `single` and `background` need a
  non-blank `answer` string, `number` an `answer` (stored as a string, with its `steps`), the
  orange kinds at least one non-blank answer; open, paraphrase and wyr store no answer.

The replaced block keeps its id. Nothing is mutated: sections and blocks an operation does not
touch are returned as the very same objects, so a caller can compare by identity.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from quiz_contracts.lesson import QUESTION_TYPES
from quiz_lesson_fix.domain.jsval import js_string, js_trim
from quiz_lesson_fix.domain.text import (
    block_paragraphs,
    parse_document,
    parse_markup,
    text_block,
    text_block_document,
)

NewId = Callable[[], str]


class PatchError(ValueError):
    """An operation that cannot be made; the message names it and says why."""


def new_id() -> str:
    """A fresh item or block id."""
    return uuid.uuid4().hex[:12]


def _strings(value: Any) -> list[str]:
    if not isinstance(value, list):
        return []
    return [js_trim(v) for v in value if isinstance(v, str) and js_trim(v)]


def build_block(block: Any, where: str, make_id: NewId = new_id) -> dict[str, Any]:
    """A stored block from its input shape (buildBlock); raises PatchError on bad input."""
    if not isinstance(block, dict):
        raise PatchError(f"{where}: each block must be an object.")
    kind = block.get("type")
    if kind == "text":
        stored = parse_document(block.get("content"))
        text = block.get("text")
        if stored is not None and not isinstance(text, str):
            return text_block({"id": make_id(), "type": "text"}, stored)
        if not isinstance(text, str):
            raise PatchError(f'{where}: a text block needs a "text" string.')
        return text_block({"id": make_id(), "type": "text"}, parse_markup(text))
    if kind == "spelling":
        words = _strings(block.get("words"))
        if not words:
            raise PatchError(f'{where}: a spelling block needs a non-empty "words" list.')
        return {
            "id": make_id(),
            "type": "spelling",
            "words": [{"id": make_id(), "text": w} for w in words],
        }
    if kind == "question":
        return _build_question(block, where, make_id)
    raise PatchError(
        f'{where}: a fix can only build text, spelling and question blocks, not "{kind}".'
    )


def _build_question(block: Mapping[str, Any], where: str, make_id: NewId) -> dict[str, Any]:
    kind = block.get("questionType")
    if kind not in QUESTION_TYPES:
        raise PatchError(f'{where}: "questionType" must be one of {", ".join(QUESTION_TYPES)}.')
    prompt = block.get("prompt")
    if not isinstance(prompt, str) or not js_trim(prompt):
        raise PatchError(f'{where}: a question needs a non-empty "prompt".')
    base: dict[str, Any] = {
        "id": make_id(),
        "type": "question",
        "questionType": kind,
        "prompt": prompt,
    }
    answer = block.get("answer")
    if kind == "number":
        if answer is None or answer == "":
            raise PatchError(f'{where}: a number question needs an "answer".')
        steps = _strings(block.get("steps"))
        return {
            **base,
            "answer": js_string(answer),
            "steps": [{"id": make_id(), "text": s} for s in steps],
        }
    if kind in ("single", "background"):
        if not isinstance(answer, str) or not js_trim(answer):
            raise PatchError(f'{where}: a {kind} question needs an "answer" string.')
        return {**base, "answer": answer}
    if kind in ("multiple", "multiple_open"):
        answers = _strings(block.get("answers"))
        if not answers:
            raise PatchError(f'{where}: a {kind} question needs a non-empty "answers" list.')
        return {**base, "answers": [{"id": make_id(), "text": a} for a in answers]}
    return base  # open, paraphrase, wyr: the speller answers on paper


def keep_item_ids(before: Any, after: list[Any]) -> list[Any]:
    """A rebuilt list that keeps the id of each old item whose text is unchanged (first match)."""
    if not isinstance(before, list):
        return after
    unused = list(before)
    out = []
    for item in after:
        at = next(
            (
                i
                for i, old in enumerate(unused)
                if isinstance(old, dict) and old.get("text") == item.get("text")
            ),
            -1,
        )
        if at == -1:
            out.append(item)
        else:
            old = unused.pop(at)
            out.append({**item, "id": old.get("id")})
    return out


def settle_block(before: Mapping[str, Any] | None, after: dict[str, Any]) -> dict[str, Any]:
    """A rebuilt block stored the way the editor stores it: text as a document, ids kept."""
    if after.get("type") == "text":
        return text_block_document(after, block_paragraphs(after))
    out = dict(after)
    for name in ("answers", "steps", "words"):
        if isinstance(out.get(name), list):
            out[name] = keep_item_ids(before.get(name) if before else None, out[name])
    return out


def _locate(sections: list[Any], block_id: Any) -> tuple[int, int] | None:
    for si, section in enumerate(sections):
        blocks = section.get("blocks") if isinstance(section, dict) else None
        for bi, block in enumerate(blocks if isinstance(blocks, list) else []):
            if isinstance(block, dict) and block.get("id") == block_id:
                return si, bi
    return None


def apply_operations(
    doc: Mapping[str, Any], operations: Sequence[Any], make_id: NewId = new_id
) -> dict[str, Any]:
    """The lesson with `replace_block` and `move_block` operations made, in order.

    A replaced block is rebuilt, keeps its id, is stored as the editor stores it (text as a
    document, unchanged list items with their ids). Raises PatchError naming the operation.
    """
    if not isinstance(operations, Sequence) or isinstance(operations, str) or not operations:
        raise PatchError("Provide a non-empty list of operations.")
    raw_sections = doc.get("sections")
    sections: list[Any] = list(raw_sections) if isinstance(raw_sections, list) else []
    originals = {
        id(b): b
        for s in sections
        if isinstance(s, dict)
        for b in (s.get("blocks") or [])
        if isinstance(b, dict)
    }
    touched: set[int] = set()

    def own(si: int) -> list[Any]:
        # A section an operation changes gets its own dict and block list, once.
        if si not in touched:
            section = sections[si]
            sections[si] = {**section, "blocks": list(section.get("blocks") or [])}
            touched.add(si)
        blocks: list[Any] = sections[si]["blocks"]
        return blocks

    replaced_from: dict[Any, Mapping[str, Any]] = {}
    for i, op in enumerate(operations):
        kind = op.get("op") if isinstance(op, dict) else None
        where = f"operation {i + 1} ({kind or '?'})"
        if not isinstance(op, dict):
            raise PatchError(f"{where}: each operation must be an object.")
        block_id = op.get("blockId")
        found = _locate(sections, block_id)
        if kind not in ("replace_block", "move_block"):
            raise PatchError(f'{where}: unknown op "{kind}"; use replace_block or move_block.')
        if found is None:
            raise PatchError(f'{where}: no block with id "{block_id}" in the lesson.')
        si, bi = found
        if kind == "replace_block":
            if not op.get("block"):
                raise PatchError(f'{where}: needs a "block".')
            built = build_block(op["block"], where, make_id)
            built["id"] = block_id
            blocks = own(si)
            current = blocks[bi]
            if block_id not in replaced_from and id(current) in originals:
                replaced_from[block_id] = current
            blocks[bi] = settle_block(replaced_from.get(block_id), built)
        else:
            index = op.get("index")
            if not isinstance(index, int) or isinstance(index, bool):
                raise PatchError(f'{where}: needs a numeric "index".')
            moved = own(si).pop(bi)
            target = si
            if op.get("sectionId") is not None:
                target = next(
                    (
                        k
                        for k, s in enumerate(sections)
                        if isinstance(s, dict) and s.get("id") == op["sectionId"]
                    ),
                    -1,
                )
                if target == -1:
                    raise PatchError(f'{where}: no section with id "{op["sectionId"]}".')
            destination = own(target)
            destination.insert(max(0, min(index, len(destination))), moved)
    return {**doc, "sections": sections}
