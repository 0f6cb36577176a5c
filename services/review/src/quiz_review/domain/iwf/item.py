"""The mcq as the item-writing-flaw rules read it, and what a rule reports.

`Item` is built once per lint from a validated `McqConfig`: the stem and every choice read into
words (`text.Text`), the key as the indices of the correct choices, the language (primary
subtag, lower case: "fr-CH" reads as "fr").
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

from quiz_contracts.questions.common import js_collapse, js_trim
from quiz_contracts.questions.mcq import McqConfig
from quiz_review.domain.iwf.text import LANGUAGES, Text


@dataclass(frozen=True)
class Flaw:
    """One finding of a rule: the criterion (the rubric's number and our code), the field it is
    about (`prompt` or `choices.<i>`), a message in the question's language."""

    criterion: int
    code: str
    path: str
    message: str


@dataclass(frozen=True)
class Item:
    """One mcq read for the rules."""

    language: str
    stem: Text
    choices: tuple[Text, ...]
    # The choice texts trimmed with their inner spaces collapsed (lengths are counted on them).
    plain: tuple[str, ...]
    key: tuple[int, ...]
    single: bool
    # What one rule found about a choice and another reads again (`choices.points_at_choices`).
    memo: dict[tuple[str, int], bool] = field(default_factory=dict, compare=False, repr=False)

    @property
    def known_language(self) -> bool:
        """Word lists ship for this language (fr, en, de, it)."""
        return self.language in LANGUAGES

    @property
    def distractors(self) -> tuple[int, ...]:
        return tuple(i for i in range(len(self.choices)) if i not in self.key)

    @staticmethod
    def of(config: McqConfig, language: str) -> Item:
        lang = primary_language(language)
        plain = tuple(js_collapse(js_trim(c.text)) for c in config.choices)
        return Item(
            language=lang,
            stem=Text.of(config.prompt, lang),
            choices=tuple(Text.of(p, lang) for p in plain),
            plain=plain,
            key=tuple(i for i, c in enumerate(config.choices) if c.correct),
            single=config.mode == "single",
        )


def primary_language(tag: str) -> str:
    """The primary subtag of a language tag, lower case: "fr-CH" → "fr", "EN" → "en"."""
    return tag.strip().replace("_", "-").split("-", 1)[0].lower()


PROMPT: Final = "prompt"


def choice_path(index: int) -> str:
    """The finding path of a choice: `choices.<i>` (from 0, the config's order)."""
    return f"choices.{index}"
