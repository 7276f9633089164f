"""Fine-tuning stage, the last link of the chain: NSMC sentiment and KorQuAD 1.0 extractive QA.

``nsmc.run`` / ``korquad.run`` take a HF ELECTRA discriminator directory and the task files and
write an eval artifact's files (``metrics.json``, ``learning_curve.{png,json}``, for KorQuAD also
``predictions.json`` and ``nbest_predictions.json``) and print a results table.
Modules: ``config`` (settings, presets), ``nsmc_reader``, ``squad_data`` (reading, by-article
split, windows, span decoding), ``korquad_metric`` (official v1.0 semantics), ``runtime`` (device, loading, training loop), ``report``
(tables, learning-curve PNG via ``core.plot``), ``seeds`` (``--seeds`` loop and summaries), ``tiny`` (a tiny random model directory for tests and benchmarks).
"""
