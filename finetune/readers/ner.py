"""Reading tagged sentences for the NER task: CoNLL-style files, sentence-per-line files, JSONL, saved datasets.

Feeds ``finetune.ner`` (last stage of the chain).  :func:`read_sentences` gives a
:class:`finetune.readers.tables.Table` whose records are sentences, ``{"tokens": [...], "tags": [...],
"at": [line of each token]}``, keyed by the line (or saved-dataset row) the sentence starts on.

* ``conll``: one ``token<TAB>tag`` per line (or ``token tag`` on a line without a tab), a blank
  line between sentences (``-DOCSTART-`` lines are skipped, as CoNLL-2003 files have them, and so are
  lines opening with ``## ``, KLUE-NER's sentence lines in its own TSV files).
* ``lines``: one sentence per line, ``word word ...<TAB>tag tag ...`` (space-separated, as many
  tags as words): KoELECTRA's preprocessed Naver NER files (``train.tsv``, ``test.tsv``).  A blank line
  holds no sentence: skipped and counted (``blank_lines``, as the TSV reader counts its own), so lines =
  sentences + bad sentences + blank lines; a CoNLL file's blank lines separate its sentences and are not counted.
* ``auto`` for a text file: ``lines`` when more of its first 1,000 lines hold several
  space-separated tags (as many as words) than hold one, else ``conll`` (:func:`guess_format`).  A ``.jsonl`` (``.json``, ``.ndjson``) or
  ``.parquet`` file or a folder: rows with a list of tokens (``tokens_column``) and a list of tags (``tags_column``; class-label codes of a saved
  dataset are read as their names), e.g. KLUE-NER saved with ``save_to_disk``.

Every tag must be BIO in either spelling (:func:`finetune.entities.split_tag`).  Tokens that are
empty or only whitespace (KLUE-NER lists its spaces as characters) are dropped and counted: a space
belongs to no entity boundary the characters around it do not already mark.  A sentence with a
line that has no tag, a tag that is not BIO, unequal word and tag counts, or only blank tokens
(an empty token list in JSONL too) is a *bad sentence*: counted with its line, and above
``max_bad_fraction`` of the sentences the file is refused with the first offenders named
(:func:`finetune.readers.tables.check_bad`).
"""

from __future__ import annotations

import itertools
import unicodedata
from pathlib import Path
from typing import Iterable

from kolectra.finetune.entities import entities, split_tag
from kolectra.finetune.files import FinetuneError, Reason, iter_text_lines
from kolectra.finetune.readers.tables import SUFFIXES, Table, check_bad, read_table, shown_bad

FORMATS = ("auto", "conll", "lines", "jsonl", "datasets", "parquet")
DOCSTART = "-DOCSTART-"
# KLUE-NER's own TSV files (klue-ner-v1.1_train.tsv) open each sentence with a line "## <id>\t<the sentence
# with its entities marked inline>": read as a token and its tag, every sentence was bad and the file refused
COMMENT = "## "


def read_sentences(path: Path, fmt: str = "auto", tokens_column: str = "tokens", tags_column: str = "ner_tags",
                   max_bad_fraction: float = 0.001, tag_names: tuple[str, ...] = ()) -> Table:
    """The file's sentences; ``tag_names``: the names of integer tags that are class-label codes (tag k is the k-th)."""
    path = Path(path)
    if not path.exists():
        raise FinetuneError(f"{path}: no such file or folder")
    if fmt not in FORMATS:
        raise FinetuneError(f"format: must be one of {', '.join(FORMATS)}, got {fmt!r}")
    # auto: the JSON suffixes the tables know (.jsonl, .json, .ndjson), .parquet, a folder; else a text format
    named = SUFFIXES.get(path.suffix.lower()) if path.suffix.lower() != ".txt" else None
    if fmt in ("jsonl", "datasets", "parquet") or (fmt == "auto" and (path.is_dir() or named in ("jsonl", "parquet"))):
        kind = fmt if fmt != "auto" else "datasets" if path.is_dir() else named  # read_table names a mismatch
        table = from_records(read_table(path, kind, read=(tokens_column, tags_column)), tokens_column, tags_column,
                             tag_names)
    elif path.is_dir():
        raise FinetuneError(f"{path}: a folder, but format={fmt} reads a file")
    elif fmt == "auto" and named == "csv":  # read as CoNLL: one sentence of the whole file, "line 1: no tag"
        raise FinetuneError(f"{path}: a CSV file, which ner does not read (pandas' to_csv writes a row's lists as "
                            "text, \"['김', ...]\"): write JSON Lines, df.to_json(PATH, orient='records', lines=True, "
                            "force_ascii=False), or Parquet, df.to_parquet(PATH); a CoNLL file named .csv: --set "
                            "format=conll")
    else:
        # read as the sentences are built: the file's lines are not held; a byte-order mark opening a line is dropped
        # as at the file's start (files joined with cat, each with one: a -DOCSTART- behind it was a bad sentence)
        lines = (line.removeprefix("\ufeff") for line in iter_text_lines(path))
        first = list(itertools.islice(lines, 1000))
        if fmt == "auto":
            fmt = guess_format(first)
        lines = itertools.chain(first, lines)
        # blank lines: a CoNLL file's separate sentences (its syntax, not counted); a sentence-a-line file's hold
        # none, counted as the tables' are (blank_lines): lines = sentences + bad sentences + blank lines
        records, bad, blank = (*conll_sentences(lines), None) if fmt == "conll" else line_sentences(lines)
        table = Table(path, ["tokens", "tags"], records, bad, blank=blank)
    for n, sentence in table.records:
        sentence["dropped"] = drop_blank(sentence)
        # NFC, as classify's labels: a tag typed in decomposed Hangul (B-인명 saved on macOS) is its composed one's
        sentence["tags"] = [t if t.isascii() else unicodedata.normalize("NFC", t) for t in sentence["tags"]]
    problems = {n: found for n, s in table.records if (found := sentence_problem(n, s))}
    table.bad = sorted(table.bad + list(problems.values()))
    table.records = [(n, s) for n, s in table.records if n not in problems]
    try:
        check_bad(table, max_bad_fraction, "sentences")
    except FinetuneError:
        past = [int(why.split()[2]) for _, why in table.bad if why.startswith("tag code ") and "of tag_names" in why]
        past = [code for code in past if code >= 0]  # -100 / -1 (a tokenized export's ignored word) are no tag unnamed
        if not past:
            raise
        # "raise max_bad_fraction" would drop every sentence holding the tags the names stop short of
        raise FinetuneError(f"{path}: tag_names gives {len(tag_names)} names (codes 0 to {len(tag_names) - 1}), but "
                            f"{len(past)} sentences have codes past them (up to {max(past)}): give every tag's name "
                            f"in code order (ds.features[{tags_column!r}].feature.names)") from None
    if not table.records:  # every sentence bad (max_bad_fraction=1 let them through): why, as its refusal says
        raise FinetuneError(f"{path}: no tagged sentences"
                            + (f" ({len(table.bad)} bad sentence(s): {shown_bad(table.bad[:5], table.unit)})"
                               if table.bad else ""))
    return table


def tab_fields(line: str) -> list[str]:
    """A line's tab-separated fields, a trailing tab naming no field (an editor or exporter leaves one)."""
    fields = line.split("\t")
    while len(fields) > 2 and not fields[-1].strip():
        fields.pop()
    return fields


def holds_sentence(line: str) -> bool:
    """``words<TAB>tags`` with several tags, as many as words: a sentence-per-line file's line, not a CoNLL token line."""
    fields = tab_fields(line)
    return len(fields) == 2 and len(fields[1].split()) > 1 and len(fields[0].split()) == len(fields[1].split())


def guess_format(lines: list[str]) -> str:
    """``lines`` when more of the (first) lines hold a sentence than a single tag, else ``conll``.

    By the majority, not by any line: one CoNLL line holding two words and two tags (``전자 회사<TAB>O O``)
    had made the whole file a sentence-per-line one, each token line read as a sentence of one word,
    unseen (the stray line is a bad sentence of the CoNLL file instead)."""
    sentences = sum(1 for line in lines if holds_sentence(line))
    single = sum(1 for line in lines if len(fields := tab_fields(line)) == 2 and len(fields[1].split()) == 1)
    return "lines" if sentences > single else "conll"


def conll_sentences(lines: Iterable[str]) -> tuple[list, list]:
    """``token<TAB>tag`` lines, sentences split by blank lines -> (records, bad)."""
    records, bad, current, problem = [], [], None, None
    for n, line in enumerate(itertools.chain(lines, [""]), start=1):  # a sentinel blank line closes the last sentence
        if not line.strip() or line.startswith((DOCSTART, COMMENT)):
            if current is not None:
                (bad if problem else records).append(problem or (current["at"][0], current))
            current, problem = None, None
            continue
        current = current or {"tokens": [], "tags": [], "at": []}
        fields = token_and_tag(line)
        if len(fields) != 2 or not fields[1].strip():
            problem = problem or (n, fields_problem(line, fields))
            continue
        current["tokens"].append(fields[0])
        current["tags"].append(fields[1].strip())
        current["at"].append(n)
    return records, bad


def fields_problem(line: str, fields: list[str]) -> str:
    """Why a CoNLL line is no ``token<TAB>tag``. A line of more than two fields split by spaces (CoNLL-2003's
    ``EU NNP B-NP B-ORG``) had been told "no tag", its tag in plain sight."""
    if len(fields) == 1 and len(spaced := line.split()) > 2:
        return Reason("space_separated_fields", f"{len(spaced)} space-separated fields (expected token<TAB>tag, or a "
                      "token and its tag split by a space; CoNLL-2003's word, POS, chunk and tag: keep the first and "
                      "the last)")
    if len(fields) == 1 or not fields[1].strip():
        return Reason("no_tag", "no tag (expected token<TAB>tag)")
    if len(fields) == 3 and fields[0].strip().isdigit():
        # the Naver NLP challenge's own files number each token ("1<TAB>비토리오<TAB>PER_B"): refused with no word of
        # what the third field was, where its PER_B spelling is read
        return Reason("indexed_tokens", "3 tab-separated fields (expected token<TAB>tag; an index, a token and its "
                      "tag, as the Naver NLP challenge's files number their tokens: keep the last two, cut -f2,3)")
    return Reason("wrong_field_count", f"{len(fields)} tab-separated fields (expected token<TAB>tag)")


def token_and_tag(line: str) -> list[str]:
    """A CoNLL line's fields: split on tabs (a trailing tab names no field); a line without a tab, on its
    whitespace when that gives two fields, ``token tag`` (many Korean NER files are so spelt: each had been
    refused as "no tag" with its tag in plain sight)."""
    fields = tab_fields(line)
    if len(fields) == 1 and len(spaced := line.split()) == 2:
        return spaced
    return fields


def line_sentences(lines: Iterable[str]) -> tuple[list, list, int]:
    """``words<TAB>tags`` lines, one sentence each -> (records, bad, blank lines). A blank line (or one of spaces
    and tabs alone) holds no sentence: skipped and counted, as the TSV reader's are (before ner 14 skipped uncounted,
    so the file's lines did not add up)."""
    records, bad, blank = [], [], 0
    for n, line in enumerate(lines, start=1):
        if not line.strip():
            blank += 1
            continue
        fields = tab_fields(line)  # a trailing tab names no field, as in CoNLL
        if len(fields) != 2:
            bad.append((n, Reason("wrong_field_count", f"expected words<TAB>tags, got {len(fields)} tab-separated "
                                                       "fields")))
            continue
        words, tags = fields[0].split(), fields[1].split()
        if len(words) != len(tags):
            bad.append((n, Reason("word_tag_count_mismatch", f"{len(words)} words but {len(tags)} tags")))
            continue
        records.append((n, {"tokens": words, "tags": tags, "at": [n] * len(words)}))
    return records, bad, blank


def from_records(table: Table, tokens_column: str, tags_column: str, tag_names: tuple[str, ...] = ()) -> Table:
    """Rows of a JSONL file or saved dataset with a token list and a tag list -> sentences (integer tags
    named by ``tag_names``, when given)."""
    tokens, tags = table.column(tokens_column, "tokens_column"), table.column(tags_column, "tags_column")
    records, bad = [], list(table.bad)
    for n, row in table.records:
        words, labels = row.get(tokens), row.get(tags)
        codes = isinstance(labels, list) and labels and all(isinstance(x, int) and not isinstance(x, bool)
                                                            for x in labels)
        if codes and tag_names:
            outside = next((x for x in labels if not 0 <= x < len(tag_names)), None)
            labels = labels if outside is not None else [tag_names[x] for x in labels]
            if outside is not None:
                bad.append((n, Reason("tag_code_past_tag_names", f"tag code {outside} is not a code of tag_names (0 "
                                                                 f"to {len(tag_names) - 1})")))
                continue
        if not isinstance(words, list) or not isinstance(labels, list):
            bad.append((n, Reason("not_lists", f"{tokens!r} and {tags!r} must be lists")))
        elif len(words) != len(labels):
            bad.append((n, Reason("word_tag_count_mismatch", f"{len(words)} tokens but {len(labels)} tags")))
        elif codes and not tag_names:
            bad.append((n, Reason("integer_tags", CODES)))
        elif not all(isinstance(x, str) for x in words + labels):
            bad.append((n, Reason("not_text", "tokens and tags must be text (tags may be a saved dataset's class "
                                              "labels)")))
        else:  # a tag's edge whitespace is no part of it ("B-PS " would be a type of its own), as in a text file
            records.append((n, {"tokens": words, "tags": [t.strip() for t in labels], "at": [n] * len(words)}))
    if not records and any(why == CODES for _, why in bad):  # one line with the way out, not five alike
        raise FinetuneError(f"{table.path}: {tags!r} holds integers, not tag names: class-label codes, as a "
                            "datasets Dataset's to_json writes them. Name them in code order with --set "
                            f"tag_names=B-PS,I-PS,...,O (ds.features[{tags!r}].feature.names), or save the dataset "
                            "with save_to_disk (pass its folder) or to_parquet (pass the file): their tag names are "
                            "read from it; or write the names in a column of their own before "
                            f"to_json: names = ds.features[{tags!r}].feature; ds.map(lambda r: {{'tags': "
                            f"names.int2str(r[{tags!r}])}}, remove_columns=[{tags!r}]), then --tags-column tags "
                            "(a map into the class-label column turns the names back into codes)")
    return Table(table.path, ["tokens", "tags"], records, bad, unit=table.unit, blank=table.blank)


# A JSONL row whose tags are integers: Dataset.to_json writes a ClassLabel column's codes, not its names
CODES = ("tags are integers, not tag names (class-label codes, as Dataset.to_json writes them: name them with "
         "--set tag_names=..., pass the save_to_disk folder instead, or int2str them first)")


def drop_blank(sentence: dict) -> int:
    """Drop empty or whitespace-only tokens (with their tags); how many were dropped.

    Sets ``entities_lost``: gold entities the drop took away, one tagged on blank tokens alone (a JSONL
    row's ``" "`` tagged ``B-PS``), or two joined where the blank token that began the second stood
    between them; counted (``blank_entities_dropped``) so the gold entities add up to the file's."""
    keep = [i for i, t in enumerate(sentence["tokens"]) if t.strip()]
    dropped = len(sentence["tokens"]) - len(keep)
    before = sentence["tags"]
    for key in ("tokens", "tags", "at"):
        sentence[key] = [sentence[key][i] for i in keep]
    sentence["entities_lost"] = 0
    if dropped:
        try:
            sentence["entities_lost"] = len(entities(before)) - len(entities(sentence["tags"]))
        except ValueError:  # a tag that is not BIO: a bad sentence, named by sentence_problem
            pass
    return dropped


def sentence_problem(n: int, sentence: dict) -> tuple[int, str] | None:
    """(line, why) of a sentence that cannot be used (it starts on line ``n``), else None."""
    if not sentence["tokens"]:  # counted, not dropped unseen: the counts must add up to the file's sentences
        # an empty list ("tokens": []) had read "every token is blank (0 dropped)", of tokens it has none of
        return n, (Reason("all_tokens_blank", f"every token is blank ({sentence['dropped']} dropped): nothing to tag")
                   if sentence["dropped"] else Reason("no_tokens", "no tokens (an empty list): nothing to tag"))
    return tag_problem(sentence["tags"], sentence["at"])


def tag_problem(tags: list[str], at: list[int]) -> tuple[int, str] | None:
    """(line, why) of the sentence's first tag that is not BIO, else None."""
    for tag, n in zip(tags, at):
        try:
            split_tag(tag)
        except ValueError as e:
            return n, Reason(getattr(e, "key", "tag_not_bio"), str(e))
    return None
