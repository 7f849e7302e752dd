"""What `python -m tf_records.create_xlnet_data` runs once its console is
up: the flags, files and SentencePiece model checked, then the text
tokenized (`XLNetTokenizer`) and written (`xlnet.writer.write_xlnet_data`).
Imports TensorFlow, so the command module imports this only in `run`."""

import os

from tf_records.input_files import match_files
from tf_records.xlnet.schema import XLNetRecordSchema
from tf_records.xlnet.writer import write_xlnet_data


def run(values, progress=None):
    """`tf_records.create_xlnet_data.run`: the command on parsed flags `values`."""
    try:
        files = match_files(values.input_file, "--input_file")
        if values.batches_per_shard < 1:
            raise ValueError(
                f"--batches_per_shard must be >= 1. Received: {values.batches_per_shard}.")
    except ValueError as e:
        raise SystemExit(f"Bad flag value: {e}") from None
    if not os.path.isfile(values.spm_model_file):
        raise SystemExit(f"--spm_model_file={values.spm_model_file}: no such file.")
    tokenizer = _tokenizer(values)
    try:
        schema = XLNetRecordSchema(
            seq_len=values.seq_len, reuse_len=values.reuse_len, batch_size=values.batch_size,
            num_predict=values.num_predict, mask_alpha=values.mask_alpha,
            mask_beta=values.mask_beta, bi_data=values.bi_data, num_cores=values.num_cores,
            sep_id=tokenizer.sep_id, cls_id=tokenizer.cls_id)
    except ValueError as e:
        raise SystemExit(f"Bad flag value: {e}") from None
    try:
        manifest = write_xlnet_data(
            files, tokenizer, values.output_dir, schema, [values.spm_model_file],
            random_seed=values.random_seed, whole_word_spans=values.whole_word_spans,
            batches_per_shard=values.batches_per_shard, progress=progress,
            overwrite=values.overwrite)
    except ValueError as e:
        raise SystemExit(f"Bad input: {e}") from None
    print(f"Wrote {manifest['batches']} batches of {values.batch_size} streams x "
          f"{values.seq_len} tokens ({manifest['documents']} documents, {manifest['tokens']} "
          f"tokens) in {len(manifest['shards'])} shards to {values.output_dir}")


def _tokenizer(values):
    """`--spm_model_file`'s tokenizer; `SystemExit` naming a file that is not a model."""
    # The module is looked up when the command runs: a stand-in put in `sys.modules`
    # first is the one used (tests/test_xlnet_records_writer.py::test_command_line).
    # lazy: this module is imported before such a stand-in (the tests' forked commands)
    from keras_bert_impl.xlnet.xlnet_tokenizer import XLNetTokenizer

    try:
        return XLNetTokenizer(values.spm_model_file, do_lower_case=values.do_lower_case)
    except ValueError as e:
        raise SystemExit(f"--spm_model_file: {e}") from None
