"""README.md is a front page: short, and every relative link in it reaches a file."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import unquote

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
MAX_LINES = 250

# [text](target) and ![alt](target); the target ends at the first space or ")"
_LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")


def _relative_links(text):
    """The link targets of Markdown ``text`` that are paths inside the repository (code
    blocks and inline code left out; no URL scheme, no bare ``#anchor``)."""
    text = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
    text = re.sub(r"`[^`\n]*`", "", text)
    for target in _LINK.findall(text):
        if re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", target) or target.startswith("#"):
            continue
        yield target


def test_readme_is_at_most_250_lines():
    lines = README.read_text().splitlines()
    assert len(lines) <= MAX_LINES, (
        f"README.md has {len(lines)} lines (at most {MAX_LINES}): move the details to docs/"
    )


def test_readme_relative_links_reach_files():
    targets = list(_relative_links(README.read_text()))
    assert targets, "README.md links to nothing in the repository"
    missing = [
        target for target in targets if not (ROOT / unquote(target.split("#", 1)[0])).exists()
    ]
    assert not missing, f"README.md links to files that do not exist: {missing}"


def test_the_link_finder():
    text = (
        "[a](docs/a.md) ![b](docs/figures/b.png) [c](https://example.org/c) [d](#d)\n"
        "`[e](e.md)`\n```\n[f](f.md)\n```\n[g](docs/g.md#part)\n"
    )
    assert list(_relative_links(text)) == ["docs/a.md", "docs/figures/b.png", "docs/g.md#part"]
