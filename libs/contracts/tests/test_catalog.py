"""The AsyncAPI document is generated from the contracts and committed up to date."""

from __future__ import annotations

import json
from pathlib import Path

from quiz_contracts import subjects
from quiz_contracts.catalog import CHANNELS, OPERATIONS, asyncapi_document

ROOT = Path(__file__).resolve().parents[3]


def test_every_versioned_subject_is_in_the_catalog() -> None:
    declared = {
        v for k, v in vars(subjects).items() if k.isupper() and isinstance(v, str) and ".v1." in v
    }
    assert declared == {op.subject for op in OPERATIONS} | {ch.subject for ch in CHANNELS}


def test_committed_asyncapi_document_is_current() -> None:
    committed = json.loads((ROOT / "docs" / "asyncapi.json").read_text())
    assert committed == json.loads(json.dumps(asyncapi_document())), (
        "docs/asyncapi.json is stale: run `make docs`"
    )


def test_every_reference_resolves() -> None:
    doc = asyncapi_document()
    text = json.dumps(doc)
    for ref in {part.split('"')[0] for part in text.split('"$ref": "#/')[1:]}:
        node = doc
        for key in ref.split("/"):
            node = node[key]
