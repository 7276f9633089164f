"""What the lineage's own checks said: the health verdict a checkpoint (pretraining) or an eval
(fine-tuning) recorded, as the reports show it. Read by :mod:`pipeline.report` (its Health
section) and :mod:`pipeline.scores` (a model's pretraining verdict beside its row)."""

from __future__ import annotations

import json
from pathlib import Path

from kolectra.pipeline.markdown import code, text
from kolectra.pipeline.store.artifacts import Artifact, ArtifactError


def read_json(path: Path) -> dict:
    """A JSON file an artifact may hold (``metrics.json``); {} when it has none. One changed since the
    artifact was built so that it is no JSON object is refused in one line (a report read it unverified:
    ``internal error: JSONDecodeError``)."""
    if not path.is_file():
        return {}
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        doc = e
    if isinstance(doc, dict):
        return doc
    why = f"{type(doc).__name__}: {doc}" if isinstance(doc, Exception) else f"a JSON {type(doc).__name__}"
    raise ArtifactError(f"{path}: not the JSON object it was built as ({why}): changed or damaged since; "
                        f"kolectra artifacts verify {path.parent} names what changed, and building it again "
                        "(--force) replaces it")


def health_of(a: Artifact) -> dict | None:
    """The verdict a checkpoint (pretraining) or an eval (fine-tuning) recorded, None if it has none."""
    health = (a.manifest.get("stats") or {}).get("health")
    if health is None and a.kind == "eval":
        health = read_json(a.path / "metrics.json").get("health")
    return health if isinstance(health, dict) and "status" in health else None


def verdict_text(health: dict) -> str:
    """``ok``, ``learned nothing``, ``unchecked: <why>``: a verdict as the report's readers see it."""
    from kolectra.model.health import status_text  # noqa: PLC0415 - torch-free

    return "learned nothing" if health["status"] == "not_learning" else status_text(health)


UNTRAINED = "untrained (0 steps: the random initialisation, as a study's floor)"


def untrained(a: Artifact) -> bool:
    """A checkpoint of 0 steps (``kolectra study``'s floor): its verdict, ``unchecked: no metrics logged after
    warm-up``, read in reports as a run whose log missed its windows, and was set in bold beside the arms'."""
    return a.kind == "checkpoint" and (a.manifest.get("stats") or {}).get("steps") == 0


def said(health: dict) -> str:
    """``learned nothing: <its problems>``: a verdict and why, in one plain line (the CLI's outputs)."""
    why = "; ".join(health.get("problems") or [])
    return verdict_text(health) + (f": {why}" if why else "")


def seeds_health(store, summary: Artifact) -> str | None:
    """``learned nothing in 2 of 2 seeds (seed 1: ...)`` for a ``--seeds`` summary some of whose runs learned nothing:
    its metrics.json holds medians and no verdict, so its lines said nothing of them (each run's WARNING, once, on
    stderr as it was built; a rerun that reused them, nothing at all), where one run's say its own. ``kolectra
    finetune --seeds`` prints it under the scores, ``kolectra artifacts show`` of the summary as its health."""
    runs = [r for r in (store.parent(summary, pid) for pid in summary.parents) if r is not None]
    failed = [(r, h) for r in runs if (h := health_of(r)) is not None and h["status"] == "not_learning"]
    if not failed:
        return None
    first, health = failed[0]
    why = "; ".join(health.get("problems") or [])
    return (f"learned nothing in {len(failed)} of {len(runs)} seeds (seed {first.manifest['config'].get('seed')}"
            + (f": {why})" if why else ")"))


def health_lines(arts: list[Artifact]) -> list[str]:
    """One bullet per verdict in the lineage (pretraining's, then each fine-tuning's) with its problems,
    and the warnings an eval recorded (rows of the scored file also in the training file ...)."""
    out = []
    for a in arts:
        health = health_of(a)
        stage = {"checkpoint": "pretraining", "eval": "fine-tuning"}.get(a.kind)
        if health is None or stage is None:
            continue
        if untrained(a):
            out.append(f"- {stage} ({code(a.path.name)}): {text(UNTRAINED)}")
            continue
        why = "; ".join(health.get("problems", []))
        out.append(f"- {stage} ({code(a.path.name)}): **{text(verdict_text(health))}**" + (f": {text(why)}" if why else ""))
        out += [f"  - WARNING: {text(w)}" for w in (a.manifest.get("stats") or {}).get("warnings", [])]
    return out
