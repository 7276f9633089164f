"""The corpus stage on bad input, through the orchestration (store, manifest, failed runs) with the
real Beam FnApiRunner and real Kiwi: lone surrogates, byte-order marks, damaged archives of every
codec, glob-looking literal paths, personal data under the production preset, the reject-ratio
failure's kept rejects, files that change under the job, and input identity."""

import bz2
import gzip
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import zstandard

from kolectra.corpus import build, inputs, interruption
from kolectra.corpus.config import default_config
from kolectra.pipeline import stages
from kolectra.pipeline.store.artifacts import Store

PII = ["010-1234-5678", "hong.gildong@example.com", "900101-1234567", "https://secret.example.com/u/123"]
REVIEW = "이 영화 정말 재밌었어요 배우들 연기도 최고"


def _files(root: Path) -> None:
    root.mkdir()
    lines = [
        {"id": "s1", "text": "좋은 \ud800영화였어요 다시 보고 싶네요"},  # escaped lone surrogate in the text
        {"id": "s2\udc80", "text": "둘째 문서도 괜찮았습니다 추천"},  # ... and in the id
        {"id": "p1", "text": f"문의는 {PII[0]} 또는 {PII[1]} 로 주세요 감사합니다"},  # kept, masked
        {"id": "p2", "text": f"문의는 {PII[0]} 또는 {PII[1]} 로 주세요 감사합니다"},  # duplicate: a sample
        {"id": PII[1], "text": f"주민번호 {PII[2]} 적어둔 사람 누구냐 {PII[3]}"},  # an id that is personal data
        {"id": "p4", "text": f"call me at {PII[0]} or mail {PII[1]} please thanks"},  # low_script_share
    ]
    body = "\n".join(json.dumps(r) for r in lines) + "\n"  # ensure_ascii: surrogates escaped as \ud800
    (root / "web.jsonl").write_text(body, encoding="utf-8")
    (root / "bom.jsonl").write_bytes(b"\xef\xbb\xbf" + json.dumps({"text": REVIEW + " 첫 줄"}).encode() + b"\n")
    (root / "data[1].txt").write_text("대괄호 이름의 파일도 그대로 읽힙니다\n", encoding="utf-8")
    (root / "data1.txt").write_text("이 파일은 읽히면 안 됩니다 절대로\n", encoding="utf-8")
    text = "".join(f"{i}번째 줄 {hashlib.sha256(str(i).encode()).hexdigest()}\n" for i in range(3000)).encode()
    packs = {"gz": gzip.compress(text, mtime=0), "bz2": bz2.compress(text), "zst": zstandard.ZstdCompressor().compress(text)}
    for codec, packed in packs.items():
        (root / f"broken.txt.{codec}").write_bytes(packed[: len(packed) // 2])


@pytest.fixture(scope="module")
def production(tmp_path_factory):
    root = tmp_path_factory.mktemp("reliability")
    _files(root / "in")
    patterns = [str(root / "in" / "*.jsonl"), str(root / "in" / "broken.*"), str(root / "in" / "data[1].txt")]
    store = Store(root / "store")
    with pytest.raises(build.CorpusError) as failed:  # damaged files fail the run by default ...
        stages.corpus(store, patterns, preset="production")
    art = stages.corpus(store, patterns, preset="production", sets=["max_damaged_files=3"])
    return root, store, art, str(failed.value)


def test_damaged_archives_are_named_and_accepted_only_when_asked(production):
    root, store, art, failure = production
    for codec in ("gz", "bz2", "zst"):
        assert f"broken.txt.{codec}" in failure  # every damaged file in one message
    assert "max_damaged_files=3" in failure
    kept = Path(failure.rsplit("dead letters in ", 1)[1])
    assert kept.is_file() and str(store.root / "failed") in str(kept)  # the failed run's rejects survive
    rejects = [json.loads(line) for line in (art.path / "rejects" / "rejects.jsonl").read_text().splitlines()]
    damaged = {r["source"]: r for r in rejects if r["reason"] == "damaged_file"}
    assert sorted(damaged) == [f"broken.txt.{c}" for c in ("bz2", "gz", "zst")]
    stats = json.loads((art.path / "stats.json").read_text())
    assert all("damaged" in stats["sources"][s] for s in damaged)
    assert stats["records_in"] == stats["records_out"] + stats["rejected"] + sum(stats["dropped"].values())


def test_surrogates_bom_and_literal_paths(production):
    _, _, art, _ = production
    stats = json.loads((art.path / "stats.json").read_text())
    assert stats["repaired"] == {"lone_surrogate": 2}
    assert stats["rejected_reasons"]["invalid_json"] == 0  # the BOM line is read
    assert "data[1].txt" in stats["sources"] and "data1.txt" not in stats["sources"]
    docs = _all_text(art.path)
    assert "좋은 영화였어요" in docs and "\ufffd" in docs  # surrogate removed from the text, marked in the id
    assert REVIEW in docs and "대괄호 이름의 파일도" in docs


def test_no_file_of_a_production_artifact_holds_personal_data(production):
    _, _, art, _ = production
    everything = _all_text(art.path)
    assert "<phone>" in everything and "<email>" in everything and "<rrn>" in everything
    for raw in PII:
        assert raw not in everything, raw
    dropped = [json.loads(line) for line in (art.path / "samples" / "dropped.jsonl").read_text().splitlines()]
    assert {"duplicate", "low_script_share"} <= {r["reason"] for r in dropped}


def test_identity_is_the_listing_and_the_manifest_holds_the_bytes_read(production):
    root, store, art, _ = production
    for rec in art.manifest["inputs"]:
        path = Path(rec["path"])
        st = path.stat()
        assert rec["identity"] == f"local:{path}:{st.st_size}:{st.st_mtime_ns}:{st.st_ctime_ns}"
        assert rec["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()  # the bytes the job read
    # the same listing finds the same artifact; a file rewritten since is a new request
    patterns = [rec["path"] for rec in art.manifest["inputs"]]
    sets = ["max_damaged_files=3"]
    assert stages.corpus(store, patterns, preset="production", sets=sets).path == art.path
    bom = root / "in" / "bom.jsonl"
    st = bom.stat()
    os.utime(bom, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
    listed = inputs.list_inputs(patterns)
    assert [f.identity for f in listed] != [rec["identity"] for rec in art.manifest["inputs"]]


def test_reject_ratio_failure_keeps_its_rejects_where_the_message_says(tmp_path):
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "wrong.jsonl").write_text("not json\n" * 5 + json.dumps({"text": REVIEW}) + "\n", encoding="utf-8")
    store = Store(tmp_path / "store")
    with pytest.raises(build.CorpusError, match="rejected") as failed:
        stages.corpus(store, [str(tmp_path / "in" / "wrong.jsonl")])
    message = str(failed.value)
    kept = Path(message.rsplit("the rejected lines are in ", 1)[1])
    assert kept.is_file() and kept.is_relative_to(store.root / "failed")
    assert [json.loads(line)["reason"] for line in kept.read_text().splitlines()] == ["invalid_json"] * 5
    assert not list(store.root.glob("corpus/*"))  # and nothing that looks like an artifact


def test_a_failed_run_keeps_its_stats_where_the_message_says_and_empty_inputs_keep_nothing(tmp_path):
    """Every failure that keeps the run's stats and dead letters under ``failed/`` names the folder;
    empty inputs, whose stats would count nothing, keep none. Before, both left a folder that no
    message named."""
    (tmp_path / "in").mkdir()
    store = Store(tmp_path / "store")
    (tmp_path / "in" / "empty.jsonl").write_text("", encoding="utf-8")
    with pytest.raises(build.CorpusError, match="hold no records") as failed:
        stages.corpus(store, [str(tmp_path / "in" / "empty.jsonl")])
    assert "kept in" not in str(failed.value) and not (store.root / "failed").exists()
    (tmp_path / "in" / "short.txt").write_text("ㅋ\n" * 3, encoding="utf-8")  # read, then all dropped
    with pytest.raises(build.CorpusError, match="no document survived") as failed:
        stages.corpus(store, [str(tmp_path / "in" / "short.txt")])
    kept = Path(str(failed.value).rsplit("kept in ", 1)[1].rstrip(")"))
    assert kept.is_relative_to(store.root / "failed")
    assert json.loads((kept / "stats.json").read_text())["records_in"] == 3


def test_a_file_changed_during_its_read_is_reported(tmp_path):
    path = tmp_path / "growing.txt"
    path.write_text("처음 쓴 줄입니다 아주 좋아요\n", encoding="utf-8")
    [listed] = inputs.list_inputs([str(path)])
    with path.open("a", encoding="utf-8") as f:  # a crawler still appending after the listing
        f.write("나중에 덧붙인 줄입니다 역시 좋아요\n")
    step = build.ReadAndClean(default_config(), 16, None)
    step.setup()
    out = list(step.process((0, [(listed, "growing.txt")])))  # (index, [(file, source)]), as the GroupByKey hands them
    [(source, record)] = [o.value for o in out if getattr(o, "tag", None) == build.FILES]
    assert source == "growing.txt" and "changed" in record and "bytes" in record["changed"]
    stats = build.make_stats({("records_in",): 2, ("train", "documents"): 2}, default_config(), {source: record})
    with pytest.raises(build.CorpusError, match=r"growing.txt .*changed|changed while the job read"):
        build.check_stats(stats, default_config(), {source: str(path)})


def test_literal_path_wins_over_glob(tmp_path):
    (tmp_path / "x[1].txt").write_text("a\n")
    (tmp_path / "x1.txt").write_text("b\n")
    assert inputs.expand([str(tmp_path / "x[1].txt")]) == [str(tmp_path / "x[1].txt")]
    assert inputs.expand([str(tmp_path / "x[12].txt")]) == [str(tmp_path / "x1.txt")]  # no such file: a glob


def test_a_glob_in_the_working_directory_names_its_files(tmp_path, monkeypatch):
    """`--input '*.jsonl.gz'` (no folder before the glob) matched no file; `./*.jsonl.gz` did."""
    (tmp_path / "sub").mkdir()
    for p in ("a.txt", "b.txt", "sub/c.txt"):
        (tmp_path / p).write_text("x\n")
    monkeypatch.chdir(tmp_path)
    top = [str(tmp_path / "a.txt"), str(tmp_path / "b.txt")]
    assert inputs.expand(["*.txt"]) == inputs.expand(["./*.txt"]) == inputs.expand([str(tmp_path / "*.txt")]) == top
    assert inputs.expand(["a*"]) == top[:1]
    assert inputs.expand(["**/*.txt"]) == inputs.expand([str(tmp_path / "**" / "*.txt")]) == [str(tmp_path / "sub" / "c.txt")]


def _names_read_as(locale_env: dict, name: Path) -> subprocess.CompletedProcess:
    code = ("import sys; from kolectra.corpus import inputs\n"
            "try: print(ascii(inputs.expand([sys.argv[1]])))\n"
            "except inputs.InputError as e: print('refused:', ascii(str(e)))")
    env = {**os.environ, "PYTHONUTF8": "0", "PYTHONCOERCECLOCALE": "0", **locale_env}
    return subprocess.run([sys.executable, "-c", code, os.fsencode(name)], env=env, capture_output=True, text=True,
                          errors="replace", check=True)


def test_a_non_ascii_file_name_is_refused_where_python_reads_names_in_another_encoding(tmp_path):
    """Under ko_KR.EUC-KR a UTF-8 리뷰.jsonl.gz was listed as 由щ럭.jsonl.gz: that spelling went into the
    corpus id and every document's `source`; under LANG=C (UTF-8 mode off) it was called "not valid UTF-8"."""
    name = tmp_path / "리뷰.txt"
    name.write_text("x\n")
    (tmp_path / "plain.txt").write_text("x\n")
    out = _names_read_as({"LC_ALL": "C", "LANG": "C"}, name).stdout
    assert out.startswith("refused:") and "as ascii here" in out and "PYTHONUTF8=1" in out, out
    assert "not valid UTF-8" not in out
    assert "plain.txt" in _names_read_as({"LC_ALL": "C", "LANG": "C"}, tmp_path / "plain.txt").stdout  # ASCII: read
    built = subprocess.run(["localedef", "-i", "ko_KR", "-f", "EUC-KR", str(tmp_path / "ko_KR.euckr")],
                           capture_output=True) if shutil.which("localedef") else None
    if built is None or built.returncode != 0:
        pytest.skip("no localedef with ko_KR and EUC-KR here: the ASCII case above stands for it")
    euckr = {"LOCPATH": str(tmp_path), "LC_ALL": "ko_KR.euckr", "LANG": "ko_KR.euckr"}
    out = _names_read_as(euckr, name).stdout
    assert out.startswith("refused:") and "as euc_kr here" in out, out
    assert "\\ub9ac\\ubdf0.txt" in _names_read_as({**euckr, "PYTHONUTF8": "1"}, name).stdout  # 리뷰, in UTF-8 mode
    other = tmp_path / "다른이름.txt"  # its bytes are no EUC-KR: the argument and the listing disagree, "no file"
    other.write_text("x\n")
    out = _names_read_as(euckr, other).stdout
    assert out.startswith("refused:") and "matches no file; Python reads file names and arguments as euc_kr" in out, out


@pytest.mark.parametrize("name, kind", [("dump.tar.gz", "an archive of several files"),
                                        ("reviews.zip", "an archive of several files"),
                                        ("REVIEWS.TGZ", "an archive of several files"), ("part.jsonl.xz", "compressed as xz")])
def test_an_archive_or_an_unread_compression_is_refused_by_name_before_the_job(tmp_path, name, kind):
    """A tarball was read as text: its headers and every member's lines became documents."""
    (tmp_path / "ok.jsonl.gz").write_bytes(gzip.compress(b'{"text": "a"}\n'))
    (tmp_path / name).write_bytes(b"\x00" * 600)
    with pytest.raises(inputs.InputError, match=f"input '{tmp_path / name}' is {kind}, which the corpus stage "
                                                r"does not read"):
        inputs.expand([str(tmp_path / "*")])
    assert inputs.expand([str(tmp_path / "ok*")]) == [str(tmp_path / "ok.jsonl.gz")]  # .jsonl.gz is one stream


def _all_text(artifact: Path) -> str:
    out = []
    for f in sorted(artifact.rglob("*")):
        if f.is_file():
            data = f.read_bytes()
            out.append((gzip.decompress(data) if f.suffix == ".gz" else data).decode("utf-8"))
    return "\n".join(out)


def test_ctrl_c_is_one_line_without_tracebacks(tmp_path):
    """SIGINT to the whole process group, as a terminal's Ctrl-C sends it: launcher and worker
    processes alike. The command ends with one line and exit status 130, and leaves no worker."""
    src = tmp_path / "many.txt"
    src.write_text("".join(f"{i}번째 리뷰입니다 이 영화 정말 재밌었어요 배우들 연기도 최고 {i}\n" for i in range(60_000)),
                   encoding="utf-8")
    cmd = [sys.executable, "-m", "kolectra.pipeline.cli", "corpus", "--input", str(src), "--out", str(tmp_path / "a"),
           "--direct_num_workers=2"]
    proc = subprocess.Popen(cmd, start_new_session=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    first = proc.stderr.readline().decode()  # the job has started ...
    assert "corpus: 1 input file(s)" in first, first
    deadline = time.monotonic() + 120  # ... its workers up (a fixed 4 s can come before them)
    while len(workers := interruption._proc_children(proc.pid)) < 2 and time.monotonic() < deadline:  # noqa: SLF001
        time.sleep(0.05)
    assert len(workers) == 2 and proc.poll() is None, (workers, proc.poll())
    time.sleep(1)  # ... and analysing
    os.killpg(proc.pid, signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    lines = err.decode().splitlines()
    assert proc.returncode == 130, err.decode()[-3000:]
    assert "Traceback" not in err.decode() and len(lines) == 1, lines
    assert lines[0].startswith("kolectra corpus: interrupted (read ") and "what it built is discarded" in lines[0]
    assert _in_session(proc.pid) == []  # no worker process left behind


def _in_session(sid: int) -> list[int]:
    """Live processes of session ``sid`` (the command started its own), from /proc."""
    found = []
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields[0] != b"Z" and int(fields[3]) == sid:  # state, ppid, pgrp, session
            found.append(int(entry))
    return found
