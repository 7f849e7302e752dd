"""The steps of BERT's pretraining recipe (`training.bert.recipe`) that run
TensorFlow and Keras: the WordPiece vocabulary, the records, the pretrainer
of the chosen ablation, its batches, the held-out scores and the export."""

import dataclasses
import os
import time

from keras_bert_impl import BertBackbone
from keras_bert_impl import BertCausalLMPretrainer
from keras_bert_impl import BertConfig
from keras_bert_impl import BertMaskedLMPretrainer
from keras_bert_impl import BertPretrainer
from keras_bert_impl import preset
from keras_bert_impl.bert.bert_config import PRESETS
from keras_bert_impl.bert.bert_serving import export_saved_model
from keras_bert_impl.bert.bert_tokenizer import BertTokenizer
from keras_bert_impl.bert.wordpiece import load_vocab
from keras_bert_impl.bert.wordpiece_learner import count_words
from keras_bert_impl.bert.wordpiece_learner import learn_from_counts
from keras_bert_impl.bert.wordpiece_learner import reserved_tokens
from keras_bert_impl.bert.wordpiece_learner import write_vocab
from tf_records.bert.reader import pretraining_dataset
from tf_records.bert.reader import to_left_to_right
from tf_records.bert.writer import WriterConfig
from tf_records.bert.writer import write_pretraining_data
from tf_records.command_line.progress import Reporter
from tf_records.documents import read_documents
from tf_records.input_files import line_bytes
from tf_records.input_files import text_meter
from tf_records.plain import plain
from training.pretraining.common import say
from training.pretraining.continued import load_init_weights
from training.pretraining.continued import save_like_init
from training.pretraining.default_corpus import split_long_lines
from training.pretraining.evaluation import evaluate
from training.pretraining.evaluation import fill_mask_examples
from training.pretraining.evaluation import next_token_report
from training.pretraining.recipe import config_from_flags

# --ablation -> the pretrainer of its objective.
PRETRAINERS = {"": BertPretrainer, "no_nsp": BertMaskedLMPretrainer,
               "ltr": BertCausalLMPretrainer}


def check_preset(name):
    """`SystemExit` unless `name` is a BERT size of `PRESETS`."""
    if name not in PRESETS:
        raise SystemExit(f"--preset={name!r} is not a BERT size: {', '.join(PRESETS)}.")


def read_config(config_file, preset_name):
    """The `BertConfig` of `--config_file`, else of `--preset`; `SystemExit`
    naming the flag."""
    return config_from_flags(config_file, BertConfig.from_json_file, preset_name, preset)


def learned_vocab(vocab_file, train_files, vocab_size, do_lower_case):
    """`vocab_file`, a WordPiece vocabulary learned from `train_files` unless
    it is there already."""
    if not os.path.exists(vocab_file):
        start = time.time()
        lines = (line for document in read_documents(train_files) for line in document)
        tokens = learn_wordpiece(lines, train_files, vocab_size, do_lower_case)
        write_vocab(tokens, vocab_file)
        say(f"Learned a {len(tokens)}-token WordPiece vocabulary "
            f"({time.time() - start:.0f} s) -> {vocab_file}")
    return vocab_file


def split_default_corpus(files, vocab_file, do_lower_case, max_seq_length):
    """Splits the default corpus's lines that would run past an instance of
    `max_seq_length` tokens at word boundaries, saying how many."""
    tokenizer = BertTokenizer(vocab_file, do_lower_case=do_lower_case)
    split = split_long_lines(files, lambda text: len(tokenizer.tokenize(text)),
                             max_seq_length - 3)  # [CLS] A [SEP] B [SEP]
    if split:
        say(f"Default corpus: {split} lines longer than {max_seq_length - 3} "
            "tokens split at word boundaries")


def instance_writer(vocab_file, instance_config, dupe_factor, seed, do_lower_case, workers):
    """`write(side, files, folder)`: the NSP + MLM instances of `files`
    (`write_pretraining_data`, `dupe_factor` passes for training, the
    held-out side seeded `seed + 1`) as records in `folder`, with progress
    lines; -> their manifest."""

    def write(side, files, folder):
        start = time.time()
        manifest = write_pretraining_data(
            files, vocab_file, folder, instance_config,
            WriterConfig(dupe_factor=dupe_factor if side == "train" else 1,
                         random_seed=seed + (side == "heldout"),
                         do_lower_case=do_lower_case, num_workers=workers,
                         documents_per_block=500),
            progress=writing_progress(f"Writing {side} instances", files))
        records = sum(s["records"] for s in manifest["shards"])
        say(f"Wrote {records} {side} instances in {len(manifest['shards'])} shards "
            f"({time.time() - start:.0f} s) -> {folder}")
        return manifest

    return write


def vocab_file_size(vocab_file):
    """The ids of a WordPiece `vocab.txt`."""
    return max(load_vocab(vocab_file).values()) + 1


def build_model(config, vocab_size, ablation, init, mixed_precision):
    """-> (the pretrainer of `ablation`, its `BertConfig`): `config` with the
    records' `vocab_size`, or the weights of `init` (an `InitCheckpoint`)
    when it continues one."""
    if init and vocab_size > config.vocab_size:
        raise SystemExit(f"The records' vocabulary has {vocab_size} ids; "
                         f"--init_checkpoint={init.typed} embeds {config.vocab_size}.")
    if not init:
        config = dataclasses.replace(config, vocab_size=vocab_size)
    dtype = "mixed_bfloat16" if mixed_precision else None
    backbone = BertBackbone.from_bert_config(config, causal=ablation == "ltr", dtype=dtype)
    pretrainer = PRETRAINERS[ablation](backbone)
    if init:
        load_init_weights(init, pretrainer)
    return pretrainer, config


def dataset(source, batch_size, ablation, **reading):
    """`pretraining_dataset`'s batches (`reading`: its options), turned into
    the targets of `ablation`."""
    ds = pretraining_dataset(source, batch_size, **reading)
    if ablation == "no_nsp":
        ds = ds.map(plain(lambda x, y, w: (x, {"masked_lm": y["masked_lm"]},
                                           {"masked_lm": w["masked_lm"]})))
    elif ablation == "ltr":
        ds = ds.map(plain(to_left_to_right))
    return ds


def heldout_scores(model, heldout, train, vocab_size, ablation):
    """The held-out scores against the frequency baseline of `train`: next
    token for "ltr", masked LM (and NSP) otherwise."""
    report = next_token_report if ablation == "ltr" else evaluate
    return report(model, heldout, train, vocab_size)


def say_fill_mask_examples(model, vocab_file, text, count, do_lower_case, max_seq_length, seed):
    """Says `count` sentences of `text` with a word masked, and the model's guesses."""
    for sentence, truth, guesses in fill_mask_examples(
            model, vocab_file, text, count, do_lower_case, max_seq_length, seed):
        say(f"  {sentence}\n    [MASK] = {truth!r}; model guesses {guesses}")


def export(model, vocab_file, export_dir, init, saved_model, do_lower_case, max_seq_length):
    """The SavedModel (`saved_model`), the checkpoint's own layout (`init`)
    and `pretrainer.keras` in `export_dir`; -> the line that says where."""
    os.makedirs(export_dir, exist_ok=True)
    saved = ""
    if saved_model:
        path = os.path.join(export_dir, "saved_model")
        export_saved_model(model, path, vocab_file, do_lower_case, max_seq_length)
        signatures = ("serving_default, serving_text, serving_text_pair" if vocab_file
                      else "serving_default")
        saved = f"SavedModel (signatures {signatures}) -> {path}; "
    if init:  # also in the layout it came in
        saved += save_like_init(init, model, vocab_file, export_dir)
    keras_file = os.path.join(export_dir, "pretrainer.keras")
    model.save(keras_file)
    return f"{saved}Keras model -> {keras_file}"


def learn_wordpiece(lines, files, vocab_size, do_lower_case, num_unused=99):
    """`learn_vocab` on text `lines` read from `files`, with progress lines:
    the words counted (MB of the files read, rate, ETA), then each round of
    the WordPiece threshold search (its ETA an upper bound: the search may
    end before its last possible round). `num_unused`: `[unusedN]` slots."""
    reading = text_meter("Counting words", files)
    counts = count_words(reading.iterate(lines, size=line_bytes), do_lower_case)
    reading.finish(words=len(counts))
    if not counts:
        raise SystemExit(f"No words in {', '.join(files)}: cannot learn a vocabulary.")
    search = Reporter().meter("Learning WordPiece vocabulary", unit="rounds")

    def on_round(number, most, threshold, size):
        search.total = most
        search.update(number, threshold=threshold, tokens=size)

    tokens = learn_from_counts(counts, vocab_size, reserved_tokens(num_unused), on_round=on_round)
    search.finish(tokens=len(tokens))
    return tokens


def writing_progress(what, files, every_seconds=None):
    """`write_pretraining_data`'s `progress`: documents and instances written,
    and the share of the text read (its rate and ETA)."""
    meter = text_meter(what, files, every_seconds=every_seconds)

    def report(documents, instances, text_bytes):
        meter.update(text_bytes, documents=documents, instances=instances)

    return report
