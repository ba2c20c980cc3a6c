"""Config-driven studies: one YAML file -> data, training runs, predictions, scores and a report.

A study config (see ``configs/studies/*.yaml``)::

    name: cpu-study
    workdir: runs/cpu-study            # everything the study writes goes under here
    data:
      suite: paper                     # a named suite or a suite file, or `splits:` inline (its schema)
      seed: 0
      id_source: null                  # Mirage folder: import id-train / id-test instead of generating
      images: false                    # render PNGs (needed by image-input models)
    train:                             # defaults for every trained model (lakeshift train options)
      model: tiny
      epochs: 3
    predict:                           # lakeshift predict options for every model
      splits: [id-test, ood-size, ood-dist]
      per_size: 50                     # first N maps of each size of each split (null: all)
    models:
      - {input: grid, cot: none}
      - {input: grid, cot: grid+desc, train: {epochs: 5}}
      - {name: gpt-4o, input: image, cot: none, zero_shot: true, backend: openai, model: gpt-4o}
      - {name: grid__none@k8, method: predict, init: grid__none, predict: {decoding: frozen_ood, samples: 8}}
    report: {baselines: true}
    train_jobs: 1                      # SFT training stages run at once (see below)

A study may start from another: ``extends: FILE`` takes that study's config, this file's ``data``,
``train``, ``predict`` and ``report`` keys replacing its keys one by one and the other keys replacing its
keys whole (:func:`~lakeshift.studies.validate.read_study_config`). Each section's keys are options
declared once with their command (:mod:`lakeshift.studies.schema`): ``data:`` ``lakeshift generate``'s,
``train:`` ``lakeshift train``'s, ``predict:`` ``lakeshift predict``'s, ``report:`` ``lakeshift report``'s.

Stages and caching. The plan has one ``generate`` stage, one ``train`` stage per fine-tuned model, one
``predict`` stage per (model, split) and a final ``report`` stage; each runs the same code as the matching CLI
subcommand, in process, with the command line its options give. A stage's key is the hash of its own settings
and of the keys of the stages it reads; ``WORKDIR/stages/<stage>.json`` records the key of the last completed
run. On a rerun a stage whose recorded key matches is skipped; one that never completed resumes (``train
--resume`` from its last checkpoint, ``predict`` skipping finished ids); one whose settings changed is cleared
and redone, and so is everything downstream of it (their keys include its key). So changing one model's
settings retrains and re-predicts that model only, then rewrites the report.

The key also holds the code that produces the stage: lakeshift's version and a hash of its source (every
``lakeshift/**/*.py``, see :func:`code_identity`), taken when the study is planned and checked again as each
stage starts and ends. Results made by other code are never served from the cache: after an upgrade or an
edit of the package every stage is redone (the run says so), a stage during which the source changed is
not recorded as done, and a marker records the code it was made with.

A marker also records the study's name (a workdir holds one study: another is refused) and a digest of what
the stage made and of what it read (:func:`~lakeshift.studies.stages.outputs_digest`): a stage whose
outputs are missing or changed is redone, and so are those that read them, unless they come out the same.

Training at once. With ``train_jobs: N`` (N > 1) the SFT training stages run N at a time, each in its own
``python -m lakeshift train`` process with ``cpu_count // N`` threads and its output prefixed with the
model's name; GRPO stages (they read an SFT model) and predictions run after them, one at a time. Small
models use a second thread poorly, so two at once make more steps than one after the other
(benchmarks/log.md, "Threads"). A time budget
(``max_minutes``) is then each model's wall time, spent at once.

Layout: ``WORKDIR/data/`` (the suite), ``WORKDIR/models/<name>/`` (training runs),
``WORKDIR/predictions/<name>/<split>.jsonl``, ``WORKDIR/report/`` (tables, plots, report.html).
"""

from lakeshift.studies.plan import load_study, plan_study
from lakeshift.studies.run import run_study
from lakeshift.studies.stages import Stage, Study, code_identity
from lakeshift.studies.validate import read_study_config

__all__ = ["Stage", "Study", "code_identity", "load_study", "plan_study", "read_study_config", "run_study"]
