"""The ``vllm`` backend: offline batched generation with vLLM on a GPU machine.

vLLM pins its own torch and transformers (e.g. vLLM 0.33 wants transformers < 5.21 and a CUDA torch 2.14),
so it cannot share an environment with the ``train`` extra. Install it into its own environment:

    python -m venv .venv-vllm && . .venv-vllm/bin/activate && pip install -e '.[vllm]'

and run ``lakeshift predict --backend vllm`` from there. Nothing here is imported unless this backend is used.
Prompts go through ``LLM.chat`` with the model's own chat template; images are passed as data URLs.
"""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

from lakeshift.errors import LakeshiftError
from lakeshift.models.cells import MODEL_TYPE, VISION_MODEL_TYPE
from lakeshift.models.generation import Decoding, Emit, Generation, PromptItem, batched
from lakeshift.models.registry import check_modality, resolve_model
from lakeshift.models.tokenizer import IM_END

INSTALL_HINT = (
    "the vllm backend needs vLLM, which pins its own torch and transformers: install it into a separate "
    "environment on a GPU machine (pip install 'lakeshift[vllm]'; see docs/scale-out.md, vLLM), or use "
    "--backend hf"
)
# Answers are written after each chunk; vLLM schedules a chunk as one big continuous batch.
CHUNK = 512
# Sampling settings a decoding preset leaves to the model's generation defaults.
_INHERITED = ("top_k", "min_p", "repetition_penalty", "presence_penalty", "frequency_penalty")


def _import_vllm() -> Any:
    try:
        import vllm
    except ImportError as err:
        raise LakeshiftError(f"{INSTALL_HINT} ({err})") from None
    return vllm


class VLLMBackend:
    """vLLM offline inference for a checkpoint or run folder (one node; ``tensor_parallel_size`` GPUs)."""

    name = "vllm"

    def __init__(self, model: str, tensor_parallel_size: int = 1, **_: Any) -> None:
        self._vllm = _import_vllm()
        self.spec = resolve_model(model)
        if self.spec.kind == "named":
            raise LakeshiftError(
                f"--model {model}: a named size has random weights; pass a trained run folder"
            )
        if self.spec.model_type in (MODEL_TYPE, VISION_MODEL_TYPE):
            raise LakeshiftError(
                f"--model {model}: vLLM cannot run lakeshift's cells models (model type "
                f"{self.spec.model_type}); use --backend hf"
            )
        self.model_id = str(Path(model).resolve()) if Path(model).exists() else model
        self.tensor_parallel_size = tensor_parallel_size
        self._llm: Any = None

    def check(self, input_format: str) -> None:
        check_modality(self.spec, input_format)

    def _load(self) -> Any:
        if self._llm is None:
            kwargs: dict[str, Any] = {
                "model": self.spec.source,
                "tensor_parallel_size": self.tensor_parallel_size,
            }
            if self.spec.vision:
                kwargs["limit_mm_per_prompt"] = {"image": 1}
            self._llm = self._vllm.LLM(**kwargs)
        return self._llm

    def count_tokens(self, text: str) -> int:
        return len(self._load().get_tokenizer().encode(text, add_special_tokens=False))

    def _image_bytes(self, path: Path, item: PromptItem) -> bytes:
        """The PNG bytes of an image as the model reads it: the file, or resized per map cell
        (:func:`lakeshift.models.data.open_image`) for a model with ``cell_pixels``."""
        if self.spec.cell_pixels is None:
            return path.read_bytes()
        import io

        from lakeshift.models.data import open_image

        buffer = io.BytesIO()
        open_image(path, self.spec.cell_pixels, item.map_size).save(buffer, format="PNG")
        return buffer.getvalue()

    def _messages(self, item: PromptItem) -> list[dict[str, Any]]:
        images = [
            "data:image/png;base64," + base64.b64encode(self._image_bytes(p, item)).decode("ascii")
            for p in item.image_paths
        ]
        out = []
        for message in item.messages:
            content = message["content"]
            if not isinstance(content, str):
                content = [
                    {"type": "image_url", "image_url": {"url": images.pop(0)}}
                    if part.get("type") == "image"
                    else {"type": "text", "text": part.get("text", "")}
                    for part in content
                ]
            out.append({"role": message["role"], "content": content})
        return out

    def _params(self, llm: Any, decoding: Decoding, item: PromptItem, stop: list[int]) -> Any:
        """One request's sampling parameters (seeded per request: :meth:`Decoding.sample_seed`).

        A preset starts from the model's generation defaults (``LLM.get_default_sampling_params``, what
        transformers would take from ``generation_config.json``) and sets only what the preset names.

        Raises:
            LakeshiftError: a preset with a vLLM too old to read the model's generation defaults.
        """
        settings: dict[str, Any] = {
            "temperature": decoding.temperature,
            "top_p": decoding.top_p if not decoding.greedy else 1.0,
            "max_tokens": decoding.max_new_tokens,
            "seed": decoding.sample_seed(item),
            "stop_token_ids": stop,
        }
        if decoding.preset is None or decoding.greedy:
            return self._vllm.SamplingParams(**settings)
        defaults = getattr(llm, "get_default_sampling_params", None)
        if defaults is None:
            raise LakeshiftError(
                f"--decoding {decoding.preset}: this vLLM cannot read the model's generation defaults "
                "(LLM.get_default_sampling_params, vLLM >= 0.7); upgrade vLLM or use --backend hf"
            )
        model_defaults = defaults()
        inherited = {k: getattr(model_defaults, k) for k in _INHERITED if hasattr(model_defaults, k)}
        return self._vllm.SamplingParams(**inherited, **settings)

    def run(self, items: list[PromptItem], decoding: Decoding, emit: Emit) -> None:
        llm = self._load()
        tokenizer = llm.get_tokenizer()
        stop = [i for i in {tokenizer.eos_token_id, tokenizer.convert_tokens_to_ids(IM_END)} if i is not None]
        for chunk in batched(items, CHUNK):
            params = [self._params(llm, decoding, item, stop) for item in chunk]
            outputs = llm.chat([self._messages(item) for item in chunk], params, use_tqdm=False)
            for item, result in zip(chunk, outputs, strict=True):
                completion = result.outputs[0]
                emit(item, Generation(completion.text, len(completion.token_ids), completion.finish_reason))
