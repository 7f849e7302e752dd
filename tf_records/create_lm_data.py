"""Command line: text files -> sharded language-model TFRecords + manifest.json.

    python -m tf_records.create_lm_data \
        --input_file='corpus/*.txt' --vocab_file=vocab.json --merges_file=merges.txt \
        --output_dir=data/ --max_seq_length=512 --num_shards=8

GPT's pretraining data: the documents as one token stream (BPE), cut into
windows of max_seq_length + 1 tokens that overlap by one, in a shuffled
order. Read it with `tf_records.lm_reader.lm_dataset`.
"""

import glob

from absl import flags

FLAGS = flags.FLAGS
flags.DEFINE_list("input_file", None, "Text files or globs (plain or .gz).", required=True)
flags.DEFINE_string("vocab_file", None, "vocab.json of the GPT BPE tokenizer.", required=True)
flags.DEFINE_string("merges_file", None, "merges.txt of the GPT BPE tokenizer.", required=True)
flags.DEFINE_string("output_dir", None, "Folder for shards and manifest.json.", required=True)
flags.DEFINE_integer("max_seq_length", 512, "Tokens the model reads (GPT's n_ctx is 512).")
flags.DEFINE_integer("num_shards", 8, "Shards (at least the number of input pipelines).")
flags.DEFINE_integer("random_seed", 12345, "Seed of the window order.")
flags.DEFINE_integer("document_separator_id", None,
                     "Token id appended after every document (GPT's release has none).")


def main(argv):
    del argv
    from keras_bert_impl.gpt.gpt_tokenizer import GptTokenizer
    from tf_records.lm_writer import write_lm_data

    files = sorted({f for pattern in FLAGS.input_file for f in glob.glob(pattern)})
    if not files:
        raise SystemExit(f"No files match {FLAGS.input_file}.")
    tokenizer = GptTokenizer(FLAGS.vocab_file, FLAGS.merges_file)
    manifest = write_lm_data(
        files,
        tokenizer,
        FLAGS.output_dir,
        FLAGS.max_seq_length,
        vocab_files=[FLAGS.vocab_file, FLAGS.merges_file],
        num_shards=FLAGS.num_shards,
        random_seed=FLAGS.random_seed,
        document_separator_id=FLAGS.document_separator_id,
    )
    records = sum(s["records"] for s in manifest["shards"])
    print(f"Wrote {records} windows of {FLAGS.max_seq_length + 1} tokens "
          f"({manifest['tokens']} tokens, {manifest['documents']} documents) in "
          f"{len(manifest['shards'])} shards to {FLAGS.output_dir}")


def cli():
    """`python -m tf_records.create_lm_data`: `main` on a quiet console."""
    # Imported here: only the command line needs it, the record code never does.
    from training import console

    console.run(main, __name__)


if __name__ == "__main__":
    cli()
