"""inspect_ai model provider ``lakeshift``: a model lakeshift trained, answering with lakeshift's backend.

Registered by :mod:`lakeshift.integrations.inspect_ai` (loaded through the ``inspect_ai`` entry point, as the
task is), so that::

    inspect eval lakeshift/frozenlake -T split=ood-dist --model lakeshift/runs/grid__none

runs the model of a ``lakeshift train`` run folder (or any folder or name ``lakeshift predict --model``
takes: a checkpoint folder, a shipped base model) with :class:`lakeshift.models.backends.hf.HFBackend`:
the model's own tokenizer and architecture (cells models included), the continuous-batching decoder where
it applies, the same answers ``lakeshift predict --backend hf`` gives.

Requests
--------
inspect sends one request per sample; the requests that arrive together (up to :meth:`max_connections`
at once, no new one for :data:`BATCH_WINDOW_S` seconds) are answered by one ``HFBackend.run`` call in a
worker thread, so they decode as one batch. Images (``ContentImage`` data URLs) are written to a
temporary folder for the backend; a text model refuses them.

Decoding
--------
From inspect's generate config: greedy unless a temperature above 0 is given (``--temperature``, or the
task's decoding preset), ``--top-p``, ``--seed``, and ``--max-tokens`` (default
:data:`DEFAULT_MAX_TOKENS`; refused when it leaves the prompt none of the model's positions). Settings
the backend does not implement (``--top-k``, stop sequences, logprobs) are refused rather than ignored.

Model arguments (``-M``): ``batch_size`` and ``engine`` (``auto``, ``continuous``, ``generate``), as
``lakeshift predict --batch-size/--engine``; any other is refused. A local model folder never needs the hub:
the provider sets ``HF_HUB_OFFLINE=1`` for it unless the environment says otherwise.
"""

from __future__ import annotations

import base64
import itertools
import os
import queue
import tempfile
import threading
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from lakeshift.errors import LakeshiftError
from lakeshift.models.generation import Decoding, Generation, PromptItem

try:
    import anyio
    from inspect_ai.model import (
        ChatMessage,
        ContentImage,
        ContentText,
        GenerateConfig,
        ModelAPI,
        ModelInfo,
        ModelOutput,
        ModelUsage,
        set_model_info,
    )
    from inspect_ai.tool import ToolChoice, ToolInfo
except ImportError as err:  # pragma: no cover - depends on the environment
    raise ImportError(
        f"lakeshift.integrations.inspect_ai_model needs inspect_ai ({err}): pip install 'lakeshift[inspect]'"
    ) from err

try:  # inspect's CLI prints this kind of error as its message alone, without a traceback
    from inspect_ai._util.error import PrerequisiteError as _OneLine
except ImportError:  # pragma: no cover - a future inspect without it: the error keeps its traceback
    _OneLine = Exception  # type: ignore[misc,assignment,unused-ignore]

#: ``max_new_tokens`` when inspect is given no ``--max-tokens`` (inspect's own ``hf`` provider default).
DEFAULT_MAX_TOKENS = 2048
#: Requests answered in one backend call at most (inspect's ``--max-connections`` overrides it).
MAX_CONNECTIONS = 64
#: A batch starts once no new request has come for this long.
BATCH_WINDOW_S = 0.3
#: The ``-M`` arguments the provider takes.
MODEL_ARGS = ("batch_size", "engine")


class ModelArgumentError(LakeshiftError, _OneLine):
    """A model that cannot be loaded or a bad ``-M`` argument, as one line in inspect's CLI."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class _Batcher:
    """Answers requests with ``backend.run`` in a worker thread, those that arrive together in one call."""

    def __init__(self, backend: Any, limit: int) -> None:
        self.backend = backend
        self.limit = limit
        self.requests: queue.Queue[tuple[PromptItem, Decoding, Future[Generation]]] = queue.Queue()
        self.thread: threading.Thread | None = None
        self.lock = threading.Lock()

    def submit(self, item: PromptItem, decoding: Decoding) -> Future[Generation]:
        future: Future[Generation] = Future()
        self.requests.put((item, decoding, future))
        with self.lock:
            if self.thread is None:
                self.thread = threading.Thread(target=self._serve, name="lakeshift-inspect", daemon=True)
                self.thread.start()
        return future

    def _serve(self) -> None:
        while True:
            pending = [self.requests.get()]
            while len(pending) < self.limit:
                try:
                    pending.append(self.requests.get(timeout=BATCH_WINDOW_S))
                except queue.Empty:
                    break
            by_decoding: dict[str, list[tuple[PromptItem, Decoding, Future[Generation]]]] = {}
            for request in pending:
                by_decoding.setdefault(repr(request[1]), []).append(request)
            for group in by_decoding.values():
                self._answer(group)

    def _answer(self, group: list[tuple[PromptItem, Decoding, Future[Generation]]]) -> None:
        futures = {item.id: future for item, _, future in group}

        def emit(item: PromptItem, generation: Generation) -> None:
            futures[item.id].set_result(generation)

        try:
            self.backend.run([item for item, _, _ in group], group[0][1], emit)
        except BaseException as err:  # every waiting request must learn why it failed
            for future in futures.values():
                if not future.done():
                    future.set_exception(err)
            return
        for item_id, future in futures.items():
            if not future.done():
                future.set_exception(LakeshiftError(f"the backend gave no answer to request {item_id}"))


class LakeshiftModelAPI(ModelAPI):
    """The ``lakeshift`` provider (module docstring).

    Args:
        model_name: What follows ``lakeshift/`` in ``--model``: a run folder, checkpoint folder or name that
            ``lakeshift predict --model`` takes.
        base_url: Unused (refused when given).
        api_key: Unused.
        config: inspect's generate config.
        model_args: ``-M`` arguments (:data:`MODEL_ARGS`).
    """

    def __init__(
        self,
        model_name: str,
        base_url: str | None = None,
        api_key: str | None = None,
        config: GenerateConfig | None = None,
        **model_args: Any,
    ) -> None:
        super().__init__(
            model_name=model_name, base_url=base_url, api_key=api_key, config=config or GenerateConfig()
        )
        unknown = sorted(set(model_args) - set(MODEL_ARGS))
        if unknown:
            raise ModelArgumentError(
                f"-M {unknown[0]}: not an argument of the lakeshift provider (takes {', '.join(MODEL_ARGS)})"
            )
        if base_url:
            raise ModelArgumentError(
                f"--model-base-url {base_url}: the lakeshift provider runs the model here"
            )
        if Path(model_name).is_dir():
            # A local folder needs nothing from the hub; offline, each lookup would be retried for a while.
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
        from lakeshift.config import number_problem
        from lakeshift.models.backends.hf import HFBackend

        batch_size = model_args.get("batch_size")
        if batch_size is not None:
            problem = number_problem(batch_size, "positive_int")
            if problem:
                raise ModelArgumentError(f"-M batch_size={batch_size}: {problem}")
        try:
            self.backend = HFBackend(
                model_name, batch_size=batch_size, engine=model_args.get("engine", "auto")
            )
            self.backend.tokenizer  # noqa: B018 - loads the model now: a broken one fails before the eval
        except LakeshiftError as err:
            message, own = str(err), f"--model {model_name}"
            where = f"--model lakeshift/{model_name}"
            message = where + message[len(own) :] if message.startswith(own) else f"{where}: {message}"
            raise ModelArgumentError(message) from None
        # inspect looks a model's context up by name, and for a name it does not know it builds the provider a
        # second time (loading the model again) to ask it.
        model_config = self.backend.spec.config
        context = model_config.get("max_position_embeddings") or (model_config.get("text_config") or {}).get(
            "max_position_embeddings"
        )
        self._context = context if isinstance(context, int) and context > 0 else None
        set_model_info(f"lakeshift/{model_name}", ModelInfo(model=model_name, context_length=self._context))
        try:  # inspect's own --max-tokens is known now: refused before any sample runs
            self._check_max_tokens((config or GenerateConfig()).max_tokens)
        except LakeshiftError as err:
            raise ModelArgumentError(str(err)) from None
        self._batcher = _Batcher(self.backend, limit=MAX_CONNECTIONS)
        self._images = tempfile.TemporaryDirectory(prefix="lakeshift-inspect-")
        self._ids = itertools.count()

    async def generate(
        self,
        input: list[ChatMessage],
        tools: list[ToolInfo],
        tool_choice: ToolChoice,
        config: GenerateConfig,
    ) -> ModelOutput:
        if tools:
            raise LakeshiftError("the lakeshift provider runs models that call no tools")
        refused = {
            "--top-k": config.top_k,
            "--stop-seqs": config.stop_seqs,
            "--logprobs": config.logprobs or None,
        }
        given = [name for name, value in refused.items() if value is not None]
        if given:
            raise LakeshiftError(f"the lakeshift provider does not implement {', '.join(given)}")
        max_new_tokens = self._check_max_tokens(config.max_tokens)
        if config.max_connections:  # inspect lets this many requests wait at once: one batch may hold them
            self._batcher.limit = config.max_connections
        request = next(self._ids)
        messages, images = self._messages(input, request)
        if images:
            self.backend.check("image")
        temperature = config.temperature or 0.0
        decoding = Decoding(
            max_new_tokens=max_new_tokens,
            temperature=temperature,
            top_p=config.top_p if config.top_p is not None and temperature > 0 else 1.0,
            seed=config.seed if temperature > 0 else None,
        )
        future = self._batcher.submit(PromptItem(f"request-{request}", messages, images), decoding)
        while not future.done():
            await anyio.sleep(0.02)
        generation = future.result()
        text_in = "".join(m.text for m in input)
        n_in = self.backend.count_tokens(text_in)
        n_out = generation.n_output_tokens or 0
        output = ModelOutput.from_content(
            model=self.model_name,
            content=generation.text,
            stop_reason="max_tokens" if generation.finish_reason == "length" else "stop",
        )
        output.usage = ModelUsage(input_tokens=n_in, output_tokens=n_out, total_tokens=n_in + n_out)
        return output

    def _check_max_tokens(self, max_tokens: int | None) -> int:
        """``max_tokens`` (default :data:`DEFAULT_MAX_TOKENS`) if it leaves the prompt some of the model's
        positions.

        Raises:
            LakeshiftError: it takes them all.
        """
        max_new_tokens = max_tokens or DEFAULT_MAX_TOKENS
        if self._context is not None and max_new_tokens >= self._context:
            raise LakeshiftError(
                f"--max-tokens {max_new_tokens}: the model has {self._context} positions for the prompt and "
                "the answer together; give fewer"
            )
        return max_new_tokens

    def _messages(self, input: list[ChatMessage], request: int) -> tuple[list[dict[str, Any]], list[Path]]:
        """inspect's messages in the conversational form of lakeshift's SFT records, and the image files.

        With an image anywhere, every turn's content is a list of blocks, as the records of image input are.
        """
        images: list[Path] = []
        blocks: list[list[dict[str, Any]]] = []
        for message in input:
            content = message.content
            if isinstance(content, str):
                blocks.append([{"type": "text", "text": content}])
                continue
            parts: list[dict[str, Any]] = []
            for part in content:
                if isinstance(part, ContentText):
                    parts.append({"type": "text", "text": part.text})
                elif isinstance(part, ContentImage):
                    images.append(self._image_file(part.image, request, len(images)))
                    parts.append({"type": "image"})
                else:
                    raise LakeshiftError(f"the lakeshift provider takes text and images, not {part.type}")
            blocks.append(parts)
        out = []
        for message, parts in zip(input, blocks, strict=True):
            text_only = all(p["type"] == "text" for p in parts)
            content_out: Any = "".join(p["text"] for p in parts) if text_only and not images else parts
            out.append({"role": message.role, "content": content_out})
        return out, images

    def _image_file(self, image: str, request: int, index: int) -> Path:
        if image.startswith("data:"):
            path = Path(self._images.name) / f"{request}-{index}.png"
            path.write_bytes(base64.b64decode(image.split(",", 1)[1]))
            return path
        if Path(image).is_file():
            return Path(image)
        raise LakeshiftError(
            f"the lakeshift provider reads images from data URLs or files, not {image[:60]!r}"
        )

    def max_tokens(self) -> int | None:
        return DEFAULT_MAX_TOKENS

    def max_connections(self) -> int:
        return MAX_CONNECTIONS

    def close(self) -> None:
        self._images.cleanup()
