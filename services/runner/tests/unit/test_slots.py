"""Back-pressure: slots are taken without waiting and refused at once when all are busy."""

from __future__ import annotations

import pytest

from quiz_contracts.errors import ContractError, ErrorCode
from quiz_runner.slots import Slots


def test_take_until_full_then_runner_busy() -> None:
    slots = Slots(2, retry_after_s=1.5)
    with slots.take() as a, slots.take() as b:
        assert {a, b} == {0, 1} and slots.busy == 2 and slots.free == 0
        with pytest.raises(ContractError) as err, slots.take():
            pass
        assert err.value.code is ErrorCode.runner_busy
        assert err.value.retry_after_s == 1.5
        assert slots.refused == 1
    assert slots.busy == 0


def test_a_slot_comes_back_after_an_error() -> None:
    slots = Slots(1)
    with pytest.raises(RuntimeError), slots.take():
        raise RuntimeError("boom")
    with slots.take() as slot:
        assert slot == 0


def test_slot_numbers_are_distinct_while_held() -> None:
    slots = Slots(3)
    held = [slots.take() for _ in range(3)]
    numbers = [cm.__enter__() for cm in held]
    assert sorted(numbers) == [0, 1, 2]
    held[1].__exit__(None, None, None)
    with slots.take() as again:
        assert again == numbers[1]


def test_at_least_one_slot() -> None:
    with pytest.raises(ValueError):
        Slots(0)
