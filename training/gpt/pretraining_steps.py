"""The steps of GPT's pretraining recipe (`training.gpt.recipe`) that run
TensorFlow and Keras: the BPE vocabulary, the LM windows' records, the
causal LM, its batches, the held-out scores, greedy continuations and the
export."""

import os
import time

import numpy as np

from keras_bert_impl.base.json_files import copy_atomic
from keras_bert_impl.gpt import GPT_PRESETS
from keras_bert_impl.gpt import GptBackbone
from keras_bert_impl.gpt import GptCausalLM
from keras_bert_impl.gpt import GptConfig
from keras_bert_impl.gpt import gpt_preset
from keras_bert_impl.gpt import load_gpt_checkpoint
from keras_bert_impl.gpt.bpe_learner import bpe_from_counts
from keras_bert_impl.gpt.bpe_learner import count_words
from keras_bert_impl.gpt.bpe_learner import write_bpe_files
from keras_bert_impl.gpt.gpt_checkpoint import read_gpt_config
from keras_bert_impl.gpt.gpt_checkpoint import save_gpt_checkpoint
from keras_bert_impl.gpt.gpt_serving import export_gpt_saved_model
from keras_bert_impl.gpt.gpt_tokenizer import GptTokenizer
from tf_records.command_line.progress import Reporter
from tf_records.documents import read_documents
from tf_records.gpt.reader import lm_dataset
from tf_records.gpt.writer import write_lm_data
from tf_records.input_files import line_bytes
from tf_records.input_files import text_meter
from training.pretraining.common import say
from training.pretraining.evaluation import greedy_continuations
from training.pretraining.evaluation import next_token_report
from training.pretraining.recipe import config_from_flags

MERGES_FILE = "merges.txt"


def merges_beside(vocab_file):
    """The `merges.txt` read with `vocab_file` (`vocab.json`): in its folder."""
    return os.path.join(os.path.dirname(os.path.abspath(vocab_file)), MERGES_FILE)


def check_preset(typed, name):
    """`SystemExit` unless `name` (`--preset=typed`, renamed) is a GPT size."""
    if name not in GPT_PRESETS:
        raise SystemExit(f"--preset={typed!r} is not a GPT size: "
                         f"{', '.join(sorted(GPT_PRESETS))} (or tiny, mini).")


def check_merges_beside(vocab_file):
    """`SystemExit` unless a typed --vocab_file has `merges.txt` beside it."""
    if not os.path.exists(merges_beside(vocab_file)):
        raise SystemExit(f"--vocab_file={vocab_file}: GPT reads vocab.json with "
                         f"{MERGES_FILE} beside it; {merges_beside(vocab_file)} is missing.")


def read_config(config_file, preset_name):
    """The `GptConfig` of `--config_file`, else of the preset; `SystemExit`
    naming the flag."""
    return config_from_flags(config_file, GptConfig.from_json_file, preset_name, gpt_preset)


def read_hf_config(path):
    """The `GptConfig` of a Hugging Face openai-gpt folder."""
    return read_gpt_config(path)


def tokenizer(vocab_file):
    """The `GptTokenizer` of `vocab_file` and the `merges.txt` beside it."""
    return GptTokenizer(vocab_file, merges_beside(vocab_file))


def learned_vocab(folder, train_files, vocab_size):
    """`folder`'s `vocab.json` (and `merges.txt`), a BPE vocabulary learned
    from `train_files` unless it is there already."""
    vocab_file = os.path.join(folder, "vocab.json")
    if not os.path.exists(vocab_file):
        start = time.time()
        lines = (line for document in read_documents(train_files) for line in document)
        vocab, merges = learn_gpt_bpe(lines, train_files, vocab_size)
        write_bpe_files(vocab, merges, folder)
        say(f"Learned a {len(vocab)}-token BPE vocabulary ({len(merges)} merges, "
            f"{time.time() - start:.0f} s) -> {folder}")
    return vocab_file


def window_writer(vocab_file, max_seq_length, seed):
    """`write(side, files, folder)`: the contiguous windows of
    `max_seq_length` + 1 tokens of `files` as records in `folder`, with
    progress lines; -> their manifest."""
    lm_tokenizer = tokenizer(vocab_file)

    def write(side, files, folder):
        start = time.time()
        manifest = write_lm_data(
            files, lm_tokenizer, folder, max_seq_length, [vocab_file, merges_beside(vocab_file)],
            num_shards=4, random_seed=seed + (side == "heldout"), progress=Reporter(side))
        records = sum(s["records"] for s in manifest["shards"])
        say(f"Wrote {records} {side} windows of {max_seq_length + 1} tokens "
            f"({time.time() - start:.0f} s) -> {folder}")
        return manifest

    return write


def build_model(config, vocab_size, init, mixed_precision):
    """-> (the `GptCausalLM`, its `GptConfig`): `config` with the records'
    `vocab_size`, or the checkpoint `init` (an `InitCheckpoint`) continued."""
    dtype = "mixed_bfloat16" if mixed_precision else None
    if init:
        config = init.config
        if vocab_size > config.vocab_size:
            raise SystemExit(f"The records' vocabulary has {vocab_size} ids; "
                             f"--init_checkpoint={init.typed} embeds {config.vocab_size}.")
        backbone = load_gpt_checkpoint(init.path, dtype=dtype)
        say(f"From {init.typed}: GPT loaded (its LM head is the token table)")
        return GptCausalLM(backbone), config
    config = config.replace(vocab_size=vocab_size)
    return GptCausalLM(GptBackbone.from_config_object(config, dtype=dtype)), config


def dataset(source, batch_size, **reading):
    """`lm_dataset`'s batches (`reading`: its options)."""
    return lm_dataset(source, batch_size, **reading)


def heldout_scores(model, heldout, train, vocab_size):
    """Held-out next-token accuracy and perplexity against the unigram model
    of `train`."""
    return next_token_report(model, heldout, train, vocab_size)


def say_continuations(model, vocab_file, text, count, max_seq_length, seed):
    """Says `count` greedy continuations of 12 tokens, each of the first 8
    words of a line of `text` with 12 words or more."""
    lm_tokenizer = tokenizer(vocab_file)
    lines = [line for doc in read_documents(text) for line in doc if len(line.split()) >= 12]
    rng = np.random.default_rng(seed)
    prompts = [lm_tokenizer.encode(" ".join(str(line).split()[:8]))
               for line in rng.permutation(lines)[:count]]
    for prompt, more in zip(prompts, greedy_continuations(model, prompts, 12, max_seq_length)):
        say(f"  {lm_tokenizer.decode(prompt)!r} -> {lm_tokenizer.decode(more)!r}")


def export(model, vocab_file, export_dir, init, saved_model, max_seq_length):
    """`causal_lm.keras` with its vocabulary, the Hugging Face folder
    (`init`) and the SavedModel (`saved_model`) in `export_dir`; -> the line
    that says where."""
    os.makedirs(export_dir, exist_ok=True)
    path = os.path.join(export_dir, "causal_lm.keras")
    model.save(path)
    if vocab_file:  # beside the model, where `training.finetune --model=gpt` looks
        copy_atomic(vocab_file, os.path.join(export_dir, "vocab.json"))
        copy_atomic(merges_beside(vocab_file), os.path.join(export_dir, MERGES_FILE))
    if init:  # also in the layout it came in
        hf = os.path.join(export_dir, "hf")
        save_gpt_checkpoint(model.backbone, hf, [vocab_file, merges_beside(vocab_file)])
        path = f"{path}; Hugging Face folder -> {hf}"
    if not saved_model:
        return f"Keras model -> {path}"
    saved = os.path.join(export_dir, "saved_model")
    signatures = export_gpt_saved_model(
        model, saved, vocab_file, merges_beside(vocab_file) if vocab_file else None,
        max_seq_length)
    return f"SavedModel (signatures {', '.join(signatures)}) -> {saved}; Keras model -> {path}"


def learn_gpt_bpe(lines, files, vocab_size):
    """`bpe_from_counts` on text `lines` read from `files`, with progress
    lines: the words counted (MB of the files read, rate, ETA), then the
    merges learned (their ETA errs long: the first merges touch the most
    words, and learning stops early when every pair is rare).

    Returns:
        `(vocab, merges)`, as `learn_bpe`.
    """
    reading = text_meter("Counting words", files)
    counts = count_words(reading.iterate(lines, size=line_bytes))
    reading.finish(words=len(counts))
    merging = Reporter().meter("Learning BPE merges", unit="merges")

    def on_merge(number, most, count):
        merging.total = most
        merging.update(number, frequency=count)

    vocab, merges = bpe_from_counts(counts, vocab_size=vocab_size, on_merge=on_merge)
    merging.finish(tokens=len(vocab))
    return vocab, merges
