"""Command line: text files -> sharded pretraining TFRecords + manifest.json.

    python -m tf_records.create_pretraining_data \
        --input_file='corpus/*.txt' --vocab_file=vocab.txt --output_dir=data/ \
        --num_workers=2

Flags and defaults are the original script's, plus the documented fixes
(--exact_nsp, --random_token_excludes_special), blocking/parallelism, and
Chinese whole-word masking (--do_whole_word_mask --chinese_word_segmenter=jieba,
docs/chinese.md).

Neither this module nor what it imports loads TensorFlow: the writer's
worker processes (`spawn`) import it again as their `__main__`.
"""

import functools

from absl import flags

from tf_records.bert.chinese_words import check_segmenter
from tf_records.bert.instances import InstanceConfig
from tf_records.bert.writer import WriterConfig
from tf_records.bert.writer import check_vocab_file
from tf_records.bert.writer import write_pretraining_data
from tf_records.command_line import console
from tf_records.command_line.progress import Reporter
from tf_records.input_files import check_output_folder
from tf_records.input_files import check_text_files
from tf_records.input_files import match_files
from tf_records.input_files import text_bytes

FLAGS = flags.FLAGS


def define_flags(flag_values=FLAGS):
    """The command's flags, on `flag_values` (the global `FLAGS` for the
    command line; a fresh `flags.FlagValues()` runs it in-process)."""
    def define(kind, *args, **kwargs):
        kind(*args, flag_values=flag_values, **kwargs)

    define(flags.DEFINE_list, "input_file", None, "Text files or globs (plain or .gz).",
           required=True)
    define(flags.DEFINE_string, "vocab_file", None, "vocab.txt of the model.", required=True)
    define(flags.DEFINE_string, "output_dir", None, "Folder for shards and manifest.json.",
           required=True)
    define(flags.DEFINE_bool, "overwrite", False,
           "Replace records of another kind or settings in --output_dir (never other files).")
    define(flags.DEFINE_bool, "do_lower_case", True, "Lowercase (uncased models).")
    define(flags.DEFINE_bool, "do_whole_word_mask", False, "Mask every piece of a chosen word.")
    define(flags.DEFINE_string, "chinese_word_segmenter", "",
           "With --do_whole_word_mask: 'jieba' segments Chinese text into words and masks "
           "all characters of a word together (Chinese-BERT-wwm); the tokens stay characters. "
           "Needs jieba (pip install keras_bert_impl[chinese]). Empty: words from '##' only.")
    define(flags.DEFINE_integer, "max_seq_length", 128, "Maximum sequence length.")
    define(flags.DEFINE_integer, "max_predictions_per_seq", 20,
           "Maximum masked positions per sequence.")
    define(flags.DEFINE_integer, "random_seed", 12345, "Seed for data generation.")
    define(flags.DEFINE_integer, "dupe_factor", 10, "Passes over the data, each with new masks.")
    define(flags.DEFINE_float, "masked_lm_prob", 0.15, "Masked LM probability.")
    define(flags.DEFINE_float, "short_seq_prob", 0.1, "Probability of a shorter target length.")
    define(flags.DEFINE_bool, "exact_nsp", False,
           "Fair coin for every NSP pair (fixes the >50% quirk).")
    define(flags.DEFINE_bool, "random_token_excludes_special", False,
           "Never replace with a special token (fixes the original's quirk).")
    define(flags.DEFINE_bool, "unmasked", False,
           "Write no masks; the reader then masks anew every epoch (dynamic masking).")
    define(flags.DEFINE_bool, "original_rng", False,
           "Mask with the original's per-token random draws (one block then reproduces "
           "its records exactly); slower than the default vectorized masking.")
    define(flags.DEFINE_enum, "input_format", "segment_pair",
           ["segment_pair", "full_sentences", "doc_sentences"],
           "segment_pair: BERT's A [SEP] B pairs with NSP labels. RoBERTa's inputs without "
           "NSP: full_sentences (rows of whole sentences, crossing documents after an extra "
           "[SEP]) or doc_sentences (never crossing a document).")
    define(flags.DEFINE_integer, "documents_per_block", 2000, "Documents per block (= per shard).")
    define(flags.DEFINE_integer, "num_workers", 1, "Worker processes.")


def main(argv, progress=None):
    del argv
    run(FLAGS, progress)


def run(values, progress=None):
    """The command on parsed flags `values`; `SystemExit` naming the flag,
    file or line at fault, before anything is written where it can be.
    `progress`: None (counts on stderr as blocks finish) or a reporter of
    the writing's progress lines: documents and instances, and the MB of
    text read with its rate and ETA (`cli` passes
    `tf_records.command_line.progress.Reporter()`)."""
    files, instance_config, writer_config = check_flags(values)
    report, counts = True, {}
    if progress is not None:
        meter = progress.meter("Writing instances", total=text_bytes(files), unit="MB",
                               scale=1e-6)

        def report(documents, instances, done_bytes):
            counts.update(documents=documents, instances=instances)
            meter.update(done_bytes, **counts)

    try:
        manifest = write_pretraining_data(
            files, values.vocab_file, values.output_dir, instance_config, writer_config,
            progress=report, overwrite=values.overwrite)
    except ValueError as e:  # an input found bad while reading: named, no traceback
        raise SystemExit(f"Bad input: {e}") from None
    if progress is not None:
        meter.finish(**counts)
    records = sum(s["records"] for s in manifest["shards"])
    print(f"Wrote {records} instances in {len(manifest['shards'])} shards to {values.output_dir}")


def check_flags(values):
    """-> (input files, InstanceConfig, WriterConfig); `SystemExit` naming
    the first flag at fault. Writes nothing."""
    try:
        # one glob of several matching nothing is a typo, not an empty corpus
        files = match_files(values.input_file, "--input_file")
        instance_config, writer_config = _configs(values)
    except ValueError as e:
        raise SystemExit(f"Bad flag value: {e}") from None
    if instance_config.chinese_word_segmenter:
        try:
            check_segmenter(instance_config.chinese_word_segmenter)
        except ImportError as e:
            raise SystemExit(
                f"--chinese_word_segmenter={instance_config.chinese_word_segmenter}: {e}") from None
    try:
        check_text_files(files, "--input_file")  # readable, and some text in them
    except ValueError as e:
        raise SystemExit(f"Bad input: {e}") from None
    try:
        check_vocab_file(values.vocab_file)
    except ValueError as e:
        raise SystemExit(f"--vocab_file: {e}") from None
    check_output_folder(values.output_dir)
    return files, instance_config, writer_config


def _configs(values=FLAGS):
    return (
        InstanceConfig(
            max_seq_length=values.max_seq_length,
            max_predictions_per_seq=values.max_predictions_per_seq,
            masked_lm_prob=values.masked_lm_prob,
            short_seq_prob=values.short_seq_prob,
            do_whole_word_mask=values.do_whole_word_mask,
            exact_nsp=values.exact_nsp,
            random_token_excludes_special=values.random_token_excludes_special,
            unmasked=values.unmasked,
            original_rng=values.original_rng,
            input_format=values.input_format,
            chinese_word_segmenter=values.chinese_word_segmenter,
        ),
        WriterConfig(
            dupe_factor=values.dupe_factor,
            random_seed=values.random_seed,
            do_lower_case=values.do_lower_case,
            documents_per_block=values.documents_per_block,
            num_workers=values.num_workers,
        ),
    )


def cli():
    """`kbi-create-pretraining-data` and `python -m tf_records.create_pretraining_data`:
    `main` on a quiet console."""
    define_flags()
    console.run(functools.partial(main, progress=Reporter()), __name__, swapped=True)


if __name__ == "__main__":
    cli()
