"""Text a user reads (the README, docs/, the web page's files, the API's OpenAPI document) never
cites the design's internal spec ("SPEC §8"): a user has no such document."""

from __future__ import annotations

import json
import re
from pathlib import Path

from tests.support.paths import REPO

CITATION = re.compile(r"SPEC\s*§")


def user_facing_files() -> list[Path]:
    static = REPO / "turnstream" / "server" / "static"
    return [REPO / "README.md", *sorted((REPO / "docs").glob("*.md")),
            *sorted(p for p in static.rglob("*") if p.is_file() and "vendor" not in p.parts
                    and p.suffix in (".js", ".html", ".css"))]


def test_no_user_facing_file_cites_the_internal_spec() -> None:
    files = user_facing_files()
    assert len(files) > 10
    cited = [f"{p.relative_to(REPO)}:{n}" for p in files
             for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1) if CITATION.search(line)]
    assert cited == []


def test_the_openapi_document_does_not_cite_it() -> None:
    import turnstream.server.app  # noqa: F401  (registers every route)
    from turnstream.server.api import API

    doc = json.dumps(API.openapi(title="turnstream", version="0"), ensure_ascii=False)
    assert "/api/sessions/{session_id}/turns" in doc
    assert CITATION.findall(doc) == []
