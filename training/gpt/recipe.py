"""OpenAI GPT's pretraining recipe for `training.pretrain --model=gpt`:
a BPE vocabulary (vocab.json + merges.txt), contiguous token windows as
TFRecords, next-token LM, held-out perplexity against the unigram model,
greedy continuations, export.

The GPT paper pretrains on BooksCorpus windows of 512 contiguous tokens;
here the same objective runs on any text, by default the main job's
corpus, with the size ladder of `keras_bert_impl.gpt.GPT_PRESETS`.
"""

import os

from tf_records.manifest import read_manifest
from training.pretraining.common import heldout_text
from training.pretraining.recipe import PretrainRecipe

# The BERT size names of --preset's default mean the GPT ones of that size.
_SAME_SIZE = {"tiny": "gpt_tiny", "mini": "gpt_mini"}


def _steps():
    """`training.gpt.pretraining_steps`, the recipe's steps that run TensorFlow."""
    # lazy: TensorFlow and Keras load after the console starts and the light flag checks
    from training.gpt import pretraining_steps

    return pretraining_steps


class GptRecipe(PretrainRecipe):
    name = "GPT"
    records_writer = "create_lm_data"
    record_kind = "lm"
    records_name = "lm_records"
    vocab_name = "vocab.json"
    merges_beside_vocab = True

    def __init__(self, cfg, init=None):
        super().__init__(cfg, init)
        steps = _steps()
        preset = _SAME_SIZE.get(cfg.preset, cfg.preset)
        if not init and not cfg.config_file:
            steps.check_preset(cfg.preset, preset)
        if cfg.vocab_file:
            steps.check_merges_beside(cfg.vocab_file)
        self.preset = init.typed if init else preset
        self.check_positions(self._config())  # the size, read and checked before anything is written

    @staticmethod
    def read_hf_config(path):
        return _steps().read_hf_config(path)

    def _config(self):
        if self.init:
            return self.init.config
        return _steps().read_config(self.cfg.config_file, self.preset)

    def learned_vocab(self, data_dir, train_files):
        return _steps().learned_vocab(os.path.join(data_dir, "gpt_vocab"), train_files,
                                      self.cfg.vocab_size)

    def side_writer(self, data_dir, vocab_file, sides):
        return _steps().window_writer(vocab_file, self.cfg.max_seq_length, self.cfg.seed)

    def vocab_size(self, train_source, vocab_file):
        try:
            return read_manifest(train_source)["vocab_size"]
        except ValueError as e:
            raise SystemExit(f"GPT reads records from tf_records.gpt.writer: {e}") from None

    def build_model(self, vocab_size):
        return _steps().build_model(self._config(), vocab_size, self.init,
                                    self.cfg.mixed_precision)

    def dataset(self, source, batch_size, model_config, start_batch=0, input_context=None,
                repeat=True, shuffle=True, length_grouping=0):
        del length_grouping  # LM windows are packed back to back: no padding to cut
        cfg = self.cfg
        return _steps().dataset(
            source, batch_size, shuffle_buffer=cfg.shuffle_buffer if shuffle else 0,
            seed=cfg.seed, input_context=input_context, start_batch=start_batch, repeat=repeat,
            model_config=model_config)

    def evaluate(self, model, model_config, heldout_source, train_source, vocab_file):
        """Held-out next-token accuracy and perplexity; a few greedy continuations."""
        cfg = self.cfg
        steps = _steps()
        results = {}
        if heldout_source:
            heldout = self.dataset(heldout_source, cfg.global_batch_size, model_config,
                                   repeat=False, shuffle=False)  # read once, in order
            train = self.dataset(train_source, cfg.global_batch_size, model_config,
                                 repeat=False, shuffle=False)  # read once, in order
            results = steps.heldout_scores(model, heldout, train, model_config.vocab_size)
        text = heldout_text(cfg)
        if vocab_file and cfg.fill_mask_examples and text:
            steps.say_continuations(model, vocab_file, text, cfg.fill_mask_examples,
                                    cfg.max_seq_length, cfg.seed)
        return results

    def export(self, model, vocab_file, export_dir):
        return _steps().export(model, vocab_file, export_dir, self.init, self.cfg.saved_model,
                               self.cfg.max_seq_length)


def learn_gpt_bpe(lines, files, vocab_size):
    """`training.gpt.pretraining_steps.learn_gpt_bpe`: `(vocab, merges)`
    learned from text `lines`, with progress lines."""
    return _steps().learn_gpt_bpe(lines, files, vocab_size)


RECIPE = GptRecipe
