"""Settings of the corpus stage (first link of the chain: raw text -> cleaned, segmented corpus).

One frozen dataclass, resolved into the artifact id by ``kolectra.pipeline.store.artifacts``; the CLI
maps ``--format/--text-field/--id-field`` onto the fields of the same names and ``--set key=value``
onto any of them. Beam pipeline options (``--runner`` ...) are not part of this config: they decide
where the job runs, never what it produces.
"""

from __future__ import annotations

import dataclasses
from typing import Literal

from kolectra.core.config import ConfigError
from kolectra.corpus.languages import PROFILES, SCRIPTS

# A corpus document's own keys (corpus/shards.py): a kept input field may not take one of them.
DOCUMENT_KEYS = ("id", "source", "text", "sentences", "morphs")
# At most this many kept fields: each is a column of every document, a feature of the dataset card
# and a count in stats.json; far above the few a corpus carries (a rating, a date, a URL), and small
# enough that what names them stays a readable line (3,000 names made a refusal one line of 17 kB).
MAX_KEEP_FIELDS = 128
# samples_per_reason at most: one element (samples/dropped.jsonl's rows, up to 400 characters each)
# holds them all; every drop goes to its own files with write_dropped (corpus/drops.py)
MAX_SAMPLES_PER_REASON = 1000
# settings that decide how the job runs, not what it writes: left out of the artifact id (here, not in
# corpus/build.py, which imports Beam: the request is made before a reused corpus's lookup)
OPERATIONAL = ("dedup_group_bytes", "split_bytes")


@dataclasses.dataclass(frozen=True)
class CorpusConfig:
    # input parsing
    # auto: *.jsonl/*.json/*.ndjson[.gz|.bz2|.zst] -> jsonl, else text (one document a line);
    # *.parquet|*.pq -> parquet (a document a row, corpus/parquet.py);
    # blocks: documents are runs of non-blank lines separated by blank lines (never auto-detected)
    format: Literal["auto", "text", "jsonl", "blocks", "parquet"] = "auto"
    text_field: str = "text"  # JSONL key (Parquet column) holding the document text
    id_field: str = "id"  # JSONL key (Parquet column) holding the document id (missing -> "<source>:<line>")
    max_line_bytes: int = 1 << 20  # longer lines are rejected (bounded memory per record)
    # jsonl, parquet: other input fields (columns) carried into each document as they are (absent or null -> null,
    # counted per field in stats.json -> missing_fields). Recorded, and hashed into the id, only
    # when set (core.config.to_dict), so the corpora made before it keep their ids.
    keep_fields: tuple[str, ...] = dataclasses.field(default=(), metadata={"recorded": "unless default"})
    # filters, on the normalised text. min_chars counts letters and numbers (a Hangul syllable or jamo
    # is one; spaces, punctuation and symbols none: filters.content_length), so 재밌어요 (4) is kept
    # and 최고..... (2) is not; until corpus 21 it counted code points at 5 (docs/corpus.md, "Read
    # on real reviews"). max_chars bounds the work a document makes: code points, all of them
    min_chars: int = 4
    max_chars: int = 100_000
    # web-text cleaning (corpus/webtext.py), off here, on in production_config()
    strip_html: bool = False  # drop tags, unescape entities
    mask_pii: bool = False  # URL/e-mail/RRN/card/phone -> <url> <email> <rrn> <card> <phone>
    max_repeat: int = 0  # cut runs of one character to this many (ㅋㅋㅋㅋㅋ -> ㅋㅋ); 0 = off
    # language profile (corpus/languages.py): script, analyser, boilerplate, PII and sentence rules
    language: str = "ko"
    # quality filters (corpus/filters.py); the defaults switch them off
    script: str = ""  # the script min_script_share counts; "" = the language profile's
    min_script_share: float = 0.0
    max_symbol_ratio: float = 1.0  # share of characters that are Unicode symbols (★ ♥ ^ emoji; not ~)
    max_repetition: float = 1.0  # share of characters inside eojeol bigrams said >= 3 times (Gopher)
    drop_boilerplate: bool = False  # remove boilerplate lines (notices, bylines); all-boilerplate docs dropped
    boilerplate_phrases: tuple[str, ...] = ()  # extra phrases, added to the profile's
    near_dup_threshold: float = 0.0  # MinHash-LSH Jaccard threshold (corpus/neardup.py); 0 = off
    # a band bucket of up to this many documents is linked as a sorted chain and a star, held in
    # memory (about 60 bytes each); a larger one as a star only, streamed (corpus/neardup.py)
    near_dup_chain_limit: int = 1000
    # about this many bytes of (uncompressed) input per exact-dedup group: what one worker holds at
    # once in KeepFirstCopies, whatever the corpus size (corpus/build.py: dedup_buckets). It does not
    # change the output, so it is recorded only when set and left out of the artifact id.
    dedup_group_bytes: int = dataclasses.field(default=4 << 20, metadata={"recorded": "unless default"})
    # a text, JSONL, blocks or Parquet file over this many bytes (a compressed one: over 8 times this
    # once decompressed) is read in pieces of about this size by several workers (corpus/pieces.py),
    # not whole by one. The output is the same bytes at any value, so it too is recorded only when
    # set and left out of the artifact id.
    split_bytes: int = dataclasses.field(default=128 << 20, metadata={"recorded": "unless default"})
    # output
    valid_fraction: float = 0.01  # held out by a stable hash of the normalised text
    # shards per split; 0 = from the input's size, about shard_bytes of JSON each
    # (corpus/build.py: resolve_shards; the count used is in stats.json and the manifest)
    num_shards: int = 0
    shard_bytes: int = 192 << 20
    # every dropped document (reason, source, line, id, the text as its rule saw it) written to
    # dropped/<reason>-NNNNN-of-NNNNN.jsonl.gz, num_shards files a reason at most (corpus/drops.py);
    # samples/dropped.jsonl shows only a few a reason. Recorded, and hashed into the id, only when set
    write_dropped: bool = dataclasses.field(default=False, metadata={"recorded": "unless default"})
    # dropped documents shown per reason in samples/dropped.jsonl (the smallest salted hashes of
    # (source, line)); recorded, and hashed into the id, only when set
    samples_per_reason: int = dataclasses.field(default=5, metadata={"recorded": "unless default"})
    # a job whose rejected share (malformed input) exceeds this fails, naming the worst file
    max_reject_ratio: float = 0.05
    # damaged input files (truncated or corrupted archives) accepted with what could be read of them
    max_damaged_files: int = 0
    seed: int = 0  # salts the train/valid hash

    def validate(self) -> None:
        """Raise a ConfigError naming the first setting that cannot work."""
        # called once the overrides are applied (core.config.override), so before Beam starts
        if self.format not in ("auto", "text", "jsonl", "blocks", "parquet"):
            raise ConfigError(f"format must be auto, text, jsonl, blocks or parquet, got {self.format!r}")
        if not 0.0 <= self.valid_fraction < 1.0:
            raise ConfigError(f"valid_fraction must be in [0, 1), got {self.valid_fraction}")
        if self.num_shards < 0:
            raise ConfigError(f"num_shards must be >= 1, or 0 for a count from the input's size, got {self.num_shards}")
        if self.shard_bytes < 1 << 16:
            raise ConfigError(f"shard_bytes must be at least 64 KiB ({1 << 16}), got {self.shard_bytes}")
        if self.min_chars < 0 or self.max_chars < max(self.min_chars, 1):
            raise ConfigError(f"need 0 <= min_chars <= max_chars, got {self.min_chars}, {self.max_chars}")
        if len(self.keep_fields) > MAX_KEEP_FIELDS:
            raise ConfigError(f"keep_fields: {len(self.keep_fields)} fields named, at most {MAX_KEEP_FIELDS} (each is a "
                              "column of every document and of the dataset card): keep the ones the corpus needs")
        for i, name in enumerate(self.keep_fields):
            if not name:
                raise ConfigError("keep_fields: a field name is empty")
            if name in DOCUMENT_KEYS:
                raise ConfigError(f"keep_fields: {name!r} is a key of the corpus document itself "
                                  f"({', '.join(DOCUMENT_KEYS)}); the text and the id come from text_field and id_field")
            if name in self.keep_fields[:i]:
                raise ConfigError(f"keep_fields: {name!r} is named twice")
        if self.max_line_bytes < 1:
            raise ConfigError(f"max_line_bytes must be positive, got {self.max_line_bytes}")
        for name in ("min_script_share", "max_symbol_ratio", "max_repetition", "near_dup_threshold"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ConfigError(f"{name} must be in [0, 1], got {getattr(self, name)}")
        if self.near_dup_chain_limit < 2:
            raise ConfigError(f"near_dup_chain_limit must be >= 2, got {self.near_dup_chain_limit}")
        if self.dedup_group_bytes < 1 << 10:
            raise ConfigError(f"dedup_group_bytes must be at least 1 KiB ({1 << 10}), got {self.dedup_group_bytes}")
        if self.split_bytes < 1 << 10:
            raise ConfigError(f"split_bytes must be at least 1 KiB ({1 << 10}), got {self.split_bytes}")
        if self.max_repeat < 0:
            raise ConfigError(f"max_repeat must be >= 0, got {self.max_repeat}")
        if self.language not in PROFILES:
            raise ConfigError(f"language must be one of {sorted(PROFILES)}, got {self.language!r}")
        if self.script and self.script not in SCRIPTS:
            raise ConfigError(f"script must be one of {sorted(SCRIPTS)}, got {self.script!r}")
        if not 1 <= self.samples_per_reason <= MAX_SAMPLES_PER_REASON:
            raise ConfigError(f"samples_per_reason must be in [1, {MAX_SAMPLES_PER_REASON}], got {self.samples_per_reason} "
                              "(every drop: --set write_dropped=true)")
        if self.max_damaged_files < 0:
            raise ConfigError(f"max_damaged_files must be >= 0, got {self.max_damaged_files}")
        if not 0.0 <= self.max_reject_ratio <= 1.0:
            raise ConfigError(f"max_reject_ratio must be in [0, 1], got {self.max_reject_ratio}")


def default_config() -> CorpusConfig:
    """Faithful cleaning only: Unicode normalisation, length filters, exact dedup."""
    return CorpusConfig()


def production_config() -> CorpusConfig:
    """Web-crawl strength: HTML and personal data removed, repeats cut, quality filters on.
    Thresholds follow the spirit of Gopher/C4-style heuristics, tuned loosely for Korean comments."""
    return CorpusConfig(
        strip_html=True,
        mask_pii=True,
        max_repeat=2,
        min_script_share=0.5,
        max_symbol_ratio=0.4,
        max_repetition=0.3,
        drop_boilerplate=True,
        near_dup_threshold=0.8,
    )
