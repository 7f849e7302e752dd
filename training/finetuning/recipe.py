"""Fine-tuning's recipes: what each model family gives `training.finetune`,
and `finetune_recipe`, the registry that picks one by `--model`: the one
place fine-tuning chooses code by a model's name (pretraining's is
`training.pretraining.recipe.pretrain_recipe`).

A family's recipe is the `RECIPE` of `training/<family>/finetune.py`, a
`FinetuneRecipe` that fills in what differs:

- `resolve(cfg)`: the task defaults every family shares, with the family's
  learning rate, warmup and weight decay (`task_defaults`), then its own
  defaults and refusals, checkpoint and vocabulary located (`resolve_own`);
- `check_checkpoint(cfg)`: the checkpoint's format, before data is read;
- `tokenizer(cfg)` and `make_task(cfg, tokenizer)`;
- `build_backbone(cfg, vocab_size)` and `check_backbone(cfg, tokenizer,
  backbone)`;
- `grouped_batches(...)` (XLNet pads on the left) and `epoch_batches(task,
  model, batches)` (ELMo turns word ids into character ids);
- `export(model, saved_model_dir, cfg, labels)`: one signature for all four.
"""

import dataclasses

from training.run.config_flags import family_recipe

# --model -> the module whose RECIPE fine-tunes it (imported when chosen:
# each family's module imports Keras and its own models).
FAMILIES = {"bert": "training.bert.finetune", "gpt": "training.gpt.finetune",
            "elmo": "training.elmo.finetune", "xlnet": "training.xlnet.finetune"}


def finetune_recipe(model):
    """The family's `FinetuneRecipe`; `SystemExit` naming `--model` for another name."""
    return family_recipe(FAMILIES, model)


class FinetuneRecipe:
    """The defaults of a family that uses BERT's; each family overrides what differs."""

    name = "bert"
    adam_epsilon = None  # None: OptimizerConfig's
    learning_rate = None  # None: the task's (training.finetuning.tasks.DEFAULT_LEARNING_RATE)
    # BERT's (and GPT's weight decay): warmup over 10% of the steps, then linear decay.
    warmup_proportion = 0.1
    weight_decay = 0.01
    cased = False  # True: cased unless --do_lower_case is typed (XLNet's released models)
    hub_checkpoints = True  # --init_checkpoint may name a Hugging Face repository
    ablations = False  # takes --ablation (BERT's Table 5 variants)

    def resolve(self, cfg):
        return self.resolve_own(dataclasses.replace(cfg, **self.task_defaults(cfg)))

    def task_defaults(self, cfg):
        """{field: value} of the defaults left to fill: the task's learning
        rate (or the family's) and length, the family's warmup and weight decay."""
        from training.finetuning.tasks import DEFAULT_LEARNING_RATE
        from training.finetuning.tasks import DEFAULT_MAX_SEQ_LENGTH

        kind = "glue" if cfg.task.startswith("glue/") else cfg.task
        changes = {}
        if kind in DEFAULT_LEARNING_RATE:
            if not cfg.learning_rate:
                changes["learning_rate"] = self.learning_rate or DEFAULT_LEARNING_RATE[kind]
            if not cfg.max_seq_length:
                changes["max_seq_length"] = DEFAULT_MAX_SEQ_LENGTH[kind]
        if cfg.warmup_proportion < 0:
            changes["warmup_proportion"] = self.warmup_proportion
        if cfg.weight_decay < 0:
            changes["weight_decay"] = self.weight_decay
        return changes

    def resolve_own(self, cfg):
        return cfg

    def check_checkpoint(self, cfg):
        del cfg

    def tokenizer(self, cfg):
        raise NotImplementedError

    def make_task(self, cfg, tokenizer):
        raise NotImplementedError

    def build_backbone(self, cfg, vocab_size):
        raise NotImplementedError

    def check_backbone(self, cfg, tokenizer, backbone):
        del cfg, tokenizer, backbone

    def describe(self, cfg):
        """What the run's first line adds for this family (", lm_coef 0.5")."""
        del cfg
        return ""

    def grouped_batches(self, x, y, sample_weight, batch_size, group, seed):
        from tf_records.length_grouping import grouped_batches

        return grouped_batches(x, y, sample_weight, batch_size, group, seed)

    def epoch_batches(self, task, model, batches):
        del task, model
        return batches

    def export(self, model, saved_model_dir, cfg, labels):
        raise NotImplementedError
