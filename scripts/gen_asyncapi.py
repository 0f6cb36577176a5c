"""Regenerate docs/asyncapi.json from the contracts (`--check` fails when it is stale)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from quiz_contracts.catalog import asyncapi_document

TARGET = Path(__file__).resolve().parent.parent / "docs" / "asyncapi.json"


def render() -> str:
    return json.dumps(asyncapi_document(), indent=2, sort_keys=False, ensure_ascii=False) + "\n"


def main() -> int:
    text = render()
    if "--check" in sys.argv:
        if not TARGET.exists() or TARGET.read_text() != text:
            print("docs/asyncapi.json is stale: run `make docs`", file=sys.stderr)
            return 1
        return 0
    TARGET.write_text(text)
    print(f"wrote {TARGET}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
