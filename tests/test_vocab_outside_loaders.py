"""What docs/vocab.md tells a user who loads a vocabulary (or an export) with transformers alone and no
kolectra: ``AutoTokenizer`` composes decomposed Hangul (NFD) to the composed text's ids; transformers 5's
``ElectraTokenizer`` (its ``BertTokenizer``) builds its own normaliser and does not; and ``tokenizers``'
NFC gives a composed character the span of its first original character only, so the offsets of NFD text
end mid-syllable while NFC text's are whole. Pinned here so that a library change that ends either
pitfall shows, and the page is corrected with it."""

from __future__ import annotations

import unicodedata

from kolectra.core.tokens import SPECIALS
from kolectra.vocab.export import write_dir

TEXT = "나는 영화를 봤다."


def _vocab_dir(tmp_path):
    chars = sorted(set(TEXT.replace(" ", "")))
    vocab = [*SPECIALS, *chars, *(f"##{c}" for c in chars), "나는", "영화를", "봤다"]
    write_dir(vocab, tmp_path)
    return tmp_path


def test_auto_tokenizer_composes_nfd_and_electra_tokenizer_does_not(tmp_path):
    from transformers import AutoTokenizer, ElectraTokenizer

    folder = str(_vocab_dir(tmp_path))
    decomposed = unicodedata.normalize("NFD", TEXT)
    auto, electra = AutoTokenizer.from_pretrained(folder), ElectraTokenizer.from_pretrained(folder)
    assert auto(decomposed)["input_ids"] == auto(TEXT)["input_ids"] == electra(TEXT)["input_ids"]
    assert auto.unk_token_id not in auto(TEXT)["input_ids"]
    # ElectraTokenizer.from_pretrained, as KoELECTRA's README writes it: every decomposed word is [UNK]
    assert electra.convert_ids_to_tokens(electra(decomposed)["input_ids"]) == [
        "[CLS]", "[UNK]", "[UNK]", "[UNK]", ".", "[SEP]"]


def test_offsets_of_decomposed_text_end_after_the_first_jamo_and_nfc_text_s_are_whole(tmp_path):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(_vocab_dir(tmp_path)))
    decomposed = unicodedata.normalize("NFD", TEXT)

    def spans(text):
        enc = tok(text, add_special_tokens=False, return_offsets_mapping=True)
        return [text[a:b] for a, b in enc["offset_mapping"]]

    assert spans(TEXT) == ["나는", "영화를", "봤다", "."]
    # the ids are right, the spans are not: each word's last syllable is cut after its first jamo
    assert spans(decomposed) == [unicodedata.normalize("NFD", w)[:n] for w, n in
                                 (("나는", 3), ("영화를", 6), ("봤다", 4))] + ["."]
    assert spans(unicodedata.normalize("NFC", decomposed)) == spans(TEXT)  # the docs' way round it
