"""What a pretraining request and its working folder are made of, without torch (:mod:`model.checkpoint`
holds the checkpoints themselves and re-exports these): ``kolectra pretrain`` needs them before its
lookup, which a published checkpoint ends (reused), so a reused one imports no torch."""

from __future__ import annotations

from pathlib import Path

# Settings that do not change the training maths: resuming with other values is fine.
# Where a run happens belongs here too: a checkpoint saved on a TPU resumes on a CPU or GPU and
# back (issue 7), so the request — and its work directory — stays the same whatever the device.
OPERATIONAL = ("train.force_resume", "train.keep_checkpoints", "train.save_every", "train.log_every",
               "train.device", "train.cpu_threads", "train.xla_cache_dir", "train.compile",
               "train.compile_mode")


def checkpoints_dir(out_dir: Path) -> Path:
    return Path(out_dir) / "checkpoints"
