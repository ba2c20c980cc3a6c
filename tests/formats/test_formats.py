"""Text formats round-trip and reject malformed text; the fast image renderer equals gymnasium's frame."""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lakeshift import formats
from lakeshift.env import DELTAS, FrozenLakeMap
from lakeshift.formats import BoardState, FormatError, image

FIG3_ROWS = ["FGF", "FHF", "FSH"]


@st.composite
def maps_with_player(draw: st.DrawFn, min_size: int = 2, max_size: int = 12) -> tuple[FrozenLakeMap, tuple]:
    """A random map (any hole density, solvable or not) and a non-hole player cell (may be the goal)."""
    n = draw(st.integers(min_size, max_size))
    cells = [(r, c) for r in range(n) for c in range(n)]
    start, goal = draw(st.lists(st.sampled_from(cells), min_size=2, max_size=2, unique=True))
    p_hole = draw(st.sampled_from([0.0, 0.1, 0.3, 0.8]))
    rng = random.Random(draw(st.integers(0, 2**32)))
    holes = frozenset(c for c in cells if c not in (start, goal) and rng.random() < p_hole)
    m = FrozenLakeMap(n, holes, start, goal)
    free = [c for c in cells if c not in holes]
    player = draw(st.sampled_from(free))
    return m, player


def random_map(n: int, rng: random.Random, p_hole: float = 0.2) -> FrozenLakeMap:
    cells = [(r, c) for r in range(n) for c in range(n)]
    start, goal = rng.sample(cells, 2)
    holes = frozenset(c for c in cells if c not in (start, goal) and rng.random() < p_hole)
    return FrozenLakeMap(n, holes, start, goal)


# ----- text formats -------------------------------------------------------------------------------
@pytest.mark.parametrize("fmt", formats.TEXT_FORMATS)
@settings(max_examples=150, deadline=None)
@given(case=maps_with_player())
def test_round_trip_with_any_player(fmt: str, case: tuple) -> None:
    m, player = case
    text = formats.render(m, fmt, player=player)
    assert not text.endswith("\n")
    state = formats.parse(text, fmt)
    assert state == BoardState.of(m, player)
    assert (state.goal is None) == (player == m.goal)
    # Surrounding whitespace (as a model writes a block) is tolerated.
    assert formats.parse("\n  " + text + "  \n\n", fmt) == state


@settings(max_examples=100, deadline=None)
@given(case=maps_with_player())
def test_aligned_table_round_trips_and_parses_like_compact(case: tuple) -> None:
    m, player = case
    aligned = formats.render(m, "table", player=player, style="aligned")
    compact = formats.render(m, "table", player=player)
    assert formats.parse(aligned, "table") == formats.parse(compact, "table")
    # Every line of the aligned table has the same length (that is what "aligned" means).
    assert len({len(line) for line in aligned.splitlines()}) == 1


@settings(max_examples=100, deadline=None)
@given(case=maps_with_player())
def test_start_state_round_trips_to_the_map(case: tuple) -> None:
    m, _ = case
    for fmt in formats.TEXT_FORMATS:
        assert formats.parse(formats.render(m, fmt), fmt).to_map() == m


def test_figure_formats_exactly() -> None:
    m = FrozenLakeMap.from_rows(FIG3_ROWS)
    assert formats.render(m, "grid") == "Grid:\n.  G  .\n.  X  .\n.  P  X"
    assert formats.render(m, "table") == (
        "| | Col 1 | Col 2 | Col 3 |\n| Row 1 | _ | * | _ |\n| Row 2 | _ | # | _ |\n| Row 3 | _ | @ | # |"
    )
    assert formats.render(m, "table", style="aligned").splitlines()[:2] == [
        "|       | Col 1 | Col 2 | Col 3 |",
        "| Row 1 |   _   |   *   |   _   |",
    ]
    assert formats.render(m, "desc") == (
        "This is a 3x3 map.\nThe player is at: row 3, column 2;\n"
        "The hole(s) are at: Row 2, Column 2; Row 3, Column 3;\nThe goal is at: Row 1, Column 2."
    )
    assert formats.file_text(m, "table").endswith("| # |\n")
    assert not formats.file_text(m, "desc").endswith("\n")


def test_no_holes_and_player_on_goal() -> None:
    m = FrozenLakeMap.from_rows(["SF", "FG"])
    assert formats.render(m, "desc").splitlines()[2] == "There is no holes in this map;"
    on_goal = {fmt: formats.render(m, fmt, player=(1, 1)) for fmt in formats.TEXT_FORMATS}
    assert on_goal["grid"] == "Grid:\n.  .\n.  P"
    assert "*" not in on_goal["table"] and on_goal["table"].count("@") == 1
    assert on_goal["desc"].endswith("The goal is at: Row 2, Column 2.")
    for fmt, text in on_goal.items():
        state = formats.parse(text, fmt)
        assert state.goal is None and state.player == (1, 1)
        with pytest.raises(FormatError):
            state.to_map()
        assert state.to_map(goal=(0, 0)).goal == (0, 0)


def test_rendering_a_player_on_a_hole_or_outside_is_refused() -> None:
    m = FrozenLakeMap.from_rows(FIG3_ROWS)
    for player in [(1, 1), (3, 0), (-1, 0)]:
        with pytest.raises(ValueError):
            formats.render(m, "grid", player=player)
    with pytest.raises(ValueError):
        formats.render(m, "yaml")
    with pytest.raises(ValueError):
        formats.render(m, "table", style="fancy")
    with pytest.raises(ValueError):
        formats.render(m, "grid", style="aligned")


@pytest.mark.parametrize(
    ("fmt", "text", "reason"),
    [
        ("grid", "", "first line"),
        ("grid", ".  G\nP  .", "first line"),
        ("grid", "Grid:\n.  G  .\nP  .", "row 1 has 3 cells"),
        ("grid", "Grid:\n.  G\nP  Q", "unknown symbol"),
        ("grid", "Grid:\n.  G\n.  .", "one player"),
        ("grid", "Grid:\nP  G\nP  .", "one player"),
        ("grid", "Grid:\nP  G\nG  .", "at most one goal"),
        ("grid", "Grid:\nP", "at least 2 rows"),
        ("table", "| | Col 1 | Col 2 |\n| Row 1 | @ | * |", "2 columns but there are 1 rows"),
        ("table", "| | Col 1 | Col 2 |\n| Row 1 | @ | * |\n| Row 3 | _ | _ |", "labelled"),
        ("table", "| | Col 1 | Col 2 |\n| Row 1 | @ | * |\n| Row 2 | _ | ? |", "unknown symbol"),
        ("table", "| | Col 1 | Col 2 |\n| Row 1 | @ | * |\n| Row 2 | _ |", "has 1 cells"),
        ("table", "| | Col 1 | Col 3 |\n| Row 1 | @ | * |\n| Row 2 | _ | _ |", "header"),
        ("table", "| | Col 1 | Col 2 |\n| Row 1 | @ | * \n| Row 2 | _ | _ |", "start and end"),
        ("desc", "This is a 2x2 map.", "4 lines"),
        ("desc", "This is a 2x3 map.\nx\ny\nz", "square"),
        (
            "desc",
            "This is a 2x2 map.\nThe player is at: row 3, column 1;\nThere is no holes in this map;\n"
            "The goal is at: Row 1, Column 1.",
            "outside",
        ),
        (
            "desc",
            "This is a 2x2 map.\nThe player is at: row 1, column 1;\nThe hole(s) are at: Row 1, Column 1;\n"
            "The goal is at: Row 2, Column 1.",
            "player is on a hole",
        ),
        (
            "desc",
            "This is a 2x2 map.\nThe player is at: Row 1, Column 1;\nThere is no holes in this map;\n"
            "The goal is at: Row 2, Column 1.",
            "player line",
        ),
    ],
)
def test_malformed_text_is_rejected_with_a_reason(fmt: str, text: str, reason: str) -> None:
    with pytest.raises(FormatError, match=reason.replace("(", r"\(")):
        formats.parse(text, fmt)


# ----- image --------------------------------------------------------------------------------------
@pytest.mark.parametrize("n", range(2, 13))
def test_fast_image_equals_gymnasium_frame(n: int) -> None:
    rng = random.Random(n)
    for _ in range(3):
        m = random_map(n, rng)
        ours = image.render_rgb(m)
        assert ours.dtype == np.uint8
        assert np.array_equal(ours, image.render_rgb_gymnasium(m))


def test_intermediate_state_equals_gymnasium_after_steps() -> None:
    gym = pytest.importorskip("gymnasium")
    m = FrozenLakeMap.from_rows(["FFFF", "FSFH", "FFFF", "HFFG"])
    env = gym.make("FrozenLake-v1", desc=m.rows, is_slippery=False, render_mode="rgb_array")
    env.reset(seed=0)
    pos = m.start
    actions = {"LEFT": 0, "DOWN": 1, "RIGHT": 2, "UP": 3}
    for move in ["RIGHT", "DOWN", "DOWN", "LEFT", "UP"]:
        env.step(actions[move])
        pos = (pos[0] + DELTAS[move][0], pos[1] + DELTAS[move][1])
        assert np.array_equal(image.render_rgb(m, player=pos, facing=move), env.render())
    env.close()


@pytest.mark.parametrize(("n", "cell", "strip"), [(8, 64, 0), (9, 56, 8), (10, 51, 2)])
def test_large_maps_keep_gymnasium_black_strip(n: int, cell: int, strip: int) -> None:
    m = random_map(n, random.Random(0))
    assert image.frame_geometry(n) == (min(64 * n, 512), cell)
    frame = image.render_rgb(m)
    assert frame.shape == (min(64 * n, 512),) * 2 + (3,)
    drawn = n * cell
    assert drawn + strip == frame.shape[0]
    assert not frame[drawn:, :].any() and not frame[:, drawn:].any()
    assert frame[:drawn, :drawn].any(axis=2).all()  # no black pixel inside the board
    cropped = image.render_rgb(m, crop=True)
    assert cropped.shape == (drawn, drawn, 3)
    assert np.array_equal(cropped, frame[:drawn, :drawn])


@pytest.mark.parametrize("palette", [False, True])
def test_png_decodes_to_the_frame(tmp_path, palette: bool) -> None:
    from PIL import Image

    rng = random.Random(5)
    for n in (3, 6, 10):
        m = random_map(n, rng)
        path = image.render_png(m, tmp_path / f"{n}.png", palette=palette)
        with Image.open(path) as im:
            assert im.mode == ("P" if palette else "RGB")
            assert np.array_equal(np.asarray(im.convert("RGB")), image.render_rgb(m))


def test_image_rejects_bad_player_and_facing() -> None:
    m = FrozenLakeMap.from_rows(FIG3_ROWS)
    with pytest.raises(ValueError):
        image.render_rgb(m, player=(1, 1))
    with pytest.raises(ValueError):
        image.render_rgb(m, facing="NORTH")
