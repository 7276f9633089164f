"""Fine-tuning stage, the last link of the chain: NSMC, KorQuAD 1.0, and classify / regress / ner on the user's files.

``nsmc.run`` / ``korquad.run`` / ``classify.run`` / ``regress.run`` / ``ner.run`` take a HF ELECTRA
discriminator directory and the task files and write an eval artifact's files (``metrics.json``,
``learning_curve.{png,json}``, the task's predictions: ``predictions.jsonl``, or KorQuAD's
``predictions.json`` and ``nbest_predictions.json``) and print a results table.
``docs/finetune.md`` is the user's guide.

Modules: the six tasks (``nsmc``, ``korquad``, ``classify``, ``regress``, ``ner``, ``probe``, a
frozen-encoder linear probe); ``readers/``, one reader per kind of file a task reads (``nsmc``,
``korquad``: SQuAD JSON, by-article split, windows and span decoding; ``ner``: CoNLL-style tags;
``tables``: TSV, CSV, JSONL or a saved dataset); ``skeleton`` (the steps every task takes, and the
``Task`` hooks), ``text_task`` (what classify and regress share), ``tasks`` (the table of tasks),
``config`` (settings, presets); the metrics ``korquad_metric`` (official v1.0 semantics) and
``entities`` (entity-level F1); ``loop`` (training and evaluation on ``model.runtime``'s Device),
``loading`` (model directory checks), ``features`` (``datasets`` rows, tokenising, padded arrays),
``files`` (the stage's error, JSON writers), ``leakage``, ``progress`` (library bars), ``report``
(tables, learning curve), ``seeds`` (``--seeds`` summaries).
"""
