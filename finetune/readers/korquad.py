"""KorQuAD 1.0 (SQuAD v1.1 format) reading, by-article splitting, windowing and span decoding: the
names the task (``finetune.korquad``, last stage of the chain) and its callers import, each from the
module of its step. Pure functions, in the order a run calls them:

* reading (:mod:`.korquad_questions`): :func:`read_squad` checks the document shape and every
  ``answer_start`` (mismatches are counted, and such questions are still evaluated but never used as
  training targets); :func:`split_by_article` makes a seeded train/dev split of one file by article.
* windowing (:mod:`.korquad_windows`): :func:`make_windows` tokenizes question + context into
  overlapping windows (BERT's ``doc_stride``, at most ``max_windows`` a question), and
  :func:`mark_max_context` marks the one window allowed to start a span at a shared token.
* decoding (:mod:`.korquad_spans`): :func:`nbest_spans` maps the windows' n-best start and end
  logits back to slices of the context (:class:`NBest`), read through :class:`SpanIndex`;
  :func:`decode` keeps the best one per question.
"""

from __future__ import annotations

from kolectra.finetune.readers.korquad_questions import (  # noqa: F401  (this module's API)
    Question,
    load_json,
    missed,
    question_columns,
    questions_from,
    questions_of,
    read_squad,
    split_by_article,
    visible_span,
    why_missed,
)
from kolectra.finetune.readers.korquad_spans import NBest, SpanIndex, decode, nbest_spans, rounded_nbest  # noqa: F401
from kolectra.finetune.readers.korquad_windows import (  # noqa: F401  (this module's API)
    Windows,
    bounded_context,
    cluster_end,
    make_windows,
    mark_max_context,
    truncate_question,
    window_columns,
    windows_for,
)
