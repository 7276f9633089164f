"""The helpers tests/test_model_health.py and tests/test_model_health_standing.py share: a health.Context
and a logged metrics line shaped like real runs of ``mini`` on the review corpus (the identity-only plateau,
AUC 0.58), each field overridable."""

from kolectra.model import health


def _ctx(**kw):
    base = dict(objective="electra", vocab_size=8000, warmup_steps=250, total_steps=2500, lr=1e-3,
                nonpad_tokens=10_000_000, padding_share=0.002)
    return health.Context(**{**base, **kw})


def _line(step, **kw):
    base = dict(disc_loss=0.3515, disc_auc=0.58, disc_recall=0.002, replaced_token_share=0.114,
                gen_loss=5.9, gen_acc=0.2, replaced_share=0.86)
    return {"step": step, **{**base, **kw}}
