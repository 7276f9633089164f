"""The Arrow-backed rows of a fine-tuning table (:mod:`finetune.readers.tables`): a folder written by
``Dataset.save_to_disk`` and a Parquet file, each as its columns and its rows numbered from 1, struct columns
flattened to dotted names and class-label codes read as their names (a saved dataset's features, or the ones
``Dataset.to_parquet`` keeps in the file's metadata). ``tables`` wraps them as its other formats' tables.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

from kolectra.finetune.files import FinetuneError, column_name


def saved_rows(path: Path) -> tuple[list[str], Iterator[tuple[int, dict]]]:
    """A folder of ``Dataset.save_to_disk``: its columns (structs flattened) and its numbered rows."""
    import datasets  # noqa: PLC0415 - heavy import

    from kolectra.finetune.progress import quiet_libraries  # noqa: PLC0415

    if not (path / "state.json").is_file() and not (path / "dataset_dict.json").is_file():
        raise FinetuneError(f"{path}: a folder, but not one written by datasets' save_to_disk "
                            "(no state.json or dataset_dict.json)")
    with quiet_libraries():
        ds = datasets.load_from_disk(str(path))
    if isinstance(ds, datasets.DatasetDict):
        raise FinetuneError(f"{path}: holds several splits ({', '.join(ds)}); name one, e.g. "
                            f"{path / next(iter(ds))}")
    ds = ds.flatten()
    if renamed := {c: column_name(c) for c in ds.column_names if column_name(c) != c}:  # NFC, as a header's names
        ds = ds.rename_columns(renamed)
    return list(ds.column_names), _saved_records(ds)


def parquet_rows(path: Path) -> tuple[list[str], Iterator[tuple[int, dict]]]:
    """A Parquet file (pandas' ``to_parquet``, datasets' ``Dataset.to_parquet``, a Hub dataset's files): read
    a batch of rows at a time through Arrow (``pq.read_table`` held the whole table: a 32 MB file of 400,000
    titles peaked at 561 MB), struct columns flattened to dotted names as a saved dataset's; the class-label
    names datasets keeps in its schema metadata are read as names (``to_json`` writes their codes instead)."""
    import datasets  # noqa: PLC0415 - heavy import
    import pyarrow  # noqa: PLC0415
    import pyarrow.parquet as pq  # noqa: PLC0415

    def refused(e):
        return FinetuneError(f"{path}: cannot read as Parquet ({type(e).__name__}: "
                             f"{str(e).strip().splitlines()[0][:200] if str(e).strip() else 'no detail'})")

    try:
        parquet = pq.ParquetFile(path)
        features = datasets.Features.from_arrow_schema(parquet.schema_arrow).flatten(max_depth=16)
        features = {column_name(c): f for c, f in features.items()}  # NFC, as a header's names
        columns = _flat(parquet.schema_arrow.empty_table()).column_names
    except (pyarrow.ArrowException, OSError, ValueError, TypeError) as e:  # cut short, not Parquet, odd metadata
        raise refused(e) from None

    def records() -> Iterator[dict]:
        try:
            for batch in parquet.iter_batches(batch_size=1024):
                yield from _flat(pyarrow.Table.from_batches([batch])).to_pylist()
        except (pyarrow.ArrowException, OSError) as e:  # a damaged row group past the first
            raise refused(e) from None

    return columns, _saved_records(records(), features)


def _flat(table):
    """``table`` with its struct columns flattened to dotted names, every level (as ``Dataset.flatten``), NFC."""
    import pyarrow  # noqa: PLC0415

    while any(pyarrow.types.is_struct(f.type) for f in table.schema):
        table = table.flatten()
    names = [column_name(c) for c in table.column_names]  # NFC, as a header's (a schema saved from NFD names)
    return table if names == table.column_names else table.rename_columns(names)


class Unnamed(int):
    """A class-label code outside the column's names (-1: the Hub's mark of an unlabelled row, a test split's): kept
    as its code for the reason a task gives, where the row's label had read as missing ("empty label")."""

    def __repr__(self) -> str:
        return f"{int(self)} (a class-label code outside its names" + (
            ": the Hub's mark of an unlabelled row, as a test split without its labels has)" if self < 0 else ")")


def _saved_records(ds, features=None) -> Iterator[tuple[int, dict]]:
    """A saved dataset's rows (or rows of ``features``), numbered from 1, class-label codes as their names."""
    names = {c: _class_names(f) for c, f in (features if features is not None else ds.features).items()}
    for i, row in enumerate(ds, start=1):
        for c, cls in names.items():
            if cls is not None and row[c] is not None:
                row[c] = [_name(cls, v) for v in row[c]] if isinstance(row[c], list) else \
                    _name(cls, row[c]) if 0 <= row[c] < len(cls) else Unnamed(row[c])
        yield i, row


def _name(names: list[str], code: int) -> str | None:
    """A class code's name; None for a code outside them (-1 marks an unlabelled row on the Hub) or a null one
    (Arrow lets a list of class labels hold a null: it had ended the run in a TypeError)."""
    return names[code] if code is not None and 0 <= code < len(names) else None


def _class_names(feature) -> list[str] | None:
    """The names of a class-label column (or of a list of class labels), else None."""
    import datasets  # noqa: PLC0415

    inner = getattr(feature, "feature", feature)  # List(ClassLabel) / Sequence(ClassLabel)
    return list(inner.names) if isinstance(inner, datasets.ClassLabel) else None
