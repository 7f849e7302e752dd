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
`tf_records.xlnet_reader.xlnet_pretraining_dataset`.
"""

import glob

from absl import flags

FLAGS = flags.FLAGS
flags.DEFINE_list("input_file", None, "Text files or globs (plain or .gz).", required=True)
flags.DEFINE_string("spm_model_file", None, "XLNet's SentencePiece model (spiece.model).",
                    required=True)
flags.DEFINE_bool("do_lower_case", False, "Lowercase the text (the original's --uncased).")
flags.DEFINE_string("output_dir", None, "Folder for shards and manifest.json.", required=True)
flags.DEFINE_integer("batch_size", 32, "Streams (the original's bsz_per_host); the training batch.")
flags.DEFINE_integer("seq_len", 128, "Tokens per record (XLNet-Large: 512).")
flags.DEFINE_integer("reuse_len", 64, "Tokens the next record follows on from: the memory "
                     "(XLNet-Large: 256).")
flags.DEFINE_integer("num_predict", 21, "Tokens to predict per record, about seq_len / 6 "
                     "(XLNet-Large: 85).")
flags.DEFINE_integer("mask_alpha", 6, "Context tokens per span of mask_beta predicted ones.")
flags.DEFINE_integer("mask_beta", 1, "Predicted tokens per mask_alpha of context.")
flags.DEFINE_bool("bi_data", False, "Half of every replica's rows read backwards (XLNet-Large: "
                  "True).")
flags.DEFINE_integer("num_cores", 1, "Replicas the batch is split between (the original's "
                     "num_core_per_host); matters with --bi_data.")
flags.DEFINE_bool("whole_word_spans", False, "Spans of n whole words (the original's code masks "
                  "n pieces from a word start).")
flags.DEFINE_integer("random_seed", 12345, "Seed of A/B sampling and masking.")
flags.DEFINE_integer("batches_per_shard", 1000, "Consecutive batches per shard file.")


def main(argv):
    del argv
    from keras_bert_impl.xlnet.xlnet_tokenizer import XLNetTokenizer
    from tf_records.xlnet_schema import XLNetRecordSchema
    from tf_records.xlnet_writer import write_xlnet_data

    files = sorted({f for pattern in FLAGS.input_file for f in glob.glob(pattern)})
    if not files:
        raise SystemExit(f"No files match {FLAGS.input_file}.")
    tokenizer = XLNetTokenizer(FLAGS.spm_model_file, do_lower_case=FLAGS.do_lower_case)
    try:
        schema = XLNetRecordSchema(
            seq_len=FLAGS.seq_len, reuse_len=FLAGS.reuse_len, batch_size=FLAGS.batch_size,
            num_predict=FLAGS.num_predict, mask_alpha=FLAGS.mask_alpha,
            mask_beta=FLAGS.mask_beta, bi_data=FLAGS.bi_data, num_cores=FLAGS.num_cores,
            sep_id=tokenizer.sep_id, cls_id=tokenizer.cls_id)
        manifest = write_xlnet_data(
            files, tokenizer, FLAGS.output_dir, schema, [FLAGS.spm_model_file],
            random_seed=FLAGS.random_seed, whole_word_spans=FLAGS.whole_word_spans,
            batches_per_shard=FLAGS.batches_per_shard)
    except ValueError as e:
        raise SystemExit(str(e)) from None
    print(f"Wrote {manifest['batches']} batches of {FLAGS.batch_size} streams x "
          f"{FLAGS.seq_len} tokens ({manifest['documents']} documents, {manifest['tokens']} "
          f"tokens) in {len(manifest['shards'])} shards to {FLAGS.output_dir}")


def cli():
    """`python -m tf_records.create_xlnet_data`: `main` on a quiet console."""
    # Imported here: only the command line needs it, the record code never does.
    from training import console

    console.run(main, __name__)


if __name__ == "__main__":
    cli()
