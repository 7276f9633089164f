"""Eval texts the pretraining corpus holds verbatim: how much of a score may be memorisation.

A model pretrained on a review corpus and scored on NSMC's test file reads an inflated accuracy when
those test reviews were in the corpus; nothing in the run says so. ``kolectra report`` on an eval artifact
whose lineage reaches a corpus (eval -> checkpoint -> examples -> corpus; a checkpoint whose pretraining
continued from another kolectra checkpoint, ``train.init_from``, reaches that one's corpus too) says how many
of the scored file's texts (:mod:`finetune.eval_texts`: the rows the run scored, ``max_eval_examples`` heeded)
are a line of the split the examples were packed from, with a few of them.

Matching: an eval text goes through the corpus's own text rules (``corpus.text.clean`` with the corpus's
``strip_html``, ``mask_pii``, ``max_repeat`` and ``language``: NFC, width folding, invisible characters
dropped, whitespace collapsed), so the review the corpus stage kept matches the one the task reads. It is
found when it equals a whole line of a corpus document (or a whole document, its line breaks read as
spaces): the usual case of a review corpus (a document a review) and of a review inside a page's lines;
a text that is part of a longer line is not counted. Documents the examples dropped by id
(``holdout_ids``) are not pretraining text and are passed over.

Memory follows the eval set, not the corpus: each eval text is one Python hash (64 bits) in a dict, and the
corpus's shards stream past it a line at a time, where they are (a corpus in a bucket is not copied to this
machine); a hit is confirmed on the text itself. The result is kept
in ``ROOT/.cache/overlap/`` under a key of the corpus's digest, the split, the holdout file's and the
scored file's sha256 and this module's :data:`CHECK`, so the corpus is read once per (corpus, eval file); a
result measured while the holdout file was not here as recorded is kept under a key of its own. Each read
touches it and ``kolectra artifacts gc --cache`` prunes those not used within ``--older-than`` (a rebuilt
corpus's, an older CHECK's are never read again), never while a report holds the folder. A shard gone
or damaged is said (not checked), not the report's end. Nothing in any artifact changes.
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import io
import json
import os
import time
import zlib
from json.decoder import scanstring
from pathlib import Path
from typing import Iterator

from kolectra.core import bars, storage
from kolectra.core.errors import UserInputError
from kolectra.core.shown import shown
from kolectra.core.stage import progress, size_text
from kolectra.corpus import shards
from kolectra.corpus import text as text_rules
from kolectra.finetune.eval_texts import eval_texts, not_checked, scored_cap
from kolectra.pipeline.markdown import code, text
from kolectra.pipeline.store import copies
from kolectra.pipeline.store.artifacts import Artifact, ArtifactError, Store
from kolectra.pipeline.store.manifest import fingerprint_inputs

# bump when the same corpus and file give another result: older cached results are not read
# (2: the rows past max_eval_examples, which the run did not score, are left out; 3: classify/regress rows whose
# label or score the task refuses are left out before that cap, as the task left them)
CHECK = 3
EXAMPLES = 5
RULES = ("strip_html", "mask_pii", "max_repeat", "language")
DEFAULT_RULES = {"strip_html": False, "mask_pii": False, "max_repeat": 0, "language": "ko"}


def rules_of(corpus: Artifact) -> dict:
    """The corpus's text rules as :func:`corpus.text.clean` takes them."""
    cfg = corpus.manifest.get("config", {})
    return {k: cfg.get(k, DEFAULT_RULES[k]) for k in RULES}


def same_text(value: str, rules: dict) -> str:
    """An eval text as the corpus would hold it, its line breaks read as spaces."""
    return text_rules.clean(value, **rules).replace("\n", " ")


# ---- lineage: the scored file, the corpora -------------------------------------------------------
def scored_file(store: Store, art: Artifact) -> tuple[str, dict, dict | None]:
    """(task, the eval's config, the input record of its scored file): a --seeds summary's first run's."""
    config = art.manifest.get("config", {})
    task = config.get("task", "?")
    parents = [store.parent(art, pid) for pid in art.parents]
    runs = [p for p in parents if p is not None and p.kind == "eval"]
    if runs:
        return scored_file(store, runs[0])
    # the inputs are the model's (a Hugging Face directory, when no checkpoint is a parent), then the
    # train file, the scored file and a --dev file (pipeline/stages.py: finetune, probe)
    data = art.manifest.get("inputs", [])[0 if art.parents else 1:]
    return task, config, data[1] if len(data) > 1 else None


def pretraining_corpora(store: Store, art: Artifact) -> tuple[list[tuple[Artifact, Artifact]], list[str]]:
    """(examples, corpus) pairs of ``art``'s lineage, and a line for each pretraining corpus not reached."""
    found: list[tuple[Artifact, Artifact]] = []
    missing: list[str] = []
    seen: set[str] = set()

    def visit(a: Artifact) -> None:
        if a.id in seen:
            return
        seen.add(a.id)
        for pid in a.parents:
            parent = store.parent(a, pid)
            kind = next((r.get("kind") for r in a.manifest.get("parent_refs", []) if r.get("id") == pid), "?")
            if parent is None:
                if kind in ("corpus", "examples", "checkpoint", "eval", "?"):
                    missing.append(f"its {kind} {code(pid)} (a parent of {text(a.kind)} {code(a.path.name)}) is not "
                                   "in this root or where it was recorded")
                continue
            if a.kind == "examples" and parent.kind == "corpus":
                found.append((a, parent))
            elif parent.kind != "vocab":
                visit(parent)
        if a.kind == "checkpoint":
            init_from(a)

    def init_from(a: Artifact) -> None:
        """A pretraining continued from another pair (``train.init_from``, an input, not a parent): a
        kolectra checkpoint's ``hf/`` folder is followed to its corpus too; another folder is said."""
        train = a.manifest.get("config", {}).get("train", {})
        if not (isinstance(train, dict) and train.get("init_from")):
            return
        inputs = [r for r in a.manifest.get("inputs", []) if r.get("dir")]  # pipeline/stages.py: pretrain's only input
        p = Path(inputs[0]["path"] if inputs else train["init_from"])
        for d in (p, p.parent):
            if (d / "manifest.json").is_file():
                with contextlib.suppress(ArtifactError, OSError, ValueError):
                    visit(store.resolve(str(d)))
                    return
        why = "is not a kolectra checkpoint's: its corpus is not known here" if p.exists() else "is not here any more"
        missing.append(f"{text(a.kind)} {code(a.path.name)} continued the pretraining of {code(p)} "
                       f"(train.init_from), which {why}")

    visit(art)
    return found, missing


# ---- the check -----------------------------------------------------------------------------------
def _key(corpus: Artifact, split: str, holdout: str, file_sha256: str, task: str, config: dict) -> str:
    what = {"check": CHECK, "corpus": corpus.id, "digest": corpus.manifest.get("digest"), "split": split,
            "holdout": holdout, "file": file_sha256, "task": task,
            "read": {k: config.get(k) for k in ("text_column", "text_pair_column", "label_column", "format",
                                                "label_names")},
            "cap": scored_cap(task, config)}
    return hashlib.sha256(json.dumps(what, sort_keys=True).encode()).hexdigest()[:32]


def _holdout(store: Store, examples: Artifact) -> tuple[frozenset[str], str, str]:
    """The ids the examples dropped, the holdout file's sha256, and a note when it cannot be read here."""
    path = examples.manifest.get("config", {}).get("holdout_ids") or ""
    if not path:
        return frozenset(), "", ""
    record = next((r for r in examples.manifest.get("inputs", []) if Path(r["path"]).name == Path(path).name), {})
    p = Path(record.get("path", path))
    try:
        if not p.is_file() or fingerprint_inputs([p])[0]["sha256"] != record.get("sha256"):
            raise OSError
        raw = gzip.decompress(p.read_bytes()) if p.suffix == ".gz" else p.read_bytes()
    except (OSError, ArtifactError):
        return frozenset(), record.get("sha256", ""), (f"the examples' holdout_ids file {p} is not here as it "
                                                       "was: the documents it dropped are counted as pretraining text")
    ids = frozenset(x.strip() for x in raw.decode("utf-8").splitlines() if x.strip())
    return ids, record.get("sha256", ""), ""


def _text_and_id(line: str, want_id: bool) -> tuple[str, str]:
    """A corpus line's ``text`` (and ``id``) without parsing its offsets, which are most of its bytes: the
    corpus writes ``{"id":..,"source":..,"text":..`` first (corpus/shards.py); any other line is parsed whole."""
    at = line.find('"text":"')
    if line.startswith('{"id":"') and at > 0:
        doc_id = scanstring(line, 7)[0] if want_id else ""
        return scanstring(line, at + 8)[0], doc_id
    doc = json.loads(line)
    return str(doc.get("text", "")), str(doc.get("id", ""))


def shard_files(corpus: Artifact, split: str) -> list[tuple[str, int]]:
    """(location, bytes) of ``split``'s shards as the manifest lists them: where the corpus is, a local
    folder or a bucket, read in place (a bucket's corpus is streamed, not copied into this machine's cache)."""
    prefix = f"{shards.DATA_DIR}/{split}-"
    return [(f"{corpus.path}/{f['path']}", f["bytes"]) for f in corpus.manifest.get("files", [])
            if f["path"].startswith(prefix) and ".jsonl" in f["path"]]


@contextlib.contextmanager
def _lines(location: str) -> Iterator[io.TextIOWrapper]:
    with storage.open_file(location, "rb") as raw:  # GzipFile leaves a file it was given open: closed here
        yield io.TextIOWrapper(gzip.GzipFile(fileobj=raw, mode="rb") if location.endswith(".gz") else raw,
                               encoding="utf-8")


def scan(files: list[tuple[str, int]], wanted: dict[int, tuple[int, int]], confirm, drop_ids: frozenset[str],
         desc: str = "overlap") -> dict:
    """Stream the shards ``files``; the keys of ``wanted`` whose text is a line (or a whole document).
    ``confirm(where, line)``: whether the eval text at ``where`` is that line (a hash is not the text).
    More than one shard: their bytes' progress (a bar, or a line at most every 10 s; a big corpus is minutes)."""
    found: set[int] = set()
    docs = dropped = lines = read = 0
    total = sum(size for _, size in files)
    with bars.Bar(desc, total if len(files) > 1 else None, "B", every=max(1, total // 20) if len(files) > 1 else None,
                  scale=True, min_seconds=bars.QUIET_SECONDS) as bar:
        for location, size in files:
            read += size
            try:
                d, x, n = _scan_one(location, wanted, confirm, drop_ids, found)
            except (OSError, EOFError, zlib.error) as e:  # a truncated gzip is an EOFError: the report ended there
                why = e.strerror if isinstance(e, OSError) and e.strerror else f"{type(e).__name__}: {e}"
                raise ShardUnreadable(f"its shard {location} could not be read ({why}); kolectra artifacts verify "
                                      "names the files that differ from its manifest") from None
            docs, dropped, lines = docs + d, dropped + x, lines + n
            bar.advance(size)
    return {"found": found, "shards": len(files), "bytes": read, "documents": docs, "lines": lines,
            "dropped_by_holdout": dropped}


class ShardUnreadable(OSError):
    """A corpus shard gone or damaged (named): the check is said not done, the report goes on."""


def _scan_one(location: str, wanted: dict, confirm, drop_ids: frozenset[str], found: set[int]) -> tuple[int, int, int]:
    """One shard of :func:`scan`, its hits added to ``found``: its documents, those dropped by id, its lines."""
    docs = dropped = lines = 0
    with _lines(location) as f:
        for raw in f:
            if not raw.strip():
                continue
            body, doc_id = _text_and_id(raw, bool(drop_ids))
            if drop_ids and doc_id in drop_ids:
                dropped += 1
                continue
            docs += 1
            for line in doc_lines(body):
                lines += 1
                h = hash(line)
                if h in wanted and h not in found and confirm(wanted[h], line):
                    found.add(h)
    return docs, dropped, lines


def doc_lines(body: str) -> list[str]:
    """What an eval text is matched against in one corpus document: each line, and the whole document with its
    line breaks read as spaces (:func:`same_text` reads an eval text's so)."""
    parts = body.split("\n")
    return parts + [" ".join(parts)] if len(parts) > 1 else parts


def measure(corpus: Artifact, split: str, task: str, config: dict, file: Path,
            drop_ids: frozenset[str] = frozenset(), note: str = "") -> dict:
    """The overlap of ``file``'s texts with ``corpus``'s ``split`` less the documents ``drop_ids`` (no cache)."""
    rules = rules_of(corpus)
    columns = eval_texts(task, config, file)
    keys: list[list[int | None]] = []
    wanted: dict[int, tuple[int, int]] = {}
    for c, col in enumerate(columns):
        ks = []
        for r, value in enumerate(col.values):
            t = same_text(value, rules)
            ks.append(hash(t) if t else None)
            if t:
                wanted.setdefault(hash(t), (c, r))
        keys.append(ks)

    def confirm(where: tuple[int, int], line: str) -> bool:
        return same_text(columns[where[0]].values[where[1]], rules) == line

    started = time.process_time()
    seen = scan(shard_files(corpus, split), wanted, confirm, drop_ids, f"overlap: corpus/{corpus.path.name} {split}")
    out = []
    for col, ks in zip(columns, keys):
        hits = [r for r, k in enumerate(ks) if k is not None and k in seen["found"]]
        shown = list(dict.fromkeys(" ".join(col.values[r].split()) for r in hits))[:EXAMPLES]
        out.append({"column": col.column, "unit": col.unit, "found": len(hits), "total": len(ks), "examples": shown,
                    **({"of": col.of, "cap": scored_cap(task, config)} if col.of else {})})
    return {"check": CHECK, "corpus": corpus.id, "corpus_name": corpus.path.name, "split": split,
            "file": str(file), "columns": out, "holdout_note": note, "cpu_s": round(time.process_time() - started, 2),
            **{k: seen[k] for k in ("shards", "bytes", "documents", "lines", "dropped_by_holdout")}}


def cache_folder(store: Store, art: Artifact) -> Path:
    """Where ``art``'s results are kept: the overlap cache of the root ``art`` lies in, the root its report goes
    to (:func:`pipeline.scores.report_root`); ``store``'s for an artifact outside any root. Before, a REF of another
    root (``kolectra report s3://b/k/eval/NAME-ID``) kept its result in ``--out``'s, ./artifacts/.cache/overlap."""
    root = art.root
    if root is None or str(root).rstrip("/") == str(store.root).rstrip("/"):
        return store.cache_dir("overlap")
    from kolectra.pipeline.store.factory import open_store  # noqa: PLC0415 - a REF of another root only

    return open_store(root if isinstance(root, Path) else str(root)).cache_dir("overlap")


def overlap(store: Store, examples: Artifact, corpus: Artifact, task: str, config: dict, record: dict,
            folder: Path | None = None) -> dict | str:
    """The cached result for the scored file ``record`` (an input record), else measured and cached (in
    ``folder``, default ``store``'s overlap cache); a line saying why not when the file is not there as it was
    scored."""
    drop_ids, holdout_sha, note = _holdout(store, examples)
    split = examples.manifest.get("config", {}).get("split", "train")
    # measured without the documents a holdout file not here dropped: kept apart from the result with them
    # (under one key, that result was read back once the file was here again, and for every other root)
    holdout = f"not read: {holdout_sha}" if note else holdout_sha
    place = (folder or store.cache_dir("overlap")) / f"{_key(corpus, split, holdout, record['sha256'], task, config)}.json"
    with contextlib.ExitStack() as held:  # gc --cache leaves the folder while a report reads or writes it
        with contextlib.suppress(OSError):  # a root this user may read, not write: no lock, nothing kept
            held.enter_context(copies.reading(place.parent))
        return _cached(place, corpus, split, task, config, record, drop_ids, note)


def _cached(place: Path, corpus: Artifact, split: str, task: str, config: dict, record: dict,
            drop_ids: frozenset[str], note: str) -> dict | str:
    if place.is_file():
        try:
            found = json.loads(place.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            pass  # measured again and written over
        else:
            with contextlib.suppress(OSError):
                os.utime(place)  # its last use: gc --cache --older-than prunes by it
            return found
    file = Path(record["path"])
    try:
        now = fingerprint_inputs([file])[0]["sha256"]
    except ArtifactError:
        now = None
    if now != record["sha256"]:
        return (f"the scored file {code(file)} is {'not there' if now is None else 'not the file it was (changed since)'}"
                "; not checked")
    size = sum(n for _, n in shard_files(corpus, split))
    progress(f"overlap: reading {shown(corpus.path.name)}'s {split} split ({size_text(size)}) for the texts of "
             f"{shown(file.name)} (once; the result is kept in {shown(str(place.parent))})")
    result = measure(corpus, split, task, config, file, drop_ids, note)
    tmp = place.with_suffix(f".{os.getpid()}.tmp")
    try:  # written whole, then renamed: a report stopped here, or another writing the same, leaves no half entry
        place.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(json.dumps(result, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
        os.replace(tmp, place)
    except OSError as e:  # a root this user may read, not write: the result is said all the same, not kept
        with contextlib.suppress(OSError):
            tmp.unlink()
        progress(f"overlap: the result could not be kept in {shown(str(place.parent))} ({e.strerror or e}): "
                 "the next report reads the corpus again")
    return result


# ---- what the report says ------------------------------------------------------------------------
def _what(task: str, config: dict, record: dict, column: str) -> str:
    name = Path(record["path"]).name
    if task == "nsmc" and not config.get("eval_set"):
        return f"NSMC test ({name})"
    return f"{name} ({column})"


def checked(store: Store, art: Artifact) -> tuple[str, dict, dict | None, list[dict | str]]:
    """(task, config, scored file record, what was found): for each pretraining corpus of ``art``'s lineage its
    result (:func:`overlap`), or a Markdown line saying why it was not checked."""
    task, config, record = scored_file(store, art)
    if why := not_checked(task):
        return task, config, record, [f"Not checked: {text(why)}."]
    if record is None:
        return task, config, record, ["Not checked: the eval records no scored file among its inputs."]
    pairs, missing = pretraining_corpora(store, art)
    out: list[dict | str] = [f"Not checked against a pretraining corpus: {m}." for m in missing]
    if not pairs and not missing:
        out.append("Not checked: no pretraining corpus in this eval's lineage (the model is not a kolectra "
                   "checkpoint pretrained from one; a Hugging Face model's corpus is not known here).")
    said_for: set[tuple] = set()
    folder = cache_folder(store, art) if pairs else None
    for examples, corpus in pairs:
        # the same corpus text twice (a pretraining continued on other examples of its corpus: seq 128, then
        # 512 by train.init_from) is one line
        cfg = examples.manifest.get("config", {})
        what = (corpus.id, cfg.get("split", "train"), tuple(r.get("sha256") for r in examples.manifest.get("inputs", [])))
        if what in said_for:
            continue
        said_for.add(what)
        try:
            result = overlap(store, examples, corpus, task, config, record, folder)
        except (OSError, ValueError, UserInputError) as e:  # a file the task's reader refuses: said, the report goes on
            out.append(f"Not checked against {code('corpus/' + corpus.path.name)}: {text(e)}.")
            continue
        if isinstance(result, str):
            out.append(f"Not checked against {code('corpus/' + corpus.path.name)}: {result}.")
            continue
        out.append(result)
    return task, config, record, out


def lines(store: Store, art: Artifact) -> list[str]:
    """The report's lines for eval ``art``: each pretraining corpus of its lineage against its scored file."""
    task, config, record, found = checked(store, art)
    return [x for r in found for x in ([r] if isinstance(r, str) else said(r, task, config, record))]


def share_line(store: Store, art: Artifact) -> str:
    """One line for eval ``art`` under a table of several (:mod:`pipeline.scores`): the share of its scored texts
    each pretraining corpus holds verbatim (``6 of 11 rows (54.5%) in corpus/NAME (train split)``), or why not
    checked; the same cached results as its own report's section, each said on stderr as there."""
    task, config, record, found = checked(store, art)
    parts = []
    for r in found:
        if isinstance(r, str):
            parts.append(r.rstrip("."))
            continue
        # its WARNING line on stderr, as the eval's own report says it, naming the eval: several evals of one test
        # file gave the same line word for word
        said(r, task, config, record, who=f"eval/{art.path.name}: ")
        counts = ", ".join(_count(c) + (f" ({c['column']})" if len(r["columns"]) > 1 else "") for c in r["columns"])
        parts.append(f"{text(counts)} in {code('corpus/' + r['corpus_name'])} ({text(r['split'])} split)")
    return f"- {code('eval/' + art.path.name)}: " + "; ".join(parts) + "."


def _count(col: dict) -> str:
    """``6 of 11 rows (54.5%)``: a column's texts found in the corpus."""
    return f"{col['found']:,} of {col['total']:,} {col['unit']} ({col['found'] / col['total'] if col['total'] else 0.0:.1%})"


def said(result: dict, task: str, config: dict, record: dict, who: str = "") -> list[str]:
    """One result's lines: a count and share a column, its examples, what was read; ``who`` opens its WARNING."""
    out = []
    for col in result["columns"]:
        count = _count(col)
        where = f"the pretraining corpus corpus/{result['corpus_name']} ({result['split']} split)"
        what = _what(task, config, record, col["column"])
        if col.get("of"):  # the run scored the first rows only: those are counted
            what += f", the first {col['total']:,} of its {col['of']:,} {col['unit']} (max_eval_examples={col['cap']})"
        out += [f"- {text(what)}: **{text(count)}** appear verbatim in {text(where)}"
                + ("; a score on them may be inflated by memorisation." if col["found"] else ".")]
        out += [f"  - {code(e[:120])}" for e in col["examples"]]
        if col["found"]:
            progress(f"WARNING: {shown(who + what)}: {count} appear verbatim in {shown(where)}; the score may be inflated")
    out += ["", f"Read {result['documents']:,} documents ({result['lines']:,} lines, {result['shards']} shard{'s' if result['shards'] != 1 else ''}, "
                f"{size_text(result['bytes'])}); a text counts when it is a whole line after the corpus's text rules."]
    if result.get("dropped_by_holdout"):
        out += [f"{result['dropped_by_holdout']:,} documents the examples dropped by id (holdout_ids) were passed over."]
    if result.get("holdout_note"):
        out += [text(result["holdout_note"]) + "."]
    return out
