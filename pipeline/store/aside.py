"""Complete builds a kill left unpublished in a disk root's ``.tmp``: what ``artifacts list`` and a ref that
finds nothing say of them.

A ``kill -9`` (a power cut) between ``--force``'s two renames leaves the copy published before in ``.tmp``,
beside the new build, and no folder of the id (as does one between sealing a build and publishing it).
``artifacts gc`` and the next build of the id publish it (:meth:`.artifacts.Store.collect`); until then
``artifacts list`` said ``(no artifacts under ROOT)`` and ``artifacts show NAME`` ``no artifact 'NAME'``, as
if it were lost. Nothing here writes: a root may be read where it cannot be written.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

from kolectra.pipeline.store.catalog import ref_matches
from kolectra.pipeline.store.manifest import MANIFEST, ArtifactError, read_manifest
from kolectra.pipeline.store.shared_areas import foreign, made_by, own
from kolectra.pipeline.store.workspace import TMP, TMP_NAME, WORK, live, runs, symlinked


def unpublished(root: Path, kind: str | None = None) -> list[tuple[Path, dict]]:
    """The newest complete build (by its manifest; not hashed) of each id that has one in ``root/.tmp`` (or in a
    run's ``out/``) and no folder under ``root/<kind>``, no process building in it, with its manifest: as the
    sweep, which publishes them, sees them (in a ``.tmp`` that leads out of the root, only those this root marked
    there; never a build another root sharing it marked: :func:`.shared_areas.foreign`)."""
    tmp = root / TMP
    if not tmp.is_dir():
        return []
    shared = symlinked(root, TMP)
    newest: dict[tuple[str, str], tuple[tuple[str, str], Path, dict]] = {}
    # a resumable run's sealed out/ (pretrain --force killed between its renames: the new build stays there,
    # the old copy went to .tmp) is a candidate too, as for the sweep and the next build (the newest wins)
    outs = [(r.out, {"kind": r.kind, "id": r.id}) for r in ([] if shared or symlinked(root, WORK) else runs(root))
            if r.kind and r.id and (r.out / MANIFEST).is_file() and not r.live() and not r.foreign(root)]
    for d, m in [*outs, *((d, TMP_NAME.match(d.name)) for d in sorted(tmp.iterdir()))]:
        if m is None or (kind is not None and m["kind"] != kind) or d.is_symlink() or live(d):
            continue
        if foreign(root, d) or (shared and d.parent == tmp and not own(root, d)):
            continue
        with contextlib.suppress(ArtifactError, OSError, KeyError, TypeError, AttributeError, ValueError):
            manifest = read_manifest(d)
            if manifest["id"] != m["id"] or manifest["kind"] != m["kind"] or not isinstance(manifest["name"], str):
                continue
            if any((root / m["kind"]).glob(f"*-{m['id']}")):
                continue  # published: the sweep deletes it
            # as the sweep picks the one it publishes (Store._sealed): the latest finished, then the last name
            order = (str((manifest.get("provenance") or {}).get("finished", "")), d.name)
            key = (m["kind"], m["id"])
            if key not in newest or order > newest[key][0]:
                newest[key] = (order, d, manifest)
    return [(d, manifest) for _, d, manifest in sorted(newest.values(), key=lambda f: str(f[1]))]


def line(d: Path, manifest: dict) -> str:
    """What one such build is and what publishes it."""
    return (f"{manifest['kind']}/{manifest['name']}-{manifest['id']} is not published: its complete copy is in {d}, "
            "left there by a run stopped as it published it (a kill between --force's two renames?); "
            "`kolectra artifacts gc` (or the next build of it) publishes it")


def named(root: Path, ref: str, kind: str | None) -> str:
    """For a ref that names no artifact: the words on such a build it names, or ''."""
    found = {f"{m['name']}-{m['id']}": (d, m) for d, m in unpublished(root, kind)}
    hits = ref_matches(ref, kind, lambda k: [n for n, (_, m) in found.items() if m["kind"] == k])
    return "; " + "; ".join(line(*found[n]) for _, n in hits) if hits else ""


def left_to_others(root: Path) -> list[tuple[Path, dict, str]]:
    """Complete builds another root sharing ``root/.tmp`` marked there (:func:`.shared_areas.foreign`), no process
    building in them, with their manifest and that root's mark: only that root publishes them, and nothing removes
    them; one whose root is gone (deleted, or moved before 2026-12-02, when the mark followed the path) stays for
    ever, which ``artifacts gc`` of this root says (before, '0 removed' and nothing else)."""
    tmp = root / TMP
    found = []
    for d in sorted(tmp.iterdir()) if tmp.is_dir() else []:
        if TMP_NAME.match(d.name) is None or not foreign(root, d) or d.is_symlink() or live(d):
            continue
        with contextlib.suppress(ArtifactError, OSError):
            found.append((d, read_manifest(d), str(made_by(d))))
    return found
