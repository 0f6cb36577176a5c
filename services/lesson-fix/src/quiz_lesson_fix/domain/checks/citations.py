"""Footnotes cite the lesson's sources: E_UNKNOWN_SOURCE for a `^[@id]` whose id is not in
`sources` (FACTS B). No fix: only the author knows the source meant."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from quiz_lesson_fix.domain.checks.codes import Findings, declare
from quiz_lesson_fix.domain.checks.reading import Section
from quiz_lesson_fix.domain.text import footnotes

UNKNOWN_SOURCE = declare(
    "E_UNKNOWN_SOURCE",
    None,
    "A footnote cites a source id that is not in the lesson's sources.",
    "sourceId",
)
CODES = (UNKNOWN_SOURCE,)


def check_citations(doc: Mapping[str, Any], sections: list[Section], out: Findings) -> None:
    """Every footnote of every text block, section by section, against the lesson's sources."""
    sources = doc.get("sources") if isinstance(doc, dict) else None
    known = {
        s.get("id") for s in (sources if isinstance(sources, list) else []) if isinstance(s, dict)
    }
    for ctx in sections:
        for block, paragraphs in ctx.text_blocks:
            for note in footnotes(paragraphs):
                if not note.source_id or note.source_id in known:
                    continue
                out.add(
                    UNKNOWN_SOURCE,
                    note.source_id,
                    ctx.number,
                    f'{ctx.label} cites "@{note.source_id}", which is not one of the '
                    "lesson's sources. Add a source with that id to `sources`, or correct "
                    "the id in the ^[@id] footnote.",
                    block_id=block.get("id"),
                    params={"sourceId": note.source_id},
                )
