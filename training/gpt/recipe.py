"""OpenAI GPT's pretraining recipe for `training.pretrain --model=gpt`:
a BPE vocabulary (vocab.json + merges.txt), contiguous token windows as
TFRecords, next-token LM, held-out perplexity against the unigram model,
greedy continuations, export.

The GPT paper pretrains on BooksCorpus windows of 512 contiguous tokens;
here the same objective runs on any text, by default the main job's
corpus, with the size ladder of `keras_bert_impl.gpt.GPT_PRESETS`.
"""

import os

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
    flags = PretrainRecipe.flags + ("vocab_file", "shuffle_buffer", "fill_mask_examples")

    def __init__(self, init=None, manifests=None, **values):
        super().__init__(init, manifests, **values)
        flag = self.flag
        steps = _steps()
        preset = _SAME_SIZE.get(flag.preset, flag.preset)
        if not init and not flag.config_file:
            steps.check_preset(flag.preset, preset)
        if flag.vocab_file:
            steps.check_merges_beside(flag.vocab_file)
        self.preset = init.typed if init else preset
        self.check_positions(self._config())  # the size, read and checked before anything is written

    @staticmethod
    def read_hf_config(path):
        return _steps().read_hf_config(path)

    def _config(self):
        if self.init:
            return self.init.config
        return _steps().read_config(self.flag.config_file, self.preset)

    def learned_vocab(self, data_dir, train_files):
        return _steps().learned_vocab(os.path.join(data_dir, "gpt_vocab"), train_files,
                                      self.flag.vocab_size)

    def side_writer(self, data_dir, vocab_file, sides):
        return _steps().window_writer(vocab_file, self.flag.max_seq_length, self.flag.seed)

    def vocab_size(self, train_source, vocab_file, manifest=None):
        try:
            return (manifest or self.records_manifest(train_source))["vocab_size"]
        except ValueError as e:
            raise SystemExit(f"GPT reads records from tf_records.gpt.writer: {e}") from None

    def build_model(self, vocab_size):
        return _steps().build_model(self._config(), vocab_size, self.init,
                                    self.flag.mixed_precision)

    def dataset(self, source, batch_size, model_config, start_batch=0, input_context=None,
                repeat=True, shuffle=True, length_grouping=0):
        del length_grouping  # LM windows are packed back to back: no padding to cut
        flag = self.flag
        return _steps().dataset(
            source, batch_size, shuffle_buffer=flag.shuffle_buffer if shuffle else 0,
            seed=flag.seed, input_context=input_context, start_batch=start_batch, repeat=repeat,
            model_config=model_config)

    def evaluate(self, model, model_config, heldout_source, train_source, vocab_file, text):
        """Held-out next-token accuracy and perplexity; a few greedy
        continuations of the held-out `text` files (or None)."""
        flag = self.flag
        steps = _steps()
        results = {}
        if heldout_source:
            heldout = self.dataset(heldout_source, flag.global_batch_size, model_config,
                                   repeat=False, shuffle=False)  # read once, in order
            train = self.dataset(train_source, flag.global_batch_size, model_config,
                                 repeat=False, shuffle=False)  # read once, in order
            results = steps.heldout_scores(model, heldout, train, model_config.vocab_size)
        if vocab_file and flag.fill_mask_examples and text:
            steps.say_continuations(model, vocab_file, text, flag.fill_mask_examples,
                                    flag.max_seq_length, flag.seed)
        return results

    def export(self, model, vocab_file, export_dir):
        return _steps().export(model, vocab_file, export_dir, self.init, self.flag.saved_model,
                               self.flag.max_seq_length)

    def runtime_tokenizer(self, vocab_file):
        merges = os.path.join(os.path.dirname(os.path.abspath(vocab_file)), "merges.txt")
        return runtime_tokenizer(vocab_file, merges)


def learn_gpt_bpe(lines, files, vocab_size):
    """`training.gpt.pretraining_steps.learn_gpt_bpe`: `(vocab, merges)`
    learned from text `lines`, with progress lines."""
    return _steps().learn_gpt_bpe(lines, files, vocab_size)


RECIPE = GptRecipe


def runtime_tokenizer(vocab_file, merges_file):
    """`text_to_ids.py`'s BPE tokenizer beside a runtime export
    (`PretrainRecipe.runtime_tokenizer`; fine-tuning's too)."""
    vocab, merges = (os.path.basename(f) for f in (vocab_file, merges_file))
    return ([vocab_file, merges_file], "from keras_bert_impl.gpt.gpt_tokenizer import GptTokenizer",
            f"GptTokenizer(os.path.join(HERE, {vocab!r}), os.path.join(HERE, {merges!r}))")
