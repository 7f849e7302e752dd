"""Pretraining's recipes: what each model family gives `training.pretrain`,
and `pretrain_recipe`, the registry that picks one by `--model`: with
fine-tuning's (`training.finetuning.recipe`), the one place the commands
choose code by a model's name.

A family's recipe is the `RECIPE` of `training/<family>/recipe.py`, a
`PretrainRecipe` built from plain values: the flags its class names in
`flags` (`command.recipes.make_recipe` reads them from the run's config,
the only place a recipe's values come from), the `InitCheckpoint` it
continues from and the records' manifests the run has read. It never sees
the whole config, and reads a manifest itself only where the run holds
none (`records_manifest`: once per folder). Its methods are what the run
(`training.pretraining.command`) asks of it: the data hooks that
`command.recipes.prepare_data` calls (`given_records`, `learned_vocab`,
`side_writer`, `records_folder`), then `vocab_size`, `build_model`,
`dataset`, `evaluate` and `export`; they never call back up into the
run. Its class
attributes say what the family takes and does, so that the command, the
checks and the Table 5 driver ask the recipe instead of naming the model.
The steps that run TensorFlow are the family's
`training/<family>/pretraining_steps.py`, which the recipe imports when a
step first needs them: the recipes import no TensorFlow (the console starts
first, and a bad flag stops in a moment).
"""

import os

from tf_records.manifest import read_manifest
from training.run.config_flags import family_recipe
from training.run.config_flags import flag_values

# --model -> the module whose RECIPE pretrains it.
FAMILIES = {"bert": "training.bert.recipe", "gpt": "training.gpt.recipe",
            "elmo": "training.elmo.recipe", "xlnet": "training.xlnet.recipe"}


def pretrain_recipe(model):
    """The family's `PretrainRecipe` class; `SystemExit` naming `--model` for another name."""
    return family_recipe(FAMILIES, model)


def has_manifest(source):
    """Whether `source` names a records folder or its `manifest.json` (not
    bare TFRecord shards, e.g. the original scripts')."""
    return os.path.isdir(source) or source.endswith(".json")


def config_from_flags(config_file, from_file, preset_name, from_preset):
    """The model config of `--config_file` (`from_file`), else of the preset
    (`from_preset`); `SystemExit` naming the file it cannot read."""
    try:
        return from_file(config_file) if config_file else from_preset(preset_name)
    except (ValueError, OSError) as e:
        raise SystemExit(f"--config_file={config_file}: {e}" if config_file
                         else str(e)) from None


class PretrainRecipe:
    """What a family that is not BERT takes and does; each family says what differs."""

    name = ""  # as the lines a run prints name it ("BERT")
    # The `tf_records` command that writes its records (multi_worker reads
    # them), and the `kind` its manifest's schema names.
    records_writer = ""
    record_kind = ""
    takes_input_format = False  # --input_format (BERT's sentence-pair layouts)
    two_phases = False  # --phase2_steps (BERT's 128-then-512 schedule)
    whole_word_mask = False  # --do_whole_word_mask and --chinese_word_segmenter
    reads_bare_records = False  # TFRecords without a manifest (the original script's)
    # Each batch in slices side by side on a CPU (`training.run.distribution.cpu_batch_slices`).
    batch_slices = False
    # bfloat16 when --mixed_precision is not given, on a CPU that has it
    # (`training.run.distribution.auto_mixed_precision`, with the figures).
    bfloat16_pays = False
    # --init_checkpoint: the layouts it continues from (() : random weights only).
    checkpoint_formats = ("hf",)
    vocab_name = "vocab.txt"  # the vocabulary a checkpoint keeps beside its weights
    merges_beside_vocab = False  # GPT: merges.txt beside vocab.json, checked with it
    cased_releases = False  # XLNet: a checkpoint is cased unless its folder says otherwise
    # The records' manifest says the vocabulary and the casing they were
    # written with (BERT's), checked against a checkpoint's.
    records_hold_casing = False
    # True: a typed --preset/--config_file/--vocab_size that agrees with the
    # checkpoint is taken (BERT); False: the checkpoint's size, the flags refused.
    typed_size_with_checkpoint = False
    # The held-out loss of the checkpoint before step 1, to beat (not
    # XLNet's: its carried memory would run through the held-out streams first).
    evaluates_at_start = True
    # The records folders in the run's data folder: "<side>_<records_name>".
    records_name = "records"
    # --ablation: the names it takes ("" the full objective); () : none (BERT's alone).
    ablations = ()
    # The formats of --export_formats the family's backbone converts to
    # (keras_bert_impl.runtimes.formats), and why not the others.
    export_formats = ("saved_model", "onnx", "openvino", "litert")
    export_refusal = ""
    # The run's flags the recipe reads, each passed to the constructor by name.
    flags = ("ablation", "config_file", "preset", "max_seq_length", "vocab_size", "seed",
             "global_batch_size", "mixed_precision", "saved_model")

    def __init__(self, init=None, manifests=None, **values):
        """`values`: exactly the flags this class names in `flags`; kept as
        `self.flag` (read-only to the recipe: a value it derives is its own
        attribute). `manifests`: {records path: manifest} the run has read
        (`training.pretraining.resolve.Resolved.manifests`)."""
        self.flag = flag_values(type(self).__name__, self.flags, values)
        self.init = init  # `training.pretraining.continued.InitCheckpoint`, or None
        self._manifests = {_folder(path): manifest
                           for path, manifest in (manifests or {}).items()}
        ablation = self.flag.ablation
        if ablation and not self.ablations:
            raise SystemExit(f"--ablation={ablation!r} is an option of BERT "
                             f"(--model=bert); {self.name} has none.")
        if self.ablations and ablation not in self.ablations:
            raise SystemExit(f"--ablation={ablation!r} is not one of {self.name}'s: "
                             f"{', '.join(repr(a) for a in self.ablations)}.")

    def given_records(self, given):
        """`prepare_data`'s answer for `--input`'s TFRecords: `given`,
        `(train, held-out or None, vocabulary file or None)`."""
        return given

    def learned_vocab(self, data_dir, train_files):
        """The vocabulary file in `data_dir`, learned from `train_files` unless
        an earlier start of this run learned it."""
        raise NotImplementedError

    def side_writer(self, data_dir, vocab_file, sides):
        """`write(side, files, folder)`: writes a side's records from its text
        files; returns their manifest, or None when the text makes none
        (that side then has no records). `sides`: {side: files or None}."""
        raise NotImplementedError

    def records_folder(self, data_dir, side):
        """Where `side`'s ("train", "heldout") records are written."""
        return os.path.join(data_dir, f"{side}_{self.records_name}")

    @staticmethod
    def check_vocab_file(path):
        """`ValueError` naming what is wrong with a typed --vocab_file."""
        del path

    @staticmethod
    def read_hf_config(path):
        """The config of a Hugging Face folder of this family (continued pretraining)."""
        raise NotImplementedError

    def records_manifest(self, source):
        """The manifest of the records folder (or manifest.json) `source`: the
        run's, else read here once. Raises the error reading it raised
        (`ValueError`, `OSError`)."""
        folder = _folder(source)
        if folder not in self._manifests:
            try:
                self._manifests[folder] = read_manifest(source)
            except (ValueError, OSError) as e:
                self._manifests[folder] = e
        found = self._manifests[folder]
        if isinstance(found, Exception):
            raise found
        return found

    def runtime_tokenizer(self, vocab_file):
        """`(files, import line, constructor)` of `text_to_ids.py` beside a
        runtime export of the backbone (`keras_bert_impl.runtimes`):
        the tokenizer of `vocab_file`."""
        raise NotImplementedError

    def check_positions(self, config):
        """`SystemExit` when --max_seq_length is more than the model's
        positions (`check_fits_positions`), naming where the size came from."""
        # lazy: keras_bert_impl loads Keras, after the checks that need none
        from keras_bert_impl.base.sequence_checks import check_fits_positions

        flag = self.flag
        try:
            check_fits_positions(flag.max_seq_length, config, "--max_seq_length",
                                 source=flag.config_file or "--preset=" + flag.preset)
        except ValueError as e:
            raise SystemExit(str(e)) from None


def _folder(path):
    """The records folder a path names (the folder, or its manifest.json)."""
    return os.path.abspath(os.path.dirname(path) if path.endswith(".json") else path)
