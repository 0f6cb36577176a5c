"""Formatting of a section's text: lesson prose stays plain, ALL CAPS already marks the
vocabulary (FACTS B).

A span is a formatted run with nothing plain between (`text.formatted_spans`); footnotes are
set aside. Errors: E_FORMAT_HEAVY (too many spans or too much of the text), then per span
E_FORMAT_LONG_EMPHASIS (bold or underline over a phrase) or E_FORMAT_LONG_ITALIC (italic over a
sentence). Warnings: W_FORMAT_BOLD, W_FORMAT_UNDERLINE, W_FORMAT_CAPS. Each has a quick fix.
"""

from __future__ import annotations

from typing import Any

from quiz_contracts.lesson import Finding
from quiz_lesson_fix.domain.checks.codes import Findings, declare, quoted
from quiz_lesson_fix.domain.checks.reading import Section
from quiz_lesson_fix.domain.jsval import js_split_space, utf16_len
from quiz_lesson_fix.domain.normalise import is_caps_span, js_sorted, normalize_text
from quiz_lesson_fix.domain.text import Span, formatted_spans

FORMAT_MAX_SPANS = 3
FORMAT_MAX_SHARE = 0.1
FORMAT_MAX_EMPHASIS_WORDS = 4
FORMAT_MAX_ITALIC_WORDS = 10

FORMAT_HEAVY = declare(
    "E_FORMAT_HEAVY",
    "quick",
    "A section's text has more than 3 formatted spans, or more than a tenth of its "
    "characters formatted.",
    "sorted marks:NORM of all spans",
)
FORMAT_LONG_EMPHASIS = declare(
    "E_FORMAT_LONG_EMPHASIS",
    "quick",
    "A bold or underlined span of more than 4 words.",
    "marks:NORM of the span",
)
FORMAT_LONG_ITALIC = declare(
    "E_FORMAT_LONG_ITALIC",
    "quick",
    "An italic-only span of more than 10 words.",
    "marks:NORM of the span",
)
FORMAT_BOLD = declare("W_FORMAT_BOLD", "quick", "Any bold span in the section.", "sorted spans")
FORMAT_UNDERLINE = declare(
    "W_FORMAT_UNDERLINE", "quick", "Any underlined span in the section.", "sorted spans"
)
FORMAT_CAPS = declare(
    "W_FORMAT_CAPS",
    "quick",
    "A formatted span of capitals (2 in a row), spaces, apostrophes and hyphens.",
    "sorted spans",
)
CODES = (
    FORMAT_HEAVY,
    FORMAT_LONG_EMPHASIS,
    FORMAT_LONG_ITALIC,
    FORMAT_BOLD,
    FORMAT_UNDERLINE,
    FORMAT_CAPS,
)

Spans = list[tuple[Span, Any]]
"""Formatted spans with the id of the text block each is in."""


def is_formatting_finding(finding: Finding) -> bool:
    """A finding of the formatting checks (E_FORMAT_*, W_FORMAT_*)."""
    return finding.code.startswith(("E_FORMAT_", "W_FORMAT_"))


def _key_of(chosen: Spans) -> str:
    return "|".join(js_sorted(f"{'+'.join(s.marks)}:{normalize_text(s.text)}" for s, _ in chosen))


def _detail(chosen: Spans, **params: Any) -> dict[str, Any]:
    return {"block_id": chosen[0][1], "params": {"spans": [s.text for s, _ in chosen], **params}}


def check_formatting(ctx: Section, out: Findings) -> None:
    """The formatted spans of the section's text blocks, in order."""
    spans: Spans = []
    total = 0
    for block, paragraphs in ctx.text_blocks:
        found, chars = formatted_spans(paragraphs)
        spans.extend((span, block.get("id")) for span in found)
        total += chars
    if not spans:
        return
    _check_heavy(ctx, spans, total, out)
    _check_long_spans(ctx, spans, out)
    _check_marks(ctx, spans, out)


def _check_heavy(ctx: Section, spans: Spans, total: int, out: Findings) -> None:
    formatted = sum(utf16_len(s.text) for s, _ in spans)
    count = len(spans)
    if count > FORMAT_MAX_SPANS or formatted / max(total, 1) > FORMAT_MAX_SHARE:
        shown = quoted([s.text for s, _ in spans[:4]]) + (", ..." if count > 4 else "")
        out.add(
            FORMAT_HEAVY,
            _key_of(spans),
            ctx.number,
            f"{ctx.label}'s text has {count} formatted span{'' if count == 1 else 's'} "
            f"({shown}). Keep lesson prose plain: ALL CAPS already marks the vocabulary, and "
            "scattered formatting reads as machine-written. Keep only what a convention "
            "needs (italics for a title or a scientific name), at most "
            f"{FORMAT_MAX_SPANS} spans and a tenth of the text; remove the rest.",
            **_detail(spans, count=count, max=FORMAT_MAX_SPANS, tooMany=count > FORMAT_MAX_SPANS),
        )


def _check_long_spans(ctx: Section, spans: Spans, out: Findings) -> None:
    for span, block_id in spans:
        words = len(js_split_space(span.text))
        emphatic = "bold" in span.marks or "underline" in span.marks
        if emphatic and words > FORMAT_MAX_EMPHASIS_WORDS:
            how = "bold" if "bold" in span.marks else "underlined"
            out.add(
                FORMAT_LONG_EMPHASIS,
                _key_of([(span, block_id)]),
                ctx.number,
                f'{ctx.label}: "{span.text}" is {how} across {words} words. Do not bold or '
                "underline a phrase or a sentence: write it plain and let the wording carry "
                "the weight.",
                **_detail(
                    [(span, block_id)], text=span.text, words=words, bold="bold" in span.marks
                ),
            )
        elif not emphatic and words > FORMAT_MAX_ITALIC_WORDS:
            out.add(
                FORMAT_LONG_ITALIC,
                _key_of([(span, block_id)]),
                ctx.number,
                f'{ctx.label}: "{span.text}" is italic across {words} words. Italics are for '
                "a title or a term, not a sentence: write it plain.",
                **_detail([(span, block_id)], text=span.text, words=words),
            )


def _check_marks(ctx: Section, spans: Spans, out: Findings) -> None:
    bold = [s for s in spans if "bold" in s[0].marks]
    if bold:
        out.add(
            FORMAT_BOLD,
            _key_of(bold),
            ctx.number,
            f"{ctx.label} uses bold ({quoted([s.text for s, _ in bold])}). A lesson hardly "
            "ever needs it: ALL CAPS already marks the words being learned. Remove the bold "
            "unless the author asked for it.",
            **_detail(bold),
        )
    underlined = [s for s in spans if "underline" in s[0].marks]
    if underlined:
        out.add(
            FORMAT_UNDERLINE,
            _key_of(underlined),
            ctx.number,
            f"{ctx.label} uses underlining ({quoted([s.text for s, _ in underlined])}). On a "
            "screen it reads as a link that goes nowhere: remove it unless the author asked "
            "for it.",
            **_detail(underlined),
        )
    caps = [s for s in spans if is_caps_span(s[0].text)]
    if caps:
        out.add(
            FORMAT_CAPS,
            _key_of(caps),
            ctx.number,
            f"{ctx.label} formats ALL-CAPS vocabulary ({quoted([s.text for s, _ in caps])}). "
            "The capitals already mark it: remove the formatting.",
            **_detail(caps),
        )
