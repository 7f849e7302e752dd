"""Bad input (issue 17) to fine-tuning (`training.finetune`), every split read
before the folder exists, and to the ablations (`training.ablations`).

The table's machinery, and what each case asserts of the exit status,
the message and the output folder: `tests/bad_input_cases.py`.
"""

import dataclasses
import json
import os
import shutil
import sys

import pytest
from bad_input_cases import GPT_MERGES
from bad_input_cases import GPT_VOCAB
from bad_input_cases import HERE
from bad_input_cases import VOCAB
from bad_input_cases import outcome
from bad_input_cases import table
from bad_input_cases import write_text

CASES, case, test_bad_input, assets = table()


# --- training.finetune: validation and every split read before the folder exists ---------------

def _finetune(a, out, **fields):
    from training.finetune import FinetuneConfig
    from training.finetune import run

    cfg = FinetuneConfig(**{"task": "glue/mrpc", "data_dir": a.glue, "output_dir": out,
                            "max_seq_length": 16, **fields})
    return outcome(lambda: run(cfg))


def _glue_copy(a, name, **files):
    """A copy of the tiny MRPC folder with `files` ({split: text}) replaced."""
    folder = a.path(name)
    if not os.path.isdir(folder):
        shutil.copytree(a.glue, folder)
        for split, text in files.items():
            write_text(os.path.join(folder, f"{split}.tsv"), text)
    return folder


MRPC_HEADER = "\ufeffQuality\t#1 ID\t#2 ID\t#1 String\t#2 String\n"


@case(1, lambda a, out: [os.path.join(a.path("mrpc_empty_dev"), "dev.tsv"),
                         "dev split holds no examples"], "absent")
def case_finetune_empty_dev_split(a, out):
    return _finetune(a, out, data_dir=_glue_copy(a, "mrpc_empty_dev", dev=MRPC_HEADER))


@case(1, lambda a, out: [os.path.join(a.path("mrpc_empty_test"), "test.tsv"),
                         "test split holds no examples"], "absent")
def case_finetune_empty_test_split(a, out):
    return _finetune(a, out, data_dir=_glue_copy(
        a, "mrpc_empty_test", test="index\t#1 ID\t#2 ID\t#1 String\t#2 String\n"))


@case(1, lambda a, out: [os.path.join(a.path("mrpc_bad_row"), "train.tsv") + ", line 3",
                         "Pass --skip_bad_input"], "absent")
def case_finetune_bad_row_hint_names_the_flag(a, out):
    with open(os.path.join(a.glue, "train.tsv"), encoding="utf-8-sig") as f:
        lines = f.read().splitlines()
    lines[2] = "1\tonly three\tfields"
    got = _finetune(a, out, data_dir=_glue_copy(a, "mrpc_bad_row",
                                                train="\n".join(lines) + "\n"))
    assert "skip_bad_rows" not in got.message, got.message
    return got


@case(1, lambda a, out: ["line", "Pass --skip_bad_input", "lines"], "absent")
def case_finetune_ner_bad_line_hint_names_the_flag(a, out):
    folder = a.path("conll_bad")
    os.makedirs(folder, exist_ok=True)
    write_text(os.path.join(folder, "train.txt"), "EU NNP B-NP B-ORG\nrejects VBZ B-VP\n")
    got = _finetune(a, out, task="ner", data_dir=folder)
    assert "skip_bad_lines" not in got.message, got.message
    return got


@case(1, lambda a, out: ["'Rollo'", "Pass --skip_bad_input", "questions"], "absent")
def case_finetune_squad_bad_answer_hint_names_the_flag(a, out):
    folder = a.path("squad_bad")
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(HERE, "data", "squad", "tiny-v1.1.json"), encoding="utf-8") as f:
        data = json.load(f)
    data["data"][0]["paragraphs"][0]["qas"][0]["answers"] = [{"text": "Rollo",
                                                              "answer_start": 0}]
    write_text(os.path.join(folder, "train-v1.1.json"), json.dumps(data))
    got = _finetune(a, out, task="squad", data_dir=folder, max_seq_length=64, doc_stride=32,
                    max_query_length=16)
    assert "skip_bad_answers" not in got.message, got.message
    return got


@case(1, lambda a, out: ["dev-v1.1.json", "dev split holds no questions"], "absent")
def case_finetune_squad_dev_without_questions(a, out):
    folder = a.path("squad_empty_dev")
    os.makedirs(folder, exist_ok=True)
    shutil.copy(os.path.join(HERE, "data", "squad", "tiny-v1.1.json"),
                os.path.join(folder, "train-v1.1.json"))
    write_text(os.path.join(folder, "dev-v1.1.json"), json.dumps({"version": "1.1", "data": []}))
    return _finetune(a, out, task="squad", data_dir=folder, max_seq_length=64, doc_stride=32,
                     max_query_length=16)


@case(1, lambda a, out: [os.path.join(a.path("conll_empty_dev"), "eng.testa"),
                         "holds no sentences"], "absent")
def case_finetune_ner_empty_dev(a, out):
    folder = a.path("conll_empty_dev")
    os.makedirs(folder, exist_ok=True)
    shutil.copy(os.path.join(HERE, "data", "conll", "eng_sample.txt"),
                os.path.join(folder, "eng.train"))
    write_text(os.path.join(folder, "eng.testa"), "-DOCSTART- -X- -X- O\n\n")
    return _finetune(a, out, task="ner", data_dir=folder)


@case(1, lambda a, out: ["val.csv", "val split holds no examples"], "absent")
def case_finetune_swag_empty_val(a, out):
    folder = a.path("swag_empty_val")
    if not os.path.isdir(folder):
        shutil.copytree(os.path.join(HERE, "data", "swag"), folder)
        with open(os.path.join(folder, "val.csv"), encoding="utf-8") as f:
            header = f.readline()
        write_text(os.path.join(folder, "val.csv"), header)
    return _finetune(a, out, task="swag", data_dir=folder)


@case(1, lambda a, out: ["dev_empty.csv", "no rows"], "absent")
def case_finetune_text_classification_empty_dev(a, out):
    return _finetune(a, out, task="text_classification", data_dir="",
                     train_file=os.path.join(HERE, "data", "news", "train.csv"),
                     dev_file=write_text(a.path("dev_empty.csv"), "title,body,label\n"),
                     text_column="title")


@case(1, lambda a, out: ["--batch_size=0"], "absent")
def case_finetune_batch_size_zero(a, out):
    return _finetune(a, out, batch_size=0)


@case(1, lambda a, out: ["--epochs=0"], "absent")
def case_finetune_epochs_zero(a, out):
    return _finetune(a, out, epochs=0)


@case(1, lambda a, out: ["--strategy='gpu'"], "absent")
def case_finetune_unknown_strategy(a, out):
    return _finetune(a, out, strategy="gpu")


@case(1, lambda a, out: ["--warmup_proportion=2.0"], "absent")
def case_finetune_warmup_over_one(a, out):
    return _finetune(a, out, warmup_proportion=2.0)


@case(1, lambda a, out: ["--max_seq_length=2", "at least 3"], "absent")
def case_finetune_max_seq_length_two(a, out):
    return _finetune(a, out, max_seq_length=2)


@case(1, lambda a, out: ["--init_checkpoint=" + a.path("no_checkpoint")], "absent")
def case_finetune_init_checkpoint_missing(a, out):
    return _finetune(a, out, init_checkpoint=a.path("no_checkpoint"), vocab_file=VOCAB)


@case(1, lambda a, out: ["--init_checkpoint", a.path("corrupt_ft.keras"),
                         "not a valid .keras file"], "absent")
def case_finetune_corrupt_keras_checkpoint(a, out):
    path = write_text(a.path("corrupt_ft.keras"), "garbage")
    return _finetune(a, out, init_checkpoint=path, vocab_file=VOCAB)


@case(1, lambda a, out: ["--init_checkpoint", a.path("corrupt_gpt.keras"),
                         "not a valid .keras file"], "absent")
def case_finetune_gpt_corrupt_keras_checkpoint(a, out):
    path = write_text(a.path("corrupt_gpt.keras"), "garbage")
    return _finetune(a, out, model="gpt", init_checkpoint=path, vocab_file=GPT_VOCAB,
                     merges_file=GPT_MERGES)


@case(1, lambda a, out: ["--vocab_file=" + a.path("no_vocab.txt")], "absent")
def case_finetune_vocab_file_missing(a, out):
    return _finetune(a, out, vocab_file=a.path("no_vocab.txt"))


@case(1, lambda a, out: ["--max_seq_length=32", "exceeds the model's max_position_embeddings=16"], "absent")
def case_finetune_longer_than_the_checkpoint_positions(a, out):
    """Found after the checkpoint is read (its positions are in it), so
    after the run took its folder's lock: the lock's folder goes with it."""
    return _finetune(a, out, init_checkpoint=a.hf_folder, vocab_file=VOCAB, max_seq_length=32)


@case(1, lambda a, out: ["--vocab_file=" + VOCAB, "30522 tokens", "99 word embeddings"], "absent")
def case_finetune_vocabulary_larger_than_the_checkpoint(a, out):
    return _finetune(a, out, init_checkpoint=a.hf_folder, vocab_file=VOCAB)


@case(1, lambda a, out: ["--output_dir=" + out, "is a file"], "unchanged",
      prepare=lambda a, out: write_text(out, "a file"))
def case_finetune_output_dir_is_a_file(a, out):
    return _finetune(a, out)


# --- training.ablations ------------------------------------------------------------------------

def _ablations(out, **fields):
    from training.ablation.settings import AblationsConfig
    from training.ablations import run

    return outcome(lambda: run(AblationsConfig(output_dir=out, **fields)))


@case(1, lambda a, out: ["--pretrain_steps=0", ">= 1"], "absent")
def case_ablations_no_pretraining_steps(a, out):
    return _ablations(out, pretrain_steps=0)


@case(1, lambda a, out: ["--seeds=0", ">= 1"], "absent")
def case_ablations_no_seeds(a, out):
    return _ablations(out, seeds=0)


@case(1, lambda a, out: ["--learning_rates='1e-4,-1e-3'", "> 0"], "absent")
def case_ablations_negative_learning_rate(a, out):
    return _ablations(out, learning_rates="1e-4,-1e-3")


@case(1, lambda a, out: ["--pretrain_seq_length=256", "128 positions"], "absent")
def case_ablations_windows_longer_than_gpt_positions(a, out):
    """Found before the corpus is written, not by GPT's pretraining an hour in."""
    return _ablations(out, pretrain_seq_length=256)


@case(1, lambda a, out: ["--output_dir=" + out, "is a file"], "unchanged",
      prepare=lambda a, out: write_text(out, "a file"))
def case_ablations_output_dir_is_a_file(a, out):
    return _ablations(out)


def _default_ablation_settings(a, out):
    """A folder as a default comparison leaves it: its settings.json."""
    from training.ablation.settings import AblationsConfig

    settings = {k: v for k, v in dataclasses.asdict(AblationsConfig()).items()
                if k not in ("output_dir", "workers", "scaling", "systems")}
    write_text(os.path.join(out, "settings.json"), json.dumps(settings))


@case(1, lambda a, out: ["other settings", "--seeds: 5 there, 2 now"], "unchanged",
      prepare=_default_ablation_settings)
def case_ablations_resumed_with_other_settings(a, out):
    return _ablations(out, seeds=2)


def _ablation_settings_before_extend_grid(a, out):
    """A folder made before `--extend_grid` and `--span_qa_num_train` existed:
    its grid was not extended, its span QA trained on --num_train rows."""
    _default_ablation_settings(a, out)
    path = os.path.join(out, "settings.json")
    with open(path, encoding="utf-8") as f:
        settings = json.load(f)
    del settings["extend_grid"], settings["span_qa_num_train"]
    write_text(path, json.dumps(settings))


@case(1, lambda a, out: ["other settings", "--extend_grid: 0 there, 2 now",
                         "--span_qa_num_train: 2500 there, 9000 now"], "unchanged",
      prepare=_ablation_settings_before_extend_grid)
def case_ablations_resumed_from_before_extend_grid(a, out):
    return _ablations(out)


# --- vague errors that now name their cause ---------------------------------------------------

@case(1, lambda a, out: ["--data_dir=" + a.path("glue_no_train"), "lacks",
                         os.path.join(a.path("glue_no_train"), "train.tsv"), "--task=glue/mrpc"],
      "absent")
def case_finetune_data_dir_without_train_tsv(a, out):
    os.makedirs(a.path("glue_no_train"), exist_ok=True)
    return _finetune(a, out, data_dir=a.path("glue_no_train"))


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
