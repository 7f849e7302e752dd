"""Bad input to pretraining (`training.pretrain`), refused before the run
folder exists (issue 17).

The table's machinery, and what each case asserts of the exit status,
the message and the output folder: `tests/bad_input_cases.py`.
"""

import gzip
import json
import os
import shutil
import sys

import pytest
from bad_input_cases import VOCAB
from bad_input_cases import Outcome
from bad_input_cases import corpus_text
from bad_input_cases import outcome
from bad_input_cases import table
from bad_input_cases import write_text

CASES, case, test_bad_input, assets = table()


# --- training.pretrain: validation before the run folder exists -------------------------------

def _pretrain(a, out, explicit=None, **fields):
    from training.pretrain import PretrainConfig
    from training.pretrain import run

    cfg = PretrainConfig(**{"input": a.corpus, "output_dir": out, "num_train_steps": 2, **fields})
    return outcome(lambda: run(cfg, explicit))


@case(1, lambda a, out: ["--preset='nope'", "tiny"], "absent")
def case_pretrain_unknown_preset(a, out):
    return _pretrain(a, out, preset="nope")


@case(1, lambda a, out: ["--input", "nope"], "absent")
def case_pretrain_input_glob_matches_nothing(a, out):
    return _pretrain(a, out, input=f"{a.corpus},{a.path('nope')}*.txt")


@case(1, lambda a, out: ["--heldout_input", "missing_heldout"], "absent")
def case_pretrain_heldout_glob_matches_nothing(a, out):
    return _pretrain(a, out, heldout_input=a.path("missing_heldout.txt"))


@case(1, lambda a, out: ["--vocab_file=" + a.path("no_vocab.txt")], "absent")
def case_pretrain_vocab_file_missing(a, out):
    return _pretrain(a, out, vocab_file=a.path("no_vocab.txt"))


@case(1, lambda a, out: ["--config_file=" + a.path("no_config.json")], "absent")
def case_pretrain_config_file_missing(a, out):
    return _pretrain(a, out, config_file=a.path("no_config.json"))


@case(1, lambda a, out: ["--config_file=" + a.path("bad_config.json")], "absent")
def case_pretrain_config_file_not_json(a, out):
    return _pretrain(a, out, config_file=write_text(a.path("bad_config.json"), "{not json"))


@case(1, lambda a, out: ["--strategy='gpus'"], "absent")
def case_pretrain_unknown_strategy(a, out):
    return _pretrain(a, out, strategy="gpus")


@case(1, lambda a, out: ["--optimizer='sgd'", "adamw"], "absent")
def case_pretrain_unknown_optimizer(a, out):
    return _pretrain(a, out, optimizer="sgd")


@case(1, lambda a, out: ["--global_batch_size=0"], "absent")
def case_pretrain_batch_size_zero(a, out):
    return _pretrain(a, out, global_batch_size=0)


@case(1, lambda a, out: ["--batch_slices=-1"], "absent")
def case_pretrain_batch_slices_negative(a, out):
    return _pretrain(a, out, batch_slices=-1)


@case(1, lambda a, out: ["--batch_slices=9", "--global_batch_size=8"], "absent")
def case_pretrain_batch_slices_above_the_batch(a, out):
    return _pretrain(a, out, batch_slices=9, global_batch_size=8)


@case(1, lambda a, out: ["--num_train_steps=-5"], "absent")
def case_pretrain_negative_steps(a, out):
    return _pretrain(a, out, num_train_steps=-5)


@case(1, lambda a, out: ["--learning_rate=0.0"], "absent")
def case_pretrain_learning_rate_zero(a, out):
    return _pretrain(a, out, learning_rate=0.0)


@case(1, lambda a, out: ["--steps_per_execution=3", "checkpoint interval (2 batches"], "absent")
def case_pretrain_steps_per_execution_not_dividing(a, out):
    return _pretrain(a, out, steps_per_execution=3)


@case(1, lambda a, out: ["--max_seq_length=1024", "max_position_embeddings=512"], "absent")
def case_pretrain_longer_than_the_positions(a, out):
    return _pretrain(a, out, max_seq_length=1024)


@case(1, lambda a, out: ["--input_format='pairs'"], "absent")
def case_pretrain_unknown_input_format(a, out):
    return _pretrain(a, out, input_format="pairs")


@case(1, lambda a, out: ["--ablation='rtl'"], "absent")
def case_pretrain_unknown_ablation(a, out):
    return _pretrain(a, out, ablation="rtl")


@case(1, lambda a, out: ["--model='bart'"], "absent")
def case_pretrain_unknown_model(a, out):
    return _pretrain(a, out, model="bart")


@case(1, lambda a, out: ["--input=" + a.path("empty_records"), "No manifest"], "absent")
def case_pretrain_records_folder_without_manifest(a, out):
    os.makedirs(a.path("empty_records"), exist_ok=True)
    return _pretrain(a, out, input=a.path("empty_records"))


@case(1, lambda a, out: ["--max_seq_length=64", "max_seq_length=32", "manifest.json"], "absent")
def case_pretrain_flag_disagrees_with_the_records(a, out):
    return _pretrain(a, out, input=a.records, max_seq_length=64)


@case(1, lambda a, out: ["--max_predictions_per_seq=7", "max_predictions_per_seq=5"], "absent")
def case_pretrain_predictions_disagree_with_the_records(a, out):
    return _pretrain(a, out, input=a.records, max_predictions_per_seq=7, max_seq_length=32,
                     explicit={"max_predictions_per_seq", "max_seq_length"})


@case(0, lambda a, out: ["--max_seq_length: 32", "left at its default 128",
                         "--max_predictions_per_seq: 5"])
def case_pretrain_default_flags_take_the_records_values(a, out):
    from training.pretrain import PretrainConfig
    from training.pretraining.checks import agree_with_records
    from training.pretraining.config import with_model_defaults

    cfg = agree_with_records(PretrainConfig(input=a.records),
                             with_model_defaults(PretrainConfig()), explicit=set())
    assert (cfg.max_seq_length, cfg.max_predictions_per_seq) == (32, 5)
    return Outcome(0, "")


@case(1, lambda a, out: ["--input_format='full_sentences'", "input_format='segment_pair'"],
      "absent")
def case_pretrain_input_format_other_than_the_records(a, out):
    return _pretrain(a, out, input=a.records, max_seq_length=32, max_predictions_per_seq=5,
                     input_format="full_sentences",
                     explicit={"input_format", "max_seq_length", "max_predictions_per_seq"})


@case(1, lambda a, out: ["--do_whole_word_mask=True", "do_whole_word_mask=False"], "absent")
def case_pretrain_whole_word_masking_other_than_the_records(a, out):
    return _pretrain(a, out, input=a.records, max_seq_length=32, max_predictions_per_seq=5,
                     do_whole_word_mask=True,
                     explicit={"do_whole_word_mask", "max_seq_length", "max_predictions_per_seq"})


@case(1, lambda a, out: ["--max_seq_length=128", "max_seq_length=32"], "absent")
def case_pretrain_default_value_given_explicitly_is_refused(a, out):
    return _pretrain(a, out, input=a.records, explicit={"max_seq_length"})


@case(1, lambda a, out: ["--vocab_file=" + a.path("other_vocab.txt"), "is not the vocabulary"],
      "absent")
def case_pretrain_vocab_file_other_than_the_records(a, out):
    other = a.path("other_vocab.txt")
    with open(VOCAB, encoding="utf-8") as f:
        write_text(other, f.read() + "extra_token\n")
    return _pretrain(a, out, input=a.records, vocab_file=other)


@case(1, lambda a, out: ["--input=", "'bert' records", "--model=gpt", "'lm'"], "absent")
def case_pretrain_records_of_another_model(a, out):
    return _pretrain(a, out, input=a.records, model="gpt")


@case(1, lambda a, out: ["--input=", "'bert' records", "--model=xlnet", "'xlnet'"], "absent")
def case_pretrain_xlnet_on_bert_records(a, out):
    return _pretrain(a, out, input=a.records, model="xlnet")


@case(1, lambda a, out: ["--max_seq_length=200", "n_positions=128"], "absent")
def case_pretrain_gpt_longer_than_the_positions(a, out):
    return _pretrain(a, out, model="gpt", max_seq_length=200)


@case(1, lambda a, out: ["--optimizer: 'adagrad', --model=elmo's default (the flag's is 'adamw'",
                         "--learning_rate: 0.2, --model=elmo's default", "num_train_steps"],
      "absent")
def case_pretrain_elmo_says_the_family_defaults_it_takes(a, out):
    return _pretrain(a, out, model="elmo", num_train_steps=-1)


@case(1, lambda a, out: ["--config_file=" + a.path("options.json")], "absent")
def case_pretrain_elmo_config_file_not_options(a, out):
    return _pretrain(a, out, model="elmo", config_file=write_text(a.path("options.json"),
                                                                  '{"lstm": 3}'))


@case(1, lambda a, out: ["--heldout_input=" + a.path("heldout.txt"), "must be TFRecords"],
      "absent")
def case_pretrain_text_heldout_with_records(a, out):
    return _pretrain(a, out, input=a.records, heldout_input=write_text(
        a.path("heldout.txt"), corpus_text(1)))


@case(1, lambda a, out: ["Shard", "shard-00000.tfrecord", "sha256"])
def case_pretrain_corrupt_shard_named_at_start(a, out):
    from training.pretraining.checks import verify_records

    folder = a.path("corrupt_records")
    shutil.copytree(a.records, folder)
    path = os.path.join(folder, "shard-00000.tfrecord")
    with open(path, "r+b") as f:
        f.seek(40)
        f.write(b"\xff\xff\xff")
    return outcome(lambda: verify_records(folder))


@case(1, lambda a, out: ["--output_dir=" + out, "is a file"], "unchanged",
      prepare=lambda a, out: write_text(out, "a file"))
def case_pretrain_output_dir_is_a_file(a, out):
    return _pretrain(a, out)


def _saved_run(a, out, checkpoint=True):
    """A run folder whose run_config.json says --max_seq_length=64, with a
    saved checkpoint (`checkpoint`) or none (a run refused or stopped before it)."""
    from training.pretrain import PretrainConfig
    from training.pretraining.run_config import check_run_config as _check_run_config

    os.makedirs(out)
    _check_run_config(PretrainConfig(input=a.corpus, output_dir=out, max_seq_length=64,
                                     num_train_steps=2), os.path.join(out, "run_config.json"))
    if checkpoint:
        write_text(os.path.join(out, "checkpoints", "ckpt-2.index"), "")


@case(1, lambda a, out: ["--max_seq_length=64", "this command says 128"], "unchanged",
      prepare=_saved_run)
def case_pretrain_resume_with_other_settings(a, out):
    return _pretrain(a, out)


@case(0, lambda a, out: ["held the settings of a run that saved no checkpoint",
                         "--max_seq_length=64 there"],
      prepare=lambda a, out: _saved_run(a, out, checkpoint=False))
def case_pretrain_corrected_after_a_refused_run(a, out):
    got = _pretrain(a, out)
    with open(os.path.join(out, "run_config.json"), encoding="utf-8") as f:
        assert json.load(f)["max_seq_length"] == 128
    return got


@case(1, lambda a, out: ["--input", "no documents", a.blank], "absent")
def case_pretrain_input_without_documents(a, out):
    return _pretrain(a, out, input=a.blank)


@case(1, lambda a, out: ["--input", a.path("pretrain_broken.txt.gz"), "Not a gzipped file"],
      "absent")
def case_pretrain_input_broken_gzip(a, out):
    return _pretrain(a, out, input=write_text(a.path("pretrain_broken.txt.gz"), "plain\n"))


@case(1, lambda a, out: ["--input", f"{a.path('deep_latin1.txt')}:2001", "not UTF-8"], "absent")
def case_pretrain_input_not_utf8_deep_in_the_file(a, out):
    # 2000 good lines, then one Latin-1 byte: found before the folder is made,
    # not by the data writer after run_config.json is written.
    path = a.path("deep_latin1.txt")
    with open(path, "wb") as f:
        f.write(b"The cat sat on the mat.\n" * 2000 + "Caf\u00e9.\n".encode("latin-1"))
    return _pretrain(a, out, input=path)


@case(1, lambda a, out: ["--input", a.path("truncated.txt.gz"), "cannot read"], "absent")
def case_pretrain_input_truncated_gzip(a, out):
    path = a.path("truncated.txt.gz")
    data = gzip.compress(b"The cat sat on the mat.\n" * 5000)
    with open(path, "wb") as f:
        f.write(data[:len(data) // 2])
    return _pretrain(a, out, input=path)


@case(1, lambda a, out: ["--heldout_input", f"{a.path('heldout_latin1.txt')}:1", "not UTF-8"],
      "absent")
def case_pretrain_heldout_not_utf8(a, out):
    path = a.path("heldout_latin1.txt")
    with open(path, "wb") as f:
        f.write("Caf\u00e9.\n".encode("latin-1"))
    return _pretrain(a, out, heldout_input=path)


@case(0, lambda a, out: ["Removed 1 temporary checkpoint folder", "ckpt-4_temp"])
def case_pretrain_stale_temporary_checkpoint_folder(a, out):
    import keras

    from training.run.checkpointing import TrainingCheckpoint

    directory = os.path.join(out, "checkpoints")
    os.makedirs(os.path.join(directory, "ckpt-4_temp"))
    write_text(os.path.join(directory, "ckpt-4_temp", "part-00000-of-00001.index"), "half")
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    model.compile(optimizer="adam", loss="mse")
    TrainingCheckpoint(model, directory)
    assert not os.path.exists(os.path.join(directory, "ckpt-4_temp"))
    return Outcome(0, "")


# --- vague errors that now name their cause ---------------------------------------------------

@case(1, lambda a, out: [f"--output_dir={out}/run lies below {out}, which is a file"],
      "unchanged", prepare=lambda a, out: write_text(out, "a file"))
def case_pretrain_output_dir_below_a_file(a, out):
    return _pretrain(a, os.path.join(out, "run"))


@case(1, lambda a, out: ["holds records of max_seq_length 32; the run reads 128",
                         "--max_seq_length=32"], "absent")
def case_pretrain_records_by_glob_of_another_length(a, out):
    # A glob reads no manifest: the flags' lengths, checked on the first record.
    return _pretrain(a, out, input=os.path.join(a.records, "shard-*.tfrecord"), vocab_file=VOCAB)


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
