"""A Hugging Face folder (a model's, a tokenizer's) is data: kolectra never lets transformers run code it names.

A folder's ``config.json`` or ``tokenizer_config.json`` may name Python files of its own (``auto_map``)
that transformers' Auto classes import. Left at its default (None), ``trust_remote_code`` makes them
ask on the terminal, for 15 s, "Do you wish to run the custom code? [y/N]", and a "y" runs the
folder's code in the kolectra process; a checkpoint or vocabulary from a shared bucket or a download
is such a folder. Every Auto class kolectra calls gets :data:`NO_CODE`: such a folder is refused
(transformers' ValueError, "contains custom code which must be executed"), never asked about. The
concrete classes (``ElectraForPreTraining.from_pretrained``) never import a folder's code.
"""

from __future__ import annotations

NO_CODE = {"trust_remote_code": False}
