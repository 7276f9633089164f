"""KorQuAD span decoding: BERT's max-context rule across overlapping windows, and the n-best list."""

import numpy as np

from kolectra.finetune.readers.korquad import Question, Windows, mark_max_context, nbest_spans, rounded_nbest

CONTEXT = "abcdefghijklmnopqrstuvwxyz"


def char_offsets(lo: int, hi: int, question_tokens: int = 2) -> list:
    """A window: [CLS] + question tokens (no offsets) + one token per context character [lo, hi) + [SEP]."""
    return [None] * (1 + question_tokens) + [(i, i + 1) for i in range(lo, hi)] + [None]


def two_windows() -> Windows:
    offs = [char_offsets(0, 10), char_offsets(5, 15)]  # characters 5..9 are in both
    return Windows(input_ids=[[0] * len(o) for o in offs], token_type_ids=[[0] * len(o) for o in offs],
                   offsets=offs, question_index=[0, 0], start_positions=[0, 0], end_positions=[0, 0],
                   max_context=mark_max_context(offs))


def test_max_context_picks_the_window_with_more_context_on_the_poorer_side():
    w = two_windows()
    owner = {}
    for k, (offs, maxc) in enumerate(zip(w.offsets, w.max_context)):
        assert not any(m for o, m in zip(offs, maxc) if o is None)  # question/special tokens never
        for o, m in zip(offs, maxc):
            if m:
                assert o[0] not in owner, o  # each context token has exactly one owner window
                owner[o[0]] = k
    assert sorted(owner) == list(range(15))
    # char 6: window 0 has min(6, 3) = 3 tokens of context, window 1 min(1, 8) = 1
    # char 7: min(7, 2) = 2 vs min(2, 7) = 2 -> tie, the first window keeps it
    # char 8: min(8, 1) = 1 vs min(3, 6) = 3 -> window 1
    assert [owner[c] for c in (4, 5, 6, 7, 8, 9, 10)] == [0, 0, 0, 0, 1, 1, 1]


def test_a_start_outside_its_max_context_window_is_not_used():
    w = two_windows()
    q = [Question("q", "?", CONTEXT, (("ij", 8),))]
    s0, e0 = np.full(len(w.offsets[0]), -10.0), np.full(len(w.offsets[0]), -10.0)
    s1, e1 = np.full(len(w.offsets[1]), -10.0), np.full(len(w.offsets[1]), -10.0)
    tok = {k: {o[0]: i for i, o in enumerate(offs) if o is not None} for k, offs in enumerate(w.offsets)}
    # window 0 is very sure the answer is "ij", but char 8 sits near its right edge: the
    # token belongs to window 1, which has more context around it
    s0[tok[0][8]], e0[tok[0][9]] = 25.0, 25.0
    # window 1 prefers "lm" (chars 11-12), less strongly
    s1[tok[1][11]], e1[tok[1][12]] = 15.0, 15.0
    nbest = nbest_spans(q, w, [s0, s1], [e0, e1], n_best=5, max_answer_length=10)
    assert nbest["q"][0]["text"] == "lm"
    # the same logits without the rule (every token its own max context) would answer "ij"
    w_all = Windows(w.input_ids, w.token_type_ids, w.offsets, w.question_index, w.start_positions,
                    w.end_positions, [[o is not None for o in offs] for offs in w.offsets])
    assert nbest_spans(q, w_all, [s0, s1], [e0, e1], 5, 10)["q"][0]["text"] == "ij"


def test_nbest_is_sorted_distinct_and_sums_to_one():
    w = two_windows()
    q = [Question("q", "?", CONTEXT, (("c", 2),)), ]
    rng = np.random.default_rng(0)
    starts = [rng.normal(size=len(o)) for o in w.offsets]
    ends = [rng.normal(size=len(o)) for o in w.offsets]
    spans = nbest_spans(q, w, starts, ends, n_best=7, max_answer_length=4)["q"]
    assert len(spans) == 7
    scores = [s["score"] for s in spans]
    assert scores == sorted(scores, reverse=True)
    assert len({s["text"] for s in spans}) == 7
    assert all(1 <= len(s["text"]) <= 4 and CONTEXT[s["start_char"]:].startswith(s["text"]) for s in spans)
    assert abs(sum(s["probability"] for s in spans) - 1.0) < 1e-9
    assert all(abs(s["score"] - s["start_logit"] - s["end_logit"]) < 1e-9 for s in spans)
    rounded = rounded_nbest({"q": spans}, 3)["q"][0]
    assert rounded["score"] == round(spans[0]["score"], 3) and rounded["text"] == spans[0]["text"]


def test_no_valid_span_gives_one_empty_answer():
    w = two_windows()
    q = [Question("q", "?", CONTEXT, (("c", 2),))]
    starts = [np.full(len(o), 5.0) for o in w.offsets]
    ends = [np.full(len(o), 9.0) for o in w.offsets]
    for e, offs in zip(ends, w.offsets):
        e[[i for i, o in enumerate(offs) if o is not None]] = -9.0  # best ends all off-context
    out = nbest_spans(q, w, starts, ends, n_best=2, max_answer_length=30)["q"]
    assert out == [{"text": "", "score": 0.0, "start_logit": 0.0, "end_logit": 0.0, "start_char": -1,
                    "probability": 1.0}]


def test_a_decomposed_context_read_by_an_nfc_tokenizer_gives_whole_syllables():
    # The tiny tokenizer normalises to NFC, as many do; the context is NFD (decomposed jamo, as text
    # saved on macOS can be). Its offsets give a composed syllable the span of its first jamo only:
    # the answer "임수경" came back as "임수ᄀ", and one ending the context was no training target.
    import unicodedata

    from benchmarks.tiny_model import train_wordpiece
    from kolectra.finetune.readers.korquad import decode, make_windows

    nfd = lambda s: unicodedata.normalize("NFD", s)  # noqa: E731
    context = nfd("1989년 임수경 씨는 평양에 갔다")
    tok = train_wordpiece([unicodedata.normalize("NFC", context), "누가 갔나?", "어디에 갔나?"], vocab_size=120)
    questions = [Question("who", "누가 갔나?", context, ((nfd("임수경"), context.index(nfd("임수경"))),)),
                 Question("end", "어디에 갔나?", context, ((nfd("갔다"), context.index(nfd("갔다"))),))]
    w = make_windows(tok, questions, max_length=64, doc_stride=16, max_query_length=16)
    assert all(s > 0 for s in w.start_positions)  # both answers are training targets
    starts = [np.where(np.arange(len(ids)) == s, 10.0, 0.0) for ids, s in zip(w.input_ids, w.start_positions)]
    ends = [np.where(np.arange(len(ids)) == e, 10.0, 0.0) for ids, e in zip(w.input_ids, w.end_positions)]
    assert decode(questions, w, starts, ends, n_best=5, max_answer_length=10) == {
        "who": nfd("임수경"), "end": nfd("갔다")}


def test_answers_read_by_a_sentencepiece_tokenizer_keep_no_edge_whitespace():
    # kolectra's sp_unigram/sp_bpe tokenizers (Metaspace) give a word-initial piece "▁임수경" the span
    # of the space before it too: 4,523 of 5,774 oracle answers on a dev set came back as " 임수경"
    import io

    import sentencepiece

    from kolectra.core.tokens import SPECIALS
    from kolectra.finetune.readers.korquad import decode, make_windows
    from kolectra.vocab import spm

    context = "1989년 임수경 씨는 평양에 갔다.  그해 여름\n서울로 돌아왔다."
    names, places, times = ["임수경", "김철수", "박영희", "이민호"], ["평양", "서울", "부산", "대구"], ["그해 여름", "1989년"]
    sentences = [f"{t} {n} 씨는 {p}에 갔다가 {b}로 돌아왔다." for n in names for p in places for b in places for t in times]
    model = io.BytesIO()
    sentencepiece.set_random_generator_seed(0)
    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=iter(sentences), model_writer=model, model_type="unigram", vocab_size=100,
        pad_id=0, unk_id=1, bos_id=-1, eos_id=-1, pad_piece=SPECIALS[0], unk_piece=SPECIALS[1],
        control_symbols=list(SPECIALS[2:]), normalization_rule_name="identity", byte_fallback=False,
        hard_vocab_limit=False, minloglevel=2)
    from transformers import PreTrainedTokenizerFast

    tok = PreTrainedTokenizerFast(tokenizer_object=spm.make_tokenizer(model.getvalue(), "sp_unigram"),
                                  unk_token="[UNK]", pad_token="[PAD]", cls_token="[CLS]", sep_token="[SEP]",
                                  mask_token="[MASK]")
    gold = {"who": "임수경", "to": "평양", "back": "서울로"}  # "▁평양" spans " 평양", "▁서울" "\n서울"
    questions = [Question(k, q, context, ((gold[k], context.index(gold[k])),))
                 for k, q in (("who", "누가 갔나?"), ("to", "어디에 갔나?"), ("back", "어디로 돌아왔나?"))]
    # a gold answer written with a space at its end: "▁평양", which starts at that space, was its last token
    questions.append(Question("spaced", "누가 갔나?", context, (("임수경 씨는 ", context.index("임수경")),)))
    gold["spaced"] = "임수경 씨는"
    w = make_windows(tok, questions, max_length=64, doc_stride=16, max_query_length=16)
    assert all(s > 0 for s in w.start_positions)
    assert any(context[w.offsets[r][s][0]] in " \n" for r, s in enumerate(w.start_positions))  # the spans' edge
    starts = [np.where(np.arange(len(ids)) == s, 10.0, 0.0) for ids, s in zip(w.input_ids, w.start_positions)]
    ends = [np.where(np.arange(len(ids)) == e, 10.0, 0.0) for ids, e in zip(w.input_ids, w.end_positions)]
    nbest = nbest_spans(questions, w, starts, ends, n_best=5, max_answer_length=10)
    assert decode(questions, w, starts, ends, n_best=5, max_answer_length=10) == gold
    assert all(context[s["start_char"]:].startswith(s["text"]) and s["text"] == s["text"].strip()
               for spans in nbest.values() for s in spans)


def test_a_span_of_whitespace_alone_is_no_answer():
    context = "ab  cd"
    offs = [None, (0, 2), (2, 3), (3, 4), (4, 6), None]  # a token of each space, as a lone "▁" is
    w = Windows(input_ids=[[0] * 6], token_type_ids=[[0] * 6], offsets=[offs], question_index=[0],
                start_positions=[0], end_positions=[0], max_context=mark_max_context([offs]))
    q = [Question("q", "?", context, (("cd", 4),))]
    starts, ends = np.array([0, 1, 9, 0, 5, 0.0]), np.array([0, 1, 0, 9, 5, 0.0])
    spans = nbest_spans(q, w, [starts], [ends], n_best=20, max_answer_length=30)["q"]
    assert [(s["text"], s["start_char"]) for s in spans][:2] == [("cd", 4), ("ab", 0)]
    assert all(s["text"] == s["text"].strip() and s["text"] for s in spans)
