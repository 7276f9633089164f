"""KorQuAD 1.0 (SQuAD v1.1 format) reading: the file's questions, checked, and its by-article split.

The first step of :mod:`finetune.readers.korquad` (which re-exports each name here); the windows are
:mod:`.korquad_windows`', the decoding of spans :mod:`.korquad_spans`'. Pure functions:

* :func:`read_squad` checks the document shape and every ``answer_start`` (the answer text must
  sit at that character offset of the context); mismatches are counted, and such questions are
  still evaluated against their answer texts but never used as training targets (the task leaves
  the training questions among them out of training: ``finetune.korquad``).
* :func:`split_by_article` makes a deterministic, seeded train/dev split of one file by article,
  so no context is shared between the two sides (the KorQuAD train set is not always at hand).
* :func:`question_columns` and :func:`questions_from`: the questions as columns of a
  ``datasets.Dataset`` and back.
"""

from __future__ import annotations

import dataclasses
import json
import random
import re
import unicodedata
from pathlib import Path

from kolectra.finetune.files import FinetuneError, not_utf8


@dataclasses.dataclass(frozen=True)
class Question:
    id: str
    question: str
    context: str
    answers: tuple[tuple[str, int], ...]  # (text, answer_start)
    title: str = ""

    @property
    def answer_texts(self) -> list[str]:
        return [a for a, _ in self.answers]

    def span_ok(self, k: int = 0) -> bool:
        text, start = self.answers[k]
        return 0 <= start and self.context[start:start + len(text)] == text


def load_json(path: Path) -> dict:
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except json.JSONDecodeError as e:
        raise FinetuneError(f"{path}: not valid JSON (line {e.lineno}: {e.msg})") from None
    except UnicodeDecodeError:  # before ValueError, its base: the line and the iconv command
        raise not_utf8(path) from None
    except ValueError as e:  # one file, one document: what the parser refuses refuses the file
        raise FinetuneError(f"{path}: not readable JSON ({str(e).split(';')[0][:120]})") from None
    except RecursionError:
        raise FinetuneError(f"{path}: not readable JSON (nested too deep)") from None
    except OSError as e:
        raise FinetuneError(f"{path}: cannot read ({e})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("data"), list):
        raise FinetuneError(f"{path}: expected a SQuAD-format object with a 'data' list")
    return doc


def _items(obj, key: str, where: str) -> list:
    """``obj[key]`` as a list (absent: empty); ``obj`` itself must be a JSON object."""
    if not isinstance(obj, dict):
        raise FinetuneError(f"{where}: expected an object, got {type(obj).__name__}")
    items = obj.get(key, [])
    if not isinstance(items, list):
        raise FinetuneError(f"{where}.{key}: expected a list, got {type(items).__name__}")
    return items


def _answer(x: dict) -> tuple[str, int]:
    """One answer's ``(text, answer_start)``. A text that is not a string (``null`` had been read as
    the answer "None") and an ``answer_start`` that is no whole number (``true`` was 1, ``5.7`` was 5,
    ``1e999`` stopped the run with an OverflowError) raise ValueError naming the value."""
    text, start = x["text"], x["answer_start"]
    if not isinstance(text, str):
        raise ValueError(f"text {json.dumps(text, ensure_ascii=False)[:40]}")
    if isinstance(start, bool) or (isinstance(start, float) and not start.is_integer()):
        raise ValueError(f"answer_start {json.dumps(start)[:40]}")
    if not -2**63 <= int(start) < 2**63:  # the rows' int64 column (10**20 stopped the run with an OverflowError)
        raise ValueError(f"answer_start {str(start)[:40]}, past any context")
    return text, int(start)


def _required(obj: dict, key: str, where: str) -> list:
    """``obj[key]`` as a list; an absent key refuses the file (the official evaluation script stops
    on it too), where an article without ``paragraphs`` or a paragraph without ``qas`` had been
    read as holding no questions, silently."""
    if isinstance(obj, dict) and key not in obj:
        raise FinetuneError(f"{where}: no '{key}' list (a SQuAD-format "
                            + ("article holds its paragraphs there)" if key == "paragraphs" else
                               "paragraph holds its questions there)"))
    return _items(obj, key, where)


def _visible(text: str) -> bool:
    """Whether ``text`` has a character besides whitespace, controls and format characters (U+200B...),
    which tokenizers drop: an answer of those alone is in no token, and its training target had
    started after it ended."""
    return any(not c.isspace() and unicodedata.category(c) not in ("Cc", "Cf") for c in text)


def visible_span(text: str) -> tuple[int, int]:
    """The first visible character of ``text`` and the end of its last (:func:`_visible`'s sense); (0, 0) if none."""
    seen = [i for i, c in enumerate(text) if _visible(c)]
    return (seen[0], seen[-1] + 1) if seen else (0, 0)


def _utf8(where: str, fields: dict[str, str]) -> None:
    """Refuse a lone surrogate: ``json.load`` reads ``"\\ud800"`` into a string no UTF-8 text can hold,
    and storing the questions as rows had stopped the run with an internal UnicodeEncodeError."""
    for name, value in fields.items():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as e:
            raise FinetuneError(f"{where}: its {name} has a lone surrogate (a JSON escape such as \\ud800 that no "
                                f"UTF-8 text can hold) at character {e.start}; remove it") from None


def korquad2(doc: dict) -> str | None:
    """Why ``doc`` is no KorQuAD 1.0 document when it is a KorQuAD 2.0 one (else None): an article holding its
    questions itself, each with one ``answer`` over the whole web page (``context``, ``raw_html``), no
    ``paragraphs``. Refused as "data[0]: no 'paragraphs' list", the file had been taken for a broken 1.0 one."""
    first = next((a for a in doc["data"] if isinstance(a, dict)), None)
    if first is None or "paragraphs" in first or "qas" not in first:
        return None
    version = str(doc.get("version", ""))
    qas = first["qas"] if isinstance(first["qas"], list) else []
    if not (re.match(r"(?i)korquad_?2", version) or "raw_html" in first
            or any(isinstance(q, dict) and "answer" in q and "answers" not in q for q in qas)):
        return None
    named = f" (version {version!r})" if version else ""
    return (f"a KorQuAD 2.0 file{named}: its articles hold their questions themselves, one 'answer' each over a "
            "whole web page, and no 'paragraphs'; the korquad task reads KorQuAD 1.0 (SQuAD v1.1: "
            "data[].paragraphs[] of a context and its qas[] with 'answers'), such as KorQuAD_v1.0_train.json "
            "and KorQuAD_v1.0_dev.json; KorQuAD 2.0 is not read")


def questions_of(doc: dict, source: str = "<data>") -> tuple[list[Question], dict]:
    """Flatten articles -> questions; returns them with counts of what was checked.

    Anything not shaped like SQuAD is an error naming its JSON path (``data[3].paragraphs[0]``); a KorQuAD 2.0
    document is named as one (:func:`korquad2`)."""
    if why := korquad2(doc):
        raise FinetuneError(f"{source}: {why}")
    out: list[Question] = []
    seen: set[str] = set()
    bad_starts = 0
    for a_i, article in enumerate(doc["data"]):
        paragraphs = _required(article, "paragraphs", f"{source}: data[{a_i}]")
        title = str(article.get("title", ""))
        _utf8(f"{source}: data[{a_i}]", {"title": title})
        for p_i, para in enumerate(paragraphs):
            at = f"data[{a_i}].paragraphs[{p_i}]"
            qas = _required(para, "qas", f"{source}: {at}")
            context = para.get("context")
            if not isinstance(context, str):
                raise FinetuneError(f"{source}: {at} has no context string")
            _utf8(f"{source}: {at}", {"context": context})
            for q_i, qa in enumerate(qas):
                if not isinstance(qa, dict):
                    raise FinetuneError(f"{source}: {at}.qas[{q_i}]: expected an object, got {type(qa).__name__}")
                where = f"{source}: question {qa.get('id')!r} ({at})"
                if not isinstance(qa.get("id"), str) or not isinstance(qa.get("question"), str):
                    raise FinetuneError(f"{where}: needs string 'id' and 'question'")
                if not qa["question"].strip():  # nothing to ask: refused like the other malformed questions
                    raise FinetuneError(f"{where}: the question is empty; write it in or remove the question")
                if qa["id"] in seen:
                    raise FinetuneError(f"{where}: duplicate question id")
                seen.add(qa["id"])
                answers = qa.get("answers") or []
                try:
                    pairs = tuple(_answer(x) for x in answers)
                except (KeyError, TypeError, ValueError) as e:
                    raise FinetuneError(f"{where}: answers need 'text' (a string) and integer 'answer_start'"
                                        + (f" ({e.args[0]})" if isinstance(e, ValueError) else "")) from None
                if not pairs:
                    raise FinetuneError(f"{where}: no answers (KorQuAD 1.0 has no unanswerable questions)")
                if any(not _visible(text) for text, _ in pairs):  # no span to learn, no gold to score against
                    raise FinetuneError(f"{where}: an answer's text is empty (or only whitespace and invisible "
                                        f"characters); write it in or remove that answer")
                _utf8(where, {"id": qa["id"], "question": qa["question"]}
                      | {f"answers[{k}].text": text for k, (text, _) in enumerate(pairs)})
                q = Question(qa["id"], qa["question"], context, pairs, title)
                bad_starts += sum(1 for k in range(len(pairs)) if not q.span_ok(k))
                out.append(q)
    stats = {"articles": len(doc["data"]), "questions": len(out), "bad_answer_starts": bad_starts,
             "split": doc.get("kolectra_split")}
    return out, stats


NEAR = 16  # characters either side of a missed answer_start searched for the answer (an offset off by a few)


def missed(questions: list[Question]) -> dict[str, int]:
    """Where the first answers of ``questions`` (each missing its ``answer_start``) are, counted by reason:
    ``utf8_bytes`` (at ``answer_start`` counted in UTF-8 bytes, as a tool that counts bytes writes it: Go, Rust,
    C), ``near`` (within :data:`NEAR` characters of it: line ends or whitespace counted otherwise), ``elsewhere``
    (in the context), ``other_form`` (in the context in another Unicode form: NFD on one side), ``nowhere``;
    only the reasons found. The values add up to ``len(questions)``."""
    counts = {"utf8_bytes": 0, "near": 0, "elsewhere": 0, "other_form": 0, "nowhere": 0}
    for q in questions:
        text, start = q.answers[0]
        if start >= 0 and q.context.encode("utf-8")[start:start + len(text.encode("utf-8"))] == text.encode("utf-8"):
            counts["utf8_bytes"] += 1
        elif text in q.context[max(start - NEAR, 0):max(start + len(text) + NEAR, 0)]:
            counts["near"] += 1
        elif text in q.context:
            counts["elsewhere"] += 1
        elif unicodedata.normalize("NFC", text) in unicodedata.normalize("NFC", q.context):
            counts["other_form"] += 1  # NFD on one side: "nowhere in it" had been said of an answer that is there
        else:
            counts["nowhere"] += 1
    return {reason: n for reason, n in counts.items() if n}


def why_missed(questions: list[Question]) -> str:
    """:func:`missed`'s counts in words, when they say why: "" when none of the answers is found. The count
    alone had left a user to guess which it was."""
    counts = missed(questions)
    said = [f"{counts['utf8_bytes']} at answer_start counted in UTF-8 bytes (answer_start counts characters)"
            if "utf8_bytes" in counts else "",
            f"{counts['near']} within {NEAR} characters of answer_start (offsets off by a few)" if "near" in counts else "",
            f"{counts['elsewhere']} elsewhere in the context" if "elsewhere" in counts else "",
            # not a one-line conversion of the file: \uXXXX escapes stay, and answer_start counts the old context
            f"{counts['other_form']} in the context in another Unicode form (decomposed Hangul, NFD, in the context or "
            "the answer, not both: write both in NFC, unicodedata.normalize('NFC', ...), answer_start counted in the NFC "
            "context)" if "other_form" in counts else ""]
    said.append(f"{counts['nowhere']} nowhere in it" if "nowhere" in counts and any(said) else "")
    return ("; their first answers: " + ", ".join(x for x in said if x)) if any(said) else ""


def read_squad(path: Path) -> tuple[list[Question], dict]:
    return questions_of(load_json(Path(path)), str(path))


def split_by_article(path: Path, dev_fraction: float, seed: int) -> tuple[dict, dict]:
    """Two SQuAD-format documents (train, dev) from one file, split by whole articles.

    The article order is shuffled with ``random.Random(seed)``; the first
    ``round(dev_fraction * n)`` (at least 1) become dev.  Both sides keep the file's order.
    """
    doc = load_json(Path(path))
    if why := korquad2(doc):  # split, each side would be refused only when read
        raise FinetuneError(f"{path}: {why}")
    n = len(doc["data"])
    if n < 2 or not 0.0 < dev_fraction < 1.0:
        raise FinetuneError(f"{path}: cannot split {n} articles with dev_fraction={dev_fraction}")
    order = list(range(n))
    random.Random(seed).shuffle(order)
    n_dev = min(n - 1, max(1, int(round(dev_fraction * n))))
    dev_ids = set(order[:n_dev])
    version = doc.get("version", "")
    # a marker that travels with the files, so scores on them are labelled as a split, never
    # mistaken for official dev-set figures (see finetune.korquad)
    mark = {"source": Path(path).name, "seed": seed, "dev_fraction": dev_fraction, "articles": n}
    train = {"version": version, "kolectra_split": mark | {"side": "train"},
             "data": [a for i, a in enumerate(doc["data"]) if i not in dev_ids]}
    dev = {"version": version, "kolectra_split": mark | {"side": "dev"},
           "data": [a for i, a in enumerate(doc["data"]) if i in dev_ids]}
    return train, dev


# --- as columns of a datasets.Dataset (finetune.korquad tokenises with Dataset.map) ------------

def question_columns(questions: list[Question]) -> dict[str, list]:
    return {"id": [q.id for q in questions], "question": [q.question for q in questions],
            "context": [q.context for q in questions], "title": [q.title for q in questions],
            "answer_texts": [[a for a, _ in q.answers] for q in questions],
            "answer_starts": [[s for _, s in q.answers] for q in questions]}


def questions_from(columns: dict[str, list]) -> list[Question]:
    """The questions of :func:`question_columns`' columns; a context equal to the row before's is that row's
    str, as it was read (a paragraph's questions share one): the rows repeat it in each of its questions."""
    out: list[Question] = []
    context = None
    for i, q, c, t, texts, starts in zip(columns["id"], columns["question"], columns["context"], columns["title"],
                                         columns["answer_texts"], columns["answer_starts"]):
        context = context if c == context else c
        out.append(Question(i, q, context, tuple(zip(texts, starts)), t))
    return out
