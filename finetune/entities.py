"""Entity-level precision, recall and F1 over BIO tag sequences: the NER task's metric.

Used by ``finetune.ner`` (last stage of the chain).  An entity is a maximal run of tokens
``B-X I-X I-X ...`` and is scored only when its type and both boundaries match exactly.  The chunk
rules are CoNLL's (``conlleval``): an ``I-X`` after ``O``, after the sentence start, or after a
token of another type starts a new entity; a ``B-X`` always does; ``O`` ends one.  Both tag
spellings seen in Korean data are read: prefix (``B-PER``, KLUE, CoNLL) and suffix (``PER-B``,
KoELECTRA's Naver NER files; ``PER_B``, the Naver challenge's).

Written here rather than taken from seqeval: it is one small function and a test pins its cases,
so the project does not take a dependency for it.
"""

from __future__ import annotations

from typing import Iterable, Sequence

from kolectra.core.errors import UserInputError

OUTSIDE = "O"


def split_tag(tag: str) -> tuple[str, str]:
    """``B-PER``, ``PER-B``, ``B_PER`` or ``PER_B`` -> ``("B", "PER")``; ``O`` -> ``("O", "")``.

    ValueError for anything else (BIOES's ``E-``/``S-`` and BILOU's ``L-``/``U-`` included, said so: this is BIO)."""
    if tag == OUTSIDE:
        return OUTSIDE, ""
    if len(tag.split()) > 1:  # 'B-PER I-PER O' had been a B- tag of the type 'PER I-PER O' (a sentence-a-line file's
        # tags read as one CoNLL tag), trained on without a word
        raise not_bio("tag_with_spaces", f"tag {tag!r} holds spaces: several tags in one field (a line of a "
                      "sentence-a-line file, words<TAB>tags? --set format=lines reads those)")
    if len(tag) > 2 and tag[0] in "BI" and tag[1] in "-_":
        return tag[0], tag[2:]
    if len(tag) > 2 and tag[-1] in "BI" and tag[-2] in "-_":
        return tag[-1], tag[:-2]
    if len(tag) > 2 and ((tag[0] in "ESLU" and tag[1] in "-_") or (tag[-1] in "ESLU" and tag[-2] in "-_")):
        # BIOES (IOBES) and BILOU files mark an entity's end and one-token entities: refused as "not BIO" with no
        # word of what they are, where the refusal of the whole file said to check its format and columns
        raise not_bio("tag_bioes_or_bilou", f"tag {tag!r} is not a BIO tag but BIOES or BILOU (E-, S-, L-, U-): "
                      "convert the file, S- and U- to B-, E- and L- to I- (the same entities)")
    raise not_bio("tag_not_bio", f"tag {tag!r} is not a BIO tag (O, B-TYPE, I-TYPE, or TYPE-B, TYPE-I)")


def not_bio(key: str, message: str) -> UserInputError:
    """The error of a tag that is not BIO, ``key`` naming its kind (a bad sentence's reason key, ner's
    ``bad_rows_by_reason``)."""
    error = UserInputError(message)
    error.key = key
    return error


def entities(tags: Sequence[str]) -> list[tuple[str, int, int]]:
    """The entities of one sentence as ``(type, start, end)``, ``end`` exclusive, in order."""
    out: list[tuple[str, int, int]] = []
    kind, start = None, 0
    for i, tag in enumerate([*tags, OUTSIDE]):  # the sentinel closes an entity running to the end
        boundary, typ = split_tag(tag)
        if kind is not None and (boundary != "I" or typ != kind):
            out.append((kind, start, i))  # O, B-, or I- of another type: the running entity ends here
            kind = None
        if boundary == "B" or (boundary == "I" and kind is None):
            kind, start = typ, i  # a B-, or an I- that continues nothing, starts one
    return out


def entity_scores(gold: Iterable[Sequence[str]], predicted: Iterable[Sequence[str]]) -> dict:
    """Micro-averaged ``precision``, ``recall``, ``f1`` (fractions) over all sentences, the counts
    behind them, and the same per entity type (``per_type``)."""
    counts: dict[str, list[int]] = {}  # type -> [correct, gold, predicted]
    for g, p in zip(gold, predicted, strict=True):
        if len(g) != len(p):
            raise ValueError(f"a sentence has {len(g)} gold tags but {len(p)} predicted ones")
        gs, ps = set(entities(g)), set(entities(p))
        for ent in gs | ps:
            c = counts.setdefault(ent[0], [0, 0, 0])
            c[0] += ent in gs and ent in ps
            c[1] += ent in gs
            c[2] += ent in ps
    total = [sum(c[k] for c in counts.values()) for k in range(3)]
    return {**prf(*total), "correct_entities": total[0], "gold_entities": total[1], "predicted_entities": total[2],
            "per_type": {t: {**prf(*c), "gold_entities": c[1]} for t, c in sorted(counts.items())}}


def prf(correct: int, gold: int, predicted: int) -> dict:
    precision = correct / predicted if predicted else 0.0
    recall = correct / gold if gold else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"precision": precision, "recall": recall, "f1": f1}
