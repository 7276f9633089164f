"""``kolectra report`` and ``kolectra export``: what a built artifact is turned into for a reader, a
Markdown report with plots (:mod:`pipeline.report`, several evals' table: :mod:`pipeline.scores`) or a
Hugging Face Hub folder, optionally pushed (:mod:`pipeline.hub`).

Each is an ``add_*`` (its options) and a ``run_*`` the table in :mod:`pipeline.cli.commands` names;
they build nothing, and print what they wrote last.
"""

from __future__ import annotations

import argparse

from kolectra.core import streams
from kolectra.core.config import ConfigError
from kolectra.pipeline.cli.errors import PRINTING, after_the_command
from kolectra.pipeline.store.artifacts import Store


# ---- report -------------------------------------------------------------------------------------
def add_report(p: argparse.ArgumentParser) -> None:
    p.add_argument("ref", nargs="*", help="the artifact: directory, name-id, id, id prefix or name (e.g. sample-nsmc); "
                   "several eval artifacts: one table of their scores, models as rows and tasks as columns")
    p.add_argument("--published", action="store_true", help="published Korean models' NSMC and KorQuAD figures, with "
                   "their sources and splits (docs/published.md): alone, printed; with REF, rows of report.md's score "
                   "table beside yours, in percent, with the split each figure used")
    p.add_argument("--dest", default=None, help="folder for report.md and its PNGs, local or in a store "
                   "(s3://, gs://) (default ROOT/reports/<kind>-<name>-<id>, for several eval artifacts "
                   "ROOT/reports/table-<hash>; ROOT: the root the (first) REF lies in: --out's for a name or id, "
                   "the artifact's own for a folder or URL of another root)")


def run_report(args, store: Store, beam_args: list[str]) -> int:
    from kolectra.pipeline.report import render
    from kolectra.pipeline.scores import render_table

    if not args.ref and not args.published:
        raise ConfigError("report: give the artifact to report (e.g. kolectra report sample-nsmc), or --published")
    if args.published and not args.ref:
        from kolectra.pipeline.published import table as published_table

        with after_the_command(PRINTING):  # the table alone builds nothing; under PYTHONUNBUFFERED it fails here
            print("published models (docs/published.md; not comparable with a score on fewer rows or another split):")
            print("\n".join(published_table()))
    if len(args.ref) > 1:  # with --published, their rows join the table (and report.md), with each row's split
        path, table = render_table(store, args.ref, args.dest, args.published)
        with after_the_command():  # report.md is written: under PYTHONUNBUFFERED a full disk fails here
            print(table)
            print(path)
        return 0
    if args.ref:  # with --published, report.md ends with the eval's row in the published models' table
        written = render(store, args.ref[0], args.dest, args.published)
        with after_the_command():
            print(written)
    return 0


# ---- export -------------------------------------------------------------------------------------
def add_export(p: argparse.ArgumentParser) -> None:
    p.add_argument("ref", help="the checkpoint artifact: directory, name-id, id, id prefix or name (e.g. sample)")
    p.add_argument("--to", required=True, metavar="DIR",
                   help="the folder to write, new or empty: local, or in a store (s3://, gs://; written locally "
                        "and uploaded) (required, no default; e.g. --to koelectra-small-mine)")
    p.add_argument("--role", default="discriminator", choices=["discriminator", "generator"],
                   help="which network: the discriminator to fine-tune, or the generator, a masked LM "
                        "(default discriminator)")
    p.add_argument("--dataset", dest="datasets", action="append", default=[], metavar="HUB_ID",
                   help="a Hub dataset the model was trained on, for the card's metadata, repeatable "
                        "(default: none; local corpus artifacts are named in the card's lineage; "
                        "e.g. --dataset e9t/nsmc)")
    p.add_argument("--base-model", default=None, metavar="HUB_ID",
                   help="the Hub model pretraining continued from (default: none; e.g. --base-model "
                        "monologg/koelectra-small-v3-discriminator)")
    p.add_argument("--push", default=None, metavar="REPO_ID",
                   help="then upload the folder to this Hub model repository in one commit, creating it if "
                        "absent (default: no upload; needs a token: hf auth login or HF_TOKEN; "
                        "e.g. --push me/kolectra-small)")
    p.add_argument("--private", action="store_true",
                   help="with --push: create the repository private (default: public)")
    p.add_argument("--dry-run", action="store_true",
                   help="with --push: print the files the commit would upload, and upload nothing (default: upload)")


def run_export(args, store: Store, beam_args: list[str]) -> int:
    from kolectra.pipeline import hub

    if (args.dry_run or args.private) and not args.push:
        raise ConfigError("--dry-run and --private go with --push REPO_ID")
    with hub.exported(store, args.ref, args.to, args.role, args.datasets, args.base_model, args.push) as (
            art, folder, where):
        for op in hub.operations(folder):
            print(f"  {op.path_in_repo}")
        positions = hub.positions_note(art, hub.readable(folder))
        if args.push:
            if args.dry_run:
                for line in hub.warnings(art, args.private):
                    streams.say(f"kolectra export: warning: {line}")  # a log's reader gone: not the push's end
            print("\n".join(hub.push(folder, args.push, args.dry_run, args.private)))
    if positions:  # said once the export (and push) stands; its card says it too
        streams.say(f"kolectra export: note: {positions.removeprefix('Positions: ')}")
    with after_the_command():  # the folder is exported (and pushed)
        print(where)
    return 0
