"""What `python -m tf_records.create_elmo_data` runs once its console is
up: the flags, files and vocabulary checked (or a vocabulary learned from
the text), then the records written (`elmo.writer.write_elmo_data`).
Imports TensorFlow, so the command module imports this only in `run`."""

import os
import tempfile

from keras_bert_impl.elmo.elmo_vocab import load_elmo_vocab
from keras_bert_impl.elmo.elmo_vocab import write_elmo_vocab
from tf_records.elmo.schema import ElmoRecordSchema
from tf_records.elmo.writer import learn_vocab_from_text
from tf_records.elmo.writer import write_elmo_data
from tf_records.input_files import match_files


def run(values, progress=None):
    """`tf_records.create_elmo_data.run`: the command on parsed flags `values`."""
    try:
        files = match_files(values.input_file, "--input_file")
        ElmoRecordSchema(values.unroll_steps, values.batch_size)
        if values.vocab_size < 4:
            raise ValueError(f"--vocab_size must be >= 4 (<S>, </S>, <UNK> and a word). "
                             f"Received: {values.vocab_size}.")
    except ValueError as e:
        raise SystemExit(f"Bad flag value: {e}") from None
    try:
        with tempfile.TemporaryDirectory(prefix="kbi-elmo-vocab-") as learned:
            vocab_file = values.vocab_file
            if vocab_file:
                load_elmo_vocab(vocab_file)
            else:  # swapped in with the records, as <output_dir>/vocab.txt
                tokens = learn_vocab_from_text(files, max_size=values.vocab_size,
                                               progress=progress)
                if len(tokens) <= 3:
                    raise ValueError(f"No words in {', '.join(files)}: cannot learn a "
                                     "vocabulary.")
                vocab_file = os.path.join(learned, "vocab.txt")
                write_elmo_vocab(tokens, vocab_file)
            manifest = write_elmo_data(
                files, vocab_file, values.output_dir, values.batch_size, values.unroll_steps,
                shuffle_seed=None if values.shuffle_seed < 0 else values.shuffle_seed,
                progress=progress, overwrite=values.overwrite, copy_vocab=not values.vocab_file)
    except ValueError as e:
        raise SystemExit(f"Bad input: {e}") from None
    if not values.vocab_file:
        print(f"Learned a {len(tokens)}-word vocabulary -> "
              f"{os.path.join(values.output_dir, 'vocab.txt')}")
    print(f"Wrote {manifest['batches']} batches of {values.batch_size} streams x "
          f"{values.unroll_steps} tokens ({manifest['sentences']} sentences, {manifest['tokens']} "
          f"tokens) in {len(manifest['shards'])} shards to {values.output_dir}")
