"""The user docs agree with the code where a reader follows them literally: every stage's version
has its row in docs/artifacts.md's history (a bump without one left readers no account of why every
id changed), and every relative link in README.md and docs/ leads to a file and heading that exist
(docs/install.md linked `docs/tpu.md` from inside docs/)."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]

# the label of each stage's rows in docs/artifacts.md's "Stage versions" table -> its module
STAGES = {
    "corpus": "kolectra.corpus.build",
    "examples": "kolectra.corpus.examples",
    "vocab": "kolectra.vocab.build",
    "checkpoint (pretrain)": "kolectra.model.train",
    "eval: nsmc": "kolectra.finetune.nsmc",
    "eval: korquad": "kolectra.finetune.korquad",
    "eval: classify": "kolectra.finetune.classify",
    "eval: regress": "kolectra.finetune.regress",
    "eval: ner": "kolectra.finetune.ner",
    "eval: probe": "kolectra.finetune.probe",
    "eval: --seeds summary": "kolectra.finetune.seeds",
    "study": "kolectra.pipeline.study.runner",
}


def _history() -> dict[str, list[int]]:
    text = (REPO / "docs" / "artifacts.md").read_text(encoding="utf-8")
    table = text[text.index("## Stage versions"):]
    table = table[:table.index("\n#", 1)]
    rows: dict[str, list[int]] = {}
    for label, version in re.findall(r"^\| ([^|]+?) \| (\d+) \|", table, flags=re.M):
        rows.setdefault(label, []).append(int(version))
    return rows


@pytest.mark.parametrize("label", sorted(STAGES))
def test_every_stage_version_has_its_row_in_the_history(label):
    version = importlib.import_module(STAGES[label]).STAGE_VERSION
    documented = _history().get(label, [])
    assert version == 1 or version in documented, (
        f"{STAGES[label]}.STAGE_VERSION is {version}, but docs/artifacts.md's 'Stage versions' has no "
        f"'| {label} | {version} |' row saying what changed")
    assert not documented or max(documented) <= version, f"{label}: the history names a version past the code's"


def test_the_history_names_no_stage_the_code_lacks():
    assert set(_history()) <= set(STAGES), set(_history()) - set(STAGES)


def _slugs(path: Path) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation but `-` and `_` dropped, spaces as `-`."""
    out, seen, fenced = set(), {}, False
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            fenced = not fenced
        m = None if fenced else re.match(r"#+\s+(.*)", line)
        if m:
            slug = re.sub(r"[^\w\- ]", "", m.group(1).strip().lower()).replace(" ", "-")
            out.add(slug if slug not in seen else f"{slug}-{seen[slug]}")
            seen[slug] = seen.get(slug, 0) + 1
    return out


@pytest.mark.parametrize("page", DOCS, ids=lambda p: p.name)
def test_every_relative_link_leads_to_a_file_and_heading(page):
    for link in re.findall(r"\]\(([^)\s]+)\)", page.read_text(encoding="utf-8")):
        if re.match(r"[a-z]+:", link):
            continue
        target, _, anchor = link.partition("#")
        path = (page.parent / target) if target else page
        assert path.exists(), f"{page.relative_to(REPO)}: ({link}) leads to no file"
        if anchor and path.suffix == ".md":
            assert anchor in _slugs(path), f"{page.relative_to(REPO)}: ({link}) names no heading of {target or page.name}"
