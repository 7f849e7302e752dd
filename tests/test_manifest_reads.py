"""`python -m training.pretrain --input=<records folder>` reads each records
folder's `manifest.json` once on its way to the data step: the config's one
pass (`training.pretraining.resolve`) reads `--input`'s and
`--heldout_input`'s, and the flag checks, the checkpoint's check, the
shards' sha256 check (`verify_records`) and the family's recipe
(`given_records`, `vocab_size`: `PretrainRecipe.records_manifest`) take
what it read.
"""

import collections
import os
import sys

import pytest
from bad_input_cases import VOCAB
from bad_input_cases import corpus_text
from bad_input_cases import write_text

import training.bert.recipe  # noqa: F401  (loaded now, so its read_manifest is counted too)
from keras_bert_impl import BertBackbone
from keras_bert_impl import BertConfig
from keras_bert_impl.bert.hf_checkpoint import save_hf_checkpoint
from tf_records import manifest as manifest_module
from tf_records.bert.instances import InstanceConfig
from tf_records.bert.writer import WriterConfig
from tf_records.bert.writer import write_pretraining_data
from training.pretraining.command import runner
from training.pretraining.config import PretrainConfig


class _AtTraining(Exception):
    """Raised in place of the fit loop: the data step is done."""


def _records(folder, text, documents):
    write_pretraining_data([write_text(text, corpus_text(documents))], VOCAB, folder,
                           InstanceConfig(max_seq_length=32, max_predictions_per_seq=5),
                           WriterConfig(dupe_factor=1), progress=False)
    return folder


def _counting_reads(monkeypatch):
    """{(module, records folder): reads}, filled by a counting `read_manifest`
    put in place of every loaded module's own name for it."""
    reads = collections.Counter()
    original = manifest_module.read_manifest

    def counting(module):
        def read_manifest(path):
            folder = os.path.dirname(path) if path.endswith(".json") else path
            reads[module, os.path.abspath(folder)] += 1
            return original(path)
        return read_manifest

    for name, module in list(sys.modules.items()):
        if (name.startswith(("training", "tf_records"))
                and getattr(module, "read_manifest", None) is original):
            monkeypatch.setattr(module, "read_manifest", counting(name))
    return reads


def test_each_manifest_is_read_once_before_training(tmp_path, monkeypatch):
    """--input and --heldout_input records with --init_checkpoint (every
    check that reads a manifest runs): the pretraining command's modules
    and the family's recipe read each folder's manifest once in all."""
    train = _records(str(tmp_path / "train_records"), str(tmp_path / "train.txt"), 6)
    heldout = _records(str(tmp_path / "heldout_records"), str(tmp_path / "heldout.txt"), 2)
    checkpoint = str(tmp_path / "hf_tiny")
    save_hf_checkpoint(BertBackbone.from_bert_config(BertConfig(
        vocab_size=99, hidden_size=12, num_hidden_layers=1, num_attention_heads=3,
        intermediate_size=37, max_position_embeddings=128)), checkpoint)
    cfg = PretrainConfig(input=train, heldout_input=heldout, init_checkpoint=checkpoint,
                         vocab_file=VOCAB, output_dir=str(tmp_path / "run"), num_train_steps=2,
                         batch_slices=1, mixed_precision=False)
    reads = _counting_reads(monkeypatch)

    def at_training(*args, **kwargs):
        raise _AtTraining

    monkeypatch.setattr(runner, "train", at_training)
    with pytest.raises(_AtTraining):
        runner.run(cfg, explicit={"input", "heldout_input", "init_checkpoint", "vocab_file",
                                  "output_dir", "num_train_steps", "batch_slices",
                                  "mixed_precision"})
    ours = collections.Counter()
    for (module, folder), n in reads.items():
        if module.startswith("training."):
            ours[folder] += n
    assert ours == {os.path.abspath(train): 1, os.path.abspath(heldout): 1}, sorted(reads.items())
