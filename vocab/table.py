"""A vocab artifact's ``report.json`` as a plain-text table (recipes side by side).

Stage: corpus -> **vocab** -> examples; read-only helper. ``python -m kolectra.vocab.table DIR_OR_REPORT``
prints the table to stdout.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

ROWS = (("vocab size", ("learning", "vocab_size"), "{:,d}"),
        ("[UNK] rate", ("unk_rate",), "{:.2%}"),
        ("tokens / eojeol", ("tokens_per_eojeol",), "{:.3f}"),
        ("chars / token", ("chars_per_token",), "{:.3f}"),
        ("cuts on morpheme boundaries", ("morph_boundary_share",), "{:.1%}"),
        ("words kept whole", ("words_kept_whole",), "{:.1%}"))


def _get(fig: dict, path: tuple[str, ...]):
    for key in path:
        fig = fig.get(key, {}) if isinstance(fig, dict) else {}
    return fig if not isinstance(fig, dict) else None


def count_text(n) -> str:
    """79,203, not 79203 (the vocab table, `kolectra report`); a report without the figure: as it is (None)."""
    return f"{n:,}" if isinstance(n, int) and not isinstance(n, bool) else str(n)


def format_report(report: dict, show_words: int = 5) -> str:
    recipes = report["recipes"]
    names = [report.get("chosen")] + sorted(n for n in recipes if n != report.get("chosen"))
    names = [n for n in names if n in recipes]
    width = max(len(r[0]) for r in ROWS)
    col = max(16, *(len(n) for n in names))
    lines = [f"vocab report on {report.get('split')} ({count_text(report.get('documents'))} documents, "
             f"{count_text(report.get('eojeols'))} eojeols)",
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
    try:
        table = format_report(json.loads(_report_bytes(args[0])))
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:  # one line, not a traceback
        why = ("not found" if isinstance(e, FileNotFoundError) else f"no {e} field" if isinstance(e, KeyError)
               else e.strerror if isinstance(e, OSError) and e.strerror else " ".join(str(e).split())[:200])
        print(f"kolectra.vocab.table: error: {args[0]}: {why or type(e).__name__} (expected a vocab artifact's "
              "folder or its report.json)", file=sys.stderr)
        return 2
    try:
        print(table, flush=True)
    except BrokenPipeError:  # `| head`: the reader has what it wanted (a traceback before)
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - no second error when Python flushes at exit
    return 0


def _report_bytes(where: str) -> bytes:
    """The report.json of a vocab folder (or the file itself), on this disk or in a store (``s3://``,
    ``gs://``: a vocab artifact kept there; read as a local path it was 'No such file: s3:/...')."""
    from kolectra.core import storage  # noqa: PLC0415 - no store client unless a URL is given

    if storage.is_url(where):
        url = where.rstrip("/")
        return storage.read_bytes(url if url.endswith(".json") else f"{url}/report.json")
    path = Path(storage.local_path(where))
    return (path / "report.json" if path.is_dir() else path).read_bytes()


if __name__ == "__main__":
    sys.exit(main())
