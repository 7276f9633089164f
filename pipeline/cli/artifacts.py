"""``kolectra artifacts list | show | verify | gc``: the store as the command line shows it.

``list`` prints one row per complete artifact with what tells two of the same name apart: when it
was built, its size, its parents (or raw inputs) and its key settings. The key settings are a few
per kind (:data:`KEY_SETTINGS`: a vocab's recipe and size, a checkpoint's preset, objective,
steps and seed, ...), plus every other config value on which artifacts of the same kind and name differ,
so two ``sample`` checkpoints read as ``train.steps=600`` against ``train.steps=2000``; the stage
version and the raw inputs count as such values (two evals of one name on other test files).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path

from kolectra.core import storage, streams
from kolectra.core.config import flat_dict
from kolectra.core.shown import shown, shown_json
from kolectra.core.stage import size_text
from kolectra.core.words import reasons
from kolectra.pipeline import stage_versions
from kolectra.pipeline.cli.errors import reader_gone
from kolectra.pipeline.store import aside, copies, inputs, workspace
from kolectra.pipeline.store.artifacts import KINDS, Artifact, Store
from kolectra.pipeline.store.manifest import commit_label
from kolectra.pipeline.store.remote_runs import cache_root
from kolectra.pipeline.store.shared_areas import mark

# the settings a person tells artifacts of a kind apart by (dotted config keys)
KEY_SETTINGS = {
    "corpus": ("language", "min_chars", "near_dup_threshold", "mask_pii"),
    "vocab": ("recipe", "vocab_size"),
    "examples": ("max_seq_length", "packing"),
    # the seed too: two pretrainings of other names that differ by it alone (a study's second pretraining seed) read
    # the same otherwise (before 2026-12-02)
    "checkpoint": ("preset", "objective.objective", "train.steps", "model.embedding_sharing", "seed"),
    "eval": ("task", "preset", "seed"),
    "study": ("flops", "points", "preset"),
}
MAX_OTHER = 4  # further differing settings shown per row; the rest is counted


def add_artifacts(p: argparse.ArgumentParser, common) -> None:
    verbs = p.add_subparsers(dest="verb", required=True, metavar="VERB")
    # RawDescriptionHelpFormatter: each example stays one line a reader can copy (the default formatter
    # wrapped verify's, leaving "kolectra artifacts verify" alone on a line, which lacks its REF)
    raw = argparse.RawDescriptionHelpFormatter
    v = verbs.add_parser("list", help="every complete artifact under the root, with what tells them apart",
                         formatter_class=raw, epilog="example:\n  kolectra artifacts list --kind checkpoint")
    common(v, with_config=False)
    v.add_argument("--kind", default=None, choices=KINDS, help="only this kind (default: every kind)")
    v = verbs.add_parser("show", help="manifest summary and lineage tree back to the raw inputs",
                         formatter_class=raw,
                         epilog="example:\n  kolectra artifacts show sample-nsmc  (a name, id, id prefix or directory)")
    common(v, with_config=False)
    v.add_argument("ref", help="the artifact: its directory, name-id, id, an unambiguous id prefix (6 characters or more) or its name")
    v.add_argument("--json", action="store_true", help="print the whole manifest as JSON (default: a summary)")
    v = verbs.add_parser("verify", help="re-hash every file; non-zero exit on any mismatch",
                         formatter_class=raw,
                         epilog="example:\n  kolectra artifacts verify artifacts/checkpoint/sample-0123456789abcdef\n"
                                "on a bucket, from one listing (reading only objects whose store checksum changed):\n"
                                "  kolectra artifacts verify --quick s3://bucket/kolectra/checkpoint/sample-0123456789abcdef")
    common(v, with_config=False)
    v.add_argument("ref", help="the artifact: its directory, name-id, id, an unambiguous id prefix (6 characters or more) or its name")
    v.add_argument("--quick", action="store_true",
                   help="check what a stage checks before reading an artifact: for one kept in a store (s3://, "
                        "gs://) one listing against the sizes and store checksums (ETag, generation) its manifest "
                        "recorded, the manifest's own digests and its parents, downloading only an object whose checksum "
                        "differs (a copy's: its bytes decide); for one in a "
                        "local directory the same as without it (default: every object or file read through SHA-256)")
    v.add_argument("--lineage", action="store_true",
                   help="also verify every artifact it was built from, back to the corpus (each once; a parent "
                        "that is gone is named, not counted as a mismatch)")
    v = verbs.add_parser("gc", help="remove what killed or refused runs left in ROOT/.tmp, .work and .locks",
                         formatter_class=raw, epilog="example:\n  kolectra artifacts gc --dry-run")
    common(v, with_config=False)
    v.add_argument("--interrupted", action="store_true",
                   help="also remove interrupted pretraining runs (their checkpoints: --resume could continue them)")
    v.add_argument("--dry-run", action="store_true", help="only say what would be removed")
    v.add_argument("--cache", action="store_true",
                   help="also prune this machine's cache ($KOLECTRA_CACHE, default ~/.cache/kolectra): copies of "
                        "artifacts read from a bucket, fine-tuning's tokenised splits (and ROOT/.cache/finetune), "
                        "the report's eval-in-corpus results (and ROOT/.cache/overlap) and "
                        "unheld lock files, each unless a running kolectra process reads it; a later read downloads, "
                        "tokenises or reads the corpus again (default: the cache is left alone)")
    v.add_argument("--older-than", type=_days, default=None, metavar="DAYS",
                   help="with --cache (implied), only what was last used more than DAYS ago (default: 0, everything "
                        "not in use; e.g. --older-than 14)")


def _days(text: str) -> float:
    try:
        days = float(text)
    except ValueError:
        days = -1.0
    if not 0 <= days < float("inf"):
        raise argparse.ArgumentTypeError(f"expected a number of days, 0 or more (e.g. 14), not {text!r}")
    return days


# ---- list ---------------------------------------------------------------------------------------
def origins(a: Artifact) -> str:
    """Parents as kind:name-idprefix, else the raw inputs' file names."""
    refs = a.manifest.get("parent_refs") or [{"id": p} for p in a.parents]
    shown = [f"{r.get('kind', '?')}:{r.get('name', '?')}-{r['id'][:6]}" for r in refs]
    if not shown:
        head, count = inputs.shown(a.manifest)
        names = [str(i.get("path", "?")).rstrip("/").rsplit("/", 1)[-1] for i in head[:2]]
        shown = names + ([f"+{count - len(names)} more"] if count > len(names) else [])
    return ", ".join(shown) or "-"


def described(a: Artifact) -> dict[str, object]:
    """What a request is made of, as flat keys: its config, its stage version and its raw inputs
    (``inputs[1]="train.tsv@1a2b3c4d"``): two evals of one name on other data, or of another stage
    version, differ only in those. Inputs kept in a file (a corpus of many) are the manifest's first
    ones and ``inputs_file``, their count and the file's sha256: the file is not read."""
    m = a.manifest
    named = {f"inputs[{i}]": f"{str(r.get('path', '?')).rstrip('/').rsplit('/', 1)[-1]}@{str(r.get('sha256'))[:8]}"
             for i, r in enumerate(m.get("inputs", []))}
    if "inputs_file" in m:
        named["inputs_file"] = f"{m['inputs_count']} inputs@{m['inputs_file']['sha256'][:8]}"
    return {**flat_dict(m.get("config", {})), "stage_version": m.get("stage_version"), **named}


def settings(a: Artifact, differing: list[str]) -> str:
    """The kind's key settings, then the other keys on which its same-name siblings differ."""
    cfg = described(a)
    keys = [k for k in KEY_SETTINGS.get(a.kind, ()) if k in cfg]
    others = [k for k in differing if k not in keys and k in cfg]
    text = [f"{k}={json.dumps(cfg[k], ensure_ascii=False)}" for k in keys + others[:MAX_OTHER]]
    if len(others) > MAX_OTHER:
        text.append(f"(+{len(others) - MAX_OTHER} more differ)")
    return " ".join(text)


def differing_keys(arts: list[Artifact]) -> dict[tuple[str, str], list[str]]:
    """(kind, name) -> the config keys whose values are not the same in all its artifacts."""
    groups: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for a in arts:
        groups[(a.kind, a.name)].append(described(a))
    out = {}
    for key, configs in groups.items():
        keys = sorted(set().union(*configs))
        out[key] = [k for k in keys if len({json.dumps(c.get(k), sort_keys=True) for c in configs}) > 1]
    return out


def list_rows(arts: list[Artifact]) -> list[list[str]]:
    differing = differing_keys(arts)
    rows = [["KIND", "NAME-ID", "BUILT (UTC)", "SIZE", "PARENTS / INPUTS", "KEY SETTINGS"]]
    for a in arts:
        finished = str(a.manifest.get("provenance", {}).get("finished", ""))[:16].replace("T", " ")
        size = sum(int(f.get("bytes", 0)) for f in a.manifest.get("files", []))
        rows.append([a.kind, a.path.name, finished or "?", size_text(size), origins(a),
                     settings(a, differing[(a.kind, a.name)])])
    return rows


def artifacts_list(args, store: Store) -> int:
    arts, broken = store.scan(args.kind)
    if arts:
        rows = list_rows(arts)
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
        for r in rows:
            say("  ".join(c.ljust(w) for c, w in zip(r, widths)) + "  " + r[-1])
    for problem in broken:  # one bad directory does not hide the others
        say(f"skipped: {problem}", file=sys.stderr)
    if not arts:
        below = roots_below(str(getattr(store, "url", store.root)))
        hint = (f"; a root one level below: {', '.join(below[:3])}{' ...' if len(below) > 3 else ''} "
                f"(--out {below[0]})") if below else ""
        say(f"(no artifacts under {store.root}{hint})", file=sys.stderr)
    for line in store.unpublished(args.kind):  # a kill -9 between --force's renames: gone from the list above
        say(line, file=sys.stderr)
    return 0


def roots_below(root: str, most: int = 50) -> list[str]:
    """The roots directly below ``root`` (a folder holding a kind's folder: ``corpus/``, ``eval/`` ...), for a
    ``list`` that found none: ``--out s3://bucket`` over a root ``s3://bucket/k`` said ``(no artifacts under
    s3://bucket/)`` alone. One listing a child, of the first ``most`` children."""
    found = []
    try:
        for name in sorted(storage.children(root))[:most]:
            sub = storage.join(root, name)
            if not name.startswith(".") and set(storage.children(sub)) & set(KINDS):
                found.append(sub)
    except (OSError, ValueError, storage.StoreError):  # a hint only: the listing above said what there is
        return found
    return found


def say(line: str, file=None) -> None:
    """One line of output. Names, paths and values come from manifests and directory or object names,
    which a root from elsewhere fills: control characters are escaped (:func:`kolectra.core.shown.shown`)."""
    print(shown(line), file=file or sys.stdout)


# ---- show, verify, gc ---------------------------------------------------------------------------
def artifacts_gc(args, store: Store) -> int:
    # copies a kill left unpublished, which gc publishes: said as a result (its progress line goes under -q)
    pending = [] if storage.is_url(str(store.root)) else aside.unpublished(Path(store.root))
    failed: list = []  # what could not be removed whole (a permission, a bucket's refusal): never said removed
    removed, kept = store.collect(interrupted=args.interrupted, dry_run=args.dry_run, failed=failed)
    for d, m in pending:
        if args.dry_run:  # not through a kind folder that is a link: gc keeps it (its line says so)
            if not workspace.symlinked(Path(store.root), m["kind"]):
                say(f"would publish {d}")
        elif (art := store.find(m["kind"], m["id"])) is not None:
            say(f"published {art.path}")
    for d, m, made in [] if storage.is_url(str(store.root)) else aside.left_to_others(Path(store.root)):
        say(f"kept {d}: a complete build of {m.get('kind')}/{m.get('name')}-{m.get('id')} another root sharing "
            f"{d.parent} marked ({made}), which that root's gc or next build publishes; if that root is gone "
            "(deleted, or moved before 2026-12-02), nothing will: delete it by hand")
    verb = "would remove" if args.dry_run else "removed"
    for path in removed:
        say(f"{verb} {path}")
    for run in kept:
        request = run.request
        # kept though its id is published: a --force rebuild started after that copy, which --resume alone reuses
        kind, aid = request.get("kind"), request.get("id")
        # another root's run in the .work it shares (only this root's folder is swept): no gc of this root removes it,
        # and this root's copy of its id is not that root's
        theirs = not storage.is_url(str(store.root)) and run.foreign(Path(store.root))
        forced = not theirs and isinstance(kind, str) and isinstance(aid, str) and store.published_at(kind, aid) is not None
        removes = ("this root's gc leaves it, with --interrupted too (that root's build of it without --resume discards "
                   "it; if that root is gone, nothing will: delete it by hand)" if theirs else "gc --interrupted removes it")
        say(f"kept interrupted run {run.path} ({request.get('name', '?')}, {run.size() / 1e6:.1f} MB): "
            f"{continued_by(request, forced, store.root)}; {removes}")
    for f in failed:  # the operating system's (or the store's) words, the bytes that went and those left
        say(f"could not {'check' if args.dry_run else 'remove'} {f.path}: {f.why}"
            + (f" ({size_text(f.bytes)} freed, {size_text(f.left)} left)" if f.bytes or f.left else ""), file=sys.stderr)
    not_all = f", {len(failed)} could not be {'checked' if args.dry_run else 'removed'} (above)" if failed else ""
    say(f"{len(removed)} {verb}, {len(kept)} interrupted run(s) kept{not_all}", file=sys.stderr)
    code = 2 if failed else 0  # a permission: exit 2 (docs/artifacts.md's table)
    if args.cache or args.older_than is not None:
        return max(code, _gc_cache(args, store, verb))
    return code


def _gc_cache(args, store: Store, verb: str) -> int:
    """``gc --cache``: this machine's copies and caches no process reads (:mod:`kolectra.pipeline.store.copies`).
    2 where something could not be removed (a permission): each such path said, the rest removed."""
    cache = cache_root()
    own = () if storage.is_url(str(store.root)) else (Path(store.root) / copies.FINETUNE, Path(store.root) / copies.OVERLAP)
    removed, in_use, failed, linked = copies.prune(cache, (args.older_than or 0) * 86400, args.dry_run, own)
    for why in linked:
        say(why, file=sys.stderr)
    for r in removed:
        say(f"{verb} {r.path} ({size_text(r.bytes)})")
    for d in in_use:
        say(f"kept {d}: in use by a running kolectra process")
    for f in failed:
        say(f"could not {'prune' if args.dry_run else 'remove'} {f.path}: {f.why}"
            + (f" ({size_text(f.bytes)} freed, {size_text(f.left)} left)" if f.bytes or f.left else ""), file=sys.stderr)
    recent = f"; what was used within {args.older_than:g} day(s) kept too" if args.older_than else ""
    freed = sum(r.bytes for r in removed) + sum(f.bytes for f in failed)
    not_all = f", {len(failed)} could not be {'pruned' if args.dry_run else 'removed'} (above)" if failed else ""
    say(f"cache {cache}: {len(removed)} {verb} ({size_text(freed)} {'would be ' if args.dry_run else ''}freed), "
        f"{len(in_use)} kept in use{not_all}{recent}", file=sys.stderr)
    return 2 if failed else 0


def continued_by(request: dict, forced: bool = False, root: object = None) -> str:
    """What continues an interrupted run, as ``gc`` lists it: the words its command recorded in request.json
    (``kolectra run``, ``kolectra study``: neither has --resume), else ``--resume``, or ``--force --resume``
    where a copy of its id is published (``forced``: --resume alone reuses that copy, as the stop's line says:
    :func:`kolectra.pipeline.store.request.forced_over`). A run started before 2026-12-01 recorded no words:
    one named as those two name their pretraining (pipeline/run.py: ``sample``; pipeline/study/runner.py:
    ``study-ARM``) may be theirs, and is not said to be --resume's alone. A run another root sharing ``root``'s
    ``.work`` marked (``root`` in its request.json) is said to be that root's: this root's --resume refuses it."""
    made = request.get("root")
    if root is not None and not storage.is_url(str(root)) and isinstance(made, str) and made != mark(Path(root)):
        return (f"the run of another root sharing {Path(root) / workspace.WORK} (its request.json names root {made}), from "
                f"which {continued_by({k: v for k, v in request.items() if k != 'root'}, forced)}")
    again = request.get("again")
    if isinstance(again, str) and again:
        return f"{again} continues it"
    if forced:
        return "--force --resume continues it (--resume alone reuses the copy published before)"
    name = request.get("name")
    if name == "sample":
        command = "`kolectra run` without --force"
    elif isinstance(name, str) and name.startswith("study-"):
        command = "`kolectra study`"
    else:
        return "--resume continues it"
    return (f"--resume continues it, or the same {command} if that started it (a run started before 2026-12-01 "
            "does not say which)")


def artifacts_show(args, store: Store) -> int:
    art = store.resolve(args.ref)
    if args.json:
        print(shown_json(json.dumps(art.manifest, indent=2, ensure_ascii=False)))  # C1 and bidi escaped too
        return 0
    m = art.manifest
    say(f"{m['kind']} {m['name']}-{m['id']}  ({art.path})")
    prov = m.get("provenance", {})
    say(f"  built     {prov.get('started', '?')} -> {prov.get('finished', '?')} on {prov.get('host', '?')}"
          f" (kolectra {prov.get('kolectra', '?')}, {commit_label(prov)})")
    say(f"  version   {_version_line(m)}")
    say(f"  files     {len(m['files'])} ({sum(f['bytes'] for f in m['files']):,} bytes), digest {m['digest'][:16]}")
    say(f"  stats     {json.dumps(_headline(m.get('stats', {})), ensure_ascii=False)}")
    if m["kind"] == "corpus" and (records := _records_line(m.get("stats") or {})):
        say(f"  records   {records}")
    for line in _verdict(art, store):  # lists, which the headline leaves out: a model that learned nothing, or a score
        say(line)  # the test rows in training inflate, must not read as all-clear
    if "compute" in m:
        say(f"  compute   {json.dumps(m['compute'], ensure_ascii=False)}")
    say("  lineage")
    for line in store.lineage_lines(art):
        say("    " + line)
    return 0


def _version_line(m: dict) -> str:
    """The stage version that built it, against the one this kolectra builds (an artifact kept across
    an upgrade is used as it was built: docs/artifacts.md, "Upgrading kolectra")."""
    then, now = m.get("stage_version"), stage_versions.current_of(m)  # an eval's: its task's (before: none said)
    if then is None:
        return "no stage version recorded"
    line = f"{m['kind']} stage version {then}"
    if now is None or then == now:
        return line + (" (this kolectra's)" if now is not None else "")
    return line + (f" (this kolectra builds {now}: {'an earlier' if then < now else 'a newer'} kolectra built it; "
                   "docs/artifacts.md, 'Stage versions', says what changed)")


def artifacts_verify(args, store: Store) -> int:
    # a REF that names no artifact is a lookup error (one line, exit 2), not a MISMATCH (exit 1)
    art = store.resolve(args.ref)
    ancestors, missing = store.ancestors(art) if args.lineage else ([], [])
    problems = 0
    for a in (art, *ancestors):
        found = store.verify(a, quick=args.quick)
        unhashed = [f for f in a.manifest["files"] if not f.get("checksum")]
        if args.quick and unhashed and not isinstance(a.path, Path):  # a store that gave no checksum at publishing
            say(f"note: {len(unhashed)} object(s) of {a.path} have no store checksum in the manifest: their sizes "
                "were checked, not their bytes (without --quick every object is hashed)", file=sys.stderr)
        for p in found:
            _checked(f"MISMATCH {p}")
        if not found:
            _checked(f"ok {a.path} ({len(a.manifest['files'])} files, digest {a.manifest['digest'][:16]})")
        problems += len(found)
    for m in missing:
        _checked(f"missing {m}; not checked")
    if args.lineage:
        say(f"{1 + len(ancestors)} artifact(s) verified, {len(missing)} parent(s) not found", file=sys.stderr)
    if problems:
        say(f"{problems} problem(s)", file=sys.stderr)
        return 1
    return 0


def _checked(line: str) -> None:
    """One of verify's lines on stdout. Its reader gone (``verify X | head -1``, a terminal that hung up)
    does not end the check: its status is the answer (under PYTHONUNBUFFERED the second MISMATCH line's
    write ended a failing verify quietly with status 0); the rest of its lines go to the null device."""
    try:
        say(line)
    except OSError as e:
        if not reader_gone(e):
            raise
        streams.lost(sys.stdout)


def _verdict(art: Artifact, store: Store) -> list[str]:
    """The health verdict a checkpoint or an eval recorded (``learned nothing: ...``) and the
    warnings a stage recorded, one line each. A study's floor (0 steps) is untrained, as kolectra report says:
    its recorded ``unchecked: no metrics logged after warm-up`` read as a run whose log missed its windows.
    A ``--seeds`` summary records none: its runs' (``learned nothing in 2 of 2 seeds ...``), as finetune prints it."""
    from kolectra.pipeline.verdicts import UNTRAINED, said, seeds_health, untrained  # noqa: PLC0415

    lines = []
    stats = art.manifest.get("stats") or {}
    health = stats.get("health")
    if isinstance(health, dict) and "status" in health:
        lines.append(f"  health    {UNTRAINED if untrained(art) else said(health)}")
    elif art.kind == "eval" and "statistic" in stats and (runs := seeds_health(store, art)):
        lines.append(f"  health    {runs}")
    warnings = stats.get("warnings")
    lines += [f"  warning   {w}" for w in (warnings if isinstance(warnings, list) else [])]
    return lines


def _records_line(stats: dict) -> str:
    """``9 in = 6 out + 2 rejected (invalid_json 1, ...) + 1 dropped (duplicate 1)``: a corpus's counts as they add
    up, with the reasons that counted (the stats line is scalars only: no drops, no reasons)."""
    if not all(isinstance(stats.get(k), int) for k in ("records_in", "records_out", "rejected")):
        return ""

    dropped = stats.get("dropped") if isinstance(stats.get("dropped"), dict) else {}
    return (f"{stats['records_in']:,} in = {stats['records_out']:,} out + {stats['rejected']:,} rejected"
            f"{reasons(stats.get('rejected_reasons'))} + {sum(n for n in dropped.values() if isinstance(n, int)):,} "
            f"dropped{reasons(dropped)}")


def _headline(stats: dict) -> dict:
    """Scalars only: the manifest's stats can hold long tables. A float at 12 significant digits: ``100.0 *
    accuracy`` is stored as 52.800000000000004, a spread as 1.000000000000007 (the stored bytes, and --json, stay)."""
    return {k: float(f"{v:.12g}") if isinstance(v, float) else v
            for k, v in stats.items() if isinstance(v, (int, float, str, bool))}

