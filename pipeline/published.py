"""Published Korean encoders' scores, to place a kolectra score against (``kolectra report --published``).

One source for the table in ``docs/published.md`` and the one the CLI prints (a test holds the
page to these rows). A figure is listed only where its source was read for this table; a cell
nobody here could check is ``None`` and shows as an em dash, never a remembered number. Every
figure is the authors' own, on the split named in ``splits``: NSMC on its full 50,000-row test
file, KorQuAD 1.0 on its dev set (5,774 questions; its test set is not public). A kolectra score
from ``max_eval_examples`` rows, the sample, or a tiny model is not comparable with these.
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class Published:
    model: str
    # percent, with the source's own digits (KR-ELECTRA gives three decimals); None: not published/checked
    nsmc_acc: str | None
    korquad_em: str | None
    korquad_f1: str | None
    source: str  # the page the figures were read from
    splits: str  # what each figure was measured on, and how the epoch/checkpoint was chosen
    klue: str = "—"  # KLUE figures, where published: a pointer, not copied numbers


KOELECTRA = "https://github.com/monologg/KoELECTRA/blob/master/finetune/README_EN.md"
# KoELECTRA's fine-tuning code (also used by KR-ELECTRA and KcELECTRA's KcBERT-Finetune) has no NSMC
# dev set: it scores every saved checkpoint on ratings_test.txt (eval_all_checkpoints), so a reported
# NSMC figure may be the best of several checkpoints on the test file itself; KorQuAD likewise on dev.
KOELECTRA_SPLITS = ("NSMC: ratings_test.txt, all 50,000 rows, every checkpoint scored on it (no dev set); "
                    "KorQuAD: 1.0 dev set")

ROWS: tuple[Published, ...] = (
    Published("KoELECTRA-Small-v3", "89.36", "82.11", "91.13", KOELECTRA,
              KOELECTRA_SPLITS),
    Published("KoELECTRA-Base-v3", "90.63", "84.83", "93.45", KOELECTRA, KOELECTRA_SPLITS),
    Published("KcELECTRA-base", "91.71", "70.60", "90.11", "https://github.com/Beomi/KcELECTRA",
              KOELECTRA_SPLITS + " (KoELECTRA's code, in Beomi/KcBERT-Finetune)"),
    Published("KcELECTRA-base-v2022", "91.97", "69.00", "90.40", "https://github.com/Beomi/KcELECTRA",
              KOELECTRA_SPLITS + " (KoELECTRA's code, in Beomi/KcBERT-Finetune)"),
    Published("KR-ELECTRA", "91.168", "84.93", "93.04", "https://github.com/snunlp/KR-ELECTRA",
              KOELECTRA_SPLITS + " (KoELECTRA's code, hyperparameters adjusted)"),
    Published("KLUE-RoBERTa-base", None, None, None, "https://arxiv.org/abs/2105.09680",
              "KLUE's own dev sets (the paper reports no NSMC or KorQuAD)",
              klue="the KLUE paper's dev-set table (not copied: not checked here)"),
    Published("KLUE-RoBERTa-large", None, None, None, "https://arxiv.org/abs/2105.09680",
              "KLUE's own dev sets (the paper reports no NSMC or KorQuAD)",
              klue="the KLUE paper's dev-set table (not copied: not checked here)"),
    Published("mDeBERTa-v3-base (multilingual, Korean included)", None, None, None,
              "https://huggingface.co/microsoft/mdeberta-v3-base",
              "no Korean figures in its card; Korean DeBERTa-v3 models on the Hub publish their own, not checked here"),
)


def _fmt(v: str | None) -> str:
    return "—" if v is None else v


# the figure a published row gives for a kolectra task, in the task's headline units (percent)
FIGURES = {"nsmc": lambda r: r.nsmc_acc,
           "korquad": lambda r: None if r.korquad_em is None else f"{r.korquad_em} / {_fmt(r.korquad_f1)}"}


def rows_for(tasks: list[str]) -> list[tuple[Published, list[str]]]:
    """The published models with a figure for one of ``tasks`` (a report's columns, in order), each
    with its cells: the figure in percent, an em dash where it has none for that task."""
    out = []
    for r in ROWS:
        cells = [FIGURES[t](r) if t in FIGURES else None for t in tasks]
        if any(c is not None for c in cells):
            out.append((r, [_fmt(c) for c in cells]))
    return out


def table() -> list[str]:
    """The rows as a Markdown table (docs/published.md holds the same lines)."""
    out = ["| model | NSMC acc | KorQuAD 1.0 EM / F1 | KLUE | split | source |", "|" + " --- |" * 6]
    for r in ROWS:
        korquad = "—" if r.korquad_em is None else f"{_fmt(r.korquad_em)} / {_fmt(r.korquad_f1)}"
        out.append(f"| {r.model} | {_fmt(r.nsmc_acc)} | {korquad} | {r.klue} | {r.splits} | {r.source} |")
    return out
