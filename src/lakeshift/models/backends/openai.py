"""The ``openai`` backend: any OpenAI-compatible chat-completions endpoint (OpenAI, vLLM serve, TGI, ...).

Standard library only (``urllib`` in worker threads driven by asyncio): requests run concurrently up to
``concurrency``; 429, 5xx and network errors are retried with exponential backoff and jitter (honouring
``Retry-After``); other 4xx errors stop the run with the server's message (the API key, and anything shaped
like one, redacted: servers echo keys back in "invalid key" errors). A reply without text (``content: null``,
no choice) is retried like a server error, never recorded as an empty answer. Images are sent as base64 PNG
data URLs. The API key comes from an environment variable (``OPENAI_API_KEY`` by default), never the command
line. Sampled requests carry the run's seed plus the sample index (``--samples``); settings a decoding preset
does not name (top-k, penalties) are the server's defaults.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import random
import re
import urllib.error
import urllib.request
from typing import Any

from lakeshift.errors import LakeshiftError
from lakeshift.models.generation import Decoding, Emit, Generation, PromptItem

RETRY_STATUS = {408, 409, 429, 500, 502, 503, 504}
# Key-shaped strings a server may echo back: OpenAI-style keys (also partly masked) and bearer tokens.
_KEY_PATTERN = re.compile(r"(sk-[A-Za-z0-9_*\-]{6,}|(?<=Bearer )[^\s\"',]+)")


class _Retryable(Exception):
    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class OpenAIBackend:
    """Chat completions over HTTP.

    Args:
        model: the model name the server knows (e.g. ``gpt-4o``).
        base_url: endpoint root, e.g. ``http://localhost:8000/v1``.
        api_key_env: environment variable holding the key (may be unset for local servers).
        concurrency: requests in flight at once.
        max_retries: retries per request before giving up.
        timeout: seconds per HTTP request.
        backoff: first retry delay in seconds (doubles each retry, capped at 60 s, with jitter).
    """

    name = "openai"

    def __init__(
        self,
        model: str,
        base_url: str = "https://api.openai.com/v1",
        api_key_env: str = "OPENAI_API_KEY",
        concurrency: int = 8,
        max_retries: int = 6,
        timeout: float = 600.0,
        backoff: float = 1.0,
        **_: Any,
    ) -> None:
        if concurrency < 1:
            raise LakeshiftError(f"--concurrency {concurrency}: must be >= 1")
        self.model_id = model
        self.base_url = base_url.rstrip("/")
        self.api_key = os.environ.get(api_key_env)
        self.api_key_env = api_key_env
        self.concurrency = concurrency
        self.max_retries = max_retries
        self.timeout = timeout
        self.backoff = backoff

    def redact(self, text: str) -> str:
        """``text`` without the API key or anything shaped like one (for messages the user sees)."""
        if self.api_key:
            text = text.replace(self.api_key, "[redacted]")
        return _KEY_PATTERN.sub("[redacted]", text)

    def _headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        return headers

    def check(self, input_format: str) -> None:
        """Reaches ``GET /models`` once: a refused connection or a rejected key fails here, before the run.

        A server without ``/models`` (404) is accepted: only reachability and authorisation are checked.
        """
        request = urllib.request.Request(f"{self.base_url}/models", headers=self._headers())
        try:
            with urllib.request.urlopen(request, timeout=min(self.timeout, 15)):
                pass
        except urllib.error.HTTPError as err:
            if err.code in (401, 403):
                raise LakeshiftError(
                    f"{self.base_url}: HTTP {err.code} (unauthorised); put the API key in ${self.api_key_env}"
                ) from None
        except (urllib.error.URLError, OSError) as err:
            reason = getattr(err, "reason", err)
            raise LakeshiftError(f"--base-url {self.base_url}: cannot reach the API ({reason})") from None

    def count_tokens(self, text: str) -> int | None:
        return None

    def _content(self, item: PromptItem, content: Any, images: list[str]) -> Any:
        if isinstance(content, str):
            return content
        parts = []
        for part in content:
            if part.get("type") == "image":
                if not images:
                    raise LakeshiftError(f"id {item.id}: more image slots than images")
                parts.append({"type": "image_url", "image_url": {"url": images.pop(0)}})
            else:
                parts.append({"type": "text", "text": part.get("text", "")})
        return parts

    def payload(self, item: PromptItem, decoding: Decoding) -> dict[str, Any]:
        """The request body for one prompt (images inlined as data URLs)."""
        images = [
            "data:image/png;base64," + base64.b64encode(path.read_bytes()).decode("ascii")
            for path in item.image_paths
        ]
        messages = [
            {"role": m["role"], "content": self._content(item, m["content"], images)} for m in item.messages
        ]
        body: dict[str, Any] = {"model": self.model_id, "messages": messages}
        if decoding.max_new_tokens is not None:
            body["max_tokens"] = decoding.max_new_tokens
        body["temperature"] = decoding.temperature
        if not decoding.greedy:
            body["top_p"] = decoding.top_p
            if decoding.seed is not None:
                body["seed"] = decoding.sample_seed(item)
        return body

    def _post(self, body: dict[str, Any]) -> dict[str, Any]:
        request = urllib.request.Request(
            f"{self.base_url}/chat/completions",
            data=json.dumps(body).encode("utf-8"),
            headers=self._headers(),
            method="POST",
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                return json.loads(response.read().decode("utf-8"))
        except urllib.error.HTTPError as err:
            detail = self.redact(err.read().decode("utf-8", "replace"))[:300]
            if err.code in RETRY_STATUS:
                after = err.headers.get("Retry-After") if err.headers else None
                try:
                    wait = float(after) if after is not None else None
                except ValueError:
                    wait = None
                raise _Retryable(f"HTTP {err.code}: {detail}", wait) from None
            raise LakeshiftError(f"{self.base_url}/chat/completions: HTTP {err.code}: {detail}") from None
        except (urllib.error.URLError, OSError, json.JSONDecodeError) as err:
            raise _Retryable(self.redact(f"{type(err).__name__}: {err}")) from None

    def _generation(self, reply: Any) -> Generation:
        """The text of a reply; a reply without any (``content: null``, no choices, an error object sent
        with status 200) raises :class:`_Retryable`: servers send these under load or on a filtered turn."""
        try:
            choice = reply["choices"][0]
            text = choice["message"]["content"]
        except (KeyError, IndexError, TypeError):
            raise _Retryable(f"unexpected reply {self.redact(str(reply))[:200]}") from None
        if not isinstance(text, str):
            reason = choice.get("finish_reason")
            raise _Retryable(f"the reply has no text (content: {json.dumps(text)}, finish_reason: {reason})")
        usage = reply.get("usage") or {}
        return Generation(text, usage.get("completion_tokens"), choice.get("finish_reason"))

    async def _one(self, item: PromptItem, decoding: Decoding, gate: asyncio.Semaphore) -> Generation:
        body = self.payload(item, decoding)
        async with gate:
            for attempt in range(self.max_retries + 1):
                try:
                    reply = await asyncio.to_thread(self._post, body)
                    return self._generation(reply)
                except _Retryable as err:
                    if attempt == self.max_retries:
                        raise LakeshiftError(
                            f"id {item.id}: gave up after {self.max_retries} retries ({err})"
                        ) from None
                    delay = min(60.0, self.backoff * 2**attempt) * (0.5 + random.random() / 2)
                    await asyncio.sleep(err.retry_after if err.retry_after is not None else delay)
        raise AssertionError("unreachable: the last attempt returns or raises")

    async def _run(self, items: list[PromptItem], decoding: Decoding, emit: Emit) -> None:
        gate = asyncio.Semaphore(self.concurrency)
        tasks = {asyncio.ensure_future(self._one(item, decoding, gate)): item for item in items}
        try:
            for future in asyncio.as_completed(list(tasks)):
                await future
                # as_completed yields new wrappers; find which finished tasks are not written yet.
                for task, item in list(tasks.items()):
                    if task.done():
                        del tasks[task]
                        emit(item, task.result())
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    def run(self, items: list[PromptItem], decoding: Decoding, emit: Emit) -> None:
        asyncio.run(self._run(items, decoding, emit))
