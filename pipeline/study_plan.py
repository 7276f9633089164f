"""What a study is asked to do (:class:`StudyPlan`), kept free of torch and Beam so the CLI can
describe its options without importing them. The study itself is :mod:`kolectra.pipeline.study`.
"""

from __future__ import annotations

import dataclasses
import math

from kolectra.model.config import EMBEDDING_SHARING, OBJECTIVES
from kolectra.pipeline.artifacts import ArtifactError

READOUTS = ("probe", "lowdata", "finetune")


def parse_arm(arm: str) -> tuple[str, str]:
    """``electra-gdes`` -> (objective, embedding sharing); a bare objective shares ELECTRA's way."""
    objective, _, sharing = arm.partition("-")
    sharing = sharing or "es"
    if objective not in OBJECTIVES or sharing not in EMBEDDING_SHARING:
        raise ArtifactError(f"study: unknown arm {arm!r} (an objective of {', '.join(OBJECTIVES)}, optionally "
                            f"with -{'/-'.join(EMBEDDING_SHARING)})")
    return objective, sharing


@dataclasses.dataclass(frozen=True)
class StudyPlan:
    flops: float
    points: int = 2
    preset: str = "mini"
    arms: tuple[str, ...] = ("electra", "mlm", "electra-gdes")
    pretrain_seeds: int = 2
    finetune_seeds: int = 3
    readouts: tuple[str, ...] = ("probe", "lowdata")
    pretrain_sets: tuple[str, ...] = ()
    finetune_preset: str = "electra"
    # Fine-tuning of the lowdata/finetune readouts. At 1,000 rows, 4 epochs at 3e-4 left an untrained
    # mini at chance (train loss 0.69 in every epoch, dev 48.6 %): a floor that learns nothing makes
    # every arm "beat" it. 10 epochs at 1e-3 let the floor learn (65.1 %), so the comparison means
    # something (docs/studies.md, the pilot).
    finetune_sets: tuple[str, ...] = ("max_length=64", "batch_size=32", "epochs=10", "optim.lr=1e-3")
    vocab_size: int = 8000  # when the study builds the vocabulary (--corpus)
    dev_rows: int = 5000  # held-out rows every readout is scored on
    probe_rows: int = 4000
    lowdata_rows: int = 1000
    finetune_rows: int = 20000
    bootstrap: int = 2000
    seed: int = 0

    def budgets(self) -> list[float]:
        return [self.flops / 2 ** (self.points - 1 - k) for k in range(self.points)]

    def check(self) -> None:
        for arm in self.arms:
            parse_arm(arm)
        unknown = [r for r in self.readouts if r not in READOUTS]
        if unknown:
            raise ArtifactError(f"study: unknown readout(s) {unknown} (known: {', '.join(READOUTS)})")
        if not (self.flops > 0 and math.isfinite(self.flops)) or self.points < 1:
            raise ArtifactError(f"study: need a finite --flops > 0 and --points >= 1 (got {self.flops}, {self.points})")
        if self.pretrain_seeds < 1 or self.finetune_seeds < 1:
            raise ArtifactError("study: --pretrain-seeds and --finetune-seeds must be >= 1")


