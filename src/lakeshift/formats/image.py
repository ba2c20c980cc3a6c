"""The image format: gymnasium's ``FrozenLake-v1`` ``rgb_array`` frame, pixel-identical and fast.

The reference is ``gym.make("FrozenLake-v1", desc=m.rows, is_slippery=False, render_mode="rgb_array")``,
``reset()``, ``render()``: with gymnasium 1.0-1.3 that reproduces all 400 official Mirage/VSP test PNGs pixel
for pixel (gymnasium 1.4 changed the tile art). Building a gymnasium env per map costs ~5 ms, so instead this
module draws each kind of cell once per cell size with pygame exactly as gymnasium does (ice, then the hole /
goal / stool sprite, then the 1-px ``(180, 200, 230)`` cell border, then the elf facing down on the player's
cell) and pastes those tiles with numpy. ``tests/test_formats.py`` checks the result against gymnasium's own
frame on random maps of every size 2-12; :func:`render_rgb_gymnasium` is that reference.

Frame geometry (gymnasium's, kept as is): the window is ``min(64 n, 512)`` pixels and a cell
``window // n`` pixels, so up to 8x8 the frame is exactly ``64 n`` square. For larger maps the cells no longer
fill the window and gymnasium leaves the remainder black along the right and bottom edges:

==========  ======  =====  ==========================
map size    window  cell   black strip (right/bottom)
==========  ======  =====  ==========================
9x9         512     56     8 px  (504 px drawn)
10x10       512     51     2 px  (510 px drawn)
11x11       512     46     6 px
12x12       512     42     8 px
==========  ======  =====  ==========================

By default (``crop=False``) this module returns gymnasium's exact frame, strip included, because that is what
the paper's pipeline (gymnasium rendering) produces; ``crop=True`` removes the strip.

Intermediate states: ``player=`` draws the elf on another cell (the start keeps its stool, as in gymnasium
after a move) and ``facing=`` turns it (gymnasium shows the last move's direction; ``"DOWN"`` after reset).
pygame and gymnasium are imported lazily; ``SDL_VIDEODRIVER`` defaults to ``dummy`` (no window).
"""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass
from functools import cache, lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lakeshift.env import Cell, FrozenLakeMap
from lakeshift.errors import ArgumentError
from lakeshift.formats import player_cell

if TYPE_CHECKING:
    import numpy as np
    from PIL import Image

#: gymnasium's elf sprites, indexed by its action numbers (0 left, 1 down, 2 right, 3 up).
_ELF_FILES: dict[str, str] = {
    "LEFT": "elf_left.png",
    "DOWN": "elf_down.png",
    "RIGHT": "elf_right.png",
    "UP": "elf_up.png",
}
_BORDER = (180, 200, 230)
#: zlib levels used by :func:`render_png`. RGB: level 1 takes ~4 ms for a 10x10 frame against ~10 ms at
#: Pillow's default 6, for files ~50% larger (~33 KB). Palette images are small enough that 6 costs ~1 ms.
PNG_COMPRESS_LEVEL = 1
PNG_COMPRESS_LEVEL_PALETTE = 6


def frame_geometry(size: int) -> tuple[int, int]:
    """``(window, cell)`` pixel sizes of gymnasium's frame for an ``size x size`` map."""
    window = min(64 * size, 512)
    return window, window // size


def _quiet_pygame() -> None:
    os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
    # gymnasium's render calls pygame.init(), which would open the sound card (ALSA noise on servers).
    os.environ.setdefault("SDL_AUDIODRIVER", "dummy")
    os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "1")


@lru_cache(maxsize=1)
def _sprite_dir() -> Path:
    """gymnasium's sprite folder, found without importing gymnasium (~0.15 s per worker process)."""
    import importlib.util

    spec = importlib.util.find_spec("gymnasium")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError('gymnasium is not installed: pip install "gymnasium[toy-text]>=1.0,<1.4"')
    folder = Path(next(iter(spec.submodule_search_locations))) / "envs" / "toy_text" / "img"
    if not (folder / "ice.png").is_file():
        raise RuntimeError(f"gymnasium's FrozenLake sprites are missing from {folder}")
    from importlib.metadata import version

    major_minor = tuple(int(x) for x in version("gymnasium").split(".")[:2] if x.isdigit())
    if major_minor >= (1, 4):
        warnings.warn(
            f"gymnasium {version('gymnasium')} has new FrozenLake art: images will not match the official "
            "Mirage/VSP files (gymnasium 1.0-1.3 do)",
            stacklevel=3,
        )
    return folder


@dataclass(frozen=True)
class _Tiles:
    """Every cell picture at one cell size: RGB tiles, and the same as indices into one shared palette."""

    rgb: dict[str, np.ndarray]
    index: dict[str, np.ndarray]
    palette: bytes  # sorted RGB triples; index 0 is black (the strip gymnasium leaves on 9x9+ maps)


@cache
def _tiles(cell: int) -> _Tiles:
    """Draws every cell picture with pygame the way gymnasium's ``_render_gui`` draws it.

    Keys: ``F H G S`` (no player) and ``F@ G@ S@`` + facing (player on that cell), each ``(cell, cell, 3)``.
    """
    _quiet_pygame()
    import numpy as np
    import pygame

    folder = _sprite_dir()

    def load(name: str) -> pygame.Surface:
        return pygame.transform.scale(pygame.image.load(str(folder / name)), (cell, cell))

    ice = load("ice.png")
    overlays = {"F": None, "H": load("hole.png"), "G": load("goal.png"), "S": load("stool.png")}
    elves = {move: load(name) for move, name in _ELF_FILES.items()}

    def draw(kind: str, elf: pygame.Surface | None) -> np.ndarray:
        # The same default surface format as gymnasium's window surface, so blending is identical.
        surface = pygame.Surface((cell, cell))
        surface.blit(ice, (0, 0))
        overlay = overlays[kind]
        if overlay is not None:
            surface.blit(overlay, (0, 0))
        pygame.draw.rect(surface, _BORDER, (0, 0, cell, cell), 1)
        if elf is not None:
            surface.blit(elf, (0, 0))
        return np.transpose(np.array(pygame.surfarray.pixels3d(surface)), axes=(1, 0, 2)).copy()

    rgb = {kind: draw(kind, None) for kind in overlays}
    for kind in ("F", "G", "S"):
        for move, elf in elves.items():
            rgb[f"{kind}@{move}"] = draw(kind, elf)
    # The art has few colours (~40 per cell size), so a palette image is exact; black first for the strip.
    stacked = np.concatenate([np.zeros((1, 3), np.uint8)] + [t.reshape(-1, 3) for t in rgb.values()])
    colours, inverse = np.unique(stacked, axis=0, return_inverse=True)
    if len(colours) > 256:
        raise RuntimeError(f"gymnasium's tiles have {len(colours)} colours: too many for a palette PNG")
    inverse = inverse.reshape(-1).astype(np.uint8)
    index, offset = {}, 1
    for key in rgb:
        index[key] = inverse[offset : offset + cell * cell].reshape(cell, cell)
        offset += cell * cell
    return _Tiles(rgb, index, colours.astype(np.uint8).tobytes())


def _compose(m: FrozenLakeMap, player: Cell | None, facing: str, crop: bool, kind: str) -> np.ndarray:
    import numpy as np

    if not isinstance(facing, str) or facing not in _ELF_FILES:
        raise ArgumentError(f"facing: unknown facing {facing!r} (expected one of {', '.join(_ELF_FILES)})")
    pos = player_cell(m, player)
    n = m.size
    window, cell = frame_geometry(n)
    tiles = _tiles(cell)
    frame: np.ndarray
    if kind == "rgb":
        source, frame = tiles.rgb, np.zeros((window, window, 3), dtype=np.uint8)
    else:
        # np.unique sorts the colours and black was included, so palette index 0 is black.
        source, frame = tiles.index, np.zeros((window, window), dtype=np.uint8)
    for r, row in enumerate(m.rows):
        for c, ch in enumerate(row):
            key = f"{ch}@{facing}" if (r, c) == pos else ch
            frame[r * cell : (r + 1) * cell, c * cell : (c + 1) * cell] = source[key]
    if crop:
        frame = frame[: n * cell, : n * cell].copy()
    return frame


def render_rgb(
    m: FrozenLakeMap, *, player: Cell | None = None, facing: str = "DOWN", crop: bool = False
) -> np.ndarray:
    """gymnasium's ``rgb_array`` frame of ``m`` as a ``(H, W, 3)`` uint8 array.

    Args:
        m: The map.
        player: Draw the elf here instead of on the start (an intermediate state; not on a hole).
        facing: The elf's direction (``"DOWN"`` after ``reset()``, else the last move).
        crop: Drop gymnasium's black strip on 9x9 and larger maps (see the module docstring).

    Raises:
        ArgumentError: ``player`` outside the map or on a hole, or an unknown ``facing`` (a ``ValueError``
            too).
    """
    return _compose(m, player, facing, crop, "rgb")


def render_image(
    m: FrozenLakeMap,
    *,
    player: Cell | None = None,
    facing: str = "DOWN",
    crop: bool = False,
    palette: bool = False,
) -> Image.Image:
    """The frame as a Pillow image: mode ``RGB``, or with ``palette=True`` mode ``P`` (same pixels once
    converted to RGB; see :func:`render_png`). Other arguments as in :func:`render_rgb`."""
    from PIL import Image

    if not palette:
        return Image.fromarray(render_rgb(m, player=player, facing=facing, crop=crop), "RGB")
    image = Image.fromarray(_compose(m, player, facing, crop, "index"), "P")
    image.putpalette(_tiles(frame_geometry(m.size)[1]).palette)
    return image


def render_png(m: FrozenLakeMap, path: str | Path, *, palette: bool = False, **kwargs: Any) -> Path:
    """Writes the frame of ``m`` as a PNG (other keyword arguments go to :func:`render_rgb`).

    Args:
        m: The map.
        path: The file to write.
        palette: Write a palette (mode ``P``) PNG instead of an RGB one. The frames have ~40 colours, so the
            decoded pixels are identical (``Image.open(p).convert("RGB")``), the file is ~8x smaller and
            writing it ~4x faster; but readers that skip ``convert("RGB")`` see palette indices. The official
            files are RGB, hence the default.
        **kwargs: ``player``, ``facing``, ``crop`` as in :func:`render_rgb`.

    Returns:
        The path written.
    """
    path = Path(path)
    level = PNG_COMPRESS_LEVEL_PALETTE if palette else PNG_COMPRESS_LEVEL
    render_image(m, palette=palette, **kwargs).save(path, format="PNG", compress_level=level)
    return path


def render_rgb_gymnasium(m: FrozenLakeMap) -> np.ndarray:
    """The reference: gymnasium's own frame after ``reset()`` (slow, ~5 ms; used by tests and checks)."""
    _quiet_pygame()
    import gymnasium as gym

    env = gym.make("FrozenLake-v1", desc=m.rows, is_slippery=False, render_mode="rgb_array")
    try:
        env.reset(seed=0)
        return env.render()
    finally:
        env.close()
