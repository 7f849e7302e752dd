"""Learning XLNet's SentencePiece model from text.

SentencePiece (Kudo and Richardson 2018) with the flags of XLNet's README:

    spm_train --vocab_size=32000 --character_coverage=0.99995
        --model_type=unigram --control_symbols=<cls>,<sep>,<pad>,<mask>,<eod>
        --user_defined_symbols=<eop>,.,(,),",-,–,£,€
        --shuffle_input_sentence --input_sentence_size=10000000

and SentencePiece's defaults for the rest (<unk>=0, <s>=1, </s>=2, no pad
piece, the nmt_nfkc normalizer, pieces never crossing whitespace), so the
special symbols land at the ids of XLNet's released model: <cls>=3 <sep>=4
<pad>=5 <mask>=6 <eod>=7 <eop>=8, then the punctuation. Control symbols
never come out of text; user-defined ones always do ("<eop>" written at a
line's end marks a paragraph end in XLNet's data files).

The training text goes through `XLNetTokenizer`'s preprocessing first
(whitespace, quotes, accents, optional lowercase), so the model learns the
text it will be given. Empty lines (document breaks) are skipped.

Progress: SentencePiece reads every line first (to sample
`input_sentence_size` of them), which is counted as it happens; its C++
training then holds the GIL and reports nothing a Python thread could read
while it runs, so that step gets a line when it starts and one with its
time when it ends.
"""

import contextlib
import gzip
import os
import shutil
import tempfile

import sentencepiece

from keras_bert_impl.xlnet.xlnet_tokenizer import XLNET_SPECIAL_IDS
from keras_bert_impl.xlnet.xlnet_tokenizer import preprocess_text

CONTROL_SYMBOLS = ("<cls>", "<sep>", "<pad>", "<mask>", "<eod>")
USER_DEFINED_SYMBOLS = ("<eop>", ".", "(", ")", '"', "-", "\u2013", "\u00a3", "\u20ac")
MODEL_TYPES = ("unigram", "bpe")
# Pieces before any learned one: <unk> <s> </s>, the control and user-defined symbols.
NUM_FIXED_PIECES = 3 + len(CONTROL_SYMBOLS) + len(USER_DEFINED_SYMBOLS)


def read_text_lines(files):
    """Lines of plain or gzip UTF-8 text files, in order, without line ends."""
    for path in files:
        opener = gzip.open if str(path).endswith(".gz") else open
        with opener(path, "rt", encoding="utf-8", errors="replace") as f:
            for line in f:
                yield line.rstrip("\r\n")


def learn_sentencepiece(
    files,
    output_dir,
    vocab_size,
    model_type="unigram",
    do_lower_case=False,
    character_coverage=0.99995,
    input_sentence_size=10_000_000,
    num_threads=None,
    progress=None,
):
    """Trains a SentencePiece model with XLNet's flags and special symbols.

    Args:
        files: list of str. Plain or gzip text files, one sentence a line.
        output_dir: str. Where `spiece.model` and `spiece.vocab` go, each
            written atomically (temp file, then rename).
        vocab_size: int. Pieces in the model, the 17 fixed ones included.
        model_type: str. "unigram" (XLNet's) or "bpe".
        do_lower_case: bool. Lowercase the training text (uncased models;
            load the model with `XLNetTokenizer(..., do_lower_case=True)`).
        character_coverage: float. Share of characters the alphabet covers;
            rarer ones become <unk>.
        input_sentence_size: int. At most this many lines are sampled.
        num_threads: int. Training threads; all cores by default.
        progress: None, or a reporter (`tf_records.command_line.progress.Reporter`): its
            `meter(what, total, unit, scale)` is `update`d with the bytes
            of text read and `finish`ed, then `timed(what)` wraps the
            training.

    Returns:
        str, the path of `spiece.model`.

    Example:
    >>> path = learn_sentencepiece(["corpus.txt"], "xlnet_vocab", vocab_size=8000)
    >>> XLNetTokenizer(path).cls_id
    3
    """
    files = _checked_arguments(files, vocab_size, model_type)
    os.makedirs(output_dir, exist_ok=True)
    work = tempfile.mkdtemp(dir=output_dir, prefix=".tmp-spm-")
    try:
        prefix = os.path.join(work, "spiece")
        _train(prefix, files, vocab_size, progress, model_type=model_type,
               do_lower_case=do_lower_case, character_coverage=character_coverage,
               input_sentence_size=input_sentence_size, num_threads=num_threads)
        return _move_into(output_dir, prefix)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _checked_arguments(files, vocab_size, model_type):
    """`files` as a list of str paths, after the checks of `model_type`,
    the files (each must exist) and `vocab_size` (above the fixed pieces)."""
    if model_type not in MODEL_TYPES:
        raise ValueError(f"`model_type` must be one of {MODEL_TYPES}. Received: {model_type!r}.")
    if isinstance(files, (str, os.PathLike)):
        files = [files]
    files = [os.fspath(f) for f in files]
    missing = [f for f in files if not os.path.isfile(f)]
    if not files or missing:
        raise ValueError(f"`files` must name existing text files. Received: {files}, "
                         f"missing: {missing}.")
    if not isinstance(vocab_size, int) or vocab_size <= NUM_FIXED_PIECES:
        raise ValueError(
            f"`vocab_size` must be an int above the {NUM_FIXED_PIECES} fixed pieces. "
            f"Received: vocab_size={vocab_size!r}.")
    return files


def _training_lines(files, do_lower_case, vocab_size, progress, steps):
    """The training text: `files`' lines after `preprocess_text`, empty ones
    skipped. With `progress`, the bytes read are metered, and once every
    line is read `steps` enters the training's `timed`."""
    # The files' size (a gzip file's is not its text's): the lines' bytes come to it.
    size = None if any(f.endswith(".gz") for f in files) else sum(map(os.path.getsize, files))
    reading = progress.meter("Reading text for SentencePiece", total=size, unit="MB",
                             scale=1e-6) if progress else None
    read = count = 0
    for line in read_text_lines(files):
        text = preprocess_text(line, do_lower_case)
        if text:
            count += 1
            yield text
        if reading:
            read += len(line.encode()) + 1
            reading.update(read, lines=count)
    if reading:
        reading.finish(lines=count)
        steps.enter_context(progress.timed(f"Training SentencePiece ({vocab_size} pieces)"))


def _train(prefix, files, vocab_size, progress, model_type, do_lower_case, character_coverage,
           input_sentence_size, num_threads):
    """SentencePiece's training with XLNet's flags, writing `prefix` + `.model`
    and `.vocab`; its `RuntimeError` (too few pieces in the text, ...) as a
    `ValueError` naming the files."""
    steps = contextlib.ExitStack()  # the training's `timed`, entered once every line is read
    try:
        with steps:
            sentencepiece.SentencePieceTrainer.train(
                sentence_iterator=_training_lines(files, do_lower_case, vocab_size, progress,
                                                  steps),
                model_prefix=prefix,
                vocab_size=vocab_size,
                model_type=model_type,
                character_coverage=character_coverage,
                control_symbols=list(CONTROL_SYMBOLS),
                user_defined_symbols=list(USER_DEFINED_SYMBOLS),
                shuffle_input_sentence=True,
                input_sentence_size=input_sentence_size,
                split_by_whitespace=True,
                unk_id=XLNET_SPECIAL_IDS["<unk>"],
                bos_id=XLNET_SPECIAL_IDS["<s>"],
                eos_id=XLNET_SPECIAL_IDS["</s>"],
                pad_id=-1,  # <pad> is a control symbol, at id 5
                num_threads=num_threads or os.cpu_count() or 1,
                minloglevel=2,
            )
    except RuntimeError as error:
        raise ValueError(
            f"SentencePiece could not learn {vocab_size} pieces from {files}: {error}"
        ) from None


def _move_into(output_dir, prefix):
    """Renames the trained `prefix` + `.vocab`, then `.model`, to
    `output_dir`'s `spiece.vocab` and `spiece.model`; returns the model's path."""
    paths = []
    for suffix in (".vocab", ".model"):  # the model last: its presence means done
        path = os.path.join(output_dir, "spiece" + suffix)
        os.replace(prefix + suffix, path)
        paths.append(path)
    return paths[-1]
