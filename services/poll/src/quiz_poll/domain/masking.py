"""Names and e-mails masked before an idea leaves for the model (ADR-072 §14, FACTS D `maskNames`).

Who is masked: the classroom's roster and the accounts that joined the poll. A guest of an
anonymous poll is nobody the platform knows, so a name typed there leaves as typed (accepted by
the product owner on 2026-10-04, open question 43, together with the room's notice).

How (heig-quiz `packages/domain/src/masking.ts`):
- every word of a person's given and family names with 3 letters or more is a name part;
- a word is a letter followed by letters and combining marks, so a hyphen or an apostrophe
  separates two ("Jean-Luc" is "Jean" and "Luc", "N'Diaye" is "N" and "Diaye");
- matching is on whole words, ignoring case and accents (NFD, marks removed, lower-cased): a
  name that is also a word ("Pascal", "Max") is masked everywhere — a lost word costs less than a
  leaked name;
- every e-mail address of those people is replaced too, case-insensitively, before the words.
Each replacement is `[student]`.

One difference: "3 letters" counts letters. The platform counts UTF-16 units, combining marks
included, so a decomposed two-letter part like "Lé" (L, e, U+0301) reached its minimum.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass

import regex

from quiz_contracts.poll import MaskedPerson, PollJoin

MASK = "[student]"
MIN_PART_LETTERS = 3

_WORD = regex.compile(r"\p{L}[\p{L}\p{M}]*")
_MARKS = regex.compile(r"\p{M}+")
_LETTER = regex.compile(r"\p{L}")


def _fold(word: str) -> str:
    """Lower-case, without accents: how a name part and a word are compared."""
    return _MARKS.sub("", unicodedata.normalize("NFD", word)).lower()


@dataclass(frozen=True)
class NameMask:
    """The name parts and e-mails of the people a poll knows, compiled once per pass."""

    parts: frozenset[str]
    emails: re.Pattern[str] | None

    def apply(self, text: str) -> str:
        """`text` with every name part and e-mail of these people replaced by `[student]`."""
        if self.emails is not None:
            text = self.emails.sub(MASK, text)
        if not self.parts:
            return text
        return _WORD.sub(lambda m: MASK if _fold(m[0]) in self.parts else m[0], text)


def name_mask(people: Iterable[MaskedPerson]) -> NameMask:
    """The mask of these people (roster and joined accounts; never guests)."""
    parts: set[str] = set()
    emails: set[str] = set()
    for person in people:
        for word in _WORD.findall(f"{person.given_name} {person.family_name}"):
            if len(_LETTER.findall(word)) >= MIN_PART_LETTERS:
                parts.add(_fold(word))
        if person.email.strip():
            emails.add(person.email.strip())
    pattern = None
    if emails:
        # Longest first, so an address that contains another is replaced whole.
        alternatives = sorted(emails, key=len, reverse=True)
        pattern = re.compile("|".join(re.escape(e) for e in alternatives), re.IGNORECASE)
    return NameMask(frozenset(parts), pattern)


def people_to_mask(roster: Iterable[MaskedPerson], joins: Iterable[PollJoin]) -> list[MaskedPerson]:
    """Whom a poll knows: its classroom's roster and every ACCOUNT that joined it.

    A guest is nobody the platform knows: a person sent with a guest's join is ignored, and an
    anonymous poll (no roster) masks only the accounts that joined it.
    """
    people = list(roster)
    people += [
        join.person
        for join in joins
        if join.participant.kind == "account" and join.person is not None
    ]
    return people
