"""Every doc that shows a `nats …` command says where the CLI comes from (issue 34).

The `nats` CLI is neither in Debian 12 nor on PyPI: a reader following the docs got
`nats: command not found` and no hint. Each document using it links to the section that says
where to get it and what the repository's own tools do without it.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SECTION = "jetstream.md#the-nats-cli"
# A nats CLI command: `nats stream …` inline, or a shell line starting with `nats `.
COMMAND = re.compile(r"`nats (?:--|stream|consumer|kv|req|pub|sub)\b|^nats ", re.M)


def test_each_doc_with_a_nats_command_says_where_to_get_the_cli() -> None:
    docs = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    using = [d for d in docs if COMMAND.search(d.read_text())]
    assert ROOT / "docs" / "jetstream.md" in using
    missing = [
        d.name
        for d in using
        if SECTION not in d.read_text() and "(#the-nats-cli)" not in d.read_text()
    ]
    assert missing == [], f"nats commands without a word on where the CLI comes from: {missing}"
    section = (ROOT / "docs" / "jetstream.md").read_text().split("### The `nats` CLI", 1)[1]
    assert "github.com/nats-io/natscli" in section and "command not found" in section
    assert "quiz_servicekit.dead_letters" in section  # the repository's own equivalent
