"""The steps of XLNet's pretraining recipe (`training.xlnet.recipe`) that run
TensorFlow and Keras: the SentencePiece model, XLNet's records, the
pretrainer with its memory, the streams' batches, the held-out
permutation-LM scores, a few words filled in, and the export."""

import dataclasses
import os
import time

import tensorflow as tf

from keras_bert_impl.base.json_files import copy_atomic
from keras_bert_impl.base.json_files import write_json_atomic
from keras_bert_impl.xlnet import XLNET_PRESETS
from keras_bert_impl.xlnet import XLNetBackbone
from keras_bert_impl.xlnet import XLNetConfig
from keras_bert_impl.xlnet import XLNetPretrainer
from keras_bert_impl.xlnet import load_xlnet_pretrainer
from keras_bert_impl.xlnet import save_xlnet_checkpoint
from keras_bert_impl.xlnet.spm_learner import learn_sentencepiece
from keras_bert_impl.xlnet.xlnet_checkpoint import read_xlnet_config
from keras_bert_impl.xlnet.xlnet_serving import export_xlnet_pretrainer_saved_model
from keras_bert_impl.xlnet.xlnet_tokenizer import XLNetTokenizer
from tf_records.command_line.progress import Reporter
from tf_records.xlnet.reader import target_counts
from tf_records.xlnet.reader import xlnet_pretraining_dataset
from tf_records.xlnet.writer import tokenized_documents
from tf_records.xlnet.writer import write_xlnet_records
from training.pretraining.common import say
from training.pretraining.evaluation import fill_in_examples
from training.pretraining.evaluation import plm_report

SPM_FILE = "spiece.model"
TINY = "xlnet_tiny"  # a preset of this recipe's (`tiny_config`), beside `XLNET_PRESETS`


def tiny_config():
    """`xlnet_tiny`: BERT-Tiny's shape (2 layers x 128, 2 heads of 64, FFN
    512, GELU) as an XLNet, with the release's untied biases.

    Dropout 0: on the main job's CPU budget (1000 steps) it learns faster
    without (held-out permutation-LM perplexity 167 vs 245 with 0.1 after
    600 steps of 32 x 64 tokens, measured), and resumed runs are then
    bit-exact.
    """
    return XLNetConfig(d_model=128, n_layer=2, n_head=2, d_head=64, d_inner=512,
                       ff_activation="gelu", untie_r=True, dropout=0.0)


def check_preset(typed, name, same_size):
    """`SystemExit` unless `name` (`--preset=typed`, renamed by `same_size`)
    is an XLNet size."""
    if name not in (*XLNET_PRESETS, TINY):
        raise SystemExit(f"--preset={typed!r} is not an XLNet size: "
                         f"{', '.join(sorted((*XLNET_PRESETS, TINY)))} "
                         f"(or {', '.join(same_size)}).")


def read_config(config_file, preset_name):
    """The `XLNetConfig` of `--config_file` (a Hugging Face config.json), else
    of the preset; `SystemExit` naming the flag."""
    try:
        if config_file:
            return XLNetConfig.from_json_file(config_file)
        return tiny_config() if preset_name == TINY else XLNET_PRESETS[preset_name]
    except (ValueError, OSError) as e:
        raise SystemExit(f"--config_file={config_file}: {e}") from None


def read_hf_config(path):
    """The `XLNetConfig` of a Hugging Face xlnet folder."""
    return read_xlnet_config(path)


def tokenizer(vocab_file, do_lower_case):
    """The `XLNetTokenizer` of `vocab_file` (spiece.model)."""
    return XLNetTokenizer(vocab_file, do_lower_case=do_lower_case)


def check_vocab_file(vocab_file, do_lower_case):
    """`SystemExit` naming what is wrong with a typed --vocab_file."""
    try:
        tokenizer(vocab_file, do_lower_case)
    except ValueError as e:
        raise SystemExit(f"--vocab_file: {e}") from None


def learned_vocab(folder, train_files, vocab_size, do_lower_case):
    """`folder`'s `spiece.model`, a SentencePiece model of `vocab_size`
    pieces learned from `train_files` unless it is there already."""
    path = os.path.join(folder, SPM_FILE)
    if os.path.exists(path):
        return path
    start = time.time()
    try:
        path = learn_sentencepiece(train_files, folder, vocab_size,
                                   do_lower_case=do_lower_case, progress=Reporter())
    except ValueError as e:
        raise SystemExit(f"{e} (a smaller --vocab_size, or more text)") from None
    say(f"Learned a {vocab_size}-piece SentencePiece model "
        f"({'uncased' if do_lower_case else 'cased'}, {time.time() - start:.0f} s) "
        f"-> {path}")
    return path


def record_writer(schema, spm, vocab_file, dupe_factor, seed):
    """`write(side, files, folder)`: XLNet's records of `schema` from `files`
    (tokenized by `spm`; the training text `dupe_factor` passes over, the
    held-out text in fewer streams when short) in `folder`, with progress
    lines; -> their manifest, or None when the held-out text cannot fill one
    record."""

    def write(side, files, folder):
        start = time.time()
        if side == "train":
            passes = max(1, dupe_factor)
            documents = _every_pass(files, spm, passes)
            side_schema = schema
        else:
            passes = 1
            documents = list(tokenized_documents(files, spm, Reporter(side)))
            side_schema = _heldout_schema(schema, documents)
            if side_schema is None:
                say(f"The held-out text is too short for one record of {schema.seq_len} "
                    "tokens: no held-out evaluation.")
                return None
        try:
            manifest = write_xlnet_records(
                documents, folder, side_schema, spm.vocab_size, spm.is_start_piece,
                [vocab_file], eod_id=spm.eod_id, random_seed=seed + (side == "heldout"),
                progress=Reporter(side))
        except ValueError as e:
            raise SystemExit(f"XLNet records for {folder}: {e}") from None
        say(f"Wrote {manifest['batches']} {side} batches of {side_schema.batch_size} streams "
            f"x {schema.seq_len} tokens (reuse {schema.reuse_len}, {schema.num_predict} "
            f"predicted; {manifest['documents']} documents, {manifest['tokens']} tokens"
            f"{f', {passes} passes' if passes > 1 else ''}; {time.time() - start:.0f} s) "
            f"-> {folder}")
        return manifest

    return write


def build_model(config, vocab_size, init, checkpoint_vocab_size, streams, mixed_precision):
    """-> (the `XLNetPretrainer` with memory rows for `streams`, its
    `XLNetConfig`): of `config`, or the checkpoint `init` (an
    `InitCheckpoint`, embedding `checkpoint_vocab_size` ids) continued with
    the records' reuse_len and memory. `ValueError` under a TPU strategy, or
    for bi_data under several replicas."""
    strategy = tf.distribute.get_strategy()
    if isinstance(strategy, tf.distribute.TPUStrategy):
        raise ValueError(f"XLNet's pretraining does not run under {type(strategy).__name__}: "
                         "one device, --strategy=mirrored or --strategy=multi_worker.")
    if config.bi_data and strategy.num_replicas_in_sync > 1:
        raise ValueError("bi_data=True needs one replica: the records put the forward and "
                         "backward rows of one replica's batch side by side.")
    dtype = "mixed_bfloat16" if mixed_precision else None
    if init:
        if vocab_size > checkpoint_vocab_size:
            raise SystemExit(f"The records' vocabulary has {vocab_size} ids; --init_checkpoint="
                             f"{init.typed} embeds {checkpoint_vocab_size}.")
        config = config.replace(vocab_size=checkpoint_vocab_size)
        pretrainer = load_xlnet_pretrainer(
            init.path, max_batch_size=streams, dtype=dtype,
            reuse_len=config.reuse_len, mem_len=config.mem_len)
        say(f"From {init.typed}: XLNet loaded (reuse_len {config.reuse_len}, mem_len "
            f"{config.mem_len} from the records)")
        return pretrainer, config
    backbone = XLNetBackbone.from_config_object(config, two_stream=True, dtype=dtype)
    # Memory rows for the whole batch in every replica (a replica uses
    # its first B / R): the same shape inside and outside a strategy,
    # so the trained weights copy into a local model for evaluation.
    return XLNetPretrainer(backbone, max_batch_size=streams), config


def dataset(source, streams, batch_size, parts, start_batch, **reading):
    """`xlnet_pretraining_dataset`'s batches of `streams` rows (`reading`: its
    options), each split in order into `parts` batches of `batch_size`
    (`start_batch` counts those); `SystemExit` for records it cannot read."""
    try:
        ds = xlnet_pretraining_dataset(source, streams, start_batch=start_batch // parts,
                                       **reading)
    except ValueError as e:
        raise SystemExit(str(e)) from None
    if parts > 1:
        ds = ds.rebatch(batch_size).skip(start_batch % parts)
    return ds


def heldout_scores(model, heldout, train_source, vocab_size, schema):
    """Held-out permutation-LM accuracy and perplexity against the unigram
    model of `train_source`'s targets."""
    return plm_report(model, heldout, target_counts(train_source, vocab_size, schema))


def say_fill_in_examples(model, vocab_file, do_lower_case, text, count, seq_len, seed):
    """Says `count` sentences of `text` with a word masked, and the model's guess."""
    spm = tokenizer(vocab_file, do_lower_case)
    for masked, truth, guess in fill_in_examples(model, spm, text, count, seq_len, seed):
        say(f"  {masked!r}: <mask> = {guess!r} ({truth!r})")


def export(model, vocab_file, export_dir, saved_model, do_lower_case, seq_len):
    """The Hugging Face xlnet folder, `pretrainer.keras` and the SavedModel
    (`saved_model`) in `export_dir`; -> the line that says where."""
    os.makedirs(export_dir, exist_ok=True)
    save_xlnet_checkpoint(model, export_dir)  # config.json + model.safetensors
    if vocab_file:  # beside the weights, where training.finetune --model=xlnet looks
        copy_atomic(vocab_file, os.path.join(export_dir, SPM_FILE))
        write_json_atomic(os.path.join(export_dir, "tokenizer_config.json"), {
            "tokenizer_class": "XLNetTokenizer", "do_lower_case": do_lower_case})
    path = os.path.join(export_dir, "pretrainer.keras")
    tmp = os.path.join(export_dir, ".tmp-pretrainer.keras")
    model.save(tmp)
    os.replace(tmp, path)
    if not saved_model:
        return f"Hugging Face xlnet folder {export_dir}; Keras model -> {path}"
    saved = os.path.join(export_dir, "saved_model")
    signatures = export_xlnet_pretrainer_saved_model(
        model, saved, vocab_file, do_lower_case, seq_len)
    return (f"Hugging Face xlnet folder {export_dir}; SavedModel (signatures "
            f"{', '.join(signatures)}) -> {saved}; Keras model -> {path}")


def _every_pass(files, spm, passes):
    """The tokenized documents of `files`, `passes` times over, each pass
    with its own progress lines."""
    for number in range(1, passes + 1):
        label = f"train, pass {number}/{passes}" if passes > 1 else "train"
        yield from tokenized_documents(files, spm, Reporter(label))


def _heldout_schema(schema, documents):
    """The held-out records' schema: fewer streams when the text is short
    (each row gets at least 4 records' worth of tokens), or None if it
    cannot fill one record. The pretrainer reads any batch up to its own."""
    tokens = sum(len(sentence) for document in documents for sentence in document)
    tokens += len(documents)  # one <eod> each
    step = 2 if schema.bi_data else 1
    streams = min(schema.batch_size, tokens // (4 * schema.seq_len)) // step * step
    if streams < step:
        if tokens < 2 * schema.seq_len * step:
            return None
        streams = step
    return dataclasses.replace(schema, batch_size=streams, num_cores=1)
