"""``kolectra study``: pretraining objectives compared at equal FLOPs.

:mod:`.plan` is what a study is asked (torch-free, for the CLI), :mod:`.runner` runs it,
:mod:`.stats` compares arms with intervals, :mod:`.report` writes ``report.md`` and its plots.
"""
