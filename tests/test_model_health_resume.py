"""A resumed run ends with the training-health verdict of the straight run of the same steps (model/train.py's
``saved_standing``, model/health_standing.py's ``final``): ``kolectra pretrain`` runs of the tiny preset on the small
templated examples, stopped inside a step (Ctrl-C: the CLI keeps the working state) after a checkpoint, then
``--resume``.

- electra15 with a batch of 2 warns at step 27, and its windows after the checkpoint at step 30 score replaced
  tokens only (no AUC): nothing judged, so the warning stands at the end. The warning lived in the process that
  printed it: the resumed process ended ``ok``. The checkpoint now saves it; one written before has none, and
  still resumes (nothing stands).
- mlm_then_rtd resumed inside the warm-up of its RTD phase waits the same warm-up as the straight run."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
import torch

from kolectra.core import filehash
from kolectra.model import checkpoint, health
from kolectra.pipeline.cli import main
from kolectra.pipeline.store.artifacts import Store
from tests.model_support import judged_on_any_token, small_chain, stop_in_step  # noqa: F401 - autouse fixture

WARNED = re.compile(r"WARNING: this run has not learned what it should \(step (\d+)\)")
WITHDRAWN = re.compile(r"learning now \(step (\d+)\)")
ELECTRA15 = ("electra15", "train.steps=39", "train.batch_size=2", "train.warmup_steps=4", "train.log_every=3",
             "train.save_every=30")
TIMINGS = ("tokens_per_s", "mfu")  # the clock's, not the run's
MLM_THEN_RTD = ("mlm_then_rtd", "train.steps=40", "train.batch_size=8", "train.warmup_steps=4", "train.log_every=2",
                "objective.mlm_phase=0.5", "train.save_every=11")


@pytest.fixture(scope="module")
def chain(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("health-resume")
    small_chain(Store(root))
    return root


def _root(chain: Path, dest: Path) -> tuple[Path, str]:
    shutil.copytree(chain, dest)
    return dest, str(Store(dest).list("examples")[0].path)


def _pretrain(root: Path, ex: str, capsys, run: tuple[str, ...], *extra: str) -> tuple[int, str, str]:
    lr = () if any(s.startswith("train.lr=") for s in run[1:]) else ("train.lr=3e-3",)  # a rate given is the run's
    flags = [f"--set={s}" for s in (*lr, "train.cpu_threads=1", *run[1:])]
    rc = main(["pretrain", "--examples", ex, "--out", str(root), "--preset", "tiny", "--objective", run[0],
               *flags, *extra])
    out = capsys.readouterr()
    return rc, out.out, out.err


def _events(err: str) -> list[tuple[int, str]]:
    """The warnings and 'learning now' lines a run printed, in order: (step, 'warned' / 'withdrawn')."""
    found = [(m.start(), int(m[1]), "warned") for m in WARNED.finditer(err)]
    found += [(m.start(), int(m[1]), "withdrawn") for m in WITHDRAWN.finditer(err)]
    return [(step, what) for _, step, what in sorted(found)]


def _result(out: str) -> tuple[dict, list[dict]]:
    art = Path(out.strip().splitlines()[-1])
    lines = [json.loads(ln) for ln in (art / "metrics.jsonl").read_text(encoding="utf-8").splitlines()]
    lines = [{k: v for k, v in ln.items() if k not in TIMINGS} for ln in lines]
    return json.loads((art / "manifest.json").read_text(encoding="utf-8"))["stats"]["health"], lines


def _straight(chain: Path, tmp_path: Path, capsys, run: tuple[str, ...]) -> tuple[dict, list, list]:
    root, ex = _root(chain, tmp_path / "straight")
    rc, out, err = _pretrain(root, ex, capsys, run)
    assert rc == 0, err[-3000:]
    return (*_result(out), _events(err))


def _stopped(chain: Path, tmp_path: Path, capsys, monkeypatch, run: tuple[str, ...], step: int):
    """The run stopped (Ctrl-C) inside ``step``: (its root, examples, what it printed, its last checkpoint)."""
    root, ex = _root(chain, tmp_path / "resumed")
    carry_on = stop_in_step(monkeypatch, step, KeyboardInterrupt(), run[0])
    rc, _, err = _pretrain(root, ex, capsys, run)
    carry_on()
    assert rc == 130 and "--resume continues it" in err, err[-3000:]
    [saved] = [checkpoint.latest(run_dir / "out") for run_dir in (root / ".work").glob("checkpoint-*")]
    return root, ex, err, saved


def test_a_warning_standing_at_the_checkpoint_stands_at_the_end_of_the_resumed_run(chain, tmp_path, capsys,
                                                                                    monkeypatch):
    """electra15, 39 steps of 2 rows: warned at step 27, stopped in step 31, resumed from step 30. Its windows
    at 33, 36 and 39 scored replaced tokens only, as the straight run's did: the straight run ended
    not_learning ('It stands at the end'), the resumed one 'ok' (the warning was the first process's alone)."""
    want, want_lines, want_events = _straight(chain, tmp_path, capsys, ELECTRA15)
    assert want["status"] == "not_learning" and "stands" in want and want_events == [(27, "warned")], want
    root, ex, first, saved = _stopped(chain, tmp_path, capsys, monkeypatch, ELECTRA15, 31)
    assert saved.name == "step-00000030" and _events(first) == [(27, "warned")]
    rc, out, err = _pretrain(root, ex, capsys, ELECTRA15, "--resume")
    assert rc == 0, err[-3000:]
    got, lines = _result(out)
    assert lines == want_lines  # the same steps, the same windows
    assert got == want  # before: {'status': 'ok', ...}
    assert _events(err) == []  # not printed again as new, but said at the resume:
    assert "the warning printed at step 27, before this checkpoint, stands until the checks pass again: " \
           "the discriminator has not learned even the share of replaced tokens" in err


def _as_before_the_standing_warning_was_saved(step_dir: Path) -> None:
    """Rewrite a checkpoint's state.pt as kolectra wrote it before 2026-12-01: no ``health``."""
    path = step_dir / "state.pt"
    state = checkpoint.decode(torch.load(path, map_location="cpu", weights_only=True))
    assert state.pop("health")["standing"]["status"] == "not_learning"
    torch.save(checkpoint.encode(state), path)
    manifest = json.loads((step_dir / checkpoint.MANIFEST).read_text(encoding="utf-8"))
    manifest["files"]["state.pt"] = {"bytes": path.stat().st_size, "sha256": filehash.sha256(path)}
    (step_dir / checkpoint.MANIFEST).write_text(json.dumps(manifest, indent=1), encoding="utf-8")


def test_a_checkpoint_written_before_the_warning_was_saved_still_resumes_with_nothing_standing(
        chain, tmp_path, capsys, monkeypatch):
    root, ex, _, saved = _stopped(chain, tmp_path, capsys, monkeypatch, ELECTRA15, 31)
    _as_before_the_standing_warning_was_saved(saved)
    rc, out, err = _pretrain(root, ex, capsys, ELECTRA15, "--resume")
    assert rc == 0, err[-3000:]
    assert f"resuming at step 30 from {saved}" in err and "stands until" not in err
    got, _ = _result(out)
    # what such a checkpoint knows: nothing stood; the windows after it scored replaced tokens only, which judge
    # the discriminator in nothing: unchecked, saying so ('ok' before the windows' class counts)
    assert got["status"] == "unchecked" and got["reason"] == health.DISC_NOT_JUDGED, got
    assert got["figures"]["step"] == 39 and got["figures"]["disc_original_tokens"] == 0, got


def test_mlm_then_rtd_resumed_inside_the_warm_up_of_its_rtd_phase_waits_as_the_straight_run(
        chain, tmp_path, capsys, monkeypatch):
    """mlm_then_rtd, 40 steps of 8 rows, RTD from step 20, judged past step 24: stopped in step 23, resumed from
    the checkpoint at step 22, inside that wait. The resumed run says what the straight one says, when it does."""
    want, want_lines, want_events = _straight(chain, tmp_path, capsys, MLM_THEN_RTD)
    assert want["status"] == "not_learning" and want_events and all(step > 24 for step, _ in want_events)
    root, ex, first, saved = _stopped(chain, tmp_path, capsys, monkeypatch, MLM_THEN_RTD, 23)
    assert saved.name == "step-00000022" and _events(first) == []
    rc, out, err = _pretrain(root, ex, capsys, MLM_THEN_RTD, "--resume")
    assert rc == 0, err[-3000:]
    got, lines = _result(out)
    assert lines == want_lines and got == want and _events(err) == want_events


def test_a_warning_standing_over_a_resume_into_a_longer_warm_up_names_the_run_s_end(chain, tmp_path, capsys,
                                                                                     monkeypatch):
    """electra15 warned at step 27, resumed from step 30 with train.force_resume and train.warmup_steps=50 (past
    its 39 steps): no window past warm-up is read, so the warning stands, and its 'stands' said 'to step None' in
    stats.health and both cards (q2). It names the run's last step."""
    root, ex, _, _ = _stopped(chain, tmp_path, capsys, monkeypatch, ELECTRA15, 31)
    longer = (*ELECTRA15[:3], "train.warmup_steps=50", *ELECTRA15[4:], "train.force_resume=true")
    rc, out, err = _pretrain(root, ex, capsys, longer, "--resume")
    assert rc == 0, err[-3000:]
    got, _ = _result(out)
    # (its window at 30, before the checkpoint, judged the discriminator and found it still: saved with the warning)
    want = ("It stands at the end: warned at step 27 and found again by the windows to step 30; the windows after "
            "that, to step 39, did not judge the discriminator again (the run ended in warm-up).")
    assert got["status"] == "not_learning" and got["stands"] == want, got  # before: 'to step None'
    art = Path(out.strip().splitlines()[-1])
    for net in ("discriminator", "generator"):
        assert want in (art / "hf" / net / "README.md").read_text(encoding="utf-8")


ELECTRA15_PARTS = ("electra15", "train.steps=60", "train.batch_size=2", "train.warmup_steps=4", "train.log_every=3",
                   "train.lr=5e-4", "train.save_every=7")


@pytest.mark.parametrize("stop, as_saved_before", [(8, False), (15, False), (15, True)])
def test_each_part_s_warning_resumes_as_the_straight_run(chain, tmp_path, capsys, monkeypatch, stop, as_saved_before):
    """electra15, 60 steps of 2 rows at lr 5e-4 (q12): the generator warned of at step 6, withdrawn at step 9, where
    the discriminator at the class prior is warned of (a standing warning about the generator silenced it before).
    Stopped with the generator's warning standing (checkpoint 7) or the discriminator's (14), the resumed run says
    and ends as the straight one; a checkpoint whose standing has no parts' steps (saved before) resumes the same."""
    want, want_lines, want_events = _straight(chain, tmp_path, capsys, ELECTRA15_PARTS)
    # The generator warned of at step 6, the discriminator at step 9 (before: 6, then 15); when the generator leaves
    # uniform guessing depends on the CPU's kernels (step 9 on an AVX-512 machine, 12 on an AVX2 one: float sums in
    # another order), and the test needs only the generator's warning standing at checkpoint 7 and the
    # discriminator's alone at checkpoint 14.
    assert want_events[0] == (6, "warned") and (9, "warned") in want_events, want_events
    assert [step for step, what in want_events if what == "withdrawn"][0] <= 14, want_events
    root, ex, _, saved = _stopped(chain, tmp_path, capsys, monkeypatch, ELECTRA15_PARTS, stop)
    if as_saved_before:  # one verdict standing, as written before each part stood on its own
        path = saved / "state.pt"
        state = checkpoint.decode(torch.load(path, map_location="cpu", weights_only=True))
        assert state["health"]["standing"].pop("since") == {"discriminator": 9}
        torch.save(checkpoint.encode(state), path)
        manifest = json.loads((saved / checkpoint.MANIFEST).read_text(encoding="utf-8"))
        manifest["files"]["state.pt"] = {"bytes": path.stat().st_size, "sha256": filehash.sha256(path)}
        (saved / checkpoint.MANIFEST).write_text(json.dumps(manifest, indent=1), encoding="utf-8")
    rc, out, err = _pretrain(root, ex, capsys, ELECTRA15_PARTS, "--resume")
    assert rc == 0, err[-3000:]
    got, lines = _result(out)
    assert lines == want_lines and got == want, got
    assert _events(err) == [e for e in want_events if e[0] > stop - 1], err
    standing = "the generator has not left" if stop == 8 else "the discriminator has not learned even the share"
    assert "stands until the checks pass again: " + standing in err
