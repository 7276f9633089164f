"""``kolectra run``: the whole chain on the embedded sample, on the CPU, then a summary.

The sample ships inside the package (``pipeline/sample/``): a CC0 slice of Naver movie reviews
(the NSMC crawl) for pretraining, an NSMC-format train/test slice, and a KorQuAD-format QA
fixture written for kolectra (KorQuAD itself may not be excerpted). Each stage goes through the
artifact store, so a second ``kolectra run`` reuses everything and finishes in seconds.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from kolectra.core import ctrl_c
from kolectra.core.stage import progress
from kolectra.model.launcher import one_process
from kolectra.pipeline import stages
from kolectra.pipeline.cli.errors import after_the_command
from kolectra.pipeline.store.artifacts import Artifact, Store, default_root

SAMPLE = Path(__file__).resolve().parent / "sample"
# what continues a stopped pretraining run, as the store's lines name it (this command has no --resume), and
# reuses the stages done: 'kolectra run again' said the opposite of what it does after --force (rebuilds them)
AGAIN = "the same `kolectra run` without --force"

# Sizes for the sample: small enough for a few minutes on 2 cores, large enough to learn something.
SAMPLE_SETS = {
    "vocab": ["vocab_size=8000"],
    "examples": ["max_seq_length=128"],
    "pretrain": ["train.steps=600", "train.warmup_steps=60", "train.log_every=20"],
    # a tiny model wants a larger learning rate than KoELECTRA's 5e-5 to move in a few epochs
    "nsmc": ["max_train_examples=1600", "max_eval_examples=500", "epochs=5", "optim.lr=5e-4"],
    "korquad": ["epochs=5", "optim.lr=5e-4"],
}


def run_sample(store: Store, force: bool = False, sets: dict[str, list[str]] | None = None) -> Artifact:
    one_process("kolectra run")  # its fine-tuning stages would be refused after its pretraining
    sets = {**SAMPLE_SETS, **(sets or {})}
    timings: dict[str, float] = {}
    reused: set[str] = set()

    def timed(stage: str, fn, *args, **kwargs) -> Artifact:
        # what this stage builds, apart from what the store built before: an id built earlier in this
        # process (a second run_sample on the same store, --force) is built again, not found
        before = set(store.built_here)
        store.built_here.clear()
        try:
            art = timed_stage(timings, stage, fn, *args, **kwargs)
            if art.id not in store.built_here:  # not built by this stage: found
                reused.add(stage)
        finally:
            store.built_here.update(before)
        return art

    corpus = timed("corpus", stages.corpus, store, [str(SAMPLE / "reviews.jsonl.gz")], name="sample", force=force)
    vocab = timed("vocab", stages.vocab, store, corpus, sets=sets["vocab"], name="sample", force=force)
    examples = timed("examples", stages.examples, store, corpus, vocab, sets=sets["examples"], name="sample",
                     force=force)
    # a run of this request stopped (SIGTERM, a hangup: its step saved) is continued, as its line says:
    # kolectra run has no --resume, and without one the next run discarded it and trained from step 0
    ckpt = timed("pretrain", stages.pretrain, store, examples, preset="tiny", sets=sets["pretrain"],
                 name="sample", force=force, resume=False if force else "exact",
                 expected_untrained=demo_budget(sets["pretrain"]), again=AGAIN)
    # one name per task: `kolectra report sample-nsmc sample-korquad` puts them in one table
    nsmc = timed("finetune nsmc", stages.finetune, store, "nsmc", ckpt, SAMPLE / "nsmc_train.txt",
                 SAMPLE / "nsmc_test.txt", preset="sample", sets=sets["nsmc"], name="sample-nsmc", force=force)
    korquad = timed("finetune korquad", stages.finetune, store, "korquad", ckpt, SAMPLE / "korquad_train.json",
                    SAMPLE / "korquad_dev.json", preset="sample", sets=sets["korquad"], name="sample-korquad",
                    force=force)

    try:  # reading the lineage back (over the network, on a bucket) takes a moment
        text = summary(store, [nsmc, korquad], timings, ckpt, reused)
        with after_the_command():  # every stage is done; under PYTHONUNBUFFERED a full disk fails here
            print(text)
    except KeyboardInterrupt as e:  # the command's line said "interrupted; nothing was published"
        e.add_note(f"while writing the summary; every stage was done and kept: {', '.join(timings)} "
                   f"({AGAIN} reuses them)")
        raise
    return korquad


def timed_stage(timings: dict[str, float], stage: str, fn, *args, **kwargs) -> Artifact:
    """``fn(...)``'s artifact, its wall time added to ``timings``. Interrupted or failed, it says which
    stages were done and kept: the command's last line said "nothing was published" when three stages
    had been (a failure's line named neither the stage nor what was kept)."""
    progress(f"run: {stage} ...")
    t0 = time.perf_counter()
    try:
        art = fn(*args, **kwargs)
    except (KeyboardInterrupt, Exception) as e:
        if getattr(e, ctrl_c.FINISHED, False):  # a Ctrl-C after pretraining's last step: published first, then stopped
            e.add_note(f"done and kept: {', '.join([*timings, stage])} ({AGAIN} reuses them)")
            raise
        if isinstance(e, KeyboardInterrupt) and timings and not str(e) and not getattr(e, "__notes__", None):
            e.add_note(f"{stage}: nothing published")
        elif not isinstance(e, KeyboardInterrupt):
            e.add_note(f"kolectra run stopped at {stage}")
        if timings:
            e.add_note(f"done before it and kept: {', '.join(timings)} ({AGAIN} reuses them)")
        raise
    timings[stage] = time.perf_counter() - t0
    progress(f"run: {stage} done in {timings[stage]:.1f}s -> {art.path}")
    return art


def demo_budget(pretrain_sets: list[str]) -> str:
    """What a not-learning warning means for the demo: its budget, which the user did not choose."""
    from kolectra.pipeline.configs import resolve  # torch-free

    cfg, _ = resolve("pretrain", preset="tiny", sets=pretrain_sets)
    t = cfg.train
    return (f"the demo trains the tiny preset for {t.steps:,} steps of {t.batch_size} rows on the embedded sample, "
            "far too little for any model to learn (ELECTRA-Small saw ~130 B tokens); it shows that the chain "
            "works, and there is no setting to change. For a model worth using, pretrain --preset small on a "
            "corpus of your own (README, The chain)")


# metrics.json key -> how the summary names it; every figure in percent
METRIC_NAMES = {"nsmc": (("accuracy_pct", "NSMC test accuracy"),),
                "korquad": (("exact_match", "KorQuAD dev exact match"), ("f1", "KorQuAD dev F1"))}


def metric_lines(evals: list[Artifact]) -> list[str]:
    """One named figure a line, all in percent (NSMC's ``accuracy`` is a fraction in metrics.json)."""
    lines = []
    for art in evals:
        metrics = json.loads(art.read_bytes("metrics.json").decode("utf-8"))
        task = str(metrics.get("task", art.manifest.get("config", {}).get("task", "")))
        for key, label in METRIC_NAMES.get(task, ()):
            if isinstance(metrics.get(key), (int, float)):
                lines.append(f"  {label:<26} {metrics[key]:6.2f} %")
    return lines


def summary(store: Store, evals: list[Artifact], timings: dict[str, float], checkpoint: Artifact | None = None,
            reused: set[str] = frozenset()) -> str:
    lines = ["", "== kolectra run: lineage =="]
    for art in evals:
        lines += store.lineage_lines(art)
    lines += ["", "== scores (embedded sample, a tiny model: they show the chain works, not model quality) =="]
    lines += metric_lines(evals)
    found = warning_lines(store, evals, checkpoint)
    if found:
        # a reused artifact's warnings were printed when it was built, not in this run
        when = ("printed above as they happened" if not reused
                else "recorded when they were built: this run reused every stage" if set(timings) <= set(reused)
                else "recorded by the artifacts; a stage built in this run printed its own above")
        lines += ["", f"== warnings: {len(found)} ({when}) =="] + found
    total = sum(timings.values())
    lines += ["", f"== wall time {total:.1f} s =="]
    for stage, secs in timings.items():
        share = secs / total if total else 0.0
        lines.append(f"  {stage:<18} {secs:7.1f} s  {share:6.1%}"
                     + ("  reused (its time: finding it, and importing what the stage needs)" if stage in reused else ""))
    if checkpoint is not None:
        lines += next_steps(store, checkpoint, evals)
    lines.append("")
    return "\n".join(lines)


def warning_lines(store: Store, evals: list[Artifact], checkpoint: Artifact | None) -> list[str]:
    """Every warning the chain's artifacts recorded, one line each, so the summary does not read as
    all-clear after a warning scrolled past: the vocab's, pretraining's and fine-tuning's health."""
    chain: list[Artifact] = []
    for a in ([checkpoint] if checkpoint is not None else []) + evals:
        chain += [x for x in _ancestry(store, a) if x.id not in {c.id for c in chain}]
    untrained = checkpoint is not None and (checkpoint.manifest.get("stats", {}) or {}).get(
        "health", {}).get("status") == "not_learning"
    lines = []
    for a in chain:
        stats = a.manifest.get("stats", {}) or {}
        label = f"{a.kind} {a.name}"
        for w in stats.get("warnings", []) or []:
            lines.append(f"  {label}: {w}")
        health = stats.get("health") or {}
        if health.get("status") == "not_learning":
            what = "; ".join(health.get("problems", [])) or "it has not learned"
            why = (" (expected for the demo's tiny pretraining budget: nothing to change)" if a.kind == "checkpoint"
                   else " (follows from the untrained demo model)" if untrained and a.kind == "eval"
                   else "")
            lines.append(f"  {label}: {what}{why}")
    return lines


def _ancestry(store: Store, art: Artifact) -> list[Artifact]:
    """``art`` and its artifact ancestors, parents first."""
    from kolectra.pipeline.report import ancestors

    return ancestors(store, art)


def next_steps(store: Store, checkpoint: Artifact, evals: list[Artifact] | None = None) -> list[str]:
    """Where the usable model is, and the commands a user runs next. The evals by id: their names
    (sample-nsmc ...) are ambiguous once a root holds two runs of the demo, e.g. after an upgrade."""
    out = "" if store.root == default_root() else f" --out {store.root}"
    model = [f"  {checkpoint.path / 'hf' / 'discriminator'}",
             "  a Hugging Face ELECTRA discriminator: transformers' AutoModel.from_pretrained(<that directory>) loads it"]
    if not isinstance(checkpoint.path, Path):  # in a bucket: from_pretrained does not read a store URL
        model = [f"  {checkpoint.path}/hf/discriminator (in the store)",
                 f"  a Hugging Face ELECTRA discriminator: kolectra export {checkpoint.id} --to DIR{out} writes it to a "
                 "local folder, which transformers' AutoModel.from_pretrained(DIR) loads"]
    return ["", "== the model ==", *model,
            "", "== next ==",
            f"  kolectra report {checkpoint.id}{out}",
            "      its training curves, compute and lineage as Markdown with plots",
            *([f"  kolectra report {' '.join(e.id for e in evals)}{out}",
               "      the scores in one table, each with its test size and health"] if len(evals or ()) > 1 else []),
            f"  kolectra finetune nsmc --model {checkpoint.id} --train FILE --test FILE{out}",
            "      fine-tune it on your own NSMC-format files",
            f"  kolectra corpus --input 'your/*.jsonl.gz'{out}",
            "      start on your own text: then vocab, examples, pretrain (README.md, The chain)"]
