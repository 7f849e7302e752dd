"""OpenAI GPT's pretraining recipe for `training.pretrain --model=gpt`:
a BPE vocabulary (vocab.json + merges.txt), contiguous token windows as
TFRecords, next-token LM, held-out perplexity against the unigram model,
greedy continuations, export.

The GPT paper pretrains on BooksCorpus windows of 512 contiguous tokens;
here the same objective runs on any text, by default the main job's
corpus, with the size ladder of `keras_bert_impl.gpt.GPT_PRESETS`.
"""

import os
import time

from training.pretraining.common import heldout_text
from training.pretraining.common import records_input
from training.pretraining.common import say
from training.pretraining.common import text_sources
from training.pretraining.recipe import PretrainRecipe

# The BERT size names of --preset's default mean the GPT ones of that size.
_SAME_SIZE = {"tiny": "gpt_tiny", "mini": "gpt_mini"}
MERGES_FILE = "merges.txt"


class GptRecipe(PretrainRecipe):
    name = "GPT"
    records_writer = "create_lm_data"
    record_kind = "lm"
    vocab_name = "vocab.json"
    merges_beside_vocab = True

    def __init__(self, cfg, init=None):
        super().__init__(cfg, init)
        if cfg.ablation:
            raise SystemExit(f"--ablation={cfg.ablation!r} is an option of BERT (--model=bert); "
                             "GPT has none.")
        from keras_bert_impl.gpt import GPT_PRESETS

        preset = _SAME_SIZE.get(cfg.preset, cfg.preset)
        if not init and not cfg.config_file and preset not in GPT_PRESETS:
            raise SystemExit(f"--preset={cfg.preset!r} is not a GPT size: "
                             f"{', '.join(sorted(GPT_PRESETS))} (or tiny, mini).")
        if cfg.vocab_file and not os.path.exists(_merges_beside(cfg.vocab_file)):
            raise SystemExit(f"--vocab_file={cfg.vocab_file}: GPT reads vocab.json with "
                             f"{MERGES_FILE} beside it; {_merges_beside(cfg.vocab_file)} is "
                             "missing.")
        self.preset = init.typed if init else preset
        self.check_positions(self._config())  # the size, read and checked before anything is written

    @staticmethod
    def read_hf_config(path):
        from keras_bert_impl.gpt.gpt_checkpoint import read_gpt_config

        return read_gpt_config(path)

    def _config(self):
        from keras_bert_impl.gpt import GptConfig
        from keras_bert_impl.gpt import gpt_preset

        cfg = self.cfg
        if self.init:
            return self.init.config
        try:
            return (GptConfig.from_json_file(cfg.config_file) if cfg.config_file
                    else gpt_preset(self.preset))
        except (ValueError, OSError) as e:
            raise SystemExit(f"--config_file={cfg.config_file}: {e}" if cfg.config_file
                             else str(e)) from None

    def _tokenizer(self, vocab_file):
        from keras_bert_impl.gpt.gpt_tokenizer import GptTokenizer

        return GptTokenizer(vocab_file, _merges_beside(vocab_file))

    def prepare_data(self):
        """-> (train records folder, held-out folder or None, vocab.json or None)."""
        cfg = self.cfg
        given = records_input(cfg)
        if given:
            return given
        from tf_records.command_line.progress import Reporter
        from tf_records.gpt.writer import write_lm_data

        data_dir, train_files, heldout_files = text_sources(cfg)
        vocab_file = cfg.vocab_file
        if not vocab_file:
            vocab_file = os.path.join(data_dir, "gpt_vocab", "vocab.json")
            if not os.path.exists(vocab_file):
                from keras_bert_impl.gpt.bpe_learner import write_bpe_files
                from tf_records.documents import read_documents

                start = time.time()
                lines = (line for document in read_documents(train_files) for line in document)
                vocab, merges = learn_gpt_bpe(lines, train_files, cfg.vocab_size)
                write_bpe_files(vocab, merges, os.path.dirname(vocab_file))
                say(f"Learned a {len(vocab)}-token BPE vocabulary ({len(merges)} merges, "
                    f"{time.time() - start:.0f} s) -> {os.path.dirname(vocab_file)}")
        tokenizer = self._tokenizer(vocab_file)
        sources = {}
        for side, files in (("train", train_files), ("heldout", heldout_files)):
            if not files:
                continue
            folder = os.path.join(data_dir, f"{side}_lm_records")
            sources[side] = folder
            if os.path.exists(os.path.join(folder, "manifest.json")):
                continue  # written by an earlier start of this run
            start = time.time()
            manifest = write_lm_data(
                files, tokenizer, folder, cfg.max_seq_length,
                [vocab_file, _merges_beside(vocab_file)], num_shards=4,
                random_seed=cfg.seed + (side == "heldout"), progress=Reporter(side))
            records = sum(s["records"] for s in manifest["shards"])
            say(f"Wrote {records} {side} windows of {cfg.max_seq_length + 1} tokens "
                f"({time.time() - start:.0f} s) -> {folder}")
        return sources["train"], sources.get("heldout"), vocab_file

    def vocab_size(self, train_source, vocab_file):
        from tf_records.manifest import read_manifest

        try:
            return read_manifest(train_source)["vocab_size"]
        except ValueError as e:
            raise SystemExit(f"GPT reads records from tf_records.gpt.writer: {e}") from None

    def build_model(self, vocab_size):
        from keras_bert_impl.gpt import GptBackbone
        from keras_bert_impl.gpt import GptCausalLM

        cfg = self.cfg
        dtype = "mixed_bfloat16" if cfg.mixed_precision else None
        if self.init:
            from keras_bert_impl.gpt import load_gpt_checkpoint

            config = self.init.config
            if vocab_size > config.vocab_size:
                raise SystemExit(f"The records' vocabulary has {vocab_size} ids; "
                                 f"--init_checkpoint={self.init.typed} embeds {config.vocab_size}.")
            backbone = load_gpt_checkpoint(self.init.path, dtype=dtype)
            say(f"From {self.init.typed}: GPT loaded (its LM head is the token table)")
            return GptCausalLM(backbone), config
        config = self._config().replace(vocab_size=vocab_size)
        return GptCausalLM(GptBackbone.from_config_object(config, dtype=dtype)), config

    def dataset(self, source, batch_size, model_config, start_batch=0, input_context=None,
                repeat=True, shuffle=True, length_grouping=0):
        del length_grouping  # LM windows are packed back to back: no padding to cut
        from tf_records.gpt.reader import lm_dataset

        cfg = self.cfg
        return lm_dataset(source, batch_size, shuffle_buffer=cfg.shuffle_buffer if shuffle else 0,
                          seed=cfg.seed, input_context=input_context, start_batch=start_batch,
                          repeat=repeat, model_config=model_config)

    def evaluate(self, model, model_config, heldout_source, train_source, vocab_file):
        """Held-out next-token accuracy and perplexity; a few greedy continuations."""
        from training.pretraining.evaluation import greedy_continuations
        from training.pretraining.evaluation import next_token_report

        cfg = self.cfg
        results = {}
        if heldout_source:
            heldout = self.dataset(heldout_source, cfg.global_batch_size, model_config,
                                   repeat=False, shuffle=False)
            train = self.dataset(train_source, cfg.global_batch_size, model_config,
                                 repeat=False, shuffle=False)
            results = next_token_report(model, heldout, train, model_config.vocab_size)
        text = heldout_text(cfg)
        if vocab_file and cfg.fill_mask_examples and text:
            import numpy as np

            from tf_records.documents import read_documents

            tokenizer = self._tokenizer(vocab_file)
            lines = [line for doc in read_documents(text) for line in doc
                     if len(line.split()) >= 12]
            rng = np.random.default_rng(cfg.seed)
            prompts = [tokenizer.encode(" ".join(str(line).split()[:8]))
                       for line in rng.permutation(lines)[:cfg.fill_mask_examples]]
            for prompt, more in zip(prompts, greedy_continuations(
                    model, prompts, 12, cfg.max_seq_length)):
                say(f"  {tokenizer.decode(prompt)!r} -> {tokenizer.decode(more)!r}")
        return results

    def export(self, model, vocab_file, export_dir):
        from keras_bert_impl.base.json_files import copy_atomic
        from keras_bert_impl.gpt.gpt_serving import export_gpt_saved_model

        os.makedirs(export_dir, exist_ok=True)
        path = os.path.join(export_dir, "causal_lm.keras")
        model.save(path)
        if vocab_file:  # beside the model, where `training.finetune --model=gpt` looks
            copy_atomic(vocab_file, os.path.join(export_dir, "vocab.json"))
            copy_atomic(_merges_beside(vocab_file), os.path.join(export_dir, MERGES_FILE))
        if self.init:  # also in the layout it came in
            from keras_bert_impl.gpt.gpt_checkpoint import save_gpt_checkpoint

            hf = os.path.join(export_dir, "hf")
            save_gpt_checkpoint(model.backbone, hf, [vocab_file, _merges_beside(vocab_file)])
            path = f"{path}; Hugging Face folder -> {hf}"
        if not self.cfg.saved_model:
            return f"Keras model -> {path}"
        saved = os.path.join(export_dir, "saved_model")
        signatures = export_gpt_saved_model(
            model, saved, vocab_file, _merges_beside(vocab_file) if vocab_file else None,
            self.cfg.max_seq_length)
        return f"SavedModel (signatures {', '.join(signatures)}) -> {saved}; Keras model -> {path}"


def learn_gpt_bpe(lines, files, vocab_size):
    """`bpe_from_counts` on text `lines` read from `files`, with progress
    lines: the words counted (MB of the files read, rate, ETA), then the
    merges learned (their ETA errs long: the first merges touch the most
    words, and learning stops early when every pair is rare).

    Returns:
        `(vocab, merges)`, as `learn_bpe`.
    """
    from keras_bert_impl.gpt.bpe_learner import bpe_from_counts
    from keras_bert_impl.gpt.bpe_learner import count_words
    from tf_records.command_line.progress import Reporter
    from tf_records.input_files import line_bytes
    from tf_records.input_files import text_meter

    reading = text_meter("Counting words", files)
    counts = count_words(reading.iterate(lines, size=line_bytes))
    reading.finish(words=len(counts))
    merging = Reporter().meter("Learning BPE merges", unit="merges")

    def on_merge(number, most, count):
        merging.total = most
        merging.update(number, frequency=count)

    vocab, merges = bpe_from_counts(counts, vocab_size=vocab_size, on_merge=on_merge)
    merging.finish(tokens=len(vocab))
    return vocab, merges


def _merges_beside(vocab_file):
    return os.path.join(os.path.dirname(os.path.abspath(vocab_file)), MERGES_FILE)


RECIPE = GptRecipe
