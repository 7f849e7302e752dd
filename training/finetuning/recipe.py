"""Fine-tuning's recipes: what each model family gives `training.finetune`,
and `finetune_recipe`, the registry that picks one by `--model`: the one
place fine-tuning chooses code by a model's name (pretraining's is
`training.pretraining.recipe.pretrain_recipe`).

A family's recipe is the `RECIPE` of `training/<family>/finetune.py`, a
`FinetuneRecipe` class that fills in what differs. Its class methods are
the resolve pass (`training.finetuning.resolve`), the one place it reads
the config:

- `resolve(cfg)`: the task defaults, from the family's tables of learning
  rate and length per task (BERT's: `DEFAULT_LEARNING_RATE`,
  `DEFAULT_MAX_SEQ_LENGTH`) and its warmup and weight decay
  (`task_defaults`), then its own defaults and refusals, checkpoint and
  vocabulary located (`resolve_own`).

The run then builds the recipe from plain values: the resolved flags its
class names in `flags` (`resolve.recipe_for`), kept as `self.flag`. Its
methods take no config:

- `check_checkpoint()`: the checkpoint's format, before data is read;
- `tokenizer()` and `make_task(tokenizer)` (the task's values:
  `training.finetuning.tasks.task_values` and the family's own, passed to
  the task's constructor as keywords);
- `build_backbone(vocab_size)` and `check_backbone(tokenizer, backbone)`;
- `grouped_batches(...)` (XLNet pads on the left) and `epoch_batches(task,
  model, batches)` (ELMo turns word ids into character ids);
- `export(model, saved_model_dir, labels)`: one signature for all four;
  `runtime_tokenizer()`: the tokenizer beside the runtime exports
  (`--export_formats`; `export_formats` names those the family converts to).

What the families' checks and backbones share is here too: `check_start`
(a checkpoint or a preset of the family), `run_dtype` and
`backbone_in_keras_file`.
"""

import dataclasses

import keras

from keras_bert_impl.checkpoints.keras_files import check_keras_file
from tf_records.length_grouping import grouped_batches
from training.finetuning.tasks import TASK_FLAGS
from training.run.config_flags import family_recipe
from training.run.config_flags import flag_values

# --model -> the module whose RECIPE fine-tunes it (imported when chosen:
# each family's module imports Keras and its own models).
FAMILIES = {"bert": "training.bert.finetune", "gpt": "training.gpt.finetune",
            "elmo": "training.elmo.finetune", "xlnet": "training.xlnet.finetune"}


def finetune_recipe(model):
    """The family's `FinetuneRecipe` class; `SystemExit` naming `--model` for another name."""
    return family_recipe(FAMILIES, model)


def check_start(model, init_checkpoint, preset, presets, family, needs, not_both=False):
    """`SystemExit` unless a `--model=<model>` run starts from
    `init_checkpoint` or one of its `presets`: for a preset of another
    family (`family`: "a GPT", "an ELMo"), for neither (`needs`: what the
    message says it needs), and with `not_both` for both."""
    if preset and preset not in presets:
        raise SystemExit(f"--preset={preset!r} is not {family} preset: use one of "
                         f"{sorted(presets)}.")
    if not init_checkpoint and not preset:
        raise SystemExit(f"--model={model} needs {needs}")
    if not_both and init_checkpoint and preset:
        raise SystemExit(f"Pass --init_checkpoint or --preset for --model={model}, not both.")


# The paper's fine-tuning settings (Sec. 4, Appendix A.3): learning rates
# from its grid {5e-5, 3e-5, 2e-5}: GLUE 5e-5 (the original
# run_classifier.py default), SQuAD 3e-5 (the original README's run),
# SWAG 2e-5 (Sec. 4.4), NER 5e-5.
# Your own files (`--task=text_classification`) are classified as GLUE is.
DEFAULT_LEARNING_RATE = {"glue": 5e-5, "squad": 3e-5, "ner": 5e-5, "swag": 2e-5,
                         "text_classification": 5e-5}
DEFAULT_MAX_SEQ_LENGTH = {"glue": 128, "squad": 384, "ner": 128, "swag": 128,
                          "text_classification": 128}


def run_dtype(mixed_precision):
    """The backbone's dtype policy: "mixed_bfloat16" with `--mixed_precision`, else None."""
    return "mixed_bfloat16" if mixed_precision else None


def backbone_in_keras_file(path, backbone_class, what):
    """The `backbone_class` instance a `.keras` file holds: the model itself
    or its `backbone`. `SystemExit` naming `--init_checkpoint` for a file
    that is not one of ours, and the file for one with no such backbone
    (`what`: its name in the message, e.g. "GPT backbone")."""
    try:
        check_keras_file(path)
    except ValueError as e:
        raise SystemExit(f"--init_checkpoint: {e}") from None
    model = keras.saving.load_model(path, compile=False)
    backbone = model if isinstance(model, backbone_class) else getattr(model, "backbone", None)
    if not isinstance(backbone, backbone_class):
        raise SystemExit(f"{path} holds a {type(model).__name__}, which has no {what}.")
    return backbone


class FinetuneRecipe:
    """The defaults of a family that uses BERT's; each family overrides what differs."""

    name = "bert"
    adam_epsilon = None  # None: OptimizerConfig's
    learning_rate = None  # None: the task's (task_learning_rates)
    # Task kind -> learning rate and tokens per input, where the flags leave them 0.
    task_learning_rates = DEFAULT_LEARNING_RATE
    task_max_seq_lengths = DEFAULT_MAX_SEQ_LENGTH
    # BERT's (and GPT's weight decay): warmup over 10% of the steps, then linear decay.
    warmup_proportion = 0.1
    weight_decay = 0.01
    cased = False  # True: cased unless --do_lower_case is typed (XLNet's released models)
    hub_checkpoints = True  # --init_checkpoint may name a Hugging Face repository
    ablations = False  # takes --ablation (BERT's Table 5 variants)
    # The resolved flags the recipe's methods read, each passed to the constructor by name.
    flags = TASK_FLAGS + ("init_checkpoint", "preset", "vocab_file", "mixed_precision")

    def __init__(self, **values):
        self.flag = flag_values(type(self).__name__, self.flags, values)

    @classmethod
    def resolve(cls, cfg):
        return cls.resolve_own(dataclasses.replace(cfg, **cls.task_defaults(cfg)))

    @classmethod
    def task_defaults(cls, cfg):
        """{field: value} of the defaults left to fill: the task's learning
        rate (or the family's) and length, the family's warmup and weight decay."""
        kind = "glue" if cfg.task.startswith("glue/") else cfg.task
        changes = {}
        if kind in cls.task_learning_rates:
            if not cfg.learning_rate:
                changes["learning_rate"] = cls.learning_rate or cls.task_learning_rates[kind]
            if not cfg.max_seq_length:
                changes["max_seq_length"] = cls.task_max_seq_lengths[kind]
        if cfg.warmup_proportion < 0:
            changes["warmup_proportion"] = cls.warmup_proportion
        if cfg.weight_decay < 0:
            changes["weight_decay"] = cls.weight_decay
        return changes

    @classmethod
    def resolve_own(cls, cfg):
        return cfg

    def check_checkpoint(self):
        pass

    def tokenizer(self):
        raise NotImplementedError

    def make_task(self, tokenizer):
        raise NotImplementedError

    def build_backbone(self, vocab_size):
        raise NotImplementedError

    def check_backbone(self, tokenizer, backbone):
        del tokenizer, backbone

    def describe(self):
        """What the run's first line adds for this family (", lm_coef 0.5")."""
        return ""

    def grouped_batches(self, x, y, sample_weight, batch_size, group, seed):
        return grouped_batches(x, y, sample_weight, batch_size, group, seed)

    def epoch_batches(self, task, model, batches):
        del task, model
        return batches

    def export(self, model, saved_model_dir, labels):
        raise NotImplementedError

    # The formats of --export_formats this family's task models convert to
    # (`keras_bert_impl.runtimes.formats.FORMATS`), and why not the others.
    export_formats = ("saved_model", "onnx", "openvino", "litert")
    export_refusal = ""

    def runtime_tokenizer(self):
        """`(files, import line, constructor)` of `text_to_ids.py` beside a
        runtime export: the tokenizer's files to copy, the line importing
        its class, and the expression building it from the copies (named
        by `os.path.join(HERE, <file name>)`)."""
        raise NotImplementedError
