"""The fine-tuning tasks' file readers, one per kind of file a task reads: :mod:`.nsmc` (NSMC's TSV),
:mod:`.korquad` (SQuAD v1.1 JSON, by-article splits, windows and spans), :mod:`.ner` (CoNLL-style
tagged sentences) and :mod:`.tables` (TSV, CSV, JSONL or a saved ``datasets`` folder for classify and
regress). Every one turns a bad row into a counted, named reason or one error naming file and line.
"""
