"""The checks of a finished corpus job, made by its launcher (``corpus/build.py``) on the
``stats.json`` and ``stats/files.jsonl`` the job wrote (``corpus/outputs.py``): the Kiwi probes
agree, the counts reconcile, no input file's read failed, none changed while read, no more were
damaged than ``max_damaged_files``, the inputs held records, the rejects stay under
``max_reject_ratio`` and a document survived. Each failure is one :class:`outputs.CorpusError` line
naming the file and what to do; the job's files are kept aside by the caller. Then the summary
lines of a job that passed them (:func:`summary`).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Iterable

from kolectra.core.shown import first_few
from kolectra.core.stage import progress, warn
from kolectra.core.words import reasons
from kolectra.corpus import compress, read_failures
from kolectra.corpus.config import CorpusConfig
from kolectra.corpus.input_reads import NOT_CHECKED
from kolectra.corpus.inputs import InputFile
from kolectra.corpus.outputs import READ_FAILED, REJECTS_FILE, CorpusError


def _notable(rows: Iterable[tuple[str, dict]]) -> tuple[dict, dict, tuple | None, dict]:
    """One pass over the input files' rows: the changed and the damaged ones (name -> why), the one
    with the most rejected lines (a 1-line file with its line rejected is not the news), and those
    whose read the server or store failed (name -> why)."""
    changed, damaged, worst, failed = {}, {}, None, {}
    for source, row in rows:
        if row.get(READ_FAILED):
            failed[source] = row[READ_FAILED]
        if str(row.get("changed") or "").startswith(NOT_CHECKED):  # no change: the server refused the check
            failed[source] = row["changed"]
        elif row.get("changed"):
            changed[source] = row["changed"]
        if row.get("damaged"):
            damaged[source] = row["damaged"]
        rank = (row["rejected"], row["rejected"] / max(row["records_in"], 1))
        if worst is None or rank > worst[0]:
            worst = (rank, source, row)
    return changed, damaged, worst and worst[1:], failed


def check_stats(stats: dict, cfg: CorpusConfig, paths: dict[str, str], rejects: str = REJECTS_FILE,
                rows: Iterable[tuple[str, dict]] | None = None) -> None:
    """Reconciliation, changed and damaged files, and the reject-ratio gate; ``paths`` maps
    source names back to inputs, ``rejects`` is where the failed run's dead letters are kept,
    ``rows`` every input file's (source, row) (``outputs.read_file_rows``; stats.json's own
    ``sources`` without it)."""
    if len(stats.get("kiwi_probe", [])) > 1:
        raise CorpusError(
            f"corpus: the job's workers analysed Korean differently: Kiwi's analysis of fixed sentences hashed to "
            f"{', '.join(stats['kiwi_probe'])}, so Kiwi ran on different code paths (machines of other CPU kinds, "
            "ARM and x86, or KIWI_ARCH_TYPE set on some): their documents' morphs would differ under one corpus "
            "id; run the job on one kind of machine, or set KIWI_ARCH_TYPE alike on every worker")
    accounted = stats["records_out"] + stats["rejected"] + sum(stats["dropped"].values())
    if stats["records_in"] != accounted:
        raise CorpusError(
            f"corpus stats do not reconcile: records_in={stats['records_in']} but "
            f"out+rejected+dropped={accounted} ({stats})"
        )
    named = lambda s: paths.get(s, s)  # noqa: E731
    changed, damaged, worst, failed = _notable(stats["sources"].items() if rows is None else rows)
    if failed:  # first: a file read in part is no change of the file, and no damage to accept
        raise CorpusError(read_failures.line({named(s): why for s, why in failed.items()}))
    if changed:
        raise CorpusError(
            f"{len(changed)} input file(s) changed while the job read them, so the corpus would match neither "
            "version: " + first_few([f"{named(s)} ({why})" for s, why in sorted(changed.items())], read_failures.NAMED)
            + ". Rerun once they are complete (no corpus was kept)."
        )
    if len(damaged) > cfg.max_damaged_files:
        raise CorpusError(
            f"{len(damaged)} damaged input file(s) (over max_damaged_files={cfg.max_damaged_files}): "
            + first_few([f"{named(s)}: {why}" for s, why in sorted(damaged.items())], read_failures.NAMED)
            + f". Replace them, or accept what could be read with --set max_damaged_files={len(damaged)}; "
            f"dead letters in {rejects}"
        )
    if stats["records_in"] == 0:
        names = sorted(paths.values())
        shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
        raise CorpusError(f"the inputs hold no records: the {len(names)} input file(s) are empty or hold only blank "
                          f"lines ({shown})")
    ratio = stats["rejected"] / stats["records_in"]
    if ratio > cfg.max_reject_ratio:
        worst, counts = worst
        top = max(stats["rejected_reasons"].items(), key=lambda kv: kv[1])[0]
        garbled = f" (a damaged file: {counts['damaged']})" if counts.get("damaged") else ""
        raise CorpusError(
            f"{stats['rejected']} of {stats['records_in']} records rejected ({ratio:.1%}), over "
            f"max_reject_ratio={cfg.max_reject_ratio:.1%}; worst file: {named(worst)} "
            f"({counts['rejected']} of {counts['records_in']} lines rejected{garbled}); most common reason: "
            f"{top}. {_reject_hint(top, named(worst))}; the rejected lines are in {rejects}"
        )
    if stats["records_out"] == 0:
        raise CorpusError(f"no document survived cleaning and filtering (dropped: {stats['dropped']})")


def _reject_hint(reason: str, path: str) -> str:
    """What to do about the most common reject reason: a file that is not UTF-8 is fixed by converting
    it, not by --format or --text-field (a Korean file saved on Windows is cp949, every line a reject).
    The converted copy keeps the file's extensions, so --format auto reads it as it read the original."""
    if reason == "analysis_failed":  # not the input's format: the analyser raised on these documents
        return "The analyser raised an error on these documents (each reject's detail names it)"
    if reason != "invalid_utf8":
        return "Check --format/--text-field"
    base = path.rsplit("/", 1)[-1]
    stem, dot, exts = base.partition(".")
    fixed = path[:len(path) - len(base)] + stem + ".utf8" + dot + exts
    how = ("decompress it, convert it with iconv -f cp949 -t utf-8 and compress it again" if compress.codec_of(path)
           else f"iconv -f cp949 -t utf-8 {path} > {fixed}")
    return f"The file is not UTF-8: convert it (a Korean file saved on Windows is usually cp949: {how})"


class PathsByName(Mapping):
    """Source name -> input path, for the checks that name a file: the table is made only when one
    is named (a failed check), not held for every run."""

    def __init__(self, listed: list[InputFile], name_of):
        self._listed, self._name_of = listed, name_of

    @functools.cached_property
    def _table(self) -> dict[str, str]:
        return {self._name_of(f.path): f.path for f in self._listed}

    def __getitem__(self, name: str) -> str:
        return self._table[name]

    def __iter__(self):
        return iter(self._table)

    def __len__(self) -> int:
        return len(self._listed)


def noting_damaged(rows, damaged: list):
    """``rows`` as they are, each damaged file's (source, why) noted in ``damaged`` on the way: the
    checks and the summary share one read of ``stats/files.jsonl``."""
    for source, info in rows:
        if info.get("damaged"):
            damaged.append((source, info["damaged"]))
        yield source, info


def summary(stats: dict, damaged: list[tuple[str, str]], rounds: int) -> None:
    """The lines a job that passed the checks ends with: its counts, and what of them a user should look
    at (ids shared, kept fields missing, near-dup's limits met: ``rounds``, neardup_beam.ROUNDS; repairs,
    damaged files accepted)."""
    progress(
        f"corpus: {stats['records_in']:,} records -> {stats['records_out']:,} documents "
        f"({stats['splits']['valid']['documents']:,} valid), {stats['rejected']:,} rejected"
        f"{reasons(stats.get('rejected_reasons') or {})}, dropped {sum(stats['dropped'].values()):,}{reasons(stats['dropped'])}"
    )
    if stats.get("duplicate_id_different_text"):
        progress(f"corpus: {stats['duplicate_id_different_text']:,} kept document(s) share their id with another kept "
                 "document of different text (all kept; stats.json: duplicate_id_different_text)")
    missing = {k: n for k, n in stats.get("missing_fields", {}).items() if n}
    if missing:
        said = ", ".join(f"{k} {n:,}" for k, n in missing.items())  # a Python dict before: {'rating': 3}
        progress(f"corpus: documents without a kept field (written as null) {said} of {stats['records_out']:,} "
                 "(stats.json: missing_fields)")
    for field in (k for k, n in missing.items() if n == stats["records_out"]):  # a typo reads the same as this
        warn(f"corpus: no document has the kept field {field!r}: all {stats['records_out']:,} hold null; is it misspelt? "
             "(--keep-fields names the input's own keys or columns)")
    near = stats.get("near_dup", {})
    if near.get("star_only_buckets"):
        progress(f"corpus: near-dup: {near['star_only_buckets']:,} band bucket(s) held more than near_dup_chain_limit "
                 f"documents ({near['star_only_documents']:,} in all: template spam?) and were linked as stars "
                 "only, which can miss a near duplicate that is not near the bucket's first document "
                 "(stats.json: near_dup)")
    if near.get("unconverged_nodes"):
        progress(f"corpus: near-dup: {near['unconverged_nodes']:,} document(s) were in clusters that did not settle in "
                 f"{rounds} rounds; those clusters may keep more than one copy, nothing was dropped "
                 "wrongly (stats.json: near_dup)")
    repaired = {k: n for k, n in stats["repaired"].items() if n}
    if repaired:
        progress(f"corpus: repaired and kept{reasons(repaired)}")
    for source, reason in damaged:  # in name order, as stats/files.jsonl holds them
        progress(f"corpus: damaged input {source} (accepted by max_damaged_files): {reason}")
