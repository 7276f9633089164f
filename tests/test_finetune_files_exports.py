"""Task files as users hold them, written by other programs: an NSMC-style file an editor left a blank
line in, Excel's "Unicode Text" (UTF-16), gzip-compressed and Parquet files, labels exported as class codes (s5)."""

from __future__ import annotations

import pytest

from kolectra.finetune.files import FinetuneError
from kolectra.finetune.readers.nsmc import read_nsmc


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
