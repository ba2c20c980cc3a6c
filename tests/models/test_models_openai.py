"""The ``openai`` backend against a real chat-completions server on localhost (stdlib ``http.server``)."""

from __future__ import annotations

import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

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


class KeepAliveOpenAI:
    """An HTTP/1.1 chat-completions server, as real ones are: it keeps connections open and counts them,
    fails the first requests as told, and answers the prompts in ``refuse`` the way a content filter does
    (``"null"``: ``content: null``; ``"filter"``: that with ``finish_reason: content_filter``; ``"400"``:
    Azure's HTTP 400 ``content_filter`` error). ``drop_idle``: close each connection silently after its
    answer, as a server whose keep-alive timeout ran out."""

    def __init__(
        self,
        answers: dict[str, str],
        refuse: dict[str, str] | None = None,
        failures: tuple[int, ...] = (),
        drop_idle: bool = False,
    ) -> None:
        self.answers, self.refuse, self.failures = answers, refuse or {}, list(failures)
        self.connections = 0
        self.asked: list[str] = []
        lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def setup(self):
                super().setup()
                with lock:
                    outer.connections += 1

            def log_message(self, *args):
                pass

            def _send(self, code: int, body: dict, headers: dict | None = None) -> None:
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for key, value in (headers or {}).items():
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(data)
                self.close_connection = drop_idle

            def do_GET(self):
                self._send(200, {"data": [{"id": "fake"}]})

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                user = body["messages"][1]["content"]
                with lock:
                    failure = outer.failures.pop(0) if outer.failures else None
                    outer.asked.append(user)
                if failure:
                    self._send(failure, {"error": {"message": "busy"}}, {"Retry-After": "0"})
                    return
                kind = outer.refuse.get(user)
                if kind == "400":
                    error = {"code": "content_filter", "message": "filtered by the content management policy"}
                    self._send(400, {"error": error})
                    return
                text = None if kind else outer.answers.get(user, "\\boxed{UP}")
                finish = "content_filter" if kind == "filter" else "stop"
                choice = {"message": {"role": "assistant", "content": text}, "finish_reason": finish}
                self._send(200, {"choices": [choice], "usage": {"completion_tokens": 3}})

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _retry_lines(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("lakeshift predict: openai:")]


def test_requests_reuse_kept_alive_connections(data, tmp_path, capsys):
    server = KeepAliveOpenAI(_answers(data))
    try:
        assert _predict(data, tmp_path / "p.jsonl", server.url, "--concurrency", "2") == 0
    finally:
        server.close()
    assert len(server.asked) == 6
    assert server.connections <= 1 + 2  # the reachability check's, then one per request in flight
    assert _retry_lines(capsys.readouterr().err) == []


def test_a_connection_the_server_closed_while_idle_is_replaced_without_a_retry(data, tmp_path, capsys):
    server = KeepAliveOpenAI(_answers(data), drop_idle=True)
    out = tmp_path / "p.jsonl"
    try:
        assert _predict(data, out, server.url, "--concurrency", "1") == 0
    finally:
        server.close()
    assert len(server.asked) == 6 and len(out.read_text().splitlines()) == 6
    assert _retry_lines(capsys.readouterr().err) == []


def test_each_retry_is_one_line_on_stderr(data, tmp_path, capsys):
    server = KeepAliveOpenAI(_answers(data), failures=(500, 429))
    try:
        assert _predict(data, tmp_path / "p.jsonl", server.url, "--concurrency", "1", "--limit", "1") == 0
    finally:
        server.close()
    lines = _retry_lines(capsys.readouterr().err)
    assert len(lines) == 2
    assert "HTTP 500" in lines[0] and "retry 1 of 6" in lines[0]
    assert "HTTP 429" in lines[1] and "retry 2 of 6 in 0.0 s" in lines[1]  # Retry-After: 0 honoured


def test_a_prompt_the_server_will_not_answer_is_recorded_as_no_answer_and_the_run_goes_on(
    data, tmp_path, capsys
):
    answers = _answers(data)
    prompts = sorted(answers)
    refuse = {prompts[0]: "null", prompts[1]: "filter", prompts[2]: "400"}
    server = KeepAliveOpenAI(answers, refuse=refuse)
    out = tmp_path / "p.jsonl"
    try:
        assert _predict(data, out, server.url, "--max-retries", "1") == 0
        asked = len(server.asked)
        assert asked == 6 + 1  # content: null was asked twice; a filtered prompt once
        assert _predict(data, out, server.url, "--max-retries", "1") == 0  # the rerun asks nothing again
        assert len(server.asked) == asked
    finally:
        server.close()
    err = capsys.readouterr().err
    rows = {r["id"]: r for r in map(json.loads, out.read_text().splitlines())}
    assert len(rows) == 6
    user = {json.loads(x)["id"]: json.loads(x)["messages"][1]["content"] for x in _sft_lines(data)}
    refused = {mid: rows[mid] for mid in rows if user[mid] in refuse}
    assert len(refused) == 3 and all(r["output"] == "" for r in refused.values())
    reasons = {refuse[user[mid]]: r for mid, r in refused.items()}
    assert "content: null" in reasons["null"]["error"] and "2 tries" in reasons["null"]["error"]
    assert reasons["filter"]["finish_reason"] == "content_filter"
    assert "content_filter" in reasons["400"]["error"] and "HTTP 400" in reasons["400"]["error"]
    assert sum("recorded as no_answer" in line for line in _retry_lines(err)) == 3
    scored = tmp_path / "scored.jsonl"
    assert (
        main(
            [
                "score",
                "--maps",
                str(data / "id-test" / "maps.jsonl"),
                "--predictions",
                str(out),
                "--out",
                str(scored),
            ]
        )
        == 0
    )
    records = {r["id"]: r for r in map(json.loads, scored.read_text().splitlines())}
    assert {records[mid]["verdict"] for mid in refused} == {"no_answer"}
    assert all(records[mid]["verdict"] == "success" for mid in rows if mid not in refused)
    # The server's reason is the scored detail, not an extraction's "no \boxed{}" of an empty output ...
    for mid, row in refused.items():
        assert records[mid]["detail"] == f"the server gave no answer: {row['error']}"
    # ... and the report's failure browser shows it beside the (empty) output.
    runs, report = tmp_path / "runs", tmp_path / "report"
    (runs / "fake").mkdir(parents=True)
    (runs / "fake" / "id-test.jsonl").write_text(out.read_text())
    argv = ["report", str(runs), "--data", str(data), "--out", str(report), "--no-baselines"]
    assert main(argv) == 0
    html = (report / "report.html").read_text(encoding="utf-8")
    blob = re.search(r'<script type="application/json" id="report-data">(.*?)</script>', html, re.S)
    assert blob is not None
    shown = {e["id"]: e for e in json.loads(blob.group(1))["examples"]}
    assert set(refused) <= set(shown)
    for mid, row in refused.items():
        assert shown[mid]["output"] == "" and row["error"] in shown[mid]["detail"]


def _sft_lines(data) -> list[str]:
    return (data / "id-test" / "sft" / "grid__none.jsonl").read_text().splitlines()
