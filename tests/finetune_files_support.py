"""The helpers tests/test_finetune_files_audit.py and tests/test_finetune_files_formats.py share: CoNLL
sentences of a person, a place or an organisation (``sentence``) and a CoNLL file of them (``conll``)."""

from __future__ import annotations

from pathlib import Path

PER, LOC = ["김민수", "이영희", "박철수"], ["서울", "부산", "대구"]


def sentence(i: int) -> list[tuple[str, str]]:
    p, loc = PER[i % 3], LOC[(i * 2) % 3]
    if i % 2:
        return [(p, "B-PER"), ("씨는", "O"), (loc, "B-LOC"), ("에서", "O"), ("일한다", "O")]
    return [("삼성", "B-ORG"), ("전자", "I-ORG"), ("직원", "O"), (p, "B-PER"), ("이", "O"), ("왔다", "O")]


def conll(path: Path, sentences, newline: str = "\n", bom: bool = False) -> Path:
    text = (newline * 2).join(newline.join(f"{t}\t{g}" for t, g in s) for s in sentences) + newline
    path.write_bytes((("\ufeff" if bom else "") + text).encode("utf-8"))
    return path
