"""ELMo's pretraining recipe for `training.pretrain --model=elmo`: a word
vocabulary by frequency, bilm-tf's streamed windows as TFRecords, the biLM
with its carried LSTM states, held-out perplexity against the unigram
model, export as bilm-tf's files.

Peters et al. 2018 train on the 1B Word Benchmark with bilm-tf
(`bin/train_elmo.py`): batches of 128 streams x 20 tokens (`unroll_steps`),
Adagrad at 0.2 with an initial accumulator of 1.0, global-norm clipping at
10, dropout 0.1, 8192 sampled negatives of a 793,471-word softmax. Here the
same objective runs on any tokenized text (one sentence per line), by
default the main job's corpus, at the sizes of `ELMO_PRESETS`; the
trainer's flags map as: `--max_seq_length` = `unroll_steps`,
`--global_batch_size` = the streams, `--vocab_size` = the largest
vocabulary learned from the text, and `training.pretrain` gives ELMo
bilm-tf's optimizer where the flags keep BERT's defaults. The softmax is
full up to `FULL_SOFTMAX_MAX_VOCAB` words, sampled above (the steps that
run TensorFlow: `training.elmo.pretraining_steps`).

One replica only: each of the B streams has its own LSTM states, kept in
the model (see `ElmoLanguageModel`), which `MirroredStrategy` and
`TPUStrategy` would have to split per replica; the recipe refuses them.
The training checkpoints hold those states, so a resumed run continues
every stream where it stopped (bit-exact with dropout 0, measured; with
dropout its random state restarts, as in BERT's runs).

Export (`--output_dir/export`): `options.json` + `lm_weights.hdf5`
(bilm-tf's files, `load_elmo_checkpoint` reads them; no softmax, as
bilm-tf's `dump_weights`), `vocab.txt`, `language_model.keras` (the whole
`ElmoLanguageModel`, softmax included) and `saved_model` (the backbone,
raw tokens in, `lm_embeddings` out; `keras_bert_impl.elmo.elmo_serving`).
"""

import os

from training.pretraining.recipe import PretrainRecipe

# The BERT size names mean the ELMo ones of about that size.
_SAME_SIZE = {"tiny": "elmo_tiny", "small": "elmo_small", "medium": "elmo_medium",
              "base": "elmo_original"}


def _steps():
    """`training.elmo.pretraining_steps`, the recipe's steps that run TensorFlow."""
    # lazy: TensorFlow and Keras load after the console starts and the light flag checks
    from training.elmo import pretraining_steps

    return pretraining_steps


# Why ELMo exports no runtime format (docs/serving.md's table), for both its recipes.
EXPORT_REFUSAL = ("ELMo's LSTMs trace as a TensorFlow while loop over TensorLists, which "
                  "OpenVINO's converter does not take and LiteRT runs only as Flex (select "
                  "TensorFlow) ops; its SavedModel serves text.")


class ElmoRecipe(PretrainRecipe):
    name = "ELMo"
    records_writer = "create_elmo_data"
    record_kind = "elmo"
    records_name = "elmo_records"
    checkpoint_formats = ()  # from random weights only
    flags = PretrainRecipe.flags + ("vocab_file", "strategy")
    export_formats = ("saved_model",)
    export_refusal = EXPORT_REFUSAL

    def __init__(self, init=None, manifests=None, **values):
        super().__init__(init, manifests, **values)
        flag = self.flag
        steps = _steps()
        preset = _SAME_SIZE.get(flag.preset, flag.preset)
        if not flag.config_file:
            steps.check_preset(flag.preset, preset, _SAME_SIZE)
        if flag.strategy in ("mirrored", "multi_worker", "tpu"):
            raise SystemExit(
                f"--strategy={flag.strategy}: ELMo trains on one replica (--strategy=cpu or auto "
                "with one GPU): each stream's LSTM states are kept in the model, one set per "
                "row, and are not split between replicas.")
        if flag.vocab_file:
            steps.check_vocab_file(flag.vocab_file)
        self.preset = preset
        self.model_config(1)  # --config_file read and checked before anything is written

    def learned_vocab(self, data_dir, train_files):
        return _steps().learned_vocab(os.path.join(data_dir, "elmo_vocab"), train_files,
                                      self.flag.vocab_size)

    def side_writer(self, data_dir, vocab_file, sides):
        flag = self.flag
        return _steps().stream_writer(vocab_file, flag.global_batch_size, flag.max_seq_length,
                                      flag.seed)

    def vocab_size(self, train_source, vocab_file, manifest=None):
        try:
            manifest = manifest or self.records_manifest(train_source)
        except ValueError as e:
            raise SystemExit(f"ELMo reads records from tf_records.elmo.writer: {e}") from None
        if manifest["schema"].get("kind") != "elmo":
            raise SystemExit(f"{train_source} does not hold ELMo records (tf_records.elmo.writer).")
        return manifest["vocab_size"]

    def model_config(self, vocab_size):
        return _steps().model_config(self.flag.config_file, self.preset, vocab_size)

    def build_model(self, vocab_size):
        steps = _steps()
        steps.check_one_replica()
        config = self.model_config(vocab_size)
        model = steps.build_model(config, vocab_size, self.flag.global_batch_size,
                                  self.flag.mixed_precision)
        return model, config

    def dataset(self, source, batch_size, model_config, start_batch=0, input_context=None,
                repeat=True, shuffle=True, length_grouping=0):
        """bilm-tf's batches in stream order (never shuffled, whatever `shuffle`
        says; windows are all `unroll_steps` long, so no length grouping)."""
        del shuffle, length_grouping
        return _steps().dataset(source, batch_size, start_batch=start_batch, repeat=repeat,
                                model_config=model_config, input_context=input_context)

    def evaluate(self, model, model_config, heldout_source, train_source, vocab_file, text):
        """Held-out perplexity against the unigram model of the training
        targets (no examples from the held-out `text`)."""
        del text
        if not heldout_source:
            return {}
        heldout = self.dataset(heldout_source, self.flag.global_batch_size, model_config,
                               repeat=False, shuffle=False)  # read once, in order
        return _steps().heldout_scores(model, heldout, train_source)

    def export(self, model, vocab_file, export_dir):
        return _steps().export(model, vocab_file, export_dir, self.flag.saved_model)


RECIPE = ElmoRecipe
