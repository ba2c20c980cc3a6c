"""The inspect_ai entry point: ``lakeshift/frozenlake`` through inspect's own ``eval()`` and CLI.

inspect's ``mockllm`` model answers each prompt with a fixed output (the reference, a wrong move, a CoT
trace, text without a box, ...); every per-sample score must equal ``lakeshift score`` on the same outputs,
and the grouped metrics the accuracies of those verdicts. One slow test runs inspect's ``hf`` provider on a
small model trained here.
"""

from __future__ import annotations

import base64
import importlib
import json
import os
import shutil
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest
from model_fixtures import generate_split

# CI installs the extra, so a missing inspect_ai fails there instead of skipping quietly.
if os.environ.get("CI"):
    importlib.import_module("inspect_ai")
else:
    pytest.importorskip(
        "inspect_ai", reason="the inspect extra is not installed: pip install 'lakeshift[inspect]'"
    )

from inspect_ai import eval as inspect_eval
from inspect_ai.model import ContentImage, ModelOutput, ModelUsage, get_model

from lakeshift.cli import main
from lakeshift.errors import LakeshiftError
from lakeshift.integrations.inspect_ai import frozenlake, frozenlake_samples

WRONG = "\\boxed{UP}"


def _output(text: str) -> ModelOutput:
    """A mockllm answer with its token usage given (else mockllm counts tokens with a downloaded encoding)."""
    output = ModelOutput.from_content(model="mockllm", content=text)
    output.usage = ModelUsage(input_tokens=1, output_tokens=1, total_tokens=2)
    return output


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("data")
    generate_split(
        root, "id-test", sizes=(3, 4), count=4, inputs=("grid", "image"), cots=("grid",), images=True, seed=5
    )
    return root


def _records(data: Path) -> list[dict]:
    return [json.loads(x) for x in (data / "id-test" / "sft" / "grid__grid.jsonl").read_text().splitlines()]


def _fixed_outputs(data: Path) -> dict[str, str]:
    """An output per map: the reference trace, a broken trace, a wrong plan, text without a box..."""
    outputs = {}
    for i, rec in enumerate(_records(data)):
        reference = rec["messages"][2]["content"]
        outputs[rec["id"]] = [
            reference,
            reference.replace("\\boxed{", "so \\boxed{UP, "),  # the answer disagrees with the trace
            WRONG,
            "I cannot tell.",
        ][i % 4]
    return outputs


def _mock(data: Path, answer_of_id: dict[str, str]):
    by_prompt = {rec["messages"][1]["content"]: answer_of_id[rec["id"]] for rec in _records(data)}

    def answer(messages, tools, tool_choice, config):
        return _output(by_prompt[messages[-1].text])

    return get_model("mockllm/model", custom_outputs=answer, memoize=False)


def _lakeshift_scores(data: Path, outputs: dict[str, str], tmp_path: Path) -> dict[str, dict]:
    preds = tmp_path / "preds.jsonl"
    preds.write_text(
        "".join(json.dumps({"id": i, "output": o, "cot_format": "grid"}) + "\n" for i, o in outputs.items())
    )
    scored = tmp_path / "scored.jsonl"
    maps = data / "id-test" / "maps.jsonl"
    assert main(["score", "--maps", str(maps), "--predictions", str(preds), "--out", str(scored)]) == 0
    return {r["id"]: r for r in map(json.loads, scored.read_text().splitlines())}


def test_mockllm_scores_equal_lakeshift_score_and_metrics_group_by_size_and_d_inf(data, tmp_path):
    outputs = _fixed_outputs(data)
    task = frozenlake(split="id-test", input="grid", cot="grid", data=str(data))
    [log] = inspect_eval(task, model=_mock(data, outputs), log_dir=str(tmp_path / "logs"), display="none")
    assert log.status == "success"
    expected = _lakeshift_scores(data, outputs, tmp_path)
    assert sorted(s.id for s in log.samples) == sorted(expected)
    for sample in log.samples:
        score = sample.scores["frozenlake_scorer"]
        rec = expected[sample.id]
        assert sample.output.completion == outputs[sample.id]
        assert score.value == (1.0 if rec["success"] else 0.0)
        assert score.explanation == rec["verdict"]
        assert score.answer == ", ".join(rec["moves"])
        for key in ("trace_faithful", "trace_divergence_step", "trace_answer_agrees", "progress", "fell_at"):
            assert score.metadata[key] == rec[key], key
    verdicts = {r["verdict"] for r in expected.values()}
    assert {"success", "no_answer"} <= verdicts and len(verdicts) >= 3
    assert any(r["trace_faithful"] for r in expected.values())
    assert any(r["trace_answer_agrees"] is False for r in expected.values())

    metrics = {name: m.value for s in log.results.scores for name, m in s.metrics.items()}
    by: dict[str, list[bool]] = defaultdict(list)
    for rec in expected.values():
        by[f"{rec['size']}x{rec['size']} maps"].append(rec["success"])
        by[f"d_inf {rec['d_inf']} maps"].append(rec["success"])
    assert metrics["accuracy"] == pytest.approx(sum(r["success"] for r in expected.values()) / len(expected))
    for name, successes in by.items():
        full = f"{name} (n={len(successes)})"
        assert metrics[full] == pytest.approx(sum(successes) / len(successes)), full


def _metric_names(log) -> list[str]:
    return [name for s in log.results.scores for name in s.metrics if name not in ("accuracy", "stderr")]


def test_group_metrics_are_named_for_inspects_viewer_sorted_and_counted(data, tmp_path):
    """inspect's viewer strips trailing digits from a grouped metric's names (``size=7`` shows as ``size=``):
    no group name ends in a digit, each carries its number of maps, and the groups come in increasing
    order; the metrics keep the parameters the viewer groups them by."""
    outputs = _fixed_outputs(data)
    task = frozenlake(split="id-test", input="grid", cot="grid", data=str(data))
    [log] = inspect_eval(task, model=_mock(data, outputs), log_dir=str(tmp_path / "logs"), display="none")
    names = _metric_names(log)
    assert names and not any(name[-1].isdigit() for name in names)
    records = list(_lakeshift_scores(data, outputs, tmp_path).values())
    sizes = sorted({r["size"] for r in records})
    d_infs = sorted({r["d_inf"] for r in records})
    count = lambda key, value: sum(r[key] == value for r in records)  # noqa: E731
    assert names == [f"{n}x{n} maps (n={count('size', n)})" for n in sizes] + [
        f"d_inf {d} maps (n={count('d_inf', d)})" for d in d_infs
    ]
    params = [m.params for s in log.results.scores for m in s.metrics.values() if m.params]
    assert all(p["group_key"] in ("size", "d_inf") and p["metric"]["name"] == "accuracy" for p in params)


def test_limit_takes_every_size_alike(data, tmp_path):
    """Samples take turns by size, so inspect's ``--limit`` evaluates every size, not the smallest alone."""
    outputs = _fixed_outputs(data)
    task = frozenlake(split="id-test", input="grid", cot="grid", data=str(data))
    [log] = inspect_eval(
        task, model=_mock(data, outputs), log_dir=str(tmp_path / "logs"), display="none", limit=4
    )
    assert sorted(s.metadata["size"] for s in log.samples) == [3, 3, 4, 4]
    assert _metric_names(log)[:2] == ["3x3 maps (n=2)", "4x4 maps (n=2)"]


def test_images_are_content_images_of_the_split_pngs(data):
    samples = frozenlake_samples(data, "id-test", "image", "grid")
    first = samples[0]
    images = [c for c in first.input[-1].content if isinstance(c, ContentImage)]
    png = (data / "id-test" / "images" / f"{first.id}.png").read_bytes()
    assert len(images) == 1 and images[0].image == "data:image/png;base64," + base64.b64encode(png).decode()
    assert first.metadata["size"] == 3 and first.target.startswith("\\boxed{")


def test_samples_reduce_to_mean_pass_and_plan_majority(data, tmp_path):
    """Three epochs per map: every even map answers (reference, wrong, reference), odd maps (wrong, wrong,
    reference), whatever order the epochs run in; each epoch's request carries its own seed."""
    records = _records(data)
    answers = {}
    for i, rec in enumerate(records):
        reference = rec["messages"][2]["content"]
        answers[rec["messages"][1]["content"]] = (
            [reference, WRONG, reference] if i % 2 == 0 else [WRONG] * 2 + [reference]
        )
    calls: dict[str, int] = defaultdict(int)
    seeds: dict[str, list[int]] = defaultdict(list)

    def answer(messages, tools, tool_choice, config):
        prompt = messages[-1].text
        calls[prompt] += 1
        seeds[prompt].append(config.seed)
        return _output(answers[prompt][calls[prompt] - 1])

    task = frozenlake(
        split="id-test", input="grid", cot="grid", data=str(data), decoding="frozen_ood", samples=3
    )
    model = get_model("mockllm/model", custom_outputs=answer, memoize=False)
    [log] = inspect_eval(task, model=model, log_dir=str(tmp_path / "logs"), display="none")
    assert log.status == "success" and log.eval.config.epochs == 3
    assert (log.plan.config.temperature, log.plan.config.top_p, log.plan.config.seed) == (0.7, 0.9, 42)
    # Each epoch asks with its own seed (42 + epoch - 1), as `lakeshift predict --samples` seeds each sample.
    assert len(seeds) == len(records) and all(sorted(s) == [42, 43, 44] for s in seeds.values())
    accuracy = {s.reducer: s.metrics["accuracy"].value for s in log.results.scores}
    n = len(records)
    assert accuracy["max"] == 1.0  # pass@3: every map has the reference once
    assert accuracy["plan_majority"] == pytest.approx(sum(i % 2 == 0 for i in range(n)) / n)
    assert accuracy["mean"] == pytest.approx(sum(2 / 3 if i % 2 == 0 else 1 / 3 for i in range(n)) / n)


def test_bad_task_arguments_are_one_clear_error(data):
    with pytest.raises(LakeshiftError, match="-T decoding=beam: unknown"):
        frozenlake(data=str(data), decoding="beam")
    with pytest.raises(LakeshiftError, match="-T samples=2: greedy decoding"):
        frozenlake(data=str(data), samples=2)
    with pytest.raises(LakeshiftError, match="no split 'ood-moon'"):
        frozenlake(data=str(data), split="ood-moon")


@pytest.mark.parametrize(
    ("argument", "message"),
    [
        ("samples=0", "-T samples=0: must be an integer >= 1, got 0"),
        ("samples=-2", "-T samples=-2: must be an integer >= 1, got -2"),
        ("per_size=0", "-T per_size=0: must be an integer >= 1, got 0"),
        ("seed=-1", "-T seed=-1: must be an integer in [0, 2**32), got -1"),
        ("per_size=abc", "-T per_size=abc: expected an integer, got str 'abc'"),
        ("samples=1.5", "-T samples=1.5: expected an integer, got float 1.5"),
        ("input=photo", "-T input=photo: unknown (choose from image, desc, table, grid)"),
        ("prompt=short", "-T prompt=short: unknown (choose from mirage, map-only)"),
        (
            "spilt=ood-dist",
            "-T spilt=ood-dist: not an argument of lakeshift/frozenlake (did you mean split?)",
        ),
        ("colour=blue", "-T colour=blue: not an argument of lakeshift/frozenlake (see docs/harnesses.md)"),
    ],
)
def test_task_arguments_are_checked_as_the_cli_checks_its_options(data, tmp_path, argument, message):
    """Through inspect's ``eval`` with the task's registered name, as ``-T`` reaches it: a bad number is
    refused with the rule the CLI applies to the same option, a misspelt name is refused instead of being
    dropped with a warning."""
    name, value = argument.split("=", 1)
    parsed = {"0": 0, "-2": -2, "-1": -1, "1.5": 1.5}.get(value, value)
    task_args = {"data": str(data), "cot": "grid", name: parsed}
    with pytest.raises(LakeshiftError) as err:
        inspect_eval("lakeshift/frozenlake", task_args=task_args, model="mockllm/model", display="none",
                     log_dir=str(tmp_path / "logs"))  # fmt: skip
    assert str(err.value).startswith(message)


def test_a_bad_task_argument_is_one_line_in_inspects_cli(tmp_path):
    cli = [sys.executable, "-m", "inspect_ai", "eval", "lakeshift/frozenlake", "-T", "decoding=beam"]
    cli += ["--model", "mockllm/model", "--log-dir", str(tmp_path)]
    proc = subprocess.run(cli, capture_output=True, text=True, timeout=300, check=False)
    printed = (proc.stdout + proc.stderr).strip()
    assert proc.returncode != 0 and "Traceback" not in printed
    assert printed == "-T decoding=beam: unknown (choose from greedy, frozen_ood)"


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["per_size=abc"], "-T per_size=abc: expected an integer, got str 'abc'"),
        (["samples=0"], "-T samples=0: must be an integer >= 1, got 0"),
        (
            ["splt=ood-dist"],
            "-T splt=ood-dist: not an argument of lakeshift/frozenlake (did you mean split?)",
        ),
    ],
)
def test_bad_numbers_and_unknown_names_are_one_line_in_inspects_cli(tmp_path, arguments, message):
    cli = [sys.executable, "-m", "inspect_ai", "eval", "lakeshift/frozenlake"]
    for argument in arguments:
        cli += ["-T", argument]
    cli += ["--model", "mockllm/model", "--log-dir", str(tmp_path)]
    proc = subprocess.run(cli, capture_output=True, text=True, timeout=300, check=False)
    printed = (proc.stdout + proc.stderr).strip()
    assert proc.returncode != 0 and "Traceback" not in printed
    assert len(printed.splitlines()) == 1 and printed.startswith(message), printed


def test_without_data_the_task_generates_the_suites_split(tmp_path, monkeypatch):
    monkeypatch.setenv("LAKESHIFT_CACHE", str(tmp_path / "cache"))
    task = frozenlake(split="ood-dist", input="grid", cot="none", suite="tiny", seed=3)
    assert (
        main(["generate", "--suite", "tiny", "--seed", "3", "--out", str(tmp_path / "g"), "--no-images"]) == 0
    )
    maps = [json.loads(x) for x in (tmp_path / "g" / "ood-dist" / "maps.jsonl").read_text().splitlines()]
    assert sorted(s.id for s in task.dataset) == sorted(m["id"] for m in maps)
    sft = map(json.loads, (tmp_path / "g" / "ood-dist" / "sft" / "grid__none.jsonl").read_text().splitlines())
    prompts = {r["id"]: r["messages"][1]["content"] for r in sft}
    assert all(s.input[-1].text == prompts[s.id] for s in task.dataset)
    assert all(s.metadata["d_inf"] >= 6 for s in task.dataset)


ENTRY_POINT_SCRIPT = """
import json, sys
from inspect_ai import eval
from inspect_ai.model import ModelOutput, ModelUsage, get_model

def answer(messages, tools, tool_choice, config):
    output = ModelOutput.from_content(model="mockllm", content="\\\\boxed{UP}")
    output.usage = ModelUsage(input_tokens=1, output_tokens=1, total_tokens=2)
    return output

task_args = {"split": "id-test", "input": "grid", "cot": "grid", "data": sys.argv[1]}
model = get_model("mockllm/model", custom_outputs=answer)
[log] = eval("lakeshift/frozenlake", task_args=task_args, model=model, log_dir=sys.argv[2], display="none")
print(json.dumps({"task": log.eval.task, "status": log.status, "n": len(log.samples),
                  "loaded": "lakeshift.integrations.inspect_ai" in sys.modules}))
"""


def test_the_task_name_resolves_through_the_inspect_ai_entry_point(data, tmp_path):
    """A fresh process that never imports lakeshift finds ``lakeshift/frozenlake`` by its entry point."""
    argv = [sys.executable, "-c", ENTRY_POINT_SCRIPT, str(data), str(tmp_path / "logs")]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result == {"task": "lakeshift/frozenlake", "status": "success", "n": 8, "loaded": True}


#: Variables that in-process libraries of earlier tests may leave in ``os.environ`` (accelerate's launcher
#: and plugins, torch.distributed, inspect's own) and that must not reach a fresh inspect process.
_LEAKED_ENV = ("ACCELERATE_", "FSDP_", "INSPECT_", "RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE")
_LEAKED_ENV_EXACT = {"MASTER_ADDR", "MASTER_PORT", "PYTHONHASHSEED"}


@pytest.mark.slow
def test_the_inspect_cli_with_a_local_hf_model_scores_as_lakeshift_score(data, tmp_path):
    """``inspect eval lakeshift/frozenlake`` from inspect's CLI, through its ``hf`` provider (transformers on
    CPU) with a small model trained here; every verdict equals ``lakeshift score`` on the logged outputs.

    The CLI runs as a user would start it: in its own folder, with an environment free of what earlier tests'
    libraries set in this process. inspect loads the tokenizer with ``AutoTokenizer``, which on a folder
    holding a Qwen2 ``config.json`` turns lakeshift's tokenizer into a ``Qwen2Tokenizer`` that drops spaces
    and newlines; the tokenizer files alone (``-M tokenizer_path``) load as saved."""
    run = tmp_path / "run"
    train = ["train", "--data", str(data), "--split", "id-test", "--input", "grid", "--cot", "grid"]
    train += ["--model", "micro", "--prompt", "map-only", "--max-steps", "2", "--out", str(run)]
    assert main(train) == 0
    tokenizer = tmp_path / "tokenizer"
    tokenizer.mkdir()
    for name in ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja"):
        shutil.copy(run / "model" / name, tokenizer / name)
    log_dir = tmp_path / "logs"
    argv = ["eval", "lakeshift/frozenlake", "-T", "split=id-test", "-T", "input=grid", "-T", "cot=grid"]
    argv += ["-T", f"data={data}", "-T", "prompt=map-only", "-T", "per_size=2"]
    # inspect's hf provider samples unless told not to; greedy (temperature 0) needs do_sample=false.
    argv += ["--model", "hf/micro", "-M", f"model_path={run / 'model'}", "-M", f"tokenizer_path={tokenizer}"]
    argv += ["-M", "do_sample=false", "--max-tokens", "24"]
    argv += ["--log-dir", str(log_dir), "--log-format", "json", "--display", "none"]
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(_LEAKED_ENV) and k not in _LEAKED_ENV_EXACT
    }
    cli = [sys.executable, "-m", "inspect_ai", *argv]
    workdir = tmp_path / "cwd"
    workdir.mkdir()
    proc = subprocess.run(cli, capture_output=True, text=True, timeout=600, check=False, cwd=workdir, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    [log_file] = log_dir.glob("*.json")
    log = json.loads(log_file.read_text())
    assert log["eval"]["task"] == "lakeshift/frozenlake"
    assert log["status"] == "success", json.dumps(log.get("error"))[-3000:]
    outputs = {s["id"]: s["output"]["choices"][0]["message"]["content"] for s in log["samples"]}
    assert len(outputs) == 4
    outputs = {
        k: v if isinstance(v, str) else "".join(p.get("text", "") for p in v) for k, v in outputs.items()
    }
    expected = _lakeshift_scores(data, outputs, tmp_path)
    for sample in log["samples"]:
        assert sample["scores"]["frozenlake_scorer"]["explanation"] == expected[sample["id"]]["verdict"]


@pytest.mark.slow
def test_the_lakeshift_provider_answers_as_lakeshift_predict_offline_from_inspects_cli(data, tmp_path):
    """``inspect eval lakeshift/frozenlake --model lakeshift/RUN`` on a cells model trained here: inspect's
    CLI, started as a user would, with the hub unreachable (any request would fail or retry), gives per map
    the output ``lakeshift predict`` gives the same run folder, greedy, and the verdicts ``lakeshift score``
    gives those outputs."""
    run = tmp_path / "run"
    train = ["train", "--data", str(data), "--split", "id-test", "--input", "grid", "--cot", "grid"]
    train += ["--model", "micro-cells", "--prompt", "map-only", "--max-steps", "60", "--out", str(run)]
    assert main(train) == 0
    preds = tmp_path / "predict.jsonl"
    predict = ["predict", "--model", str(run), "--data", str(data), "--split", "id-test"]
    assert main([*predict, "--max-new-tokens", "32", "--out", str(preds)]) == 0
    expected = {r["id"]: r["output"] for r in map(json.loads, preds.read_text().splitlines())}

    log_dir = tmp_path / "logs"
    argv = ["eval", "lakeshift/frozenlake", "-T", f"data={data}", "-T", "cot=grid", "-T", "prompt=map-only"]
    argv += ["--model", f"lakeshift/{run}", "--max-tokens", "32"]
    argv += ["--log-dir", str(log_dir), "--log-format", "json", "--display", "none"]
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(_LEAKED_ENV) and k not in _LEAKED_ENV_EXACT and k != "HF_HUB_OFFLINE"
    }
    env["HF_ENDPOINT"] = "http://127.0.0.1:9"  # nothing listens there: a hub request could not succeed
    workdir = tmp_path / "cwd"
    workdir.mkdir()
    cli = [sys.executable, "-m", "inspect_ai", *argv]
    proc = subprocess.run(cli, capture_output=True, text=True, timeout=600, check=False, cwd=workdir, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    [log_file] = log_dir.glob("*.json")
    log = json.loads(log_file.read_text())
    assert log["status"] == "success", json.dumps(log.get("error"))[-3000:]
    assert log["plan"]["config"]["temperature"] == 0.0
    outputs = {s["id"]: s["output"]["choices"][0]["message"]["content"] for s in log["samples"]}
    assert outputs == expected
    assert len(set(outputs.values())) > 1  # the maps got different answers: the prompts reached the model
    verdicts = _lakeshift_scores(data, outputs, tmp_path)
    for sample in log["samples"]:
        assert sample["scores"]["frozenlake_scorer"]["explanation"] == verdicts[sample["id"]]["verdict"]


@pytest.mark.slow
def test_the_lakeshift_provider_gives_a_vision_model_the_maps_images(data, tmp_path):
    """A tiny-vl run trained on image input, through ``--model lakeshift/RUN`` with ``-T input=image``: the
    PNG each sample carries reaches the model as ``lakeshift predict`` gives it (the same outputs)."""
    run = tmp_path / "run"
    train = ["train", "--data", str(data), "--split", "id-test", "--input", "image", "--cot", "grid"]
    train += ["--model", "tiny-vl", "--max-steps", "2", "--out", str(run)]
    assert main(train) == 0
    preds = tmp_path / "predict.jsonl"
    predict = ["predict", "--model", str(run), "--data", str(data), "--split", "id-test", "--per-size", "1"]
    assert main([*predict, "--max-new-tokens", "12", "--out", str(preds)]) == 0
    expected = {r["id"]: r["output"] for r in map(json.loads, preds.read_text().splitlines())}
    task = frozenlake(split="id-test", input="image", cot="grid", data=str(data), per_size=1)
    [log] = inspect_eval(
        task, model=f"lakeshift/{run}", max_tokens=12, log_dir=str(tmp_path / "logs"), display="none"
    )
    assert log.status == "success", log.error
    assert {s.id: s.output.completion for s in log.samples} == expected


def test_a_model_the_provider_cannot_load_is_one_line_in_inspects_cli(tmp_path):
    cli = [sys.executable, "-m", "inspect_ai", "eval", "lakeshift/frozenlake", "-T", "suite=tiny"]
    cli += ["--model", f"lakeshift/{tmp_path / 'no-such-run'}", "--log-dir", str(tmp_path / "logs")]
    env = {**os.environ, "LAKESHIFT_CACHE": str(tmp_path / "cache"), "COLUMNS": "300"}
    proc = subprocess.run(cli, capture_output=True, text=True, timeout=300, check=False, env=env)
    printed = (proc.stdout + proc.stderr).strip()
    assert "Traceback" not in printed
    assert printed.startswith(f"--model lakeshift/{tmp_path / 'no-such-run'}: unknown model"), printed


@pytest.mark.slow
@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (
            ["--max-tokens", "40000"],
            "--max-tokens 40000: the model has 32768 positions for the prompt and the",
        ),
        (
            ["-M", "temperature=0"],
            "-M temperature: not an argument of the lakeshift provider (takes batch_size",
        ),
        (["-M", "batch_size=0"], "-M batch_size=0: must be an integer >= 1, got 0"),
    ],
)
def test_what_the_provider_cannot_honour_is_one_line_before_any_sample(tmp_path, arguments, message):
    """A shipped base model through the provider: settings it cannot honour are refused before the eval."""
    cli = [sys.executable, "-m", "inspect_ai", "eval", "lakeshift/frozenlake", "-T", "suite=tiny"]
    cli += ["--model", "lakeshift/mini-cells-base", *arguments, "--log-dir", str(tmp_path / "logs")]
    env = {**os.environ, "LAKESHIFT_CACHE": str(tmp_path / "cache"), "COLUMNS": "300"}
    proc = subprocess.run(cli, capture_output=True, text=True, timeout=300, check=False, env=env)
    printed = "\n".join(
        line for line in (proc.stdout + proc.stderr).splitlines() if "Loading weights" not in line
    )
    assert "Traceback" not in printed and not list((tmp_path / "logs").glob("*"))
    assert printed.strip().startswith(message), printed


@pytest.mark.slow
def test_the_provider_answers_requests_that_arrive_together_in_one_backend_call(data, tmp_path, monkeypatch):
    """inspect sends one request per sample; the provider hands those that arrive together to one
    ``HFBackend.run`` (one batch), with inspect's settings as the decoding."""
    from lakeshift.models.backends.hf import HFBackend

    calls: list[tuple[int, object]] = []
    run = HFBackend.run

    def counted(self, items, decoding, emit):
        calls.append((len(items), decoding))
        return run(self, items, decoding, emit)

    monkeypatch.setattr(HFBackend, "run", counted)
    task = frozenlake(split="id-test", input="grid", cot="grid", data=str(data), prompt="map-only")
    [log] = inspect_eval(
        task, model="lakeshift/mini-cells-base", max_tokens=8, log_dir=str(tmp_path / "logs"), display="none"
    )
    assert log.status == "success" and len(log.samples) == 8
    assert [n for n, _ in calls] == [8]
    decoding = calls[0][1]
    assert (decoding.max_new_tokens, decoding.temperature, decoding.greedy) == (8, 0.0, True)
