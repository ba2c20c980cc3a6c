"""lmms-eval entry point: the shipped task folder, its prompts, and verdicts equal to ``lakeshift score``.

The task functions are plain Python (no lmms-eval import), so they are tested here in the main
environment. :func:`test_lmms_eval_cli_verdicts_equal_lakeshift_score` (tiny-vl) and
:func:`test_lmms_eval_cli_group_on_scripted_outputs` (lmms-eval's ``from_log`` model) run the real
``lmms-eval`` CLI, which lives in its own environment (docs/harnesses.md; .ci/run builds it):
``$LAKESHIFT_LMMS_EVAL`` names its ``lmms-eval`` executable, and they skip without it.
"""

from __future__ import annotations

import fnmatch
import json
import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
import yaml
from model_fixtures import generate_split
from PIL import Image

from lakeshift import traces
from lakeshift.cli import main
from lakeshift.data import records
from lakeshift.data.maps import load_maps, map_from_record
from lakeshift.formats import INPUT_FORMATS, prompts
from lakeshift.formats.image import render_png
from lakeshift.integrations import lmms_eval

REPO = Path(__file__).resolve().parents[2]
TASKS = lmms_eval.TASKS_DIR
FUNCTIONS = lmms_eval.task_functions()


class _Function:
    """A ``!function utils.name`` tag read by the test's YAML loader."""

    def __init__(self, name: str) -> None:
        self.name = name


class _Loader(yaml.SafeLoader):
    pass


_Loader.add_constructor("!function", lambda loader, node: _Function(loader.construct_scalar(node)))


def load_task(path: Path) -> dict:
    """A task YAML with its ``include`` merged, as lmms-eval reads it."""
    config = yaml.load(path.read_text(), Loader=_Loader)
    if "include" in config:
        config = {**load_task(path.parent / config.pop("include")), **config}
    return config


def shipped_maps(split: str) -> list[dict]:
    return load_maps(TASKS / "maps" / f"{split}.jsonl")


def test_shipped_folder_is_what_the_command_writes() -> None:
    """The shipped folder is the paper suite's maps (seed 0) as today's generator makes them."""
    expected = lmms_eval.task_files(lmms_eval.paper_maps())
    shipped = {p.relative_to(TASKS).as_posix(): p.read_text() for p in TASKS.rglob("*") if p.is_file()}
    shipped = {k: v for k, v in shipped.items() if "__pycache__" not in k}
    stale = sorted(k for k in expected if shipped.get(k) != expected[k])
    assert not stale, f"regenerate with `lakeshift lmms-eval-tasks --out {TASKS}`: {stale[:5]}"
    assert sorted(shipped) == sorted(expected)
    # a task per split x input x prompt, a group per input x prompt
    assert len([k for k in expected if k.endswith(".yaml")]) == 4 * 4 * 2 + 4 * 2


def _glob_match(path: str, pattern: str) -> bool:
    """setuptools' package-data matching: ``*`` stays within one folder."""
    parts, pattern_parts = path.split("/"), pattern.split("/")
    return len(parts) == len(pattern_parts) and all(map(fnmatch.fnmatchcase, parts, pattern_parts))


def test_package_data_ships_the_task_folder() -> None:
    tomllib = pytest.importorskip("tomllib")
    patterns = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    package = REPO / "src" / "lakeshift"
    files = [
        p.relative_to(package).as_posix() for p in TASKS.rglob("*") if p.is_file() and p.suffix != ".pyc"
    ]
    missing = [f for f in files if not any(_glob_match(f, pat) for pat in patterns["lakeshift"])]
    assert len(files) == 46 and not missing


def test_every_task_names_functions_files_and_sizes_that_exist() -> None:
    """One task per split, input format and prompt (the prompt is the same for every CoT, so each is
    generated once), with room for the longest reference of any CoT; one group per input format and
    prompt, holding one task per split and no pooled metric."""
    tasks = {}
    for path in sorted(TASKS.glob("*.yaml")):
        config = load_task(path)
        if "group" in config:
            continue
        tasks[config["task"]] = config
        assert path.name == f"{config['task']}.yaml"
        for key in ("doc_to_visual", "doc_to_text", "doc_to_messages", "process_results", "doc_to_target"):
            module, name = config[key].name.split(".")
            assert module == "utils" and name in FUNCTIONS, (path.name, key)
        data = TASKS / config["dataset_kwargs"]["data_files"]["test"]
        sizes = sorted({r["size"] for r in load_maps(data)})
        names = [m["metric"] for m in config["metric_list"]]
        assert names == ["accuracy", *(f"accuracy_{n}x{n}" for n in sizes)]
        assert (
            config["generation_kwargs"]["until"] == [] and config["generation_kwargs"]["do_sample"] is False
        )
        assert config["process_results"].name == "utils.process_results"
        maps = load_maps(data)
        assert config["generation_kwargs"]["max_new_tokens"] >= max(
            len(traces.completion(map_from_record(r), r["optimal_path"], cot))
            for r in maps
            for cot in traces.COT_FORMATS
        )
    for fmt in INPUT_FORMATS:
        for suffix in ("", "_map-only"):
            group = load_task(TASKS / f"frozenlake_{fmt}{suffix}.yaml")
            assert group["task"] == [f"frozenlake_{split}_{fmt}{suffix}" for split in lmms_eval.SPLITS]
            assert "aggregate_metric_list" not in group
            for task in group["task"]:
                assert tasks[task]["doc_to_text"].name == f"utils.doc_to_text_{fmt}{suffix.replace('-', '_')}"
    assert len(tasks) == 4 * 4 * 2


def test_text_prompt_is_what_lakeshift_predict_sends() -> None:
    doc = shipped_maps("ood-dist")[0]
    for fmt in ("desc", "table", "grid"):
        expected = records.prompt_messages(doc, fmt, None, "test")["messages"]
        assert FUNCTIONS[f"doc_to_text_{fmt}"](doc, {}) == expected[1]["content"]
        messages = FUNCTIONS[f"doc_to_messages_{fmt}"](doc)
        assert messages == [
            {"role": m["role"], "content": [{"type": "text", "text": m["content"]}]} for m in expected
        ]
        assert FUNCTIONS["doc_to_visual_none"](doc) == []
    assert FUNCTIONS["doc_to_text_image"](doc) == prompts.TEST_PROMPT  # Mirage's text with its <image>
    assert FUNCTIONS["doc_to_target"](doc) == traces.boxed(doc["optimal_path"])


def test_map_only_prompt_is_what_lakeshift_predict_sends_with_map_only(tmp_path: Path) -> None:
    """The ``map-only`` tasks send the user turn ``lakeshift predict --prompt map-only`` reads from the SFT
    files of the same maps."""
    from lakeshift.models.data import load_sft

    data = tmp_path / "data"
    generate_split(data, "ood-dist", sizes=(7,), count=2, inputs=("grid", "table", "desc"))
    docs = load_maps(data / "ood-dist" / "maps.jsonl")
    for fmt in ("desc", "table", "grid"):
        sft = load_sft(data, "ood-dist", fmt, "none", need_assistant=False, prompt="map-only")
        for doc, record in zip(docs, sft.records, strict=True):
            assert FUNCTIONS[f"doc_to_text_{fmt}_map_only"](doc) == record["messages"][1]["content"]
            system = record["messages"][0]["content"]
            assert FUNCTIONS[f"doc_to_messages_{fmt}_map_only"](doc)[0]["content"][0]["text"] == system
    assert FUNCTIONS["doc_to_text_image_map_only"](docs[0]) == "<image>"


def test_image_is_the_generated_png_where_the_placeholder_stands(tmp_path: Path) -> None:
    doc = shipped_maps("id-test")[0]
    (image,) = FUNCTIONS["doc_to_visual_image"](doc)
    png = render_png(map_from_record(doc), tmp_path / "map.png")  # what `lakeshift generate` writes
    assert np.array_equal(np.asarray(image.convert("RGB")), np.asarray(Image.open(png).convert("RGB")))
    system, user = FUNCTIONS["doc_to_messages_image"](doc)
    assert system == {"role": "system", "content": [{"type": "text", "text": prompts.SYSTEM_PROMPT}]}
    before, after = prompts.split_at_image("test")
    (first, picture, last) = user["content"]
    assert (first, last) == ({"type": "text", "text": before}, {"type": "text", "text": after})
    assert picture["type"] == "image" and np.array_equal(np.asarray(picture["url"]), np.asarray(image))


def outputs_for(doc: dict, cot: str) -> list[str]:
    """Outputs meeting several verdicts, with the reference trace (faithful) and a corrupted one."""
    m = map_from_record(doc)
    path = doc["optimal_path"]
    reference = traces.completion(m, path, cot)
    cut = reference.rfind("\\boxed{")
    return [
        reference,
        reference[:cut] + traces.boxed(path[:-1]),  # the trace's plan, but an answer that stops short
        reference.replace("RIGHT", "LEFT", 1).replace("DOWN", "UP", 1),
        "  " + traces.boxed([*path, "UP"]) + "\n",
        "\\boxed{go}",
        "",
    ]


@pytest.mark.parametrize("cot", ["none", "grid+desc", "table", "coords", "astar"])
def test_one_answer_is_scored_in_the_cot_it_is_written_in(tmp_path: Path, cot: str) -> None:
    """The task's ``process_results`` (one per prompt, whatever CoT the model was trained on): each logged
    record equals the one ``lakeshift score`` writes for the same output on the same map, its trace checked
    in the CoT format it is written in."""
    docs = shipped_maps("ood-dist")[:3]
    process = FUNCTIONS["process_results"]
    maps_file = tmp_path / "maps.jsonl"
    maps_file.write_text("".join(json.dumps(d) + "\n" for d in docs))
    for k in range(len(outputs_for(docs[0], cot))):
        outputs = [outputs_for(d, cot)[k] for d in docs]
        preds, scored = tmp_path / f"p{k}.jsonl", tmp_path / f"s{k}.jsonl"
        rows = [{"id": d["id"], "output": o} for d, o in zip(docs, outputs, strict=True)]
        preds.write_text("".join(json.dumps(r) + "\n" for r in rows))
        assert (
            main(["score", "--maps", str(maps_file), "--predictions", str(preds), "--out", str(scored)]) == 0
        )
        cli = [json.loads(line) for line in scored.read_text().splitlines()]
        for doc, output, expected in zip(docs, outputs, cli, strict=True):
            result = process(doc, [output])
            n = doc["size"]
            assert set(result) == {"accuracy", f"accuracy_{n}x{n}"}
            record = result["accuracy"]
            assert record["score"] == (1.0 if expected["success"] else 0.0)
            assert {k: v for k, v in record.items() if k in expected} == {
                k: v for k, v in expected.items() if k in record
            }
            assert {"verdict", "moves", "progress", "id", "size", "d_inf"} <= set(record) & set(expected)
            if cot != "none" and k == 0:  # the reference trace: read as its own CoT, and faithful
                assert record["trace_faithful"] is True and expected["trace_faithful"] is True


def test_accuracy_is_pooled_and_per_size() -> None:
    docs = [d for d in shipped_maps("ood-size") if d["size"] in (7, 8)][::50][:6]
    results = [FUNCTIONS["process_results"](d, [traces.boxed(d["optimal_path"]) if i % 2 else ""])
               for i, d in enumerate(docs)]  # fmt: skip
    by_metric: dict[str, list] = {}
    for result in results:
        for name, value in result.items():
            by_metric.setdefault(name, []).append(value)
    assert FUNCTIONS["accuracy"](by_metric["accuracy"]) == 0.5
    for n in (7, 8):
        items = by_metric[f"accuracy_{n}x{n}"]
        assert {i["size"] for i in items} == {n}
        assert FUNCTIONS["accuracy"](items) == sum(i["success"] for i in items) / len(items)
    assert np.isnan(FUNCTIONS["accuracy"]([]))


def test_tasks_from_a_data_folder(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    data = tmp_path / "data"
    generate_split(data, "ood-dist", sizes=(7, 8), count=2)
    out = tmp_path / "tasks"
    argv = ["lmms-eval-tasks", "--out", str(out), "--data", str(data), "--splits", "ood-dist"]
    assert main(argv) == 0
    assert "wrote 16 task and group files" in capsys.readouterr().out
    assert (out / "maps" / "ood-dist.jsonl").read_text() == (data / "ood-dist" / "maps.jsonl").read_text()
    config = load_task(out / "frozenlake_ood-dist_grid.yaml")
    assert [m["metric"] for m in config["metric_list"]] == ["accuracy", "accuracy_7x7", "accuracy_8x8"]
    assert load_task(out / "frozenlake_grid.yaml")["task"] == ["frozenlake_ood-dist_grid"]
    # an earlier task folder is rewritten, without the tasks and maps the new one does not have
    (out / "frozenlake_ood-dist_grid_none.yaml").write_text("task: frozenlake_ood-dist_grid_none\n")
    (out / "maps" / "id-test.jsonl").write_text("")
    assert main(argv) == 0
    assert not (out / "frozenlake_ood-dist_grid_none.yaml").exists()
    assert not (out / "maps" / "id-test.jsonl").exists()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--splits", "id-train"], "id-train is not a test split of the paper suite"),
        (["--data", "{tmp}/nowhere", "--splits", "ood-dist"], "nowhere/ood-dist/maps.jsonl"),
        (["--splits", " , "], "no split named"),
    ],
)
def test_bad_arguments_are_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture, argv: list[str], message: str
) -> None:
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    assert main(["lmms-eval-tasks", "--out", str(tmp_path / "t"), *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_a_foreign_folder_is_not_written_into(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    (tmp_path / "notes.txt").write_text("mine")
    assert main(["lmms-eval-tasks", "--out", str(tmp_path), "--splits", "id-test"]) == 2
    assert "not empty and not a previous task folder" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]


# --------------------------------------------------------------------------------------------------------
# The real lmms-eval CLI (its own environment: docs/harnesses.md)
# --------------------------------------------------------------------------------------------------------
LMMS_EVAL = os.environ.get("LAKESHIFT_LMMS_EVAL")
needs_lmms_eval = pytest.mark.skipif(
    not LMMS_EVAL,
    reason="$LAKESHIFT_LMMS_EVAL is unset: it names the lmms-eval executable of lmms-eval's own "
    "environment (docs/harnesses.md; .ci/run builds one)",
)


def run_lmms_eval(tmp_path: Path, tasks_dir: Path, tasks: list[str], model: list[str], *extra: str) -> Path:
    """Runs ``lmms-eval eval`` with ``--include_path tasks_dir --log_samples``; returns its output folder."""
    out = tmp_path / "lmms-out"
    argv = [LMMS_EVAL, "eval", *model, "--include_path", str(tasks_dir), "--tasks", ",".join(tasks)]
    argv += ["--log_samples", "--output_path", str(out), "--verbosity", "WARNING", *extra]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf")}
    proc = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=1200)
    lines = (proc.stdout + proc.stderr).splitlines()
    log = "\n".join(line for line in lines if "it/s]" not in line)[-4000:]  # no progress bars
    # lmms-eval exits 0 after logging an error: the results file is the sign of a finished run.
    assert proc.returncode == 0 and list(out.rglob("*_results.json")), log
    return out


def logged_samples(out: Path, task: str) -> list[dict]:
    (path,) = out.rglob(f"*_samples_{task}.jsonl")
    return [json.loads(line) for line in path.read_text().splitlines()]


def assert_verdicts_are_lakeshift_score(tmp_path: Path, samples: list[dict], maps: list[dict]) -> None:
    """Each logged sample's record equals what ``lakeshift score`` writes for its output on its map (its
    CoT format read from the output, as the task does)."""
    assert samples
    by_id = {m["id"]: m for m in maps}
    for sample in samples:
        assert sample["accuracy"]["id"] == maps[sample["doc_id"]]["id"]  # document k is map k
        assert sample["target"] == traces.boxed(maps[sample["doc_id"]]["optimal_path"])
        # lmms-eval logs the raw output as resps where it differs from the scored one: only by whitespace
        assert sample.get("resps", sample["filtered_resps"]).strip() == sample["filtered_resps"]
    ids = [s["accuracy"]["id"] for s in samples]
    maps_file, preds, scored = tmp_path / "maps.jsonl", tmp_path / "preds.jsonl", tmp_path / "scored.jsonl"
    maps_file.write_text("".join(json.dumps(by_id[i]) + "\n" for i in ids))
    rows = [
        {"id": s["accuracy"]["id"], "output": s.get("resps", s["filtered_resps"])} for s in samples
    ]  # the model's raw output
    preds.write_text("".join(json.dumps(r) + "\n" for r in rows))
    argv = ["score", "--maps", str(maps_file), "--predictions", str(preds), "--out", str(scored)]
    assert main(argv) == 0
    cli = {r["id"]: r for r in map(json.loads, scored.read_text().splitlines())}
    for sample in samples:
        record, expected = sample["accuracy"], cli[sample["accuracy"]["id"]]
        n = record["size"]
        assert sample[f"accuracy_{n}x{n}"] == record
        assert record["verdict"] == expected["verdict"], (record["id"], sample["filtered_resps"][:200])
        assert {k: v for k, v in expected.items() if k in record} == {
            k: v for k, v in record.items() if k in expected
        }


@pytest.mark.slow
@needs_lmms_eval
def test_lmms_eval_cli_verdicts_equal_lakeshift_score(tmp_path: Path) -> None:
    """tiny-vl (``lakeshift lmms-eval-model``) through lmms-eval's ``qwen2_5_vl`` on a text and an image task
    of the shipped folder: the logged verdicts are ``lakeshift score``'s on the same outputs."""
    model = tmp_path / "tiny-vl"
    assert main(["lmms-eval-model", "--out", str(model)]) == 0
    tasks = ["frozenlake_ood-dist_grid", "frozenlake_ood-dist_image_map-only"]
    args = ["--model", "qwen2_5_vl", "--model_args", f"pretrained={model},device=cpu,device_map=cpu"]
    # random weights never end their turn: a short answer keeps the test fast
    out = run_lmms_eval(tmp_path, TASKS, tasks, args, "--limit", "2", "--gen_kwargs", "max_new_tokens=48")
    maps = shipped_maps("ood-dist")
    for task, function in zip(tasks, ["doc_to_text_grid", "doc_to_text_image_map_only"], strict=True):
        samples = logged_samples(out, task)
        assert sorted(s["doc_id"] for s in samples) == [0, 1]
        for s in samples:  # the prompt lmms-eval built is lakeshift's
            assert s["input"] == FUNCTIONS[function](maps[s["doc_id"]])
        assert_verdicts_are_lakeshift_score(tmp_path, samples, maps)


@pytest.mark.slow
@needs_lmms_eval
def test_lmms_eval_cli_input_group_reports_each_split_apart(tmp_path: Path) -> None:
    """An input format's group from a command-written folder of two splits, answered by lmms-eval's
    ``from_log`` model with outputs of every verdict in several CoT formats (one answer per map, whatever
    the CoT): per-sample verdicts are ``lakeshift score``'s, each split's task has its own accuracy, pooled
    and per size, and the group pools nothing."""
    data = tmp_path / "data"
    splits = ["id-test", "ood-dist"]
    for k, split in enumerate(splits):  # one suite each: a suite folder holds one generator config
        generate_split(tmp_path / split, split, sizes=(3, 4), count=3, seed=k)
        shutil.copytree(tmp_path / split / split, data / split)
    folder = tmp_path / "tasks"
    argv = ["lmms-eval-tasks", "--out", str(folder), "--data", str(data), "--splits", ",".join(splits)]
    assert main(argv) == 0
    tasks = [lmms_eval.task_name(split, "grid") for split in splits]
    cots = ["none", "grid", "astar", "table+desc"]
    logs = tmp_path / "logs"
    logs.mkdir()
    maps = {split: load_maps(folder / "maps" / f"{split}.jsonl") for split in splits}
    for t, (split, task) in enumerate(zip(splits, tasks, strict=True)):  # from_log: one JSON per task
        # outputs of every verdict and several CoTs, cycled differently for each size
        picks = [(k + t) % 6 if doc["size"] == 3 else (2 * t + 1) % 6 for k, doc in enumerate(maps[split])]
        entries = [
            {"doc_id": k, "resps": [[outputs_for(doc, cots[k % len(cots)])[pick]]]}
            for k, (doc, pick) in enumerate(zip(maps[split], picks, strict=True))
        ]
        log = {"args": {"model": "scripted", "model_args": "", "limit": None}, "time": "0101_0000"}
        log |= {"model_configs": {"task": task}, "logs": entries}
        (logs / f"{task}.json").write_text(json.dumps(log))
    out = run_lmms_eval(
        tmp_path, folder, ["frozenlake_grid"], ["--model", "from_log", "--model_args", f"logs={logs}"]
    )
    (results_file,) = out.rglob("*_results.json")
    results = json.loads(results_file.read_text())["results"]
    pooled: list[dict] = []
    for split, task in zip(splits, tasks, strict=True):
        samples = logged_samples(out, task)
        assert sorted(s["doc_id"] for s in samples) == list(range(len(maps[split])))
        assert_verdicts_are_lakeshift_score(tmp_path, samples, maps[split])
        records = [s["accuracy"] for s in samples]
        assert results[task]["accuracy,none"] == pytest.approx(FUNCTIONS["accuracy"](records))
        for n in (3, 4):
            sized = [r for r in records if r["size"] == n]
            assert results[task][f"accuracy_{n}x{n},none"] == pytest.approx(FUNCTIONS["accuracy"](sized))
        pooled += records
    verdicts = {r["verdict"] for r in pooled}
    assert {"success", "no_answer"} < verdicts and len(verdicts) >= 4, verdicts
    assert any(r.get("trace_faithful") for r in pooled)  # traces were read in the CoT they were written in
    assert not any(key.startswith("accuracy") for key in results.get("frozenlake_grid", {}))
