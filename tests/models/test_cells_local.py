"""``attention: local``: the locality rule hands each token exactly the keys its docstring names (checked
against the wave frames themselves on random maps), never a later token; the model attends to nothing else;
training, ``generate`` and the continuous engine compute the same; a local model trains, saves, loads and
predicts through the CLI."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lakeshift import formats, traces
from lakeshift.cli import main
from lakeshift.env import FrozenLakeMap
from lakeshift.models.cells import CellSpec, CellVocab, LocalKeys, PositionRule, TokenReader
from lakeshift.models.cells.local import LOOKUP, SELF, SLOTS
from lakeshift.models.cells.positions import MAP_END
from lakeshift.models.tokenizer import build_structured_tokenizer
from lakeshift.traces.wave import base_frame, wave_frames, wave_path
from tests.map_strategies import random_maps
from tests.model_fixtures import leaning_head

LOCAL = CellSpec(grids="coupled", sequence="none", attention="local")


@pytest.fixture(scope="module")
def tokenizer() -> Any:
    return build_structured_tokenizer([])


def conversation(tokenizer: Any, m: FrozenLakeMap, cot: str = "wave") -> list[int]:
    messages = [
        {"role": "user", "content": formats.render(m, "grid")},
        {"role": "assistant", "content": traces.completion(m, m.optimal_path(), cot)},
    ]
    return tokenizer.apply_chat_template(messages, tokenize=True, return_dict=True)["input_ids"]


def shown(frame: Any, cell: tuple[int, int], last_row_ends: bool) -> str | None:
    """What the token showing ``cell`` (1-based) of ``frame`` is: its symbol, the newline in the column
    after the last (the prompt's last row has none), or None: no such token."""
    r, c = cell
    height, width = len(frame), len(frame[0])
    if not (1 <= r <= height and 1 <= c <= width + 1):
        return None
    if c == width + 1:
        return "\n" if r < height or last_row_ends else None
    return frame[r - 1][c - 1]


@given(random_maps(max_size=8, hole_probs=(0.0, 0.25)))
@settings(max_examples=60, deadline=None)
def test_each_local_token_gets_exactly_the_cells_the_rule_names(tokenizer, m: FrozenLakeMap) -> None:
    ids = conversation(tokenizer, m)
    rule = PositionRule.of(LOCAL, CellVocab.from_tokenizer(tokenizer))
    (rows, cols, _, numbers, edges), keys = TokenReader(rule).feed(ids)
    text = [t.strip(" ") for t in tokenizer.convert_ids_to_tokens(ids)]
    maps = [base_frame(m), *wave_frames(m)]
    start = (m.start[0] + 1, m.start[1] + 1)
    walked, moves = [], list(wave_path(m))
    box = ids.index(tokenizer.convert_tokens_to_ids("\\boxed{"))
    lookups = 0
    for i, k in enumerate(keys):
        if k is None:
            assert numbers[i] < 2 and not (box <= i <= box + len(moves) - 1), i  # a redrawn map is local
            continue
        assert len(k) == SLOTS and k[SELF] == i and all(-1 <= j < i for j in k[:SELF] + k[LOOKUP:]), i
        seen = [text[j] if j >= 0 else None for j in k]
        if numbers[i] >= 2 and edges[i] != MAP_END:  # a frame's token: the previous map's neighbourhood
            before = maps[numbers[i] - 2]
            for slot in range(9):
                cell = (rows[i] + slot // 3 - 1, cols[i] + slot % 3 - 1)
                assert seen[slot] == shown(before, cell, numbers[i] > 2), (i, slot)
            assert k[LOOKUP] == -1
            continue
        assert k[:SELF] == (-1,) * 9
        lookups += 1
        if numbers[i] >= 2:  # the frame's end: the start's cell of the frame just written
            assert seen[LOOKUP] == maps[numbers[i] - 1][start[0] - 1][start[1] - 1]
        else:  # ``\boxed{`` and the answer's moves: the last frame's cell the walk has reached
            cell = start if i == box else (rows[i], cols[i])
            assert seen[LOOKUP] == maps[-1][cell[0] - 1][cell[1] - 1]
            walked.append(cell)
    assert lookups == len(maps) - 1 + 1 + len(moves)  # every frame's end, ``\boxed{``, every move
    assert walked[-1] == (m.goal[0] + 1, m.goal[1] + 1)


@given(random_maps(max_size=6, hole_probs=(0.25,)), st.sampled_from(["wave", "grid", "none"]), st.data())
@settings(max_examples=40, deadline=None)
def test_keys_fed_piece_by_piece_are_those_of_the_whole_sequence(tokenizer, m, cot, data) -> None:
    ids = conversation(tokenizer, m, cot)
    rule = PositionRule.of(LOCAL, CellVocab.from_tokenizer(tokenizer))
    cuts = sorted(data.draw(st.lists(st.integers(1, len(ids) - 1), max_size=6, unique=True)))
    reader, pieces = TokenReader(rule), []
    for a, b in zip([0, *cuts], [*cuts, len(ids)], strict=True):
        pieces += reader.feed(ids[a:b])[1]
    assert pieces == TokenReader(rule).feed(ids)[1]


def test_without_local_attention_every_token_attends_fully(tokenizer) -> None:
    ids = conversation(tokenizer, FrozenLakeMap.from_rows(["FGF", "FHF", "FSH"]))
    rule = PositionRule.of(CellSpec(grids="coupled"), CellVocab.from_tokenizer(tokenizer))
    assert set(TokenReader(rule).feed(ids)[1]) == {None}
    assert LocalKeys(PositionRule.of(LOCAL, CellVocab.from_tokenizer(tokenizer))).feed([], ([],) * 5) == []


# --- the model (torch) ---------------------------------------------------------------------------------


def local_model(tokenizer: Any, layers: int = 2) -> Any:
    """A random cells model under ``attention: local`` whose slot vectors and cell embeddings are large
    enough that a wrong key or slot changes the logits visibly."""
    import torch

    from lakeshift.models.cells import register

    config_class, model_class = register()
    config = config_class(
        cells=LOCAL.to_json(),
        cell_vocab=CellVocab.from_tokenizer(tokenizer).to_config(),
        vocab_size=len(tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        tie_word_embeddings=True,
        pad_token_id=0,
    )
    torch.manual_seed(0)
    model = model_class(config)
    with torch.no_grad():
        embedding = model.model.embed_tokens
        for part in (embedding.row, embedding.col, embedding.frame, embedding.edge):
            part.weight[1:].normal_(0, 1.0)
        for layer in model.model.layers:
            layer.self_attn.slot_keys.weight.normal_(0, 1.0)
            layer.self_attn.slot_values.weight.normal_(0, 1.0)
    return model.eval()


def test_a_local_token_attends_to_its_keys_and_nothing_else(tokenizer) -> None:
    """With zero slot vectors a local model is Qwen2's attention under the 4-D mask the keys give (a local
    token: its keys; any other token: every earlier one)."""
    import torch

    from lakeshift.models.cells import set_spec

    model = local_model(tokenizer)
    ids = conversation(tokenizer, FrozenLakeMap.from_rows(["FFFG", "FHFF", "SFHF", "FFFF"]))
    rule = model.model.embed_tokens.rule
    keys = TokenReader(rule).feed(ids)[1]
    n = len(ids)
    visible = torch.tril(torch.ones(n, n, dtype=torch.bool))
    for i, k in enumerate(keys):
        if k is not None:
            visible[i] = False
            visible[i, [j for j in k if j >= 0]] = True
    assert sum(k is not None for k in keys) > n // 2
    with torch.no_grad():
        for layer in model.model.layers:
            layer.self_attn.slot_keys.weight.zero_()
            layer.self_attn.slot_values.weight.zero_()
        local = model(torch.tensor([ids])).logits[0]
        set_spec(model, CellSpec(grids="coupled", sequence="none"))  # the same weights, full attention
        mask = torch.zeros(1, 1, n, n).masked_fill(~visible, torch.finfo(torch.float32).min)
        masked = model(torch.tensor([ids]), attention_mask=mask).logits[0]
        full = model(torch.tensor([ids])).logits[0]
    assert torch.allclose(local, masked, atol=1e-4)
    assert not torch.allclose(local, full, atol=1e-2)  # the mask matters


def test_generation_computes_each_step_as_one_pass_does(tokenizer) -> None:
    """``generate`` forced along a wave conversation (one cached step per token, keys gathered from the
    cache) gives every step the logits one pass over the whole conversation gives it."""
    import torch

    model = local_model(tokenizer)
    m = FrozenLakeMap.from_rows(["FGF", "FHF", "FSH"])
    ids = conversation(tokenizer, m)
    cut = ids.index(tokenizer.convert_tokens_to_ids("Wave"))
    forced = iter(ids[cut:])
    out = model.generate(
        torch.tensor([ids[:cut]]),
        attention_mask=torch.ones(1, cut, dtype=torch.long),
        max_new_tokens=len(ids) - cut,
        do_sample=False,
        prefix_allowed_tokens_fn=lambda _batch, _ids: [next(forced)],
        output_logits=True,
        return_dict_in_generate=True,
        pad_token_id=0,
        eos_token_id=None,
    )
    assert out.sequences[0].tolist() == ids
    with torch.no_grad():
        whole = model(torch.tensor([ids])).logits[0]
    for step, logits in enumerate(out.logits):
        assert torch.allclose(logits[0], whole[cut + step - 1], atol=1e-4), step


def test_the_continuous_engine_answers_as_generate_does(tokenizer) -> None:
    """Prompts cut inside wave traces, so that prefills and steps hold local tokens (frame cells, frame
    ends, the answer's lookups) beside full ones, in slots that change hands."""
    import torch

    from lakeshift.models.backends import continuous

    model = local_model(tokenizer)
    # an output layer leaning to a frame's and an answer's tokens, so that the answers go on writing them
    pieces = ("\n", "  .", "  ^", "  <", "  >", "\\boxed{", ", UP", ", LEFT", "Wave", "}")
    model.lm_head = leaning_head(tokenizer, 32, pieces)
    maps = [["FGF", "FHF", "FSH"], ["FFFG", "FHFF", "SFHF", "FFFF"], ["GFFF", "FHHF", "FFFF", "FFFS"]]
    prompts = []
    for rows in maps:
        ids = conversation(tokenizer, FrozenLakeMap.from_rows(rows))
        prompts += [ids[: int(len(ids) * share)] for share in (0.5, 0.75, 0.9, 0.97)]
    new = 24
    expected = []
    with torch.inference_mode():
        for ids in prompts:
            out = model.generate(torch.tensor([ids]), max_new_tokens=new, do_sample=False, pad_token_id=0)
            expected.append(out[0, len(ids) :].tolist())
    rule = model.model.embed_tokens.rule
    kinds = [TokenReader(rule).feed(p + e)[1][len(p) :] for p, e in zip(prompts, expected, strict=True)]
    local = sum(k is not None for answer in kinds for k in answer)
    assert 0 < local < sum(map(len, kinds))  # both kinds of step
    answers: list[list[int]] = [[] for _ in prompts]

    def done(finished: continuous.Finished) -> None:
        answers[finished.index] = finished.tokens

    continuous.decode(
        model,
        prompts,
        max_new_tokens=new,
        stop_ids=[],
        slots=3,
        sampling=continuous.Sampling(),
        on_finished=done,
        new_walker=lambda: TokenReader(rule),
    )
    assert answers == expected


@pytest.mark.slow
def test_a_local_model_trains_saves_loads_and_predicts_alike_with_both_engines(tmp_path: Path) -> None:
    from tests.model_fixtures import generate_split

    data = tmp_path / "data"
    generate_split(data, "id-train", sizes=(3, 4), count=4, cots=("wave",), train=True)
    run = tmp_path / "run"
    common = ["--data", str(data), "--input", "grid", "--cot", "wave"]
    cells = "grids=coupled,sequence=none,offsets=random,attention=local"
    argv = ["train", *common, "--model", "micro-cells", "--out", str(run), "--max-steps", "2"]
    assert main([*argv, "--prompt", "map-only", "--cells", cells]) == 0
    config = json.loads((run / "model" / "config.json").read_text())
    assert CellSpec.from_json(config["cells"]).attention == "local"
    from safetensors import safe_open

    with safe_open(str(run / "model" / "model.safetensors"), "pt") as saved:
        assert "model.layers.0.self_attn.slot_keys.weight" in set(saved.keys())
    answers = {}
    for engine in ("generate", "continuous"):
        out = tmp_path / f"{engine}.jsonl"
        argv = ["predict", "--model", str(run), *common, "--split", "id-train", "--limit", "4"]
        argv += ["--max-new-tokens", "40", "--engine", engine, "--out", str(out)]
        assert main(argv) == 0
        answers[engine] = [json.loads(line)["output"] for line in out.read_text().splitlines()]
    assert len(answers["generate"]) == 4 and answers["generate"] == answers["continuous"]
