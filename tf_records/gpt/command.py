"""What `python -m tf_records.create_lm_data` runs once its console is up:
the flags and files checked, the text tokenized (`GptTokenizer`) and
written (`gpt.writer.write_lm_data`). Imports TensorFlow (through
keras_bert_impl), so the command module imports this only in `run`."""

import os

from keras_bert_impl.gpt.gpt_tokenizer import GptTokenizer
from tf_records.gpt.schema import LmRecordSchema
from tf_records.gpt.writer import write_lm_data
from tf_records.input_files import match_files


def run(values, progress=None):
    """`tf_records.create_lm_data.run`: the command on parsed flags `values`."""
    try:
        files = match_files(values.input_file, "--input_file")
        LmRecordSchema(values.max_seq_length)
        if values.num_shards < 1:
            raise ValueError(f"--num_shards must be >= 1. Received: {values.num_shards}.")
    except ValueError as e:
        raise SystemExit(f"Bad flag value: {e}") from None
    for flag in ("vocab_file", "merges_file"):
        if not os.path.isfile(getattr(values, flag)):
            raise SystemExit(f"--{flag}={getattr(values, flag)}: no such file.")
    try:
        tokenizer = GptTokenizer(values.vocab_file, values.merges_file)
        manifest = write_lm_data(
            files,
            tokenizer,
            values.output_dir,
            values.max_seq_length,
            vocab_files=[values.vocab_file, values.merges_file],
            num_shards=values.num_shards,
            random_seed=values.random_seed,
            document_separator_id=values.document_separator_id,
            progress=progress,
            overwrite=values.overwrite,
        )
    except ValueError as e:
        raise SystemExit(f"Bad input: {e}") from None
    records = sum(s["records"] for s in manifest["shards"])
    print(f"Wrote {records} windows of {values.max_seq_length + 1} tokens "
          f"({manifest['tokens']} tokens, {manifest['documents']} documents) in "
          f"{len(manifest['shards'])} shards to {values.output_dir}")
