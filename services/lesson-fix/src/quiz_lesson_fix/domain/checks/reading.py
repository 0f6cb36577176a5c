"""The lesson as every check reads it: each section read once (`Section`), its questions
(`Question`), spelling words and text, and the answers it adds to the lesson-wide pool.

A `Section` is built once per run, or taken over whole from an earlier run when the section is
the very same object (checkFix's "after"); its passage is normalised once, its sentences and
vocabulary read lazily. Ids are read as the tool reads `x || null` (`truthy_id`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from quiz_lesson_fix.domain.jsval import js_string, js_trim
from quiz_lesson_fix.domain.normalise import ListPassage, Phrases, caps_vocabulary, normalize_text
from quiz_lesson_fix.domain.text import Paragraph, block_paragraphs, paragraphs_plain

ORANGE_TIGHT = "multiple"
ORANGE_LOOSE = "multiple_open"
ORANGE_TYPES = frozenset({ORANGE_TIGHT, ORANGE_LOOSE})


def truthy_id(value: Any) -> str | None:
    """An id as the tool reads `x || null`: "", 0, false and null are no id."""
    if value.__class__ is str:  # the common case, first
        return value or None
    if value is None or value is False or value == 0:
        return None
    return js_string(value)


def _items_text(item: Any) -> str:
    if isinstance(item, str):
        return item
    if isinstance(item, dict):
        text = item.get("text")
        return text if isinstance(text, str) else ""
    return ""


def answers_of(block: Mapping[str, Any]) -> list[str]:
    """A question's answers, trimmed: its `answers` list for the orange kinds, else `answer`."""
    if block.get("questionType") in ORANGE_TYPES:
        items = block.get("answers")
        if not isinstance(items, list):
            return []
        texts = [js_trim(_items_text(a)) for a in items]
        return [t for t in texts if t]
    answer = block.get("answer")
    if answer is None or answer == "":
        return []
    text = js_trim(answer if answer.__class__ is str else js_string(answer))
    return [text] if text else []


def has_steps(block: Mapping[str, Any]) -> bool:
    """A number question with steps is the word problem."""
    steps = block.get("steps")
    return isinstance(steps, list) and len(steps) > 0


def answer_id(block: Mapping[str, Any], answer: str) -> str | None:
    """The id of the item of an orange question's `answers` whose text is `answer`."""
    items = block.get("answers")
    for item in items if isinstance(items, list) else []:
        if isinstance(item, dict) and js_trim(_items_text(item)) == answer:
            return truthy_id(item.get("id"))
    return None


@dataclass(slots=True)
class SpellingWord:
    """One word of a section's spelling block, with the block and item it comes from."""

    word: str
    block_id: str | None
    item_id: str | None


class Question:
    """A question block as the checks read it: its identity, answers and their norms."""

    __slots__ = (
        "_prompt_norm",
        "answers",
        "block",
        "block_id",
        "id",
        "kind",
        "norms",
        "number",
        "prompt",
    )

    def __init__(self, block: Mapping[str, Any], qi: int, section_id: str) -> None:
        self.block = block
        self.kind = block.get("questionType")
        self.block_id = block.get("id")
        self.id = truthy_id(self.block_id) or f"{section_id}#q{qi}"
        self.number = qi + 1
        self.answers = answers_of(block)
        self.norms = [normalize_text(a) for a in self.answers] if self.answers else []
        prompt = block.get("prompt")
        self.prompt = prompt if isinstance(prompt, str) else ""
        self._prompt_norm: str | None = None

    @property
    def prompt_norm(self) -> str:
        """The prompt, normalised (on first use)."""
        if self._prompt_norm is None:
            self._prompt_norm = normalize_text(self.prompt)
        return self._prompt_norm


@dataclass(slots=True)
class Answer:
    """An answer in the lesson-wide pool (every kind but `multiple_open`'s suggestions)."""

    text: str
    norm: str
    question_id: str
    question_type: Any
    section: int
    label: str
    block_id: str | None
    number: int

    @property
    def where(self) -> str:
        """The section and question, in words."""
        return f"{self.label}, question {self.number}"


class Section:
    """What every check of one section reads, computed once."""

    __slots__ = (
        "_caps",
        "_list_passage",
        "answers",
        "blocks",
        "id",
        "label",
        "number",
        "passage",
        "plain",
        "questions",
        "section_id",
        "spelling",
        "text_blocks",
        "vakt",
    )

    def __init__(self, index: int, section: Mapping[str, Any]) -> None:
        self.number = index + 1
        self.section_id = truthy_id(section.get("id"))
        self.id = self.section_id or f"section#{index}"
        name = section.get("name")
        name = js_trim(name) if isinstance(name, str) else ""
        self.label = f'Section {self.number} "{name}"' if name else f"Section {self.number}"
        blocks = section.get("blocks")
        self.blocks: list[Any] = blocks if isinstance(blocks, list) else []
        self.text_blocks: list[tuple[Mapping[str, Any], list[Paragraph]]] = []
        self.questions: list[Question] = []
        self.spelling: list[SpellingWord] = []
        self.vakt: list[int] = []
        self._list_passage: ListPassage | None = None
        self._caps: set[str] | None = None
        plains = []
        for at, block in enumerate(self.blocks):
            if not isinstance(block, dict):
                continue
            kind = block.get("type")
            if kind == "question":
                self.questions.append(Question(block, len(self.questions), self.id))
            elif kind == "text":
                paragraphs = block_paragraphs(block)
                self.text_blocks.append((block, paragraphs))
                plains.append(paragraphs_plain(paragraphs))
            elif kind == "spelling":
                words = block.get("words")
                block_id = truthy_id(block.get("id"))
                for w in words if isinstance(words, list) else []:
                    word = js_trim(_items_text(w))
                    if word:
                        item_id = None if isinstance(w, str) else truthy_id(w.get("id"))
                        self.spelling.append(SpellingWord(word, block_id, item_id))
            elif kind == "vakt":
                self.vakt.append(at)
        self.plain = " ".join(plains)
        self.passage = Phrases(normalize_text(self.plain))
        # The section's share of the lesson-wide answer pool, in question order.
        self.answers = [
            Answer(
                answer,
                norm,
                q.id,
                q.kind,
                self.number,
                self.label,
                truthy_id(q.block_id),
                q.number,
            )
            for q in self.questions
            if q.kind != ORANGE_LOOSE
            for answer, norm in zip(q.answers, q.norms, strict=True)
        ]

    @property
    def list_passage(self) -> ListPassage:
        """The passage's sentences, tokenised for the list check (on first use)."""
        if self._list_passage is None:
            self._list_passage = ListPassage(self.plain)
        return self._list_passage

    @property
    def caps(self) -> set[str]:
        """The passage's ALL-CAPS vocabulary (on first use)."""
        if self._caps is None:
            self._caps = caps_vocabulary(self.plain)
        return self._caps
