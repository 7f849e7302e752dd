"""Command line: text files -> XLNet pretraining TFRecords + manifest.json.

    python -m tf_records.create_xlnet_data \
        --input_file='corpus/*.txt' --spm_model_file=spiece.model --output_dir=data/ \
        --batch_size=32 --seq_len=128 --reuse_len=64 --num_predict=21

XLNet's pretraining data (the original `data_utils.py`): one sentence per
line, blank lines between documents, tokenized with XLNet's SentencePiece
model (learn one with `python -m training.learn_vocab --model=xlnet`);
B streams cut into records of `reuse_len` tokens + A <sep> B <sep> <cls>
with span masking. XLNet-Large used --seq_len=512 --reuse_len=256
--num_predict=85 --bi_data. Train on them with the same batch size:
`python -m training.pretrain --model=xlnet --input=data/`; read them with
`tf_records.xlnet.reader.xlnet_pretraining_dataset`.
"""

import functools

from absl import flags

from tf_records.command_line import console
from tf_records.command_line.progress import Reporter

FLAGS = flags.FLAGS


def define_flags(flag_values=FLAGS):
    """The command's flags, on `flag_values` (a fresh `flags.FlagValues()`
    runs the command in-process)."""
    def define(kind, *args, **kwargs):
        kind(*args, flag_values=flag_values, **kwargs)

    define(flags.DEFINE_list, "input_file", None, "Text files or globs (plain or .gz).",
           required=True)
    define(flags.DEFINE_string, "spm_model_file", None,
           "XLNet's SentencePiece model (spiece.model).", required=True)
    define(flags.DEFINE_bool, "do_lower_case", False,
           "Lowercase the text (the original's --uncased).")
    define(flags.DEFINE_string, "output_dir", None, "Folder for shards and manifest.json.",
           required=True)
    define(flags.DEFINE_bool, "overwrite", False,
           "Replace records of another kind or settings in --output_dir (never other files).")
    define(flags.DEFINE_integer, "batch_size", 32,
           "Streams (the original's bsz_per_host); the training batch.")
    define(flags.DEFINE_integer, "seq_len", 128, "Tokens per record (XLNet-Large: 512).")
    define(flags.DEFINE_integer, "reuse_len", 64, "Tokens the next record follows on from: the "
           "memory (XLNet-Large: 256).")
    define(flags.DEFINE_integer, "num_predict", 21, "Tokens to predict per record, about "
           "seq_len / 6 (XLNet-Large: 85).")
    define(flags.DEFINE_integer, "mask_alpha", 6,
           "Context tokens per span of mask_beta predicted ones.")
    define(flags.DEFINE_integer, "mask_beta", 1, "Predicted tokens per mask_alpha of context.")
    define(flags.DEFINE_bool, "bi_data", False, "Half of every replica's rows read backwards "
           "(XLNet-Large: True).")
    define(flags.DEFINE_integer, "num_cores", 1, "Replicas the batch is split between (the "
           "original's num_core_per_host); matters with --bi_data.")
    define(flags.DEFINE_bool, "whole_word_spans", False, "Spans of n whole words (the original's "
           "code masks n pieces from a word start).")
    define(flags.DEFINE_integer, "random_seed", 12345, "Seed of A/B sampling and masking.")
    define(flags.DEFINE_integer, "batches_per_shard", 1000, "Consecutive batches per shard file.")


def main(argv, progress=None):
    del argv
    run(FLAGS, progress)


def run(values, progress=None):
    """The command on parsed flags `values`: flags, files and the model
    checked before the output folder is touched; `SystemExit` naming what
    is wrong. `progress`: None or a reporter of the tokenizing's and
    writing's progress lines (`cli` passes `tf_records.command_line.progress.Reporter()`)."""
    # lazy: TensorFlow loads only after the console starts (tf_records/command_line/console.py)
    from tf_records.xlnet import command

    command.run(values, progress)


def cli():
    """`python -m tf_records.create_xlnet_data`: `main` on a quiet console."""
    define_flags()
    console.run(functools.partial(main, progress=Reporter()), __name__, swapped=True)


if __name__ == "__main__":
    cli()
