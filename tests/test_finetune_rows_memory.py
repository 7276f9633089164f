"""A task's string columns become one Arrow array without a second copy of their bytes at the peak.

``features._strings`` encoded a block at a time and joined the blocks with ``concat_arrays``, which copied
them whole into a new buffer while they lived: at the peak of NSMC's read (the training part's Arrow copy,
made while every row's Python string lives), 0.8 times the texts' bytes more (docs/finetune.md, "Memory and
large task files")."""

import random
import tracemalloc

import pyarrow as pa
import pytest

from kolectra.finetune.features import _strings, _table_sha256


def reviews(n: int) -> list[str]:
    rng = random.Random(0)
    syllables = [chr(0xAC00 + i) for i in range(0, 11172, 37)]
    return ["".join(rng.choice(syllables) for _ in range(rng.randint(0, 30))) + "!" * (i % 3) for i in range(n)]


def test_the_string_column_is_built_in_one_buffer_of_its_size():
    values = reviews(40_000)
    pool = pa.proxy_memory_pool(pa.default_memory_pool())  # counts Arrow's allocations; numpy's are traced
    default = pa.default_memory_pool()
    pa.set_memory_pool(pool)
    tracemalloc.start()
    try:
        column = _strings(values, block=4096)
        python_peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
        pa.set_memory_pool(default)
    size = column.nbytes
    # the old join: Arrow's pool alone peaked at twice the column (the blocks, then their copy)
    assert (python_peak + pool.max_memory()) / size < 1.4, (python_peak, pool.max_memory(), size)
    expected = pa.array(values, pa.string())
    assert column.equals(expected) and column.to_pylist() == values
    assert _table_sha256(pa.table({"text": column})) == _table_sha256(pa.table({"text": expected}))


def test_short_columns_and_a_lone_surrogate_as_pa_array_takes_them():
    for values in ([], [""], ["a", "", "가나"], ["가"] * 5):
        assert _strings(values, block=2).equals(pa.array(values, pa.string()))
    with pytest.raises(UnicodeEncodeError):  # as pa.array refuses it (the readers refuse such text first)
        _strings(["a", "\ud800"], block=2)


def test_korquad_s_question_table_is_built_directly_as_from_dict_would():
    """KorQuAD's rows hold lists (answer texts and starts), which went through ``Dataset.from_dict``: it hashed a
    pickled copy of the table (3.5 times the table's bytes in Python at the peak, the contexts repeated in each of
    their questions' rows). Lists of ints or strs now become Arrow lists directly, with the same bytes."""
    import datasets

    from kolectra.finetune.features import content_key, rows
    from kolectra.finetune.readers.korquad import Question, question_columns

    texts = reviews(3000)
    questions = [Question(f"q{i}", texts[i] + "?", " ".join(texts[i // 5 * 5:i // 5 * 5 + 40]),
                          tuple((texts[i + k][:3], k) for k in range(1 + i % 3)), "t") for i in range(2900)]
    columns = question_columns(questions)
    tracemalloc.start()
    try:
        ds = rows(columns)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1.6 * ds.data.table.nbytes, (peak, ds.data.table.nbytes)
    reference = datasets.Dataset.from_dict(columns)
    assert ds.features == reference.features and content_key(ds) == content_key(reference)
    assert ds[:4] == reference[:4] and ds[-1] == reference[-1]
    mixed = {"b": [[], []], "c": [[True], [False]], "d": [[1.5], [2]]}  # what from_dict still takes
    for name, values in mixed.items():
        assert content_key(rows({name: values})) == content_key(datasets.Dataset.from_dict({name: values}))
