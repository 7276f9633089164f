"""Model cards carry the Hugging Face Hub's YAML metadata (model/card.py): parsed back by a YAML
reader and by ``huggingface_hub.ModelCard``, with base_model only for continued pretraining."""

import pytest
import yaml
from huggingface_hub import ModelCard

from kolectra.model.card import figures_text, front_matter
from kolectra.model.export import model_card

LINEAGE = ["checkpoint/sample-0123456789abcdef", "└── examples/seq128-aaaa",
           "    ├── corpus/sample-bbbb", "    └── vocab/morph_wordpiece-cccc", "        └── corpus/sample-bbbb (see above)"]


def _meta(card: str) -> dict:
    assert card.startswith("---\n")
    return yaml.safe_load(card.split("---\n")[1])


def test_the_front_matter_names_language_license_tags_and_metrics_and_only_hub_ids():
    meta = _meta(front_matter("ElectraForPreTraining", "electra"))
    assert meta["language"] == "ko" and meta["license"] == "apache-2.0" and meta["library_name"] == "transformers"
    assert {"electra", "korean", "replaced-token-detection"} <= set(meta["tags"])
    assert "roc_auc" in meta["metrics"] and "base_model" not in meta and "datasets" not in meta
    named = _meta(front_matter("ElectraForPreTraining", "electra", ["e9t/nsmc"],
                               "monologg/koelectra-small-v3-discriminator"))
    assert named["datasets"] == ["e9t/nsmc"] and named["base_model"] == "monologg/koelectra-small-v3-discriminator"
    with pytest.raises(ValueError, match=r"--dataset: 'corpus/sample-bbbb\.\.' is not a Hugging Face Hub id"):
        front_matter("ElectraForPreTraining", "electra", ["corpus/sample-bbbb.."])


def test_a_generator_is_a_fill_mask_model_and_an_mlm_ablation_is_tagged_so():
    meta = _meta(front_matter("ElectraForMaskedLM", "mlm"))
    assert meta["pipeline_tag"] == "fill-mask" and "masked-language-modeling" in meta["tags"]
    assert "datasets" not in meta


def test_the_whole_card_loads_with_huggingface_hub(tmp_path):
    facts = {"class": "ElectraForPreTraining", "objective": "electra", "preset": "tiny",
             "initialised from": "/models/koelectra-pair"}
    path = tmp_path / "README.md"
    path.write_text(model_card("t", "discriminator", "ElectraForPreTraining", facts, LINEAGE), encoding="utf-8")
    card = ModelCard.load(path)
    # a local folder and the corpus artifacts are not Hub ids: in the body, not in the metadata (issue 28)
    assert card.data.language == "ko" and card.data.base_model is None and card.data.datasets is None
    assert "/models/koelectra-pair" in card.text and "corpus/sample-bbbb" in card.text
    assert "## Lineage" in card.text and "## Licence" in card.text


def test_the_final_figures_name_each_networks_metrics_and_leave_out_what_was_not_logged():
    final = {"loss": 9.1, "disc_acc": 0.9123, "disc_auc": 0.81, "gen_acc": 0.25, "mlm_acc": None}
    assert figures_text(final) == "discriminator: accuracy 0.912, AUC 0.810; generator: accuracy at the masked slots 0.250"
    assert figures_text({"loss": 1.0, "mlm_acc": 0.4}) == "discriminator: masked LM accuracy 0.400"
    assert figures_text({"loss": 1.0}) == "none logged"


def test_a_fact_holding_a_pipe_or_a_line_break_stays_in_its_table_cell():
    card = model_card("t", "discriminator", "ElectraForPreTraining",
                      {"initialised from": "/models/a|b\nc", "seed": 0}, LINEAGE)
    assert "| initialised from | /models/a\\|b c |\n| seed | 0 |" in card
