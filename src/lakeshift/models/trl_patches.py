"""lakeshift's changes to trl's trainers, shared by SFT and GRPO.

- :func:`exact_output_head`: trl's fused LM head scores labels against the output layer's weight; a model
  whose head changes its logits (the composed coordinate head of :mod:`lakeshift.models.cells`) is routed
  through its full logits instead, so it trains on the logits it produces.
- :func:`sft_trainer_class`: ``SFTTrainer`` with that exact head and a length-grouped order that does not
  depend on the number of processes.
- :func:`budget_trainer_class`: a trainer whose learning rate decays with a
  :class:`~lakeshift.models.run_folder.TimeBudget`'s clock.
"""

from __future__ import annotations

import functools
from typing import Any

from lakeshift.models.run_folder import TimeBudget


def sft_trainer_class(budget: TimeBudget | None) -> Any:
    """``SFTTrainer`` whose loss is the model's own (:func:`exact_output_head`), whose length-grouped order
    does not depend on the number of processes, and under a time budget whose learning rate decays with the
    clock."""
    from transformers.trainer_pt_utils import LengthGroupedSampler
    from trl import SFTTrainer

    class LakeshiftSFTTrainer(SFTTrainer):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            exact_output_head(self.model)

        def _get_train_sampler(self, train_dataset: Any = None) -> Any:
            # transformers groups by the *per-device* batch; accelerate then hands consecutive batches to
            # the ranks. Grouping by the global batch gives every world size the same sequence of global
            # batches (the 1-process order, split across ranks), so runs on 1 or N processes compare.
            sampler = super()._get_train_sampler(train_dataset)
            if isinstance(sampler, LengthGroupedSampler):
                sampler.batch_size = (
                    self.args.per_device_train_batch_size
                    * self.args.gradient_accumulation_steps
                    * self.args.world_size
                )
            return sampler

    if budget is None:
        return LakeshiftSFTTrainer
    return budget_trainer_class(LakeshiftSFTTrainer, budget)


def budget_trainer_class(base: Any, budget: TimeBudget) -> Any:
    """``base`` (a transformers ``Trainer`` class) whose learning rate decays with the budget's clock
    (:meth:`TimeBudget.lr_factor`); used by SFT and GRPO runs."""

    class TimeBudgetTrainer(base):
        def create_scheduler(self, num_training_steps: int, optimizer: Any = None) -> Any:
            from torch.optim.lr_scheduler import LambdaLR

            if getattr(self, "lr_scheduler", None) is None:
                warmup = self.args.get_warmup_steps(num_training_steps)
                self.lr_scheduler = LambdaLR(
                    optimizer or self.optimizer, lambda step: budget.lr_factor(step, warmup)
                )
                self._created_lr_scheduler = True
            return self.lr_scheduler

    return TimeBudgetTrainer


def exact_output_head(model: Any, temperature: float = 1.0) -> bool:
    """Make trl's fused LM head exact for a model whose output layer is more than a linear map.

    trl's trainers patch ``model.forward`` so that ``fused_lm_head=True`` runs the backbone and scores each
    label against ``get_output_embeddings().weight`` in tiles, never calling the head's ``forward``. A head
    that changes its logits there (``ComposedHead`` of :mod:`lakeshift.models.cells`, whose coordinate logits
    come from the composed vectors) would be trained on logits it never produces. For such a head the fused
    call goes through the model's full logits instead, with the same output fields (log-probabilities,
    entropy, top-1, label mask) and loss normalisation. Returns whether the model was patched; a plain
    ``nn.Linear`` head is left to the fused kernel.
    """
    import torch
    from trl.trainer.utils import FusedCausalLMOutput

    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    head = base.get_output_embeddings()
    if head is None or type(head).forward is torch.nn.Linear.forward:
        return False
    fused_forward = base.forward

    def forward(
        *args: Any,
        fused_lm_head: bool = False,
        labels: Any = None,
        shift_labels: Any = None,
        num_items_in_batch: Any = None,
        **kwargs: Any,
    ) -> Any:
        if not fused_lm_head:
            return fused_forward(
                *args,
                labels=labels,
                shift_labels=shift_labels,
                num_items_in_batch=num_items_in_batch,
                **kwargs,
            )
        kwargs["use_cache"] = False
        logits = fused_forward(*args, **kwargs).logits.float() / temperature
        if shift_labels is None:
            logits, labels = logits[:, :-1], labels[:, 1:]
        else:
            labels = shift_labels
        labels = labels.to(logits.device)
        mask = labels != -100
        log_softmax = torch.log_softmax(logits, dim=-1)
        log_probs = (
            log_softmax.gather(-1, labels.clamp(min=0).unsqueeze(-1)).squeeze(-1).masked_fill(~mask, 0)
        )
        entropy = -(log_softmax.exp() * log_softmax).sum(-1).masked_fill(~mask, 0)
        is_top1 = (logits.argmax(-1) == labels) & mask
        count = mask.sum().clamp(min=1) if num_items_in_batch is None else num_items_in_batch
        return FusedCausalLMOutput(
            loss=-log_probs.sum() / count,
            log_probs=log_probs,
            entropy=entropy,
            is_top1=is_top1,
            label_mask=mask,
        )

    base.forward = functools.wraps(fused_forward)(forward)
    return True
