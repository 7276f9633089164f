"""How each stage becomes an artifact: request (config, parents, inputs) -> store -> directory.

One function per stage. Each resolves and verifies its parents, builds the stage's typed config
(preset, then ``--set`` overrides), describes the request (which libraries decide the output,
which raw inputs it reads) and hands the stage function to :meth:`Store.build`. The CLI and
``kolectra run`` both go through here, so the same request always finds the same artifact.
What only the store knows (parents' manifests, the artifact's own id) is checked or handed down
from here, so a stage never re-opens a manifest.

Each function imports its own stage (stages import only :mod:`kolectra.core`, never
:mod:`kolectra.pipeline`) when it runs: torch, transformers and scikit-learn take seconds to import
and Beam most of one, and ``kolectra vocab`` needs none of them (docs/benchmarks.md, "The CLI's
start").
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Callable, Sequence

from kolectra.core import ctrl_c, storage, store_objects
from kolectra.core.config import ConfigError
from kolectra.core.shown import shown
from kolectra.core.stage import StageOutput, progress, warn
from kolectra.finetune.files import as_given, bad_rows_lines, data_file_problem  # light: no torch
from kolectra.finetune.tasks import TASKS as FINETUNE_TASKS  # the task table only: each task loads itself
from kolectra.model.launcher import one_process  # light: no torch
from kolectra.pipeline import stage_versions
from kolectra.pipeline.configs import resolve  # the one path to a config, as --print-config takes
from kolectra.pipeline.stage_versions import note_other_version
from kolectra.pipeline.store import copies
from kolectra.pipeline.store.artifacts import Artifact, ArtifactError, Resumable, Store, fingerprint_inputs
from kolectra.pipeline.store.inputs import RecordFile
from kolectra.pipeline.store.inputs import head as inputs_head
from kolectra.pipeline.store.request import Request
from kolectra.vocab import build as vocab_build

# Libraries whose versions decide each stage's bytes: part of the artifact id. "unicodedata": Python's
# Unicode database (pipeline/store/manifest.py), which the corpus's cleaning and filters read.
LIBS_CORPUS = ("apache-beam", "kiwipiepy", "kiwipiepy_model", "unicodedata")
LIBS_VOCAB = ("tokenizers", "transformers", "sentencepiece")
LIBS_EXAMPLES = ("apache-beam", "tokenizers", "numpy", "pyarrow")
LIBS_TORCH = ("torch", "transformers", "safetensors", "numpy")
LIBS_FINETUNE = LIBS_TORCH + ("tokenizers", "datasets")

# Examples settings that do not change the bytes, recorded but left out of the id (Request.operational):
# how many documents (and bytes of lines) a work item batches (tests/test_examples.py: the same bytes at any
# value), and the holdout list's path, whose content is the request's input (the study writes it under the
# store's root).
OPERATIONAL_EXAMPLES = ("batch_documents", "batch_bytes", "holdout_ids")


NAME_MAX = 48
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+-]*")


def artifact_name(name: str | None, default: str) -> str:
    """The NAME of NAME-ID: letters, digits and `_.+-` only, starting with a letter or digit, at
    most :data:`NAME_MAX` characters. A ``name`` given (``--name``) must be one already: refused,
    never silently changed (``..``, ``my corpus``, ``뉴스``, an over-long name). ASCII only, since the
    name is a directory that travels between file systems (macOS decomposes Hangul in file names)
    and object stores. A ``default`` (from a file name, a preset) is made into one."""
    if name is not None:
        if len(name) > NAME_MAX or not _NAME.fullmatch(name):
            fixed = re.sub(r"[^A-Za-z0-9_.+-]+", "_", name).strip("_.+-")[:NAME_MAX]
            why = (f"is {len(name)} characters, over {NAME_MAX}" if len(name) > NAME_MAX else "is empty" if not name
                   else f"is not 1-{NAME_MAX} ASCII letters, digits and _ . + -, starting with a letter or digit")
            raise ArtifactError(f"--name {name!r} {why}: it names the artifact's directory, NAME-ID"
                                + (f" (e.g. --name {fixed})" if fixed else ""))
        return name
    clean = re.sub(r"[^A-Za-z0-9_.+-]+", "_", default).strip("_.+-") or "artifact"
    return clean[:NAME_MAX]


# ---- corpus ---------------------------------------------------------------------------------
def corpus(store: Store, inputs: Sequence[str], *, preset: str = "default", sets: Sequence[str] = (),
           seed: int | None = None, name: str | None = None, force: bool = False,
           beam_args: Sequence[str] = ()) -> Artifact:
    from kolectra.corpus.config import OPERATIONAL  # noqa: PLC0415
    from kolectra.corpus.inputs import Files, iter_inputs  # noqa: PLC0415 - no Beam: the listing is ours

    cfg, config = resolve("corpus", preset=preset, sets=sets, seed=seed)
    # identity from the listing (size and mtime, or the store's checksum): no pass over the bytes
    # before the job; the sha256 of the bytes the job reads is filled in after it (corpus/inputs.py).
    # The records are kept in a temporary file and read again at each pass (the id, the job's
    # listing, the merge after it, inputs.jsonl): held, they took 0.7 GB at a million files
    urls: dict[str, str] = {}  # recorded path -> the URL read, where a credential was left out of the record

    def record(f) -> dict:
        if f.url:
            urls[f.path] = f.url
        return f.record()

    with RecordFile(record(f) for f in iter_inputs(list(inputs))) as records:
        listed = Files(records, urls)
        first = inputs_head(records, 1)
        default_name = Path(first[0]["path"]).name.split(".")[0] if first else "corpus"
        req = Request(kind="corpus", name=artifact_name(name, default_name), stage_version=stage_versions.current("corpus"),
                      config=config, inputs=records, libraries=LIBS_CORPUS, operational=OPERATIONAL)
        keep_failed = storage.join(str(store.root), "failed", f"corpus-{req.name}-{req.id()}")

        def produce(out: Path) -> StageOutput:
            # Beam (1.8-1.95 CPU s and 160 MB): when a corpus is built, not for a reused one (docs/benchmarks.md)
            from kolectra.corpus import build as corpus_build  # noqa: PLC0415
            from kolectra.corpus import outputs as corpus_outputs  # noqa: PLC0415
            from kolectra.corpus.listing import fill_sha256  # noqa: PLC0415
            from kolectra.corpus.reader import source_namer  # noqa: PLC0415

            name_of = source_namer(f.path for f in listed)  # one pass over the names, for the job and the merge
            output = corpus_build.build(cfg, [], out, list(beam_args), listed=listed, keep_failed=keep_failed,
                                        name_of=name_of)
            # every file's row is in stats/files.jsonl (stats.json's sources keeps the first ones only),
            # merged with the records a line at a time; the manifest, written after this, records them
            fill_sha256(records, name_of, corpus_outputs.read_file_rows(str(out)))
            return output

        return store.build(req, produce, force, in_place=True)


# ---- vocab ----------------------------------------------------------------------------------
def vocab(store: Store, corpus_ref: str | Artifact, *, sets: Sequence[str] = (), seed: int | None = None,
          name: str | None = None, force: bool = False, beam_args: Sequence[str] = ()) -> Artifact:
    cfg, config = resolve("vocab", sets=sets, seed=seed)
    parent = store.require(corpus_ref, "corpus")
    note_other_version(parent)
    req = Request(kind="vocab", name=artifact_name(name, f"{cfg.recipe}"), stage_version=stage_versions.current("vocab"),
                  config=config, parents=(parent,), libraries=LIBS_VOCAB)
    # on a store root the word count's Beam job reads the train shards where they are; only the rest
    # (the valid split the report measures on) is downloaded. SentencePiece reads the train split here,
    # and a report measures on it when there is no valid split.
    in_place = (storage.is_url(str(store.root)) and cfg.recipe in ("morph_wordpiece", "wordpiece")
                and any(f["path"].startswith("data/valid-") for f in parent.manifest["files"]))
    train = sorted(f["path"] for f in parent.manifest["files"] if f["path"].startswith("data/train-")) if in_place else []

    def produce(out):
        local = store.local(parent, (lambda p: p not in train) if in_place else None)
        return vocab_build.build(cfg, local, out, list(beam_args),
                                 [storage.join(str(parent.path), f) for f in train] if in_place else None)
    return store.build(req, produce, force)


# ---- examples -------------------------------------------------------------------------------
def examples(store: Store, corpus_ref: str | Artifact, vocab_ref: str | Artifact, *, sets: Sequence[str] = (),
             seed: int | None = None, name: str | None = None, force: bool = False,
             beam_args: Sequence[str] = ()) -> Artifact:
    cfg, config = resolve("examples", sets=sets, seed=seed)
    corpus_art = store.require(corpus_ref, "corpus")
    vocab_art = store.require(vocab_ref, "vocab")
    check_vocab_lineage(corpus_art, vocab_art, cfg.allow_other_corpus_vocab)
    for parent in (corpus_art, vocab_art):
        note_other_version(parent)
    # a holdout list is a raw input: its content, not its path, belongs to the request
    if cfg.holdout_ids:  # checked here: inside the Beam workers a bad file was an internal error
        check_holdout(Path(cfg.holdout_ids))
    holdout = tuple(fingerprint_inputs([Path(cfg.holdout_ids)])) if cfg.holdout_ids else ()
    req = Request(kind="examples", name=artifact_name(name, f"seq{cfg.max_seq_length}"),
                  stage_version=stage_versions.current("examples"), config=config,  # read, not imported
                  parents=(corpus_art, vocab_art), inputs=holdout, libraries=LIBS_EXAMPLES,
                  operational=OPERATIONAL_EXAMPLES)
    # on a store root the Beam workers read the corpus and the tokenizer where they are, and write there
    remote = storage.is_url(str(store.root))
    corpus_files = [f["path"] for f in corpus_art.manifest["files"]] if remote else None
    tokenizer_url = storage.join(str(vocab_art.path), "tokenizer.json") if remote else None

    def produce(out: Path) -> StageOutput:
        # Beam (apache_beam.options, about 1 CPU s and 170 MB): when examples are built, not for a reused artifact
        from kolectra.corpus import examples as examples_stage  # noqa: PLC0415

        return examples_stage.build(cfg, corpus_art.path if remote else store.local(corpus_art),
                                    store.local(vocab_art), out, list(beam_args), corpus_files=corpus_files,
                                    tokenizer_url=tokenizer_url, other_vocab=corpus_art.id not in vocab_art.parents)
    return store.build(req, produce, force, in_place=True)


def check_vocab_lineage(corpus_art: Artifact, vocab_art: Artifact, allow_other: bool) -> None:
    """Refuse a vocab artifact that was not learned from this corpus, unless told."""
    if corpus_art.id in vocab_art.parents:
        return
    if allow_other:  # allowed, and said: its [UNK] share is in the examples' stats (and warned above 1 %)
        progress(shown(f"examples: the vocab {vocab_art.path} was learned from corpus "  # names a root fills: escaped
                       f"{', '.join(vocab_art.parents) or '(none)'}, not from {corpus_art.path} (id {corpus_art.id}): "
                       "used as allow_other_corpus_vocab=true says"))
        return
    raise ArtifactError(
        f"examples: the vocab {vocab_art.path} was learned from corpus {', '.join(vocab_art.parents) or '(none)'}, "
        f"not from {corpus_art.path} (id {corpus_art.id}); its word pieces may not fit this text. Use the vocab "
        f"built from this corpus, or pass --set allow_other_corpus_vocab=true to use it anyway")


# ---- pretrain -------------------------------------------------------------------------------
def pretrain(store: Store, examples_ref: str | Artifact, *, preset: str = "tiny", sets: Sequence[str] = (),
             seed: int | None = None, name: str | None = None, force: bool = False,
             resume: bool | str = False, expected_untrained: str | None = None,
             again: str = "--resume") -> Artifact:
    """``expected_untrained``: why the caller planned a run too short to learn (``kolectra run``'s
    demo); printed in place of the settings a not-learning warning would otherwise name. ``again``: what
    continues an interrupted run, as its lines name it (a caller without --resume says its own)."""
    from kolectra.model import runtime  # noqa: PLC0415 - its devices import torch when one is built, not here
    from kolectra.model.checkpoint_layout import OPERATIONAL, checkpoints_dir  # noqa: PLC0415

    # a bad setting is refused first, before anything is read, reserved or written
    adjusted: list[str] = []  # said below by rank 0 alone (a scaled warm-up), once the rank is known
    cfg, config = resolve("pretrain", preset=preset, sets=sets, seed=seed, say=adjusted.append)
    # which rank reserves and publishes the build, which follow: the device layer's answer (torchrun's
    # RANK, a TPU pod host's index in the XLA runtime), before any device is built; an XLA run under
    # torchrun is refused here
    rank, world = runtime.rank_and_world(cfg.train.device, cfg.train.xla_cache_dir)
    ex = store.require(examples_ref, "examples")  # a ref refused first: no notice of a run that never starts
    voc = store.require(ex.parent_of_kind(store, "vocab"), "vocab")
    for line in adjusted if rank == 0 else ():  # one line for the job, as the trainer's notices (is_main)
        progress(line)
    if rank == 0:  # one line for the job, as the trainer's notices (its device's is_main): not one a rank
        note_other_version(ex)
    objective = cfg.objective.objective
    # continuing from a Hugging Face pair: that directory's content is an input of the request
    inputs = tuple(fingerprint_inputs([Path(cfg.train.init_from)])) if cfg.train.init_from else ()
    req = Request(kind="checkpoint", name=artifact_name(name, f"{objective}-{cfg.preset}"),
                  stage_version=stage_versions.current("checkpoint"), config=config, parents=(ex,),
                  inputs=inputs, libraries=LIBS_TORCH, operational=OPERATIONAL)

    # the model cards carry the lineage, which only the store knows: handed down, not appended later
    parent_lines = store.lineage_lines(ex)
    lineage = ([f"checkpoint/{store.name_for(req)}-{req.id()}", "└── " + parent_lines[0]]
               + ["    " + line for line in parent_lines[1:]])
    # --resume finds the interrupted run of the same examples and preset, whatever else changed (the
    # trainer then compares its checkpoint's config; resume="exact": only this request's run, for callers
    # such as a study whose other requests may be interrupted); checkpoints go once the artifact is published
    run = Resumable(family={"kind": "checkpoint", "examples": ex.id, "preset": cfg.preset},
                    scratch=(checkpoints_dir(Path("")).name,),  # the trainer's working state in its run directory
                    rank=rank if world > 1 else 0, again=again)
    built: list[bool] = []

    def train(out: Path) -> StageOutput:
        # the trainer, here: transformers' ELECTRA modules pull in torch._dynamo and torch._inductor (about
        # 2.5 CPU s), which a missing --examples or a reused checkpoint never needs
        from kolectra.model import train as model_train  # noqa: PLC0415

        built.append(True)
        # the examples by a fetch: each rank (or XLA host) makes local only index.json and its own shards
        return model_train.pretrain(cfg, lambda only: store.local(ex, only), store.local(voc), out,
                                    resume=bool(resume), lineage=lineage, clear_checkpoints=False,
                                    checkpoint_saved=store.checkpoint_saved, expected_untrained=expected_untrained)

    # a Ctrl-C (SIGTERM, SIGHUP) after the last step lets the export, hashes and publish finish, then stops
    with ctrl_c.window() as window:  # (core/ctrl_c.py)
        art = store.build(req, train, force, resumable=run, resume=resume)
        window.words = (f"after the last step ({cfg.train.steps} of {cfg.train.steps}): the run was done, so it was "
                        f"exported and published first; checkpoint: published as {art.path}")
    if not built and rank == 0 and cfg.train.steps:  # (a study's floor, 0 steps, is untrained as meant)
        reused_health(art, expected_untrained)
    return art


def reused_health(art: Artifact, expected_untrained: str | None) -> None:
    """A reused checkpoint's verdict where it did not pass: the build that said it is past, and a rerun of the
    command that built a run that learned nothing ended in 'checkpoint: reusing ...' and its path alone."""
    from kolectra.pipeline.verdicts import health_of, said  # noqa: PLC0415

    health = health_of(art)
    if health is not None and health["status"] != "ok":
        expected = " (expected here: nothing to change)" if expected_untrained else ""
        what = said(health) if health["status"] == "not_learning" else f"training health {said(health)}"
        progress(f"checkpoint: WARNING: {art.path.name} (reused): {what}{expected}")


# ---- finetune -------------------------------------------------------------------------------
def resolve_model(store: Store, ref: str | Artifact) -> tuple[Path, tuple[Artifact, ...], tuple[dict, ...]]:
    """A checkpoint artifact (its discriminator) or any local HF ELECTRA directory (hashed as input)."""
    fetch, parents, inputs = model_source(store, ref)
    return fetch(), parents, inputs


def model_source(store: Store, ref: str | Artifact) -> tuple[Callable[[], Path], tuple[Artifact, ...],
                                                             tuple[dict, ...]]:
    """:func:`resolve_model`, the directory handed back as a call that makes it local: a stage calls it
    when it builds, so a reused eval fetches nothing (on a bucket it downloaded the whole checkpoint,
    generator and logs too, or re-hashed its cached copy, to find the eval published); and only the
    discriminator, all a task reads."""
    def discriminator(art: Artifact) -> Callable[[], Path]:
        note_other_version(art)
        return lambda: store.local(art, lambda f: f.startswith("hf/discriminator/")) / "hf" / "discriminator"

    if isinstance(ref, Artifact):
        art = store.require(ref, "checkpoint")
        return discriminator(art), (art,), ()
    if storage.is_url(str(ref)):  # a checkpoint kept in a store, or its hf/discriminator folder there
        url = str(ref).rstrip("/")
        artifact_url = url[:-len("/hf/discriminator")] if url.endswith("/hf/discriminator") else url
        try:
            art = store.require(artifact_url, "checkpoint")
        except ArtifactError:  # a model folder in a bucket: 'incomplete artifact', or Python's recursion limit
            if store_objects.object_info(f"{artifact_url}/manifest.json") is not None:
                raise  # an artifact: of another kind, or damaged, in its own words
            raise ArtifactError(f"--model {ref}: no checkpoint artifact there, and a Hugging Face model directory "
                                "is read from this machine's disk: copy it here first") from None
        return discriminator(art), (art,), ()
    p = Path(ref)
    if p.name == "discriminator" and p.parent.name == "hf" and (p.parent.parent / "manifest.json").is_file():
        # a checkpoint artifact's own export, given by its folder: the artifact, so the eval keeps its
        # lineage and is the request ``--model NAME`` makes (as a raw folder it had no parent, another id)
        art = store.require(str(p.parent.parent), "checkpoint")
        return discriminator(art), (art,), ()
    if p.is_dir() and (p / "config.json").is_file() and not (p / "manifest.json").exists():
        return lambda: p, (), tuple(fingerprint_inputs([p]))
    # a path (not a name such as "sample", which a folder in the working directory may share) to a folder
    # that is neither: else "not a complete artifact", which it never was
    if p.is_dir() and ("/" in str(ref) or p.is_absolute()) and not (p / "manifest.json").exists():
        raise ArtifactError(f"--model {p}: neither a checkpoint artifact (no manifest.json) nor a Hugging Face "
                            "model directory (no config.json)")
    art = store.require(ref, "checkpoint")
    return discriminator(art), (art,), ()


def finetune(store: Store, task: str, model_ref: str | Artifact, train_file: str | Path, eval_file: str | Path, *,
             preset: str = "koelectra", sets: Sequence[str] = (), seed: int | None = None, name: str | None = None,
             force: bool = False, dev_file: str | Path | None = None, eval_set: str = "") -> Artifact:
    """``eval_set``: (nsmc) what ``eval_file``'s rows are when they are not NSMC's test set (a study's held-out
    rows); its words replace "NSMC test accuracy" in the artifact, recorded in its config (so in its id)."""
    cfg, config = resolve("finetune", task=task, preset=preset, sets=sets, seed=seed)
    if eval_set:  # absent otherwise: a plain run's config, id and bytes are as they were
        if task != "nsmc":
            raise ArtifactError(f"{task}: takes no eval_set (nsmc only)")
        config = {**config, "eval_set": eval_set}
    one_process(f"fine-tuning ({task})")  # under torchrun every rank built a device and waited for the others
    entry = FINETUNE_TASKS[task]
    model_dir, parents, model_inputs = model_source(store, model_ref)
    if dev_file is not None and not entry.dev_flag:
        raise ArtifactError(f"{task}: takes no --dev file")
    data_files = [Path(f) for f in (train_file, eval_file, dev_file) if f is not None]
    for f in data_files:  # a saved datasets folder is data too (classify, regress, ner)
        if problem := data_file_problem(f, folder_ok=entry.dev_flag):
            raise ArtifactError(f"{task}: data file {problem}: {as_given(f)}")
    # the model's inputs come first: `kolectra report` reads the model of an eval from there
    inputs = model_inputs + tuple(fingerprint_inputs(data_files))
    req = Request(kind="eval", name=artifact_name(name, task), stage_version=stage_versions.version_of(entry.module_name),
                  config=config, parents=parents, inputs=inputs,
                  libraries=LIBS_FINETUNE)
    # tokenised splits are kept between runs (e.g. --seeds) outside every hashed artifact
    cache = store.cache_dir("finetune")
    extra = {"dev_file": Path(dev_file)} if dev_file is not None else {}
    extra |= {"eval_set": eval_set} if eval_set else {}

    built: list[bool] = []

    def produce(out: Path) -> StageOutput:
        built.append(True)
        task_module = entry.load()  # torch, transformers (and torch._dynamo): when the eval is built, as pretrain's
        with copies.reading(cache):  # read (memory-mapped) while it trains: `artifacts gc --cache` leaves it alone
            return task_module.run(cfg, model_dir(), Path(train_file), Path(eval_file), out, cache_dir=cache, **extra)

    art = store.build(req, produce, force)
    if not built:
        reused_bad_rows(art, task)
    return art


def reused_bad_rows(art: Artifact, task: str) -> None:
    """A reused eval's data files' bad rows left out, from its metrics.json, as its build said them: a rerun of the
    command ended in the scores and the path alone, the file's bad rows unsaid (its build's line long scrolled away)."""
    try:  # where it lives: a local root's folder or a store's object
        metrics = json.loads(art.read_bytes("metrics.json").decode("utf-8"))
    except (OSError, ValueError):
        return  # none, or damaged: the store's checks and `kolectra report` say so, not this line
    for line in bad_rows_lines(task, metrics) if isinstance(metrics, dict) else ():
        # the folder's name and the file's words, which a root from elsewhere fills: escaped, as every such line
        warn(shown(f"{line} (reused eval/{art.path.name})"))


def probe(store: Store, model_ref: str | Artifact, train_file: str | Path, eval_file: str | Path, *,
          sets: Sequence[str] = (), seed: int | None = None, name: str | None = None, force: bool = False,
          eval_set: str = "") -> Artifact:
    """A frozen-encoder linear probe on NSMC-format files (:mod:`kolectra.finetune.probe`): an eval artifact.
    ``eval_set``: what ``eval_file``'s rows are (a study's held-out rows), recorded as :func:`finetune`'s."""
    from kolectra.finetune import probe as ft_probe  # noqa: PLC0415 - torch and scikit-learn: when a probe runs

    cfg, config = resolve("probe", sets=sets, seed=seed)
    config = {**config, "eval_set": eval_set} if eval_set else config
    model_dir, parents, model_inputs = model_source(store, model_ref)
    for f in (train_file, eval_file):
        if problem := data_file_problem(Path(f)):
            raise ArtifactError(f"probe: data file {problem}: {as_given(f)}")
    req = Request(kind="eval", name=artifact_name(name, "probe"), stage_version=ft_probe.STAGE_VERSION,
                  config=config, parents=parents,
                  inputs=model_inputs + tuple(fingerprint_inputs([Path(train_file), Path(eval_file)])),
                  libraries=LIBS_TORCH + ("tokenizers", "scikit-learn"))  # its fast tokenizer, as finetune's
    built: list[bool] = []

    def produce(out: Path) -> StageOutput:
        built.append(True)
        return ft_probe.run(cfg, model_dir(), Path(train_file), Path(eval_file), out, eval_set=eval_set)

    art = store.build(req, produce, force)
    if not built:
        reused_bad_rows(art, "probe")
    return art


def finetune_seeds(store: Store, task: str, model_ref: str | Artifact, train_file: str | Path,
                   eval_file: str | Path, seeds: Sequence[int], *, preset: str = "koelectra",
                   sets: Sequence[str] = (), name: str | None = None, force: bool = False,
                   dev_file: str | Path | None = None) -> Artifact:
    """One eval artifact per seed, then a summary eval artifact (median and spread) over them. Stopped or
    failed, the line names the seeds done and kept: it said 'eval: nothing published' (the seed under
    way's) with the earlier seeds' artifacts published, which the same command again reuses."""
    runs: dict[int, Artifact] = {}
    try:
        return _finetune_seeds(store, task, model_ref, train_file, eval_file, seeds, runs, preset=preset, sets=sets,
                               name=name, force=force, dev_file=dev_file)
    except (KeyboardInterrupt, Exception) as e:
        if runs:
            done = "every seed was" if len(runs) == len(seeds) else f"seed{'s' * (len(runs) > 1)} {', '.join(map(str, runs))}"
            again = "without --force" if force else "again"  # with it, the same command rebuilds them
            e.add_note(f"{done} done before it and kept: {', '.join(f'{a.kind}/{a.path.name}' for a in runs.values())} "
                       f"(the same command {again} reuses them)")
        raise


def _finetune_seeds(store: Store, task: str, model_ref: str | Artifact, train_file: str | Path,
                    eval_file: str | Path, seeds: Sequence[int], runs: dict[int, Artifact], *, preset: str,
                    sets: Sequence[str], name: str | None, force: bool, dev_file: str | Path | None) -> Artifact:
    from kolectra.finetune import seeds as ft_seeds  # noqa: PLC0415

    for s in seeds:  # each one in runs as soon as it is published
        runs[int(s)] = finetune(store, task, model_ref, train_file, eval_file, preset=preset, sets=sets, seed=int(s),
                                name=name, force=force, dev_file=dev_file)
    # the runs' resolved config but their seeds, not the --set text: a --config file, or 5e-4 spelled
    # 0.0005, summarises the same runs as the same artifact
    _, config = resolve("finetune", task=task, preset=preset, sets=sets)
    req = Request(kind="eval", name=artifact_name(name, f"{task}-seeds"), stage_version=ft_seeds.STAGE_VERSION,
                  config={**{k: v for k, v in config.items() if k != "seed"}, "seeds": sorted(runs)},
                  parents=tuple(runs[s] for s in sorted(runs)))

    def produce(out: Path) -> StageOutput:
        metrics = {s: json.loads(a.read_bytes("metrics.json").decode("utf-8")) for s, a in runs.items()}
        where = {s: f"{a.kind}/{a.path.name}" for s, a in runs.items()}
        summary, table = ft_seeds.write_summary(task, metrics, out / "seeds.json", where)
        for line in table.splitlines():
            progress(line)
        # the summary holds medians; each run's predictions (KorQuAD's official script reads predictions.json) are its own
        for s in sorted(runs):
            held = {f.get("path") for f in runs[s].manifest.get("files", [])} & {"predictions.json", "predictions.jsonl"}
            progress(f"seed {s}: {where[s]}" + (f" (its {' and '.join(sorted(held))})" if held else ""))
        # the headline figures are medians over seeds, as the ELECTRA paper reports them
        headline = {k: summary[k]["median"] for k in ft_seeds.TASK_METRICS[task]}
        spread = {f"{k}_spread": summary[k]["spread"] for k in ft_seeds.TASK_METRICS[task]}
        doc = {"task": task, "seeds": sorted(runs), "statistic": "median over seeds", **headline, **spread}
        (out / "metrics.json").write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        # the runs' warnings, each once with how many seeds had it: artifacts show of the summary lists them (before
        # 2026-12-02 none; metrics.json is unchanged)
        said = ft_seeds.seed_warnings({s: list((a.manifest.get("stats") or {}).get("warnings") or [])
                                       for s, a in runs.items()})
        return StageOutput(stats={**doc, "warnings": said} if said else doc)

    return store.build(req, produce, force)


def check_holdout(path: Path) -> None:
    """Refuse an ``examples`` holdout list that is missing, not a file, or not UTF-8, naming the setting."""
    problem = data_file_problem(path)
    if problem is None:
        try:
            path.read_bytes().decode("utf-8")
        except UnicodeDecodeError as e:
            problem = f"is not UTF-8 ({e.reason} at byte {e.start})"
    if problem:
        raise ConfigError(f"holdout_ids: {as_given(path)} {problem} (expected a UTF-8 text file of document ids, one a line)")
