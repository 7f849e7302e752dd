"""What `training.finetune` checks before it writes anything: its flags,
the paths they name, and every data split, read and encoded.

Validate first, act second: a run refused here has made no folder, lock or
`run_config.json`, so the corrected command starts normally in the same
`--output_dir`. `check_positions` runs once the model is built, still
before `run_config.json` is written.
"""

import contextlib
import os

import keras

from keras_bert_impl.base.sequence_checks import check_fits_positions
from keras_bert_impl.checkpoints.keras_files import check_keras_file
from keras_bert_impl.runtimes.formats import check_installed
from keras_bert_impl.runtimes.formats import check_quantize
from keras_bert_impl.runtimes.formats import parse_formats
from tf_records.input_files import check_output_folder
from training.run.config_flags import check_at_least
from training.run.config_flags import check_one_of
from training.run.distribution import STRATEGIES
from training.tasks.bad_rows import BadRowError


def check_flags(cfg):
    """`SystemExit` naming the first flag out of its range (before any default is filled in)."""
    check_at_least(cfg, {"max_seq_length": 0, "window_stride": 0, "doc_stride": 1,
                         "max_query_length": 1, "n_best_size": 1, "max_answer_length": 1,
                         "batch_size": 1, "epochs": 1,
                         "early_stopping_patience": 0, "learning_rate": 0.0, "clip_norm": 0.0,
                         "elmo_lstm_units": 0, "max_train_examples": 0, "length_grouping": 0,
                         "checkpoint_every_steps": 1, "log_every_steps": 1})
    check_one_of(cfg, "strategy", STRATEGIES)
    if cfg.warmup_proportion > 1:
        raise SystemExit(f"--warmup_proportion={cfg.warmup_proportion}: a share of the steps, "
                         "at most 1 (negative: the model's default).")
    for flag, value, default in (("export_formats", cfg.export_formats, "saved_model"),
                                 ("quantize", cfg.quantize, "none")):
        if not cfg.export and value != default:
            raise SystemExit(f"--{flag}={value} names what the export writes; "
                             "--noexport writes none.")
    try:
        formats = parse_formats(cfg.export_formats)
        check_installed(formats)
        check_quantize(formats, cfg.quantize)
    except ValueError as e:
        raise SystemExit(str(e)) from None
    if 0 < cfg.max_seq_length < 3:
        raise SystemExit(f"--max_seq_length={cfg.max_seq_length}: too short for the special "
                         "tokens (at least 3; 0: the task's default).")


def check_paths(cfg, recipe):
    """`SystemExit` naming a flag whose file or folder is missing or not of
    a kind the model reads. `recipe`: the family's `FinetuneRecipe`, which
    checks its checkpoint's format."""
    for flag in ("vocab_file", "merges_file"):
        path = getattr(cfg, flag)
        if path and not os.path.isfile(path):
            raise SystemExit(f"--{flag}={path}: no such file.")
    if cfg.init_checkpoint and not (os.path.exists(cfg.init_checkpoint)
                                    or os.path.exists(cfg.init_checkpoint + ".index")):
        raise SystemExit(f"--init_checkpoint={cfg.init_checkpoint}: no such file or folder.")
    if cfg.init_checkpoint.endswith(".keras"):
        try:
            check_keras_file(cfg.init_checkpoint)
        except ValueError as e:
            raise SystemExit(f"--init_checkpoint: {e}") from None
    if cfg.validation_data_dir and not os.path.isdir(cfg.validation_data_dir):
        raise SystemExit(f"--validation_data_dir={cfg.validation_data_dir}: no such folder.")
    recipe.check_checkpoint()
    check_output_folder(cfg.output_dir, marks=(os.path.join("checkpoints", "run_config.json"),))


def load_data(cfg, recipe, validation_recipe=None):
    """-> (tokenizer, task, (x, y, sample_weight) of training, the
    validation task or None): every split read, encoded and checked (bad
    rows name file and line; an empty split is named here, not found by
    `predict` after an epoch). `recipe`: the family's `FinetuneRecipe`;
    `validation_recipe`: the same on `--validation_data_dir`, whose first
    dev split is read too."""
    try:  # a vocabulary that is not one: named by its flag
        tokenizer = recipe.tokenizer()
    except (ValueError, UnicodeDecodeError) as e:
        raise SystemExit(f"--vocab_file={cfg.vocab_file}: {e}") from None
    with bad_input(f"--data_dir={cfg.data_dir}" if cfg.data_dir else "the data files", cfg.task):
        task = recipe.make_task(tokenizer)
        x, y, sample_weight = _take(task.train_arrays(), cfg.max_train_examples)
        for split in [*task.eval_splits, *getattr(task, "test_splits", ())]:
            task.prepare(split)  # dev's errors show before training, not after an epoch
    validation = None
    if validation_recipe is not None:
        with bad_input(f"--validation_data_dir={cfg.validation_data_dir}", cfg.task):
            validation = validation_recipe.make_task(tokenizer)
            if not validation.eval_splits:
                raise SystemExit(f"--validation_data_dir={cfg.validation_data_dir} holds no "
                                 f"dev split of --task={cfg.task} (its official file layout).")
            validation.prepare(validation.eval_splits[0])
    return tokenizer, task, (x, y, sample_weight), validation


@contextlib.contextmanager
def bad_input(where, task):
    """Bad input files read inside: `SystemExit` naming the file and line
    (`where`: the flag of the folder read), no traceback."""
    try:
        yield
    except BadRowError as e:  # the hint names this command's flag, not the reader's argument
        raise SystemExit(f"Bad input: {e.with_flag('--skip_bad_input')}") from None
    except ValueError as e:
        raise SystemExit(f"Bad input: {e}") from None
    except (FileNotFoundError, IsADirectoryError) as e:  # a split's file missing
        raise SystemExit(f"Bad input: {where} lacks {e.filename}, which --task={task} "
                         "reads (the task's official file layout).") from None


def check_positions(max_seq_length, backbone, source):
    """`SystemExit` when `max_seq_length` (`--max_seq_length`) exceeds the
    positions the backbone has (BERT's max_position_embeddings, GPT's
    n_positions); `source` says where the backbone came from."""
    config = getattr(backbone, "bert_config", None) or getattr(backbone, "gpt_config", None)
    try:
        check_fits_positions(max_seq_length, config, "--max_seq_length", source=source)
    except ValueError as e:
        raise SystemExit(str(e)) from None


def _take(arrays, n):
    # Sample weights are None for most tasks: kept as they are.
    return keras.tree.map_structure(lambda a: a if a is None else a[:n], arrays) if n else arrays
