"""Task files as users hold them, written by other programs: an NSMC-style file an editor left a blank
line in, Excel's "Unicode Text" (UTF-16), gzip-compressed and Parquet files, labels exported as class codes (s5)."""

from __future__ import annotations

import bz2
import gzip
import lzma

import pytest

from kolectra.finetune.files import FinetuneError
from kolectra.finetune.readers.ner import read_sentences
from kolectra.finetune.readers.nsmc import read_nsmc
from kolectra.finetune.readers.tables import read_table


def test_an_nsmc_file_with_a_trailing_blank_line_is_read_and_its_lines_add_up(tmp_path):
    # a 200-row sample of ratings_train.txt saved by an editor with an empty last line (and one of spaces):
    # each was a malformed row ("expected 3 tab-separated columns, got 1"), which refused the file at 0.001
    path = tmp_path / "ratings_sample.txt"
    path.write_text("id\tdocument\tlabel\n" + "".join(f"{i}\t리뷰 {i}\t{i % 2}\n" for i in range(200)) + "\n  \n",
                    encoding="utf-8")
    stats = read_nsmc(path).stats
    assert (stats["rows"], stats["bad_rows"], stats["blank_lines"], stats["lines"]) == (200, 0, 2, 202)
    path.write_text("id\tdocument\tlabel\n\n\n", encoding="utf-8")
    with pytest.raises(FinetuneError, match="a header and no rows"):
        read_nsmc(path)


def test_excel_unicode_text_is_named_utf_16_with_the_iconv_that_converts_it(tmp_path):
    # Excel's "Unicode Text (*.txt)": UTF-16 LE with a byte-order mark, tab-separated; the hint was "iconv -f <its encoding>"
    rows = "text\tlabel\n" + "".join(f"정말 재미있는 영화 {i}\t{i % 2}\n" for i in range(20))
    path = tmp_path / "train.txt"
    path.write_bytes(rows.encode("utf-16"))
    with pytest.raises(FinetuneError, match=r"train\.txt:1: not UTF-8 .*it is UTF-16 .*Unicode Text.*"
                                            r"iconv -f utf-16 -t utf-8 "):
        read_table(path)
    path.write_bytes(rows.encode("utf-16-le"))  # the mark left off: NUL beside every ASCII character
    with pytest.raises(FinetuneError, match=r"UTF-16 without a byte-order mark \(utf-16le;.*iconv -f utf-16le "):
        read_sentences(path, "conll")
    nsmc = tmp_path / "ratings.txt"
    nsmc.write_bytes("id\tdocument\tlabel\n1\t좋다\t1\n".encode("utf-16"))
    with pytest.raises(FinetuneError, match="iconv -f utf-16 -t utf-8"):
        read_nsmc(nsmc)
    cp949 = tmp_path / "cp.tsv"  # no NUL bytes: still cp949's hint
    cp949.write_bytes(rows.encode("cp949"))
    with pytest.raises(FinetuneError, match="it reads as cp949"):
        read_table(cp949)


@pytest.mark.parametrize(("name", "pack", "said"), [
    ("train.tsv.gz", gzip.compress, r"gzip-compressed, not a text file; decompress it first: gunzip -k "),
    ("train.tsv", gzip.compress, r"gzip-compressed, not a text file"),
    ("train.csv", bz2.compress, r"bzip2-compressed, not a text file; decompress it first: bunzip2 -k "),
    ("train.jsonl", lzma.compress, r"xz-compressed"),
    ("train.xlsx", lambda b: b"PK\x03\x04" + b"\x00" * 40, r"a zip archive \(an Excel \.xlsx workbook is one\).*'CSV UTF-8"),
])
def test_a_compressed_file_or_a_workbook_is_named_as_what_it_is(tmp_path, name, pack, said):
    # was "cannot tell its format from the name; pass --set format=tsv, csv or jsonl", and with the format
    # passed (or a .tsv name) "not UTF-8 ... iconv -f <its encoding>": no text encoding would have helped
    path = tmp_path / name
    path.write_bytes(pack("text\tlabel\n좋다\t1\n".encode()))
    with pytest.raises(FinetuneError, match=said):
        read_table(path)
    if name.endswith(".gz"):
        with pytest.raises(FinetuneError, match=said):
            read_table(path, "tsv")
