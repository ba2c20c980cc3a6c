"""The run folder that SFT, GRPO and pretraining write, and the loop that fills it.

A run folder holds ``run.json`` (provenance: command, data hashes, formats, model, hyper-parameters, library
versions, git commit, host; ``status`` ``running`` then ``done``), ``metrics.jsonl`` (one line per log
event), ``checkpoint-N/`` folders and, once finished, ``model/``. This module writes and checks them:
:func:`run_record` and :func:`write_run` (provenance), :func:`check_resume` (a resumed run trains the same
thing; only :data:`RESUMABLE_CHANGES` may differ), :func:`already_finished`, :func:`last_checkpoint`
(the newest complete checkpoint; torn ones removed), :class:`TimeBudget` (``--max-minutes``: stop and
anneal with the clock), :func:`progress_callback` (the bar and ``metrics.jsonl``) and
:func:`train_and_save` (runs a built trainer and saves the final model).
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from lakeshift.errors import LakeshiftError
from lakeshift.io import atomic_write, dumps
from lakeshift.models.data import SftSet, split_hash
from lakeshift.models.registry import RUN_FILE, ModelSpec, torn_file, weights_problem
from lakeshift.models.train_options import LoraSettings, RunOptions

#: The hyper-parameters that may differ between a run and its ``--resume`` (the schedule may be extended).
RESUMABLE_CHANGES = frozenset({"epochs", "max_steps", "max_minutes", "save_steps", "logging_steps", "resume"})


def _versions() -> dict[str, str]:
    """The versions of Python and of the libraries a run depends on (``absent`` when not installed)."""
    import importlib.metadata as md

    out = {"python": platform.python_version()}
    for pkg in ("lakeshift", "torch", "transformers", "trl", "peft", "accelerate", "datasets", "tokenizers"):
        try:
            out[pkg] = md.version(pkg)
        except md.PackageNotFoundError:
            out[pkg] = "absent"
    return out


def git_commit() -> dict[str, Any]:
    """The commit of the lakeshift source tree and whether it had uncommitted changes."""
    root = Path(__file__).resolve().parents[3]
    try:
        commit = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return {"commit": None, "dirty": None}
    return {"commit": commit, "dirty": bool(dirty)}


def _torch_threads() -> int:
    import torch

    return torch.get_num_threads()


def run_record(
    opts: RunOptions, prompt: str, spec: ModelSpec, sft: SftSet, hparams: dict[str, Any]
) -> dict[str, Any]:
    """The ``run.json`` record a run starts with (``status: running``): the command, the data and its hashes,
    the formats and prompt, the model, the hyper-parameters (``hparams``, JSON), library versions, the git
    commit and the host."""
    return {
        "kind": "lakeshift-train",
        "status": "running",
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "command": sys.argv,
        "data": {
            "folder": str(Path(opts.data).resolve()),
            "split": opts.split,
            "file": str(sft.path.resolve()),
            "sha256": sft.sha256,
            "split_hash": split_hash(sft.split_dir),
            "n_records": len(sft.records),
            "limit": opts.limit,
            "sizes": opts.sizes,
        },
        "input_format": opts.input_format,
        "cot_format": opts.cot_format,
        "prompt": prompt,
        "model": {
            "name": spec.name,
            "kind": spec.kind,
            "source": spec.source,
            "vision": spec.vision,
            "model_type": spec.model_type,
        },
        "hparams": hparams,
        "versions": _versions(),
        "git": git_commit(),
        "host": {"platform": platform.platform(), "cpus": os.cpu_count(), "threads": _torch_threads()},
    }


def write_run(out: Path, record: dict[str, Any]) -> None:
    """Writes ``record`` to ``OUT/run.json`` atomically (a kill leaves the old record or the new one)."""
    with atomic_write(out / RUN_FILE) as f:
        f.write(json.dumps(record, indent=2, ensure_ascii=False) + "\n")


def check_resume(out: Path, record: dict[str, Any]) -> dict[str, Any]:
    """Checks that a resumed run trains the same thing; returns the run record to continue."""
    run_file = out / RUN_FILE
    if not run_file.is_file():
        raise LakeshiftError(f"--resume: {run_file} not found (nothing to resume)")
    old = json.loads(run_file.read_text(encoding="utf-8"))
    old.setdefault("prompt", "mirage")  # runs written before --prompt existed used the Mirage prompt
    for key in ("input_format", "cot_format", "prompt"):
        if old.get(key) != record[key]:
            raise LakeshiftError(
                f"--resume: {run_file} field {key!r} is {old.get(key)!r}, now {record[key]!r}"
            )
    if old["data"]["sha256"] != record["data"]["sha256"]:
        raise LakeshiftError(
            f"--resume: the training file changed since {run_file} was written (sha256 differs)"
        )
    if old["model"]["name"] != record["model"]["name"]:
        raise LakeshiftError(
            f"--resume: {run_file} trained {old['model']['name']!r}, not {record['model']['name']!r}"
        )
    for key, value in record["hparams"].items():
        if key not in RESUMABLE_CHANGES and old["hparams"].get(key) != value:
            raise LakeshiftError(
                f"--resume: hyper-parameter {key!r} was {old['hparams'].get(key)!r}, now {value!r}"
            )
    record["created"] = old["created"]
    record["resumed"] = [*old.get("resumed", []), time.strftime("%Y-%m-%dT%H:%M:%S%z")]
    return record


def already_finished(out: Path) -> bool:
    """Whether ``out`` holds a finished run (``run.json`` says done and ``model/`` is saved), saying so:
    resuming it would train past its last step and overwrite its model (SFT, GRPO and pretraining)."""
    try:
        old = json.loads((out / RUN_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    if not isinstance(old, dict) or old.get("status") != "done" or not (out / "model").is_dir():
        return False
    print(
        f"lakeshift train: {out} already finished (step {old.get('global_step')}, model in "
        f"{out / 'model'}); --resume has nothing to do (to train longer, start a new --out)",
        file=sys.stderr,
    )
    return True


def last_checkpoint(out: Path) -> str | None:
    """The newest *complete* ``checkpoint-N`` of ``out``; torn ones (a kill or a full disk while saving) are
    removed, saying so, so the trainer neither loads them nor writes its next save over their leftovers."""
    import shutil

    found = []
    for path in out.glob("checkpoint-*"):
        suffix = path.name.removeprefix("checkpoint-")
        if path.is_dir() and suffix.isdigit():
            found.append((int(suffix), path))
    for step, path in sorted(found, reverse=True):
        problem = checkpoint_problem(path, step)
        if problem is None:
            print(f"lakeshift train: resuming from {path} (step {step})", file=sys.stderr)
            return str(path)
        print(f"lakeshift train: {path} is incomplete ({problem}): removed, not resumed", file=sys.stderr)
        shutil.rmtree(path, ignore_errors=True)
    print(f"lakeshift train: no complete checkpoint in {out}; starting from the beginning", file=sys.stderr)
    truncate_metrics(out / "metrics.jsonl", 0)  # every step is trained (and logged) again
    return None


def checkpoint_problem(path: Path, step: int) -> str | None:
    """Why a checkpoint cannot be resumed from, or ``None``: it needs its weights, optimizer, scheduler and
    trainer state, each readable. Cheap checks (no tensor is loaded): a torn file is one cut short by a kill
    or a full disk, so the JSON must parse, a torch zip file must have its central directory (written last)
    and a safetensors file its full length."""
    state = path / "trainer_state.json"
    try:
        saved_step = json.loads(state.read_text(encoding="utf-8"))["global_step"]
    except FileNotFoundError:
        return "no trainer_state.json"
    except (OSError, ValueError, KeyError, TypeError):
        return "trainer_state.json is unreadable"
    if saved_step != step:
        return f"trainer_state.json is at step {saved_step}"
    if any(path.glob("global_step*")):  # DeepSpeed keeps weights and optimizer in its own folder
        return None
    return weights_problem(path) or torn_file(path / "optimizer.pt") or torn_file(path / "scheduler.pt")


def truncate_metrics(metrics_path: Path, step: int) -> None:
    """Drops the ``metrics.jsonl`` rows a resumed run will log again: every row after ``step`` (the checkpoint
    resumed from) and the end-of-training summary, so no log event is written twice."""
    if not metrics_path.is_file():
        return
    keep = []
    for line in metrics_path.read_text(encoding="utf-8").splitlines():
        try:
            row = json.loads(line)
            row_step = int(row["step"])
        except (ValueError, KeyError, TypeError):
            continue  # a line torn by the kill
        if row_step < step or (row_step == step and "train_runtime" not in row):
            keep.append(line + "\n")
    with atomic_write(metrics_path) as f:
        f.write("".join(keep))


class TimeBudget:
    """Training time spent under a ``--max-minutes`` budget, shared by the stopping callback and the schedule.

    The clock starts when training starts (``on_train_begin``); a resumed run gets a fresh budget."""

    def __init__(self, minutes: float, world_size: int = 1) -> None:
        self.seconds = minutes * 60
        self.start = time.time()
        self.stopped_at: int | None = None
        self.world_size = world_size
        self.shared = 0.0  # rank 0's fraction at the last step end (multi-process runs)

    def fraction(self) -> float:
        """The share of the budget spent so far on this process's clock, in [0, 1]."""
        return min(1.0, (time.time() - self.start) / self.seconds)

    def agreed_fraction(self) -> float:
        """The fraction every rank uses for its decisions: this clock alone, or rank 0's clock (broadcast at
        each step end) when several processes train together, so all ranks stop at the same step (none
        waits forever in a collective for one that stopped) and use the same learning rate (DDP replicas
        that applied different rates would drift apart)."""
        return self.fraction() if self.world_size == 1 else self.shared

    def sync(self) -> float:
        """Broadcasts rank 0's fraction to every rank (a collective: all ranks call it at every step end)."""
        if self.world_size > 1:
            import torch
            import torch.distributed as dist
            from accelerate import PartialState

            value = torch.tensor([self.fraction()], dtype=torch.float64, device=PartialState().device)
            dist.broadcast(value, src=0)
            self.shared = float(value.item())
        return self.agreed_fraction()

    def callback(self) -> Any:
        """Stops training (with a final checkpoint) once the budget is spent."""
        from transformers import TrainerCallback

        budget = self

        class TimeBudget(TrainerCallback):
            def on_train_begin(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
                budget.start = time.time()

            def on_step_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
                if budget.sync() >= 1.0:
                    control.should_training_stop = True
                    control.should_save = True
                    budget.stopped_at = state.global_step

        return TimeBudget()

    def lr_factor(self, step: int, warmup_steps: int) -> float:
        """Linear warmup over steps, then linear decay to zero over the budget's *time*.

        The step at which a time budget ends is unknown in advance, so a schedule over planned steps would
        stop part-way down its slope; decaying with the clock anneals every run fully, whatever its speed
        (benchmarks/README.md, "Notes on the numbers", compares it with a constant rate)."""
        warm = min(1.0, (step + 1) / warmup_steps) if warmup_steps else 1.0
        return warm * max(0.0, 1.0 - self.agreed_fraction())


def progress_callback(
    metrics_path: Path,
    is_main: bool,
    budget: TimeBudget | None = None,
    postfix: dict[str, str] | None = None,
) -> Any:
    """A tqdm bar showing loss and real tokens/s, and a ``metrics.jsonl`` line per log event.

    With a time budget the run ends before its planned steps, so the bar counts seconds of the budget
    (read from the budget's own clock) instead of steps (its ETA is then the budget's end). ``postfix`` maps
    log keys to the labels the bar shows (default: ``{"loss": "loss"}``; GRPO shows its rewards)."""
    shown = postfix or {"loss": "loss"}
    from tqdm.auto import tqdm
    from transformers import TrainerCallback

    class ProgressMetrics(TrainerCallback):
        def __init__(self) -> None:
            self.bar: Any = None
            self.last: tuple[float, float] | None = None  # (time, num_tokens) at the previous log

        def on_train_begin(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            if not is_main:
                return
            if state.global_step > 0:  # resumed from a checkpoint: what was logged after it is redone
                truncate_metrics(metrics_path, state.global_step)
            if budget is not None:
                fmt = "{l_bar}{bar}| {elapsed}<{remaining} of the time budget{postfix}"
                self.bar = tqdm(total=round(budget.seconds), desc="train", bar_format=fmt)
            else:
                self.bar = tqdm(total=state.max_steps, initial=state.global_step, desc="train", unit="step")

        def on_step_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            if self.bar is None:
                return
            done = round(budget.fraction() * budget.seconds) if budget is not None else state.global_step
            self.bar.update(done - self.bar.n)

        def on_log(
            self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None, **kw: Any
        ) -> None:
            if not is_main or not logs:
                return
            now, row = time.time(), {"step": state.global_step, "epoch": state.epoch, "time": time.time()}
            row.update({k: v for k, v in logs.items() if isinstance(v, (int, float, str))})
            tokens = logs.get("num_tokens")
            if tokens is not None and self.last is not None and now > self.last[0] and tokens > self.last[1]:
                row["tokens_per_s"] = (tokens - self.last[1]) / (now - self.last[0])
            if tokens is not None:
                self.last = (now, float(tokens))
            with metrics_path.open("a", encoding="utf-8") as f:
                f.write(dumps(row) + "\n")
            values = {lab: logs[k] for k, lab in shown.items() if isinstance(logs.get(k), (int, float))}
            if self.bar is not None and values:
                post = {lab: f"{v:.4f}" for lab, v in values.items()}
                if "tokens_per_s" in row:
                    post["tok/s"] = f"{row['tokens_per_s']:.0f}"
                self.bar.set_postfix(post, refresh=False)

        def on_train_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            if self.bar is not None:
                self.bar.close()

    return ProgressMetrics()


def train_and_save(
    trainer: Any,
    *,
    out: Path,
    record: dict[str, Any],
    lora: LoraSettings | None,
    processing: Any,
    budget: TimeBudget | None,
    resume: bool,
    is_main: bool,
    state: Any,
    postfix: dict[str, str] | None = None,
) -> Path:
    """Runs a built trainer (SFT or GRPO) with lakeshift's progress bar, metrics and time budget, then saves
    the final model (merged when LoRA) with its tokenizer/processor to ``OUT/model`` and completes
    ``run.json``; returns the model folder. With ``lora`` the adapter is saved too (``OUT/adapter``)."""
    from transformers import PrinterCallback
    from transformers.utils import logging as hf_logging

    trainer.remove_callback(PrinterCallback)
    # Our bar is the one to watch; transformers' per-checkpoint "Writing model shards" bars would bury it.
    hf_logging.disable_progress_bar()
    trainer.add_callback(progress_callback(out / "metrics.jsonl", is_main, budget, postfix=postfix))
    if budget is not None:
        trainer.add_callback(budget.callback())
    record["model"]["n_trainable_params"] = sum(
        p.numel() for p in trainer.model.parameters() if p.requires_grad
    )
    if is_main:
        write_run(out, record)
    start = time.time()
    result = trainer.train(resume_from_checkpoint=last_checkpoint(out) if resume else None)

    final = out / "model"
    if lora is not None:
        # save_model: rank 0 writes, and (FSDP/DeepSpeed) every rank takes part in gathering the weights.
        trainer.save_model(str(out / "adapter"))
        merged = trainer.model.merge_and_unload() if is_main else None
        if merged is not None:
            merged.save_pretrained(str(final))
    else:
        trainer.save_model(str(final))
    if is_main:
        processing.save_pretrained(str(final))
        record.update(
            status="done",
            finished=time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            train_seconds=round(time.time() - start, 2),
            global_step=trainer.state.global_step,
            stopped_by_time_budget=budget is not None and budget.stopped_at is not None,
            train_metrics={k: v for k, v in result.metrics.items() if isinstance(v, (int, float))},
        )
        write_run(out, record)
    # No rank returns (and exits) before rank 0 has written the final model and run.json.
    state.wait_for_everyone()
    return final
