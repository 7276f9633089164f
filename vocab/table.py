"""A vocab artifact's ``report.json`` as a plain-text table (recipes side by side).

Stage: corpus -> **vocab** -> examples; read-only helper. ``python -m kolectra.vocab.table DIR_OR_REPORT``
prints the table to stdout.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

ROWS = (("vocab size", ("learning", "vocab_size"), "{:d}"),
        ("[UNK] rate", ("unk_rate",), "{:.2%}"),
        ("tokens / eojeol", ("tokens_per_eojeol",), "{:.3f}"),
        ("chars / token", ("chars_per_token",), "{:.3f}"),
        ("cuts on morpheme boundaries", ("morph_boundary_share",), "{:.1%}"),
        ("words kept whole", ("words_kept_whole",), "{:.1%}"))


def _get(fig: dict, path: tuple[str, ...]):
    for key in path:
        fig = fig.get(key, {}) if isinstance(fig, dict) else {}
    return fig if not isinstance(fig, dict) else None


def format_report(report: dict, show_words: int = 5) -> str:
    recipes = report["recipes"]
    names = [report.get("chosen")] + sorted(n for n in recipes if n != report.get("chosen"))
    names = [n for n in names if n in recipes]
    width = max(len(r[0]) for r in ROWS)
    col = max(16, *(len(n) for n in names))
    lines = [f"vocab report on {report.get('split')} ({report.get('documents')} documents, "
             f"{report.get('eojeols')} eojeols)",
             " " * width + "  " + "  ".join(n.rjust(col) for n in names)]
    for label, path, fmt in ROWS:
        cells = []
        for n in names:
            v = _get(recipes[n], path)
            cells.append((fmt.format(v) if v is not None else "-").rjust(col))
        lines.append(label.ljust(width) + "  " + "  ".join(cells))
    for n in names:
        rows = recipes[n].get("most_fragmented", [])[:show_words]
        if rows:
            lines.append(f"most fragmented frequent words ({n}): " + "; ".join(
                f"{r['word']} ({r['count']}) = {' '.join(r['pieces'])}" for r in rows))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m kolectra.vocab.table VOCAB_DIR_OR_REPORT_JSON", file=sys.stderr)
        return 2
    path = Path(args[0])
    if path.is_dir():
        path = path / "report.json"
    try:
        print(format_report(json.loads(path.read_text(encoding="utf-8"))), flush=True)
    except BrokenPipeError:  # `| head`: the reader has what it wanted (a traceback before)
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - no second error when Python flushes at exit
    return 0


if __name__ == "__main__":
    sys.exit(main())
