"""What each kind of artifact must hold: checked before a build is sealed and by every verify.

A manifest lists the files a build had when it was sealed, so a file lost before that (deleted by a
sweep of another root sharing ``.tmp``, never written by a stage that failed quietly) is missing
from the list and from the disk alike, and comparing the two finds nothing. The files a stage's
own records name are known, though:

===========  ==============================================================================
corpus       ``stats.json``; ``data/{train,valid}-NNNNN-of-MMMMM.jsonl.gz`` for the stats' ``num_shards``
vocab        ``tokenizer.json``, ``tokenizer_config.json``, ``special_tokens_map.json``, ``vocab.txt``,
             ``report.json``
examples     ``stats.json``, ``index.json`` and every shard ``index.json`` names
checkpoint   ``hf/discriminator/`` and ``hf/generator/``: ``config.json``, weights, ``tokenizer.json``,
             ``tokenizer_config.json``; ``metrics.jsonl``
eval         ``metrics.json``; a KorQuAD run also ``predictions.json``
===========  ==============================================================================

The contract holds for what a kolectra stage built, recognised by what that stage records (a
corpus's stats give ``num_shards``, a vocab's its ``recipe``, a checkpoint's its ``steps`` and
``objective``, examples' their ``examples`` count, an eval its ``task`` and its ``health``,
``statistic`` or ``eval_examples``). Directories other
code builds through :meth:`Store.build` (stand-ins in tests) record none of it and are held to
nothing here; their manifest is all there is to check.
"""

from __future__ import annotations

import json
from pathlib import Path, PurePosixPath

from kolectra.core import storage

VOCAB_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.txt", "report.json")
CORPUS_SPLITS = ("train", "valid")  # as corpus/shards.py SPLITS; shard names as corpus/outputs.py shard_name
HF_PARTS = ("discriminator", "generator")
HF_FILES = ("config.json", "tokenizer.json", "tokenizer_config.json")
WEIGHTS = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin")
MAX_INDEX = 64 << 20  # an examples index names its shards (kB); a larger object is refused unread


def _int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _corpus(path: Path, stats: dict, config: dict, listed=frozenset()) -> tuple[list[str], list[str]]:
    n = stats.get("num_shards")
    if not (_int(n) and n > 0):
        return [], []
    shards = [f"data/{split}-{i:05d}-of-{n:05d}.jsonl.gz" for split in CORPUS_SPLITS for i in range(n)]
    return ["stats.json", *shards], []


def _vocab(path: Path, stats: dict, config: dict, listed=frozenset()) -> tuple[list[str], list[str]]:
    return (list(VOCAB_FILES), []) if "recipe" in stats and "vocab_size" in stats else ([], [])


def _examples(path: Path, stats: dict, config: dict, listed=frozenset()) -> tuple[list[str], list[str]]:
    if not _int(stats.get("examples")):
        return [], []
    need, problems = ["stats.json", "index.json"], []
    if isinstance(path, Path) and not ((path / "index.json").is_file() and not (path / "index.json").is_symlink()):
        return need, problems  # named missing below, never opened: reading a FIFO put there would block verify
    try:
        # through storage: on a store one ranged GET (a UPath's read asks for the size first, a HEAD);
        # an absent one raises FileNotFoundError there as here
        index = json.loads(storage.read_bytes(str(path / "index.json"), limit=MAX_INDEX).decode("utf-8"))
        shards = index["shards"]
        keys = ("path",) if index.get("format", 2) == 2 else ("input_ids", "token_type_ids")
        named = [shard[k] for shard in shards for k in keys if k in shard]
    except FileNotFoundError:
        return need, problems
    except (OSError, ValueError, KeyError, TypeError, RecursionError) as e:
        return need, [f"{path / 'index.json'}: not an index of shards ({type(e).__name__})"]
    for rel in named:
        if not _inside(rel):
            problems.append(f"{path / 'index.json'}: names {rel!r}, which is not a file inside the artifact")
        else:
            need.append(rel)
    return need, problems


def _checkpoint(path: Path, stats: dict, config: dict, listed=frozenset()) -> tuple[list[str], list[str]]:
    if not (_int(stats.get("steps")) and "objective" in stats):
        return [], []
    need = ["metrics.jsonl"]
    for part in HF_PARTS:
        d = f"hf/{part}"
        need += [f"{d}/{name}" for name in HF_FILES]
        # the weights under whichever name save_pretrained chose (sharded ones name their shards);
        # the listing answers first: on a bucket each is_file() is a request
        need.append(next((f"{d}/{w}" for w in WEIGHTS if f"{d}/{w}" in listed or (path / d / w).is_file()),
                         f"{d}/{WEIGHTS[0]}"))
    return need, []


def _eval(path: Path, stats: dict, config: dict, listed=frozenset()) -> tuple[list[str], list[str]]:
    # a fine-tuning run records its health, a --seeds summary its statistic, a probe its eval_examples
    if not (isinstance(config.get("task"), str) and any(k in stats for k in ("health", "statistic", "eval_examples"))):
        return [], []
    one_korquad_run = config["task"] == "korquad" and "health" in stats  # a --seeds summary holds metrics only
    return ["metrics.json", *(["predictions.json"] if one_korquad_run else [])], []


RULES = {"corpus": _corpus, "vocab": _vocab, "examples": _examples, "checkpoint": _checkpoint, "eval": _eval}


def _inside(rel) -> bool:
    parts = PurePosixPath(rel).parts if isinstance(rel, str) and rel else ("..",)
    return not PurePosixPath(rel).is_absolute() and ".." not in parts and "\\" not in rel


def missing(kind: str, path: Path, stats, config, listed: frozenset[str] | set[str] = frozenset()) -> list[str]:
    """One message per file a ``kind`` artifact at ``path`` must hold, by its ``stats`` and ``config``,
    that is not a regular file there (those in ``listed`` are left to the manifest's own check)."""
    rule = RULES.get(kind)
    if rule is None or not isinstance(stats, dict) or not isinstance(config, dict):
        return []
    path = Path(path) if isinstance(path, str) else path  # a local Path, or a store prefix's UPath
    need, problems = rule(path, stats, config, listed)
    for rel in (r for r in dict.fromkeys(need) if r not in listed):
        f = path / rel
        if not f.is_file() or f.is_symlink():
            problems.append(f"{f}: missing (a {kind} artifact holds it: pipeline/store/layout.py)")
    return problems
