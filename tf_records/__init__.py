"""Pretraining data: text files -> sharded TFRecords + `manifest.json` -> `tf.data`.

One folder per model family, each with its records' `schema.py`, `writer.py`
and `reader.py`: `bert/` (NSP pairs or RoBERTa's rows, MLM masking),
`gpt/` (LM windows), `elmo/` (streams of sentences), `xlnet/` (span
masking and permutation targets). No family imports another.

At the top, the plumbing every family shares: `manifest.py` (the manifest
and the checks of the shards it lists), `example_bytes.py`
(`tf.train.Example` bytes in numpy), `documents.py` (the text format),
`input_files.py`, `records_folder.py`, `tfrecord_file.py`,
`length_grouping.py` and `plain.py`; and the command lines, whose module
paths users type: `create_pretraining_data` (BERT; `beam_pretraining_data`
writes the same records on Apache Beam), `create_lm_data`,
`create_elmo_data`, `create_xlnet_data`. `command_line/` is what every
command shares (the console, progress lines), below the writers and the
training commands.
"""
