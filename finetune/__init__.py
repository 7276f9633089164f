"""Fine-tuning stage, the last link of the chain: NSMC, KorQuAD 1.0, and classify / regress / ner on the user's files.

``nsmc.run`` / ``korquad.run`` / ``classify.run`` / ``regress.run`` / ``ner.run`` take a HF ELECTRA
discriminator directory and the task files and write an eval artifact's files (``metrics.json``,
``learning_curve.{png,json}``, the task's predictions: ``predictions.jsonl``, or KorQuAD's
``predictions.json`` and ``nbest_predictions.json``) and print a results table.
``docs/finetune.md`` is the user's guide.

Modules: ``skeleton`` (the steps every task takes, and the ``Task`` hooks), ``nsmc`` and
``korquad`` (the tasks), ``classify``, ``regress`` and ``ner`` (tasks read from TSV, CSV, JSONL,
CoNLL or a saved dataset; ``text_task`` is what the first two share, ``tabular`` and ``conll`` the
readers, ``entities`` the entity-level metric), ``tasks`` (the table of tasks), ``config``
(settings, presets), ``loop`` (training and evaluation on ``model.runtime``'s Device), ``loading``
(model directory checks), ``features`` (``datasets`` rows, tokenising, padded arrays), ``files``
(the stage's error, JSON writers), ``progress`` (library bars), ``nsmc_reader``, ``squad_data``
(reading, by-article split, windows, span decoding), ``korquad_metric`` (official v1.0
semantics), ``report`` (tables, learning curve), ``seeds`` (``--seeds`` summaries), ``probe`` (a
frozen-encoder linear probe), ``tiny`` (a tiny random model directory for tests and benchmarks).
"""
