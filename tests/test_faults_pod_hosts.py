"""An XLA pod's hosts have no host group to agree in (``Device.rank_states``: None): the failures one
rank may meet alone (model/rank_failures.py) end where they happen there, as before the ranks
agreed on them, and the hosts still wait for rank 0's export. Rehearsed on the CPU: the loop's real
wiring (``train.start``, ``train_loop``, ``train_end.finish``) with a device that has the pod's host-side
behaviour (no host group, no gradient or metrics all-reduce: SPMD does both, a barrier that is a
rendezvous, here counted, and a line's values that arrive after the next step, as XLA's step
closures deliver them)."""

from __future__ import annotations

import contextlib
import dataclasses
import functools

import pytest

from kolectra.model import presets, train, train_end
from kolectra.model.device import Device
from tests.model_support import small_examples


class PodHost(Device):
    """Rank 0 of two hosts of one SPMD program, as the loop sees it (model/xla.py)."""

    ranks_can_agree = False  # no torch.distributed group between the hosts

    def __init__(self, out):
        super().__init__()
        self.world_size, self.out, self.barriers, self._deferred = 2, out, [], []

    def all_reduce_grads(self, params) -> None:
        """SPMD's partitioner does it."""

    def mean_over_ranks(self, values):
        return values

    def barrier(self) -> None:  # XLA's rendezvous: whether rank 0's export was there when it was reached
        self.barriers.append((self.out / "hf").is_dir())

    def read_back(self, tensors, then) -> None:
        self._deferred.append(functools.partial(Device.read_back, self, tensors, then))

    def step_done(self) -> None:
        deferred, self._deferred = self._deferred, []
        for fetch in deferred:
            fetch()

    def flush(self) -> None:
        self.step_done()


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    return small_examples(tmp_path_factory.mktemp("inputs"))


def _start(inputs, out, **sets):
    cfg = presets.tiny()
    cfg = dataclasses.replace(cfg, train=dataclasses.replace(cfg.train, batch_size=8, warmup_steps=1, **sets))
    examples, tok = inputs
    out.mkdir(parents=True, exist_ok=True)
    dev = PodHost(out)
    return train.start(cfg, train.read_inputs(cfg, examples, tok), examples, out, dev, resume=False), dev


def test_the_hosts_wait_for_rank_0_s_export(inputs, tmp_path):
    run, dev = _start(inputs, tmp_path, steps=2, log_every=1)
    train.train_loop(run, tmp_path, range(2))
    run.log.close()
    run.loader.close()
    train_end.finish(run, inputs[1], tmp_path, None)
    # 3939c60 put the ranks' agreement in place of the barrier after the export: on a pod (no agreement)
    # the hosts no longer met there
    assert dev.barriers == [True]


def test_a_line_that_fails_at_a_save_is_raised_before_the_save(inputs, tmp_path):
    """The line of step 2 is written when the save at step 2 flushes the device: its failure (a full
    disk: /dev/full) ends the run there, before a checkpoint whose metrics line is missing."""
    run, _ = _start(inputs, tmp_path, steps=4, log_every=2, save_every=2)
    run.log.file = open("/dev/full", "w", encoding="utf-8")  # noqa: SIM115 - closed below
    with pytest.raises(OSError, match="/dev/full"):
        train.train_loop(run, tmp_path, range(4))
    run.loader.close()
    # 3939c60 kept the failure for an agreement the hosts cannot make: step 2 was saved without its
    # line, the error came a step later (and a SIGTERM's stop at that save dropped it)
    assert not (tmp_path / "checkpoints" / "step-00000002").exists()
    with contextlib.suppress(OSError):  # its buffered line, again
        run.log.file.close()
