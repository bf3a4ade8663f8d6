"""The documents stand on their own (issue 19 item 11): every link in the README and docs/
leads to a file of this repository, and none names the design notes the project was started
from, which a reader of the repository does not have."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

_REPO = Path(__file__).resolve().parents[2]
DOCUMENTS = sorted(
    str(path.relative_to(_REPO)) for path in [_REPO / "README.md", *(_REPO / "docs").glob("*.md")]
)
# Markdown links and images: [text](target) with an optional #anchor.
LINK = re.compile(r"\]\(([^)\s]+)\)")
OUTSIDE = re.compile(r"\.\./shared|\b(?:DESIGN|STYLE|DOMAIN)\.md\b")


@pytest.mark.parametrize("document", DOCUMENTS)
def test_every_link_leads_into_the_repository(document: str) -> None:
    path = _REPO / document
    text = path.read_text()
    broken = []
    for target in LINK.findall(text):
        if re.match(r"[a-z]+:", target) or target.startswith("#"):
            continue  # a URL or an anchor on the same page
        resolved = (path.parent / target.split("#", 1)[0]).resolve()
        if not resolved.is_relative_to(_REPO) or not resolved.exists():
            broken.append(target)
    assert broken == [], f"{document}: links that lead nowhere in the repository"
    assert OUTSIDE.findall(text) == [], f"{document}: names a file outside the repository"
