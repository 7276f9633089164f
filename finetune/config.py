"""Settings of the fine-tuning stage (NSMC, KorQuAD 1.0, and classify / regress / ner from the user's files).

Last link of the chain (corpus -> vocab -> examples -> pretrain -> **finetune**).  Frozen
dataclasses, presets are functions; the CLI resolves ``--set key=value`` through
``core.config.override`` and hashes :func:`core.config.to_dict` into the eval artifact id.
:class:`TaskConfig` holds what every task has (runtime, lengths, batches, epochs, optimizer);
a task's config adds its own fields.  :meth:`TaskConfig.validate` rejects impossible values with
a :class:`~kolectra.core.config.ConfigError` naming the key, before anything is read.

Defaults follow KoELECTRA's published fine-tuning configs (monologg/KoELECTRA,
``finetune/config/{nsmc,korquad}/koelectra-base-v3.json``): AdamW lr 5e-5, eps 1e-8, weight decay
0, no warmup, grad-norm clip 1.0; NSMC max length 128, batch 32, 10 epochs; KorQuAD max length
512, doc stride 128, query 64, answer 30, n-best 20, batch 8, 7 epochs.  The ELECTRA paper's
recipe (warmup 10%, layer-wise LR decay 0.8, Adam eps 1e-6) is a separate preset (:data:`ELECTRA_OPTIM`).
"""

from __future__ import annotations

import dataclasses
import math
import unicodedata
from typing import Literal

from kolectra.core.config import ConfigError

DEVICES = ("cpu", "cuda", "xla")


@dataclasses.dataclass(frozen=True)
class OptimConfig:
    lr: float = 5e-5
    weight_decay: float = 0.0
    adam_eps: float = 1e-8
    adam_betas: tuple[float, float] = (0.9, 0.999)
    warmup_fraction: float = 0.0  # of all optimizer steps; then linear decay to 0
    max_grad_norm: float = 1.0  # 0 = no clipping
    # ELECTRA (Clark et al. 2020, appendix) multiplies the LR of each layer by decay^depth-from-top;
    # 1.0 = off.  See kolectra.model.optim.layer_depth for the exponents we use.
    layerwise_lr_decay: float = 1.0


@dataclasses.dataclass(frozen=True)
class TaskConfig:
    seed: int = 42
    device: str = "cpu"  # cpu | cuda | xla (kolectra.model.runtime)
    # bf16 autocast (CUDA, XLA, CPUs with bf16 instructions); weights and optimizer stay fp32.
    bf16: bool = False
    # torch.compile the model's forward: "auto" = the device's default (model/device.py: CUDA compiles
    # and replays CUDA graphs, cpu and xla run eagerly), true or false to choose. A compiled forward's
    # batches are padded to a few fixed widths (finetune/loop.py, bucket_widths). Recorded only when
    # set, so earlier requests keep their ids.
    compile: bool | Literal["auto"] = dataclasses.field(default="auto", metadata={"recorded": "unless default"})
    # Intra-op CPU threads (0 = torch's default, one per core).  One thread degrades gracefully on
    # a shared machine: several threads spin-wait for each other when cores are busy (the sample's
    # NSMC run under load average 7 on 2 cores: 36-40 s with 1 thread, 735 s with 2; docs/finetune.md).
    # The thread count changes float sums, hence results: it is part of the request.
    cpu_threads: int = 1
    # Start the encoder from random weights on purpose (a no-pretraining baseline).  Without it, a
    # model directory whose weights do not fit the encoder is an error, never a silent random start.
    random_init: bool = False
    # Re-initialise the top k encoder layers (from the model's own initialiser, seeded) before
    # fine-tuning: an early ELECTRA discriminator's top layers are specialised to replaced-token
    # detection and fine-tune worse than fresh ones (docs/finetune.md#reinit; finetune/reinit.py).
    reinit_top_layers: int = 0
    # Dropout while fine-tuning: -1 keeps the model's config.json (hidden_dropout_prob,
    # attention_probs_dropout_prob); 0-<1 sets it. ELECTRA fine-tunes with 0.1 (Clark et al. 2020,
    # appendix); a checkpoint pretrained without dropout (`mini`) carries 0. `dropout` is the
    # hidden layers' and the task head's, `attention_dropout` the attention probabilities'.
    # Recorded only when set, so earlier requests keep their ids.
    dropout: float = dataclasses.field(default=-1.0, metadata={"recorded": "unless default"})
    attention_dropout: float = dataclasses.field(default=-1.0, metadata={"recorded": "unless default"})
    # Allow the training file to be the scored file (a memorisation check); otherwise an error.
    train_on_eval: bool = False
    max_length: int = 128
    batch_size: int = 32
    eval_batch_size: int = 128
    epochs: int = 10
    optim: OptimConfig = OptimConfig()
    max_train_examples: int = 0  # 0 = all
    max_eval_examples: int = 0  # 0 = all

    def validate(self) -> None:
        """Raise a ConfigError naming the first key whose value cannot work."""
        o = self.optim
        checks = [
            ("device", self.device in DEVICES, f"one of {', '.join(DEVICES)}"),
            ("compile", self.compile in (True, False, "auto") and not (self.compile is True and self.device == "xla"),
             "true, false or auto (on xla, torch-xla compiles the step itself: not true)"),
            ("cpu_threads", self.cpu_threads >= 0, "0 (torch's default) or more"),
            ("reinit_top_layers", self.reinit_top_layers >= 0, "0 (none) or more"),
            ("dropout", self.dropout == -1 or 0 <= self.dropout < 1, "-1 (the model's config.json) or in [0, 1)"),
            ("attention_dropout", self.attention_dropout == -1 or 0 <= self.attention_dropout < 1,
             "-1 (the model's config.json) or in [0, 1)"),
            ("max_length", self.max_length >= 3, "at least 3 ([CLS], one token, [SEP])"),
            ("batch_size", self.batch_size >= 1, "at least 1"),
            ("eval_batch_size", self.eval_batch_size >= 1, "at least 1"),
            ("epochs", self.epochs >= 1, "at least 1"),
            ("max_train_examples", self.max_train_examples >= 0, "0 (all) or more"),
            ("max_eval_examples", self.max_eval_examples >= 0, "0 (all) or more"),
            ("optim.lr", math.isfinite(o.lr) and o.lr > 0, "a finite number > 0"),
            ("optim.weight_decay", math.isfinite(o.weight_decay) and o.weight_decay >= 0, "a finite number >= 0"),
            # Adam divides by sqrt(v) + eps: 0 gives NaN where a gradient is 0 throughout
            ("optim.adam_eps", math.isfinite(o.adam_eps) and o.adam_eps > 0, "a finite number > 0"),
            # torch's AdamW refused these deep in the training loop (an internal error after the data was read)
            ("optim.adam_betas", len(o.adam_betas) == 2 and all(0 <= b < 1 for b in o.adam_betas),
             "two numbers in [0, 1), e.g. [0.9,0.999]"),
            ("optim.warmup_fraction", 0 <= o.warmup_fraction < 1, "in [0, 1)"),
            ("optim.max_grad_norm", o.max_grad_norm >= 0, "0 (no clipping) or more"),
            ("optim.layerwise_lr_decay", 0 < o.layerwise_lr_decay <= 1, "in (0, 1]"),
        ] + self.task_checks()
        for key, ok, need in checks:
            if not ok:
                value = self
                for part in key.split("."):
                    value = getattr(value, part)
                raise ConfigError(f"{key}: must be {need}, got {value!r}")

    def task_checks(self) -> list[tuple[str, bool, str]]:
        """A task's own (key, ok, what it must be) checks."""
        return []


@dataclasses.dataclass(frozen=True)
class NsmcConfig(TaskConfig):
    # Dev set carved from train with ``seed``; epochs are chosen on dev, test is scored once.
    dev_fraction: float = 0.1
    # max_train_examples is taken after the dev split (first N of a seeded shuffle);
    # max_eval_examples applies to test, and to dev while max_dev_examples is -1 (first N rows).
    # The dev split's cap (its first N rows); 0 = all; -1 = max_eval_examples's, as before this key
    # existed (recorded only when set, so earlier requests keep their ids). The run says which cap held.
    max_dev_examples: int = dataclasses.field(default=-1, metadata={"recorded": "unless default"})
    # Malformed rows (column count, label) are counted; above this fraction of rows it is an error.
    max_bad_fraction: float = 0.001

    def task_checks(self):
        return [("dev_fraction", 0 < self.dev_fraction < 1, "in (0, 1)"),
                ("max_dev_examples", self.max_dev_examples >= -1, "-1 (max_eval_examples's), 0 (all) or more"),
                ("max_bad_fraction", 0 <= self.max_bad_fraction <= 1, "in [0, 1]")]


@dataclasses.dataclass(frozen=True)
class KorquadConfig(TaskConfig):
    max_length: int = 512
    batch_size: int = 8
    eval_batch_size: int = 32
    epochs: int = 7
    doc_stride: int = 128  # step between window starts in context tokens (BERT's meaning)
    max_query_length: int = 64
    # windows per question at most (0: no bound): a longer context is cut and the cut counted in one
    # line; KorQuAD's contexts take 1-3 windows at max_length 512 (one 10 MB context made 25,123)
    max_windows: int = 64
    max_answer_length: int = 30
    n_best: int = 20
    # max_train_examples / max_eval_examples count questions.
    # Score the dev file after every epoch for the learning curve.  Reporting only: the model
    # is always the last epoch's (no selection on dev), so the final figure is the same either
    # way; False saves the intermediate evaluations.
    eval_each_epoch: bool = True

    def task_checks(self):
        return [("max_query_length", 1 <= self.max_query_length <= self.max_length - 4,
                 f"between 1 and max_length - 4 = {self.max_length - 4} ([CLS] question [SEP] context [SEP])"),
                ("doc_stride", self.doc_stride >= 1, "at least 1"),
                ("max_windows", self.max_windows >= 0, "0 (no bound) or more"),
                ("max_answer_length", self.max_answer_length >= 1, "at least 1"),
                ("n_best", self.n_best >= 1, "at least 1")]


@dataclasses.dataclass(frozen=True)
class FileTaskConfig(TaskConfig):
    """What the tasks read from the user's own files (classify, regress, ner) share."""

    # auto: by extension (.tsv/.txt, .csv, .jsonl, .parquet) or a saved datasets folder; ner also reads conll / lines
    format: str = "auto"
    # Without --dev, this share of the train rows (seeded shuffle) is the dev set epochs are chosen on.
    dev_fraction: float = 0.1
    # The dev split's cap (its first N rows); 0 = all; -1 = max_eval_examples's, as before this key
    # existed (recorded only when set, so earlier requests keep their ids). The run says which cap held.
    max_dev_examples: int = dataclasses.field(default=-1, metadata={"recorded": "unless default"})
    # Rows that cannot be read are counted; above this fraction of a file's rows it is an error.
    max_bad_fraction: float = 0.001

    formats = ("auto", "tsv", "csv", "jsonl", "datasets", "parquet", "quoted_tsv")

    def task_checks(self):
        return [("format", self.format in self.formats, f"one of {', '.join(self.formats)}"),
                ("dev_fraction", 0 < self.dev_fraction < 1, "in (0, 1)"),
                ("max_dev_examples", self.max_dev_examples >= -1, "-1 (max_eval_examples's), 0 (all) or more"),
                ("max_bad_fraction", 0 <= self.max_bad_fraction <= 1, "in [0, 1]")]


def _nfc(name: str) -> str:
    """A column name as the readers compare it (finetune.files.column_name): ``문장`` in NFD is ``문장``."""
    return unicodedata.normalize("NFC", name) if isinstance(name, str) else name


@dataclasses.dataclass(frozen=True)
class ClassifyConfig(FileTaskConfig):
    text_column: str = "text"
    text_pair_column: str = ""  # "" = one text per row; else a pair, [CLS] a [SEP] b [SEP]
    label_column: str = "label"
    select_on: str = "accuracy"  # the dev figure the kept epoch is chosen by: accuracy | macro_f1
    # The class names of integer labels that are class-label codes (Dataset.to_json writes a ClassLabel
    # column's codes): label k is label_names[k]; a label that is already one of them stays. Empty: the
    # labels as written. Recorded only when set, so earlier requests keep their ids.
    label_names: tuple[str, ...] = dataclasses.field(default=(), metadata={"recorded": "unless default"})

    selectable = ("accuracy", "macro_f1")

    def task_checks(self):
        return super().task_checks() + [
            ("text_column", bool(self.text_column), "a column name"),
            ("label_column", bool(self.label_column), "a column name"),
            # the same column twice feeds a text twice, or the label to the model as text
            ("text_pair_column", _nfc(self.text_pair_column) != _nfc(self.text_column),
             f"another column than text_column ({self.text_column!r})"),
            ("label_column", _nfc(self.label_column) not in (_nfc(self.text_column), _nfc(self.text_pair_column)),
             "a column that is not a text column (text_column, text_pair_column)"),
            ("select_on", self.select_on in self.selectable, f"one of {', '.join(self.selectable)}"),
            ("label_names", all(isinstance(n, str) and n.strip() for n in self.label_names)
             and len(set(self.label_names)) == len(self.label_names),
             "names that are not empty, each once, in code order: --set label_names=neg,pos")]


@dataclasses.dataclass(frozen=True)
class RegressConfig(ClassifyConfig):
    select_on: str = "spearman"  # spearman | pearson

    selectable = ("spearman", "pearson")

    def task_checks(self):
        return super().task_checks() + [("label_names", not self.label_names, "empty: regress reads scores, not classes")]


def bio_tag(name: str) -> bool:
    """Whether ``name`` (edge spaces aside) is a tag the NER task reads (:func:`finetune.entities.split_tag`)."""
    from kolectra.core.errors import UserInputError  # noqa: PLC0415
    from kolectra.finetune.entities import split_tag  # noqa: PLC0415

    try:
        split_tag(name.strip())
    except UserInputError:
        return False
    return True


@dataclasses.dataclass(frozen=True)
class NerConfig(FileTaskConfig):
    # for .jsonl files and saved datasets: a list of tokens and a list of tags per row (KLUE-NER's names)
    tokens_column: str = "tokens"
    tags_column: str = "ner_tags"
    # The tag names of integer tags that are class-label codes (Dataset.to_json writes a ClassLabel list's
    # codes; KLUE-NER's: O is 12): tag k is tag_names[k]. Recorded only when set, so earlier requests keep their ids.
    tag_names: tuple[str, ...] = dataclasses.field(default=(), metadata={"recorded": "unless default"})

    formats = ("auto", "conll", "lines", "jsonl", "datasets", "parquet")

    def task_checks(self):
        return super().task_checks() + [
            ("tokens_column", bool(self.tokens_column), "a column name"),
            ("tags_column", bool(self.tags_column), "a column name"),
            # the same column for both read every token as its own tag: all rows bad, blamed on the tags
            ("tags_column", _nfc(self.tags_column) != _nfc(self.tokens_column),
             f"another column than tokens_column ({self.tokens_column!r})"),
            ("tag_names", all(isinstance(n, str) and n.strip() for n in self.tag_names)
             and len(set(self.tag_names)) == len(self.tag_names),
             "tag names that are not empty, each once, in code order: --set tag_names=B-PS,I-PS,O"),
            # a name that is no BIO tag made every sentence holding its code bad, one by one
            ("tag_names", all(bio_tag(n) for n in self.tag_names if isinstance(n, str)),
             "BIO tags (O, B-TYPE, I-TYPE, or TYPE-B, TYPE-I): --set tag_names=B-PS,I-PS,O")]


# The `electra` presets' optimizer: the ELECTRA reference fine-tuning (google-research/electra,
# configure_finetuning.py and model/optimization.py: lr 1e-4, weight decay 0.01, warm-up 10 %, layer-wise
# decay 0.8, Adam betas 0.9/0.999 and eps 1e-6). The paper (table 7) uses lr 3e-4 for Small and 5e-5 with
# decay 0.9 for Large; where kolectra differs from the reference (exponents, bias correction, schedule):
# docs/finetune.md, "The electra preset against the reference".
ELECTRA_OPTIM = OptimConfig(lr=1e-4, warmup_fraction=0.1, weight_decay=0.01, layerwise_lr_decay=0.8, adam_eps=1e-6)


def koelectra_classify() -> ClassifyConfig:
    """KoELECTRA's sequence-classification recipe (its NSMC values; its KorNLI/PAWS configs differ
    in epochs, batch and lr: docs/finetune.md)."""
    return ClassifyConfig()


def electra_classify() -> ClassifyConfig:
    """ELECTRA paper GLUE recipe: 10% warmup, layer-wise LR decay 0.8, 3 epochs."""
    return ClassifyConfig(epochs=3, optim=ELECTRA_OPTIM)


def sample_classify() -> ClassifyConfig:
    """For small files (tests, a quick look): short inputs, a couple of epochs."""
    return ClassifyConfig(max_length=64, batch_size=16, epochs=2, dev_fraction=0.2)


def koelectra_regress() -> RegressConfig:
    """KoELECTRA's KorSTS recipe: lr 5e-5, batch 32, 10 epochs, max length 128."""
    return RegressConfig()


def electra_regress() -> RegressConfig:
    """ELECTRA paper recipe for STS: 10 epochs (it trains STS and RTE longer), warmup 10%, LR decay 0.8."""
    return RegressConfig(epochs=10, optim=ELECTRA_OPTIM)


def sample_regress() -> RegressConfig:
    return RegressConfig(max_length=64, batch_size=16, epochs=2, dev_fraction=0.2)


def koelectra_ner() -> NerConfig:
    """KoELECTRA's Naver NER recipe: lr 5e-5, batch 32, 20 epochs, max length 128."""
    return NerConfig(epochs=20)


def electra_ner() -> NerConfig:
    """ELECTRA's fine-tuning practice on a tagging task: 10% warmup, layer-wise LR decay 0.8, 3 epochs."""
    return NerConfig(epochs=3, optim=ELECTRA_OPTIM)


def sample_ner() -> NerConfig:
    return NerConfig(max_length=64, batch_size=16, epochs=2, dev_fraction=0.2)


def koelectra_nsmc() -> NsmcConfig:
    """KoELECTRA's NSMC recipe (the defaults)."""
    return NsmcConfig()


def electra_nsmc() -> NsmcConfig:
    """ELECTRA paper GLUE-style recipe: 10% warmup, layer-wise LR decay 0.8, 3 epochs."""
    return NsmcConfig(epochs=3, optim=ELECTRA_OPTIM)


def sample_nsmc() -> NsmcConfig:
    """What ``kolectra run`` uses on the embedded sample: a couple of epochs, short inputs."""
    return NsmcConfig(max_length=64, batch_size=16, epochs=2, dev_fraction=0.2,
                      max_train_examples=256, max_eval_examples=128)


def koelectra_korquad() -> KorquadConfig:
    """KoELECTRA's KorQuAD 1.0 recipe (the defaults)."""
    return KorquadConfig()


def electra_korquad() -> KorquadConfig:
    """ELECTRA paper SQuAD-style recipe: 10% warmup, layer-wise LR decay 0.8, 2 epochs."""
    return KorquadConfig(epochs=2, batch_size=32, optim=ELECTRA_OPTIM)


def sample_korquad() -> KorquadConfig:
    """For the embedded KorQuAD-format fixture: short windows so several are made per context."""
    return KorquadConfig(max_length=128, doc_stride=32, max_query_length=32, batch_size=8,
                         eval_batch_size=16, epochs=2, optim=OptimConfig(lr=1e-4))


NSMC_PRESETS = {"koelectra": koelectra_nsmc, "electra": electra_nsmc, "sample": sample_nsmc}
KORQUAD_PRESETS = {"koelectra": koelectra_korquad, "electra": electra_korquad,
                   "sample": sample_korquad}
CLASSIFY_PRESETS = {"koelectra": koelectra_classify, "electra": electra_classify, "sample": sample_classify}
REGRESS_PRESETS = {"koelectra": koelectra_regress, "electra": electra_regress, "sample": sample_regress}
NER_PRESETS = {"koelectra": koelectra_ner, "electra": electra_ner, "sample": sample_ner}


def cap_eval_rows(cfg: TaskConfig, dev: list, test: list, say) -> tuple[list, list]:
    """``dev`` and ``test`` cut to their caps: test to ``max_eval_examples``, dev to ``max_dev_examples``
    (-1: the same cap as test, the behaviour before the key; ``say`` receives the line that says so,
    since a cap on the scored file also cutting the rows the epoch is chosen on is not what its name says)."""
    own = getattr(cfg, "max_dev_examples", -1)
    dev_cap = cfg.max_eval_examples if own < 0 else own
    if own < 0 and cfg.max_eval_examples and len(dev) > cfg.max_eval_examples:
        say(f"the dev split is cut to its first {cfg.max_eval_examples} of {len(dev)} rows by max_eval_examples; "
            "max_dev_examples gives it a cap of its own (0: all)")
    return dev[:dev_cap or None], test[:cfg.max_eval_examples or None]
