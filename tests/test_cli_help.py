"""Every ``--set KEY=`` a command's ``--help`` shows is a key that command accepts (issue 28: the
finetune help offered ``--set train.lr=1e-3``, pretraining's key, refused there as unknown)."""

from __future__ import annotations

import json
import re

import pytest

from kolectra.finetune.tasks import TASKS
from kolectra.pipeline.cli import COMMANDS, main

STAGES = [[c] for c, cmd in COMMANDS.items() if cmd.config is not None] + [["finetune", t] for t in TASKS]


def _help(capsys, argv: list[str]) -> str:
    with pytest.raises(SystemExit) as done:
        main(argv + ["--help"])
    assert done.value.code == 0
    return " ".join(capsys.readouterr().out.split())  # argparse wraps lines: one line of words


def _keys(capsys, argv: list[str]) -> set[str]:
    assert main(argv + ["--print-config", "keys"]) == 0
    return {line.split(" = ")[0].strip() for line in capsys.readouterr().out.splitlines()
            if " = " in line and not line.startswith("#")}


@pytest.mark.parametrize("argv", STAGES, ids=[" ".join(a) for a in STAGES])
def test_every_set_example_in_a_commands_help_is_one_of_its_keys(capsys, argv):
    text = _help(capsys, argv)
    shown = set(re.findall(r"--set ([a-z_][\w.]*)=", text))  # not the metavar KEY=VALUE
    assert shown, text[:400]  # the --set option's own example at least
    unknown = shown - _keys(capsys, argv)
    assert not unknown, f"{' '.join(argv)} --help shows --set {sorted(unknown)}, which it refuses"


@pytest.mark.parametrize("argv", STAGES, ids=[" ".join(a) for a in STAGES])
def test_the_seed_a_commands_help_names_is_its_configs(capsys, argv):
    # finetune's help said "the config's, 0", where every task's presets seed 42
    shown = re.search(r"--seed SEED seed for every random choice of the stage \(default: the config's, (\d+);",
                      _help(capsys, argv))
    assert main(argv + ["--print-config", "json"]) == 0
    assert shown and int(shown.group(1)) == json.loads(capsys.readouterr().out)["seed"]


def test_report_published_prints_the_docs_table(capsys):
    from pathlib import Path

    from kolectra.pipeline.published import table

    assert main(["report", "--published"]) == 0
    out = capsys.readouterr().out
    assert "| KoELECTRA-Base-v3 | 90.63 | 84.83 / 93.45 |" in out and "ratings_test.txt, all 50,000 rows" in out
    page = (Path(__file__).resolve().parents[1] / "docs" / "published.md").read_text(encoding="utf-8")
    assert all(line in page for line in table())  # the page and the command show the same figures
    assert main(["report"]) == 2  # neither an artifact nor --published: one line, exit 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--published" in err[0]


@pytest.mark.parametrize("command", [c for c, cmd in COMMANDS.items() if cmd.common == "stage"])
def test_the_command_a_help_sends_for_the_set_keys_lists_them(capsys, command):
    """study's --set help said '--print-config keys lists them', an option study refuses: it names the
    command whose keys its --set takes (pretrain's), and that command lists them."""
    text = _help(capsys, [command]).replace("--print- config", "--print-config")  # argparse breaks at a hyphen
    sent = re.search(r"; (kolectra (\w+) )?--print-config keys lists them", text)
    assert sent, text[:400]
    argv = [sent.group(2)] if sent.group(2) else [command]
    assert _keys(capsys, argv) and "train.lr" in _keys(capsys, ["pretrain"])
    if command == "study":
        assert argv == ["pretrain"] and "--print-config" not in text.replace("kolectra pretrain --print-config", "")
