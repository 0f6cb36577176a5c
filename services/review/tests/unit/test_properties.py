"""Properties of the review's rules over generated inputs (hypothesis)."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from quiz_review.config import Settings
from quiz_review.domain.findings import kept_findings
from quiz_review.domain.fixes import apply_fix
from quiz_review.domain.night import night_share_usd, share_allows
from quiz_review.domain.paths import MISSING, field_value

TEXT = st.text(alphabet="aAbé \n.[]", max_size=12)


@given(TEXT, TEXT, TEXT)
def test_a_fix_applies_only_to_a_single_occurrence_and_undo_restores_it(
    value: str, from_: str, to: str
) -> None:
    fixed = apply_fix(value, from_, to)
    occurrences = sum(value.startswith(from_, i) for i in range(len(value))) if from_ else 0
    assert (fixed is not None) == (occurrences == 1)
    if isinstance(fixed, str):
        assert len(fixed) == len(value) - len(from_) + len(to)
        undone = apply_fix(fixed, to, from_)
        # Undo works whenever `to` is itself found once in the result, and then restores it.
        if undone is not None:
            assert undone == value


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | TEXT,
    lambda children: (
        st.lists(children, max_size=3)
        | st.dictionaries(
            st.sampled_from(["prompt", "choices", "text", "0", "a"]), children, max_size=3
        )
    ),
    max_leaves=12,
)
PATHS = st.lists(
    st.sampled_from(["prompt", "choices", "text", "0", "1", "a", "", "__proto__"]),
    min_size=1,
    max_size=4,
).map(".".join) | st.just("explanation")
RAW = st.fixed_dictionaries(
    {
        "severity": st.sampled_from(["error", "warn", "notice", "fatal"]),
        "path": PATHS,
        "message": st.text(max_size=1500),
        "fix": st.none() | st.fixed_dictionaries({"from": TEXT, "to": TEXT}),
    }
)


@given(
    st.dictionaries(st.sampled_from(["prompt", "choices", "text"]), JSON),
    TEXT,
    st.lists(RAW, max_size=30),
)
def test_kept_findings_name_real_fields_with_fixes_that_apply(
    config: dict[str, Any], explanation: str, raws: list[dict[str, Any]]
) -> None:
    kept = kept_findings(config, explanation, raws)
    assert len(kept) <= min(20, len(raws))
    for finding in kept:
        value = field_value(config, explanation, finding.path)
        assert value is not MISSING
        assert len(finding.message) <= 1000
        assert finding.message == finding.message.strip()
        if finding.fix is not None:
            assert apply_fix(value, finding.fix.from_, finding.fix.to) is not None


CENTS = st.integers(min_value=0, max_value=10_000_000).map(lambda n: Decimal(n) / 1_000_000)


@given(CENTS, CENTS, CENTS, st.sampled_from([Decimal("0"), Decimal("0.25"), Decimal("1")]))
def test_the_share_never_lets_the_night_cross(
    spent: Decimal, worst: Decimal, cap: Decimal, share: Decimal
) -> None:
    limit = night_share_usd(cap, share)
    if share_allows(spent, worst, limit):
        assert spent + worst <= cap * share
    else:
        assert spent + worst > cap * share


def test_the_night_share_setting_reads_the_adr_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LLM_REVIEW_NIGHT_SHARE", "0.1")
    assert Settings().night_share == Decimal("0.1")
    monkeypatch.setenv("LLM_REVIEW_NIGHT_SHARE", "1.5")
    with pytest.raises(ValueError):
        Settings()
    monkeypatch.delenv("LLM_REVIEW_NIGHT_SHARE")
    assert Settings().night_share == Decimal("0.25")
