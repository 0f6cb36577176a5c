"""PersonQuota: one person's settle runs at once, bounded (issue 29, item 6)."""

from __future__ import annotations

import pytest

from quiz_editor_assist.runner_quota import PersonQuota


def test_a_person_holds_at_most_their_bound_and_gets_it_back() -> None:
    quota = PersonQuota(2)
    with quota.hold("alice") as first, quota.hold("alice") as second:
        with quota.hold("alice") as third, quota.hold("bob") as other:
            assert (first, second, third, other) == (True, True, False, True)
            assert quota.running("alice") == 2
    assert quota.running("alice") == 0 and quota.running("bob") == 0
    with quota.hold("alice") as again:
        assert again


def test_a_place_is_given_back_when_the_run_fails() -> None:
    quota = PersonQuota(1)
    with pytest.raises(RuntimeError), quota.hold("alice") as admitted:
        assert admitted
        raise RuntimeError("the runner went away")
    with quota.hold("alice") as admitted:
        assert admitted


def test_the_bound_is_at_least_one() -> None:
    with pytest.raises(ValueError):
        PersonQuota(0)
