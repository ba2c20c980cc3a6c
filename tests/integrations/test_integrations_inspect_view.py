"""inspect's own viewer (``inspect view``) in a real headless Chromium shows the task's metrics by name.

inspect's viewer strips trailing digits from the names of a grouped metric, so names such as ``size=7``
showed as ``size=`` with their values unlabelled. The test writes a log with inspect's ``mockllm`` model,
serves it with ``inspect view``, opens it in Chromium over the DevTools protocol, clicks "All scoring..." as
a user would and reads the dialog.

Needs Debian's ``chromium`` (skips without it) and inspect_ai (its ``aiohttp`` speaks the protocol).
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from model_fixtures import generate_split

pytest.importorskip(
    "inspect_ai", reason="the inspect extra is not installed: pip install 'lakeshift[inspect]'"
)

import aiohttp  # inspect_ai's dependency: it speaks the DevTools protocol here
from inspect_ai import eval as inspect_eval
from inspect_ai.model import ModelOutput, ModelUsage, get_model

from lakeshift.integrations.inspect_ai import frozenlake

pytestmark = pytest.mark.slow

_CLICK = """(() => {
  const hits = [...document.querySelectorAll('a, button, [role=button], span, div')]
    .filter(e => e.innerText && e.innerText.trim() === 'All scoring...');
  if (!hits.length) return false;
  hits[hits.length - 1].click();
  return true;
})()"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _answer(messages, tools, tool_choice, config) -> ModelOutput:
    output = ModelOutput.from_content(model="mockllm", content="\\boxed{UP}")
    output.usage = ModelUsage(input_tokens=1, output_tokens=1, total_tokens=2)
    return output


async def _scoring_dialog(debug_port: int, url: str) -> str:
    """The page's text once the log is shown and "All scoring..." has been clicked."""
    async with aiohttp.ClientSession() as session:
        pages: list[dict] = []
        for _ in range(100):
            try:
                async with session.get(f"http://127.0.0.1:{debug_port}/json/list") as response:
                    pages = [p for p in await response.json() if p["type"] == "page"]
                    break
            except aiohttp.ClientError:
                await asyncio.sleep(0.2)
        assert pages, "Chromium opened no page"
        async with session.ws_connect(pages[0]["webSocketDebuggerUrl"], max_msg_size=0) as ws:
            ids = iter(range(1, 10**6))

            async def call(method: str, **params) -> dict:
                key = next(ids)
                await ws.send_json({"id": key, "method": method, "params": params})
                while True:
                    message = await ws.receive_json()
                    if message.get("id") == key:
                        return message

            async def evaluate(expression: str):
                reply = await call("Runtime.evaluate", expression=expression, returnByValue=True)
                return reply["result"]["result"].get("value")

            await call("Page.navigate", url=url)
            deadline = time.monotonic() + 90
            while "All scoring" not in (await evaluate("document.body.innerText") or ""):
                assert time.monotonic() < deadline, "the viewer never showed the log's scores"
                await asyncio.sleep(0.5)
            assert await evaluate(_CLICK), "no 'All scoring...' link"
            while "Scoring Detail" not in (await evaluate("document.body.innerText") or ""):
                assert time.monotonic() < deadline, "the scoring dialog never opened"
                await asyncio.sleep(0.3)
            return str(await evaluate("document.body.innerText"))


def test_inspect_view_labels_every_group_metric_in_a_browser(tmp_path: Path) -> None:
    browser = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    if browser is None:
        pytest.skip("Chromium is not installed (apt-get install -y chromium)")
    data = tmp_path / "data"
    generate_split(data, "id-test", sizes=(3, 4), count=3, inputs=("grid",), seed=5)
    logs = tmp_path / "logs"
    task = frozenlake(split="id-test", input="grid", cot="none", data=str(data))
    model = get_model("mockllm/model", custom_outputs=_answer, memoize=False)
    [log] = inspect_eval(task, model=model, log_dir=str(logs), log_format="json", display="none")
    expected = [name for s in log.results.scores for name in s.metrics if name not in ("accuracy", "stderr")]
    assert expected[:2] == ["3x3 maps (n=3)", "4x4 maps (n=3)"]

    view_port, debug_port = _free_port(), _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("INSPECT_")}
    view = subprocess.Popen(
        [sys.executable, "-m", "inspect_ai", "view", "--log-dir", str(logs), "--port", str(view_port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    chrome = subprocess.Popen(
        [browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
         f"--remote-debugging-port={debug_port}", f"--user-data-dir={tmp_path / 'profile'}",
         "--window-size=1600,1200", "about:blank"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        for _ in range(100):  # the viewer's server takes a moment to listen
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", view_port)) == 0:
                    break
            time.sleep(0.2)
        [log_file] = logs.glob("*.json")
        url = f"http://127.0.0.1:{view_port}/#/logs/{log_file.name}"
        text = asyncio.run(_scoring_dialog(debug_port, url))
    finally:
        chrome.terminate()
        view.terminate()
        chrome.wait(timeout=30)
        view.wait(timeout=30)
    dialog = text[text.index("Scoring Detail") :]
    positions = [dialog.find(name) for name in expected]
    assert all(p >= 0 for p in positions), (expected, dialog[:2000])
    assert positions == sorted(positions), json.dumps(dialog[:2000])  # shown in increasing order
    assert "size=" not in dialog and "d_inf=" not in dialog
