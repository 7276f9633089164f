"""Which stage version this kolectra builds for each kind, and the one line a stage writes when it
reads a parent built by another version (an upgrade over a store of older artifacts).

An artifact is never rebuilt behind the user's back: a parent published by an earlier kolectra is
used as it is, with the rules of the version that built it (its tokenisation, filters, format),
since its id, and its children's, name that build. So the stage says so, once per artifact and
process: which kind and version it is, which this kolectra builds, and the command that rebuilds
it under the current rules (docs/artifacts.md, "Upgrading kolectra").

The current versions are read from the stage modules' ``STAGE_VERSION = N`` lines without
importing them when they are not loaded yet: the corpus and examples modules import Beam (4-5 s),
which pretraining never needs (``tests/test_stage_versions.py`` checks the reading against the
imported constants).
"""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

from kolectra.core.shown import shown
from kolectra.core.stage import warn

# the module whose STAGE_VERSION a kind's request records (pipeline/stages.py)
MODULES = {"corpus": "kolectra.corpus.build", "vocab": "kolectra.vocab.build",
           "examples": "kolectra.corpus.examples", "checkpoint": "kolectra.model.train"}
EVAL_TASKS = ("nsmc", "korquad", "classify", "regress", "ner", "probe")  # an eval's version is its task module's
_LINE = re.compile(r"^STAGE_VERSION = (\d+)\b", re.MULTILINE)
_said: set[str] = set()  # the artifacts (their directories) told about in this process


def current(kind: str, task: object = None) -> int | None:
    """The stage version this kolectra's ``kind`` stage builds (an eval's: its ``task``'s; None for a
    kind or task without one here)."""
    name = MODULES.get(kind) or (f"kolectra.finetune.{task}" if kind == "eval" and task in EVAL_TASKS else None)
    return None if name is None else version_of(name)


def current_of(manifest: dict) -> int | None:
    """The stage version this kolectra builds for an artifact like ``manifest``'s: an eval's, its task's
    (a ``--seeds`` summary's, the summary's); None where there is none here."""
    kind, config = manifest.get("kind"), manifest.get("config") or {}
    if kind != "eval":
        return current(kind)
    return version_of("kolectra.finetune.seeds") if "seeds" in config else current("eval", config.get("task"))


def version_of(name: str) -> int:
    """The ``STAGE_VERSION`` of the stage module ``name``, read from its source where it is not imported yet."""
    module = sys.modules.get(name)
    if module is not None:
        return int(module.STAGE_VERSION)
    spec = importlib.util.find_spec(name)
    found = _LINE.search(Path(spec.origin).read_text(encoding="utf-8")) if spec and spec.origin else None
    if found is None:  # not a source file (a frozen or compiled-only install): the module itself
        return int(importlib.import_module(name).STAGE_VERSION)
    return int(found[1])


def rebuild_hint(art) -> str:
    """The command that builds ``art``'s request under this kolectra's rules, from its own parents."""
    parents = {}
    for ref in art.manifest.get("parent_refs", []):
        if isinstance(ref, dict) and isinstance(ref.get("kind"), str) and isinstance(ref.get("id"), str):
            parents.setdefault(ref["kind"], ref["id"])
    if art.kind == "corpus":
        return "kolectra corpus --input on its inputs (kolectra artifacts show lists them)"
    if art.kind == "vocab":
        return f"kolectra vocab --corpus {parents.get('corpus', 'CORPUS')}"
    if art.kind == "examples":
        return f"kolectra examples --corpus {parents.get('corpus', 'CORPUS')} --vocab {parents.get('vocab', 'VOCAB')}"
    return f"kolectra pretrain --examples {parents.get('examples', 'EXAMPLES')}"


def older_evals(arts) -> list[tuple]:
    """``(artifact, task, its version, this kolectra's)`` for each eval among ``arts`` that an earlier
    kolectra's task built (a ``--seeds`` summary aside: its runs are evals of their own)."""
    out = []
    for a in arts:
        config = a.manifest.get("config") or {}
        task, then = config.get("task"), a.manifest.get("stage_version")
        now = current("eval", task) if "seeds" not in config else None
        if now is not None and isinstance(then, int) and then < now:
            out.append((a, task, then, now))
    return out


def note_other_version(art) -> None:
    """One line when ``art`` (a parent a stage is about to read) was built by another stage version
    than this kolectra's; nothing for the current one, an eval, or a directory other code built."""
    now, then = current(art.kind), art.manifest.get("stage_version")
    if now is None or not isinstance(then, int) or then == now or str(art.path) in _said:
        return
    _said.add(str(art.path))
    if then < now:
        warn(f"{art.kind}/{shown(art.path.name)} was built by an earlier kolectra ({art.kind} stage version {then}; "
             f"this one builds {now}): used as it is, with the rules it was built with (docs/artifacts.md, "
             f"'Stage versions', says what changed since); to rebuild it under this version's rules: "
             f"{rebuild_hint(art)} with its settings (kolectra artifacts show {art.id}), then build on the new one")
    else:
        warn(f"{art.kind}/{shown(art.path.name)} was built by a newer kolectra ({art.kind} stage version {then}; "
             f"this one builds {now}): used as it is, but this kolectra may not read everything it holds; "
             "upgrade kolectra to the version that built it")
