"""cloze: a markdown text with `{{…}}` blanks; the blanks are the key, inline in the statement.

heig-quiz `packages/qt-cloze/src/schema.ts` (CLOZE_CONFIG_VERSION 2), `server.ts` and the grammar
of `packages/domain/src/cloze.ts`. A blank's body, after an optional weight `2*`:

- `#3.14`, `#3.14:0.01`, `#3.14:1%`: a number, with an absolute or relative tolerance;
- `/pattern/flags`: a regex (flags among i, m, s, u);
- `=right|wrong|=also right`: a dropdown (an option starting with `=` is correct);
- `Newton|Isaac Newton`: accepted texts.

`\\{{` is two literal braces; inside a blank `\\|`, `\\}`, `\\*`, `\\\\` are literal. The
student reads the text with every blank replaced by the sentinel `⸢<index>⸣`; text, number and
regex blanks all become an opaque input, so no answer, pattern or tolerance leaves.

Draft:

    {"configVersion": 2, "text": "La loi de {{Newton|Isaac Newton}}.",
     "caseSensitive": false, "shuffleOptions": true}
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

from pydantic import model_validator

from quiz_contracts.questions.common import (
    PROMPT_MAX,
    DraftBudget,
    Issue,
    PlatformModel,
    StudentView,
    Utf16,
    js_number_text,
    js_trim,
    refuse,
)
from quiz_contracts.questions.rng import seeded_shuffle, stream_seed
from quiz_contracts.questions.short import ALLOWED_REGEX_FLAGS, is_valid_pattern

CLOZE_CONFIG_VERSION = 2
CLOZE_MAX_BLANKS = 50
CLOZE_MAX_BLANK_LENGTH = 200
SENTINEL_OPEN = "\u2e22"
SENTINEL_CLOSE = "\u2e23"

_WEIGHT = re.compile(r"^([0-9]+(?:\.[0-9]+)?)\*")
_NUMBER = re.compile(r"^#(-?[0-9]+(?:[.,][0-9]+)?)(?::([0-9]+(?:[.,][0-9]+)?)(%?))?$")
_REGEX = re.compile(r"^/([\s\S]*)/([A-Za-z]*)$")
_UNESCAPE = re.compile(r"\\([|}*\\])")


@dataclass(frozen=True)
class ClozeBlank:
    """One parsed blank; the fields used depend on `kind`."""

    index: int
    weight: float
    kind: Literal["text", "select", "number", "regex"]
    answers: list[str] = field(default_factory=list)  # text
    options: list[str] = field(default_factory=list)  # select
    correct: list[int] = field(default_factory=list)  # select
    value: float = 0.0  # number
    tolerance: float = 0.0  # number
    mode: Literal["abs", "rel"] = "abs"  # number
    pattern: str = ""  # regex
    flags: str = ""  # regex


@dataclass(frozen=True)
class ClozeParse:
    """The text with sentinels, the blanks, and the errors (i18n keys) of malformed blanks."""

    template: str
    blanks: list[ClozeBlank]
    errors: list[str]


def _closing_braces(text: str, start: int) -> int:
    """Index of the first unescaped `}}` at or after `start`, or -1."""
    j = start
    while j < len(text):
        if text[j] == "\\":
            j += 2
            continue
        if text.startswith("}}", j):
            return j
        j += 1
    return -1


def _alternatives(body: str) -> list[str]:
    """The body cut on unescaped `|`."""
    out: list[str] = []
    current = ""
    i = 0
    while i < len(body):
        if body[i] == "\\" and i + 1 < len(body):
            current += body[i : i + 2]
            i += 2
            continue
        if body[i] == "|":
            out.append(current)
            current = ""
        else:
            current += body[i]
        i += 1
    out.append(current)
    return out


def _unescape(text: str) -> str:
    return _UNESCAPE.sub(r"\1", text)


def _blank(body: str, index: int) -> ClozeBlank | str:
    """The blank a body describes, or the i18n key of what is wrong with it."""
    rest = body
    weight = 1.0
    found = _WEIGHT.match(rest)
    if found:
        weight = float(found.group(1))
        rest = rest[found.end() :]
    if not js_trim(rest):
        return "cloze.empty_blank"
    if rest.startswith("#"):
        number = _NUMBER.match(js_trim(rest))
        if number is None:
            return "cloze.invalid_number"
        value = float(number.group(1).replace(",", "."))
        raw = 0.0 if number.group(2) is None else float(number.group(2).replace(",", "."))
        relative = number.group(3) == "%"
        return ClozeBlank(
            index,
            weight,
            "number",
            value=value,
            tolerance=raw / 100 if relative else raw,
            mode="rel" if relative else "abs",
        )
    regex = _REGEX.match(rest)
    if regex is not None:
        pattern, flags = regex.group(1), regex.group(2)
        if not ALLOWED_REGEX_FLAGS.match(flags):
            return "cloze.invalid_regex_flags"
        if not is_valid_pattern(pattern, flags):
            return "cloze.invalid_regex"
        return ClozeBlank(index, weight, "regex", pattern=pattern, flags=flags)
    alternatives = _alternatives(rest)
    if any(a.startswith("=") for a in alternatives):
        options: list[str] = []
        correct: list[int] = []
        for alternative in alternatives:
            right = alternative.startswith("=")
            label = js_trim(_unescape(alternative[1:] if right else alternative))
            if not label:
                return "cloze.empty_option"
            if right:
                correct.append(len(options))
            options.append(label)
        return ClozeBlank(index, weight, "select", options=options, correct=correct)
    answers = [a for a in (js_trim(_unescape(a)) for a in alternatives) if a]
    if not answers:
        return "cloze.empty_blank"
    return ClozeBlank(index, weight, "text", answers=answers)


def parse_cloze(text: str) -> ClozeParse:
    """Parse the authoring text; total: a malformed blank is an error and stays literal."""
    source = text.replace(SENTINEL_OPEN, "").replace(SENTINEL_CLOSE, "")
    blanks: list[ClozeBlank] = []
    errors: list[str] = []
    out: list[str] = []
    i = 0
    while i < len(source):
        if source.startswith("\\{{", i):
            out.append("{{")
            i += 3
            continue
        if not source.startswith("{{", i):
            out.append(source[i])
            i += 1
            continue
        end = _closing_braces(source, i + 2)
        if end == -1:
            errors.append("cloze.unterminated")
            out.append("{{")
            i += 2
            continue
        parsed = _blank(source[i + 2 : end], len(blanks))
        if isinstance(parsed, str):
            errors.append(parsed)
            out.append(source[i : end + 2])
        else:
            blanks.append(parsed)
            out.append(f"{SENTINEL_OPEN}{parsed.index}{SENTINEL_CLOSE}")
        i = end + 2
    return ClozeParse("".join(out), blanks, errors)


def _number(value: float) -> str:
    return js_number_text(int(value) if value.is_integer() else value)


def describe_blank(blank: ClozeBlank) -> str:
    """The key of one blank as the teacher reads it (`describeBlank`)."""
    if blank.kind == "text":
        return " | ".join(blank.answers)
    if blank.kind == "select":
        return " | ".join(blank.options[i] for i in blank.correct)
    if blank.kind == "number":
        if blank.tolerance == 0:
            return _number(blank.value)
        if blank.mode == "rel":
            return f"{_number(blank.value)} ± {_number(blank.tolerance * 100)} %"
        return f"{_number(blank.value)} ± {_number(blank.tolerance)}"
    return f"/{blank.pattern}/{blank.flags}"


class ClozeConfig(PlatformModel):
    """A fill-in-the-blanks question. Takes [[…]] parameters (ADR-056)."""

    config_version: Literal[2]
    text: Annotated[str, Utf16(1, PROMPT_MAX)]
    case_sensitive: bool = False
    shuffle_options: bool = True

    @model_validator(mode="after")
    def _blanks(self) -> ClozeConfig:
        parse = parse_cloze(self.text)
        issues = [Issue(("text",), key) for key in parse.errors]
        if not parse.blanks:
            issues.append(Issue(("text",), "cloze.no_blank"))
        if len(parse.blanks) > CLOZE_MAX_BLANKS:
            issues.append(Issue(("text",), "cloze.too_many_blanks"))
        refuse(issues)
        return self


def empty_cloze_draft() -> dict[str, Any]:
    """`emptyClozeDraft()`."""
    return {
        "configVersion": CLOZE_CONFIG_VERSION,
        "text": "",
        "caseSensitive": False,
        "shuffleOptions": True,
    }


def _weight(value: float) -> int | float:
    return int(value) if value.is_integer() else value


def cloze_to_student(config: ClozeConfig, view: StudentView) -> dict[str, Any]:
    """`{template, blanks}`: sentinels in the text; inputs, or dropdowns with canonical ids."""
    parse = parse_cloze(config.text)
    shuffle = view.shuffle and config.shuffle_options
    blanks: list[dict[str, Any]] = []
    for blank in parse.blanks:
        if blank.kind != "select":
            blanks.append(
                {
                    "index": blank.index,
                    "weight": _weight(blank.weight),
                    "kind": "input",
                    "numeric": blank.kind == "number",
                }
            )
            continue
        options = [{"id": i, "label": label} for i, label in enumerate(blank.options)]
        if shuffle:
            seed = stream_seed(view.seed, view.item_id, f"options:{blank.index}")
            options = seeded_shuffle(options, seed)
        blanks.append(
            {
                "index": blank.index,
                "weight": _weight(blank.weight),
                "kind": "select",
                "options": options,
            }
        )
    return {"template": parse.template, "blanks": blanks}


def cloze_to_solution(config: ClozeConfig) -> dict[str, Any]:
    """`{blanks: [{index, expected}]}`."""
    return {
        "blanks": [
            {"index": b.index, "expected": describe_blank(b)}
            for b in parse_cloze(config.text).blanks
        ]
    }


CLOZE_BUDGET = DraftBudget(text=PROMPT_MAX + 512, values=16)
