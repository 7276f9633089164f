"""What `kolectra artifacts` prints from a root from elsewhere (a shared bucket, a copy, a download):
its manifests' values and its directories' names reach the terminal with their control characters
escaped, so that they cannot retitle the window, clear the screen, overwrite a line (a carriage
return) or show a name backwards (a right-to-left override)."""

import json
from pathlib import Path

from kolectra.core.shown import shown
from kolectra.core.stage import StageOutput
from kolectra.pipeline.cli import main
from kolectra.pipeline.store.artifacts import Store
from kolectra.pipeline.store.request import Request

ESC = "\x1b]0;retitled\x07\x1b[2J\rok \u202egnp.exe\x9b"
RAW = ("\x1b", "\x07", "\r", "\u202e", "\x9b")


def test_artifacts_commands_escape_control_characters_from_manifests_and_names(tmp_path, capsys):
    def produce(out: Path) -> StageOutput:
        (out / "a.txt").write_text("hello")
        return StageOutput(stats={"warnings": [f"w{ESC}"], "health": {"status": "not_learning", "problems": [ESC]}})

    root = tmp_path / "root"
    art = Store(root).build(Request(kind="corpus", name="demo", stage_version=1, config={"note": ESC}), produce)
    bad = root / "corpus" / f"x{ESC}-0123456789abcdef"  # a directory that is no artifact: list names it
    bad.mkdir()
    assert main(["artifacts", "show", str(art.path), "--out", str(root)]) == 0
    assert main(["artifacts", "list", "--out", str(root)]) == 0
    assert main(["artifacts", "verify", str(bad), "--out", str(root)]) == 2  # an error line naming it
    out, err = capsys.readouterr()
    assert not any(c in out + err for c in RAW), [
        line for line in (out + err).splitlines() if any(c in line for c in RAW)
    ]
    assert "w\\x1b]0;retitled\\x07" in out and "\\u202e" in out  # shown, escaped
    assert "x\\x1b]0;retitled" in err

    # --json: the same manifest, every such character a JSON escape (json.dumps leaves C1 and bidi raw)
    assert main(["artifacts", "show", "--json", str(art.path), "--out", str(root)]) == 0
    out = capsys.readouterr().out
    assert not any(c in out for c in RAW) and json.loads(out)["config"]["note"] == ESC


def test_shown_keeps_korean_text_and_tabs():
    assert shown("한국어 텍스트\tok") == "한국어 텍스트\tok"
    assert shown("a\nb") == "a\\nb" and shown("a\nb", lines=True) == "a\nb"
