"""Named-entity recognition from tagged files (Naver NER, KLUE-NER, any CoNLL-style BIO data).

A task of the last stage: ``kolectra finetune ner``.  Reads sentences of tokens and BIO tags
(:mod:`finetune.readers.ner`); the tag set is the training file's.  A dev or test tag outside it is an
error naming the tag, file and line when its entity type is not a training type; of a training type
(``I-LOC`` where every training LOC was one word, or an IOB1 file's ``B-``) it is scored as gold, as
conlleval scores any tag, said in one line and listed as ``gold_only_tags``.  Each token is tokenised into sub-tokens
(``is_split_into_words``); its tag is the target of its first sub-token, every other sub-token
and the special tokens get -100 (no loss), so the model predicts one tag per token.  A token
with no sub-token is counted (``words_without_prediction``) and scored, never left out of the
sentence: one cut off by ``max_length`` (``words_past_max_length``) is predicted ``O``; one the
tokenizer drops (a zero-width space, a soft hyphen, a control character: WordPiece's normaliser
removes them) between two words that have sub-tokens continues the entity around it when the
word after it is predicted its ``I-`` (else ``O``): predicted ``O`` there, it split every entity
it stood in, which the model could then never get right (:func:`word_tags`).  Fine-tunes ``AutoModelForTokenClassification``, keeps
the epoch with the best dev entity F1, scores the test file once with :mod:`finetune.entities`
(entity-level, CoNLL chunk rules).  Writes ``metrics.json`` (``f1``, ``precision``, ``recall`` as
fractions, entity counts, ``per_type``; ``health``: ``not_learning`` when no entity is predicted
in dev, or none of those predicted is right), ``predictions.jsonl`` (one object per test sentence
in file order: ``line``, ``tokens``, ``tags``, ``predicted``) and ``learning_curve.{png,json}``.
"""

from __future__ import annotations

import numpy as np

from kolectra.core.stage import warn
from kolectra.finetune import skeleton
from kolectra.finetune.entities import OUTSIDE, entity_scores, split_tag
from kolectra.finetune.files import FinetuneError, write_jsonl
from kolectra.finetune.readers.ner import read_sentences
from kolectra.finetune.text_task import TextTask

STAGE_VERSION = 14  # bump when the same request's bytes change; history: docs/artifacts.md


def tag_order(tags) -> list[str]:
    """``O`` first, then by entity type and B before I: the same tag set gives the same ids."""
    def key(tag: str) -> tuple:
        boundary, typ = split_tag(tag)
        return (boundary != OUTSIDE, typ, boundary, tag)
    return sorted(set(tags), key=key)


class Ner(TextTask):
    name = "ner"
    auto_model = "AutoModelForTokenClassification"
    per_token = ("input_ids", "token_type_ids", "labels")
    per_row = ()
    outputs = {"logits": True}
    figures = ("f1", "precision", "recall")
    stats = ("f1", "precision", "recall", *TextTask.stats)

    def load(self, path, cfg):
        table = read_sentences(path, cfg.format, cfg.tokens_column, cfg.tags_column, cfg.max_bad_fraction,
                               getattr(cfg, "tag_names", ()))
        return [{"line": n, **s} for n, s in table.records], table

    def fit(self, train, table):
        self.train_file = table.path
        # one output a tag, however spelt: a training file mixing B-LOC and LOC-B (a CoNLL file and a Naver one
        # joined) had given each spelling an output of its own, the entity's rows split between them; the first
        # spelling in tag_order is the tag's name, convert maps the others to it
        spellings: dict[tuple[str, str], str] = {}
        for tag in tag_order(t for r in train for t in r["tags"]):
            spellings.setdefault(split_tag(tag), tag)
        self.labels = list(spellings.values())
        self.gold_only: list[str] = []  # dev or test tags of a training type the training file lacks
        if self.labels == [OUTSIDE]:  # as classify refuses one label: it trained, then said "learned nothing"
            raise FinetuneError(f"{table.path}: every training tag is {OUTSIDE!r}: no entity to learn from (check "
                                "the tags column, or the file)")

    def convert(self, part, table):
        names = [*self.labels, *self.gold_only]
        ids = {tag: i for i, tag in enumerate(names)}
        types = {split_tag(t)[1] for t in self.labels}
        spelled = {split_tag(t): t for t in self.labels}  # B-LOC, LOC-B, B_LOC, LOC_B: one tag, one output
        for r in part:
            for tag, n in zip(r["tags"], r["at"]):
                if tag in ids:
                    continue
                if split_tag(tag) in spelled:  # a training tag spelled otherwise (a CoNLL test file, Naver train)
                    ids[tag] = ids[spelled[split_tag(tag)]]
                    continue
                if split_tag(tag)[1] not in types:  # a type never trained: a typo, or the wrong file
                    raise FinetuneError(f"{table.where(n)}: tag {tag!r} is not among the training tags "
                                        f"({', '.join(self.labels)})")
                # a training type's other boundary (I-LOC where training had one-word LOC only; IOB1 files):
                # scored as gold, as conlleval would, though the model cannot predict it; ids past the head's
                # are never a target (evaluation feeds no labels). Its id is its place in labels + gold_only
                # (score's names), not len(ids): a training tag spelled otherwise adds a key but no name
                ids[tag] = len(self.labels) + len(self.gold_only)
                said = any(split_tag(g) == split_tag(tag) for g in self.gold_only)  # LOC-I after I-LOC: one tag
                self.gold_only.append(tag)
                if not said:
                    warn(f"{self.name}: {table.where(n)}: tag {tag!r} is not among the training tags, though its "
                         f"type {split_tag(tag)[1]!r} is: scored as gold (the model cannot predict it)")
        return [{**r, "tags": [ids[t] for t in r["tags"]]} for r in part]

    def before_caps(self, train, dev):
        super().before_caps(train, dev)
        # whether the rows max_train_examples chooses from hold an entity: a refusal of the rows left names the cap
        # only where it cut the entities away (as classify names it only where it cut a label away)
        self.carved_entity = any(t != self.outside for r in train for t in r["tags"])

    @property
    def outside(self) -> int:
        return self.labels.index(OUTSIDE) if OUTSIDE in self.labels else -1

    def check(self, splits, data, cfg):
        super().check(splits, data, cfg)
        outside = self.outside
        if not any(t != outside for tags in data.train["tags"] for t in tags):
            # as classify refuses training rows of one label: trained on sentences of O alone (max_train_examples=10
            # of a file whose entities are sparse, or a dev split that took the few sentences holding one), the
            # head learned to say O, and the health said so after the run
            n, left_by, way = self.train_cut(data, cfg, self.carved_entity)
            raise FinetuneError(f"{self.train_file}: the {n} training sentence(s) left by {left_by} hold no entity "
                                f"(every tag {OUTSIDE!r}): nothing to learn from; {way}")
        if not any(t != outside for tags in data.dev["tags"] for t in tags):
            # every dev F1 0: the first epoch kept, and the health said "it learned nothing" of a model no dev
            # entity could judge
            where = f"--dev {self.dev_file}" if self.dev_file is not None else f"the dev sentences ({data.facts['dev_set']})"
            cut = self.dev_cut(data, cfg)  # the cap, not the file, left no entity: its way out is the cap's
            raise FinetuneError(f"{where}{cut}: every dev tag is {OUTSIDE!r}: no entity to score, so no epoch can be "
                                "chosen by entity F1; " + ("raise max_dev_examples (0: all)" if cut else
                                                          "give a dev file holding entities" if self.dev_file is not None
                                                          else "raise dev_fraction or pass --dev FILE"))
        if not any(t != outside for tags in data.test["tags"] for t in tags):
            # warned, not refused (a test file of placeholder O tags is how predictions.jsonl is had for an unlabelled
            # set), but its F1 0.0000 had stood as the model's figure, unsaid
            cut = self.test_cut(data, cfg)
            warn(f"{self.name}: {self.eval_file}{cut}: every test tag is {OUTSIDE!r}: no entity to find, so the test "
                 "f1 and recall are 0 whatever the model learned (predictions.jsonl still holds its tags); "
                 + ("raise max_eval_examples (0: all)" if cut else "score a file holding entities"))

    def counts(self, part):
        return {"tokens": sum(len(r["tokens"]) for r in part),
                "blank_tokens_dropped": sum(r["dropped"] for r in part),
                "blank_entities_dropped": sum(r.get("entities_lost", 0) for r in part)}

    def columns(self, part):
        return {k: [r[k] for r in part] for k in ("line", "tokens", "tags")}

    def model_config(self, data):
        return {"num_labels": len(self.labels), "id2label": dict(enumerate(self.labels)),
                "label2id": {t: i for i, t in enumerate(self.labels)}}

    def encoder(self, tokenizer, cfg):
        self.max_length = cfg.max_length  # for the count of words it cuts (metrics)

        def encode(batch: dict, indices: list[int]) -> dict:
            enc = tokenizer(batch["tokens"], is_split_into_words=True, truncation=True, max_length=cfg.max_length,
                            return_token_type_ids=True)
            labels, starts = [], []
            for i, tags in enumerate(batch["tags"]):
                row, first, previous = [], [-1] * len(tags), None
                for position, word in enumerate(enc.word_ids(i)):
                    is_first = word is not None and word != previous
                    row.append(tags[word] if is_first else -100)  # first sub-token only; specials get -100
                    if is_first:
                        first[word] = position
                    previous = word
                labels.append(row)
                starts.append(first)
            return {"input_ids": enc["input_ids"], "token_type_ids": enc["token_type_ids"], "labels": labels,
                    "word_starts": starts}
        return encode

    def score(self, split, outputs, cfg):
        if "gold" not in split.derived:  # built once per split, reused every epoch
            names = [*self.labels, *self.gold_only]
            split.derived.update(gold=[[names[t] for t in tags] for tags in split.rows["tags"]],
                                 starts=split.encoded["word_starts"])
        predicted = []
        for starts, logits in zip(split.derived["starts"], outputs["logits"]):
            best = logits.argmax(-1)  # [sub-tokens]: a tag id per position; a token reads its first sub-token's
            predicted.append(word_tags([self.labels[best[s]] if s >= 0 else None for s in starts]))
        scores = entity_scores(split.derived["gold"], predicted)
        return {k: scores[k] for k in self.figures}, {"predicted": predicted, "entities": scores}

    def health(self, splits, fit):
        e = fit.dev.predictions["entities"]
        figures = {f"dev_{k}": e[k] for k in ("gold_entities", "predicted_entities", "correct_entities")}
        sentences = len(splits["dev"].rows)
        if not e["predicted_entities"]:
            return [f"the model predicts no entity in the {sentences} dev sentences (O for every token; they hold "
                    f"{e['gold_entities']}): it learned nothing"], figures
        if not e["correct_entities"]:
            return [f"none of the {e['predicted_entities']} entities predicted in the {sentences} dev sentences is "
                    "right: the model learned nothing useful"], figures
        return [], figures

    def metrics(self, data, splits, fit):
        e = fit.final.predictions["entities"]
        starts, ids = splits["test"].derived["starts"], splits["test"].encoded["input_ids"]
        missed = sum(int(np.sum(np.asarray(s) < 0)) for s in starts)
        cut = sum(past_end(s, len(i), self.max_length) for s, i in zip(starts, ids))
        return {**super().metrics(data, splits, fit), "tags": self.labels, "metric": "entity-level, CoNLL chunks",
                **{k: e[k] for k in ("gold_entities", "predicted_entities", "correct_entities", "per_type")},
                "words_without_prediction": missed, "words_past_max_length": cut,
                **({"gold_only_tags": self.gold_only} if self.gold_only else {})}

    def write(self, out_dir, splits, fit):
        test = splits["test"]
        write_jsonl(out_dir / "predictions.jsonl", (
            {"line": n, "tokens": tokens, "tags": gold, "predicted": predicted}
            for n, tokens, gold, predicted in zip(test.rows["line"], test.rows["tokens"], test.derived["gold"],
                                                  fit.final.predictions["predicted"])))


def past_end(starts, length: int, max_length: int) -> int:
    """How many of a sentence's words ``max_length`` cut: those after its last word with a sub-token, when
    its input (``length`` ids) is full (else they are words the tokenizer dropped at its end)."""
    if length < max_length:
        return 0
    n = len(starts)
    while n and starts[n - 1] < 0:
        n -= 1
    return len(starts) - n


def word_tags(tags: list) -> list[str]:
    """A sentence's predicted tags, one per word, ``None`` for a word without a sub-token -> tags.

    A word without one after the last word with one was cut by ``max_length``: ``O`` (its gold tag is
    still scored). One between two words with sub-tokens is a word the tokenizer dropped (``\u200b``):
    it takes the tag of the word after it where that tag continues the entity before it (``B-ORG``,
    ``None``, ``I-ORG``: one entity of three words, as the gold ``B-ORG I-ORG I-ORG`` is), else ``O``."""
    out, following = [], None
    after = [None] * len(tags)  # the tag of the next word with a sub-token
    for i in range(len(tags) - 1, -1, -1):
        after[i] = following
        following = tags[i] if tags[i] is not None else following
    for tag, nxt in zip(tags, after):
        if tag is None:
            before = split_tag(out[-1]) if out else (OUTSIDE, "")
            tag = nxt if nxt is not None and before[0] != OUTSIDE and split_tag(nxt) == ("I", before[1]) else OUTSIDE
        out.append(tag)
    return out


def run(cfg, model_dir, train_file, test_file, out_dir, cache_dir=None, dev_file=None):
    """Fine-tune on ``train_file`` (dev: ``dev_file`` or carved from train), score ``test_file`` once."""
    return skeleton.run(Ner(dev_file), cfg, model_dir, train_file, test_file, out_dir, cache_dir)
