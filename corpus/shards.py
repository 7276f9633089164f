"""The corpus artifact's document format, shared by every stage that reads a corpus.

Each kept document is one JSON line in ``data/<split>-NNNNN-of-MMMMM.jsonl.gz``::

    {"id": str, "source": str, "text": str,
     "sentences": [[start, end], ...],
     "morphs": [[start, end, tag], ...]}

Offsets are Python string indices into ``text`` (the cleaned, NFC text); morphemes are surface
spans of that text, never Kiwi's normalised forms, so later stages (vocab, examples) never run
the analyser again. ``split`` is ``train`` or ``valid``. Input fields kept with ``keep_fields``
follow, as they were, but for a field of floats only, spelled as strings (:func:`float_fields`).

:func:`write_dataset_card` puts a Hugging Face dataset card (``README.md``: YAML ``configs`` and
``features``, then prose) in the artifact root, so ``datasets.load_dataset(<corpus dir>)`` loads
the splits as ``train`` and ``validation`` with these fields.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Iterator

from kolectra.core import storage
from kolectra.core.errors import UserInputError

DATA_DIR = "data"
SPLITS = ("train", "valid")
STATS_FILE = "stats.json"
CARD_FILE = "README.md"
HF_SPLITS = {"train": "train", "valid": "validation"}  # kolectra's split name -> the Hugging Face one


def shard_paths(corpus_dir: Path, split: str = "train") -> list[Path]:
    if split not in SPLITS:
        raise UserInputError(f"unknown split {split!r}; expected one of {SPLITS}")
    return sorted(Path(corpus_dir, DATA_DIR).glob(f"{split}-*.jsonl*"))


def _stats(corpus_dir: Path) -> dict:
    try:
        return json.loads(Path(corpus_dir, STATS_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def document_count(corpus_dir: Path, split: str = "train") -> int | None:
    """Documents in ``split`` as the corpus stage counted them (``stats.json``); None if not recorded."""
    try:
        return int(_stats(corpus_dir)["splits"][split]["documents"])
    except (KeyError, TypeError, ValueError):
        return None


def _open(path: Path):
    return gzip.open(path, "rt", encoding="utf-8") if path.suffix == ".gz" else open(path, encoding="utf-8")


def iter_documents(corpus_dir: Path, split: str = "train") -> Iterator[dict]:
    """Documents of one split in shard order (deterministic), kept float fields as floats."""
    floats = float_fields(_stats(corpus_dir).get("field_kinds", {}))
    for path in shard_paths(corpus_dir, split):
        if not floats:
            yield from iter_shard(path)
            continue
        for doc in iter_shard(path):
            for f in floats:
                doc[f] = None if doc.get(f) is None else float(doc[f])
            yield doc


def iter_shard(path: Path) -> Iterator[dict]:
    """Documents of one shard file, in order."""
    with _open(path) as f:
        for line in f:
            if line.strip():
                yield json.loads(line)


def sentences(doc: dict) -> list[str]:
    text = doc["text"]
    return [text[s:e] for s, e in doc["sentences"]]


def sentence_morphs(doc: dict) -> list[list[str]]:
    """Per sentence, the surface strings of its morphemes (in order)."""
    text = doc["text"]
    out: list[list[str]] = []
    morphs = doc["morphs"]
    i = 0
    for s, e in doc["sentences"]:
        cur = []
        while i < len(morphs) and morphs[i][0] < e:
            ms, me = morphs[i][0], morphs[i][1]
            if ms >= s:
                cur.append(text[ms:me])
            i += 1
        out.append(cur)
    return out


# The dataset card's YAML: a config per corpus split that has documents (``datasets`` refuses a
# split without data), and the features, so every split loads with the same types. ``morphs``
# mixes numbers and a tag string in one list, which only ``json`` holds; declared as one ``json``
# value a document (not a ``json`` a morpheme), ``datasets`` encodes it once a row instead of once a
# morpheme, the same values about 4 times faster (docs/corpus.md, "Loading with datasets").
_CARD_HEAD = """---
configs:
- config_name: default
  data_files:
{data_files}dataset_info:
  features:
  - name: id
    dtype: string
  - name: source
    dtype: string
  - name: text
    dtype: string
  - name: sentences
    list:
      list: int64
  - name: morphs
    dtype: json
{kept_features}---
"""
_CARD_BODY = """
# kolectra corpus

Korean documents cleaned (NFC), filtered, deduplicated and split into sentences and morphemes
(kiwipiepy) by `kolectra corpus`; the input of kolectra's vocab and examples stages.

| split | documents | sentences | morphemes | characters |
| --- | ---: | ---: | ---: | ---: |
{table}
## Loading

```python
from datasets import load_dataset

corpus = load_dataset("path/to/this/artifact")  # a DatasetDict: {splits}
```

## Fields

One JSON line per document in `data/<split>-NNNNN-of-MMMMM.jsonl.gz`:

- `id` (string), `source` (string: the input the document came from), `text` (string: the cleaned text);
- `sentences`: `[[start, end], ...]`, character offsets into `text` (Python string indices);
- `morphs`: `[[start, end, tag], ...]`, each morpheme's surface span in `text` and its part-of-speech
  tag (Kiwi's tag set, e.g. `NNG`, `JKS`, `EF`).
{kept_fields}
Filtering counts (`records_in = records_out + rejected + sum(dropped)`) are in `stats.json`.
"""


# A kept field's values by JSON kind, as the corpus job counts them (stats.json -> field_kinds), and
# the feature type the card declares for a field whose non-null values are all of one kind. Any other
# field is ``json``, which takes any value but re-reads a string that parses as JSON (datasets' Json
# feature: "00123" loads as 123, "true" as True); a declared type loads strings as strings.
FIELD_DTYPES = {"string": "string", "integer": "int64", "number": "float64", "boolean": "bool"}


def float_fields(field_kinds: dict) -> tuple[str, ...]:
    """The kept fields whose values are all floats (``stats.json`` → ``field_kinds``; the card's
    ``float64``). Their values are written as strings of their shortest round-trip digits
    (``repr``): ``datasets`` re-encodes every line of a file whose features hold a ``json`` type (the
    card's ``morphs`` always does) with pandas' ujson, which writes ten decimals and parses
    approximately (1/3 came back 0.3333333333, 5e-324 0.0, the largest double infinity); a string it
    keeps as it is, and Arrow's cast of it to float64 is exact. :func:`iter_documents` reads them as
    floats again."""
    return tuple(f for f, kinds in field_kinds.items() if _field_dtype(kinds) == "float64")


def value_kind(value) -> str:
    """The JSON kind of a kept field's value: ``string``, ``integer`` (within int64), ``big_integer``,
    ``number`` (a float), ``boolean``, ``array``, ``object`` or ``null``."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer" if -(1 << 63) <= value < 1 << 63 else "big_integer"
    return {float: "number", str: "string", list: "array", tuple: "array"}.get(type(value), "object")


def _field_dtype(kinds: dict | None) -> str:
    """``kinds``: a field's {kind: count} from stats.json (None: not recorded, a corpus made before)."""
    seen = [k for k, n in (kinds or {}).items() if n]
    return FIELD_DTYPES.get(seen[0], "json") if len(seen) == 1 else "json"


def write_dataset_card(corpus_dir: Path | str, keep_fields: tuple[str, ...] = ()) -> dict:
    """``README.md`` in the corpus artifact (a local directory or a store prefix): what
    ``datasets.load_dataset(corpus_dir)`` needs, and the split sizes from ``stats.json``. An input
    field kept with ``keep_fields`` is declared as the type all its values have (``stats.json`` →
    ``field_kinds``: string, int64, float64, bool), so it loads as written; one of mixed or nested
    values is ``json`` (any JSON value, null too). Deterministic: the same stats give the same bytes.
    Returns the file's entry (path, bytes, sha256)."""
    try:
        doc = json.loads(storage.read_bytes(storage.join(str(corpus_dir), STATS_FILE)).decode("utf-8"))
    except (OSError, ValueError):
        doc = {}
    stats, kinds = doc.get("splits", {}), doc.get("field_kinds", {})

    def has_documents(split: str) -> bool:
        return stats[split].get("documents", 0) > 0 if split in stats else bool(shard_paths(corpus_dir, split))

    present = [s for s in SPLITS if has_documents(s)]
    data_files = "".join(f"  - split: {HF_SPLITS[s]}\n    path: {DATA_DIR}/{s}-*\n" for s in present or ["train"])
    table = "".join(f"| {HF_SPLITS[s]} | " + " | ".join(f"{stats.get(s, {}).get(k, 0):,}" for k in
                                                         ("documents", "sentences", "morphs", "chars")) + " |\n"
                    for s in SPLITS)
    splits = " and ".join(f"`{HF_SPLITS[s]}`" for s in present) or "none (the corpus kept no documents)"
    dtypes = {f: _field_dtype(kinds.get(f)) for f in keep_fields}
    kept_features = "".join(f"  - name: {json.dumps(f, ensure_ascii=False)}\n    dtype: {dtypes[f]}\n"
                            for f in keep_fields)
    kept = ("- " + ", ".join(f"`{f}` ({dtypes[f]})" for f in keep_fields) + ": input fields carried as they were "
            "(null where a document's input lacked them; counted in `stats.json` → `missing_fields`). A field "
            "whose values are all strings, integers, floats or booleans loads as that type; any other is `json`, "
            "whose strings that read as JSON come back parsed. A `float64` field's values are written as strings "
            "of their shortest round-trip digits (`\"0.30000000000000004\"`), which `datasets` loads as the exact "
            "floats; a JSON number it would round to ten decimals.\n") if keep_fields else ""
    text = (_CARD_HEAD.format(data_files=data_files, kept_features=kept_features)
            + _CARD_BODY.format(table=table, splits=splits, kept_fields=kept))
    return {"path": CARD_FILE, **storage.write_bytes(storage.join(str(corpus_dir), CARD_FILE), text.encode("utf-8"))}
