"""The ``openai`` backend against a real chat-completions server on localhost (stdlib ``http.server``)."""

from __future__ import annotations

import json

import pytest
from model_fixtures import FakeOpenAI, generate_split

from lakeshift import formats
from lakeshift.cli import main
from lakeshift.data.maps import load_maps, map_from_record


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("d")
    generate_split(root, "id-test", sizes=(3, 4), count=3, inputs=("grid", "image"), images=True, seed=3)
    return root


def _ids(data) -> list[str]:
    return [m["id"] for m in load_maps(data / "id-test")]


def _answers(data) -> dict[str, str]:
    out = {}
    for line in (data / "id-test" / "sft" / "grid__none.jsonl").read_text().splitlines():
        rec = json.loads(line)
        out[rec["messages"][1]["content"]] = rec["messages"][2]["content"]
    return out


def _predict(data, out, url, *extra):
    argv = ["predict", "--backend", "openai", "--model", "fake", "--base-url", url, "--data", str(data)]
    return main([*argv, "--input", "grid", "--out", str(out), "--concurrency", "3", *extra])


def test_retries_then_resumes_without_repeating_work(data, tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    server = FakeOpenAI(_answers(data))
    out = tmp_path / "p.jsonl"
    try:
        assert _predict(data, out, server.url, "--limit", "2") == 0
        assert [r["failed"] for r in server.requests[:2]] == [500, 429]  # both retried
        assert _predict(data, out, server.url) == 0
    finally:
        server.close()
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    assert sorted(r["id"] for r in rows) == sorted(_ids(data))
    ok_requests = [r for r in server.requests if not r["failed"]]
    assert len(ok_requests) == 6  # the 2 finished ids were not asked again
    assert all(r["auth"] == "Bearer sk-test" for r in server.requests)
    assert "max_tokens" not in ok_requests[0] and ok_requests[0]["temperature"] == 0.0
    answers = _answers(data)
    by_id = {
        json.loads(x)["id"]: json.loads(x)["messages"][2]["content"]
        for x in (data / "id-test" / "sft" / "grid__none.jsonl").read_text().splitlines()
    }
    assert all(r["output"] == by_id[r["id"]] and r["backend"] == "openai" for r in rows)
    assert all(r["prompt"] == "mirage" for r in rows)  # the default without a run folder
    assert len(answers) == 6


def test_interrupted_file_with_a_torn_line_is_repaired_and_completed(data, tmp_path):
    server = FakeOpenAI(_answers(data), failures=())
    out = tmp_path / "p.jsonl"
    try:
        assert _predict(data, out, server.url, "--limit", "1") == 0
        with out.open("a") as f:
            f.write(f'{{"id": "{_ids(data)[1]}", "output": "\\\\boxed{{UP')  # a crash mid-write
        assert _predict(data, out, server.url) == 0
    finally:
        server.close()
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    assert sorted(r["id"] for r in rows) == sorted(_ids(data))


def test_images_go_as_data_urls(data, tmp_path):
    server = FakeOpenAI({}, failures=())
    try:
        argv = [
            "predict",
            "--backend",
            "openai",
            "--model",
            "fake",
            "--base-url",
            server.url,
            "--data",
            str(data),
        ]
        assert main([*argv, "--input", "image", "--out", str(tmp_path / "i.jsonl"), "--limit", "1"]) == 0
    finally:
        server.close()
    parts = server.requests[0]["messages"][1]["content"]
    urls = [p["image_url"]["url"] for p in parts if p["type"] == "image_url"]
    assert len(urls) == 1 and urls[0].startswith("data:image/png;base64,iVBOR")


def test_client_errors_and_changed_settings_are_clear(data, tmp_path, capsys):
    server = FakeOpenAI(_answers(data), failures=())
    out = tmp_path / "p.jsonl"
    try:
        argv = ["predict", "--backend", "openai", "--model", "gpt-none", "--base-url", server.url]
        assert main([*argv, "--data", str(data), "--input", "grid", "--out", str(out)]) == 2
        assert "HTTP 400" in capsys.readouterr().err
        assert _predict(data, out, server.url, "--limit", "1") == 0
        assert _predict(data, out, server.url, "--temperature", "0.7") == 2
        assert "decoding" in capsys.readouterr().err
    finally:
        server.close()


def test_per_size_covers_every_size_and_map_only_sends_just_the_map(data, tmp_path):
    server = FakeOpenAI({}, failures=())
    out, image_out = tmp_path / "p.jsonl", tmp_path / "i.jsonl"
    try:
        assert _predict(data, out, server.url, "--per-size", "2", "--prompt", "map-only") == 0
        argv = ["predict", "--backend", "openai", "--model", "fake", "--base-url", server.url]
        argv += ["--data", str(data), "--input", "image", "--prompt", "map-only", "--limit", "1"]
        assert main([*argv, "--out", str(image_out)]) == 0
    finally:
        server.close()
    maps = {m["id"]: m for m in load_maps(data / "id-test")}
    first_two = [i for s in (3, 4) for i in [k for k, m in maps.items() if m["size"] == s][:2]]
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    assert sorted(r["id"] for r in rows) == sorted(first_two)
    assert all(r["prompt"] == "map-only" for r in rows)
    sent = sorted(r["messages"][1]["content"] for r in server.requests[:4])
    assert sent == sorted(formats.render(map_from_record(maps[i]), "grid") for i in first_two)
    image_user = server.requests[4]["messages"][1]["content"]
    assert [p["type"] for p in image_user] == ["image_url"]
