"""Row and column embeddings for map cells (``--model mini-cells``): every cell of the prompt's grid and every
coordinate token gets its own row and column, nothing else does, generation agrees with training, and a
cells model trains, saves, reloads and predicts through the CLI."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from lakeshift import extract, formats, traces
from lakeshift.cli import main
from lakeshift.env import FrozenLakeMap
from lakeshift.models.cells import CellSpec, CellVocab, PositionRule, cell_positions
from lakeshift.models.tokenizer import build_structured_tokenizer
from tests.map_strategies import random_maps

SYMBOL = {"S": "P", "G": "G", "H": "X", "F": "."}


@pytest.fixture(scope="module")
def tokenizer():
    return build_structured_tokenizer([])


def _rule(
    tokenizer: Any,
    grids: str = "first",
    walk: str = "answer",
    *,
    desc: bool = False,
    table: bool = False,
    player: bool = False,
) -> PositionRule:
    """The rule of a spec over ``tokenizer``'s vocab (``desc``, ``table``: the maps read besides grid)."""
    maps = ("grid", *("table",) * table, *("desc",) * desc)
    spec = CellSpec(grids=grids, walk=walk, maps=maps, player=player)  # type: ignore[arg-type]
    return PositionRule.of(spec, CellVocab.from_tokenizer(tokenizer))


@given(
    random_maps(max_size=10, hole_probs=(0.25,), solvable=False), st.sampled_from(["coords", "grid", "none"])
)
@settings(max_examples=60, deadline=None)
def test_prompt_grid_cells_and_coordinates_get_their_row_and_column(tokenizer, m, cot) -> None:
    path = m.optimal_path() if m.solvable else ["UP"]
    answer = traces.completion(m, path, cot) if m.solvable else "(1,1)\n\\boxed{UP}"
    messages = [
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": formats.render(m, "grid")},
        {"role": "assistant", "content": answer},
    ]
    ids = tokenizer.apply_chat_template(messages, tokenize=True, return_dict=True)["input_ids"]
    rows, cols = cell_positions(ids, _rule(tokenizer, walk="none"))
    tokens = tokenizer.convert_ids_to_tokens(ids)
    grid_cells = [(r, c, t) for t, r, c in zip(tokens, rows, cols, strict=True) if r and "(" not in t]
    # exactly the n x n cells of the prompt's map, each with its symbol, row by row
    assert [(r, c) for r, c, _ in grid_cells] == [
        (r, c) for r in range(1, m.size + 1) for c in range(1, m.size + 1)
    ]
    rendered = m.rows
    for r, c, tok in grid_cells:
        assert tok.strip() == SYMBOL[rendered[r - 1][c - 1]]
    # every coordinate token of the answer, with its own row and column
    for tok, r, c in zip(tokens, rows, cols, strict=True):
        if tok.strip().startswith("("):
            assert tok.strip() == f"({r},{c})"
    n_coords = sum(tok.strip().startswith("(") for tok in tokens)
    assert sum(1 for r in rows if r) == m.size**2 + n_coords  # grids the CoT redraws get none


# A map on which A* answers another shortest path than ``optimal_path`` (hypothesis found it).
_ASTAR_OTHER_PATH = FrozenLakeMap(
    size=9,
    holes=frozenset(
        {(8, 0), (5, 7), (0, 2), (0, 5), (2, 8), (6, 5), (4, 5), (5, 6), (0, 1), (8, 8)}
        | {(0, 4), (7, 3), (3, 2), (3, 8), (1, 4), (2, 3), (1, 7), (2, 6), (6, 0), (7, 5)}
    ),
    start=(4, 8),
    goal=(7, 2),
)


@given(
    m=random_maps(max_size=10, hole_probs=(0.25,)), cot=st.sampled_from(["none", "coords", "desc", "astar"])
)
@example(m=_ASTAR_OTHER_PATH, cot="astar")
@settings(max_examples=60, deadline=None)
def test_walking_move_tokens_get_the_cell_each_move_reaches(tokenizer, m, cot) -> None:
    completion = traces.completion(m, m.optimal_path(), cot)
    # the plan the completion answers (A* answers the path its own search found, which may be another
    # shortest path than the one given)
    path = list(extract(completion).moves)
    messages = [
        {"role": "user", "content": formats.render(m, "grid")},
        {"role": "assistant", "content": completion},
    ]
    ids = tokenizer.apply_chat_template(messages, tokenize=True, return_dict=True)["input_ids"]
    tables = _rule(tokenizer)
    rows, cols = cell_positions(ids, tables)
    moves = [(r, c) for i, r, c in zip(ids, rows, cols, strict=True) if i in tables.moves]
    # the answer's moves are the last ones: each gets the 1-based cell it reaches (the start excluded);
    # the moves the desc CoT names in its prose get none
    answer = moves[len(moves) - len(path) :]
    assert answer == [(r + 1, c + 1) for r, c in m.simulate(path).positions[1:]]
    assert set(moves[: len(moves) - len(path)]) <= {(0, 0)}
    # without move tables nothing changes for the map and the coordinates, and moves get no cell
    plain = cell_positions(ids, _rule(tokenizer, walk="none"))
    keep = [i not in tables.moves for i in ids]
    assert [r for r, k in zip(rows, keep, strict=True) if k] == [
        r for r, k in zip(plain[0], keep, strict=True) if k
    ]
    assert all(r == 0 for r, k in zip(plain[0], keep, strict=True) if not k)


def test_a_walk_is_clamped_at_the_edge_and_restarts_with_each_answer(tokenizer) -> None:
    tables = _rule(tokenizer)
    text = "Grid:\n.  P\n.  G\nmoving DOWN: \\boxed{RIGHT, DOWN, DOWN} or \\boxed{UP, LEFT}"
    ids = tokenizer.encode(text)
    rows, cols = cell_positions(ids, tables)
    walked = [(r, c) for i, r, c in zip(ids, rows, cols, strict=True) if i in tables.moves]
    # the prose's DOWN gets no cell; each answer walks from the start
    assert walked == [(0, 0), (1, 2), (2, 2), (2, 2), (1, 2), (1, 1)]


def test_a_continuation_step_never_starts_a_grid(tokenizer) -> None:
    tables = _rule(tokenizer, walk="none")
    for piece in (".", "P", "  X", "\n", " (3,4)"):
        ids = tokenizer.encode(piece)
        rows, cols = cell_positions(ids, tables)
        assert (rows, cols) == (([3], [4]) if piece == " (3,4)" else ([0] * len(ids), [0] * len(ids)))
    # a stray "." after a newline in prose is not a grid
    ids = tokenizer.encode("Done\n.\nok")
    assert cell_positions(ids, tables)[0] == [0] * len(ids)


@pytest.mark.slow
@pytest.mark.parametrize("size", ["micro-cells", "mini-cells-compose"])
def test_a_cells_model_trains_reloads_and_predicts(tmp_path: Path, size: str) -> None:
    from tests.model_fixtures import generate_split

    data = tmp_path / "data"
    generate_split(data, "id-train", count=8, cots=("coords",), train=True)
    run = tmp_path / "run"
    common = ["--data", str(data), "--input", "grid", "--cot", "coords"]
    argv = [
        "train",
        *common,
        "--model",
        size,
        "--out",
        str(run),
        "--max-steps",
        "3",
        "--prompt",
        "map-only",
    ]
    assert main(argv) == 0
    config = json.loads((run / "model" / "config.json").read_text())
    assert config["model_type"] == "lakeshift_cells" and config["cell_vocab"]["moves"]
    assert not any(key.startswith("cell_") and key != "cell_vocab" for key in config)  # one spec, one vocab
    composed = size == "mini-cells-compose"
    assert CellSpec.from_json(config["cells"]) == (
        CellSpec(grids="every", offsets="random", coordinates="composed") if composed else CellSpec()
    )
    if size == "micro-cells":  # a fine-tune may change a cells model's spec; saved with it
        again = tmp_path / "again"
        argv = ["train", *common, "--model", str(run), "--out", str(again), "--max-steps", "1"]
        assert main([*argv, "--prompt", "map-only", "--cells", "grids=every,order=true"]) == 0
        saved = json.loads((again / "model" / "config.json").read_text())["cells"]
        assert CellSpec.from_json(saved) == CellSpec(grids="every", order=True)
    preds = tmp_path / "p.jsonl"
    argv = [
        "predict",
        "--model",
        str(run),
        *common,
        "--split",
        "id-train",
        "--limit",
        "3",
        "--max-new-tokens",
        "8",
        "--out",
        str(preds),
    ]
    assert main(argv) == 0
    assert len(preds.read_text().splitlines()) == 3


def _assert_generation_matches_one_pass(model: Any, prompt: list[int], answer: list[int]) -> None:
    """Generation forced to write ``answer`` after ``prompt`` (one cached step per token) gives each step
    the logits one forward pass over the whole sequence gives it."""
    import torch

    forced = iter(answer)
    out = model.generate(
        torch.tensor([prompt]),
        attention_mask=torch.ones(1, len(prompt), dtype=torch.long),
        max_new_tokens=len(answer),
        do_sample=False,
        prefix_allowed_tokens_fn=lambda _batch, _ids: [next(forced)],
        output_logits=True,
        return_dict_in_generate=True,
        pad_token_id=model.generation_config.pad_token_id,
        eos_token_id=None,
    )
    assert out.sequences[0].tolist() == prompt + answer
    with torch.no_grad():
        full = model(torch.tensor([prompt + answer])).logits[0]
    for step, logits in enumerate(out.logits):
        assert torch.allclose(logits[0], full[len(prompt) + step - 1], atol=1e-4), step


def test_generation_gives_each_walked_move_the_cell_training_gives_it() -> None:
    """Cached generation (one token per step) sees the same positions, hence the same logits, as one
    forward pass over the whole sequence: the walk's cells depend on the moves before each step."""
    import torch

    from lakeshift.models.registry import build_named

    torch.manual_seed(0)
    model, tokenizer = build_named("micro-cells", [])
    model.eval()
    assert model.config.cell_vocab["moves"] and model.config.cells["walk"] == "answer"
    prompt = tokenizer.encode("Grid:\nP  .  .\n.  X  .\n.  .  G\nPlan:")
    answer = tokenizer.encode("\\boxed{RIGHT, RIGHT, DOWN, DOWN, LEFT}")
    _assert_generation_matches_one_pass(model, prompt, answer)
    # and the moves did walk (RIGHT, RIGHT, DOWN, DOWN, LEFT from (1,1)), so the check above is not vacuous
    rows, cols, *_ = model.model.embed_tokens.indices(torch.tensor([prompt + answer]))
    walked = slice(len(prompt) + 1, len(prompt) + 6)
    assert list(zip(rows[0, walked].tolist(), cols[0, walked].tolist(), strict=True)) == [
        (1, 2),
        (1, 3),
        (2, 3),
        (3, 3),
        (3, 2),
    ]


@pytest.mark.parametrize("option", ["player", "order"])
def test_switching_the_player_flag_or_the_order_on_keeps_the_model_s_logits(option: str) -> None:
    """``set_spec`` with ``player`` or ``order`` on a model without it adds zero weights: the logits of a
    grid+desc conversation, whose flags and cells are not all zero, stay what they were; the spec is then
    saved in the config."""
    import torch

    from lakeshift.models.cells import set_spec, spec_of

    model, tokenizer = _cells_model("next", moves=True, trace_moves=True)
    ids = torch.tensor([_conversation_ids(tokenizer, traces_map(), "grid", "grid+desc")])
    with torch.no_grad():
        before = model(ids).logits
        set_spec(model, spec_of(model).replace({option: True}))
        after = model(ids).logits
    rows, _, flags, *_ = model.model.embed_tokens.indices(ids)
    assert int((flags if option == "player" else rows).sum()) > 0  # what the option reads
    assert model.config.cells[option] is True
    assert getattr(model.model.embed_tokens, option) is not None
    assert torch.allclose(before, after)


def test_the_ordered_part_of_a_cell_is_linear_in_its_row_and_column() -> None:
    """With ``order`` and the lookup tables zeroed, a cell's vector is a linear map of (r, c): rows are
    equally spaced along one direction and columns along another, and a token that is no cell gets zero."""
    import torch

    model, _ = _cells_model("first", moves=True, order=True)
    embedding = model.model.embed_tokens
    with torch.no_grad():
        embedding.row.weight.zero_()
        embedding.col.weight.zero_()
        rows = torch.tensor([0, 1, 2, 3, 7, 1, 1])
        cols = torch.tensor([0, 1, 1, 1, 1, 2, 5])
        v = embedding.cell_vectors(rows, cols)
    assert torch.count_nonzero(v[0]) == 0
    step_row, step_col = v[2] - v[1], v[5] - v[1]
    assert torch.count_nonzero(step_row) > 0 and not torch.allclose(step_row, step_col)
    assert torch.allclose(v[3] - v[2], step_row, atol=1e-6)
    assert torch.allclose(v[4] - v[1], 6 * step_row, atol=1e-5)
    assert torch.allclose(v[6] - v[1], 4 * step_col, atol=1e-5)


def test_generation_gives_each_player_flag_what_training_gives_it() -> None:
    """With ``player``, cached generation of a grid+desc answer (stated moves, redrawn grids) gives
    each step the logits of one forward pass, and the flags it reads are not all zero."""
    import torch

    model, tokenizer = _cells_model("next", moves=True, trace_moves=True, player=True)
    m = traces_map()
    ids = _conversation_ids(tokenizer, m, "grid", "grid+desc")
    answer = CellVocab.from_tokenizer(tokenizer).answer
    prompt_end = next(i for i in range(len(ids)) if tuple(ids[i - len(answer) : i]) == answer)
    _assert_generation_matches_one_pass(model, ids[:prompt_end], ids[prompt_end:])
    assert int(model.model.embed_tokens.indices(torch.tensor([ids]))[2].sum()) == len(m.optimal_path())


@given(
    st.lists(st.lists(st.integers(0, 10), min_size=1, max_size=12), min_size=1, max_size=4),
    st.integers(0, 99),
)
@settings(max_examples=60, deadline=None)
def test_a_random_shift_moves_every_cell_of_a_sequence_alike_and_stays_in_range(batch, seed) -> None:
    import torch

    from lakeshift.models.cells import MAX_CELL, shifted

    width = max(len(row) for row in batch)
    index = torch.tensor([row + [0] * (width - len(row)) for row in batch])
    torch.manual_seed(seed)
    moved = shifted(index)
    assert ((moved == 0) == (index == 0)).all() and int(moved.max()) < MAX_CELL
    diff = (moved - index).tolist()
    offsets = {
        (i, d)
        for i, (row, ds) in enumerate(zip(batch, diff, strict=False))
        for x, d in zip(row, ds, strict=False)
        if x
    }
    assert len(offsets) == len({i for i, _ in offsets})  # one offset per sequence


def test_random_shifts_reach_the_largest_rows() -> None:
    import torch

    from lakeshift.models.cells import MAX_CELL, shifted

    torch.manual_seed(0)
    index = torch.tensor([[1, 2, 3, 0, 6]] * 400)
    reached = set(shifted(index).flatten().tolist())
    assert reached == set(range(MAX_CELL))  # every row embedding 1..30 trains (and 0 stays "none")


@given(
    random_maps(max_size=8, hole_probs=(0.25,)),
    st.sampled_from(["none", "coords", "grid", "desc", "wave"]),
    st.data(),
)
@settings(max_examples=60, deadline=None)
def test_a_walker_fed_piece_by_piece_gives_what_the_whole_prefix_gives(tokenizer, m, cot, data) -> None:
    from lakeshift.models.cells import CellWalker

    grids = data.draw(st.sampled_from(["first", "every", "next", "coupled"]))
    player = data.draw(st.booleans())
    walk = "trace" if player else "answer"
    tables = _rule(tokenizer, grids, walk, desc=player, player=player and grids in ("next", "coupled"))
    user = formats.render(m, data.draw(st.sampled_from(["grid", "desc"])))
    text = user + "\n" + traces.completion(m, m.optimal_path(), cot)
    ids = tokenizer.encode(text)
    cuts = sorted(set(data.draw(st.lists(st.integers(1, len(ids) - 1), max_size=12)))) if len(ids) > 1 else []
    walker, done = CellWalker(tables), 0
    for end in [*cuts, len(ids)]:
        piece = walker.feed(ids[done:end])
        full = CellWalker(tables).feed(ids[:end])  # what generation's step would see of the whole prefix
        assert piece == tuple(f[done:end] for f in full)
        done = end


def test_the_shift_size_moves_cells_in_training_only() -> None:
    """``mini-cells-shift`` is mini-cells with ``offsets: random``: two training passes over the same sequence
    differ (each draws its own offsets), two evaluation passes do not, and plain mini-cells never shifts."""
    import torch

    from lakeshift.models.registry import build_named

    for name, shifts in (("mini-cells-shift", True), ("mini-cells", False)):
        torch.manual_seed(0)
        model, tokenizer = build_named(name, [])
        assert (model.config.cells["offsets"] == "random") is shifts
        ids = torch.tensor([tokenizer.encode("Grid:\nP  .  .\n.  X  .\n.  .  G\nPlan:\\boxed{RIGHT, DOWN}")])
        model.train()
        first, second = (model(ids).logits for _ in range(2))
        assert (not torch.allclose(first, second)) is shifts
        with torch.no_grad():  # sampling in training mode (GRPO) never moves
            assert torch.equal(model(ids).logits, model(ids).logits)
        model.eval()
        assert torch.equal(model(ids).logits, model(ids).logits)


def _composed_model() -> tuple[Any, Any]:
    import torch

    from lakeshift.models.registry import build_named

    torch.manual_seed(0)
    return build_named("mini-cells-compose", [])


def test_a_composed_coordinate_is_its_shared_vector_plus_its_row_and_column() -> None:
    """``mini-cells-compose``: a coordinate token's input embedding and output vector are the shared vector
    of its spacing plus the row and column embeddings of its cell, so (9,7), never seen in 3x3-6x6 text, is
    made of trained parts; outside shifted training passes both sides use the same vectors."""
    import torch

    model, tokenizer = _composed_model()
    model.eval()
    emb = model.model.embed_tokens
    vocab = tokenizer.get_vocab()
    far, spaced, shared = vocab["(9,7)"], vocab[" (9,7)"], vocab["(1,1)"]
    expected = emb.weight[shared] + emb.row.weight[9] + emb.col.weight[7]
    ids = torch.tensor([[far]])
    assert torch.allclose(emb(ids, (torch.tensor([[9]]), torch.tensor([[7]])))[0, 0], expected)
    hidden = torch.randn(1, 1, emb.embedding_dim)
    logits = model.lm_head(hidden)[0, 0]
    assert torch.allclose(logits[far], hidden[0, 0] @ expected, atol=1e-5)
    assert torch.allclose(
        logits[spaced] - logits[far],
        hidden[0, 0] @ (emb.weight[vocab[" (1,1)"]] - emb.weight[shared]),
        atol=1e-5,
    )
    move = vocab["RIGHT"]  # any other token keeps its own (tied) vector
    assert torch.allclose(logits[move], hidden[0, 0] @ emb.weight[move], atol=1e-5)


def test_a_shifted_pass_moves_the_output_coordinates_with_the_input() -> None:
    """In a shifted training pass each sequence's coordinate outputs move by that sequence's offset, so
    the text (3,2) is scored with the same row and column embeddings its input copy was given."""
    import torch

    model, tokenizer = _composed_model()
    model.train()
    emb = model.model.embed_tokens
    text = "Grid:\nP  .  .\n.  X  .\n.  .  G\nPlan:(1,1) (1,2) (2,2)"
    ids = torch.tensor([tokenizer.encode(text)] * 3)
    torch.manual_seed(3)
    emb(ids)
    dr, dc = emb._offsets
    assert dr.tolist() != [0, 0, 0] or dc.tolist() != [0, 0, 0]
    vectors = emb.coordinate_vectors()
    target = emb.composed.index(tokenizer.get_vocab()["(3,2)"])
    for b in range(3):
        shared = emb.weight[tokenizer.get_vocab()["(1,1)"]]
        moved = shared + emb.row.weight[3 + int(dr[b])] + emb.col.weight[2 + int(dc[b])]
        assert torch.allclose(vectors[b, target], moved)
    model.eval()
    emb(ids)
    assert emb._offsets is None and emb.coordinate_vectors().dim() == 2


def test_a_composed_model_saves_loads_and_generates_what_one_pass_gives(tmp_path: Path) -> None:
    import torch
    from transformers import AutoModelForCausalLM

    model, tokenizer = _composed_model()
    model.eval()
    model.save_pretrained(tmp_path / "m")
    again = AutoModelForCausalLM.from_pretrained(tmp_path / "m")
    again.eval()
    assert type(again.lm_head).__name__ == "ComposedHead"
    assert again.lm_head.weight is again.model.embed_tokens.weight
    prompt = tokenizer.encode("Grid:\nP  .  .\n.  X  .\n.  .  G\nPlan:")
    answer = tokenizer.encode("(1,1) (1,2) (2,2)")
    ids = torch.tensor([prompt + answer])
    with torch.no_grad():
        assert torch.allclose(again(ids).logits, model(ids).logits, atol=1e-5)
    _assert_generation_matches_one_pass(again, prompt, answer)


def test_a_sequence_without_a_grid_is_not_shifted() -> None:
    """A table or desc map names its cells in words: nothing would show a shifted sequence's offset, so
    its coordinates keep their rows and columns (and a composed model's outputs with them)."""
    import torch

    model, tokenizer = _composed_model()
    model.train()
    emb = model.model.embed_tokens
    text = "| | Col 1 | Col 2 |\n| Row 1 | _ | @ |\n| Row 2 | * | _ |\nWalk: LEFT\nstart (1,2) goal (2,1)"
    ids = torch.tensor([tokenizer.encode(text)] * 8)
    embedded = emb(ids)
    assert emb._offsets[0].tolist() == [0] * 8 and emb._offsets[1].tolist() == [0] * 8
    model.eval()
    assert torch.allclose(embedded, emb(ids))


@given(random_maps(max_size=8, hole_probs=(0.25,)), st.sampled_from(["grid", "grid+desc"]))
@settings(max_examples=40, deadline=None)
def test_with_every_grid_each_redrawn_map_gets_its_cells_and_the_answer_still_walks_from_the_start(
    tokenizer, m, cot
) -> None:
    """``grids: every`` (mini-cells-shift, mini-cells-compose): each map a grid CoT redraws gets the
    rows and columns the prompt's map gets, so a redrawn cell and the prompt's cell share a vector; the
    answer's moves still walk from the prompt's start. ``first`` (the shipped base) reads the prompt only."""
    path = m.optimal_path()
    text = formats.render(m, "grid") + "\n" + traces.completion(m, path, cot)
    ids = tokenizer.encode(text)
    first = cell_positions(ids, _rule(tokenizer))
    every = cell_positions(ids, _rule(tokenizer, "every"))
    tokens = tokenizer.convert_ids_to_tokens(ids)
    moves = set(_rule(tokenizer).moves)

    def grid_cells(rows: list[int], cols: list[int]) -> list[tuple[int, int]]:
        return [
            (r, c)
            for i, (r, c) in enumerate(zip(rows, cols, strict=True))
            if r and ids[i] not in moves and "(" not in tokens[i]
        ]

    n_cells = m.size * m.size
    redrawn = len(path)  # the grid CoT draws the map after every move
    assert len(grid_cells(*first)) == n_cells
    assert len(grid_cells(*every)) == n_cells * (1 + redrawn)
    one_map = [(r, c) for r in range(1, m.size + 1) for c in range(1, m.size + 1)]
    assert grid_cells(*every) == one_map * (1 + redrawn)
    walked = [(r, c) for i, (r, c) in enumerate(zip(*every, strict=True)) if ids[i] in moves and r]
    assert walked == [(r, c) for i, (r, c) in enumerate(zip(*first, strict=True)) if ids[i] in moves and r]


@given(random_maps(max_size=8, hole_probs=(0.25,)), st.sampled_from(["grid", "grid+desc"]))
@settings(max_examples=40, deadline=None)
def test_with_next_each_redrawn_token_gets_the_cell_it_predicts(tokenizer, m, cot) -> None:
    """``grids: next``: in each map a grid CoT redraws, the token before a cell (the header line, the
    cell to its left, or the newline ending the row above) carries that cell's row and column; the row's
    last cell carries none. The prompt's map and the answer's walk are those of ``every``."""
    path = m.optimal_path()
    text = formats.render(m, "grid") + "\n" + traces.completion(m, path, cot)
    ids = tokenizer.encode(text)
    every = cell_positions(ids, _rule(tokenizer, "every"))
    coupled = cell_positions(ids, _rule(tokenizer, "next"))
    pairs = list(zip(*every, strict=True))
    nexts = list(zip(*coupled, strict=True))
    moves = set(_rule(tokenizer).moves)
    tokens = tokenizer.convert_ids_to_tokens(ids)
    cells = [i for i, p in enumerate(pairs) if p != (0, 0) and ids[i] not in moves and "(" not in tokens[i]]
    n_cells = m.size * m.size
    prompt, redrawn = cells[:n_cells], cells[n_cells:]
    assert [nexts[i] for i in range(prompt[-1] + 1)] == pairs[: prompt[-1] + 1]  # the prompt's own cells
    assert len(redrawn) == n_cells * len(path)
    for i in redrawn:  # each redrawn cell is announced, with its own row and column, by the token before it
        assert nexts[i - 1] == pairs[i], (i, tokens[i - 1])
        r, c = pairs[i]
        assert nexts[i] == ((r, c + 1) if c < m.size else (0, 0))
    assert [p for i, p in enumerate(nexts) if ids[i] in moves] == [
        p for i, p in enumerate(pairs) if ids[i] in moves
    ]


@given(random_maps(max_size=8, hole_probs=(0.25,)), st.sampled_from(["desc", "table+desc", "grid+desc"]))
@settings(max_examples=40, deadline=None)
def test_with_trace_moves_each_stated_move_gets_the_cell_it_reaches(tokenizer, m, cot) -> None:
    """``walk: trace``: the move a trace states (``I will move RIGHT``) gets the cell its walk reaches,
    on from the previous stated move, the same cells the answer's moves get; with it off the stated moves
    get none, and nothing else changes."""
    path = m.optimal_path()
    ids = _conversation_ids(tokenizer, m, "grid", cot)
    plain = list(zip(*cell_positions(ids, _rule(tokenizer)), strict=True))
    stated = list(zip(*cell_positions(ids, _rule(tokenizer, walk="trace")), strict=True))
    reached = [(r + 1, c + 1) for r, c in m.simulate(path).positions[1:]]
    announce = CellVocab.from_tokenizer(tokenizer).announce
    after_announce = [i for i in range(len(ids)) if tuple(ids[i - len(announce) : i]) == announce]
    assert [stated[i] for i in after_announce] == reached
    assert [plain[i] for i in after_announce] == [(0, 0)] * len(path)
    assert [p for i, p in enumerate(stated) if i not in after_announce] == [
        p for i, p in enumerate(plain) if i not in after_announce
    ]
    assert [p for i, p in enumerate(plain) if ids[i] in _rule(tokenizer).moves and p != (0, 0)] == reached


@given(random_maps(max_size=6, hole_probs=(0.25,)), st.sampled_from(["grid", "grid+desc"]))
@settings(max_examples=30, deadline=None)
def test_a_grid_of_the_answer_sets_no_start(tokenizer, m, cot) -> None:
    """With table input the first grid of a conversation is the trace's first redrawn map, which shows the
    player one move in: it is not the start, so no move walks (the answer's nor a stated one)."""
    ids = _conversation_ids(tokenizer, m, "table", cot)
    tables = _rule(tokenizer, walk="trace")
    rows, cols = cell_positions(ids, tables)
    assert [(r, c) for i, r, c in zip(ids, rows, cols, strict=True) if i in tables.moves] == [(0, 0)] * sum(
        i in tables.moves for i in ids
    )
    assert any(rows)  # the redrawn grids still get their cells


def _player_tables(tokenizer: Any, player: bool = True) -> PositionRule:
    return _rule(tokenizer, "next", "trace", desc=player, player=player)


@given(random_maps(max_size=8, hole_probs=(0.25,)), st.sampled_from(["grid", "desc"]))
@settings(max_examples=40, deadline=None)
def test_the_player_flag_marks_the_token_before_each_redrawn_p(tokenizer, m, input_format) -> None:
    """``player`` (grid+desc CoT): in each redrawn grid exactly one token has the flag, the one whose
    next token is the player (``P`` or ``  P``), which stands where the stated moves lead; with grid CoT
    (no stated moves: the grid is the move) and with the flag off, no token has it."""
    from lakeshift.models.cells import CellWalker

    path = m.optimal_path()
    ids = _conversation_ids(tokenizer, m, input_format, "grid+desc")
    flags = CellWalker(_player_tables(tokenizer)).feed(ids)[2]
    player = {tokenizer.convert_tokens_to_ids(p) for p in ("P", "  P")}
    flagged = [i for i, f in enumerate(flags) if f]
    players = [i for i, tok in enumerate(ids) if tok in player]
    assert len(players) == len(path) + (input_format == "grid")  # the prompt's, then one per redrawn grid
    assert [i + 1 for i in flagged] == players[-len(path) :]
    assert not any(CellWalker(_player_tables(tokenizer, player=False)).feed(ids)[2])
    grid_cot = _conversation_ids(tokenizer, m, input_format, "grid")
    assert not any(CellWalker(_player_tables(tokenizer)).feed(grid_cot)[2])


@given(random_maps(max_size=10, hole_probs=(0.25,)), st.sampled_from(["desc", "grid+desc"]))
@settings(max_examples=40, deadline=None)
def test_a_desc_map_gives_its_cells_and_starts_the_walk(tokenizer, m, cot) -> None:
    """``maps: desc``: each ``row R, column C`` of a desc map gets (R, C) on its column number, and the
    player's starts the walk, so stated and answer moves get the cells they reach, exactly as with grid
    input; without it a desc map gets no cells and no move walks."""
    ids = _conversation_ids(tokenizer, m, "desc", cot)
    rows, cols = cell_positions(ids, _player_tables(tokenizer))
    numbered = [(r, c) for r, c in zip(rows, cols, strict=True) if r]
    start, goal = m.start, m.goal
    reached = [(r + 1, c + 1) for r, c in m.simulate(m.optimal_path()).positions[1:]]
    map_cells = [(r + 1, c + 1) for r, c in (start, *sorted(m.holes), goal)]
    if cot == "desc":  # the map's cells, then each stated move's and each answer move's
        assert numbered == map_cells + reached + reached
    moves = _player_tables(tokenizer).moves
    grid_ids = _conversation_ids(tokenizer, m, "grid", cot)
    grid_rows, grid_cols = cell_positions(grid_ids, _player_tables(tokenizer))
    grid_moves = [(r, c) for i, r, c in zip(grid_ids, grid_rows, grid_cols, strict=True) if i in moves and r]
    assert [(r, c) for i, r, c in zip(ids, rows, cols, strict=True) if i in moves and r] == grid_moves
    answer = CellVocab.from_tokenizer(tokenizer).answer
    prompt_end = next(i for i in range(len(ids)) if tuple(ids[i - len(answer) : i]) == answer)
    assert not any(cell_positions(ids, _player_tables(tokenizer, player=False))[0][:prompt_end])


def _table_tables(
    tokenizer: Any, grids: str = "first", walk: str = "answer", table: bool = True, player: bool = False
) -> PositionRule:
    return _rule(tokenizer, grids, walk, table=table, desc=player, player=player)


def _tables_read(ids: list[int], positions: tuple[list[int], list[int]], tables: PositionRule) -> list[tuple]:
    """(row, column, symbol) of each table cell token that got a cell."""
    return [(r, c, i) for i, r, c in zip(ids, *positions, strict=True) if i in tables.table_cells and r]


TABLE_SYMBOL = {"S": "@", "G": "*", "H": "#", "F": "_"}


@given(random_maps(max_size=10, hole_probs=(0.25,)), st.sampled_from(["none", "desc", "table", "grid"]))
@settings(max_examples=40, deadline=None)
def test_a_table_map_gives_its_cells_and_starts_the_walk(tokenizer, m, cot) -> None:
    """``maps: table``: each cell of the prompt's table gets its row and column, the ``@`` starts the walk,
    so the answer's moves (and stated ones) get the cells they reach exactly as with grid input; without it
    a table gets no cells and no move walks; with ``first`` a redrawn table gets none."""
    ids = _conversation_ids(tokenizer, m, "table", cot)
    tables = _table_tables(tokenizer, walk="trace")
    positions = cell_positions(ids, tables)
    symbol = {tokenizer.convert_tokens_to_ids(f" | {s}"): s for s in "_@*#"}
    read = _tables_read(ids, positions, tables)
    assert [(r, c) for r, c, _ in read] == [
        (r, c) for r in range(1, m.size + 1) for c in range(1, m.size + 1)
    ]
    assert [symbol[i] for _, _, i in read] == [TABLE_SYMBOL[ch] for row in m.rows for ch in row]
    moves = tables.moves
    walked = [(r, c) for i, r, c in zip(ids, *positions, strict=True) if i in moves and r]
    grid_ids = _conversation_ids(tokenizer, m, "grid", cot)
    grid_positions = cell_positions(grid_ids, _rule(tokenizer, walk="trace"))
    assert walked == [(r, c) for i, r, c in zip(grid_ids, *grid_positions, strict=True) if i in moves and r]
    path = m.optimal_path()
    assert walked[-len(path) :] == [(r + 1, c + 1) for r, c in m.simulate(path).positions[1:]]
    off = cell_positions(ids, _table_tables(tokenizer, table=False))
    assert not any(off[0][: ids.index(tables.table_player) + 1])
    assert not any(r for i, r in zip(ids, off[0], strict=True) if i in moves)


@given(random_maps(max_size=8, hole_probs=(0.25,)), st.sampled_from(["table", "table+desc"]))
@settings(max_examples=40, deadline=None)
def test_redrawn_tables_get_their_cells_with_every_and_the_next_cell_with_next(tokenizer, m, cot) -> None:
    """A table a table CoT redraws is read as a redrawn grid: with ``every`` each gets the prompt table's
    cells; with ``next`` the token before each cell (the row's number or the cell to its left) carries it,
    the row's last cell none, and with ``player`` in table+desc exactly the token before each redrawn
    ``@`` has the player flag."""
    from lakeshift.models.cells import CellWalker

    path = m.optimal_path()
    ids = _conversation_ids(tokenizer, m, "table", cot)
    every_tables = _table_tables(tokenizer, "every")
    every = cell_positions(ids, every_tables)
    one_map = [(r, c) for r in range(1, m.size + 1) for c in range(1, m.size + 1)]
    assert [(r, c) for r, c, _ in _tables_read(ids, every, every_tables)] == one_map * (1 + len(path))
    assert len(_tables_read(ids, cell_positions(ids, _table_tables(tokenizer)), every_tables)) == len(one_map)
    next_tables = _table_tables(tokenizer, "next", "trace", player=True)
    rows, cols, flags, *_ = CellWalker(next_tables).feed(ids)
    pairs, nexts = list(zip(*every, strict=True)), list(zip(rows, cols, strict=True))
    cells = [i for i, tok in enumerate(ids) if tok in every_tables.table_cells]
    for i in cells[len(one_map) :]:
        assert nexts[i - 1] == pairs[i]
        r, c = pairs[i]
        assert nexts[i] == ((r, c + 1) if c < m.size else (0, 0))
    players = [i for i, tok in enumerate(ids) if tok == next_tables.table_player]
    flagged = [i + 1 for i, f in enumerate(flags) if f]
    assert flagged == (players[1:] if cot == "table+desc" else [])


def test_the_cells_option_needs_a_cells_model_and_a_combination_the_rule_has(tmp_path: Path, capsys) -> None:
    from tests.model_fixtures import generate_split

    data = tmp_path / "data"
    generate_split(data, "id-train", count=2, cots=("none",), train=True)
    argv = ["train", "--data", str(data), "--input", "grid", "--cot", "none"]
    for model, cells, message in (
        (
            "micro",
            "grids=every",
            "--cells: needs a cells model (--model mini-cells, mini-cells-base, ...; micro is",
        ),
        ("micro-cells", "player=true", "--cells: player: the flag marks the cell stated moves reached"),
        (
            "micro-cells",
            "grids=all",
            "argument --cells: grids: expected one of first, every, next, coupled, got 'all'",
        ),
        ("micro-cells", "coordinates=composed", "--cells.coordinates: tokens is fixed when a model is made"),
        ("micro-cells", "attention=local", "--cells: attention: local reads each map's cells and the answer"),
    ):
        code = main([*argv, "--model", model, "--out", str(tmp_path / "run"), "--cells", cells])
        err = capsys.readouterr().err
        assert code == 2 and message in err and "Traceback" not in err, err
        assert not (tmp_path / "run").exists()


ALL_COTS = ("none", "desc", "table", "grid", "table+desc", "grid+desc", "astar", "coords", "wave")


def _conversation_ids(tokenizer: Any, m: Any, input_format: str, cot: str) -> list[int]:
    messages = [
        {"role": "user", "content": formats.render(m, input_format)},
        {"role": "assistant", "content": traces.completion(m, m.optimal_path(), cot)},
    ]
    return tokenizer.apply_chat_template(messages, tokenize=True, return_dict=True)["input_ids"]


@given(
    random_maps(max_size=5, hole_probs=(0.25,)),
    st.sampled_from(["grid", "table", "desc"]),
    st.sampled_from(ALL_COTS),
    st.sampled_from(["first", "every", "next", "coupled"]),
    st.booleans(),
    st.booleans(),
    st.booleans(),
)
@settings(max_examples=80, deadline=None)
def test_a_token_s_cell_depends_only_on_it_and_the_tokens_before_it(
    tokenizer, m, input_format, cot, grids, trace_moves, player, table
):
    """Every prefix of a conversation gives its tokens the rows, columns and player flags the whole
    conversation gives them: generation, which has no later tokens, sees what training saw."""
    from lakeshift.models.cells import CellWalker

    walk = "trace" if trace_moves else "answer"
    flag = player and grids in ("next", "coupled") and trace_moves  # the flag needs both; desc does not
    tables = _rule(tokenizer, grids, walk, desc=player, table=table, player=flag)
    ids = _conversation_ids(tokenizer, m, input_format, cot)
    whole = CellWalker(tables).feed(ids)
    for end in range(1, len(ids)):
        assert CellWalker(tables).feed(ids[:end]) == tuple(f[:end] for f in whole), end


def _cells_model(
    grids: str,
    *,
    moves: bool,
    shift: bool = False,
    compose: bool = False,
    trace_moves: bool = False,
    player: bool = False,
    order: bool = False,
    tables: bool = False,
    no_sequence: bool = False,
    local: bool = False,
) -> tuple[Any, Any]:
    import torch

    from lakeshift.models.cells import register
    from lakeshift.models.tokenizer import build_structured_tokenizer

    tokenizer = build_structured_tokenizer([])
    config_class, model_class = register()
    spec = CellSpec(
        grids=grids,  # type: ignore[arg-type]
        walk=("trace" if trace_moves else "answer") if moves else "none",
        maps=("grid", *("table",) * tables, *("desc",) * player),
        player=player,
        order=order,
        offsets="random" if shift else "none",
        coordinates="composed" if compose else "tokens",
        sequence="none" if no_sequence else "rope",
        attention="local" if local else "full",
    )
    config = config_class(
        cells=spec.to_json(),
        cell_vocab=CellVocab.from_tokenizer(tokenizer).to_config(),
        vocab_size=len(tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        tie_word_embeddings=True,
        pad_token_id=0,
    )
    torch.manual_seed(0)
    model = model_class(config)
    # random cell embeddings large enough that a wrong row or column changes the logits visibly
    with torch.no_grad():
        model.model.embed_tokens.row.weight[1:].normal_(0, 1.0)
        model.model.embed_tokens.col.weight[1:].normal_(0, 1.0)
        if player:
            model.model.embed_tokens.player.weight[1:].normal_(0, 1.0)
        if order:
            model.model.embed_tokens.order.weight.normal_(0, 1.0)
        if grids == "coupled":
            model.model.embed_tokens.frame.weight[1:].normal_(0, 1.0)
            model.model.embed_tokens.edge.weight[1:].normal_(0, 1.0)
        for layer in model.model.layers if local else ():
            layer.self_attn.slot_keys.weight.normal_(0, 1.0)
            layer.self_attn.slot_values.weight.normal_(0, 1.0)
    return model.eval(), tokenizer


#: Every cells configuration the causal test covers: its ``grids`` and the options switched on.
CELLS_CASES = {
    "first": ("first", ()),
    "first-walk": ("first", ("moves",)),
    "every-walk": ("every", ("moves",)),
    "every-walk-shift": ("every", ("moves", "shift")),
    "every-walk-shift-compose": ("every", ("moves", "shift", "compose")),
    "next-walk": ("next", ("moves",)),
    "next-walk-trace-moves": ("next", ("moves", "trace_moves")),
    "next-walk-trace-moves-player": ("next", ("moves", "trace_moves", "player")),
    "next-walk-trace-moves-player-order": ("next", ("moves", "trace_moves", "player", "order")),
    "every-walk-shift-compose-order": ("every", ("moves", "shift", "compose", "order")),
    "next-walk-trace-moves-player-tables": ("next", ("moves", "trace_moves", "player", "tables")),
    "every-walk-tables": ("every", ("moves", "tables")),
    "coupled-walk-shift": ("coupled", ("moves", "shift")),
    "coupled-walk-no-sequence": ("coupled", ("moves", "no_sequence")),
    "coupled-walk-trace-moves-player": ("coupled", ("moves", "trace_moves", "player")),
    "coupled-walk-no-sequence-local": ("coupled", ("moves", "no_sequence", "local")),
}


@pytest.mark.parametrize("case", CELLS_CASES)
def test_the_logits_at_each_position_are_those_of_the_prefix_alone(case: str) -> None:
    """For every cells configuration and every CoT format, each position's logits computed from the
    prefix ending there equal those of one pass over the whole sequence (position rules never look ahead).
    Each format checks every third position and the last, the formats taking the three phases in turn (a
    check of every position costs the square of the length)."""
    import torch

    grids, switched_on = CELLS_CASES[case]
    options = dict.fromkeys(switched_on, True)
    model, tokenizer = _cells_model(grids, moves=options.pop("moves", False), **options)
    m = traces_map()
    pairs = [("grid", c) for c in ALL_COTS] + [("table", "grid"), ("desc", "grid+desc"), ("desc", "desc")]
    pairs += [("table", "table"), ("table", "table+desc"), ("desc", "table+desc")]
    for phase, (input_format, cot) in enumerate(pairs):
        ids = _conversation_ids(tokenizer, m, input_format, cot)
        n = len(ids)
        ends = sorted({*range(1 + phase % 3, n + 1, 3), n})
        # each prefix as one row, right-padded: with causal attention the pads after a prefix change
        # nothing but what a look-ahead rule would read from them
        batch = torch.zeros(len(ends), n, dtype=torch.long)
        mask = torch.zeros(len(ends), n, dtype=torch.long)
        for row, end in enumerate(ends):
            batch[row, :end] = torch.tensor(ids[:end])
            mask[row, :end] = 1
        with torch.no_grad():
            full = model(torch.tensor([ids])).logits[0]
            prefixes = model(batch, attention_mask=mask).logits
        at = torch.tensor(ends) - 1
        worst = (prefixes[torch.arange(len(ends)), at] - full[at]).abs().amax(dim=-1)
        assert torch.all(worst < 1e-4), (input_format, cot, ends[int(torch.argmax(worst))] - 1)


def traces_map() -> Any:
    """The map of the paper's Figure 3 (rows ``FGF FHF FSH``)."""
    from lakeshift.env import FrozenLakeMap

    return FrozenLakeMap.from_rows(["FGF", "FHF", "FSH"])


def test_a_cells_model_refuses_maps_larger_than_its_positions(tmp_path: Path, capsys) -> None:
    """Rows and columns 31 and beyond would all get position 0: train and predict say so and stop."""
    from tests.model_fixtures import generate_split

    data = tmp_path / "data"
    generate_split(data, "big", sizes=(31,), count=1, train=True)
    common = ["--data", str(data), "--split", "big", "--input", "grid", "--cot", "none"]
    out = tmp_path / "run"
    assert main(["train", *common, "--model", "micro-cells", "--out", str(out), "--max-steps", "1"]) == 2
    err = capsys.readouterr().err
    assert "31x31 maps: a cells model has row and column positions up to 30" in err and not out.exists()
    preds = tmp_path / "p.jsonl"
    assert main(["predict", "--model", "mini-cells-base", *common, "--out", str(preds)]) == 2
    assert "31x31 maps" in capsys.readouterr().err and not preds.exists()


@pytest.mark.parametrize("size", ["micro-cells", "mini-cells-compose"])
def test_the_trainers_loss_and_token_accuracy_are_those_of_the_models_own_logits(
    size: str, tmp_path: Path
) -> None:
    """trl's trainer scores labels with a fused head that reads the output weight, never the head's forward;
    a composed model's coordinate logits are not that weight's, so its training loss and token accuracy
    must still be those of the logits it generates with (a plain head keeps trl's fused kernel)."""
    import torch
    from datasets import Dataset
    from trl import SFTConfig

    from lakeshift.models.registry import build_named
    from lakeshift.models.trl_patches import sft_trainer_class

    torch.manual_seed(0)
    model, tokenizer = build_named(size, [])
    model.eval()  # no shifted offsets: both passes read the same cells
    prompt = "Grid:\nP  .  .\n.  X  .\n.  .  G\nPlan:"
    answer = "(1,1) (1,2) (2,2) (3,2) (3,3) \\boxed{RIGHT, DOWN}"
    args = SFTConfig(output_dir=str(tmp_path), report_to=[], use_cpu=True, bf16=False)
    data = Dataset.from_list([{"prompt": prompt, "completion": answer}])
    trainer = sft_trainer_class(None)(model=model, args=args, train_dataset=data, processing_class=tokenizer)
    prompt_ids, answer_ids = tokenizer.encode(prompt), tokenizer.encode(answer)
    ids = torch.tensor([prompt_ids + answer_ids])
    labels = ids.clone()
    labels[:, : len(prompt_ids)] = -100
    with torch.no_grad():
        inputs = {"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": labels}
        loss = trainer.compute_loss(trainer.model, inputs)
        logits = model(ids).logits[0, :-1]
    targets = labels[0, 1:]
    scored = targets != -100
    expected = torch.nn.functional.cross_entropy(logits[scored], targets[scored])
    assert loss.item() == pytest.approx(expected.item(), abs=1e-5)
    accuracy = (logits[scored].argmax(-1) == targets[scored]).float().mean().item()
    assert trainer._metrics["eval"]["mean_token_accuracy"][-1] == pytest.approx(accuracy)


def test_grpos_fused_log_probs_of_a_composed_model_are_its_tempered_logits() -> None:
    """GRPO scores completions through the same fused head at its sampling temperature."""
    import torch
    from trl.trainer.utils import add_fused_lm_head

    from lakeshift.models.trl_patches import exact_output_head

    model, tokenizer = _composed_model()
    model.eval()
    add_fused_lm_head(model, temperature=0.7, outputs=("log_probs", "entropy"))
    assert exact_output_head(model, 0.7)
    ids = torch.tensor([tokenizer.encode("Grid:\nP  .\n.  G\nPlan:(1,1) (1,2) (2,2)")])
    labels = ids.clone()
    labels[:, :-6] = -100
    with torch.no_grad():
        out = model(input_ids=ids, labels=labels, fused_lm_head=True)
        expected = torch.log_softmax(model(input_ids=ids).logits[:, :-1] / 0.7, -1)
    expected = expected.gather(-1, ids[:, 1:, None])[..., 0].masked_fill(labels[:, 1:] == -100, 0)
    assert torch.allclose(out.log_probs, expected, atol=1e-5)


@given(random_maps(max_size=8, hole_probs=(0.25,)), st.sampled_from(["wave", "grid", "grid+desc"]))
@settings(max_examples=40, deadline=None)
def test_with_coupled_each_map_token_gets_the_cell_of_the_token_after_it_and_the_map_s_number(
    tokenizer, m, cot
) -> None:
    """``grids: coupled``: in the prompt's map and in each map the trace redraws (a grid CoT's maps, the
    wave's frames), the token before a cell carries that cell's row and column and the map's number (1 the
    prompt's, then 2, 3, ...); a row's last cell carries (r, W + 1), the newline after it (the last
    row's may end the turn instead), and that newline (r + 1, 1). Each map has exactly one token per
    cell and per newline cell. In the wave, the cell a token predicts shows the
    frame's symbol there. The row's last cell is marked a row end (the prompt's first row's is not) and the
    newline after a redrawn map's last row a map end; no other token is marked."""
    from lakeshift.models.cells import CellWalker
    from lakeshift.models.cells.positions import MAP_END, ROW_END
    from lakeshift.traces.wave import base_frame, wave_frames

    ids = _conversation_ids(tokenizer, m, "grid", cot)
    own_rows, own_cols = cell_positions(ids, _rule(tokenizer, "every"))
    rows, cols, _, numbers, edges = CellWalker(_rule(tokenizer, "coupled")).feed(ids)
    n, newline = m.size, tokenizer.convert_tokens_to_ids("\n")
    drawn = [base_frame(m), *wave_frames(m)] if cot == "wave" else None
    maps = sorted(set(numbers) - {0})
    assert maps == list(range(1, len(maps) + 1))
    assert len(maps) == 1 + (len(drawn) - 1 if drawn else len(m.optimal_path()))
    every_cell = [(r, c) for r in range(1, n + 1) for c in range(1, n + 2)]
    for k in maps:
        at = [i for i in range(len(ids) - 1) if numbers[i] == k]
        labels = sorted((rows[i], cols[i]) for i in at)
        assert labels in (every_cell, [*every_cell, (n + 1, 1)])  # (the last row's newline, if any)
        for i in at:
            r, c = rows[i], cols[i]
            if r > n:
                assert ids[i] == newline
            elif c <= n:
                assert (own_rows[i + 1], own_cols[i + 1]) == (r, c)
                if drawn:
                    assert tokenizer.convert_ids_to_tokens(ids[i + 1]).strip() == drawn[k - 1][r - 1][c - 1]
            else:
                assert (own_rows[i], own_cols[i]) == (r, n)
                assert ids[i + 1] == newline or r == n  # (the last row may end the turn)
    ends = {(numbers[i], rows[i]) for i, e in enumerate(edges) if e == ROW_END}
    assert all(cols[i] == n + 1 for i, e in enumerate(edges) if e == ROW_END)
    assert ends == {(k, r) for k in maps for r in range(1, n + 1)} - {(1, 1)}
    assert [numbers[i] for i, e in enumerate(edges) if e == MAP_END] == maps[1:]
    assert all(rows[i] == n + 1 and ids[i] == newline for i, e in enumerate(edges) if e == MAP_END)


def test_random_shifts_reach_the_largest_map_numbers() -> None:
    import torch

    from lakeshift.models.cells import MAX_FRAME, shifted

    torch.manual_seed(0)
    index = torch.tensor([[1, 2, 3, 0, 6]] * 2000)
    assert set(shifted(index, MAX_FRAME).flatten().tolist()) == set(range(MAX_FRAME))


@pytest.mark.parametrize("sequence", ["none", "rope"])
def test_with_sequence_none_the_logits_do_not_depend_on_the_1d_positions(sequence: str) -> None:
    """``sequence: none`` gives every token the same 1-D position, whatever positions the caller passes and
    whether the causal LM or its decoder alone is called, and attention still reads every earlier token,
    with or without a padding mask; with ``rope`` other positions give other logits."""
    import torch

    model, tokenizer = _cells_model("coupled", moves=True, no_sequence=sequence == "none")
    ids = torch.tensor([_conversation_ids(tokenizer, traces_map(), "grid", "wave")])
    changed, later = ids.clone(), ids.clone()
    changed[0, 5], later[0, -2] = ids[0, 6], ids[0, 5]
    with torch.no_grad():  # (the decoder first: nothing the causal LM's forward sets may be needed)
        decoder = model.model(ids, position_ids=torch.arange(ids.shape[1])[None] * 2).last_hidden_state
        plain = model(ids).logits
        masked = model(ids, attention_mask=torch.ones_like(ids)).logits
        moved = model(ids, position_ids=torch.arange(ids.shape[1])[None] * 2).logits
        earlier = model(changed).logits
        training_pass = model.train()(later, attention_mask=torch.ones_like(ids)).logits
    assert torch.allclose(plain, masked, atol=1e-5)
    assert torch.allclose(plain, moved, atol=1e-5) == (sequence == "none")
    # the decoder alone (as trl's fused loss calls it) reads positions as the whole model does
    assert torch.allclose(model.lm_head(decoder), moved, atol=1e-5)
    assert not torch.allclose(plain[0, -1], earlier[0, -1], atol=1e-4)  # the last token reads token 5
    assert torch.allclose(plain[0, :-2], training_pass[0, :-2], atol=1e-5)  # and no token reads a later one
