"""KorQuAD 1.0 (SQuAD v1.1 format) reading, by-article splitting, windowing and span decoding.

Feeds ``finetune.korquad`` (last stage of the chain).  Pure functions:

* :func:`read_squad` checks the document shape and every ``answer_start`` (the answer text must
  sit at that character offset of the context); mismatches are counted, and such questions are
  still evaluated against their answer texts but never used as training targets (the task leaves
  the training questions among them out of training: ``finetune.korquad``).
* :func:`split_by_article` makes a deterministic, seeded train/dev split of one file by article,
  so no context is shared between the two sides (the KorQuAD train set is not always at hand).
* :func:`make_windows` tokenizes question + context with the fast tokenizer's overflow windows
  (``return_overflowing_tokens``, ``stride``, ``return_offsets_mapping``); ``doc_stride`` keeps
  BERT's meaning, the step between window starts, so the tokenizer's ``stride`` (the overlap)
  is the window's context length minus ``doc_stride``.  A question gets at most ``max_windows``
  windows: a longer context is cut first (one 10 MB context made 25,123 windows of 86 questions),
  and the windows it would have had past the cut are counted (``windows_dropped``).
* :func:`mark_max_context` marks, for tokens shared by overlapping windows, the one window
  allowed to start a span there (BERT's max-context rule).
* :func:`nbest_spans` takes the n-best start and end logits of every window, keeps spans inside
  the context with ``start <= end``, at most ``max_answer_length`` tokens and a max-context
  start, and maps them back to slices of the original context through the offset mapping
  (whitespace at a slice's edges left out: a SentencePiece token's span holds the space before it);
  :func:`decode` keeps the best one per question.
* :class:`SpanIndex` holds what decoding reads of the windows (character offsets and max-context marks),
  read in place from the tokenised split's Arrow columns.
"""

from __future__ import annotations

import dataclasses
import json
import random
import unicodedata
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from kolectra.finetune.features import TokenColumn
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


def questions_of(doc: dict, source: str = "<data>") -> tuple[list[Question], dict]:
    """Flatten articles -> questions; returns them with counts of what was checked.

    Anything not shaped like SQuAD is an error naming its JSON path (``data[3].paragraphs[0]``)."""
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


def read_squad(path: Path) -> tuple[list[Question], dict]:
    return questions_of(load_json(Path(path)), str(path))


def split_by_article(path: Path, dev_fraction: float, seed: int) -> tuple[dict, dict]:
    """Two SQuAD-format documents (train, dev) from one file, split by whole articles.

    The article order is shuffled with ``random.Random(seed)``; the first
    ``round(dev_fraction * n)`` (at least 1) become dev.  Both sides keep the file's order.
    """
    doc = load_json(Path(path))
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


@dataclasses.dataclass
class Windows:
    """Every window of every question; row r belongs to question ``question_index[r]``."""

    input_ids: list[list[int]]
    token_type_ids: list[list[int]]
    offsets: list[list[tuple[int, int] | None]]  # context char span per token, None off-context
    question_index: list[int]
    start_positions: list[int]  # gold token positions (0 = [CLS]: answer not in this window)
    end_positions: list[int]
    # per token: is this window the token's "max context" one (see mark_max_context)
    max_context: list[list[bool]] = dataclasses.field(default_factory=list)
    # per window: on a question's first window, how many windows its cut context lost (else 0)
    windows_dropped: list[int] = dataclasses.field(default_factory=list)


def mark_max_context(offsets: list[list[tuple[int, int] | None]]) -> list[list[bool]]:
    """For the windows of one question: True where a context token has its *max context*.

    A token in the overlap of several windows is scored in each of them; BERT's SQuAD code
    (Devlin et al. 2019, ``_check_is_max_context``) lets only one window predict a span that
    starts there: the window where the token has the most context on its poorer side,
    ``min(tokens left of it, tokens right of it) + 0.01 * window length``, the first window on
    ties.  Tokens are identified across windows by their character offsets in the context.
    """
    doc_index: dict[tuple[int, int], int] = {}
    for offs in offsets:
        for o in offs:
            if o is not None:
                doc_index.setdefault(o, 0)
    for k, o in enumerate(sorted(doc_index)):
        doc_index[o] = k
    best: dict[int, tuple[float, int]] = {}
    spans = []
    for w, offs in enumerate(offsets):
        ctx = [doc_index[o] for o in offs if o is not None]
        start, length = (ctx[0], len(ctx)) if ctx else (0, 0)
        spans.append((start, length))
        for p in ctx:
            score = min(p - start, start + length - 1 - p) + 0.01 * length
            if p not in best or score > best[p][0]:
                best[p] = (score, w)
    return [[o is not None and best[doc_index[o]][1] == w for o in offs] for w, offs in enumerate(offsets)]


def truncate_question(tokenizer, question: str, max_query_length: int) -> str:
    """Cut the question text after its ``max_query_length``-th token (BERT's max_query_length)."""
    enc = tokenizer(question, add_special_tokens=False, return_offsets_mapping=True)
    if len(enc["input_ids"]) <= max_query_length:
        return question
    return question[:enc["offset_mapping"][max_query_length - 1][1]]


def windows_for(tokens: int, room: int, doc_stride: int) -> int:
    """How many overflow windows ``tokens`` context tokens make (``room`` of them fit in a window)."""
    return 1 + -(-max(0, tokens - room) // doc_stride)


def bounded_context(tokenizer, context: str, room: int, doc_stride: int, max_windows: int) -> tuple[str, int]:
    """``context`` cut after the tokens its first ``max_windows`` windows hold, and how many windows
    that drops (0: not cut). ``max_windows=0`` is no bound."""
    keep = room + (max_windows - 1) * doc_stride
    # a token spans at least one UTF-8 byte (SentencePiece adds one leading mark): short contexts
    # cannot be cut, and are not tokenised twice
    if not max_windows or len(context.encode("utf-8")) + 1 <= keep:
        return context, 0
    offsets = tokenizer(context, add_special_tokens=False, return_offsets_mapping=True,
                        verbose=False)["offset_mapping"]  # verbose: its "longer than the maximum" warning
    if len(offsets) <= keep:
        return context, 0
    return context[:offsets[keep - 1][1]], windows_for(len(offsets), room, doc_stride) - max_windows


def cluster_end(text: str, end: int) -> int:
    """``end`` moved past the characters that only continue the one before it: combining marks and
    Hangul vowel/final jamo, which NFC composes with what precedes them. A tokenizer that normalises
    to NFC gives a token of a decomposed (NFD) syllable the offsets of its first jamo only
    (``임수경`` in NFD: the last token ended after ``ᄀ``), so an answer cut there would end mid-syllable."""
    while end < len(text) and (unicodedata.combining(text[end]) or "\u1160" <= text[end] <= "\u11ff"
                               or "\ud7b0" <= text[end] <= "\ud7ff"):
        end += 1
    return end


def make_windows(tokenizer, questions: list[Question], max_length: int, doc_stride: int,
                 max_query_length: int, max_windows: int = 0) -> Windows:
    w = Windows([], [], [], [], [], [])
    for qi, q in enumerate(questions):
        question = truncate_question(tokenizer, q.question, max_query_length)
        q_len = len(tokenizer(question, add_special_tokens=False)["input_ids"])
        room = max_length - q_len - 3  # [CLS] q [SEP] c [SEP]
        if room < 1:
            raise FinetuneError(f"max_length={max_length} leaves no room for context after "
                                f"question {q.id!r} ({q_len} tokens)")
        overlap = max(0, room - doc_stride)
        context, dropped = bounded_context(tokenizer, q.context, room, room - overlap, max_windows)
        enc = tokenizer(question, context, truncation="only_second", max_length=max_length,
                        stride=overlap, return_overflowing_tokens=True, return_offsets_mapping=True,
                        return_token_type_ids=True)
        text, a_start = q.answers[0]
        # the answer's own characters: whitespace at its edges is in no answer (decoding strips it), and a
        # SentencePiece token starting at a space after the answer ("▁평양" of " 평양") was taken as its last
        a_start += len(text) - len(text.lstrip())
        a_end = a_start + len(text.strip())  # exclusive char end
        # a window holds the answer when it holds its visible characters: a tokenizer that drops format and
        # control characters (WordPiece's clean_text: U+200B...) has no token of one at the answer's edge, and
        # an answer ending in one at the context's end ("갔다\u200b") was in no window, every window of its
        # question trained as "no answer here"
        lo, hi = visible_span(text.strip())
        v_start, v_end = a_start + lo, a_start + hi
        decomposed = not unicodedata.is_normalized("NFC", context)  # NFC text: no syllable to complete
        trainable = q.span_ok(0) and len(text) > 0
        for k in range(len(enc["input_ids"])):
            seq_ids = enc.sequence_ids(k)
            offs = [((o[0], cluster_end(context, o[1])) if decomposed else tuple(o)) if s == 1 else None
                    for o, s in zip(enc["offset_mapping"][k], seq_ids)]
            start_tok = end_tok = 0
            if trainable:
                ctx = [i for i, o in enumerate(offs) if o is not None]
                if ctx and offs[ctx[0]][0] <= v_start and offs[ctx[-1]][1] >= v_end:
                    start_tok = next(i for i in ctx if offs[i][1] > a_start)
                    end_tok = next(i for i in reversed(ctx) if offs[i][0] < a_end)
            w.input_ids.append(enc["input_ids"][k])
            w.token_type_ids.append(enc["token_type_ids"][k])
            w.offsets.append(offs)
            w.question_index.append(qi)
            w.start_positions.append(start_tok)
            w.end_positions.append(end_tok)
        w.max_context.extend(mark_max_context(w.offsets[len(w.offsets) - len(enc["input_ids"]):]))
        w.windows_dropped.extend([dropped] + [0] * (len(enc["input_ids"]) - 1))
    return w


class NBest(Mapping):
    """:func:`nbest_spans`' answer: per question id, its n-best spans as dicts (``text``, ``score``,
    ``start_logit``, ``end_logit``, ``start_char``, ``probability``), made when asked. Held as six numbers
    a span (one array a question) beside the questions, whose contexts give the texts: the dicts, kept
    for ``nbest_predictions.json`` for the whole run, were about 10 KiB a question at ``n_best=20``
    (docs/finetune.md, "Memory and large task files")."""

    def __init__(self, questions: list[Question]):
        self._questions = questions
        self._index: dict[str, int] = {}
        self._spans: list[np.ndarray] = []  # [k, 6]: score, start_logit, end_logit, probability, start, end char

    def add(self, qi: int, spans: list[dict]) -> None:
        """Question ``qi``'s spans (each question's in turn, from the first)."""
        self._spans.append(np.array([(k["score"], k["start_logit"], k["end_logit"], k["probability"], k["start_char"],
                                      k["start_char"] + len(k["text"])) for k in spans], dtype=np.float64))
        self._index[self._questions[qi].id] = qi

    def __getitem__(self, qid: str) -> list[dict]:
        qi = self._index[qid]
        context = self._questions[qi].context
        return [{"text": context[int(start):int(end)] if start >= 0 else "", "score": score, "start_logit": sl,
                 "end_logit": el, "start_char": int(start), "probability": p}
                for score, sl, el, p, start, end in self._spans[qi].tolist()]

    def __iter__(self):
        return iter(self._index)

    def __len__(self) -> int:
        return len(self._index)


def nbest_spans(questions: list[Question], windows: "Windows | SpanIndex", start_logits: list[np.ndarray],
                end_logits: list[np.ndarray], n_best: int, max_answer_length: int) -> NBest:
    """Per question id, up to ``n_best`` distinct answer texts, best first (BERT's n-best list).

    Candidates: the top ``n_best`` start and end tokens of every window, inside the context,
    ``start <= end``, at most ``max_answer_length`` tokens, starting at a token whose max-context
    window this is.  The text is the context's slice from the start token's first character to the
    end token's last, whitespace at either edge left out (a span of whitespace alone is no
    candidate).  Score = start logit + end logit; equal texts from several windows keep the
    best; ``probability`` is a softmax over the kept scores.  No valid span -> one empty answer.
    A question's candidates are gathered and cut to its n-best before the next question's, and kept as
    numbers (:class:`NBest`).
    """
    spans = SpanIndex.of(windows)
    order = np.argsort(spans.question_index, kind="stable")  # each question's windows, in row order
    cuts = np.searchsorted(spans.question_index[order], np.arange(len(questions) + 1)).tolist()
    out = NBest(questions)
    for qi, q in enumerate(questions):
        cands: list[tuple[float, int, int, int, float, float]] = []
        for r in order[cuts[qi]:cuts[qi + 1]].tolist():
            starts, maxc = spans.start.row(r), spans.max_context.row(r)  # start -1: not a context token
            s_log, e_log = start_logits[r], end_logits[r]
            n = len(starts)
            s_top = [i for i in np.argsort(-s_log[:n], kind="stable")[:n_best] if starts[i] >= 0 and maxc[i]]
            e_top = [i for i in np.argsort(-e_log[:n], kind="stable")[:n_best] if starts[i] >= 0]
            for s in s_top:
                for e in e_top:
                    if e < s or e - s + 1 > max_answer_length:
                        continue
                    sl, el = float(s_log[s]), float(e_log[e])
                    cands.append((sl + el, r, int(s), int(e), sl, el))
        kept: list[dict] = []
        seen: set[str] = set()
        # best score first; ties keep discovery order (window, start, end) for determinism
        for score, r, s, e, sl, el in sorted(cands, key=lambda c: (-c[0], c[1], c[2], c[3])):
            first = int(spans.start.row(r)[s])
            text = q.context[first:int(spans.end.row(r)[e])]
            # whitespace at the edges is no part of an answer: a SentencePiece (Metaspace) token's span
            # takes in the space before it ("▁임수경": " 임수경"), a lone "▁" is only a space
            start_char = first + len(text) - len(text.lstrip())
            text = text.strip()
            if not text or text in seen:
                continue
            seen.add(text)
            kept.append({"text": text, "score": score, "start_logit": sl, "end_logit": el,
                         "start_char": start_char})
            if len(kept) == n_best:
                break
        if not kept:
            kept = [{"text": "", "score": 0.0, "start_logit": 0.0, "end_logit": 0.0, "start_char": -1}]
        top = kept[0]["score"]
        weights = [float(np.exp(k["score"] - top)) for k in kept]
        for k, wgt in zip(kept, weights):
            k["probability"] = wgt / sum(weights)
        out.add(qi, kept)
    return out


def decode(questions: list[Question], windows: Windows, start_logits: list[np.ndarray],
           end_logits: list[np.ndarray], n_best: int, max_answer_length: int) -> dict[str, str]:
    """Best span per question over all its windows -> {question_id: context substring}."""
    nbest = nbest_spans(questions, windows, start_logits, end_logits, n_best, max_answer_length)
    return {qid: spans[0]["text"] for qid, spans in nbest.items()}


def rounded_nbest(nbest: dict[str, list[dict]], digits: int = 4) -> dict[str, list[dict]]:
    """The n-best lists with floats rounded, as written to ``nbest_predictions.json``."""
    return {qid: [{k: round(v, digits) if isinstance(v, float) else v for k, v in span.items()}
                  for span in spans] for qid, spans in nbest.items()}


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


def window_columns(w: Windows, first_question: int) -> dict[str, list]:
    """``w`` as columns; question indices shifted by ``first_question`` (a ``map`` batch's first row)."""
    return {"input_ids": w.input_ids, "token_type_ids": w.token_type_ids,
            "start_positions": w.start_positions, "end_positions": w.end_positions,
            "question_index": [first_question + i for i in w.question_index],
            "offset_start": [[o[0] if o else -1 for o in offs] for offs in w.offsets],
            "offset_end": [[o[1] if o else -1 for o in offs] for offs in w.offsets],
            "max_context": w.max_context, "windows_dropped": w.windows_dropped}


@dataclasses.dataclass
class SpanIndex:
    """What :func:`nbest_spans` reads of the windows: per window its tokens' first context character and end
    (-1 off the context) and max-context marks, read in place from the tokenised split's Arrow columns
    (:class:`finetune.features.TokenColumn`: memory-mapped from the cache file, when there is one), with a
    bool a token copied. Flat int64 copies of the offsets held 17 bytes a token, and the windows as
    :class:`Windows` (a list, a tuple and Python ints a token: about 160 bytes a token) 250 MB for a file
    the size of KorQuAD's dev set, for the whole run (docs/finetune.md, "Memory and large task files")."""

    question_index: np.ndarray  # [windows]
    start: TokenColumn  # .row(r): window r's tokens' first context character; -1 off-context
    end: TokenColumn  # their ends (exclusive); -1 off-context
    max_context: TokenColumn  # bool (see mark_max_context)

    @classmethod
    def of(cls, w: "Windows | SpanIndex") -> "SpanIndex":
        """From :class:`Windows` (a window without ``max_context`` marks: each context token its own)."""
        if isinstance(w, SpanIndex):
            return w
        import pyarrow as pa  # noqa: PLC0415

        maxc = [w.max_context[r] if r < len(w.max_context) else [o is not None for o in offs]
                for r, offs in enumerate(w.offsets)]
        return cls.of_table(pa.table({
            "question_index": pa.array(w.question_index, pa.int64()),
            "offset_start": pa.array([[o[0] if o is not None else -1 for o in offs] for offs in w.offsets],
                                     pa.list_(pa.int64())),
            "offset_end": pa.array([[o[1] if o is not None else -1 for o in offs] for offs in w.offsets],
                                   pa.list_(pa.int64())),
            "max_context": pa.array(maxc, pa.list_(pa.bool_()))}))

    @classmethod
    def of_table(cls, table) -> "SpanIndex":
        """From the tokenised split's Arrow table (:func:`window_columns`' columns), with no Python object a token."""
        return cls(np.asarray(table.column("question_index").to_numpy(), dtype=np.int64),
                   TokenColumn(table.column("offset_start")), TokenColumn(table.column("offset_end")),
                   TokenColumn(table.column("max_context")))
