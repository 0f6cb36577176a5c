"""What the quota on each reply costs (issue 31 item 6): CPU per `Repository.quota` read (one
plain statement in a read transaction, what every paid reply made after its settle until
issue 31 point 6 took the quota from the settle and the rate check instead)
against the `day_totals` read the reports make (compiled Core), on SQLite, in the same run,
interleaved twice; prints µs per read and the ratio quota ÷ day_totals.

Run: `uv run python bench/llm_gateway_quota.py [--reads 2000]`. Figures: docs/llm-gateway.md
("The quota on the reply").
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
import time
from collections.abc import Awaitable, Callable
from datetime import date
from typing import Any

from quiz_llm_gateway.rows import Repository
from quiz_llm_gateway.rows.tables import MIGRATIONS
from quiz_servicekit.db import Database
from quiz_servicekit.migrate import upgrade


async def cpu_per_read_us(read: Callable[[], Awaitable[Any]], reads: int) -> float:
    """Process CPU µs per read, after 100 warm-up reads."""
    for _ in range(100):
        await read()
    start = time.process_time()
    for _ in range(reads):
        await read()
    return 1e6 * (time.process_time() - start) / reads


async def main(reads: int) -> None:
    url = f"sqlite:///{os.path.join(tempfile.mkdtemp(), 'gateway.db')}"
    upgrade(url, MIGRATIONS)
    db = Database(url, threads=4)
    repo = Repository(db)
    day = date(2026, 12, 7)
    figures: dict[str, list[float]] = {"day_totals": [], "quota": []}
    for _ in range(2):
        figures["day_totals"].append(await cpu_per_read_us(lambda: repo.day_totals(day), reads))
        figures["quota"].append(
            await cpu_per_read_us(lambda: repo.quota(day, "generate:teacher-1", 0.0), reads)
        )
    for name, values in figures.items():
        print(f"{name:10s} CPU per read: {', '.join(f'{v:.0f} µs' for v in values)}")
    ratios = [q / d for q, d in zip(figures["quota"], figures["day_totals"], strict=True)]
    print(f"quota ÷ day_totals: {', '.join(f'{r:.2f}' for r in ratios)}")
    db.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reads", type=int, default=2000)
    asyncio.run(main(parser.parse_args().reads))
