"""The documentation a user reads: a short README, links that resolve, the spec in the repository."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from testcases import ROOT, shared_dir

README = ROOT / "README.md"
DOCS = ROOT / "docs"
SPEC = DOCS / "FEATURE.md"
README_LIMIT_BYTES = 12 * 1024
LINK = re.compile(r"\[[^\]]*\]\(([^)#\s]+)(?:#[^)]*)?\)")


def _pages() -> list[Path]:
    return [README, *sorted(DOCS.glob("*.md"))]


def relative_links(page: Path) -> list[str]:
    """Targets of the page's Markdown links that point into the repository (not URLs or anchors)."""
    return [t for t in LINK.findall(page.read_text(encoding="utf-8")) if "://" not in t and not t.startswith("mailto:")]


def broken_links(page: Path) -> list[str]:
    return [t for t in relative_links(page) if not (page.parent / t).exists()]


def test_readme_stays_a_page():
    size = README.stat().st_size
    assert size <= README_LIMIT_BYTES, f"README.md is {size} B > {README_LIMIT_BYTES} B: move guides and figures to docs/"


@pytest.mark.parametrize("page", _pages(), ids=lambda p: p.name)
def test_every_relative_link_resolves(page):
    assert broken_links(page) == [], f"{page.relative_to(ROOT)} links to files that do not exist"


def test_the_link_check_finds_a_broken_link(tmp_path):
    page = tmp_path / "page.md"
    (tmp_path / "there.md").write_text("x")
    page.write_text("[ok](there.md) [web](https://example.org/x.md) [gone](missing.md#part) [anchor](#top)\n")
    assert broken_links(page) == ["missing.md"]


def _version(text: str) -> str:
    match = re.search(r"^Version ([0-9.]+)", text, re.M)
    return match.group(1) if match else "(no version line)"


def test_the_spec_is_in_the_repository_and_names_its_version():
    text = SPEC.read_text(encoding="utf-8")
    assert text.startswith("# Layerwise split KV cache"), "docs/FEATURE.md is not the spec"
    assert _version(text) != "(no version line)"


def test_the_repositorys_spec_is_the_one_beside_the_checkout():
    """Where the project's shared spec sits beside the checkout (developers' machines and CI),
    the repository's copy must be the same text: a new spec version is copied in with the
    change that follows it."""
    beside = shared_dir() and shared_dir() / "FEATURE.md"
    if beside is None or not beside.is_file():
        pytest.skip("no shared/FEATURE.md beside this checkout (an installed or copied tree)")
    ours, theirs = SPEC.read_text(encoding="utf-8"), beside.read_text(encoding="utf-8")
    assert ours == theirs, (f"docs/FEATURE.md (version {_version(ours)}) differs from {beside} "
                            f"(version {_version(theirs)}): copy the spec into docs/")
