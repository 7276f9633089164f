"""Store URLs (``s3://``, ``gs://``) given where a command takes a path, swept option by option (moto's S3
server, tests/s3_support.py): a URL too short to be an artifact's ended in Python's recursion limit; a
Hugging Face folder in a bucket as ``--model`` too; ``--config s3://...`` said 'No such file or
directory' of ``s3:/...``; ``--to s3://`` and ``--dest s3://`` advised ``file://BUCKET/PREFIX``; a
``--dest`` that is a file, not a folder, put report.md below the object. And the upload of a local
folder (an export, a report) said what it uploaded was removed when the store no longer answered, and
took an older report's files when a report drawn again over it failed midway."""

from __future__ import annotations

import json

import pytest

from kolectra.core import folder_uploads, storage
from kolectra.core.stage import StageOutput
from kolectra.core.storage import StoreError
from kolectra.pipeline import stages
from kolectra.pipeline.cli import main
from kolectra.pipeline.report import render
from kolectra.pipeline.store.artifacts import ArtifactError
from kolectra.pipeline.store.factory import open_store
from kolectra.pipeline.store.request import Request
from tests.s3_support import answered, bucket, s3_endpoint  # noqa: F401  (fixtures)


def _build(store, kind, name, files, parents=()):
    def produce(out):
        for rel, data in files.items():
            (out / rel).parent.mkdir(parents=True, exist_ok=True)
            (out / rel).write_bytes(data)
        return StageOutput(stats={})
    return store.build(Request(kind=kind, name=name, stage_version=1, config={"n": name}, parents=tuple(parents)),
                       produce)


def _one_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "Traceback" not in err[0] and "internal error" not in err[0], err
    return err[0]


def test_a_store_url_that_holds_no_artifact_is_refused_in_one_line(bucket, tmp_path, capsys):  # noqa: F811
    """``--corpus s3://bucket/x`` (or a root, or ``gs://bucket``) ended in 'internal error: RecursionError': the
    URL's root was taken as its first two parts, ``s3:/``, a local folder whose catalog sent it back."""
    root = str(tmp_path / "root")
    for ref in (f"{bucket}/x", bucket, f"{bucket}/", "gs://some-bucket", f"{bucket}/k"):
        for argv in (["artifacts", "show", ref], ["artifacts", "verify", ref], ["report", ref],
                     ["vocab", "--corpus", ref]):
            assert main([*argv, "--out", root]) == 2, argv
            line = _one_line(capsys)
            assert f"{ref}: not an artifact's URL: an artifact in a store is ROOT/KIND/NAME-ID" in line, line
    # a URL in the form of one where nothing is: not "manifest.json: missing (incomplete artifact)"
    assert main(["artifacts", "show", f"{bucket}/k/corpus/toy-0123456789abcdef", "--out", root]) == 2
    assert f"no artifact at {bucket}/k/corpus/toy-0123456789abcdef: nothing is stored under it" in _one_line(capsys)
    assert main(["artifacts", "show", "s3://kolectra-no-such-bucket-n1/k/corpus/x", "--out", root]) == 2
    assert "the bucket 'kolectra-no-such-bucket-n1' does not exist" in _one_line(capsys)


def test_a_model_in_a_bucket_is_a_checkpoint_artifact_or_refused_in_one_line(bucket, tmp_path, capsys):  # noqa: F811
    """``--model`` takes a checkpoint in a store by its URL, and by its hf/discriminator folder's URL as on a
    disk; a Hugging Face folder in a bucket (read from this machine's disk only) ended in a RecursionError."""
    store = open_store(f"{bucket}/k")
    ckpt = _build(store, "checkpoint", "toy", {"hf/discriminator/config.json": b"{}"})
    local = open_store(tmp_path / "root")
    for ref in (str(ckpt.path), f"{ckpt.path}/hf/discriminator", f"{ckpt.path}/hf/discriminator/"):
        _, parents, inputs = stages.model_source(local, ref)
        assert [p.id for p in parents] == [ckpt.id] and inputs == (), ref
    storage.write_bytes(f"{bucket}/models/hf/config.json", b"{}")
    for ref in (f"{bucket}/models/hf", f"{bucket}/hf", f"{bucket}/k/checkpoint/toy-0123456789abcdef/hf/discriminator"):
        with pytest.raises(ArtifactError, match="no checkpoint artifact there, and a Hugging Face model directory "
                                                "is read from this machine's disk: copy it here first"):
            stages.model_source(local, ref)
    corpus = _build(store, "corpus", "toy", {"stats.json": b"{}"})
    with pytest.raises(ArtifactError, match="is a corpus artifact, expected checkpoint"):  # its own words
        stages.model_source(local, str(corpus.path))


def test_a_config_file_given_as_a_url_says_it_is_read_from_disk(tmp_path, capsys):
    """``--config s3://b/x.toml`` said '--config s3:/b/x.toml: No such file or directory', as if the object
    were missing; ``file://`` read nothing either."""
    for url in ("s3://b/pretrain.toml", "gs://b/pretrain.toml"):
        assert main(["vocab", "--corpus", "x", "--out", str(tmp_path), "--config", url, "--print-config"]) == 2
        line = _one_line(capsys)
        assert f"--config {url}: a URL, and a settings file is read from this machine's disk" in line, line
    (tmp_path / "v.toml").write_text("vocab_size = 900\n", encoding="utf-8")
    assert main(["vocab", "--corpus", "x", "--out", str(tmp_path), "--config", f"file://{tmp_path}/v.toml",
                 "--print-config"]) == 0
    assert '"vocab_size": 900' in capsys.readouterr().out


def test_a_dest_or_to_naming_no_bucket_or_a_file_is_refused_saying_so(bucket, tmp_path, capsys):  # noqa: F811
    """``--dest s3://`` and ``--to s3://`` said "'s3:' names no bucket: give the root as file://BUCKET/PREFIX"
    (the URL's slashes stripped first); a ``--dest`` that is an object put report.md below it, one that is a
    local file said only 'File exists'."""
    root = str(tmp_path / "root")
    store = open_store(root)
    ev = _build(store, "eval", "toy", {"metrics.json": json.dumps({"task": "nsmc", "accuracy": 0.5}).encode()})
    for argv in (["report", ev.id, "--dest", "s3://"], ["export", ev.id, "--to", "s3://"]):
        assert main([*argv, "--out", root]) == 2
        line = _one_line(capsys)
        assert "'s3://' names no bucket" in line and "s3://BUCKET/PREFIX" in line and "file://" not in line, line
    storage.write_bytes(f"{bucket}/taken", b"x")
    (tmp_path / "taken").write_bytes(b"x")
    for dest in (f"{bucket}/taken", str(tmp_path / "taken")):
        assert main(["report", ev.id, "--out", root, "--dest", dest]) == 2
        assert f"--dest {dest}: a file, not a folder" in _one_line(capsys)
    assert sorted(storage.listing(bucket)) == ["taken"]


def test_an_upload_that_fails_names_what_it_could_not_remove(bucket, tmp_path, monkeypatch):  # noqa: F811
    """The store stops answering midway (here at the third file, and for the removals): the note said the
    files uploaded 'were removed, so the same command can run again', and they were all still there, so
    the export's next run was refused ('exists and is not an empty folder')."""
    folder = tmp_path / "export"
    folder.mkdir()
    for name in ("README.md", "config.json", "model.safetensors", "vocab.txt"):
        (folder / name).write_bytes(name.encode())
    real, sent = storage.upload, []

    def upload(src: str, location: str) -> None:
        if len(sent) == 2:
            raise StoreError(f"{location}: cannot reach the store")
        real(src, location)
        sent.append(location.rsplit("/", 1)[-1])

    def remove(location: str, recursive: bool = False) -> None:
        raise StoreError(f"{location}: cannot reach the store")

    monkeypatch.setattr(storage, "upload", upload)
    monkeypatch.setattr(storage, "remove", remove)
    with pytest.raises(StoreError) as e:
        folder_uploads.upload_folder(folder, f"{bucket}/x", last="config.json")
    notes = " ".join(e.value.__notes__)
    assert "were removed" not in notes, notes
    assert "could not be removed" in notes and "README.md, model.safetensors, vocab.txt may be there still" in notes
    assert sent == ["README.md", "model.safetensors"]  # config.json, which makes it a model folder, goes last
    assert sorted(storage.listing(f"{bucket}/x")) == sent


def test_a_report_drawn_again_over_an_older_one_keeps_it_when_the_upload_fails(bucket, tmp_path,  # noqa: F811
                                                                               monkeypatch):
    """A report is drawn again over the one there (kolectra report REF, again): an upload failing midway
    removed the files it had sent, which had replaced the older report's, report.md first (sorted before
    a name in s..z), so the older report was left without its report.md. Now report.md goes last and only
    files the upload added are removed: the older report is whole."""
    store = open_store(f"{bucket}/k")
    log = "".join(json.dumps({"step": s, "loss": 20.0 - s}) + "\n" for s in (1, 2, 3))
    ckpt = _build(store, "checkpoint", "toy", {"metrics.jsonl": log.encode()})
    where = f"{bucket}/k/reports/checkpoint-{ckpt.path.name}"
    render(store, ckpt.id)
    older = {k: storage.read_bytes(f"{where}/{k}") for k in storage.listing(where)}
    assert "report.md" in older and len(older) == 2
    real = storage.upload

    def upload(src: str, location: str) -> None:
        if location.endswith("report.md"):
            raise KeyboardInterrupt
        real(src, location)

    monkeypatch.setattr(storage, "upload", upload)
    with pytest.raises(KeyboardInterrupt):
        render(store, ckpt.id)
    assert sorted(storage.listing(where)) == sorted(older)  # report.md and its PNG, still there


def test_a_store_url_with_one_slash_is_not_made_a_local_folder(tmp_path, capsys, monkeypatch):
    """``--to s3:/bucket/x`` (one slash: a typo, or a tool that folded ``//``) wrote the export to ./s3:/bucket/x
    and printed that, exit 0, as ``type=Path`` did of ``s3://``; ``--dest``, ``--out`` and ``KOLECTRA_HOME`` made
    the same local folder. Now each is refused in one line naming the URL meant; ``./s3:/x`` is a local folder."""
    monkeypatch.chdir(tmp_path)
    root = str(tmp_path / "root")
    ev = _build(open_store(root), "eval", "toy", {"metrics.json": json.dumps({"task": "nsmc", "accuracy": 0.5}).encode()})
    for argv, flag in ((["report", ev.id, "--out", root, "--dest", "s3:/b/r"], "--dest s3:/b/r"),
                       (["export", ev.id, "--out", root, "--to", "gs:/b/m"], "--to gs:/b/m"),
                       (["artifacts", "list", "--out", "S3:/b/k"], "--out S3:/b/k"),
                       (["vocab", "--corpus", "x", "--out", "file:/b/k"], "--out file:/b/k")):
        assert main(argv) == 2, argv
        line = _one_line(capsys)
        scheme, rest = flag.split(" ")[1].split(":/", 1)
        meant = f"file:///{rest}" if scheme == "file" else f"{scheme}://{rest}"  # file://b/k would be ./b/k
        assert f"{flag}: a local folder named '{scheme}:' here, not a store: did you mean {meant}?" in line
    monkeypatch.setenv("KOLECTRA_HOME", "s3:/b/k")
    assert main(["artifacts", "list"]) == 2
    assert "KOLECTRA_HOME=s3:/b/k: a local folder named 's3:' here" in _one_line(capsys)
    monkeypatch.delenv("KOLECTRA_HOME")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["root"]  # no ./s3: or ./gs: folder
    assert main(["report", ev.id, "--out", root, "--dest", "./s3:/b/r"]) == 0  # a local folder, said so
    assert (tmp_path / "s3:" / "b" / "r" / "report.md").is_file()


def test_an_export_killed_midway_is_named_as_such_when_the_same_command_is_refused(bucket, tmp_path,  # noqa: F811
                                                                                    capsys):
    """A process killed during the upload (SIGKILL, an OOM kill: no clean-up runs) leaves some files and, since
    config.json goes last, no config.json; the same command was refused only as 'exists and is not an empty
    folder', as over a finished export. Now the line says what it holds and to remove it."""
    store = open_store(tmp_path / "root")
    ev = _build(store, "eval", "toy", {"metrics.json": b"{}"})
    for name in ("README.md", "model.safetensors"):
        storage.write_bytes(f"{bucket}/models/m/{name}", b"x")
    storage.write_bytes(f"{bucket}/models/done/config.json", b"{}")
    assert main(["export", ev.id, "--to", f"{bucket}/models/m", "--out", str(store.root)]) == 2
    line = _one_line(capsys)
    assert ("exists and is not an empty folder (the export never overwrites); it holds 2 file(s) and no config.json, "
            "as an export killed midway leaves: remove them, or choose another --to") in line, line
    assert main(["export", ev.id, "--to", f"{bucket}/models/done", "--out", str(store.root)]) == 2
    assert _one_line(capsys).endswith("exists and is not an empty folder (the export never overwrites)")


def test_an_input_in_a_bucket_that_does_not_exist_says_so(bucket, tmp_path, capsys):  # noqa: F811
    """``kolectra corpus --input s3://misspelt-bucket/raw.jsonl`` said only 'matches no file', sending the user to
    the key; a glob there named the bucket already (the listing's error)."""
    missing = "s3://kolectra-no-such-bucket-n1/raw.jsonl"
    assert main(["corpus", "--input", missing, "--out", str(tmp_path / "root")]) == 2
    line = _one_line(capsys)
    assert f"input '{missing}' matches no file: {missing}: the bucket 'kolectra-no-such-bucket-n1' does not exist" in line
    assert main(["corpus", "--input", f"{bucket}/raw.jsonl", "--out", str(tmp_path / "root")]) == 2
    assert _one_line(capsys).endswith(f"input '{bucket}/raw.jsonl' matches no file")


def test_a_study_on_a_disk_root_reads_a_corpus_kept_in_a_store(bucket, tmp_path, capsys):  # noqa: F811
    """``kolectra study --out DIR --corpus s3://.../corpus/NAME-ID`` (or ``--examples`` whose corpus is in a
    bucket) ended in 'internal error: TypeError: expected str, bytes or os.PathLike object, not S3Path': the
    held-out rows' overlap read the corpus's shards at its store path. Now from the store's checked local copy,
    as the stages read a parent kept in a store (here up to the refusal of a budget below one step)."""
    from kolectra.pipeline.run import SAMPLE

    store = open_store(f"{bucket}/k")
    doc = json.dumps({"id": "9999999", "text": "최고의 영화"}, ensure_ascii=False) + "\n"
    corpus = _build(store, "corpus", "toy", {"data/train-00000-of-00001.jsonl": doc.encode(), "stats.json": b"{}"})
    index = json.dumps({"max_seq_length": 128, "vocab_size": 8000}).encode()
    examples = _build(store, "examples", "toy", {"index.json": index}, [corpus])
    assert main(["study", "--out", str(tmp_path / "root"), "--examples", str(examples.path), "--nsmc-train",
                 str(SAMPLE / "nsmc_train.txt"), "--flops", "1e10", "--points", "1", "--arms", "electra",
                 "--readouts", "probe", "--dev-rows", "300", "--probe-rows", "500", "--pretrain-seeds", "1", "--finetune-seeds", "1"]) == 2
    line = _one_line(capsys)
    assert "a step of electra takes" in line and "more than twice the smallest budget" in line, line


def test_the_vocab_table_reads_a_vocab_kept_in_a_store_and_refuses_a_wrong_path_in_one_line(bucket, tmp_path,  # noqa: F811
                                                                                              capsys):
    """``python -m kolectra.vocab.table DIR`` (docs/vocab.md) on a vocab artifact kept in a bucket ended in a
    traceback, 'FileNotFoundError: ... 's3:/bucket/...'' (the URL read as a local path), as did a path that is
    not there or not a report ('JSONDecodeError'). Now the bucket's report.json is read, and the rest is one
    line, exit 2."""
    from kolectra.vocab.table import main as table

    report = {"recipes": {"wordpiece": {"learning": {"vocab_size": 900}, "unk_rate": 0.01}}, "chosen": "wordpiece",
              "split": "valid", "documents": 3, "eojeols": 9}
    storage.write_bytes(f"{bucket}/k/vocab/toy-0123456789abcdef/report.json", json.dumps(report).encode())
    assert table([f"{bucket}/k/vocab/toy-0123456789abcdef/"]) == 0
    assert "vocab size" in capsys.readouterr().out
    (tmp_path / "not.json").write_text("vocab", encoding="utf-8")
    for where, why in ((f"{bucket}/k/vocab/none", "not found"), (str(tmp_path / "none"), "not found"),
                       (str(tmp_path / "not.json"), "Expecting value")):
        assert table([where]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith(f"kolectra.vocab.table: error: {where}: {why}"), err


def test_a_dest_inside_an_artifact_or_the_root_is_refused_before_anything_is_drawn(bucket, tmp_path,  # noqa: F811
                                                                                    capsys):
    """``--dest`` inside an artifact (the one reported, or any root's, local or in a bucket) put report.md and its
    PNGs into the published artifact, which ``artifacts verify`` then found changed ('not in manifest (added after
    publishing)'); inside the root elsewhere than ROOT/reports, among its kinds and cache. Both now one line;
    ROOT/reports/... (the default's folder) and a place outside the root are as before."""
    elsewhere = _build(open_store(f"{bucket}/other"), "corpus", "toy", {"stats.json": b"{}"})
    for root in (str(tmp_path / "root"), f"{bucket}/k"):
        store = open_store(root)
        ev = _build(store, "eval", "toy", {"metrics.json": json.dumps({"task": "nsmc", "accuracy": 0.5}).encode()})
        capsys.readouterr()
        for dest, inside in ((f"{ev.path}", ev.path), (f"{ev.path}/mine", ev.path), (f"{root}/eval", root),
                             (root, root), (f"{elsewhere.path}/", elsewhere.path)):
            assert main(["report", ev.id, "--out", root, "--dest", dest]) == 2, dest
            line = _one_line(capsys)
            assert f"--dest {dest}: inside {inside}, which kolectra manages" in line, line
        assert store.verify(ev) == [] and open_store(f"{bucket}/other").verify(elsewhere) == []
        assert main(["report", ev.id, "--out", root, "--dest", f"{root}/reports/mine"]) == 0
        assert main(["report", ev.id, "--out", root, "--dest", str(tmp_path / "mine")]) == 0
        capsys.readouterr()
    # another program's manifest.json (a web app's) makes no artifact: a report may go below it
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "manifest.json").write_text('{"name": "my app", "start_url": "."}', encoding="utf-8")
    storage.write_bytes(f"{bucket}/site/manifest.json", b'{"name": "my app"}')
    for dest in (str(tmp_path / "site" / "reports"), f"{bucket}/site/reports"):
        assert main(["report", ev.id, "--out", root, "--dest", dest]) == 0, capsys.readouterr().err


def test_an_export_into_another_root_s_artifact_is_refused(bucket, tmp_path, capsys):  # noqa: F811
    """``--to`` inside an artifact of a root other than the command's (a disk root's, or one in a bucket) was
    written: the export's files went into the published artifact, which verify then failed ('not in manifest
    (added after publishing)'; 7 problems). The command's own root and the exported artifact were refused
    already. Now any artifact around --to is, in one line."""
    store = open_store(tmp_path / "root")
    config = json.dumps({"architectures": ["ElectraForPreTraining"], "model_type": "electra"}).encode()
    ev = _build(store, "checkpoint", "toy", {"hf/discriminator/config.json": config,
                                             "hf/discriminator/README.md": b"---\n---\n"})
    other_disk = _build(open_store(tmp_path / "other"), "corpus", "toy", {"stats.json": b"{}"})
    other_bucket = _build(open_store(f"{bucket}/other"), "corpus", "toy", {"stats.json": b"{}"})
    capsys.readouterr()
    for inside in (other_disk.path, other_bucket.path):
        assert main(["export", ev.id, "--to", f"{inside}/model", "--out", str(store.root)]) == 2
        assert f"--to {inside}/model: inside {inside}, which kolectra manages" in _one_line(capsys)
    assert open_store(tmp_path / "other").verify(other_disk) == []
    assert open_store(f"{bucket}/other").verify(other_bucket) == []


def test_an_export_to_a_store_checks_its_bucket_before_asking_for_manifests(s3_endpoint, tmp_path,  # noqa: F811
                                                                            capsys):
    """``export --to s3://b/a/b/c/m`` asked for a manifest at each level of --to (3c6e5ab's artifact around it)
    before checking the bucket: with the store not answering (AWS_ENDPOINT_URL at a closed port) each level waited
    out its retries, 59 s for that --to before the one line the bucket check gave in 12 s. Now the bucket first:
    here a missing bucket is refused with no object asked for."""
    to = "s3://kolectra-no-such-bucket-n12/a/b/c/m"
    with answered(s3_endpoint) as requests:
        assert main(["export", "sample", "--to", to, "--out", str(tmp_path / "root")]) == 2
    assert "the bucket 'kolectra-no-such-bucket-n12' does not exist" in _one_line(capsys)
    assert [r for r in requests if r.operation == "HeadObject"] == [], requests
