"""Training and prediction: ``lakeshift train`` and ``lakeshift predict``.

- :mod:`lakeshift.models.data` reads ``DATA/<split>/sft/<input>__<cot>.jsonl`` and selects maps
  (``--sizes``, ``--per-size``, ``--limit``) and the prompt.
- :mod:`lakeshift.models.registry` resolves ``--model`` (named from-scratch sizes, shipped base models,
  folders, hub ids).
- :mod:`lakeshift.models.tokenizer` builds the structured (or character) ChatML tokenizer of named sizes.
- :mod:`lakeshift.models.train` fine-tunes with trl's ``SFTTrainer`` (:mod:`lakeshift.models.grpo`: GRPO);
  :mod:`lakeshift.models.predict` writes predictions with the ``hf``, ``vllm`` or ``openai`` backend
  (:mod:`lakeshift.models.backends`), which share the types of :mod:`lakeshift.models.generation`.

Prompt (``--prompt``): ``mirage`` (default) keeps the SFT file's user message, i.e. Mirage's rule text with
the map in it, as in the paper. ``map-only`` replaces the user message by just the map in the input format
(``formats.render`` of the map from ``<split>/maps.jsonl``; for image input only the image block). The rule
text is the same in every example and most of its tokens (benchmarks/log.md), and a small from-scratch
model cannot use it anyway. ``train`` records the choice in
``run.json``; ``predict`` defaults to the run's choice and records it in every prediction row.

Nothing here is imported by the core modules; torch and transformers load only inside functions that need
them.
"""
