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

import dataclasses
import os
import time

from training.pretraining.common import heldout_text
from training.pretraining.common import records_input
from training.pretraining.common import say
from training.pretraining.common import text_sources
from training.pretraining.recipe import PretrainRecipe

ABLATIONS = ("", "no_nsp", "ltr")


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

    def __init__(self, cfg, init=None, records_prefix=""):
        super().__init__(cfg, init)
        self.records_prefix = records_prefix  # "phase2_": the second phase's records
        if cfg.ablation not in ABLATIONS:
            raise SystemExit(f"--ablation={cfg.ablation!r} is not one of BERT's: "
                             f"{', '.join(repr(a) for a in ABLATIONS)}.")
        from tf_records.bert.instances import INPUT_FORMATS

        if cfg.input_format not in INPUT_FORMATS:
            raise SystemExit(f"--input_format={cfg.input_format!r} is not one of "
                             f"{', '.join(INPUT_FORMATS)}.")
        from keras_bert_impl.bert.bert_config import PRESETS

        if not init and not cfg.config_file and cfg.preset not in PRESETS:
            raise SystemExit(f"--preset={cfg.preset!r} is not a BERT size: "
                             f"{', '.join(PRESETS)}.")
        self.check_positions(self._config())  # the size, read and checked before anything is written
        self.preset = init.typed if init else cfg.preset
        self.ablation = _objective(cfg.ablation, cfg.input_format)

    def _config(self):
        """The model's `BertConfig` from `--config_file` or `--preset` (its
        vocab_size is the data's, set later)."""
        from keras_bert_impl import BertConfig
        from keras_bert_impl import preset

        cfg = self.cfg
        if self.init:
            return self.init.config
        try:
            return BertConfig.from_json_file(cfg.config_file) if cfg.config_file else preset(
                cfg.preset)
        except (ValueError, OSError) as e:
            raise SystemExit(f"--config_file={cfg.config_file}: {e}" if cfg.config_file
                             else str(e)) from None

    def prepare_data(self):
        """-> (train records source, held-out source or None, vocab file or None)."""
        cfg = self.cfg
        given = records_input(cfg)
        if given:
            self.ablation = _objective(cfg.ablation, _records_format(given[0]))
            return given
        from tf_records.bert.instances import InstanceConfig
        from tf_records.bert.writer import WriterConfig
        from tf_records.bert.writer import write_pretraining_data

        data_dir, train_files, heldout_files = text_sources(cfg)
        vocab_file = cfg.vocab_file
        if not vocab_file:
            vocab_file = os.path.join(data_dir, "vocab.txt")
            if not os.path.exists(vocab_file):
                from keras_bert_impl.bert.wordpiece_learner import write_vocab
                from tf_records.documents import read_documents

                start = time.time()
                lines = (line for document in read_documents(train_files) for line in document)
                tokens = learn_wordpiece(lines, train_files, cfg.vocab_size, cfg.do_lower_case)
                write_vocab(tokens, vocab_file)
                say(f"Learned a {len(tokens)}-token WordPiece vocabulary "
                    f"({time.time() - start:.0f} s) -> {vocab_file}")
        # The default corpus: no line of ours runs past an instance (checked
        # again only while some records are still to be written).
        written = all(os.path.exists(os.path.join(
            data_dir, f"{self.records_prefix}{side}_records", "manifest.json"))
            for side, files in (("train", train_files), ("heldout", heldout_files)) if files)
        if not cfg.input and not written:
            from keras_bert_impl.bert.bert_tokenizer import BertTokenizer
            from training.pretraining.default_corpus import split_long_lines

            tokenizer = BertTokenizer(vocab_file, do_lower_case=cfg.do_lower_case)
            split = split_long_lines(train_files + (heldout_files or []),
                                     lambda text: len(tokenizer.tokenize(text)),
                                     cfg.max_seq_length - 3)  # [CLS] A [SEP] B [SEP]
            if split:
                say(f"Default corpus: {split} lines longer than {cfg.max_seq_length - 3} "
                    "tokens split at word boundaries")
        instance_config = InstanceConfig(
            max_seq_length=cfg.max_seq_length,
            max_predictions_per_seq=cfg.max_predictions_per_seq,
            do_whole_word_mask=cfg.do_whole_word_mask, input_format=cfg.input_format,
            chinese_word_segmenter=cfg.chinese_word_segmenter)
        sources = {}
        for side, files, dupe in (("train", train_files, cfg.dupe_factor),
                                  ("heldout", heldout_files, 1)):
            if not files:
                continue
            folder = os.path.join(data_dir, f"{self.records_prefix}{side}_records")
            sources[side] = folder
            if os.path.exists(os.path.join(folder, "manifest.json")):
                continue  # written by an earlier start of this run
            start = time.time()
            manifest = write_pretraining_data(
                files, vocab_file, folder, instance_config,
                WriterConfig(dupe_factor=dupe, random_seed=cfg.seed + (side == "heldout"),
                             do_lower_case=cfg.do_lower_case, num_workers=cfg.data_workers,
                             documents_per_block=500),
                progress=writing_progress(f"Writing {side} instances", files))
            records = sum(s["records"] for s in manifest["shards"])
            say(f"Wrote {records} {side} instances in {len(manifest['shards'])} shards "
                f"({time.time() - start:.0f} s) -> {folder}")
        return sources["train"], sources.get("heldout"), vocab_file

    def vocab_size(self, train_source, vocab_file):
        if os.path.isdir(train_source) or train_source.endswith(".json"):
            from tf_records.manifest import read_manifest

            return read_manifest(train_source)["vocab_size"]
        if not vocab_file:
            raise SystemExit("TFRecords without a manifest need --vocab_file (for the "
                             "vocabulary size).")
        from keras_bert_impl.bert.wordpiece import load_vocab

        return max(load_vocab(vocab_file).values()) + 1

    def build_model(self, vocab_size):
        from keras_bert_impl import BertBackbone
        from keras_bert_impl import BertCausalLMPretrainer
        from keras_bert_impl import BertMaskedLMPretrainer
        from keras_bert_impl import BertPretrainer

        cfg = self.cfg
        config = self._config()
        if self.init and vocab_size > config.vocab_size:
            raise SystemExit(f"The records' vocabulary has {vocab_size} ids; "
                             f"--init_checkpoint={self.init.typed} embeds {config.vocab_size}.")
        if not self.init:
            config = dataclasses.replace(config, vocab_size=vocab_size)
        dtype = "mixed_bfloat16" if cfg.mixed_precision else None
        backbone = BertBackbone.from_bert_config(config, causal=self.ablation == "ltr", dtype=dtype)
        pretrainer = {"": BertPretrainer, "no_nsp": BertMaskedLMPretrainer,
                      "ltr": BertCausalLMPretrainer}[self.ablation](backbone)
        if self.init:
            from training.pretraining.continued import load_init_weights

            load_init_weights(self.init, pretrainer)
        return pretrainer, config

    def dataset(self, source, batch_size, model_config, start_batch=0, input_context=None,
                repeat=True, shuffle=True, length_grouping=0):
        """The pretraining batches, turned into this ablation's targets
        (`length_grouping`: see `pretraining_dataset`)."""
        from tf_records.bert.reader import pretraining_dataset
        from tf_records.bert.schema import RecordSchema
        from tf_records.plain import plain

        cfg = self.cfg
        # Records without our manifest (e.g. from the original script): their
        # lengths are the flags'. With a manifest the reader takes its schema.
        schema = None if os.path.isdir(source) or source.endswith(".json") else (
            RecordSchema(cfg.max_seq_length, cfg.max_predictions_per_seq))
        ds = pretraining_dataset(
            source, batch_size, schema=schema, input_context=input_context,
            shuffle_buffer=cfg.shuffle_buffer if shuffle else 0, seed=cfg.seed, repeat=repeat,
            model_config=model_config, start_batch=start_batch, length_grouping=length_grouping)
        if self.ablation == "no_nsp":
            ds = ds.map(plain(lambda x, y, w: (x, {"masked_lm": y["masked_lm"]},
                                               {"masked_lm": w["masked_lm"]})))
        elif self.ablation == "ltr":
            from tf_records.bert.reader import to_left_to_right

            ds = ds.map(plain(to_left_to_right))
        return ds

    def evaluate(self, model, model_config, heldout_source, train_source, vocab_file):
        """Held-out scores against the frequency baseline, and a few examples."""
        from training.pretraining.evaluation import evaluate
        from training.pretraining.evaluation import fill_mask_examples
        from training.pretraining.evaluation import next_token_report

        cfg = self.cfg
        results = {}
        if heldout_source:
            heldout = self.dataset(heldout_source, cfg.global_batch_size, model_config,
                                   repeat=False, shuffle=False)
            train = self.dataset(train_source, 256, model_config, repeat=False, shuffle=False)
            if self.ablation == "ltr":
                results = next_token_report(model, heldout, train, model_config.vocab_size)
            else:
                results = evaluate(model, heldout, train, model_config.vocab_size)
        text = heldout_text(cfg)
        if self.ablation != "ltr" and vocab_file and cfg.fill_mask_examples and text:
            for sentence, truth, guesses in fill_mask_examples(
                    model, vocab_file, cfg, text, cfg.fill_mask_examples):
                say(f"  {sentence}\n    [MASK] = {truth!r}; model guesses {guesses}")
        return results

    def export(self, model, vocab_file, export_dir):
        from keras_bert_impl.bert.bert_serving import export_saved_model

        cfg = self.cfg
        os.makedirs(export_dir, exist_ok=True)
        saved = ""
        if cfg.saved_model:
            path = os.path.join(export_dir, "saved_model")
            export_saved_model(model, path, vocab_file, cfg.do_lower_case, cfg.max_seq_length)
            signatures = ("serving_default, serving_text, serving_text_pair" if vocab_file
                          else "serving_default")
            saved = f"SavedModel (signatures {signatures}) -> {path}; "
        if self.init:  # also in the layout it came in
            from training.pretraining.continued import save_like_init

            saved += save_like_init(self.init, model, vocab_file, export_dir)
        keras_file = os.path.join(export_dir, "pretrainer.keras")
        model.save(keras_file)
        return f"{saved}Keras model -> {keras_file}"


    @staticmethod
    def check_vocab_file(path):
        from tf_records.bert.writer import check_vocab_file

        check_vocab_file(path)


RECIPE = BertRecipe


def learn_wordpiece(lines, files, vocab_size, do_lower_case, num_unused=99):
    """`learn_vocab` on text `lines` read from `files`, with progress lines:
    the words counted (MB of the files read, rate, ETA), then each round of
    the WordPiece threshold search (its ETA an upper bound: the search may
    end before its last possible round). `num_unused`: `[unusedN]` slots."""
    from keras_bert_impl.bert.wordpiece_learner import count_words
    from keras_bert_impl.bert.wordpiece_learner import learn_from_counts
    from keras_bert_impl.bert.wordpiece_learner import reserved_tokens
    from tf_records.command_line.progress import Reporter
    from tf_records.input_files import line_bytes
    from tf_records.input_files import text_meter

    reading = text_meter("Counting words", files)
    counts = count_words(reading.iterate(lines, size=line_bytes), do_lower_case)
    reading.finish(words=len(counts))
    if not counts:
        raise SystemExit(f"No words in {', '.join(files)}: cannot learn a vocabulary.")
    search = Reporter().meter("Learning WordPiece vocabulary", unit="rounds")

    def on_round(number, most, threshold, size):
        search.total = most
        search.update(number, threshold=threshold, tokens=size)

    tokens = learn_from_counts(counts, vocab_size, reserved_tokens(num_unused), on_round=on_round)
    search.finish(tokens=len(tokens))
    return tokens


def writing_progress(what, files, every_seconds=None):
    """`write_pretraining_data`'s `progress`: documents and instances written,
    and the share of the text read (its rate and ETA)."""
    from tf_records.input_files import text_meter

    meter = text_meter(what, files, every_seconds=every_seconds)

    def report(documents, instances, text_bytes):
        meter.update(text_bytes, documents=documents, instances=instances)

    return report


def _objective(ablation, input_format):
    """The pretrainer's objective: rows without sentence pairs have no NSP."""
    if input_format != "segment_pair" and not ablation:
        say(f"{input_format} rows have no sentence pairs: MLM only (no NSP), as RoBERTa.")
        return "no_nsp"
    return ablation


def _records_format(source):
    """The `input_format` a records folder or manifest was written with."""
    if not (os.path.isdir(source) or source.endswith(".json")):
        return "segment_pair"  # bare shards (e.g. the original script's): pairs
    from tf_records.manifest import read_manifest

    return read_manifest(source).get("instance_config", {}).get("input_format", "segment_pair")
