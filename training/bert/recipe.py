"""BERT's pretraining recipe for `training.pretrain`: WordPiece vocabulary,
NSP + MLM TFRecords, the pretrainer of the chosen ablation, evaluation and
export.

The paper's Table 5 ablations are options of this recipe (`--ablation`):
"" (MLM + NSP, the paper's model), "no_nsp" (MLM only, segment-pair input
kept) and "ltr" (LTR & No NSP: a causal mask, next-token loss on every
position, no [MASK], from the same records with the masks undone).

RoBERTa's inputs (`--input_format=full_sentences|doc_sentences`) have no
sentence pairs, so the paper's objective becomes MLM only on them (the
"no_nsp" pretrainer); the ablations apply as they are.
"""

import os

from tf_records.bert.instances import INPUT_FORMATS
from tf_records.bert.instances import InstanceConfig
from tf_records.bert.schema import RecordSchema
from tf_records.bert.writer import check_vocab_file
from tf_records.manifest import MANIFEST_FILE
from training.pretraining.common import say
from training.pretraining.recipe import PretrainRecipe
from training.pretraining.recipe import has_manifest

ABLATIONS = ("", "no_nsp", "ltr")


def _steps():
    """`training.bert.pretraining_steps`, the recipe's steps that run TensorFlow."""
    # lazy: TensorFlow and Keras load after the console starts and the light flag checks
    from training.bert import pretraining_steps

    return pretraining_steps


class BertRecipe(PretrainRecipe):
    name = "BERT"
    records_writer = "create_pretraining_data"
    record_kind = "bert"
    presets_help = "tiny, mini, small, medium, base, large"
    takes_input_format = True
    two_phases = True
    whole_word_mask = True
    reads_bare_records = True
    batch_slices = True
    bfloat16_pays = True
    checkpoint_formats = ("hf", "google", "keras", "keras_hub")
    typed_size_with_checkpoint = True
    records_hold_casing = True
    ablations = ABLATIONS
    flags = PretrainRecipe.flags + (
        "fill_mask_examples", "input", "input_format", "do_lower_case", "max_predictions_per_seq", "shuffle_buffer",
        "do_whole_word_mask", "chinese_word_segmenter", "dupe_factor", "data_workers")

    def __init__(self, init=None, manifests=None, records_prefix="", **values):
        super().__init__(init, manifests, **values)
        flag = self.flag
        self.records_prefix = records_prefix  # "phase2_": the second phase's records
        if flag.input_format not in INPUT_FORMATS:
            raise SystemExit(f"--input_format={flag.input_format!r} is not one of "
                             f"{', '.join(INPUT_FORMATS)}.")
        if not init and not flag.config_file:
            _steps().check_preset(flag.preset)
        self.check_positions(self._config())  # the size, read and checked before anything is written
        self.preset = init.typed if init else flag.preset
        self.ablation = _objective(flag.ablation, flag.input_format)

    def _config(self):
        """The model's `BertConfig` from `--config_file` or `--preset` (its
        vocab_size is the data's, set later)."""
        if self.init:
            return self.init.config
        return _steps().read_config(self.flag.config_file, self.flag.preset)

    def given_records(self, given):
        self.ablation = _objective(self.flag.ablation, self._records_format(given[0]))
        return given

    def learned_vocab(self, data_dir, train_files):
        flag = self.flag
        return _steps().learned_vocab(os.path.join(data_dir, "vocab.txt"), train_files,
                                      flag.vocab_size, flag.do_lower_case)

    def records_folder(self, data_dir, side):
        return os.path.join(data_dir, f"{self.records_prefix}{side}_records")

    def side_writer(self, data_dir, vocab_file, sides):
        flag = self.flag
        steps = _steps()
        # The default corpus: no line of ours runs past an instance (checked
        # again only while some records are still to be written).
        written = all(os.path.exists(os.path.join(self.records_folder(data_dir, side),
                                                  MANIFEST_FILE))
                      for side, files in sides.items() if files)
        if not flag.input and not written:
            steps.split_default_corpus(sides["train"] + (sides["heldout"] or []), vocab_file,
                                       flag.do_lower_case, flag.max_seq_length)
        instance_config = InstanceConfig(
            max_seq_length=flag.max_seq_length,
            max_predictions_per_seq=flag.max_predictions_per_seq,
            do_whole_word_mask=flag.do_whole_word_mask, input_format=flag.input_format,
            chinese_word_segmenter=flag.chinese_word_segmenter)
        return steps.instance_writer(vocab_file, instance_config, flag.dupe_factor, flag.seed,
                                     flag.do_lower_case, flag.data_workers)

    def vocab_size(self, train_source, vocab_file, manifest=None):
        if has_manifest(train_source):
            return (manifest or self.records_manifest(train_source))["vocab_size"]
        if not vocab_file:
            raise SystemExit("TFRecords without a manifest need --vocab_file (for the "
                             "vocabulary size).")
        return _steps().vocab_file_size(vocab_file)

    def build_model(self, vocab_size):
        return _steps().build_model(self._config(), vocab_size, self.ablation, self.init,
                                    self.flag.mixed_precision)

    def dataset(self, source, batch_size, model_config, start_batch=0, input_context=None,
                repeat=True, shuffle=True, length_grouping=0):
        """The pretraining batches, turned into this ablation's targets
        (`length_grouping`: see `pretraining_dataset`)."""
        flag = self.flag
        # Records without our manifest (e.g. from the original script): their
        # lengths are the flags'. With a manifest the reader takes its schema.
        schema = None if has_manifest(source) else (
            RecordSchema(flag.max_seq_length, flag.max_predictions_per_seq))
        return _steps().dataset(
            source, batch_size, self.ablation, schema=schema, input_context=input_context,
            shuffle_buffer=flag.shuffle_buffer if shuffle else 0, seed=flag.seed, repeat=repeat,
            model_config=model_config, start_batch=start_batch, length_grouping=length_grouping)

    def evaluate(self, model, model_config, heldout_source, train_source, vocab_file, text):
        """Held-out scores against the frequency baseline, and a few examples
        (from the held-out `text` files, or None)."""
        flag = self.flag
        steps = _steps()
        results = {}
        if heldout_source:
            heldout = self.dataset(heldout_source, flag.global_batch_size, model_config,
                                   repeat=False, shuffle=False)  # read once, in order
            train = self.dataset(train_source, 256, model_config, repeat=False, shuffle=False)
            results = steps.heldout_scores(model, heldout, train, model_config.vocab_size,
                                           self.ablation)
        if self.ablation != "ltr" and vocab_file and flag.fill_mask_examples and text:
            steps.say_fill_mask_examples(model, vocab_file, text, flag.fill_mask_examples,
                                         flag.do_lower_case, flag.max_seq_length, flag.seed)
        return results

    def export(self, model, vocab_file, export_dir):
        flag = self.flag
        return _steps().export(model, vocab_file, export_dir, self.init, flag.saved_model,
                               flag.do_lower_case, flag.max_seq_length)

    @staticmethod
    def check_vocab_file(path):
        check_vocab_file(path)

    def runtime_tokenizer(self, vocab_file):
        return runtime_tokenizer(vocab_file, self.flag.do_lower_case)

    def _records_format(self, source):
        """The `input_format` a records folder or manifest was written with."""
        if not has_manifest(source):
            return "segment_pair"  # bare shards (e.g. the original script's): pairs
        manifest = self.records_manifest(source)
        return manifest.get("instance_config", {}).get("input_format", "segment_pair")


RECIPE = BertRecipe


def runtime_tokenizer(vocab_file, do_lower_case):
    """`text_to_ids.py`'s WordPiece tokenizer beside a runtime export
    (`PretrainRecipe.runtime_tokenizer`; fine-tuning's too)."""
    name = os.path.basename(vocab_file)
    return ([vocab_file], "from keras_bert_impl.bert.bert_tokenizer import BertTokenizer",
            f"BertTokenizer(os.path.join(HERE, {name!r}), do_lower_case={do_lower_case})")


def learn_wordpiece(lines, files, vocab_size, do_lower_case, num_unused=99):
    """`training.bert.pretraining_steps.learn_wordpiece`: a WordPiece
    vocabulary learned from text `lines`, with progress lines."""
    return _steps().learn_wordpiece(lines, files, vocab_size, do_lower_case, num_unused)


def writing_progress(what, files, every_seconds=None):
    """`training.bert.pretraining_steps.writing_progress`: the progress lines
    of `write_pretraining_data`."""
    return _steps().writing_progress(what, files, every_seconds)


def _objective(ablation, input_format):
    """The pretrainer's objective: rows without sentence pairs have no NSP."""
    if input_format != "segment_pair" and not ablation:
        say(f"{input_format} rows have no sentence pairs: MLM only (no NSP), as RoBERTa.")
        return "no_nsp"
    return ablation

