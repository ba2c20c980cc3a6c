"""The continuous-batching engine of the hf backend answers as transformers ``generate`` does.

Random-weights models (a plain Qwen2 and a cells model) never learn to stop, so the tests pick a stop token
that some answers emit and others do not: some answers then stop and others run to the cap. Few slots and many
prompts of several lengths make slots change hands and the cache compact.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from model_fixtures import generate_split  # noqa: E402

from lakeshift.cli import main  # noqa: E402
from lakeshift.models.backends import continuous  # noqa: E402
from lakeshift.models.cells import MODEL_TYPE, TokenReader, set_spec, spec_of  # noqa: E402
from lakeshift.models.data import load_sft  # noqa: E402
from lakeshift.models.registry import build_named  # noqa: E402
from lakeshift.models.tokenizer import message_texts  # noqa: E402

MAX_NEW = 24


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("continuous")
    generate_split(root, "id-test", sizes=(3, 4, 5, 6), count=2, cots=("none", "coords"))
    return root


def prompts_and_model(data: Path, name: str) -> tuple[list[list[int]], object]:
    sft = load_sft(data, "id-test", "grid", "coords", prompt="map-only")
    torch.manual_seed(0)
    base, _, coupled = name.partition("+")
    model, tokenizer = build_named(base, [t for r in sft.records for t in message_texts(r["messages"])])
    if coupled:  # map numbers and no 1-D positions: what the walker and the rotary embedding give change
        set_spec(model, spec_of(model).replace({"grids": "coupled", "sequence": "none"}))
        with torch.no_grad():
            model.model.embed_tokens.frame.weight[1:].normal_(0, 1.0)
    model.eval()
    prompts = [
        tokenizer(
            tokenizer.apply_chat_template(r["messages"][:-1], add_generation_prompt=True, tokenize=False),
            add_special_tokens=False,
        )["input_ids"]
        for r in sft.records
    ]
    return prompts, model


def one_at_a_time(model: object, prompts: list[list[int]], stop: list[int]) -> list[list[int]]:
    """The reference: ``generate`` on each prompt alone (no padding), cut after a stop token."""
    answers = []
    with torch.inference_mode():
        for ids in prompts:
            out = model.generate(  # type: ignore[attr-defined]
                torch.tensor([ids]),
                max_new_tokens=MAX_NEW,
                do_sample=False,
                eos_token_id=stop or None,
                pad_token_id=0,
            )[0, len(ids) :].tolist()
            cut = next((i + 1 for i, tok in enumerate(out) if tok in stop), len(out))
            answers.append(out[:cut])
    return answers


def continuous_answers(
    model: object, prompts: list[list[int]], stop: list[int], slots: int, sampling=None
) -> tuple[list[list[int]], list[str]]:
    answers: list[list[int]] = [[] for _ in prompts]
    reasons = [""] * len(prompts)

    def done(finished: continuous.Finished) -> None:
        answers[finished.index], reasons[finished.index] = finished.tokens, finished.reason

    cells = model.config.model_type == MODEL_TYPE  # type: ignore[attr-defined]
    rule = model.model.embed_tokens.rule if cells else None  # type: ignore[attr-defined]
    continuous.decode(
        model,
        prompts,
        max_new_tokens=MAX_NEW,
        stop_ids=stop,
        slots=slots,
        sampling=sampling or continuous.Sampling(),
        on_finished=done,
        new_walker=(lambda: TokenReader(rule)) if cells else None,
    )
    return answers, reasons


@pytest.mark.parametrize("name", ["tiny", "mini-cells", "mini-cells+coupled"])
def test_continuous_greedy_answers_equal_generate_on_each_prompt_alone(data: Path, name: str) -> None:
    prompts, model = prompts_and_model(data, name)
    assert len({len(p) for p in prompts}) > 2  # several prompt lengths share the slots
    free_running, _ = continuous_answers(model, prompts, [], slots=3)
    # the token most answers emit but not all: those answers stop there, the others run to the cap
    emitted = Counter(tok for answer in free_running for tok in set(answer))
    stop = [max((tok for tok, n in emitted.items() if n < len(prompts)), key=emitted.__getitem__)]
    expected = one_at_a_time(model, prompts, stop)
    answers, reasons = continuous_answers(model, prompts, stop, slots=3)
    assert answers == expected
    assert reasons == ["stop" if a[-1] in stop else "length" for a in answers]
    assert {"stop", "length"} <= set(reasons)


def test_the_slot_count_does_not_change_the_answers(data: Path) -> None:
    prompts, model = prompts_and_model(data, "mini-cells")
    by_slots = [continuous_answers(model, prompts, [], slots=k)[0] for k in (1, 2, len(prompts))]
    assert by_slots[0] == by_slots[1] == by_slots[2]


def test_sampling_is_seeded_and_top_k_1_is_greedy(data: Path) -> None:
    prompts, model = prompts_and_model(data, "tiny")
    greedy, _ = continuous_answers(model, prompts, [], slots=4)

    def sampled(seed: int, top_k: int | None = None) -> list[list[int]]:
        return continuous_answers(model, prompts, [], 4, continuous.Sampling(1.5, 1.0, top_k, seed))[0]

    assert sampled(1) == sampled(1)
    assert sampled(1) != sampled(2)
    assert sampled(3, top_k=1) == greedy


def test_slots_are_bounded_by_the_prompts_and_the_free_memory(data: Path) -> None:
    _, model = prompts_and_model(data, "tiny")
    per_slot = continuous.cache_bytes_per_slot(model, 1000)
    assert continuous.choose_slots(model, 5, 1000, 10**12, cuda=False) == 5
    assert continuous.choose_slots(model, 10**6, 1000, 10**12, cuda=False) == continuous.MAX_SLOTS_CPU
    budget = int(40 * per_slot / continuous.CACHE_MEMORY_SHARE)
    assert continuous.choose_slots(model, 10**6, 1000, budget, cuda=False) == 40
    assert continuous.choose_slots(model, 10**6, 1000, 0, cuda=False) == 1


def test_predict_gives_the_same_rows_with_either_engine(data: Path, tmp_path: Path) -> None:
    sft = load_sft(data, "id-test", "grid", "coords", prompt="map-only")
    model, tokenizer = build_named(
        "mini-cells", [t for r in sft.records for t in message_texts(r["messages"])]
    )
    model.save_pretrained(tmp_path / "ckpt")
    tokenizer.save_pretrained(tmp_path / "ckpt")
    rows = {}
    for engine in ("generate", "continuous"):
        out = tmp_path / f"{engine}.jsonl"
        argv = ["predict", "--model", str(tmp_path / "ckpt"), "--data", str(data), "--split", "id-test"]
        argv += ["--input", "grid", "--cot", "coords", "--prompt", "map-only", "--out", str(out)]
        argv += ["--max-new-tokens", "16", "--engine", engine]
        assert main(argv) == 0
        rows[engine] = [json.loads(line) for line in out.read_text().splitlines()]
    strip = ("seconds", "engine", "n_passes")
    same = [
        {k: v for k, v in a.items() if k not in strip} == {k: v for k, v in b.items() if k not in strip}
        for a, b in zip(rows["generate"], rows["continuous"], strict=True)
    ]
    assert all(same) and len(same) == 8
