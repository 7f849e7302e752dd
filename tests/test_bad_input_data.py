"""Bad input to the pretraining-data writers (issue 17):
`tf_records.create_pretraining_data` (and the writer's Python API) and its
siblings `create_lm_data`, `create_elmo_data` and `create_xlnet_data`.

The table's machinery, and what each case asserts of the exit status,
the message and the output folder: `tests/bad_input_cases.py`. Here also the
count of the whole table's cases, across its modules.
"""

import glob
import gzip
import importlib
import json
import os
import sys

import pytest
from bad_input_cases import GPT_MERGES
from bad_input_cases import GPT_VOCAB
from bad_input_cases import HERE
from bad_input_cases import SENTENCES
from bad_input_cases import SPM
from bad_input_cases import VOCAB
from bad_input_cases import command
from bad_input_cases import corpus_text
from bad_input_cases import table
from bad_input_cases import write_text

CASES, case, test_bad_input, assets = table()


def test_the_table_holds_at_least_60_cases():
    """Counted across its modules, `tests/test_bad_input_*.py`."""
    names = sorted(os.path.basename(path)[:-3]
                   for path in glob.glob(os.path.join(HERE, "test_bad_input_*.py")))
    counts = {name: len(importlib.import_module(name).CASES) for name in names}
    assert sum(counts.values()) >= 60, counts


# --- tf_records.create_pretraining_data (and the writer's Python API) ------------------------

def _create(a, out, *flags_):
    from tf_records import create_pretraining_data

    return command(create_pretraining_data, f"--input_file={a.corpus}", f"--vocab_file={VOCAB}",
                   f"--output_dir={out}", "--max_seq_length=32", "--max_predictions_per_seq=5",
                   "--dupe_factor=1", *flags_)


def _create_fixed(a, out):
    got = _create(a, out)
    manifest = json.load(open(os.path.join(out, "manifest.json"), encoding="utf-8"))
    assert sorted(os.listdir(out)) == sorted(["manifest.json"] + [
        s["file"] for s in manifest["shards"]])
    return got


@case(1, lambda a, out: ["--input_file", f"'{a.path('nope')}*.txt'"], "usable", _create_fixed)
def case_writer_one_glob_of_several_matches_nothing(a, out):
    from tf_records import create_pretraining_data

    return command(create_pretraining_data, f"--input_file={a.corpus},{a.path('nope')}*.txt",
                   f"--vocab_file={VOCAB}", f"--output_dir={out}")


@case(1, lambda a, out: ["dupe_factor=0"], "usable", _create_fixed)
def case_writer_dupe_factor_zero(a, out):
    return _create(a, out, "--dupe_factor=0")


@case(1, lambda a, out: ["documents_per_block=0"], "usable", _create_fixed)
def case_writer_documents_per_block_zero(a, out):
    return _create(a, out, "--documents_per_block=0")


@case(1, lambda a, out: ["num_workers=0"], "usable", _create_fixed)
def case_writer_num_workers_zero(a, out):
    return _create(a, out, "--num_workers=0")


@case(1, lambda a, out: ["--chinese_word_segmenter=jieba", "--do_whole_word_mask"], "usable",
      _create_fixed)
def case_writer_chinese_word_segmenter_without_whole_word_masking(a, out):
    return _create(a, out, "--chinese_word_segmenter=jieba")


@case(1, lambda a, out: ["--chinese_word_segmenter=jieba", "--unmasked"], "usable", _create_fixed)
def case_writer_chinese_word_segmenter_with_unmasked_records(a, out):
    return _create(a, out, "--do_whole_word_mask", "--chinese_word_segmenter=jieba", "--unmasked")


@case(1, lambda a, out: ["max_seq_length", "3"], "usable", _create_fixed)
def case_writer_max_seq_length_too_short(a, out):
    return _create(a, out, "--max_seq_length=3")


@case(1, lambda a, out: ["masked_lm_prob", "1.5"], "usable", _create_fixed)
def case_writer_masked_lm_prob_out_of_range(a, out):
    return _create(a, out, "--masked_lm_prob=1.5")


@case(1, lambda a, out: ["short_seq_prob", "-0.5"], "usable", _create_fixed)
def case_writer_short_seq_prob_out_of_range(a, out):
    return _create(a, out, "--short_seq_prob=-0.5")


@case(1, lambda a, out: ["max_predictions_per_seq", "0"], "usable", _create_fixed)
def case_writer_no_predictions(a, out):
    return _create(a, out, "--max_predictions_per_seq=0")


@case(1, lambda a, out: ["--vocab_file", a.path("missing_vocab.txt")], "usable", _create_fixed)
def case_writer_vocab_file_missing(a, out):
    from tf_records import create_pretraining_data

    return command(create_pretraining_data, f"--input_file={a.corpus}",
                   f"--vocab_file={a.path('missing_vocab.txt')}", f"--output_dir={out}")


@case(1, lambda a, out: ["--vocab_file", "[MASK]", a.path("words.txt")], "usable", _create_fixed)
def case_writer_vocab_file_not_bert(a, out):
    from tf_records import create_pretraining_data

    words = write_text(a.path("words.txt"), "the\ncat\nsat\n")
    return command(create_pretraining_data, f"--input_file={a.corpus}", f"--vocab_file={words}",
                   f"--output_dir={out}")


@case(1, lambda a, out: ["--output_dir", out], "unchanged",
      prepare=lambda a, out: write_text(out, "a file, not a folder"))
def case_writer_output_dir_is_a_file(a, out):
    return _create(a, out)


@case(1, lambda a, out: ["--input_file", "no documents", a.blank], "usable", _create_fixed)
def case_writer_no_documents(a, out):
    from tf_records import create_pretraining_data

    return command(create_pretraining_data, f"--input_file={a.blank}", f"--vocab_file={VOCAB}",
                   f"--output_dir={out}")


@case(1, lambda a, out: [a.path("broken.txt.gz"), "Not a gzipped file"], "usable", _create_fixed)
def case_writer_broken_gzip(a, out):
    from tf_records import create_pretraining_data

    write_text(a.path("broken.txt.gz"), "plain text under a .gz name\n")
    return command(create_pretraining_data, f"--input_file={a.path('broken.txt.gz')}",
                   f"--vocab_file={VOCAB}", f"--output_dir={out}")


@case(1, lambda a, out: [a.path("truncated.txt.gz")], "usable", _create_fixed)
def case_writer_truncated_gzip(a, out):
    from tf_records import create_pretraining_data

    data = gzip.compress(corpus_text(40).encode())
    with open(a.path("truncated.txt.gz"), "wb") as f:
        f.write(data[:len(data) // 2])
    return command(create_pretraining_data, f"--input_file={a.path('truncated.txt.gz')}",
                   f"--vocab_file={VOCAB}", f"--output_dir={out}", "--max_seq_length=32",
                   "--max_predictions_per_seq=5", "--dupe_factor=1")


@case(1, lambda a, out: [f"{a.path('latin1.txt')}:3", "not UTF-8"], "usable", _create_fixed)
def case_writer_not_utf8(a, out):
    from tf_records import create_pretraining_data

    path = a.path("latin1.txt")
    with open(path, "wb") as f:
        f.write("One line.\nTwo lines.\nCaf\u00e9 au lait.\n".encode("latin-1"))
    return command(create_pretraining_data, f"--input_file={path}", f"--vocab_file={VOCAB}",
                   f"--output_dir={out}")


@case(0, lambda a, out: [f"{a.path('long_line.txt')}:4:", "a 40,000-character line",
                         "becomes one instance of 32 tokens", "as the original does",
                         "1 line(s)"])
def case_writer_line_far_over_the_sequence_length(a, out):
    path = write_text(a.path("long_line.txt"), "\n".join(
        SENTENCES[:3] + ["word " * 7999 + "word!"] + SENTENCES[3:]) + "\n")
    from tf_records import create_pretraining_data

    return command(create_pretraining_data, f"--input_file={path}", f"--vocab_file={VOCAB}",
                   f"--output_dir={out}", "--max_seq_length=32", "--max_predictions_per_seq=5",
                   "--dupe_factor=1")


def _stale_shards(a, out):
    os.makedirs(out)
    for index in range(7):  # an earlier, larger run
        write_text(os.path.join(out, f"shard-{index:05d}.tfrecord"), "old")
    write_text(os.path.join(out, ".tmp-shard-00007.tfrecord"), "half")


def _overwritten(a, out):
    """`--overwrite` replaces the folder whole: only the new run's files."""
    got = _create(a, out, "--overwrite")
    manifest = json.load(open(os.path.join(out, "manifest.json"), encoding="utf-8"))
    assert len(manifest["shards"]) == 1
    assert sorted(os.listdir(out)) == ["manifest.json", "shard-00000.tfrecord"]
    return got


@case(1, lambda a, out: ["holds shards without a manifest", "--overwrite"], "unchanged",
      prepare=_stale_shards)
def case_writer_rewrite_over_a_larger_earlier_run(a, out):
    return _create(a, out)


@case(0, lambda a, out: [], "usable", _create_fixed, prepare=_stale_shards)
def case_writer_overwrite_over_a_larger_earlier_run(a, out):
    return _overwritten(a, out)


@case(1, lambda a, out: ["holds GPT's LM records (create_lm_data); this writer writes BERT's",
                         "--overwrite"], "unchanged",
      prepare=lambda a, out: _lm(a, out))
def case_writer_over_gpt_records(a, out):
    return _create(a, out)


@case(1, lambda a, out: ["--input_file", "'" + a.path("corpus_folder") + "'", "a folder"])
def case_writer_glob_matches_a_folder(a, out):
    os.makedirs(a.path("corpus_folder"), exist_ok=True)
    from tf_records import create_pretraining_data

    return command(create_pretraining_data, f"--input_file={a.path('corpus_folder')}",
                   f"--vocab_file={VOCAB}", f"--output_dir={out}")


# --- the sibling writers: create_lm_data, create_elmo_data, create_xlnet_data ---------------

def _lm(a, out, *flags_):
    from tf_records import create_lm_data

    return command(create_lm_data, f"--input_file={a.corpus}", f"--vocab_file={GPT_VOCAB}",
                   f"--merges_file={GPT_MERGES}", f"--output_dir={out}", "--max_seq_length=8",
                   "--num_shards=2", *flags_)


def _lm_fixed(a, out):
    got = _lm(a, out)
    manifest = json.load(open(os.path.join(out, "manifest.json"), encoding="utf-8"))
    assert sorted(os.listdir(out)) == sorted(["manifest.json"] + [
        s["file"] for s in manifest["shards"]])
    return got


@case(1, lambda a, out: ["--input_file", "nope"], "usable", _lm_fixed)
def case_lm_one_glob_matches_nothing(a, out):
    return _lm(a, out, f"--input_file={a.corpus},{a.path('nope')}*.txt")


@case(1, lambda a, out: ["num_shards", "0"], "usable", _lm_fixed)
def case_lm_num_shards_zero(a, out):
    return _lm(a, out, "--num_shards=0")


@case(1, lambda a, out: ["--merges_file", a.path("no_merges.txt")], "usable", _lm_fixed)
def case_lm_merges_file_missing(a, out):
    return _lm(a, out, f"--merges_file={a.path('no_merges.txt')}")


@case(1, lambda a, out: ["max_seq_length", "0"], "usable", _lm_fixed)
def case_lm_max_seq_length_zero(a, out):
    return _lm(a, out, "--max_seq_length=0")


@case(1, lambda a, out: ["No documents", a.blank], "usable", _lm_fixed)
def case_lm_no_documents(a, out):
    return _lm(a, out, f"--input_file={a.blank}")


@case(1, lambda a, out: ["num_shards=50", "too few"], "usable", _lm_fixed)
def case_lm_more_shards_than_windows(a, out):
    return _lm(a, out, "--num_shards=50")


@case(0, lambda a, out: [], "usable", _lm_fixed,
      prepare=lambda a, out: [write_text(os.path.join(out, f"shard-{i:05d}.tfrecord"), "old")
                              for i in range(5)])
def case_lm_overwrite_over_a_larger_earlier_run(a, out):
    got = _lm(a, out, "--overwrite")
    assert sorted(os.listdir(out)) == ["manifest.json", "shard-00000.tfrecord",
                                       "shard-00001.tfrecord"]
    return got


def _elmo(a, out, *flags_):
    from tf_records import create_elmo_data

    return command(create_elmo_data, f"--input_file={a.corpus}", f"--output_dir={out}",
                   "--batch_size=2", "--unroll_steps=5", *flags_)


def _elmo_fixed(a, out):
    got = _elmo(a, out)
    assert os.path.exists(os.path.join(out, "manifest.json")), got
    return got


@case(1, lambda a, out: ["batch_size", "0"], "usable", _elmo_fixed)
def case_elmo_batch_size_zero_before_learning_a_vocabulary(a, out):
    return _elmo(a, out, "--batch_size=0")


@case(1, lambda a, out: ["--input_file", "nope"], "usable", _elmo_fixed)
def case_elmo_one_glob_matches_nothing(a, out):
    return _elmo(a, out, f"--input_file={a.corpus},{a.path('nope')}*.txt")


@case(1, lambda a, out: ["No words", a.blank], "usable", _elmo_fixed)
def case_elmo_no_words(a, out):
    return _elmo(a, out, f"--input_file={a.blank}")


@case(1, lambda a, out: ["ELMo vocabulary file", a.path("no_elmo_vocab.txt")], "usable",
      _elmo_fixed)
def case_elmo_vocab_file_missing(a, out):
    return _elmo(a, out, f"--vocab_file={a.path('no_elmo_vocab.txt')}")


def _xlnet(a, out, *flags_):
    from tf_records import create_xlnet_data

    return command(create_xlnet_data, f"--input_file={a.corpus}", f"--spm_model_file={SPM}",
                   f"--output_dir={out}", "--batch_size=2", "--seq_len=8", "--reuse_len=4",
                   "--num_predict=2", *flags_)


@case(1, lambda a, out: ["--spm_model_file", a.path("no.model")], "absent")
def case_xlnet_spm_model_missing(a, out):
    return _xlnet(a, out, f"--spm_model_file={a.path('no.model')}")


@case(1, lambda a, out: ["--input_file", "nope"], "absent")
def case_xlnet_one_glob_matches_nothing(a, out):
    return _xlnet(a, out, f"--input_file={a.corpus},{a.path('nope')}*.txt")


@case(1, lambda a, out: ["reuse_len"], "absent")
def case_xlnet_reuse_len_not_below_seq_len(a, out):
    return _xlnet(a, out, "--reuse_len=8")


@case(1, lambda a, out: ["--spm_model_file", "not a SentencePiece model"], "absent")
def case_xlnet_spm_model_not_a_model(a, out):
    return _xlnet(a, out, f"--spm_model_file={a.corpus}")


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
