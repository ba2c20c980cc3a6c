"""Decoding presets (``predict --decoding``) and repeated sampling (``--samples K``, pass@k and maj@k).

The ``openai`` backend runs against a local chat-completions server whose answer depends on the request's
seed, so the K samples of a map differ as they would on a real sampling server; ``vllm`` runs against a
stand-in module that records what it is asked. pass@k and maj@k are checked against the scorer run on each
sample by hand.
"""

from __future__ import annotations

import csv
import json
import sys
import threading
import types
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from model_fixtures import generate_split

from lakeshift.cli import main
from lakeshift.models.generation import Decoding, PromptItem, preset_decoding
from lakeshift.scoring import load_scoring_maps, majority_index, score_output

# The answer of sample i (request seed = the run's seed + i): a wrong move, the reference, another move.
WRONG, OTHER = "\\boxed{UP}", "\\boxed{DOWN}"


class SeededServer:
    """A chat-completions server answering sample ``seed - base_seed`` of a prompt (see :data:`WRONG`)."""

    def __init__(self, references: dict[str, str], base_seed: int) -> None:
        self.requests: list[dict] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _send(self, body: dict) -> None:
                data = json.dumps(body).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                self._send({"data": [{"id": "fake"}]})

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.requests.append(body)
                index = body.get("seed", base_seed) - base_seed
                text = [WRONG, references[body["messages"][1]["content"]], OTHER][index % 3]
                message = {"message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
                self._send({"choices": [message], "usage": {"completion_tokens": 3}})

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("d")
    generate_split(root, "id-test", sizes=(3, 4), count=3, seed=3)
    return root


def _records(data: Path) -> list[dict]:
    return [json.loads(x) for x in (data / "id-test" / "sft" / "grid__none.jsonl").read_text().splitlines()]


def _references(data: Path) -> dict[str, str]:
    return {r["messages"][1]["content"]: r["messages"][2]["content"] for r in _records(data)}


def _predict(data: Path, url: str, out: Path, *extra: str) -> int:
    argv = ["predict", "--backend", "openai", "--model", "fake", "--base-url", url, "--data", str(data)]
    return main([*argv, "--input", "grid", "--out", str(out), *extra])


def test_frozen_ood_samples_are_recorded_and_scored_as_pass_and_majority(data, tmp_path, capsys):
    server = SeededServer(_references(data), base_seed=42)
    out = tmp_path / "p.jsonl"
    try:
        assert _predict(data, server.url, out, "--decoding", "frozen_ood", "--samples", "3") == 0
        assert _predict(data, server.url, out, "--decoding", "frozen_ood", "--samples", "3") == 0  # all done
    finally:
        server.close()
    # The official script's settings, one request per sample, each seeded 42 + sample.
    assert len(server.requests) == 6 * 3
    assert {(r["temperature"], r["top_p"]) for r in server.requests} == {(0.7, 0.9)}
    assert sorted(r["seed"] for r in server.requests) == [42] * 6 + [43] * 6 + [44] * 6
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    assert len(rows) == 6
    for row in rows:
        assert row["decoding"] == {
            "greedy": False,
            "max_new_tokens": None,
            "temperature": 0.7,
            "top_p": 0.9,
            "seed": 42,
            "preset": "frozen_ood",
        }
        outputs = [s["output"] for s in row["samples"]]
        assert row["n_samples"] == 3 and outputs[0] == row["output"] == WRONG and outputs[2] == OTHER

    maps_path = data / "id-test" / "maps.jsonl"
    scored_path = tmp_path / "scored.jsonl"
    capsys.readouterr()
    assert (
        main(["score", "--maps", str(maps_path), "--predictions", str(out), "--out", str(scored_path)]) == 0
    )
    printed = capsys.readouterr().out
    maps = load_scoring_maps(maps_path)
    scored = {r["id"]: r for r in map(json.loads, scored_path.read_text().splitlines())}
    for row in rows:
        by_sample = [score_output(maps[row["id"]], s["output"]) for s in row["samples"]]
        rec = scored[row["id"]]
        assert rec["success"] == by_sample[0].success
        assert rec["pass_at_k"] is True  # the reference is one of the samples
        # Three different plans tie: the first sample's plan wins.
        assert rec["maj_at_k"] == by_sample[0].success
        assert rec["n_samples"] == 3 and rec["decoding"] == "frozen_ood"
    n_maj = sum(r["maj_at_k"] for r in scored.values())
    assert "decoding: frozen_ood" in printed
    assert f"repeated samples (k = 3): pass@k 6/6 = 1.000, maj@k {n_maj}/6" in printed


def test_majority_counts_plans_not_texts(data, tmp_path):
    """Two samples writing one plan differently outvote a third: maj@k follows the parsed moves."""
    maps_path = data / "id-test" / "maps.jsonl"
    maps = load_scoring_maps(maps_path)
    mid, sm = next(iter(maps.items()))
    plan = sm.record["optimal_path"]
    letters = "".join(m[0] for m in plan)
    samples = [WRONG, f"\\boxed{{{', '.join(plan)}}}", f"so \\boxed{{{letters}}}"]
    row = {"id": mid, "output": samples[0], "samples": [{"output": s} for s in samples], "n_samples": 3}
    preds = tmp_path / "p.jsonl"
    preds.write_text(json.dumps(row) + "\n")
    scored = tmp_path / "s.jsonl"
    assert main(["score", "--maps", str(maps_path), "--predictions", str(preds), "--out", str(scored)]) == 0
    records = {r["id"]: r for r in map(json.loads, scored.read_text().splitlines())}
    assert records[mid]["maj_at_k"] is True and records[mid]["samples_success"] == 2
    assert records[mid]["success"] is False
    # The other maps of the file have no prediction: they fail pass@k and maj@k like accuracy.
    others = [r for i, r in records.items() if i != mid]
    assert others and not any(r["pass_at_k"] or r["maj_at_k"] for r in others)


@settings(deadline=None)  # timing is not the property; the machine may be busy
@given(st.lists(st.sampled_from([(), ("U",), ("D",), ("U", "D"), ("L", "L")]), max_size=8))
def test_majority_index_is_the_first_of_the_most_frequent_plans(plans):
    index = majority_index(plans)
    voting = [p for p in plans if p]
    if not voting:
        assert index is None
        return
    assert index is not None
    top = max(voting.count(p) for p in voting)
    assert plans[index] and voting.count(plans[index]) == top
    # No plan as frequent appears before it.
    assert all(not p or voting.count(p) < top for p in plans[:index])


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--samples", "2"], "--samples 2: greedy decoding answers every sample alike"),
        (["--decoding", "greedy", "--samples", "3"], "--samples 3: greedy decoding"),
        (["--decoding", "frozen_ood", "--temperature", "0.5"], "--decoding frozen_ood sets the sampling"),
        (["--decoding", "frozen_ood", "--seed", "1"], "drop --seed"),
    ],
)
def test_impossible_decoding_requests_are_one_line(data, tmp_path, capsys, extra, message):
    out = tmp_path / "p.jsonl"
    # No server runs at this URL: the request is refused before any API is contacted.
    assert _predict(data, "http://127.0.0.1:9/v1", out, *extra) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert not out.exists()


def test_a_file_of_another_decoding_or_sample_count_is_not_resumed(data, tmp_path, capsys):
    server = SeededServer(_references(data), base_seed=42)
    out = tmp_path / "p.jsonl"
    try:
        assert _predict(data, server.url, out, "--limit", "1") == 0
        assert _predict(data, server.url, out, "--decoding", "frozen_ood") == 2
        assert "field 'decoding'" in capsys.readouterr().err
        sampled = tmp_path / "s.jsonl"
        assert (
            _predict(data, server.url, sampled, "--decoding", "frozen_ood", "--samples", "2", "--limit", "1")
            == 0
        )
        assert _predict(data, server.url, sampled, "--decoding", "frozen_ood", "--samples", "3") == 2
        assert "field 'n_samples'" in capsys.readouterr().err
    finally:
        server.close()


def test_report_keeps_two_decodings_of_one_model_apart_with_pass_and_maj_columns(data, tmp_path):
    server = SeededServer(_references(data), base_seed=42)
    runs = tmp_path / "runs"
    try:
        assert _predict(data, server.url, runs / "greedy.jsonl", "--name", "m") == 0
        argv = ["--name", "m", "--decoding", "frozen_ood", "--samples", "3"]
        assert _predict(data, server.url, runs / "sampled.jsonl", *argv) == 0
    finally:
        server.close()
    out = tmp_path / "report"
    assert main(["report", str(runs), "--data", str(data), "--out", str(out), "--no-baselines"]) == 0
    table = (out / "summary.md").read_text()
    assert "pass@k" in table and "maj@k" in table and "k = 3" in table
    lines = {line.split("|")[3].strip(): line for line in table.splitlines() if line.startswith("| Grid")}
    assert set(lines) == {"m", "m@frozen_ood"}
    with (out / "by_split.csv").open() as f:
        rows = {r["model"]: r for r in csv.DictReader(f)}
    assert rows["m"]["n"] == rows["m@frozen_ood"]["n"] == "6"  # never pooled into one run of 12
    assert rows["m"]["pass_at_k"] == "" and float(rows["m@frozen_ood"]["pass_at_k"]) == 1.0
    assert "decoding: frozen_ood, greedy" in (out / "report.html").read_text()


class _FakeSamplingParams:
    def __init__(self, **settings):
        self.__dict__.update(settings)


def test_vllm_takes_the_models_defaults_under_a_preset_and_seeds_each_sample(monkeypatch):
    asked: list[list[_FakeSamplingParams]] = []

    class FakeLLM:
        def get_default_sampling_params(self):
            # What vLLM reads from the model's generation_config.json.
            return _FakeSamplingParams(temperature=0.1, top_p=0.001, top_k=1, repetition_penalty=1.05)

        def get_tokenizer(self):
            return types.SimpleNamespace(eos_token_id=2, convert_tokens_to_ids=lambda token: 7)

        def chat(self, conversations, params, use_tqdm):
            asked.append(params)
            completion = types.SimpleNamespace(text="\\boxed{UP}", token_ids=[1, 2], finish_reason="stop")
            return [types.SimpleNamespace(outputs=[completion]) for _ in conversations]

    fake = types.SimpleNamespace(SamplingParams=_FakeSamplingParams, LLM=lambda **kwargs: FakeLLM())
    monkeypatch.setitem(sys.modules, "vllm", fake)
    from lakeshift.models.backends.vllm import VLLMBackend

    backend = object.__new__(VLLMBackend)  # the model folder is not what is tested here
    backend._vllm, backend._llm = fake, FakeLLM()
    items = [PromptItem("a", [], sample=0), PromptItem("a", [], sample=1)]
    got: list[str] = []
    backend.run(items, preset_decoding("frozen_ood", 64), lambda item, gen: got.append(gen.text))
    first, second = asked[0]
    assert (first.temperature, first.top_p, first.max_tokens) == (0.7, 0.9, 64)
    assert (first.top_k, first.repetition_penalty) == (1, 1.05)  # left to the model, as the official script
    assert (first.seed, second.seed) == (42, 43) and first.stop_token_ids and len(got) == 2
    # Without a preset: plain temperature and top-p sampling, nothing inherited.
    asked.clear()
    backend.run(items[:1], Decoding(64, 0.5, 0.8, 7), lambda item, gen: None)
    assert not hasattr(asked[0][0], "top_k") and asked[0][0].seed == 7


def test_a_study_key_chooses_the_decoding_and_its_mistakes_name_the_line(tmp_path, capsys):
    from lakeshift.studies import load_study

    base = "name: s\ndata: {suite: tiny, cots: [none]}\nmodels:\n  - {input: grid, cot: none}\n"
    good = tmp_path / "good.yaml"
    good.write_text(base + "predict: {decoding: frozen_ood, samples: 4}\n")
    stages = [s for s in load_study(good, tmp_path).stages if s.kind == "predict"]
    assert stages and all(
        s.argv[s.argv.index("--decoding") + 1] == "frozen_ood"
        and s.argv[s.argv.index("--samples") + 1] == "4"
        for s in stages
    )
    greedy = tmp_path / "greedy.yaml"
    greedy.write_text(base.replace("cot: none}", "cot: none, predict: {samples: 2}}"))
    assert main(["run", str(greedy), "--dry-run"]) == 2
    assert f"{greedy}:4: models[0].predict.samples: repeated samples need sampled" in capsys.readouterr().err
    unknown = tmp_path / "unknown.yaml"
    unknown.write_text(base + "predict: {decoding: beam}\n")
    assert main(["run", str(unknown), "--dry-run"]) == 2
    assert f"{unknown}:5: predict.decoding: expected one of greedy, frozen_ood, got 'beam'" in (
        capsys.readouterr().err
    )


@pytest.mark.slow
@pytest.mark.parametrize("engine", ["generate", "continuous"])
def test_hf_passes_the_preset_to_the_engine_and_leaves_top_k_to_the_model(
    data, tmp_path, monkeypatch, engine
):
    """A small random model through ``lakeshift predict --backend hf``: the preset's settings reach the
    engine and top-k is left to the model's generation config; plain sampling turns top-k off."""
    from transformers import Qwen2ForCausalLM

    from lakeshift.models.backends import continuous
    from lakeshift.models.registry import build_named

    texts = [r["messages"][1]["content"] + r["messages"][2]["content"] for r in _records(data)]
    model, tokenizer = build_named("micro", texts)
    folder = tmp_path / "model"
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    model_top_k = model.generation_config.top_k
    keys = ("do_sample", "temperature", "top_p", "top_k")
    calls: list[dict] = []
    if engine == "generate":
        original = Qwen2ForCausalLM.generate

        def recording(self, *args, **kwargs):
            calls.append({k: v for k, v in kwargs.items() if k in keys})
            return original(self, *args, **kwargs)

        monkeypatch.setattr(Qwen2ForCausalLM, "generate", recording)
    else:
        original_decode = continuous.decode

        def recording_decode(*args, **kwargs):
            sampling = kwargs["sampling"]
            calls.append({"do_sample": True, **{k: getattr(sampling, k) for k in keys[1:]}})
            return original_decode(*args, **kwargs)

        monkeypatch.setattr(continuous, "decode", recording_decode)
    argv = ["predict", "--model", str(folder), "--data", str(data), "--input", "grid", "--limit", "2"]
    argv += ["--max-new-tokens", "2", "--prompt", "map-only", "--engine", engine]
    out = tmp_path / "p.jsonl"
    assert main([*argv, "--out", str(out), "--decoding", "frozen_ood", "--samples", "2"]) == 0
    preset = {"do_sample": True, "temperature": 0.7, "top_p": 0.9}
    # generate takes top-k from the model's generation config when none is passed; continuous is given it
    if engine == "continuous":
        preset["top_k"] = model_top_k
    assert calls and all(c == preset for c in calls)
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    assert len(rows) == 2 and all(
        len(r["samples"]) == 2 and r["decoding"]["preset"] == "frozen_ood" for r in rows
    )
    calls.clear()
    assert main([*argv, "--out", str(tmp_path / "t.jsonl"), "--temperature", "0.7", "--top-p", "0.9"]) == 0
    assert calls and all(c["top_k"] is None for c in calls)
