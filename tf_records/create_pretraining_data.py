"""Command line: text files -> sharded pretraining TFRecords + manifest.json.

    python -m tf_records.create_pretraining_data \
        --input_file='corpus/*.txt' --vocab_file=vocab.txt --output_dir=data/ \
        --num_workers=2

Flags and defaults are the original script's, plus the documented fixes
(--exact_nsp, --random_token_excludes_special) and blocking/parallelism.
"""

import glob

from absl import flags

FLAGS = flags.FLAGS
flags.DEFINE_list("input_file", None, "Text files or globs (plain or .gz).", required=True)
flags.DEFINE_string("vocab_file", None, "vocab.txt of the model.", required=True)
flags.DEFINE_string("output_dir", None, "Folder for shards and manifest.json.", required=True)
flags.DEFINE_bool("do_lower_case", True, "Lowercase (uncased models).")
flags.DEFINE_bool("do_whole_word_mask", False, "Mask every piece of a chosen word.")
flags.DEFINE_integer("max_seq_length", 128, "Maximum sequence length.")
flags.DEFINE_integer("max_predictions_per_seq", 20, "Maximum masked positions per sequence.")
flags.DEFINE_integer("random_seed", 12345, "Seed for data generation.")
flags.DEFINE_integer("dupe_factor", 10, "Passes over the data, each with new masks.")
flags.DEFINE_float("masked_lm_prob", 0.15, "Masked LM probability.")
flags.DEFINE_float("short_seq_prob", 0.1, "Probability of a shorter target length.")
flags.DEFINE_bool("exact_nsp", False, "Fair coin for every NSP pair (fixes the >50% quirk).")
flags.DEFINE_bool("random_token_excludes_special", False,
                  "Never replace with a special token (fixes the original's quirk).")
flags.DEFINE_bool("unmasked", False,
                  "Write no masks; the reader then masks anew every epoch (dynamic masking).")
flags.DEFINE_bool("original_rng", False,
                  "Mask with the original's per-token random draws (one block then reproduces "
                  "its records exactly); slower than the default vectorized masking.")
flags.DEFINE_enum("input_format", "segment_pair",
                  ["segment_pair", "full_sentences", "doc_sentences"],
                  "segment_pair: BERT's A [SEP] B pairs with NSP labels. RoBERTa's inputs without "
                  "NSP: full_sentences (rows of whole sentences, crossing documents after an extra "
                  "[SEP]) or doc_sentences (never crossing a document).")
flags.DEFINE_integer("documents_per_block", 2000, "Documents per block (= per shard).")
flags.DEFINE_integer("num_workers", 1, "Worker processes.")


def main(argv):
    del argv
    from tf_records.writer import write_pretraining_data

    unmatched = [pattern for pattern in FLAGS.input_file if not glob.glob(pattern)]
    if unmatched:  # one glob of several matching nothing is a typo, not an empty corpus
        raise SystemExit(f"--input_file: no file matches {', '.join(map(repr, unmatched))}.")
    files = sorted({f for pattern in FLAGS.input_file for f in glob.glob(pattern)})
    try:  # flag values are checked before anything is written
        instance_config, writer_config = _configs()
    except ValueError as e:
        raise SystemExit(f"Bad flag value: {e}") from None
    manifest = write_pretraining_data(
        files, FLAGS.vocab_file, FLAGS.output_dir, instance_config, writer_config)
    records = sum(s["records"] for s in manifest["shards"])
    print(f"Wrote {records} instances in {len(manifest['shards'])} shards to {FLAGS.output_dir}")


def _configs():
    from tf_records.instances import InstanceConfig
    from tf_records.writer import WriterConfig

    return (
        InstanceConfig(
            max_seq_length=FLAGS.max_seq_length,
            max_predictions_per_seq=FLAGS.max_predictions_per_seq,
            masked_lm_prob=FLAGS.masked_lm_prob,
            short_seq_prob=FLAGS.short_seq_prob,
            do_whole_word_mask=FLAGS.do_whole_word_mask,
            exact_nsp=FLAGS.exact_nsp,
            random_token_excludes_special=FLAGS.random_token_excludes_special,
            unmasked=FLAGS.unmasked,
            original_rng=FLAGS.original_rng,
            input_format=FLAGS.input_format,
        ),
        WriterConfig(
            dupe_factor=FLAGS.dupe_factor,
            random_seed=FLAGS.random_seed,
            do_lower_case=FLAGS.do_lower_case,
            documents_per_block=FLAGS.documents_per_block,
            num_workers=FLAGS.num_workers,
        ),
    )


def cli():
    """`kbi-create-pretraining-data` and `python -m tf_records.create_pretraining_data`:
    `main` on a quiet console."""
    # Imported here: only the command line needs it, the record code never does.
    from training import console

    console.run(main, __name__)


if __name__ == "__main__":
    cli()
