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
full up to `FULL_SOFTMAX_MAX_VOCAB` words, sampled above.

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
import time

from training.pretraining.common import records_input
from training.pretraining.common import say
from training.pretraining.common import text_sources
from training.pretraining.recipe import PretrainRecipe

# The BERT size names mean the ELMo ones of about that size.
_SAME_SIZE = {"tiny": "elmo_tiny", "small": "elmo_small", "medium": "elmo_medium",
              "base": "elmo_original"}
# Larger vocabularies train with bilm-tf's sampled softmax.
FULL_SOFTMAX_MAX_VOCAB = 20_000
N_NEGATIVE_SAMPLES = 8192  # bilm-tf's n_negative_samples_batch
VOCAB_FILE = "vocab.txt"


class ElmoRecipe(PretrainRecipe):
    name = "ELMo"
    records_writer = "create_elmo_data"
    record_kind = "elmo"
    checkpoint_formats = ()  # from random weights only

    def __init__(self, cfg, init=None):
        super().__init__(cfg, init)
        if cfg.ablation:
            raise SystemExit(f"--ablation={cfg.ablation!r} is an option of BERT (--model=bert); "
                             "ELMo has none.")
        from keras_bert_impl.elmo import ELMO_PRESETS

        preset = _SAME_SIZE.get(cfg.preset, cfg.preset)
        if not cfg.config_file and preset not in ELMO_PRESETS:
            raise SystemExit(f"--preset={cfg.preset!r} is not an ELMo size: "
                             f"{', '.join(sorted(ELMO_PRESETS))} (or {', '.join(_SAME_SIZE)}).")
        if cfg.strategy in ("mirrored", "multi_worker", "tpu"):
            raise SystemExit(
                f"--strategy={cfg.strategy}: ELMo trains on one replica (--strategy=cpu or auto "
                "with one GPU): each stream's LSTM states are kept in the model, one set per "
                "row, and are not split between replicas.")
        if cfg.vocab_file:
            from keras_bert_impl.elmo.elmo_vocab import load_elmo_vocab

            try:
                load_elmo_vocab(cfg.vocab_file)
            except ValueError as e:
                raise SystemExit(str(e)) from None
        self.preset = preset
        self.model_config(1)  # --config_file read and checked before anything is written

    def prepare_data(self):
        """-> (train records folder, held-out folder or None, vocab.txt or None)."""
        cfg = self.cfg
        given = records_input(cfg)
        if given:
            return given
        from tf_records.command_line.progress import Reporter
        from tf_records.elmo.writer import write_elmo_data

        data_dir, train_files, heldout_files = text_sources(cfg)
        vocab_file = cfg.vocab_file
        if not vocab_file:
            vocab_file = os.path.join(data_dir, "elmo_vocab", VOCAB_FILE)
            if not os.path.exists(vocab_file):
                from keras_bert_impl.elmo.elmo_vocab import write_elmo_vocab
                from tf_records.elmo.writer import learn_vocab_from_text

                start = time.time()
                tokens = learn_vocab_from_text(train_files, max_size=cfg.vocab_size,
                                               progress=Reporter())
                write_elmo_vocab(tokens, vocab_file)
                say(f"Learned a {len(tokens)}-word vocabulary ({time.time() - start:.0f} s) -> "
                    f"{vocab_file}")
        sources = {}
        for side, files in (("train", train_files), ("heldout", heldout_files)):
            if not files:
                continue
            folder = os.path.join(data_dir, f"{side}_elmo_records")
            sources[side] = folder
            if os.path.exists(os.path.join(folder, "manifest.json")):
                continue  # written by an earlier start of this run
            start = time.time()
            manifest = write_elmo_data(
                files, vocab_file, folder, cfg.global_batch_size, cfg.max_seq_length,
                shuffle_seed=cfg.seed if side == "train" else None, progress=Reporter(side))
            say(f"Wrote {manifest['batches']} {side} batches of {cfg.global_batch_size} streams x "
                f"{cfg.max_seq_length} tokens ({manifest['sentences']} sentences, "
                f"{manifest['targets']} targets, {manifest['unknown_tokens']} of "
                f"{manifest['tokens']} words outside the vocabulary; "
                f"{time.time() - start:.0f} s) -> {folder}")
        return sources["train"], sources.get("heldout"), vocab_file

    def vocab_size(self, train_source, vocab_file):
        from tf_records.manifest import read_manifest

        try:
            manifest = read_manifest(train_source)
        except ValueError as e:
            raise SystemExit(f"ELMo reads records from tf_records.elmo.writer: {e}") from None
        if manifest["schema"].get("kind") != "elmo":
            raise SystemExit(f"{train_source} does not hold ELMo records (tf_records.elmo.writer).")
        return manifest["vocab_size"]

    def model_config(self, vocab_size):
        from keras_bert_impl.elmo import ElmoConfig
        from keras_bert_impl.elmo import elmo_preset

        cfg = self.cfg
        try:
            config = (ElmoConfig.from_options_file(cfg.config_file) if cfg.config_file
                      else elmo_preset(self.preset))
        except (ValueError, OSError) as e:
            raise SystemExit(f"--config_file={cfg.config_file}: {e}" if cfg.config_file
                             else str(e)) from None
        return config.replace(n_tokens_vocab=vocab_size)

    def build_model(self, vocab_size):
        import tensorflow as tf

        from keras_bert_impl.elmo import ElmoBackbone
        from keras_bert_impl.elmo.elmo_language_model import ElmoLanguageModel

        strategy = tf.distribute.get_strategy()
        if strategy.num_replicas_in_sync > 1 or isinstance(strategy, tf.distribute.TPUStrategy):
            raise ValueError(
                f"ELMo trains on one replica; this strategy has "
                f"{strategy.num_replicas_in_sync} ({type(strategy).__name__}). Each stream's "
                "LSTM states are kept in the model and are not split between replicas: use "
                "--strategy=cpu (or auto on a host with one GPU).")
        config = self.model_config(vocab_size)
        dtype = "mixed_bfloat16" if self.cfg.mixed_precision else None
        backbone = ElmoBackbone.from_config_object(
            config, max_batch_size=self.cfg.global_batch_size, dtype=dtype)
        negatives = 0 if vocab_size <= FULL_SOFTMAX_MAX_VOCAB else min(
            N_NEGATIVE_SAMPLES, vocab_size - 1)
        return ElmoLanguageModel(backbone, vocab_size, n_negative_samples_batch=negatives), config

    def dataset(self, source, batch_size, model_config, start_batch=0, input_context=None,
                repeat=True, shuffle=True, length_grouping=0):
        """bilm-tf's batches in stream order (never shuffled, whatever `shuffle`
        says; windows are all `unroll_steps` long, so no length grouping)."""
        del shuffle, length_grouping
        from tf_records.elmo.reader import elmo_dataset

        try:
            return elmo_dataset(source, batch_size, start_batch=start_batch, repeat=repeat,
                                model_config=model_config, input_context=input_context)
        except ValueError as e:
            raise SystemExit(str(e)) from None

    def evaluate(self, model, model_config, heldout_source, train_source, vocab_file):
        """Held-out perplexity against the unigram model of the training targets."""
        from tf_records.elmo.reader import target_counts
        from training.pretraining.evaluation import bilm_report

        if not heldout_source:
            return {}
        heldout = self.dataset(heldout_source, self.cfg.global_batch_size, model_config,
                               repeat=False)
        return bilm_report(model, heldout, target_counts(train_source, model.vocab_size))

    def export(self, model, vocab_file, export_dir):
        from keras_bert_impl.base.json_files import copy_atomic
        from keras_bert_impl.elmo import save_elmo_checkpoint
        from keras_bert_impl.elmo.elmo_serving import export_elmo_saved_model

        os.makedirs(export_dir, exist_ok=True)
        options = os.path.join(export_dir, "options.json")
        weights = os.path.join(export_dir, "lm_weights.hdf5")
        save_elmo_checkpoint(model.backbone, options, weights, n_tokens_vocab=model.vocab_size)
        if vocab_file:
            copy_atomic(vocab_file, os.path.join(export_dir, VOCAB_FILE))
        path = os.path.join(export_dir, "language_model.keras")
        model.save(path)
        if not self.cfg.saved_model:
            return f"bilm-tf files {options}, {weights}; Keras model -> {path}"
        saved = os.path.join(export_dir, "saved_model")
        signatures = export_elmo_saved_model(model.backbone, saved)
        return (f"bilm-tf files {options}, {weights}; SavedModel (signatures "
                f"{', '.join(signatures)}) -> {saved}; Keras model -> {path}")


RECIPE = ElmoRecipe
