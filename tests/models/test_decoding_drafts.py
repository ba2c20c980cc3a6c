"""Map drafts and their verification: a draft is the map before at the same cells (checked against real
traces on random maps); the ``speculative`` engine writes exactly what the engine without drafts writes,
whether the drafts are mostly wrong (a random model), mostly right (drafts from the answer itself, with a
token changed here and there) or end inside a stop, for full and local attention, in slots that change
hands and columns that realign."""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lakeshift import formats, traces
from lakeshift.env import FrozenLakeMap
from lakeshift.models.cells import CellSpec, CellVocab, CellWalker, PositionRule, TokenReader
from lakeshift.models.cells.drafts import NONE, MapDrafts
from lakeshift.models.cells.positions import MAP_END
from lakeshift.models.tokenizer import build_structured_tokenizer
from tests.map_strategies import random_maps
from tests.model_fixtures import leaning_head

COUPLED = CellSpec(grids="coupled", sequence="none")


@pytest.fixture(scope="module")
def tokenizer() -> Any:
    return build_structured_tokenizer([])


def conversation(tokenizer: Any, m: FrozenLakeMap, cot: str) -> list[int]:
    messages = [
        {"role": "user", "content": formats.render(m, "grid")},
        {"role": "assistant", "content": traces.completion(m, m.optimal_path(), cot)},
    ]
    return tokenizer.apply_chat_template(messages, tokenize=True, return_dict=True)["input_ids"]


@given(random_maps(max_size=7, hole_probs=(0.0, 0.25)), st.sampled_from(["wave", "grid"]))
@settings(max_examples=40, deadline=None)
def test_a_tokens_counterpart_shows_the_same_cell_in_the_map_before(tokenizer, m, cot) -> None:
    ids = conversation(tokenizer, m, cot)
    rule = PositionRule.of(COUPLED, CellVocab.from_tokenizer(tokenizer))
    rows, cols, _, numbers, _ = channels = CellWalker(rule).feed(ids)
    drafts = MapDrafts()
    drafts.feed(ids, channels)
    matched = 0
    for p, q in enumerate(drafts.counterparts):
        if q == NONE:
            continue
        assert q < p
        if numbers[p - 1] >= 2:  # p shows a cell of a redrawn map: q shows it in the map before
            shown = (numbers[p - 1], rows[p - 1], cols[p - 1])
            assert (numbers[q - 1], rows[q - 1], cols[q - 1]) == (shown[0] - 1, *shown[1:])
            matched += 1
        else:  # text after a map: the counterpart of the token before, one on
            assert q == drafts.counterparts[p - 1] + 1
    assert matched >= sum(n >= 3 for n in numbers)  # every token of a map after the first redrawn one


@given(random_maps(max_size=6, hole_probs=(0.25,)), st.sampled_from(["wave", "grid"]), st.data())
@settings(max_examples=40, deadline=None)
def test_a_draft_is_what_follows_the_counterpart_to_its_maps_end_at_most(tokenizer, m, cot, data) -> None:
    ids = conversation(tokenizer, m, cot)
    rule = PositionRule.of(COUPLED, CellVocab.from_tokenizer(tokenizer))
    channels = CellWalker(rule).feed(ids)
    cut = data.draw(st.integers(1, len(ids) - 1))
    drafts = MapDrafts()
    drafts.feed(ids[:cut], tuple(c[:cut] for c in channels))
    limit = data.draw(st.integers(0, 200))
    draft = drafts.draft(ids[cut], limit)
    whole = MapDrafts()
    whole.feed(ids, channels)
    q = whole.counterparts[cut]  # the counterpart of the token after those fed
    if q == NONE or limit == 0:
        assert draft == []
        return
    end = q + 1 + len(draft)
    assert draft == ids[q + 1 : end] and 1 <= len(draft) <= limit
    numbers, edges = channels[3], channels[4]
    # it ends with the first map it reaches: a redrawn map's end, or the token before one leaving a map
    assert MAP_END not in edges[q + 1 : end - 1]
    mapped = [i for i in range(q + 1, end) if numbers[i]]
    assert not mapped or all(numbers[i] for i in range(mapped[0], end))
    left = bool(mapped) and end < len(ids) and not numbers[end]
    assert len(draft) == limit or edges[end - 1] == MAP_END or left or end == cut


def test_a_grid_traces_drafts_differ_from_the_map_only_where_the_move_changed_it(tokenizer) -> None:
    """On a grid trace, the draft after each redrawn map's first cell is the rest of that map but for the
    two cells the move changed (the player's old and new cell): a map costs a few passes, not a token's."""
    m = FrozenLakeMap.from_rows(["SFFF", "FHFH", "FFFH", "HFFG"])
    ids = conversation(tokenizer, m, "grid")
    rule = PositionRule.of(COUPLED, CellVocab.from_tokenizer(tokenizer))
    channels = CellWalker(rule).feed(ids)
    numbers = channels[3]
    firsts = [p for p in range(1, len(ids)) if numbers[p] >= 3 and numbers[p - 1] != numbers[p]]
    assert len(firsts) == len(m.optimal_path()) - 1
    for p in firsts:
        drafts = MapDrafts()
        drafts.feed(ids[: p + 1], tuple(c[: p + 1] for c in channels))
        draft = drafts.draft(ids[p + 1], 1000)  # after the map's first cell, p + 1
        truth = ids[p + 2 : p + 2 + len(draft)]
        assert len(draft) == m.size * (m.size + 1) - 1
        assert 0 < sum(a != b for a, b in zip(draft, truth, strict=True)) <= 2


@given(st.lists(st.integers(0, 3), max_size=40), st.integers(0, 3), st.integers(0, 30))
@settings(max_examples=200, deadline=None)
def test_prompt_lookup_drafts_what_followed_the_latest_longest_match(ids, after, limit) -> None:
    from lakeshift.models.backends.drafts import NGRAM_DRAFT, NGRAM_LONGEST, NGRAM_SHORTEST, NgramDrafts

    drafts = NgramDrafts()
    for i in range(0, len(ids), 7):  # fed piece by piece
        drafts.feed(ids[i : i + 7])
    expected: list[int] = []
    whole = [*ids, after]
    for n in range(NGRAM_LONGEST, NGRAM_SHORTEST - 1, -1):
        if len(whole) < n:
            continue
        tail = whole[-n:]
        starts = [j for j in range(len(ids) - n) if ids[j : j + n] == tail]  # (with a token after)
        if starts:
            expected = ids[starts[-1] + n : starts[-1] + n + min(limit, NGRAM_DRAFT)]
            break
    assert drafts.draft(after, limit) == expected


# --- the engine ---------------------------------------------------------------------------------------


def decode(
    model: Any, prompts: list[list[int]], new: int, slots: int, drafts: bool, stop: list[int] | None = None
) -> tuple[list[list[int]], list[int]]:
    """Each prompt's answer and passes, greedy, by the continuous engine with or without drafts (a cells
    model's from the map before, another's by prompt lookup)."""
    from lakeshift.models.backends import continuous
    from lakeshift.models.backends.drafts import NgramDrafts

    cells = hasattr(model.model.embed_tokens, "rule")
    rule = model.model.embed_tokens.rule if cells else None
    answers: list[list[int]] = [[] for _ in prompts]
    passes = [0] * len(prompts)

    def done(finished: continuous.Finished) -> None:
        answers[finished.index], passes[finished.index] = finished.tokens, finished.passes

    continuous.decode(
        model,
        prompts,
        max_new_tokens=new,
        stop_ids=stop or [],
        slots=slots,
        sampling=continuous.Sampling(),
        on_finished=done,
        new_walker=(lambda: TokenReader(rule)) if cells else None,
        drafts=(MapDrafts if cells else NgramDrafts) if drafts else None,
    )
    return answers, passes


def model_of(tokenizer: Any, kind: str, leaning: bool = True) -> Any:
    """A small random model: a cells model with ``grids: coupled`` and ``kind`` (``full`` or ``local``)
    attention, its cell, map-number and slot vectors large enough to matter, or a ``plain`` Qwen2.
    ``leaning``: its output layer leans to a map's tokens, so that its answers go on drawing maps (and
    drafts are made)."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from lakeshift.models.cells import register

    config_class, model_class = register()
    sizes = {
        "vocab_size": len(tokenizer),
        "hidden_size": 32,
        "intermediate_size": 64,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "tie_word_embeddings": True,
        "pad_token_id": 0,
    }
    torch.manual_seed(0)
    if kind == "plain":
        model = Qwen2ForCausalLM(Qwen2Config(**sizes))
    else:
        model = model_class(
            config_class(
                cells=CellSpec(grids="coupled", sequence="none", attention=kind).to_json(),
                cell_vocab=CellVocab.from_tokenizer(tokenizer).to_config(),
                **sizes,
            )
        )
        with torch.no_grad():
            embedding = model.model.embed_tokens
            for part in (embedding.row, embedding.col, embedding.frame, embedding.edge):
                part.weight[1:].normal_(0, 1.0)
            for layer in model.model.layers:
                if kind == "local":
                    layer.self_attn.slot_keys.weight.normal_(0, 1.0)
                    layer.self_attn.slot_values.weight.normal_(0, 1.0)
    if leaning:
        pieces = ("\n", "  .", "  ^", "  <", "  >", "  X", "  P", "  G", "Wave", "\\boxed{")
        model.lm_head = leaning_head(tokenizer, 32, pieces)
    return model.eval()


def prompts_of(tokenizer: Any, cot: str) -> list[list[int]]:
    """Prompts cut inside traces of several maps (past a first redrawn map, so drafts exist)."""
    maps = [["FGF", "FHF", "FSH"], ["FFFG", "FHFF", "SFHF", "FFFF"], ["GFFF", "FHHF", "FFFF", "FFFS"]]
    prompts = []
    for rows in maps:
        ids = conversation(tokenizer, FrozenLakeMap.from_rows(rows), cot)
        prompts += [ids[: int(len(ids) * share)] for share in (0.45, 0.6, 0.75, 0.9)]
    return prompts


@pytest.mark.parametrize("kind", ["full", "local", "plain"])
def test_the_speculative_engine_writes_what_the_engine_without_drafts_writes(tokenizer, kind) -> None:
    model = model_of(tokenizer, kind)
    prompts = prompts_of(tokenizer, "wave")
    plain, plain_passes = decode(model, prompts, 40, slots=3, drafts=False)
    drafted, _ = decode(model, prompts, 40, slots=3, drafts=True)
    assert drafted == plain
    assert plain_passes == [len(a) for a in plain]  # one token a pass without drafts


@pytest.mark.parametrize("kind", ["full", "local", "plain"])
def test_drafts_from_the_answer_itself_are_accepted_and_change_nothing(tokenizer, kind, monkeypatch) -> None:
    """Drafts that are the engine's own answer with a token changed now and then: long prefixes are
    accepted (fewer passes than tokens), a stop inside an accepted draft ends the answer there, the cap
    cuts it, and the answers are those without drafts."""
    from lakeshift.models.backends import continuous

    model = model_of(tokenizer, kind)
    prompts = prompts_of(tokenizer, "grid")
    free, _ = decode(model, prompts, 48, slots=4, drafts=False)
    # the token most answers write but not all: those answers stop there, the others run to the cap
    written = Counter(tok for answer in free for tok in set(answer[1:]))
    stop = [max((tok for tok, n in written.items() if n < len(free)), key=written.__getitem__)]
    plain, _ = decode(model, prompts, 48, slots=4, drafts=False, stop=stop)
    assert any(a[-1] in stop for a in plain) and any(len(a) == 48 for a in plain)
    noise = random.Random(0)

    def from_the_answer(self: Any, slot: int, longest: int, after: int) -> list[int]:
        answer = plain[self.state.request[slot] % len(plain)]
        done = int(self.state.counts[slot])
        draft = answer[done : done + min(noise.randint(0, 30), longest)]
        if draft and noise.random() < 0.5:
            draft[noise.randrange(len(draft))] = noise.randrange(len(tokenizer))
        return draft

    realigned = []
    realign = continuous.SlotCache.realign
    monkeypatch.setattr(continuous._Loop, "draft", from_the_answer)
    monkeypatch.setattr(MapDrafts, "_counterpart", lambda self: 0)  # every slot ready to draft
    # as few columns as a slot's longest span and block need: the columns realign often
    monkeypatch.setattr(continuous, "capacity", lambda longest, new, drafts: longest + new + 32)
    monkeypatch.setattr(
        continuous.SlotCache, "realign", lambda self, *a: (realigned.append(1), realign(self, *a))[1]
    )
    drafted, passes = decode(model, prompts * 3, 48, slots=4, drafts=True, stop=stop)
    assert drafted == plain * 3
    assert sum(passes) < sum(map(len, drafted)) / 2
    assert realigned


def test_predict_records_the_engine_and_its_passes(tokenizer, tmp_path: Path) -> None:
    import json

    from lakeshift.cli import main
    from tests.model_fixtures import generate_split

    data = tmp_path / "data"
    generate_split(data, "id-test", sizes=(3, 4), count=2, cots=("grid",))
    model = model_of(tokenizer, "local", leaning=False)
    model.save_pretrained(tmp_path / "ckpt")
    tokenizer.save_pretrained(tmp_path / "ckpt")

    def predict(engine: str, *decoding: str) -> list[dict]:
        out = tmp_path / f"{engine}-{len(decoding)}.jsonl"
        argv = ["predict", "--model", str(tmp_path / "ckpt"), "--data", str(data), "--split", "id-test"]
        argv += ["--input", "grid", "--cot", "grid", "--prompt", "map-only", "--out", str(out)]
        argv += ["--max-new-tokens", "24", "--engine", engine, *decoding]
        assert main(argv) == 0
        return [json.loads(line) for line in out.read_text().splitlines()]

    rows = {engine: predict(engine) for engine in ("generate", "speculative", "auto")}
    assert [r["output"] for r in rows["generate"]] == [r["output"] for r in rows["speculative"]]
    # sampled: token by token, the same draws
    sampled = {
        engine: [r["output"] for r in predict(engine, "--temperature", "1.0", "--seed", "3")]
        for engine in ("continuous", "speculative")
    }
    assert sampled["continuous"] == sampled["speculative"] != [r["output"] for r in rows["generate"]]
    assert {r["engine"] for r in rows["auto"]} == {"speculative"}
    assert all(1 <= r["n_passes"] <= r["n_output_tokens"] for r in rows["speculative"])
    assert "n_passes" not in rows["generate"][0]
