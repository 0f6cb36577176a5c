"""The lesson tool's document, its check findings and the wire bodies of "Fix with AI".

Shapes and field names are the lesson tool's (repository Spelling-Creator/spelling-creator):
the stored document of `packages/core/src/lessonBuild.js` / `lessonText.js`, the finding of
`lessonChecks.js`, the `replace_block` operation of `lessonPatch.js`, and the fix request and
reply of `apps/api/src/routes/ai.js` + `apps/api/src/lib/lessonFix.js` (seed 003 "AI lesson
fixes"). The document models are permissive the way the tool's checks are: a field the tool
stores that is not listed here is kept (extra="allow"), so a lesson read and dumped with
`exclude_unset=True` comes back as it was sent.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    ModelWrapValidatorHandler,
    PrivateAttr,
    SerializerFunctionWrapHandler,
    model_serializer,
    model_validator,
)

from quiz_contracts.base import WireModel

MAX_FIX_DOC_CHARS = 300_000
"""The largest lesson a fix request may carry, in characters of its reduced JSON (413 above)."""

MAX_FIX_BODY_BYTES = 6 * MAX_FIX_DOC_CHARS + 65_536
"""The largest fix or check body in bytes, a transport guard only: a lesson at MAX_FIX_DOC_CHARS
as compact JSON written by the most verbose client (every UTF-16 unit escaped as `\\uXXXX`, six
bytes), plus the finding's key and the verification token. A bigger body is refused with 413
payload_too_large before it is read; a smaller one is measured as the tool measures it, in
characters (`JSON.stringify(doc).length`), whatever its bytes. Under what a NATS hop carries
(`subjects.NATS_MAX_PAYLOAD`, 8 MiB)."""

FIX_ATTEMPTS = 2
"""How many times the model is asked for one fix before the service answers 422."""

QUESTION_TYPES = (
    "number",
    "single",
    "multiple",
    "multiple_open",
    "paraphrase",
    "open",
    "wyr",
    "background",
)
"""The eight question kinds (`QUESTION_TYPES`, lessonBuild.js), in the tool's order."""

QuestionType = Literal[
    "number", "single", "multiple", "multiple_open", "paraphrase", "open", "wyr", "background"
]
FindingLevel = Literal["error", "warning"]
Mark = Literal["bold", "italic", "underline"]


class LessonModel(BaseModel):
    """A part of a stored lesson: unknown fields are kept, so nothing the tool stores is lost.

    Serialised with only the fields that were set: a lesson read and written again has the
    tool's exact shape (no `"answers": null` added to a single question).
    """

    model_config = ConfigDict(extra="allow", populate_by_name=True)

    # No return annotation: the JSON schema of the serialised form stays the model's own.
    @model_serializer(mode="wrap")
    def _only_fields_set(self, handler: SerializerFunctionWrapHandler):
        data = handler(self)
        if isinstance(data, dict):
            for name in type(self).model_fields.keys() - self.model_fields_set:
                data.pop(name, None)
        return data


# ---- Rich text (a text block's `content`, a tiptap document) --------------------------------


class TextMark(LessonModel):
    """One mark of a text run; only bold, italic and underline survive normalisation."""

    type: str = Field(description="bold, italic or underline; any other mark is dropped.")


class TextRun(LessonModel):
    """`{type: "text", text, marks?}`: words with the same marks (no line breaks inside)."""

    type: Literal["text"]
    text: str
    marks: list[TextMark | str] | None = Field(
        default=None,
        description="Omitted on a plain run; stored in the order bold, italic, underline.",
    )


class FootnoteAttrs(LessonModel):
    """A footnote: cites a source (`sourceId`, optional `locator`), carries a `note`, or both."""

    sourceId: str | None = Field(
        default=None, description="A source id of the lesson (^[A-Za-z0-9_-]{1,64}$)."
    )
    locator: str = Field(default="", description='Where in the source, e.g. "p. 12"; ≤ 200.')
    note: str = Field(default="", description="Free text, ≤ 2000 characters.")


class FootnoteNode(LessonModel):
    """`{type: "footnote", attrs}`: an inline footnote, numbered in reading order."""

    type: Literal["footnote"]
    attrs: FootnoteAttrs


class Paragraph(LessonModel):
    """One paragraph (one line of markup); `content` is omitted when it is empty."""

    type: Literal["paragraph"]
    content: list[TextRun | FootnoteNode | dict[str, Any]] | None = None


class RichTextDoc(LessonModel):
    """`{type: "doc", content: [paragraph…]}`; nodes outside the schema keep only their words."""

    type: Literal["doc"]
    content: list[Paragraph | dict[str, Any]] = Field(default_factory=list)


# ---- Blocks ---------------------------------------------------------------------------------


class ListItem(LessonModel):
    """`{id, text}`: a spelling word, an orange answer or a number step."""

    id: str | None = None
    text: str = ""


Items = list[ListItem | str]


class Source(LessonModel):
    """A source footnotes cite as ^[@id]: `{id, title?, author?, publisher?, year?, url?}`."""

    id: str


class TextBlock(LessonModel):
    """A passage: plain `text` (one paragraph per line) or `content` (wins when present)."""

    id: str | None = None
    type: Literal["text"]
    text: str | None = None
    content: RichTextDoc | dict[str, Any] | None = None


class SpellingBlock(LessonModel):
    """The section's warm-up spelling words."""

    id: str | None = None
    type: Literal["spelling"]
    words: Items = Field(default_factory=list)


class QuestionBlock(LessonModel):
    """A question: `prompt` plus its kind's fields (`answer`, `answers`, `steps`)."""

    id: str | None = None
    type: Literal["question"]
    questionType: QuestionType
    prompt: str = ""
    answer: str | int | float | None = Field(
        default=None, description="single, background and number (a string; a number accepted)."
    )
    answers: Items | None = Field(default=None, description="multiple and multiple_open.")
    steps: Items | None = Field(default=None, description="number: the word problem's solution.")


class ImageRef(LessonModel):
    """An image by content hash."""

    hash: str
    mime: str | None = None
    ext: str | None = None


class ImageBlock(LessonModel):
    """A picture; never read by the checks, and reduced to `{id, type}` in a fix request."""

    id: str | None = None
    type: Literal["image"]
    image: ImageRef | dict[str, Any] | str | None = None


class VaktLink(LessonModel):
    """A link of a VAKT activity."""

    id: str | None = None
    label: str = ""
    url: str = ""


class VaktBlock(LessonModel):
    """A regulation break (not a question): the activity, links and an optional image."""

    id: str | None = None
    type: Literal["vakt"]
    text: str = ""
    links: list[VaktLink] = Field(default_factory=list)


Block = Annotated[
    TextBlock | SpellingBlock | QuestionBlock | ImageBlock | VaktBlock,
    Field(discriminator="type"),
]


class Section(LessonModel):
    """A section: its stable id, its name and its blocks in order."""

    id: str | None = None
    name: str = ""
    blocks: list[Block] = Field(default_factory=list)


class Lesson(LessonModel):
    """A stored lesson: `{title, sources?, sections}`."""

    title: str = ""
    sources: list[Source] | None = None
    sections: list[Section]


# ---- Findings -------------------------------------------------------------------------------


class Finding(WireModel):
    """One lesson check finding (`validateLesson`, lessonChecks.js)."""

    level: FindingLevel
    code: str = Field(description='Stable code, e.g. "E_GROUNDING_SINGLE".')
    key: str = Field(description='"<CODE>:<identity>", stable across section moves.')
    section: int | None = Field(description="1-based section number; null when lesson-wide.")
    sectionId: str | None = Field(description="That section's id, when it has one.")
    blockId: str | None = Field(description="The block to go to, or null.")
    itemId: str | None = Field(description="The one word or answer of that block, or null.")
    params: dict[str, Any] = Field(description="The finding's facts as data, for a UI to word.")
    message: str = Field(description="Prose for a model: the section, the value and the fix.")


class _CarriesLesson(WireModel):
    """A body holding a lesson (`doc`, or `lesson`), validated by the `Lesson` model and kept
    as it was sent.

    The checks read the lesson as the tool does, as plain JSON data; `lesson_data` is that
    data, validated but never rebuilt: dumping a 300,000-character lesson back from its models
    costs more than checking it.
    """

    doc: Lesson = Field(validation_alias=AliasChoices("doc", "lesson"))
    _sent: Any = PrivateAttr(default=None)

    @model_validator(mode="wrap")
    @classmethod
    def _keep_the_lesson_as_sent(cls, data: Any, handler: ModelWrapValidatorHandler[Any]) -> Any:
        body = handler(data)
        if isinstance(data, dict):
            # The aliases in pydantic's order: `doc` wins over `lesson`.
            body._sent = data["doc"] if "doc" in data else data.get("lesson")
        return body

    @property
    def lesson_data(self) -> dict[str, Any]:
        """The lesson as JSON data: as sent when validated from JSON, else dumped."""
        if isinstance(self._sent, dict):
            return self._sent
        dumped: dict[str, Any] = self.doc.model_dump(mode="json")
        return dumped


class CheckRequest(_CarriesLesson):
    """`POST /app/api/lessons/check` and `lesson.v1.check`: the lesson to check."""


class CheckReply(WireModel):
    """The findings, as `validateLesson` returns them: errors, then warnings, in check order."""

    errors: list[Finding]
    warnings: list[Finding]


# ---- Operations -----------------------------------------------------------------------------


class TextBlockInput(LessonModel):
    """A text block in the input shape: `text` is markup (`**`, `*`, `<u>`, `^[…]`)."""

    type: Literal["text"]
    text: str | None = None
    content: RichTextDoc | dict[str, Any] | None = Field(
        default=None, description="A stored document, used when `text` is absent."
    )


class SpellingBlockInput(LessonModel):
    """A spelling block in the input shape: words as plain strings."""

    type: Literal["spelling"]
    words: list[str]


class QuestionBlockInput(LessonModel):
    """A question in the input shape: every list as plain strings."""

    type: Literal["question"]
    questionType: QuestionType
    prompt: str
    answer: str | int | float | None = None
    answers: list[str] | None = None
    steps: list[str] | None = None


BlockInput = Annotated[
    TextBlockInput | SpellingBlockInput | QuestionBlockInput, Field(discriminator="type")
]


class ReplaceBlock(WireModel):
    """`replace_block` (lessonPatch.js): rebuild the block from `block`; it keeps its id."""

    op: Literal["replace_block"] = "replace_block"
    blockId: str
    block: BlockInput


class MoveBlock(WireModel):
    """`move_block` (lessonPatch.js): `index` is the position after removal; quick fixes only."""

    op: Literal["move_block"] = "move_block"
    blockId: str
    index: int
    sectionId: str | None = Field(default=None, description="Target section; its own if null.")


Operation = Annotated[ReplaceBlock | MoveBlock, Field(discriminator="op")]


# ---- "Fix with AI" --------------------------------------------------------------------------


class FixRequest(_CarriesLesson):
    """`POST /app/api/lessons/fix`: the whole lesson, the finding's key, the verification token.

    Field names are the tool's (`doc`, `findingKey`, `token`, routes/ai.js); `lesson`, `key`
    and `verification` are accepted too.
    """

    findingKey: str = Field(
        min_length=1, max_length=20_000, validation_alias=AliasChoices("findingKey", "key")
    )
    token: str = Field(
        default="",
        max_length=4096,
        validation_alias=AliasChoices("token", "verification"),
        description="The Turnstile-compatible human-verification token.",
    )


class FixCall(_CarriesLesson):
    """`lesson.v1.fix`: a fix asked by another service on behalf of `user`.

    The calling service vouches for the person (the bus is not the browser: no human
    verification here); the fix is still rate-limited per `user` and billed to them.
    """

    doc: Lesson = Field(validation_alias=AliasChoices("doc", "lesson"))
    findingKey: str = Field(
        min_length=1, max_length=20_000, validation_alias=AliasChoices("findingKey", "key")
    )
    user: str = Field(
        min_length=1,
        max_length=200,
        pattern=r"\S",
        description="The person the fix is for: the rate limit's key and the model call's user.",
    )


class FixReply(WireModel):
    """A fix that passed checkFix: `replace_block` operations, why, and how many new warnings."""

    operations: list[ReplaceBlock]
    explanation: str
    newWarnings: int = Field(ge=0, description="Warnings the fix adds; they never block it.")


class FixEdit(WireModel):
    """One edit of the model's reply (FIX_SCHEMA): an empty field means "keep it"."""

    blockId: str
    text: str = ""
    words: list[str] = Field(default_factory=list)
    questionType: str = ""
    prompt: str = ""
    answer: str = ""
    answers: list[str] = Field(default_factory=list)
    steps: list[str] = Field(default_factory=list)


class FixProposal(WireModel):
    """The model's reply (FIX_SCHEMA): an explanation for the author and one edit per block."""

    explanation: str
    edits: list[FixEdit]


__all__ = [
    "FIX_ATTEMPTS",
    "MAX_FIX_BODY_BYTES",
    "MAX_FIX_DOC_CHARS",
    "QUESTION_TYPES",
    "Block",
    "BlockInput",
    "CheckReply",
    "CheckRequest",
    "Finding",
    "FindingLevel",
    "FixCall",
    "FixEdit",
    "FixProposal",
    "FixReply",
    "FixRequest",
    "FootnoteAttrs",
    "FootnoteNode",
    "ImageBlock",
    "ImageRef",
    "Lesson",
    "ListItem",
    "Mark",
    "MoveBlock",
    "Operation",
    "Paragraph",
    "QuestionBlock",
    "QuestionBlockInput",
    "QuestionType",
    "ReplaceBlock",
    "RichTextDoc",
    "Section",
    "Source",
    "SpellingBlock",
    "SpellingBlockInput",
    "TextBlock",
    "TextBlockInput",
    "TextMark",
    "TextRun",
    "VaktBlock",
    "VaktLink",
]
