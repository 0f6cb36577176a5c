"""Call and hold ids: UUID-shaped, unique, without a syscall each."""

from __future__ import annotations

import uuid

from quiz_llm_gateway.domain.ids import new_id


def test_ids_are_distinct_version_4_uuids_of_36_characters() -> None:
    ids = [new_id() for _ in range(10_000)]
    assert len(set(ids)) == len(ids)
    for text in ids[:3] + ids[-3:]:
        parsed = uuid.UUID(text)
        assert len(text) == 36 and str(parsed) == text
        assert parsed.version == 4 and parsed.variant == uuid.RFC_4122
    # One process prefix (60 random bits), then the counter.
    assert len({text[:18] for text in ids}) == 1
