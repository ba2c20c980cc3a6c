"""Small data folders for the model tests, made by the real pipeline (``lakeshift generate``).

The model tests need a handful of maps in the on-disk layout that ``lakeshift train`` / ``predict`` read.
They get it from the generator itself, so they exercise the real prompts, traces and formats; tests that
train a model to memorise its maps pass ``--prompt map-only`` to keep the conversations short.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from lakeshift.cli import main


def generate_split(
    root: Path,
    split: str,
    *,
    sizes: Sequence[int] = (3,),
    count: int = 4,
    inputs: Sequence[str] = ("grid",),
    cots: Sequence[str] = ("none",),
    images: bool = False,
    train: bool = False,
    seed: int = 0,
) -> Path:
    """Writes ``root/<split>`` with ``count`` maps of each size through ``lakeshift generate``.

    Args:
        root: the data folder (``--data`` of train/predict).
        split: the split name (map ids are ``<split>-00000``, ...).
        sizes: map sizes.
        count: maps per size.
        inputs: input formats of the SFT files (``image`` needs ``images=True``).
        cots: CoT formats of the SFT files.
        images: write the PNGs (and the ``image__*`` files); off keeps the fixture fast.
        train: a training split (the "train" prompt variant).
        seed: the suite seed.

    Returns:
        The split folder.
    """
    argv = ["generate", "--out", str(root), "--split", split, "--sizes", *map(str, sizes)]
    argv += ["--count", str(count), "--hole-prob", "0.2", "--seed", str(seed)]
    argv += ["--inputs", ",".join(inputs), "--cots", ",".join(cots), "--workers", "1", "--no-progress"]
    if train:
        argv.append("--train")
    if not images:
        argv.append("--no-images")
    code = main(argv)
    if code != 0:
        raise RuntimeError(f"lakeshift {' '.join(argv)} exited {code}")
    return Path(root) / split


class FakeOpenAI:
    """Answers each prompt with its reference completion; fails the first two requests (500, then 429)."""

    def __init__(self, answers: dict[str, str], failures: tuple[int, ...] = (500, 429)) -> None:
        self.answers = answers
        self.failures = list(failures)
        self.requests: list[dict] = []
        self.lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep pytest output clean
                pass

            def _send(self, code: int, body: dict, headers: dict | None = None) -> None:
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                self._send(200, {"data": [{"id": "fake"}]})

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with outer.lock:
                    failure = outer.failures.pop(0) if outer.failures else None
                    outer.requests.append(
                        {**body, "failed": failure, "auth": self.headers.get("Authorization")}
                    )
                if failure:
                    self._send(
                        failure, {"error": "try again"}, {"Retry-After": "0"} if failure == 429 else {}
                    )
                    return
                if body["model"] != "fake":
                    self._send(400, {"error": {"message": f"model {body['model']} does not exist"}})
                    return
                user = body["messages"][1]["content"]
                key = user if isinstance(user, str) else "image"
                text = outer.answers.get(key, "\\boxed{UP}")
                self._send(
                    200,
                    {
                        "choices": [
                            {"message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
                        ],
                        "usage": {"completion_tokens": len(text.split())},
                    },
                )

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def leaning_head(tokenizer: Any, hidden: int, pieces: Sequence[str]) -> Any:
    """An output layer of a random model leaning to ``pieces`` (tokens of ``tokenizer``): its answers go on
    writing them (a random model's answers otherwise wander off any format)."""
    import torch

    vocab = tokenizer.get_vocab()
    head = torch.nn.Linear(hidden, len(tokenizer), bias=True)
    with torch.no_grad():
        head.weight.normal_(0, 0.3)
        head.bias.fill_(-4.0)
        for piece in pieces:
            head.bias[vocab[piece]] = 0.0
    return head
