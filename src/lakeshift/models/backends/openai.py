"""The ``openai`` backend: any OpenAI-compatible chat-completions endpoint (OpenAI, vLLM serve, TGI, ...).

Standard library only (``http.client`` in worker threads driven by asyncio): requests run concurrently up to
``concurrency``, over at most that many keep-alive connections that are reused from request to request (a
connection the server closed while idle is replaced once, silently; ``HTTP(S)_PROXY`` and ``NO_PROXY`` are
honoured as by ``urllib``). 429, 5xx and network errors are retried with exponential backoff and jitter
(honouring ``Retry-After``), each retry one line on stderr; once the retries are spent the run stops (a
rerun resumes after the last answer). Other 4xx errors stop the run with the server's message (the API key,
and anything shaped like one, redacted: servers echo keys back in "invalid key" errors).

A prompt the server will not answer does not stop the run: a reply without text (``content: null``, no
choice) is retried like a server error, and once the retries are spent the prompt is recorded as an empty
answer (scored ``no_answer``) with the reason in the row's ``error``; a reply with ``finish_reason:
content_filter`` and no text, or an HTTP 400 whose error code says the prompt itself is refused
(``content_filter``, ``content_policy_violation``, ``invalid_prompt``, ``context_length_exceeded``), is
recorded so at once. Its row is written like any answer, so a rerun does not ask it again.

Images are sent as base64 PNG data URLs. The API key comes from an environment variable
(``OPENAI_API_KEY`` by default), never the command line. Sampled requests carry the run's seed plus the
sample index (``--samples``); settings a decoding preset does not name (top-k, penalties) are the server's
defaults.
"""

from __future__ import annotations

import asyncio
import base64
import http.client
import json
import os
import random
import re
import sys
import threading
import urllib.parse
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from lakeshift.errors import LakeshiftError
from lakeshift.io import printable
from lakeshift.models.generation import Decoding, Emit, Generation, PromptItem

RETRY_STATUS = {408, 409, 429, 500, 502, 503, 504}
#: Error codes of an HTTP 400 that refuse the prompt itself (asking again gets the same answer).
REFUSED_CODES = {"content_filter", "content_policy_violation", "invalid_prompt", "context_length_exceeded"}
# Key-shaped strings a server may echo back: OpenAI-style keys (also partly masked) and bearer tokens.
_KEY_PATTERN = re.compile(r"(sk-[A-Za-z0-9_*\-]{6,}|(?<=Bearer )[^\s\"',]+)")


class _Retryable(Exception):
    """A failed request worth asking again; ``per_prompt``: the server answered, but without text."""

    def __init__(self, message: str, retry_after: float | None = None, per_prompt: bool = False) -> None:
        super().__init__(message)
        self.retry_after = retry_after
        self.per_prompt = per_prompt


class _NoAnswer(Exception):
    """The server refuses this prompt: recorded as an empty answer, the run goes on."""

    def __init__(self, message: str, finish_reason: str | None = None) -> None:
        super().__init__(message)
        self.finish_reason = finish_reason


def _log(message: str) -> None:
    from tqdm.auto import tqdm

    # tqdm.write: above predict's progress bar, which would otherwise run into the line.
    tqdm.write(f"lakeshift predict: openai: {printable(message)}", file=sys.stderr)


class _Connections:
    """Keep-alive connections to one server: taken by one request at a time, given back after it (so no
    more are open than requests in flight), replaced when the server closes them."""

    def __init__(self, base_url: str, timeout: float) -> None:
        url = urllib.parse.urlsplit(base_url)
        if url.scheme not in ("http", "https") or not url.hostname:
            raise LakeshiftError(f"--base-url {base_url}: expected an http:// or https:// URL")
        self.https = url.scheme == "https"
        self.host = url.hostname
        self.port = url.port or (443 if self.https else 80)
        self.origin = f"{url.scheme}://{url.netloc}"
        self.prefix = url.path.rstrip("/")
        self.timeout = timeout
        proxy = urllib.request.getproxies().get(url.scheme)
        self.proxy = None
        self.proxy_headers: dict[str, str] = {}
        if proxy and not urllib.request.proxy_bypass(url.hostname):
            self.proxy = urllib.parse.urlsplit(proxy if "://" in proxy else f"http://{proxy}")
            if self.proxy.username is not None:
                user = urllib.parse.unquote(self.proxy.username)
                secret = urllib.parse.unquote(self.proxy.password or "")
                token = base64.b64encode(f"{user}:{secret}".encode()).decode("ascii")
                self.proxy_headers["Proxy-Authorization"] = f"Basic {token}"
        self._idle: list[http.client.HTTPConnection] = []
        self._lock = threading.Lock()

    def _open(self) -> http.client.HTTPConnection:
        if self.proxy is None:
            kind = http.client.HTTPSConnection if self.https else http.client.HTTPConnection
            return kind(self.host, self.port, timeout=self.timeout)
        proxy_host, proxy_port = self.proxy.hostname or "", self.proxy.port or 80
        if self.https:  # a CONNECT tunnel through the proxy, TLS with the server inside it
            conn = http.client.HTTPSConnection(proxy_host, proxy_port, timeout=self.timeout)
            conn.set_tunnel(self.host, self.port, headers=self.proxy_headers)
            return conn
        return http.client.HTTPConnection(proxy_host, proxy_port, timeout=self.timeout)

    def request(
        self, method: str, path: str, body: bytes | None = None, headers: dict[str, str] | None = None
    ) -> tuple[int, http.client.HTTPMessage, bytes]:
        """One request: ``(status, headers, body)``.

        Raises:
            http.client.HTTPException, OSError: the request failed on a new connection.
        """
        while True:
            with self._lock:
                reused = bool(self._idle)
                conn = self._idle.pop() if reused else self._open()
            target = self.prefix + path
            sent = dict(headers or {})
            if self.proxy is not None and not self.https:
                target = self.origin + target  # a plain-HTTP proxy takes the absolute URL
                sent.update(self.proxy_headers)
            try:
                conn.request(method, target, body=body, headers=sent)
                response = conn.getresponse()
                data = response.read()
            except (http.client.HTTPException, OSError) as err:
                conn.close()
                # A kept-alive connection the server closed while it sat idle fails at once: not the
                # request's fault, so it goes again on another connection.
                if reused and isinstance(err, (ConnectionError, http.client.BadStatusLine)):
                    continue
                raise
            if response.will_close:
                conn.close()
            else:
                with self._lock:
                    self._idle.append(conn)
            return response.status, response.headers, data

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()


def _refusal(status: int, text: str) -> str | None:
    """The error code of a reply that refuses the prompt itself (:data:`REFUSED_CODES`), else ``None``."""
    if status != 400:
        return None
    try:
        error = json.loads(text).get("error")
    except (ValueError, AttributeError):
        return None
    if not isinstance(error, dict):
        return None
    code = error.get("code")
    if code in REFUSED_CODES:
        return str(code)
    if "maximum context length" in str(error.get("message", "")):  # vLLM's words, without a code
        return "context_length_exceeded"
    return None


class OpenAIBackend:
    """Chat completions over HTTP.

    Args:
        model: the model name the server knows (e.g. ``gpt-4o``).
        base_url: endpoint root, e.g. ``http://localhost:8000/v1``.
        api_key_env: environment variable holding the key (may be unset for local servers).
        concurrency: requests in flight at once (and at most as many connections).
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
        self.connections = _Connections(self.base_url, timeout)

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
        probe = _Connections(self.base_url, min(self.timeout, 15))
        try:
            status, _, _ = probe.request("GET", "/models", headers=self._headers())
        except (http.client.HTTPException, OSError) as err:
            raise LakeshiftError(f"--base-url {self.base_url}: cannot reach the API ({err})") from None
        finally:
            probe.close()
        if status in (401, 403):
            raise LakeshiftError(
                f"{self.base_url}: HTTP {status} (unauthorised); put the API key in ${self.api_key_env}"
            )

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

    def _post(self, body: dict[str, Any]) -> Any:
        try:
            status, headers, data = self.connections.request(
                "POST", "/chat/completions", json.dumps(body).encode("utf-8"), self._headers()
            )
        except (http.client.HTTPException, OSError) as err:
            raise _Retryable(self.redact(f"{type(err).__name__}: {err}")) from None
        text = data.decode("utf-8", "replace")
        if 200 <= status < 300:
            try:
                return json.loads(text)
            except json.JSONDecodeError as err:
                raise _Retryable(f"JSONDecodeError: {err}") from None
        detail = self.redact(text)[:300]
        if status in RETRY_STATUS:
            after = headers.get("Retry-After")
            try:
                wait = float(after) if after is not None else None
            except ValueError:
                wait = None
            raise _Retryable(f"HTTP {status}: {detail}", wait)
        refused = _refusal(status, text)
        if refused is not None:
            raise _NoAnswer(f"HTTP {status} {refused}: {detail}", refused)
        raise LakeshiftError(f"{self.base_url}/chat/completions: HTTP {status}: {detail}")

    def _generation(self, reply: Any) -> Generation:
        """The text of a reply; a reply without any (``content: null``, no choices, an error object sent
        with status 200) raises :class:`_Retryable`: servers send these under load or on a filtered turn.
        A filtered one (``finish_reason: content_filter``) raises :class:`_NoAnswer`: it will not change."""
        try:
            choice = reply["choices"][0]
            text = choice["message"]["content"]
        except (KeyError, IndexError, TypeError):
            raise _Retryable(f"unexpected reply {self.redact(str(reply))[:200]}", per_prompt=True) from None
        reason = choice.get("finish_reason")
        if not isinstance(text, str) or (not text and reason == "content_filter"):
            why = f"the reply has no text (content: {json.dumps(text)}, finish_reason: {reason})"
            if reason == "content_filter":
                raise _NoAnswer(why, reason)
            raise _Retryable(why, per_prompt=True)
        usage = reply.get("usage") or {}
        return Generation(text, usage.get("completion_tokens"), reason)

    async def _one(
        self, item: PromptItem, decoding: Decoding, gate: asyncio.Semaphore, threads: ThreadPoolExecutor
    ) -> Generation:
        body = self.payload(item, decoding)
        loop = asyncio.get_running_loop()
        who = f"id {item.id}" + (f", sample {item.sample}" if item.sample else "")
        async with gate:
            for attempt in range(self.max_retries + 1):
                try:
                    reply = await loop.run_in_executor(threads, self._post, body)
                    return self._generation(reply)
                except _NoAnswer as err:
                    return _no_answer(who, str(err), err.finish_reason)
                except _Retryable as err:
                    if attempt == self.max_retries:
                        if err.per_prompt:
                            return _no_answer(who, f"no text after {attempt + 1} tries: {err}", None)
                        raise LakeshiftError(
                            f"{who}: gave up after {self.max_retries} retries ({err})"
                        ) from None
                    delay = min(60.0, self.backoff * 2**attempt) * (0.5 + random.random() / 2)
                    wait = err.retry_after if err.retry_after is not None else delay
                    _log(f"{who}: {err}; retry {attempt + 1} of {self.max_retries} in {wait:.1f} s")
                    await asyncio.sleep(wait)
        raise AssertionError("unreachable: the last attempt returns or raises")

    async def _run(
        self, items: list[PromptItem], decoding: Decoding, emit: Emit, threads: ThreadPoolExecutor
    ) -> None:
        gate = asyncio.Semaphore(self.concurrency)
        tasks = {asyncio.ensure_future(self._one(item, decoding, gate, threads)): item for item in items}
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
        # One thread per request in flight, each on a connection of its own (asyncio's default pool may
        # have fewer threads than --concurrency).
        with ThreadPoolExecutor(self.concurrency, thread_name_prefix="openai") as threads:
            try:
                asyncio.run(self._run(items, decoding, emit, threads))
            finally:
                self.connections.close()


def _no_answer(who: str, reason: str, finish_reason: str | None) -> Generation:
    """The empty answer of a prompt the server will not answer (scored ``no_answer``), with its reason."""
    _log(f"{who}: recorded as no_answer ({reason})")
    return Generation("", None, finish_reason, error=reason)
