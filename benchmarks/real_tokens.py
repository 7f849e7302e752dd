"""Real (non-padding) tokens per second of the main job's training, under
several settings, in one run.

The main job (`python -m training.pretrain`) trains the `tiny` BERT on
records of the default corpus whose instances average well under their
128 positions. Compute spent on padding buys nothing, so the measure that
counts is real tokens per second: the `input_mask` ones a step trains on,
divided by its time. This script writes the main job's data exactly as the
main job does (its recipe, flags at their defaults), then trains one copy
of the same model per setting, each in a process of its own (op threads
are set per process, as the main job sets them), in alternating rounds of
`--steps` fit steps (so drift in a shared machine hits all alike). Each
round reads the next batches of its own stream; the same batches are read
once more, untimed, to count their real tokens.

A setting is `--length_grouping`, then options after colons: `bf16`
(`--mixed_precision`) or `f32` (`--nomixed_precision`), default the main
job's choice; `sN` (`--batch_slices=N`), default the main job's choice.

    python benchmarks/real_tokens.py                     # 4 rounds of 50 steps
    python benchmarks/real_tokens.py --settings=16:f32,16 --rounds=6

Prints, per setting, the median real tokens/s, padded tokens/s, the share of
real tokens and the ratio to the first setting.
"""

import os
import statistics
import subprocess
import sys
import tempfile
import time

from absl import app
from absl import flags

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)  # run as a script from anywhere

FLAGS = flags.FLAGS
flags.DEFINE_list("settings", ["0:s1:f32", "16:s1:f32", "16:f32", "16"],
                  "--length_grouping values with ':bf16' or ':f32' (--[no]mixed_precision) "
                  "and ':sN' (--batch_slices=N), each default the main job's choice; the "
                  "first is the base.")
flags.DEFINE_integer("rounds", 4, "Alternating timed rounds.", lower_bound=1)
flags.DEFINE_integer("steps", 50, "Fit steps per setting per round.", lower_bound=1)
flags.DEFINE_string("data_dir", None, "Where to write the main job's data (default: a temp dir).")
flags.DEFINE_string("child", None, "Internal: run this one setting, driven over stdin.")


def _setting(text):
    """'16:bf16:s1' -> (length_grouping, mixed_precision, batch_slices or None);
    mixed_precision None: the main job's choice."""
    grouping, *options = text.split(":")
    slices = bf16 = None
    for option in options:
        if option.startswith("s") and option[1:].isdigit():
            slices = int(option[1:])
        elif option in ("bf16", "f32"):
            bf16 = option == "bf16"
        else:
            raise app.UsageError(f"--settings: {text!r}: unknown option {option!r} "
                                 "(bf16, f32 or sN).")
    if not grouping.isdigit():
        raise app.UsageError(f"--settings: {text!r} does not start with a length_grouping.")
    return int(grouping), bf16, slices


def _main_job_choices(bf16, slices):
    """(mixed_precision, batch_slices) with the main job's choice for None."""
    from training.pretraining.recipe import pretrain_recipe
    from training.run.distribution import auto_mixed_precision
    from training.run.distribution import cpu_batch_slices

    pays = pretrain_recipe("bert").bfloat16_pays
    return (auto_mixed_precision(pays, "auto") if bf16 is None else bf16,
            cpu_batch_slices(slices or 0))


def _child(setting, data_dir, steps):
    """One setting's model: 'ready', then per 'go' line one timed round,
    printed as 'round <real> <padded> <seconds>'."""
    grouping, bf16, slices = _setting(setting)
    from training.pretrain import PretrainConfig
    from training.run.distribution import cpu_op_threads

    bf16, slices = _main_job_choices(bf16, slices)
    cfg = PretrainConfig(output_dir=data_dir, mixed_precision=bf16, batch_slices=slices)
    if slices > 1:
        cpu_op_threads(slices)  # before TensorFlow starts, as the main job
    import keras

    from training.pretrain import make_recipe
    from training.pretraining.command.recipes import prepare_data
    from training.run.optimization import OptimizerConfig
    from training.run.optimization import create_optimizer

    if bf16:
        keras.mixed_precision.set_global_policy("mixed_bfloat16")
    recipe = make_recipe(cfg)
    train_source, _, vocab_file = prepare_data(recipe, cfg)  # written by the parent already
    keras.utils.set_random_seed(cfg.seed)  # the same initial weights for every setting
    model, model_config = recipe.build_model(recipe.vocab_size(train_source, vocab_file))
    model.batch_slices = cfg.batch_slices
    model.compile(optimizer=create_optimizer(OptimizerConfig(
        learning_rate=cfg.learning_rate, warmup_steps=cfg.warmup_steps,
        weight_decay=cfg.weight_decay, clip_norm=cfg.clip_norm), cfg.num_train_steps or 3000))

    def batches(start):
        return recipe.dataset(train_source, cfg.global_batch_size, model_config,
                              start_batch=start, length_grouping=grouping)

    model.fit(batches(0), steps_per_epoch=2, verbose=0)  # trace the step shapes it can
    start = 2
    print("ready", flush=True)
    for _ in sys.stdin:
        began = time.perf_counter()
        model.fit(batches(start), steps_per_epoch=steps, verbose=0)
        seconds = time.perf_counter() - began
        real = padded = 0
        for x, _, _ in batches(start).take(steps):
            real += int(x["input_mask"].numpy().sum())
            padded += int(x["input_mask"].shape[0] * x["input_mask"].shape[1])
        start += steps
        print(f"round {real} {padded} {seconds}", flush=True)


def main(argv):
    del argv
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    if FLAGS.child:
        return _child(FLAGS.child, FLAGS.data_dir, FLAGS.steps)
    for setting in FLAGS.settings:
        _setting(setting)  # a bad setting stops before anything runs
    from training.pretrain import PretrainConfig
    from training.pretrain import make_recipe
    from training.pretraining.command.recipes import prepare_data

    out = FLAGS.data_dir or tempfile.mkdtemp(prefix="real_tokens_")
    cfg = PretrainConfig(output_dir=out)  # the main job's settings
    prepare_data(make_recipe(cfg), cfg)
    children = []
    for setting in FLAGS.settings:
        child = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), f"--child={setting}",
             f"--data_dir={out}", f"--steps={FLAGS.steps}"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=ROOT)
        if child.stdout.readline().strip() != "ready":  # one at a time: no contention
            raise SystemExit(f"Setting {setting!r} did not start (its error is above).")
        children.append(dict(setting=setting, process=child, rates=[], padded_rates=[],
                             real=0, padded=0))
    try:
        for _ in range(FLAGS.rounds):
            for run in children:
                run["process"].stdin.write("go\n")
                run["process"].stdin.flush()
                _, real, padded, seconds = run["process"].stdout.readline().split()
                real, padded, seconds = int(real), int(padded), float(seconds)
                run["rates"].append(real / seconds)
                run["padded_rates"].append(padded / seconds)
                run["real"] += real
                run["padded"] += padded
    finally:
        for run in children:
            run["process"].stdin.close()
            run["process"].wait()
    base = statistics.median(children[0]["rates"])
    print(f"Main job's training ({cfg.preset} BERT, batch {cfg.global_batch_size}, "
          f"{FLAGS.rounds} rounds x {FLAGS.steps} steps each, "
          f"{len(os.sched_getaffinity(0))} cores):")
    print("| setting | real tokens/s | all tokens/s | real share | ratio |")
    print("|---|---|---|---|---|")
    for run in children:
        grouping, bf16, slices = _setting(run["setting"])
        bf16, slices = _main_job_choices(bf16, slices)
        label = (f"length_grouping {grouping}, batch_slices {slices}, "
                 f"{'mixed_bfloat16' if bf16 else 'float32'}")
        rate = statistics.median(run["rates"])
        print(f"| {label} | {rate:,.0f} | {statistics.median(run['padded_rates']):,.0f} "
              f"| {run['real'] / run['padded']:.1%} | {rate / base:.2f}x |")


if __name__ == "__main__":
    app.run(main)
