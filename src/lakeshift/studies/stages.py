"""A study's stages: units of cached work, each recorded done under the key of its settings and code."""

from __future__ import annotations

import fnmatch
import hashlib
import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from lakeshift._version import __version__
from lakeshift.errors import LakeshiftError
from lakeshift.io import file_sha256

#: Output files up to this size enter a marker by a sha256 of their bytes; larger ones (model weights) by
#: their size and modification time, so checking a big model folder stays cheap.
HASHED_BYTES = 32 * 2**20


def _file_print(path: Path) -> str:
    st = path.stat()
    if st.st_size <= HASHED_BYTES:
        return file_sha256(path)
    return f"{st.st_size}:{st.st_mtime_ns}"


def outputs_digest(paths: Sequence[Path]) -> str:
    """A digest of what ``paths`` hold (each a file, a folder of files, or missing): the name, and the bytes
    or the size and time (:data:`HASHED_BYTES`), of every file. It changes when a file is added, removed,
    replaced or edited."""
    digest = hashlib.sha256()
    for path in paths:
        digest.update(f"{path.name}\0".encode())
        try:
            if path.is_dir():
                files = sorted(f for f in path.rglob("*") if f.is_file())
                for f in files:
                    digest.update(f"{f.relative_to(path).as_posix()}\0{_file_print(f)}\0".encode())
            elif path.is_file():
                digest.update(f"{_file_print(path)}\0".encode())
            else:
                digest.update(b"missing\0")
        except OSError as err:  # unreadable: never the digest of a finished stage
            digest.update(f"unreadable {err}\0".encode())
    return digest.hexdigest()[:16]


def entry_digests(folder: Path) -> dict[str, str]:
    """The :func:`outputs_digest` of each entry of ``folder`` (a split folder, ``suite.json``) by name."""
    try:
        entries = sorted(folder.iterdir()) if folder.is_dir() else []
    except OSError:
        return {}
    return {entry.name: outputs_digest([entry]) for entry in entries}


def listed_files(folder: Path) -> dict[str, str]:
    """What each file of ``folder`` outside its ``images/`` folders holds (a sha256, or size and time: see
    :data:`HASHED_BYTES`), by its path relative to ``folder``: the files a changed entry is named by."""
    out: dict[str, str] = {}
    if not folder.is_dir():
        return out
    for path in sorted(folder.rglob("*")):
        rel = path.relative_to(folder)
        if "images" in rel.parts[:-1] or not path.is_file():
            continue
        try:
            out[rel.as_posix()] = _file_print(path)
        except OSError as err:
            out[rel.as_posix()] = f"unreadable {err}"
    return out


def _what_changed(folder: Path, name: str, recorded: dict[str, Any]) -> str:
    """One entry of ``folder`` in words: the first of its files that is missing, edited or new since the
    files ``recorded`` were listed (:func:`listed_files`)."""
    path = folder / name
    if not path.exists():
        return f"{path} is missing"
    if path.is_file():
        return f"{path} was edited"
    now = {f"{name}/{rel}": v for rel, v in listed_files(path).items()}
    before = {k: v for k, v in recorded.items() if isinstance(k, str) and k.startswith(f"{name}/")}
    for rel in sorted(set(now) | set(before)):
        if rel not in now:
            return f"{folder / rel} is missing"
        if rel not in before:
            return f"{folder / rel} was added"
        if now[rel] != before[rel]:
            return f"{folder / rel} was edited"
    return f"{path}: a file of its images/ changed"


def _marker(path: Path) -> dict[str, Any]:
    """A stage marker's record (``{}``: none, or not one)."""
    try:
        info = json.loads(path.read_text())
    except (OSError, ValueError):  # ValueError: not UTF-8 or not JSON
        return {}
    return info if isinstance(info, dict) else {}


@dataclass
class Stage:
    """One unit of cached work: the CLI arguments it runs and the marker that records it as done."""

    kind: str
    name: str
    key: str
    argv: list[str]
    marker: Path
    outputs: list[Path] = field(default_factory=list)  # removed first when the stage's settings changed
    files: dict[Path, Any] = field(default_factory=dict)  # JSON files written before running
    estimate_s: float | None = None  # the time it should take (lakeshift.studies.estimates), None: unknown
    writes: list[Path] = field(default_factory=list)  # what it writes into, when more than its outputs
    after: list[Path] = field(default_factory=list)  # the markers of the stages whose outputs it reads
    study: str = ""  # the name of the study it belongs to, recorded in its marker
    bases: tuple[str, ...] = ()  # the names of the studies that one extends, recorded too
    # A folder whose entries the marker records one by one (the generate stage's data: each split folder
    # and suite.json), so that an entry edited since is named and made again on its own.
    tracked: Path | None = None

    def recorded_key(self) -> str | None:
        return _marker(self.marker).get("key")

    def made(self) -> list[Path]:
        """What the stage produces: its outputs and the folders it writes into."""
        return list(dict.fromkeys([*self.outputs, *self.writes]))

    def done(self) -> bool:
        """Whether its marker records its key, what it produced is still there unchanged, and what it read
        (the outputs of the stages it comes ``after``) is what it read then."""
        return self.why_not_done() is None

    def why_not_done(self) -> str | None:
        """Why the stage is to be (re)done, or ``None`` when it is done."""
        info = _marker(self.marker)
        if info.get("key") != self.key:
            return "settings or code" if info.get("key") else "never finished"
        if info.get("outputs") != outputs_digest(self.made()):
            changed = self.changed_entries()
            detail = f": {changed[0][1]}" if changed else ""
            return f"its outputs are missing or changed since it ran{detail}"
        read = info.get("inputs")
        if not isinstance(read, dict) or any(
            read.get(m.name) != _marker(m).get("outputs") for m in self.after
        ):
            return "a stage it reads was redone since it ran"
        return None

    def changed_entries(self) -> list[tuple[Path, str]]:
        """The entries of :attr:`tracked` that the stage made when it last completed and that are missing
        or changed since, each with what changed in words (a file named); empty without such a record.
        An entry the stage did not make (a file someone added) is not among them."""
        info = _marker(self.marker)
        parts, files = info.get("parts"), info.get("files")
        if self.tracked is None or not isinstance(parts, dict):
            return []
        now = entry_digests(self.tracked)
        recorded = files if isinstance(files, dict) else {}
        return [
            (self.tracked / name, _what_changed(self.tracked, name, recorded))
            for name, digest in sorted(parts.items())
            if now.get(name) != digest
        ]

    def recorded_code(self) -> str | None:
        """The :func:`code_identity` the stage was last completed with (``None``: unknown or never)."""
        return _marker(self.marker).get("code")

    def foreign_output(self) -> Path | None:
        """A path the stage writes that exists although the study never started the stage (no marker):
        someone else's files (a ``--workdir`` that already held a ``data/``), which running would replace."""
        if self.marker.exists():
            return None
        for path in self.writes or self.outputs:
            if path.is_file() or (path.is_dir() and any(path.iterdir())):
                return path
        return None

    def claim(self) -> None:
        """Records that the study started the stage (a marker without a key), so that its outputs are the
        study's to reuse or replace when an interrupted run is resumed."""
        if not self.marker.exists():
            info = {"kind": self.kind, "name": self.name, **self._whose(), "started": self.key}
            self._write(info)

    def mark_done(self, seconds: float) -> None:
        """Records the stage done: its key, the code it ran, a digest of what it produced and of what it
        read (:meth:`done` checks both), and for a :attr:`tracked` folder the digest of each of its entries
        and what each of its files (images aside) holds (:meth:`changed_entries` compares them)."""
        info = {
            "kind": self.kind,
            "name": self.name,
            **self._whose(),
            "key": self.key,
            "code": code_identity(),
            "argv": self.argv,
            "seconds": round(seconds, 1),
            "outputs": outputs_digest(self.made()),
            "inputs": {m.name: _marker(m).get("outputs") for m in self.after},
        }
        if self.tracked is not None:
            info["parts"] = entry_digests(self.tracked)
            info["files"] = listed_files(self.tracked)
        self._write(info)

    def mark_unrecorded(self, code: str) -> None:
        """Records that the stage ran but its results are not to be served: a key no plan makes, so a
        rerun clears its outputs and redoes it (``code``: the source it partly ran)."""
        self._write(
            {"kind": self.kind, "name": self.name, **self._whose(), "key": "unrecorded", "code": code}
        )

    def _whose(self) -> dict[str, Any]:
        """Who made the stage: its study and the studies that one extends (:meth:`Study.other_study`)."""
        return {"study": self.study, "extends": list(self.bases)}

    def _write(self, info: dict[str, Any]) -> None:
        self.marker.parent.mkdir(parents=True, exist_ok=True)
        self.marker.write_text(json.dumps(info, indent=1) + "\n")


@dataclass
class Study:
    """A validated study config and its stage plan."""

    name: str
    workdir: Path
    stages: list[Stage]
    budget_minutes: float | None = None  # the config's `budget_minutes`
    train_jobs: int = 1  # the config's `train_jobs`: SFT training stages run at once
    bases: tuple[str, ...] = ()  # the studies it extends (ExtendedConfig.bases)

    def other_study(self) -> tuple[str, Path] | None:
        """Another study whose stage markers are in this workdir (its name and one marker): running this one
        there would replace its results. A study that extends another, or extends what it extends, is no
        other: it is made to share that study's workdir (its data stage)."""
        family = {self.name, *self.bases}
        for marker in sorted((self.workdir / "stages").glob("*.json")):
            info = _marker(marker)
            other, bases = info.get("study"), info.get("extends")
            if not isinstance(other, str) or other == self.name:
                continue
            if family.isdisjoint([other, *(bases if isinstance(bases, list) else [])]):
                return other, marker
        return None

    def concurrent(self, stages: list[Stage]) -> list[Stage]:
        """The stages of ``stages`` that run at once (SFT training, when ``train_jobs`` > 1)."""
        if self.train_jobs < 2:
            return []
        return [s for s in stages if s.kind == "train" and "--method" not in s.argv]

    def wall_seconds(self, stages: list[Stage]) -> float:
        """The estimated time of ``stages`` (unknown ones count 0): concurrent ones share the clock."""
        at_once = self.concurrent(stages)
        alone = sum(s.estimate_s or 0.0 for s in stages if s not in at_once)
        return alone + sum(s.estimate_s or 0.0 for s in at_once) / max(1, min(self.train_jobs, len(at_once)))

    def summary(self) -> dict[str, int]:
        """Number of stages of each kind."""
        return dict(Counter(s.kind for s in self.stages))

    def estimate(self, stages: list[Stage]) -> str:
        """One line: the estimated time of ``stages`` by kind, and the stages without an estimate."""
        by_kind: dict[str, float] = {}
        unknown = [s.name for s in stages if s.estimate_s is None and s.kind in ("train", "predict")]
        for kind in dict.fromkeys(s.kind for s in stages if s.estimate_s is not None):
            by_kind[kind] = self.wall_seconds([s for s in stages if s.kind == kind])
        total = self.wall_seconds(stages) / 60
        parts = ", ".join(f"{kind} {secs / 60:.0f}" for kind, secs in by_kind.items())
        line = f"estimated time of the stages to do: ~{total:.0f} min ({parts or 'nothing'})"
        if self.concurrent(stages):
            line += f"; {self.train_jobs} trainings at a time"
        if unknown:
            line += f"; no estimate for {len(unknown)} stage(s) (no measured rate), e.g. {unknown[0]}"
        return line

    def only(self, patterns: Sequence[str]) -> Study:
        """The study cut to the model entries whose names match one of ``patterns`` (shell globs such as
        ``grid__*``): its data stage and their training and prediction stages, without the report (which
        covers every model). A GRPO or predict entry needs its ``init`` among them or already trained.

        Raises:
            LakeshiftError: a pattern that matches no model entry.
        """
        models = list(
            dict.fromkeys(s.name.split("/")[0] for s in self.stages if s.kind in ("train", "predict"))
        )
        unmatched = [p for p in patterns if not any(fnmatch.fnmatchcase(m, p) for m in models)]
        if unmatched:
            raise LakeshiftError(
                f"--models {unmatched[0]!r} matches no model of study {self.name!r} (its models: "
                f"{', '.join(models)})"
            )
        chosen = {m for m in models if any(fnmatch.fnmatchcase(m, p) for p in patterns)}
        stages = [
            s
            for s in self.stages
            if s.kind == "generate" or (s.kind in ("train", "predict") and s.name.split("/")[0] in chosen)
        ]
        return replace(self, stages=stages)

    def over_budget(self, stages: list[Stage]) -> str | None:
        """Why ``stages`` cannot fit ``budget_minutes``, or ``None``."""
        if self.budget_minutes is None:
            return None
        total = self.wall_seconds(stages) / 60
        if total > self.budget_minutes:
            return (
                f"study {self.name!r}: its stages need about {total:.0f} minutes on a 2-core CPU, more than "
                f"its budget_minutes: {self.budget_minutes:g} (shorten max_minutes or epochs, use fewer "
                f"maps, or raise the budget)"
            )
        return None


#: The package whose source :func:`source_identity` hashes.
SOURCE_ROOT = Path(__file__).resolve().parents[1]


_planned: str | None = None  # the source_identity of the plan being made or run


def code_identity() -> str:
    """The :func:`source_identity` a study is planned with: taken once per plan (:func:`new_plan`), so that
    every key of one plan names the same code. ``lakeshift run`` compares it with the source on disk when
    each stage starts and ends, and records nothing made while the source changed."""
    global _planned
    if _planned is None:
        _planned = source_identity()
    return _planned


def new_plan() -> None:
    """Starts a plan: the next :func:`code_identity` is the source as it is on disk then."""
    global _planned
    _planned = None


def source_identity() -> str:
    """``<version>+<hash>``: lakeshift's version and a sha256 of its source as it is on disk now (the path
    and bytes of every ``.py`` file of the package, in sorted order; ~5 ms)."""
    root = SOURCE_ROOT
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return f"{__version__}+{digest.hexdigest()[:12]}"


def stage_key(obj: Any) -> str:
    """A stage key: its settings and the code that runs them (a code change invalidates every stage)."""
    keyed = {"code": code_identity(), "stage": obj}
    return hashlib.sha256(json.dumps(keyed, sort_keys=True, default=str).encode()).hexdigest()[:10]
