"""Learns a BERT WordPiece, a GPT byte-pair-encoding or an XLNet SentencePiece
vocabulary from text files.

    python -m training.learn_vocab --input='corpus/*.txt' --output=vocab.txt \
        --vocab_size=30522 --do_lower_case
    python -m training.learn_vocab --model=gpt --input='corpus/*.txt' \
        --output=gpt_vocab --vocab_size=40478
    python -m training.learn_vocab --model=xlnet --input='corpus/*.txt' \
        --output_dir=xlnet_vocab --vocab_size=32000

Input: plain or gzip text files; every line is text.

`--model=bert` (the default) writes `vocab.txt` with [PAD], [unused0..98],
[UNK], [CLS], [SEP], [MASK] first (ids 0..103, as the original release),
then single characters and WordPiece tokens.

`--model=gpt` writes `vocab.json` and `merges.txt` into the folder
`--output`, as openai-gpt's: characters, their "</w>" forms, merged
symbols, "<unk>"; lowercased, accents stripped (`--do_lower_case` and
`--num_unused` are BERT's only).

`--model=xlnet` writes `spiece.model` and `spiece.vocab` into the folder
`--output` (or `--output_dir`): a SentencePiece unigram model trained with
XLNet's flags, <unk> <s> </s> <cls> <sep> <pad> <mask> <eod> <eop> at ids
0..8 as the released model. Cased unless `--do_lower_case` is given
explicitly (XLNet's released model is cased); accents are stripped.

An existing output is replaced only with `--overwrite`, and only when it is
a vocabulary of this kind (a BERT `vocab.txt` with [PAD] first and the
special tokens; a folder holding only the two files of `--model`); anything
else is refused and left untouched. The output is a vocabulary, not a run:
no console log is kept beside it (what matters is on the console).

This file holds the command: its flags and the checks made before anything
is written; the learners are `training/vocab_learning.py`, imported once
the console has started.
"""

import os

from absl import app
from absl import flags

from tf_records.command_line import console
from tf_records.input_files import check_text_files
from tf_records.input_files import match_files
from tf_records.records_folder import RefusedFolder
from tf_records.records_folder import output_lock

FLAGS = flags.FLAGS


def define_flags(flag_values=FLAGS):
    """The command's flags, on `flag_values` (a fresh `flags.FlagValues()`
    runs the command in-process)."""
    def define(kind, *args, **kwargs):
        kind(*args, flag_values=flag_values, **kwargs)

    define(flags.DEFINE_enum, "model", "bert", ["bert", "gpt", "xlnet"],
           "Which tokenizer's vocabulary to learn.")
    define(flags.DEFINE_list, "input", None, "Text files or glob patterns (plain or .gz).",
           required=True)
    define(flags.DEFINE_string, "output", "vocab.txt",
           "Where to write the vocabulary (gpt, xlnet: a folder).")
    flags.DEFINE_alias("output_dir", "output", flag_values=flag_values)
    define(flags.DEFINE_integer, "vocab_size", 30522, "Largest vocabulary size.")
    define(flags.DEFINE_bool, "do_lower_case", True, "Lowercase and strip accents (uncased).")
    define(flags.DEFINE_integer, "num_unused", 99, "[unusedN] slots after [PAD].")
    define(flags.DEFINE_bool, "overwrite", False,
           "Replace a vocabulary of this kind already at --output.")


def input_files(patterns):
    try:
        return match_files(patterns, "--input")
    except ValueError as e:
        raise SystemExit(str(e)) from None


def main(argv):
    del argv
    run(FLAGS)


def run(values):
    """The command on parsed flags `values`; flags and files are checked
    before anything is written."""
    files = check_flags(values)
    # lazy: the learners import TensorFlow, which loads only after the console starts
    from training.vocab_learning import LEARNERS

    try:  # one learner at a time on one output: a second is refused
        lock = output_lock(values.output)
    except RefusedFolder as e:
        raise SystemExit(str(e)) from None
    try:
        LEARNERS[values.model](values, files)
    finally:
        os.close(lock)


def check_flags(values):
    """-> the input files; `SystemExit` (or absl's `UsageError`) naming the
    flag at fault."""
    files = input_files(values.input)
    if values.vocab_size < 1:
        raise SystemExit(f"--vocab_size={values.vocab_size}: must be >= 1.")
    if values.num_unused < 0:
        raise SystemExit(f"--num_unused={values.num_unused}: must be >= 0.")
    try:  # bytes that are not UTF-8 are named (file and line), as the writers do
        check_text_files(files, "--input")
    except ValueError as e:
        raise SystemExit(str(e)) from None
    if values.model in OUTPUT_FILES:
        if values.output.endswith(".txt"):
            files_written = " and ".join(OUTPUT_FILES[values.model])
            raise app.UsageError(
                f"--model={values.model} writes {files_written} into a folder; got "
                f"--output={values.output}. Pass --output=DIR.")
        if os.path.isfile(values.output):
            raise SystemExit(f"--output={values.output} is a file; --model={values.model} "
                             "writes into a folder.")
    elif os.path.isdir(values.output):
        raise SystemExit(f"--output={values.output} is a folder; --model=bert writes one file "
                         "(e.g. --output=vocab.txt).")
    check_output(values.output, values.model, values.overwrite)
    return files


# --model -> the files it writes into the folder --output (BERT: the one file --output).
OUTPUT_FILES = {"gpt": ("vocab.json", "merges.txt"), "xlnet": ("spiece.model", "spiece.vocab")}
BERT_SPECIALS = ("[UNK]", "[CLS]", "[SEP]", "[MASK]")


def check_output(output, model, overwrite):
    """`SystemExit` unless `output` is absent, an empty folder, or (with
    `overwrite`) a vocabulary of `model`'s kind: a learner never replaces
    what it did not write."""
    if model in OUTPUT_FILES:
        held = sorted(os.listdir(output)) if os.path.isdir(output) else []
        if not held:
            return
        foreign = [n for n in held if n not in OUTPUT_FILES[model] and not n.startswith(".tmp-")]
        if foreign:
            raise SystemExit(f"--output={output} holds files --model={model} does not write "
                             f"({', '.join(foreign[:5])}); a vocabulary folder holds only "
                             f"{' and '.join(OUTPUT_FILES[model])}. Give an empty or new folder.")
    elif not os.path.exists(output):
        return
    elif not _is_bert_vocab(output):
        raise SystemExit(f"--output={output} exists and is not a BERT vocabulary ([PAD] on its "
                         f"first line, then {', '.join(BERT_SPECIALS)}); it would be lost. Give a "
                         "new file.")
    if not overwrite:
        raise SystemExit(f"--output={output} holds a --model={model} vocabulary already. Give "
                         "--overwrite to replace it, or write elsewhere; it is unchanged.")


def _is_bert_vocab(path):
    try:
        with open(path, encoding="utf-8") as f:
            head = [line.rstrip("\r\n") for _, line in zip(range(2000), f)]
    except (OSError, UnicodeDecodeError):
        return False
    return bool(head) and head[0] == "[PAD]" and all(t in head for t in BERT_SPECIALS)


def cli():
    """`kbi-learn-vocab` and `python -m training.learn_vocab`: `main` on a quiet console."""
    define_flags()
    console.run(main, __name__, output_flag=None)  # a vocabulary folder is no run folder


if __name__ == "__main__":
    cli()
