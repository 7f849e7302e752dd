"""The steps of ELMo's pretraining recipe (`training.elmo.recipe`) that run
TensorFlow and Keras: the word vocabulary, bilm-tf's streamed windows as
records, the biLM, its batches, the held-out perplexity and the export as
bilm-tf's files."""

import os
import time

import tensorflow as tf

from keras_bert_impl.base.json_files import copy_atomic
from keras_bert_impl.elmo import ELMO_PRESETS
from keras_bert_impl.elmo import ElmoBackbone
from keras_bert_impl.elmo import ElmoConfig
from keras_bert_impl.elmo import elmo_preset
from keras_bert_impl.elmo import save_elmo_checkpoint
from keras_bert_impl.elmo.elmo_language_model import ElmoLanguageModel
from keras_bert_impl.elmo.elmo_serving import export_elmo_saved_model
from keras_bert_impl.elmo.elmo_vocab import load_elmo_vocab
from keras_bert_impl.elmo.elmo_vocab import write_elmo_vocab
from tf_records.command_line.progress import Reporter
from tf_records.elmo.reader import elmo_dataset
from tf_records.elmo.reader import target_counts
from tf_records.elmo.writer import learn_vocab_from_text
from tf_records.elmo.writer import write_elmo_data
from training.pretraining.common import say
from training.pretraining.evaluation import bilm_report
from training.pretraining.recipe import config_from_flags

# Larger vocabularies train with bilm-tf's sampled softmax.
FULL_SOFTMAX_MAX_VOCAB = 20_000
N_NEGATIVE_SAMPLES = 8192  # bilm-tf's n_negative_samples_batch
VOCAB_FILE = "vocab.txt"


def check_preset(typed, name, same_size):
    """`SystemExit` unless `name` (`--preset=typed`, renamed by `same_size`)
    is an ELMo size."""
    if name not in ELMO_PRESETS:
        raise SystemExit(f"--preset={typed!r} is not an ELMo size: "
                         f"{', '.join(sorted(ELMO_PRESETS))} (or {', '.join(same_size)}).")


def check_vocab_file(vocab_file):
    """`SystemExit` naming what is wrong with a typed --vocab_file."""
    try:
        load_elmo_vocab(vocab_file)
    except ValueError as e:
        raise SystemExit(str(e)) from None


def model_config(config_file, preset_name, vocab_size):
    """The `ElmoConfig` of `--config_file` (bilm-tf's options.json), else of
    the preset, with `vocab_size` words; `SystemExit` naming the flag."""
    config = config_from_flags(config_file, ElmoConfig.from_options_file, preset_name,
                               elmo_preset)
    return config.replace(n_tokens_vocab=vocab_size)


def learned_vocab(folder, train_files, max_size):
    """`folder`'s `vocab.txt`, the words of `train_files` by frequency (at
    most `max_size`), unless it is there already."""
    vocab_file = os.path.join(folder, VOCAB_FILE)
    if not os.path.exists(vocab_file):
        start = time.time()
        tokens = learn_vocab_from_text(train_files, max_size=max_size, progress=Reporter())
        write_elmo_vocab(tokens, vocab_file)
        say(f"Learned a {len(tokens)}-word vocabulary ({time.time() - start:.0f} s) -> "
            f"{vocab_file}")
    return vocab_file


def stream_writer(vocab_file, streams, unroll_steps, seed):
    """`write(side, files, folder)`: bilm-tf's batches of `streams` x
    `unroll_steps` tokens of `files` as records in `folder` (the training
    sentences shuffled by `seed`), with progress lines; -> their manifest."""

    def write(side, files, folder):
        start = time.time()
        manifest = write_elmo_data(
            files, vocab_file, folder, streams, unroll_steps,
            shuffle_seed=seed if side == "train" else None, progress=Reporter(side))
        say(f"Wrote {manifest['batches']} {side} batches of {streams} streams x "
            f"{unroll_steps} tokens ({manifest['sentences']} sentences, "
            f"{manifest['targets']} targets, {manifest['unknown_tokens']} of "
            f"{manifest['tokens']} words outside the vocabulary; "
            f"{time.time() - start:.0f} s) -> {folder}")
        return manifest

    return write


def check_one_replica():
    """`ValueError` under a strategy of several replicas (or a TPU's)."""
    strategy = tf.distribute.get_strategy()
    if strategy.num_replicas_in_sync > 1 or isinstance(strategy, tf.distribute.TPUStrategy):
        raise ValueError(
            f"ELMo trains on one replica; this strategy has "
            f"{strategy.num_replicas_in_sync} ({type(strategy).__name__}). Each stream's "
            "LSTM states are kept in the model and are not split between replicas: use "
            "--strategy=cpu (or auto on a host with one GPU).")


def build_model(config, vocab_size, streams, mixed_precision):
    """The `ElmoLanguageModel` of `config` with the LSTM states of `streams` rows."""
    dtype = "mixed_bfloat16" if mixed_precision else None
    backbone = ElmoBackbone.from_config_object(config, max_batch_size=streams, dtype=dtype)
    negatives = 0 if vocab_size <= FULL_SOFTMAX_MAX_VOCAB else min(
        N_NEGATIVE_SAMPLES, vocab_size - 1)
    return ElmoLanguageModel(backbone, vocab_size, n_negative_samples_batch=negatives)


def dataset(source, batch_size, **reading):
    """`elmo_dataset`'s batches (`reading`: its options); `SystemExit` for
    records it cannot read."""
    try:
        return elmo_dataset(source, batch_size, **reading)
    except ValueError as e:
        raise SystemExit(str(e)) from None


def heldout_scores(model, heldout, train_source):
    """Held-out perplexity against the unigram model of `train_source`'s targets."""
    return bilm_report(model, heldout, target_counts(train_source, model.vocab_size))


def export(model, vocab_file, export_dir, saved_model):
    """bilm-tf's `options.json` + `lm_weights.hdf5`, `vocab.txt`,
    `language_model.keras` and the SavedModel (`saved_model`) in
    `export_dir`; -> the line that says where."""
    os.makedirs(export_dir, exist_ok=True)
    options = os.path.join(export_dir, "options.json")
    weights = os.path.join(export_dir, "lm_weights.hdf5")
    save_elmo_checkpoint(model.backbone, options, weights, n_tokens_vocab=model.vocab_size)
    if vocab_file:
        copy_atomic(vocab_file, os.path.join(export_dir, VOCAB_FILE))
    path = os.path.join(export_dir, "language_model.keras")
    model.save(path)
    if not saved_model:
        return f"bilm-tf files {options}, {weights}; Keras model -> {path}"
    saved = os.path.join(export_dir, "saved_model")
    signatures = export_elmo_saved_model(model.backbone, saved)
    return (f"bilm-tf files {options}, {weights}; SavedModel (signatures "
            f"{', '.join(signatures)}) -> {saved}; Keras model -> {path}")
