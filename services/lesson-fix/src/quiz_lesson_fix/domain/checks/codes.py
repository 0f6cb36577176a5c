"""What a check code is (`CheckCode`), and the sink every check reports into (`Findings`).

Each family module declares its codes beside its checks (`declare(...)`, as pylint's checkers
declare their messages) and reports a finding through the declared code, so a check cannot
report a code the catalogue (`CHECK_CODES`) does not list, nor at another level.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

from quiz_contracts.lesson import Finding, FindingLevel
from quiz_lesson_fix.domain.checks.reading import Question, truthy_id


@dataclass(frozen=True, slots=True)
class CheckCode:
    """What a check code is: its level, what fires it, its key identity, and how it is fixed."""

    code: str
    level: FindingLevel
    fix: Literal["ai", "quick"] | None
    trigger: str
    key: str


def declare(code: str, fix: Literal["ai", "quick"] | None, trigger: str, key: str) -> CheckCode:
    """A code of the tool: an error when it starts with `E_`, else a warning (FACTS B)."""
    return CheckCode(code, "error" if code.startswith("E_") else "warning", fix, trigger, key)


class Findings:
    """The findings of one run, in check order, each built from its declared code.

    `section` is the 1-based section a finding is about (None: the lesson); its `sectionId` is
    read from `section_ids`, the ids of the lesson's sections in order.
    """

    __slots__ = ("_section_ids", "items")

    def __init__(self, section_ids: list[str | None]) -> None:
        self._section_ids = section_ids
        self.items: list[Finding] = []

    def add(
        self,
        code: CheckCode,
        key: str,
        section: int | None,
        message: str,
        *,
        block_id: Any = None,
        item_id: Any = None,
        params: dict[str, Any] | None = None,
    ) -> None:
        """Report `code` with the identity `key` (the finding's key is `<CODE>:<key>`)."""
        self.items.append(
            Finding.model_construct(
                level=code.level,
                code=code.code,
                key=f"{code.code}:{key}",
                section=section,
                sectionId=self._section_ids[section - 1] if section else None,
                blockId=truthy_id(block_id),
                itemId=truthy_id(item_id),
                params=params or {},
                message=message,
            )
        )

    def extend(self, found: Iterable[Finding]) -> None:
        """Take over findings an earlier run made (a reused section's)."""
        self.items.extend(found)


def about(q: Question, item_id: Any = None, **params: Any) -> dict[str, Any]:
    """Where a question's finding points, and its params (the question's number first)."""
    return {"block_id": q.block_id, "item_id": item_id, "params": {"question": q.number, **params}}


def counted(count: int, one: str, many: str | None = None) -> str:
    """`count` and its noun, singular for exactly one: "1 question", "0 spelling words",
    "3 sections" (issue 34: the messages said "1 question(s)", "0 spelling word(s)")."""
    return f"{count} {one if count == 1 else (many or one + 's')}"


def quoted(values: list[str]) -> str:
    """Values in double quotes, comma-separated, for a message."""
    return ", ".join(f'"{v}"' for v in values)
