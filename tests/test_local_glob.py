"""corpus/local_glob.py's translation of a local ``--input`` glob is Beam's ``FileSystem.translate_pattern``,
character for character (the listing imported Beam for it: docs/benchmarks.md, "reused"): the same regular
expression on every pattern of up to four characters of an awkward alphabet and on chosen ones, and the
listing's files those of ``FileSystems.match`` on a folder of awkward names. Which files a glob names decides
the corpus's request id, so the two must never drift (a newer Beam that changes its own fails here)."""

from __future__ import annotations

import itertools
import os
import random
import re
import warnings

import pytest
from apache_beam.io.filesystem import FileSystem
from apache_beam.io.filesystems import FileSystems

from kolectra.corpus import inputs
from kolectra.corpus.local_glob import translate_pattern

ALPHABET = "*?[]!^\\/.a가 -"  # the glob's own characters, the class's, a separator, an escaped one, Korean, a space
AWKWARD = ["**", "***", "**/*.jsonl", "*/**", "[!a]", "[]]", "[!]]", "[]", "[!]", "[^a]", "[a-c]", "[!a-c]x",
           "[", "a[", "[a", "]", "[[]", "[]a]", "[\\]", "[\\]]", "\\*", "a\\?b", "a.b", "*.json?", ".*",
           "dir with space/part 0.txt", "리뷰/*.jsonl.gz", "리뷰/[가-힣]*", "데이터/**/부분-?.txt", "a+b(c){2}$^|",
           "%d %s {x}", "C:\\data\\*.txt", "/abs/[!.]*", "tab\there", "new\nline", "\U0001f600*", "[ab", "[!", "*[*]*"]


def _beam(pattern: str) -> str:
    return FileSystem.translate_pattern(pattern)


@pytest.mark.parametrize("pattern", AWKWARD)
def test_chosen_patterns_translate_as_beams(pattern):
    assert translate_pattern(pattern) == _beam(pattern)


def test_every_short_pattern_translates_as_beams():
    """Every pattern of 0-4 characters of the alphabet (41,371), and 20,000 random ones of 5-12."""
    rng = random.Random(15)
    patterns = ["".join(p) for n in range(5) for p in itertools.product(ALPHABET, repeat=n)]
    patterns += ["".join(rng.choice(ALPHABET) for _ in range(rng.randint(5, 12))) for _ in range(20_000)]
    differ = [p for p in patterns if translate_pattern(p) != _beam(p)]
    assert differ == [], differ[:10]


@pytest.mark.parametrize("pattern,name,matches", [
    ("*.txt", "a.txt", True), ("*.txt", "d/a.txt", False), ("**.txt", "d/a.txt", True),
    ("*.txt", "d\\a.txt", False), ("?.txt", "/.txt", True), ("[!a].txt", "b.txt", True),
    ("[!a].txt", "a.txt", False), ("[]].txt", "].txt", True), ("[[]a].txt", "[a].txt", True),
    ("a[", "a[", True), ("리뷰 [!x]*", "리뷰 1.jsonl", True), ("a.b", "axb", False), ("*", "new\nline", True),
])
def test_what_a_pattern_matches(pattern, name, matches):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # "[[]": Python's "possible nested set", Beam's alike
        assert bool(re.match(translate_pattern(pattern), name)) is matches


def test_the_listing_names_the_files_beams_match_names(tmp_path):
    """Beam's ``FileSystems.match`` and the listing on one folder of awkward names, pattern by pattern."""
    names = ["a.txt", "b.txt", ".hidden.txt", "part 0.jsonl", "부분-1.jsonl", "리뷰.jsonl.gz", "]x.txt", "[a].txt",
             "!.txt", "^.txt", "a+b.txt", "sub/c.txt", "sub/deep/d.txt", "sub dir/e f.txt", "한글 폴더/리뷰 2.jsonl",
             "tab\tname.txt", "x.TXT"]
    for name in names:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("x", encoding="utf-8")
    os.symlink(tmp_path / "nowhere", tmp_path / "dangling.txt")  # a link to nothing: no file, as Beam
    base = str(tmp_path)
    patterns = ["*.txt", "**.txt", "**/*.txt", "?.txt", "[!a].txt", "[]]*", "[[]*", "[!!^]*.txt", "[\\^]*",
                "*.json?", "*.jsonl*", "**/리뷰*", "한글 폴더/*", "*/*", "sub*/*.txt", "sub/", "[ab].txt", ".*",
                "*.TXT", "a+b.txt", "?", "**"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        for pattern in patterns:
            full = os.path.join(base, pattern)
            beam = sorted(m.path for m in FileSystems.match([full])[0].metadata_list)
            ours = sorted(inputs._local_matches(full))  # noqa: SLF001
            assert ours == beam, pattern
            assert ours or pattern in ("?",), pattern  # the patterns name files (the walk is exercised)
