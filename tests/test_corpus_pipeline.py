"""End-to-end corpus stage on a tiny in-test corpus with the real Beam FnApiRunner and real Kiwi:
reconciliation, rejects with line numbers, exact and near dedup across files, surface spans,
determinism, and no network access."""

import dataclasses
import gzip
import hashlib
import json
import os
import socket
import subprocess
import sys
import unicodedata
from pathlib import Path

import pytest
from apache_beam.options.pipeline_options import DirectOptions, StandardOptions

from kolectra.core.errors import UserInputError
from kolectra.corpus import build, outputs, runners, segment, shards
from kolectra.corpus.config import default_config

REVIEWS = [
    "이 영화 정말 재밌었어요. 배우들 연기도 최고!",
    "스토리가 너무 뻔해서 지루했다ㅠㅠ 다시는 안 봄",
    "ㅋㅋㅋ 웃겨서 배꼽 빠지는 줄 알았네요",
    "음악이 좋았고 영상미가 뛰어났습니다. 추천합니다.",
    "기대 이하였어요... 시간이 아깝네",
    "감독의 전작보다 훨씬 나아졌다 강추",
    "주인공이 왜 그랬는지 이해가 안 된다 했는데 결말 보고 납득함",
    "가족이랑 같이 보기 좋은 따뜻한 영화",
    "중간에 졸았음 ㅠ 그래도 마지막은 괜찮았다",
    "２시간이　순삭！ 최고의 액션 영화",  # full-width, folds to ASCII
]


def _write_corpus(root: Path) -> dict:
    """Two inputs; returns the numbers the stats must show."""
    root.mkdir()
    jsonl = [json.dumps({"id": f"r{i}", "text": t}, ensure_ascii=False).encode("utf-8") for i, t in enumerate(REVIEWS)]
    jsonl += [
        b"[1, 2]",  # line 11: not_an_object
        b'{"id": "x"}',  # line 12: missing_text
        json.dumps({"id": "nfd", "text": unicodedata.normalize("NFD", REVIEWS[0])}, ensure_ascii=False).encode(),  # dup of line 1 after NFC
        b'{"text": "\xff\xfe broken"}',  # line 14: invalid_utf8
    ]
    (root / "reviews.jsonl.gz").write_bytes(gzip.compress(b"\n".join(jsonl) + b"\n", mtime=0))
    text_lines = [
        "ㅋㅋ",  # too_short
        "",  # empty
        REVIEWS[2],  # duplicate of reviews.jsonl.gz:3
        "\ufeff완전 강추합니다 꼭 보세요\u200b",  # kept, cleaned
        "완전  강추합니다 꼭 보세요",  # duplicate after whitespace collapse
        "배우 " * 30,  # too_long (max_chars=80)
        REVIEWS[6] + " ㅎㅎ",  # near duplicate of reviews.jsonl.gz:7 (Jaccard 0.91); wins on position
        "<b>예고편</b> https://example.com/v?id=1 보고 왔어요 ㅋㅋㅋㅋㅋㅋ",  # web rules on
    ]
    (root / "notes.txt").write_text("\n".join(text_lines) + "\n", encoding="utf-8")
    return {"root": root, "records_in": 14 + 8, "rejected": 3, "duplicate": 3, "near_duplicate": 1, "too_short": 1, "empty": 1, "too_long": 1}


def _no_network(monkeypatch) -> list:
    """Connections and name lookups beyond loopback fail and are recorded. Recorded, because Beam's
    DirectRunner swallows the error of its Prism attempt and falls back silently."""
    attempts: list = []
    real_connect, real_getaddrinfo = socket.socket.connect, socket.getaddrinfo

    def local_only(host):
        if str(host) not in ("localhost", "127.0.0.1", "::1", "", "0.0.0.0"):
            attempts.append(host)
            raise OSError(f"network access attempted: {host!r}")

    def connect(self, address):
        if isinstance(address, tuple):
            local_only(address[0])
        return real_connect(self, address)

    def getaddrinfo(host, *a, **kw):
        local_only(host)
        return real_getaddrinfo(host, *a, **kw)

    monkeypatch.setattr(socket.socket, "connect", connect)
    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    return attempts


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    mp = pytest.MonkeyPatch()
    attempts = _no_network(mp)
    root = tmp_path_factory.mktemp("corpus")
    expected = _write_corpus(root / "in")
    cfg = dataclasses.replace(
        default_config(), max_chars=80, valid_fraction=0.3, num_shards=2, max_reject_ratio=0.5, near_dup_threshold=0.7,
        strip_html=True, mask_pii=True, max_repeat=3
    )
    outs = []
    # the first run is one in-process worker whose Kiwi analyses on a pool of 3 threads, the second
    # two worker processes (each loads its own Kiwi, one thread): output must not depend on
    # bundling, on the number of workers or on Kiwi's threads. The second also writes through a
    # staging directory, as a remote runner does (--corpus_staging), which must give the same artifact.
    staging = root / "staging"
    staging.mkdir()
    for i, beam_args in enumerate([["--analysis_threads=3"],
                                   ["--direct_num_workers=2", "--corpus_staging", str(staging)]]):
        out = root / f"out{i}"
        out.mkdir()
        result = build.build(cfg, [str(root / "in" / "*")], out, beam_args)
        outs.append((out, result))
    mp.undo()
    assert attempts == [], f"the corpus stage tried to reach the network: {attempts}"
    assert list(staging.iterdir()) == []  # the staged copy is deleted after fetching
    return expected, outs


def test_stats_reconcile_and_count_every_reason(runs):
    expected, [(out, result), *_] = runs
    stats = result.stats
    assert stats == json.loads((out / "stats.json").read_text(encoding="utf-8"))
    assert stats["records_in"] == expected["records_in"]
    assert stats["records_in"] == stats["records_out"] + stats["rejected"] + sum(stats["dropped"].values())
    assert stats["rejected"] == expected["rejected"]
    for reason in ("duplicate", "near_duplicate", "too_short", "empty", "too_long"):
        assert stats["dropped"][reason] == expected[reason], reason
    assert stats["records_out"] == 12
    near = stats["near_dup"]  # what the near-dup stages did: one pair of near copies, nothing loose
    assert set(near) == set(outputs.NEAR_DUP_COUNTS)
    assert near["verified_pairs"] == 1 <= near["candidate_pairs"]
    assert near["star_only_buckets"] == near["star_only_documents"] == near["unconverged_nodes"] == 0
    assert stats["splits"]["train"]["documents"] + stats["splits"]["valid"]["documents"] == 12
    assert stats["splits"]["valid"]["documents"] > 0 and stats["splits"]["train"]["documents"] > 0
    reviews = expected["root"] / "reviews.jsonl.gz"
    assert stats["sources"]["reviews.jsonl.gz"] == {  # with the size and hash of the bytes read
        "records_in": 14, "rejected": 3, "bytes": reviews.stat().st_size,
        "sha256": hashlib.sha256(reviews.read_bytes()).hexdigest()}


def test_rejects_name_source_and_line(runs):
    _, [(out, _), *_] = runs
    rows = [json.loads(l) for l in (out / "rejects" / "rejects.jsonl").read_text(encoding="utf-8").splitlines()]
    assert [(r["source"], r["line"], r["reason"]) for r in rows] == [
        ("reviews.jsonl.gz", 11, "not_an_object"),
        ("reviews.jsonl.gz", 12, "missing_text"),
        ("reviews.jsonl.gz", 14, "invalid_utf8"),
    ]


def test_documents_are_clean_unique_and_spans_are_surface(runs):
    _, [(out, result), *_] = runs
    docs = list(shards.iter_documents(out, "train")) + list(shards.iter_documents(out, "valid"))
    assert len(docs) == result.stats["records_out"]
    texts = [d["text"] for d in docs]
    assert len(set(texts)) == len(texts)
    by_text = {d["text"]: d for d in docs}
    assert by_text[REVIEWS[0]]["id"] == "r0"  # NFD copy (line 13) lost to line 1
    assert by_text[REVIEWS[2]]["id"] == "notes.txt:3"  # ("notes.txt", 3) < ("reviews.jsonl.gz", 3)
    assert by_text["완전 강추합니다 꼭 보세요"]["id"] == "notes.txt:4"  # BOM/ZWSP stripped; line 4 beats 5
    assert "2시간이 순삭! 최고의 액션 영화" in by_text
    assert "예고편 <url> 보고 왔어요 ㅋㅋㅋ" in by_text  # the config's web rules reach the pipeline
    assert REVIEWS[6] + " ㅎㅎ" in by_text and REVIEWS[6] not in by_text  # near duplicate: first position kept
    for d in docs:
        text = d["text"]
        assert text == unicodedata.normalize("NFC", text)
        covered = {i for s, e in d["sentences"] for i in range(s, e)}
        assert all(i in covered for i, c in enumerate(text) if not c.isspace())
        assert d["morphs"] and all(0 <= s < e <= len(text) for s, e, _ in d["morphs"])
        assert "".join(text[s:e] for s, e, _ in d["morphs"]) == "".join(text.split())
        assert sum(map(len, shards.sentence_morphs(d))) == len(d["morphs"])
    assert result.stats["morphs"] == sum(len(d["morphs"]) for d in docs)
    assert result.stats["sentences"] == sum(len(d["sentences"]) for d in docs)


def test_runs_give_identical_bytes_whatever_the_workers_or_staging(runs):
    _, [(a, _), *others] = runs
    for b, _ in others:
        _same_files(a, b)


def _same_files(a, b):
    files_a = sorted(p.relative_to(a) for p in a.rglob("*") if p.is_file())
    files_b = sorted(p.relative_to(b) for p in b.rglob("*") if p.is_file())
    assert files_a == files_b
    assert len([f for f in files_a if f.parts[0] == "data"]) == 2 * 2  # empty shards written too
    for f in files_a:
        assert (a / f).read_bytes() == (b / f).read_bytes(), f


def test_samples_show_kept_and_dropped_documents_per_reason(runs):
    _, [(out, result), *_] = runs
    kept = [json.loads(l) for l in (out / "samples" / "kept.jsonl").read_text(encoding="utf-8").splitlines()]
    dropped = [json.loads(l) for l in (out / "samples" / "dropped.jsonl").read_text(encoding="utf-8").splitlines()]
    assert len(kept) == min(build.SAMPLES_KEPT, result.stats["records_out"])
    assert all(r["reason"] == "kept" and r["split"] in shards.SPLITS for r in kept)
    reasons = {r["reason"] for r in dropped}
    assert reasons == {k for k, n in result.stats["dropped"].items() if n}  # every reason that fired
    by_reason = {r["reason"]: r for r in dropped}
    assert by_reason["near_duplicate"]["kept"] == ["notes.txt", 7]  # and which copy survived
    assert by_reason["duplicate"]["kept"][0] in ("notes.txt", "reviews.jsonl.gz")
    assert by_reason["too_long"]["text"].startswith("배우 배우")


def test_stage_version_and_local_worker_defaults():
    assert isinstance(build.STAGE_VERSION, int) and build.STAGE_VERSION >= 2
    assert build.local_workers(1000, cpus=8) == 1  # tiny input: no worker processes to start
    assert build.local_workers(1 << 30, cpus=4) == 2  # a process per 2 CPUs, Kiwi on 2 threads each
    assert build.local_workers(1 << 30, cpus=2) == 1  # 2 CPUs: one in-process worker, Kiwi on both
    assert build.local_workers(1 << 30, cpus=64) == 8
    direct = lambda args, size: build.pipeline_options(args, size).view_as(DirectOptions)  # noqa: E731
    assert build.pipeline_options([], 1 << 30).view_as(DirectOptions).direct_num_workers == build.local_workers(1 << 30)
    assert direct(["--direct_num_workers=1"], 1 << 30).direct_num_workers == 1  # explicit wins
    assert direct(["--direct_num_workers", "3"], 0).direct_num_workers == 3
    assert direct(["--direct_num_workers", "3"], 0).direct_running_mode == "multi_processing"
    assert direct(["--direct_num_workers=2", "--direct_running_mode=multi_threading"], 0).direct_running_mode == "multi_threading"


def test_options_keep_one_view_per_class_with_the_same_values():
    """The stage's options reuse their views (Beam would parse the flags again for every view): a kept
    view reads and writes the values every view shares, and pickling leaves the kept views behind."""
    import pickle

    from apache_beam.options.pipeline_options import PipelineOptions, TypeOptions

    args = ["--direct_num_workers=3", "--analysis_threads=2", "--runner=PortableRunner", "--job_endpoint=x:1"]
    opts = runners.pipeline_options(args)
    assert isinstance(opts, runners.ReusedViews)
    assert opts.view_as(DirectOptions) is opts.view_as(DirectOptions)  # made once
    opts.view_as(TypeOptions).pipeline_type_check = False  # through a kept view ...
    fresh = PipelineOptions.view_as(opts, TypeOptions)  # ... seen by one Beam would make
    assert fresh.pipeline_type_check is False and opts.view_as(TypeOptions).pipeline_type_check is False
    fresh.runtime_type_check = True  # and the other way round
    assert opts.view_as(TypeOptions).runtime_type_check is True
    plain = PipelineOptions(args)
    for cls in (StandardOptions, DirectOptions, runners.CorpusOptions):
        plain.view_as(cls)
    assert opts.view_as(runners.CorpusOptions).analysis_threads == 2
    got, want = opts.get_all_options(), plain.get_all_options()
    assert {k: v for k, v in got.items() if "type_check" not in k} == {k: v for k, v in want.items() if "type_check" not in k}
    back = pickle.loads(pickle.dumps(opts))
    assert "_views" not in back.__dict__ and back.view_as(DirectOptions).direct_num_workers == 3
    assert back.view_as(TypeOptions).runtime_type_check is True


def test_kiwi_threads_share_the_cpus_among_local_workers():
    threads = lambda args, size=0, cpus=8: runners.analysis_threads(runners.pipeline_options(args, size), cpus)  # noqa: E731
    assert threads([]) == 8  # one in-process worker: Kiwi on every CPU
    assert threads(["--direct_num_workers=2"]) == 4
    assert threads(["--direct_num_workers=3"]) == 2
    assert threads(["--direct_num_workers=16"]) == 1
    assert threads(["--direct_num_workers=2", "--analysis_threads=3"]) == 3  # explicit wins
    assert threads(["--runner=PortableRunner"]) == 1  # a remote runner's workers take a core each
    with pytest.raises(UserInputError, match="--analysis_threads 0"):
        threads(["--analysis_threads=0"])


def test_reject_ratio_gate_names_the_worst_file():
    stats = build.make_stats(
        {
            ("records_in",): 110,
            ("rejected", "invalid_json"): 8,
            ("rejected", "invalid_utf8"): 1,
            ("dropped", "too_short"): 1,
            ("train", "documents"): 100,
        },
        default_config(),
        {"good.txt": {"records_in": 100, "rejected": 1}, "bad.jsonl": {"records_in": 10, "rejected": 8}},
    )
    with pytest.raises(build.CorpusError, match=r"worst file: /data/bad.jsonl .*invalid_json"):
        build.check_stats(stats, default_config(), {"bad.jsonl": "/data/bad.jsonl", "good.txt": "/data/good.txt"})
    build.check_stats(stats, dataclasses.replace(default_config(), max_reject_ratio=0.1), {})
    stats["records_in"] += 1  # an unaccounted record
    with pytest.raises(build.CorpusError, match="reconcile"):
        build.check_stats(stats, default_config(), {})


def test_remote_runner_needs_a_staging_directory(tmp_path):
    (tmp_path / "in.txt").write_text("좋은 영화였어요 정말로\n", encoding="utf-8")
    with pytest.raises(build.CorpusError, match="--corpus_staging"):
        build.build(default_config(), [str(tmp_path / "in.txt")], tmp_path, ["--runner=DataflowRunner"])


def test_local_runner_never_tries_prism():
    runner = lambda args: build.pipeline_options(args).view_as(StandardOptions).runner  # noqa: E731
    assert runner([]) == build.LOCAL_RUNNER  # Beam's FnApiRunner with quiet worker processes
    assert runner(["--runner=DirectRunner"]) == build.LOCAL_RUNNER
    assert runner(["--runner", "PrismRunner"]) == "PrismRunner"  # an explicit choice is kept


def test_the_job_records_the_code_path_its_kiwi_ran_on(runs):
    """stats.json names the hash of Kiwi's analysis of fixed sentences, one whatever the workers (the
    runs above at 1 and 2 workers have the same bytes); two differing hashes stop the job (below)."""
    _, [(a, result), *_] = runs
    assert result.stats["kiwi_probe"] == [segment.probe_hash(segment.load_kiwi(1))]
    assert json.loads((a / "stats.json").read_text(encoding="utf-8"))["kiwi_probe"] == result.stats["kiwi_probe"]


def test_workers_whose_kiwi_analysed_differently_stop_the_job():
    from kolectra.corpus.job_checks import check_stats
    from kolectra.corpus.outputs import CorpusError

    stats = {"records_in": 1, "records_out": 1, "rejected": 0, "dropped": {}, "sources": {},
             "kiwi_probe": ["245c972bc11f4c2f", "fd866e8fc4a91cde"]}
    with pytest.raises(CorpusError, match="analysed Korean differently.*KIWI_ARCH_TYPE"):
        check_stats(stats, default_config(), {})
    check_stats({**stats, "kiwi_probe": ["fd866e8fc4a91cde"]}, default_config(), {})


def test_the_probe_tells_kiwis_code_paths_apart():
    """KIWI_ARCH_TYPE=none (Kiwi without SIMD) changes 43 % of NSMC reviews' morphs: the probe sees it."""
    code = "from kolectra.corpus import segment; print(segment.probe_hash(segment.load_kiwi(1)))"
    hashes = {arch: subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                                   env={**os.environ, "KIWI_ARCH_TYPE": arch}).stdout.strip()
              for arch in ("none", "sse2")}
    assert hashes["none"] != hashes["sse2"] == segment.probe_hash(segment.load_kiwi(1))
