"""kolectra's ground floor: what every stage imports and nothing of kolectra's own is imported by.

``config`` (typed, frozen configs with dotted overrides), ``stage`` (what a stage hands back to
the artifact store, and progress lines), ``bars`` (progress bars on a terminal, plain lines
elsewhere), ``plot`` (matplotlib PNG charts for artifacts and reports). The
stages (``kolectra.corpus``, ``vocab``, ``model``, ``finetune``) build on it; the orchestration
(``kolectra.pipeline``: artifact store, CLI, ``kolectra run``, studies) sits on top of them.
"""
