"""Running a study's plan: stages in order, cached ones skipped, SFT trainings at once when asked."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from typing import Any, TextIO

from lakeshift.errors import LakeshiftError
from lakeshift.studies import stages as study_stages
from lakeshift.studies.stages import Stage, Study


def run_study(study: Study, *, dry_run: bool = False, out: TextIO | None = None) -> int:
    """Runs every stage that is not done, in order; prints the plan (to ``out``, default stderr) first."""
    out = out or sys.stderr
    from lakeshift.cli import main as cli_main

    other = study.other_study()
    if other is not None:
        raise LakeshiftError(
            f"workdir {study.workdir} holds the results of study {other[0]!r} ({other[1]}); study "
            f"{study.name!r} would replace them: give it another workdir"
        )
    counts = study.summary()
    todo = _todo(study)
    print(
        f"study {study.name!r} in {study.workdir}: {counts.get('train', 0)} training runs, "
        f"{counts.get('predict', 0)} prediction runs; {len(todo)} of {len(study.stages)} stages to do",
        file=out,
    )
    print(study.estimate(todo), file=out)
    over = study.over_budget(todo)
    if over:
        print(f"lakeshift run: {over}", file=out)
        return 2
    for s in todo:
        foreign = s.foreign_output()
        if foreign is not None:
            raise LakeshiftError(
                f"{foreign} exists but was not written by study {study.name!r} (no {s.marker}): its {s.kind} "
                "stage would replace it; move it away or choose another --workdir"
            )
    for s in study.stages:
        state = "cached" if s not in todo else "todo"
        stale = (
            s in todo and s.recorded_key() is not None and s.recorded_code() != study_stages.code_identity()
        )
        note = f" (made by other code: {s.recorded_code() or 'an older lakeshift'})" if stale else ""
        if s in todo and not stale and s.recorded_key() == s.key:
            note = f" ({s.why_not_done() or 'a stage it reads is to be redone'})"
        print(f"  [{state:6}] {s.kind:8} {s.name}{note}", file=out)
        if dry_run:
            print(f"           lakeshift {' '.join(s.argv)}", file=out)
    if dry_run or not todo:
        if not todo:
            print("nothing to do: every stage is cached", file=out)
        return 0
    started = time.time()
    at_once = study.concurrent(todo)
    for s in todo:
        if s in at_once:
            if s is at_once[0]:
                _check_source(study)
                batch = [t for t in at_once if not t.done()]
                rc = _train_at_once(batch, study.train_jobs, out) if batch else 0
            else:
                rc = 0
        elif s.done():  # what it reads was redone and came out the same
            print(f"\n== {s.kind}: {s.name}: still cached (what it reads is unchanged)", file=out)
            rc = 0
        else:
            print(f"\n== {s.kind}: {s.name}", file=out)
            _check_source(study)
            argv = _prepare(s, out)
            t0 = time.time()
            rc = cli_main(argv)
            if rc == 0:
                changed = _finish(s, time.time() - t0)
                if changed:
                    raise LakeshiftError(changed)
            else:
                print(
                    f"stage {s.kind} {s.name} failed (exit {rc}); rerun the same command to resume",
                    file=out,
                )
        if rc != 0:
            return rc
    if not any(s.kind == "report" for s in study.stages):
        print("\nno report: part of the study ran (--models); run it whole to build the report", file=out)
        return 0
    report = study.workdir / "report"
    print(f"\nreport: {report / 'report.html'}", file=out)
    minutes, seconds = divmod(round(time.time() - started), 60)
    print(f"study {study.name!r} took {minutes} min {seconds} s", file=out)
    return 0


def _todo(study: Study) -> list[Stage]:
    """The stages to run: those not done, and those after them (which read what they will remake; each is
    checked again when its turn comes, and skipped if what it reads came out the same)."""
    redo: set[str] = set()
    for s in study.stages:
        if not s.done() or any(str(m) in redo for m in s.after):
            redo.add(str(s.marker))
    return [s for s in study.stages if str(s.marker) in redo]


def _check_source(study: Study) -> None:
    """Refuses to start a stage when lakeshift's source changed since the study was planned: its key names
    the planned code, and modules imported from now on would be the edited ones."""
    now = study_stages.source_identity()
    if now != study_stages.code_identity():
        raise LakeshiftError(
            f"lakeshift's source changed while study {study.name!r} ran (planned with "
            f"{study_stages.code_identity()}, now {now}); rerun the same command to go on with the new code"
        )


def _finish(s: Stage, seconds: float) -> str | None:
    """Marks a stage that ran done, unless lakeshift's source changed while it ran: then its results are
    recorded as not to be served (a rerun redoes it) and the reason is returned."""
    now = study_stages.source_identity()
    if now == study_stages.code_identity():
        s.mark_done(seconds)
        return None
    s.mark_unrecorded(now)
    return (
        f"lakeshift's source changed while stage {s.kind} {s.name} ran (planned with "
        f"{study_stages.code_identity()}, now {now}): its results are not recorded as done; rerun the same "
        "command to redo it with the new code"
    )


def _prepare(s: Stage, out: TextIO) -> list[str]:
    """Clears what a stage made with other settings or code, and the entries of its tracked folder that
    changed since it made them (:meth:`Stage.changed_entries`: an edited split is made again), and writes
    its input files; returns its argv (``--resume`` added to a training run interrupted after a
    checkpoint)."""
    argv = list(s.argv)
    s.claim()
    if s.recorded_key() is not None:  # done before with other settings or code: start afresh
        code = s.recorded_code()
        if code != study_stages.code_identity():
            print(
                f"lakeshift's code changed since this stage ran (made by {code or 'an older version'}, "
                f"now {study_stages.code_identity()}): redoing it",
                file=out,
            )
        elif s.recorded_key() == s.key:
            print(f"{s.why_not_done() or 'a stage it reads was redone'}: redoing it", file=out)
        for path in s.outputs:
            shutil.rmtree(path) if path.is_dir() else path.unlink(missing_ok=True)
    for path, why in s.changed_entries():  # an edited split is written again, not kept as it is
        print(f"{why}: removing {path} to make it again", file=out)
        if path.is_dir():
            shutil.rmtree(path)
        else:
            path.unlink(missing_ok=True)
    for path, content in s.files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(content, indent=1) + "\n")
    if s.kind == "train":
        run_dir = s.outputs[0]
        if any(run_dir.glob("checkpoint-*")):
            argv.append("--resume")  # an interrupted run with the same settings continues from there
        elif run_dir.exists():
            shutil.rmtree(run_dir)  # interrupted before its first checkpoint: nothing to keep
    return argv


PROGRESS_EVERY_S = 30.0  # how often concurrent trainings show their progress


def share_of_cores(jobs: int) -> dict[str, str]:
    """The environment that gives each of ``jobs`` processes started at once its share of the cores."""
    threads = str(max(1, (os.cpu_count() or 1) // max(1, jobs)))
    return {"OMP_NUM_THREADS": threads, "MKL_NUM_THREADS": threads}


def _train_at_once(stages: list[Stage], jobs: int, out: TextIO) -> int:
    """Runs training ``stages`` ``jobs`` at a time, each a ``python -m lakeshift`` process with its share of
    the cores and its output lines prefixed with its name; returns the first failure's exit status."""
    # PYTHONUNBUFFERED: each line reaches the terminal as it is written
    env = {**os.environ, **share_of_cores(jobs), "PYTHONUNBUFFERED": "1"}
    print(
        f"\n== train: {len(stages)} models, {jobs} at a time, {env['OMP_NUM_THREADS']} thread(s) each",
        file=out,
    )
    lock = threading.Lock()
    progress: dict[str, str] = {}  # each running training's latest progress bar (redrawn with "\r")

    def forward(name: str, stream: Any) -> None:
        for line in io.TextIOWrapper(stream, encoding="utf-8", errors="replace", newline=""):
            if line.endswith("\r"):
                progress[name] = line.strip()
            elif line.strip():
                with lock:
                    print(f"[{name}] {line.rstrip()}", file=out, flush=True)

    pending, failed = list(stages), []
    running: list[Any] = []
    shown = time.time()
    try:
        while pending or running:
            while pending and len(running) < jobs:
                s = pending.pop(0)
                argv = [sys.executable, "-m", "lakeshift", *_prepare(s, out)]
                proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
                reader = threading.Thread(target=forward, args=(s.name, proc.stdout), daemon=True)
                reader.start()
                running.append((s, proc, reader, time.time()))
            time.sleep(0.5)
            if time.time() - shown >= PROGRESS_EVERY_S:  # the bars in turn, as lines that do not collide
                shown = time.time()
                with lock:
                    for name, bar in [(s.name, progress.pop(s.name, "")) for s, *_ in running]:
                        if bar:
                            print(f"[{name}] {bar}", file=out, flush=True)
            for job in [j for j in running if j[1].poll() is not None]:
                s, proc, reader, t0 = job
                running.remove(job)
                reader.join()
                changed = _finish(s, time.time() - t0) if proc.returncode == 0 else None
                if changed:
                    failed.append((s, 2))
                    print(changed, file=out)
                elif proc.returncode != 0:
                    failed.append((s, proc.returncode))
                    print(f"stage train {s.name} failed (exit {proc.returncode})", file=out)
    finally:  # an interrupt (Ctrl-C) stops the trainings too: each resumes from its last checkpoint
        for _, proc, _, _ in running:
            proc.terminate()
            proc.wait()
    if failed:
        print(f"{len(failed)} of {len(stages)} trainings failed; rerun the same command to resume", file=out)
        return failed[0][1]
    return 0
