"""Text taken from files cannot act on a terminal or a page: control characters in a model name, a
decoding preset or an id are printed and written escaped (terminal, summary.md, Markdown tables, CSVs), and
a model output cannot open a comment or close the script of report.html's embedded data."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from suite_fixtures import make_maps, write_jsonl

from lakeshift.cli import main

#: Sets the window title, then clears the screen; and a right-to-left override.
HOSTILE = "\x1b]0;pwned\x07\x1b[2J\x1b[H\u202e"


def answers(data: Path, **meta: object) -> list[dict]:
    rows = []
    for line in (data / "id-test" / "maps.jsonl").read_text().splitlines():
        rec = json.loads(line)
        rows.append({"id": rec["id"], "output": "\\boxed{" + ", ".join(rec["optimal_path"]) + "}", **meta})
    return rows


@pytest.fixture
def data(tmp_path: Path) -> Path:
    write_jsonl(tmp_path / "data" / "id-test" / "maps.jsonl", make_maps("id-test", (3, 4), 3))
    return tmp_path / "data"


def test_score_prints_a_hostile_decoding_preset_escaped(
    tmp_path: Path, data: Path, capsys: pytest.CaptureFixture
) -> None:
    preds = write_jsonl(tmp_path / "p.jsonl", answers(data, decoding={"preset": HOSTILE, "greedy": False}))
    assert main(["score", "--maps", str(data / "id-test" / "maps.jsonl"), "--predictions", str(preds)]) == 0
    out, err = capsys.readouterr()
    assert "\x1b" not in out + err and "\u202e" not in out + err
    assert "decoding: \\x1b]0;pwned\\x07" in out


def test_report_writes_a_hostile_model_name_escaped_everywhere_as_text(
    tmp_path: Path, data: Path, capsys: pytest.CaptureFixture
) -> None:
    runs = tmp_path / "runs"
    write_jsonl(runs / "m" / "id-test.jsonl", answers(data, model=f"evil{HOSTILE}model", input_format="grid"))
    out = tmp_path / "rep"
    assert main(["report", str(runs), "--out", str(out), "--data", str(data), "--examples", "5"]) == 0
    printed, err = capsys.readouterr()
    assert "\x1b" not in printed + err and "evil\\x1b]0;pwned" in printed
    texts = [
        out / "summary.md",
        out / "table1.md",
        out / "by_split.csv",
        out / "by_size.csv",
        out / "table1.csv",
    ]
    texts += [out / "verdicts.md", out / "warnings.txt", out / "table1.tex"]
    for path in texts:
        text = path.read_text(encoding="utf-8")
        assert "\x1b" not in text and "\x07" not in text and "\u202e" not in text, path
    assert "evil\\x1b]0;pwned" in (out / "by_split.csv").read_text()


def test_a_model_output_cannot_open_a_comment_or_close_the_data_script(tmp_path: Path, data: Path) -> None:
    runs = tmp_path / "runs"
    rows = answers(data, model="m")
    for r in rows:
        r["output"] = "<!--<script>x</script></script><!-- " + r["output"]
    write_jsonl(runs / "m" / "id-test.jsonl", rows)
    out = tmp_path / "rep"
    assert main(["report", str(runs), "--out", str(out), "--data", str(data), "--no-baselines"]) == 0
    html = (out / "report.html").read_text(encoding="utf-8")
    blob = re.search(r'<script type="application/json" id="report-data">(.*?)</script>', html, re.S)
    assert blob is not None
    assert "<" not in blob.group(1) and ">" not in blob.group(1)
    examples = json.loads(blob.group(1))["examples"]
    assert examples and all(e["output"].startswith("<!--<script>") for e in examples if e.get("output"))
    # The page's own application script still follows the data block.
    assert html.index('id="report-data"') < html.rindex("JSON.parse")
