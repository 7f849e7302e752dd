"""Real (non-padding) tokens per second of the main job's training, with and
without length grouping, in one run.

The main job (`python -m training.pretrain`) trains the `tiny` BERT on
records of the default corpus whose instances average well under their
128 positions. Compute spent on padding buys nothing, so the measure that
counts is real tokens per second: the `input_mask` ones a step trains on,
divided by its time. This script writes the main job's data exactly as the
main job does (its recipe, flags at their defaults), then trains two copies
of the same model, one reading fixed 128-token batches (`--length_grouping=0`,
the main job before grouping) and one with the main job's default grouping,
in alternating rounds of `--steps` fit steps (so drift in a shared machine
hits both alike). Each round reads the next batches of its own stream; the
same batches are read once more, untimed, to count their real tokens.

    python benchmarks/real_tokens.py                     # 4 rounds of 50 steps
    python benchmarks/real_tokens.py --settings=0,16,32,32:bf16 --rounds=3

Prints, per setting, the median real tokens/s, padded tokens/s, the share of
real tokens and the ratio to the first setting.
"""

import dataclasses
import os
import statistics
import sys
import tempfile
import time

from absl import app
from absl import flags

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)  # run as a script from anywhere

FLAGS = flags.FLAGS
flags.DEFINE_list("settings", ["0", "16", "16:bf16"],
                  "--length_grouping values, ':bf16' for --mixed_precision; the first is the base.")
flags.DEFINE_integer("rounds", 4, "Alternating timed rounds.")
flags.DEFINE_integer("steps", 50, "Fit steps per setting per round.")
flags.DEFINE_string("data_dir", None, "Where to write the main job's data (default: a temp dir).")


def _real_tokens(dataset):
    return sum(int(x["input_mask"].numpy().sum()) for x, _, _ in dataset)


def _padded_tokens(dataset):
    return sum(int(x["input_mask"].shape[0] * x["input_mask"].shape[1]) for x, _, _ in dataset)


def main(argv):
    del argv
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import keras

    from training.bert_recipe import BertRecipe
    from training.optimization import OptimizerConfig
    from training.optimization import create_optimizer
    from training.pretrain import PretrainConfig

    settings = [(int(s.split(":")[0]), s.endswith(":bf16")) for s in FLAGS.settings]
    out = FLAGS.data_dir or tempfile.mkdtemp(prefix="real_tokens_")
    cfg = PretrainConfig(output_dir=out)  # the main job's settings
    recipe = BertRecipe(cfg)
    train_source, _, vocab_file = recipe.prepare_data()
    vocab_size = recipe.vocab_size(train_source, vocab_file)
    total_steps = FLAGS.rounds * FLAGS.steps
    runs = []
    for grouping, bf16 in settings:
        keras.utils.set_random_seed(cfg.seed)  # the same initial weights for every setting
        recipe.cfg = dataclasses.replace(cfg, mixed_precision=bf16)
        model, model_config = recipe.build_model(vocab_size)
        model.compile(optimizer=create_optimizer(OptimizerConfig(
            learning_rate=cfg.learning_rate, warmup_steps=cfg.warmup_steps,
            weight_decay=cfg.weight_decay, clip_norm=cfg.clip_norm), total_steps))

        def batches(start, grouping=grouping, model_config=model_config):
            return recipe.dataset(train_source, cfg.global_batch_size, model_config,
                                  start_batch=start, length_grouping=grouping)

        model.fit(batches(0), steps_per_epoch=2, verbose=0)  # trace the step shapes it can
        runs.append(dict(setting=f"{grouping}{' + mixed_bfloat16' if bf16 else ''}", model=model, batches=batches, start=2, rates=[],
                         padded_rates=[], real=0, padded=0))
    for _ in range(FLAGS.rounds):
        for run in runs:
            start = time.perf_counter()
            run["model"].fit(run["batches"](run["start"]), steps_per_epoch=FLAGS.steps, verbose=0)
            seconds = time.perf_counter() - start
            counted = run["batches"](run["start"]).take(FLAGS.steps)
            real, padded = _real_tokens(counted), _padded_tokens(counted)
            run["rates"].append(real / seconds)
            run["padded_rates"].append(padded / seconds)
            run["real"] += real
            run["padded"] += padded
            run["start"] += FLAGS.steps
    base = statistics.median(runs[0]["rates"])
    print(f"Main job's training ({cfg.preset} BERT, batch {cfg.global_batch_size}, "
          f"{FLAGS.rounds} rounds x {FLAGS.steps} steps each):")
    print("| length_grouping | real tokens/s | all tokens/s | real share | ratio |")
    print("|---|---|---|---|---|")
    for run in runs:
        rate = statistics.median(run["rates"])
        print(f"| {run['setting']} | {rate:,.0f} | {statistics.median(run['padded_rates']):,.0f} "
              f"| {run['real'] / run['padded']:.1%} | {rate / base:.2f}x |")


if __name__ == "__main__":
    app.run(main)
