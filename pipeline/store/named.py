"""What a name shared by several artifacts stands for (:meth:`.catalog.Catalog.resolve`).

``kolectra finetune ... --seeds 1-5 --name kornli`` names its five runs and their summary ``kornli``:
the summary is what the name was given for (its report shows the median and every run), so a name
that one ``--seeds`` summary shares with only the runs it summarises stands for the summary; each
run is still reached by its id or directory. Any other sharing stays ambiguous, and the refusal says
why the summary rule did not apply.
"""

from __future__ import annotations


def is_seeds_summary(art) -> bool:
    """A ``--seeds`` summary: an eval artifact whose request lists the seeds of its runs (its parents)."""
    return art.kind == "eval" and isinstance((art.manifest.get("config") or {}).get("seeds"), list)


def by_name(ref: str, hits: list) -> bool:
    """Whether every hit was found by its name (not by an id or an id prefix): ``kornli``, ``eval/kornli``."""
    name = ref.rpartition("/")[2]
    return all(a.path.name.rpartition("-")[0] == name for a in hits)


def summary_named(ref: str, hits: list):
    """The one ``--seeds`` summary among ``hits`` (complete artifacts of several ids that ``ref``
    names by name) when every other hit is one of its runs, else None."""
    summaries = _summaries(hits)
    if len(summaries) != 1 or not by_name(ref, hits):
        return None
    runs = set(summaries[0].parents)
    return summaries[0] if all(a.id in runs for a in hits if a.id != summaries[0].id) else None


def _summaries(hits: list) -> list:
    """The ``--seeds`` summaries among ``hits``, one a distinct id (one id under two names is one artifact)."""
    return sorted({a.id: a for a in sorted(hits, key=lambda a: str(a.path), reverse=True)
                   if is_seeds_summary(a)}.values(), key=lambda a: str(a.path))


def ambiguous(ref: str, hits: list) -> str:
    """The refusal of ``ref`` naming ``hits`` (several ids): each directory, and where a ``--seeds``
    summary is among them, why the name does not stand for it; a ref that is the name of some and
    an id prefix of others, how to say each (:func:`name_or_id`)."""
    if line := name_or_id(ref, hits):
        return line
    line = (f"{ref!r} is ambiguous: " + ", ".join(sorted(str(a.path) for a in hits))
            + "; give more of the id, or the artifact's directory")
    if "/" not in ref and by_name(ref, hits) and len({a.kind for a in hits}) == len(hits):
        # one name, one artifact of each kind (the demo's 'sample'): kind/name picks one, and reads better than an id
        line += f"; or name its kind: {', '.join(sorted(f'{a.kind}/{ref}' for a in hits))}"
    summaries = _summaries(hits)
    if not summaries or not by_name(ref, hits):
        return line
    rule = "a name that one --seeds summary shares with only the runs it summarises stands for the summary"
    if len(summaries) > 1:
        why = f"{len(summaries)} --seeds summaries share it (" + "; ".join(
            f"{a.kind}/{a.path.name} of seeds {', '.join(map(str, a.manifest['config']['seeds']))}"
            for a in summaries) + ")"
    else:
        others = sorted(f"{a.kind}/{a.path.name}" for a in hits
                        if a.id != summaries[0].id and a.id not in set(summaries[0].parents))
        why = (f"{', '.join(others)} {'is not one' if len(others) == 1 else 'are not'} of the runs "
               f"{summaries[0].kind}/{summaries[0].path.name} summarises")
    return f"{line} ({rule}; here {why})"


def name_or_id(ref: str, hits: list) -> str | None:
    """The refusal of ``ref`` when it is the name of some of ``hits`` and the start of the others' ids
    (``--name 4a51d1`` beside a checkpoint whose id starts so, which the id took silently): which is
    which, and a ref for each that is not ambiguous (``kind/name``, or the whole ``kind/name-id`` where
    that kind also holds an id hit or the name twice; the whole id). None for any other ambiguity."""
    name = ref.rpartition("/")[2]
    named = sorted((a for a in hits if a.path.name.rpartition("-")[0] == name), key=lambda a: str(a.path))
    by_id = sorted((a for a in hits if a.path.name.rpartition("-")[0] != name), key=lambda a: str(a.path))
    if not named or not by_id:
        return None
    kinds = [a.kind for a in named] + [a.kind for a in by_id]

    def said(a) -> str:
        return f"{a.kind}/{name}" if kinds.count(a.kind) == 1 else f"{a.kind}/{a.path.name}"

    return (f"{ref!r} is ambiguous: the name of {', '.join(f'{a.kind}/{a.path.name}' for a in named)} and the start "
            f"of the id of {', '.join(f'{a.kind}/{a.path.name}' for a in by_id)}; say "
            f"{', '.join(said(a) for a in named)} for the name, or {', '.join(a.id for a in by_id)} for the id")
