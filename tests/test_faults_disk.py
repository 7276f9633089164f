"""A full disk (here: a file-size limit) while a stage writes: the one line names the file, for the
writers whose libraries say only "File too large" (tokenizers, Beam's report of a worker's
failure, a bare ``write()``)."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from kolectra.pipeline.cli.errors import describe
from kolectra.vocab.export import written

REPO = Path(__file__).resolve().parents[1]


def test_a_write_that_fails_is_an_os_error_naming_the_file(tmp_path):
    def tokenizers_save(path):  # how tokenizers' Tokenizer.save words it
        raise Exception("File too large (os error 27)")

    def plain_write(path):  # how a write() that fills the disk words it: no file name
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    for write, code in ((tokenizers_save, errno.EFBIG), (plain_write, errno.ENOSPC)):
        with pytest.raises(OSError) as failed:
            written(tmp_path / "tokenizer.json", write)
        assert failed.value.errno == code and failed.value.filename == str(tmp_path / "tokenizer.json")
        assert describe(failed.value).startswith(f"{tmp_path / 'tokenizer.json'}: ")
    with pytest.raises(ValueError):  # anything else passes unchanged
        written(tmp_path / "x", lambda p: (_ for _ in ()).throw(ValueError("not a write failure")))


def test_the_beam_jobs_writers_name_the_file_over_the_size_limit(tmp_path):
    code = textwrap.dedent(f"""
        import resource
        resource.setrlimit(resource.RLIMIT_FSIZE, (1000, 1000))
        from kolectra.corpus import examples_beam, outputs
        for write in (lambda: outputs._write({str(tmp_path)!r}, "data/shard.jsonl.gz", b"x" * 5000),
                      lambda: examples_beam._write_bytes({str(tmp_path)!r}, "rows.arrow", b"x" * 5000)):
            try:
                write()
            except OSError as e:
                print(e.errno, e.filename)
    """)
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)},
                          capture_output=True, text=True, timeout=120)
    assert proc.stdout.split("\n")[:2] == [f"{errno.EFBIG} {tmp_path / 'data' / 'shard.jsonl.gz'}",
                                           f"{errno.EFBIG} {tmp_path / 'rows.arrow'}"], proc.stderr[-2000:]


def test_a_checkpoint_the_disk_cannot_hold_leaves_the_previous_one_and_says_what_it_took(tmp_path):
    """A full disk at the second save (torch's writer failing with ENOSPC): the one line names the
    file, the space free and what the last checkpoint took; that one stays intact and is resumed."""
    import torch

    from kolectra.model import checkpoint

    def save(step, save_fn=torch.save):
        return checkpoint.save(tmp_path, step, {"w": torch.ones(1000)}, {"state": {}}, {"config": {}},
                               {"rng": torch.zeros(4)}, save_fn=save_fn, keep=1)

    def full(obj, path):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    first = save(4)
    with pytest.raises(checkpoint.CheckpointWriteError) as failed:
        save(8, save_fn=full)
    line = describe(failed.value)
    assert line.startswith(f"{tmp_path / 'checkpoints' / '.tmp-step-00000008' / 'rank-0.pt'}: no space left on the device; "
                           "checkpoint not written: "), line
    assert " MB free on that disk; the last checkpoint (step-00000004) took 0." in line  # before: no figures
    assert checkpoint.latest(tmp_path) == first and checkpoint.problems(first) == []
    assert [p.name for p in (tmp_path / "checkpoints").iterdir()] == ["step-00000004"]


def test_a_checkpoint_over_the_disk_quota_says_the_quota_not_the_disk_s_free_space(tmp_path):
    """EDQUOT (a shared machine's quota; safetensors says 'Disk quota exceeded (os error 122)') was followed
    by '12,345.6 MB free on that disk': room, read beside 'the disk quota is exceeded', where the
    user's quota is what is used up."""
    import torch

    from kolectra.model import checkpoint

    def over_quota(obj, path):
        raise OSError(errno.EDQUOT, os.strerror(errno.EDQUOT))

    checkpoint.save(tmp_path, 4, {"w": torch.ones(1000)}, {"state": {}}, {"config": {}}, {"rng": torch.zeros(4)})
    with pytest.raises(checkpoint.CheckpointWriteError) as failed:
        checkpoint.save(tmp_path, 8, {"w": torch.ones(1000)}, {"state": {}}, {"config": {}}, {"rng": torch.zeros(4)},
                        save_fn=over_quota)
    line = describe(failed.value)
    assert line == (f"{tmp_path / 'checkpoints' / '.tmp-step-00000008' / 'rank-0.pt'}: the disk quota is exceeded; "
                    "checkpoint not written: your quota on that disk is used up (quota -s shows it); the last "
                    "checkpoint (step-00000004) took 0.0 MB"), line
