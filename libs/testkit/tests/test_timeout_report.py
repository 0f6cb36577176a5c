"""The plugin's report of a test that hangs: pytest-timeout fails it, and the report names the
`await` that never returned (the stack of every unfinished asyncio task), so a hang in CI
can be read instead of only timing out the run."""

from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]

HANGING = """
import asyncio

async def waits_for_a_reply_that_never_comes(ev):
    await ev.wait()

async def test_hangs():
    await asyncio.gather(waits_for_a_reply_that_never_comes(asyncio.Event()))

async def test_next_one_still_runs():
    await asyncio.sleep(0)
"""


def test_a_hanging_test_fails_alone_with_the_tasks_it_waited_on(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_hang=HANGING)
    result = pytester.runpytest_subprocess(
        "-p",
        "quiz_testkit.plugin",
        "-o",
        "asyncio_mode=auto",
        "-o",
        "asyncio_default_test_loop_scope=session",
        "-o",
        "asyncio_default_fixture_loop_scope=session",
        "-o",
        "timeout=3",
    )
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*asyncio tasks at the timeout*",
            "*in waits_for_a_reply_that_never_comes*",
            "*await ev.wait()*",
        ]
    )
