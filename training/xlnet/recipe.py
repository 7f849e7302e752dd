"""XLNet's pretraining recipe for `training.pretrain --model=xlnet`: a
SentencePiece model learned from the text, XLNet's records (`reuse_len`
tokens + A <sep> B <sep> <cls>, span masking, B interleaved streams), the
permutation LM with Transformer-XL memory carried from batch to batch,
held-out permutation-LM accuracy and perplexity against the unigram model,
export.

Over 400 lines: one recipe class, the steps `training.pretrain` calls, under
this docstring's map of the original's flags; each family's recipe is one
file.

Yang et al. 2019 pretrain XLNet-Large on 512-token records (reuse_len 256,
mem_len 384, perm_size 256, num_predict 85, bi_data) in batches of 2048
streams (`train_gpu.py` / `train_tpu.py`). Here the same objective runs on
any text (one sentence per line, blank lines between documents), by default
the main job's corpus, and the trainer's flags map as:

- `--max_seq_length` = `seq_len` (L); `reuse_len` = L / 2 and `perm_size`
  = `reuse_len`, XLNet-Large's ratios; `--max_predictions_per_seq` =
  `num_predict` (XLNet-Large: about L / 6);
- `--global_batch_size` = the streams (`bsz_per_host`): row k of batch t + 1
  continues row k of batch t, so the records are read in order, never
  shuffled (`--shuffle_buffer` and `--length_grouping` do not apply);
- `--dupe_factor` = the original's `num_passes`: the text is written that
  many times over, each pass with its own A/B choices and span masks (the
  factorization orders are drawn anew on every read anyway);
- `--vocab_size` = the SentencePiece model's pieces (unigram, XLNet's
  special symbols at its ids; `training.learn_vocab --model=xlnet`), or
  `--vocab_file=spiece.model`; `--do_lower_case` as the original's
  `--uncased`;
- `--preset`: `tiny` (the default: BERT-Tiny's shape, 2 x 128, for CPUs),
  `debug` (`xlnet_debug`, the original `train_gpu.py` defaults), `base`,
  `large` (the released shapes), or any `XLNET_PRESETS` name;
  `--config_file` a Hugging Face xlnet `config.json` whose `mem_len`,
  `reuse_len` and `bi_data` are kept. Memory: `mem_len` = the config's, or
  `reuse_len`: each layer then remembers exactly the states of the text
  that precedes the record (its row's previous record's reused half).

With `--input=<records folder>` (or the original `data_utils.py`'s files
by pattern, whose lengths are then the flags') the records' own lengths
are used and `--global_batch_size` must equal their streams.

Memory and strategies: the memory is a variable of `XLNetPretrainer`, one
row per stream, no gradient. One device, `MirroredStrategy` or
`MultiWorkerMirroredStrategy`: each replica keeps its own rows, replica r
of R holding streams r * B / R .. (r + 1) * B / R - 1 of every batch, the
split of one batch in order. Each worker's input pipeline reads every
record and keeps its replicas' streams only (`xlnet.reader`), so R
replicas on any number of workers see the one device's batches, row for
row and permutation for permutation (tested against one device with 2
workers). TPUs are refused: the per-replica memory is untested there (the
step itself, memory carried, compiles under XLA: `--jit_compile`, tested).
Resume: the checkpoints hold the memory, so a resumed run on one
device continues every stream exactly where it stopped (tested: bit-exact
with the uninterrupted run). With several replicas a checkpoint holds
replica 0's copy only (`tf.distribute` saves one copy of a per-replica
variable and restores it to every replica), so a resumed run on several
replicas starts from zero memory, as every run starts, rather than give
replica r replica 0's rows.

Export (`--output_dir/export`): a Hugging Face xlnet folder
(`config.json`, `model.safetensors` of an `XLNetLMHeadModel`,
`spiece.model`, `tokenizer_config.json`), `pretrainer.keras` (the
`XLNetPretrainer`; `training.finetune --model=xlnet --init_checkpoint=`
either of them finds `spiece.model` beside it) and `saved_model`
(stateless, float32): `serving_default` (ids -> the content stream),
`serving_plm` (+ `perm_mask`, `target_mapping` -> the permutation LM's
logits) and `serving_text` (raw text, tokenized in the graph as
`XLNetTokenizer`, packed as XLNet's fine-tuning inputs: `<cls>` last, left
padding).
"""

import dataclasses
import os
import time

from training.pretraining.common import heldout_text
from training.pretraining.common import is_tfrecords
from training.pretraining.common import say
from training.pretraining.common import text_sources
from training.pretraining.recipe import PretrainRecipe

# B=batch (streams), L=seq_len, P=num_predict, V=vocab, H=d_model

# The BERT size names of --preset mean the XLNet ones of that shape.
_SAME_SIZE = {"tiny": "xlnet_tiny", "debug": "xlnet_debug", "base": "xlnet_base",
              "large": "xlnet_large"}
SPM_FILE = "spiece.model"


def tiny_config():
    """`xlnet_tiny`: BERT-Tiny's shape (2 layers x 128, 2 heads of 64, FFN
    512, GELU) as an XLNet, with the release's untied biases.

    Dropout 0: on the main job's CPU budget (1000 steps) it learns faster
    without (held-out permutation-LM perplexity 167 vs 245 with 0.1 after
    600 steps of 32 x 64 tokens, measured), and resumed runs are then
    bit-exact.
    """
    from keras_bert_impl.xlnet import XLNetConfig

    return XLNetConfig(d_model=128, n_layer=2, n_head=2, d_head=64, d_inner=512,
                       ff_activation="gelu", untie_r=True, dropout=0.0)


def _preset_config(name):
    from keras_bert_impl.xlnet import XLNET_PRESETS

    if name == "xlnet_tiny":
        return tiny_config()
    return XLNET_PRESETS[name]


class XLNetRecipe(PretrainRecipe):
    name = "XLNet"
    records_writer = "create_xlnet_data"
    record_kind = "xlnet"
    vocab_name = "spiece.model"
    cased_releases = True
    bfloat16_pays = True
    evaluates_at_start = False

    def __init__(self, cfg, init=None):
        super().__init__(cfg, init)
        if cfg.ablation:
            raise SystemExit(f"--ablation={cfg.ablation!r} is an option of BERT (--model=bert); "
                             "XLNet has none.")
        from keras_bert_impl.xlnet import XLNET_PRESETS
        from keras_bert_impl.xlnet import XLNetConfig

        preset = _SAME_SIZE.get(cfg.preset, cfg.preset)
        if not init and not cfg.config_file and preset not in (*XLNET_PRESETS, "xlnet_tiny"):
            raise SystemExit(f"--preset={cfg.preset!r} is not an XLNet size: "
                             f"{', '.join(sorted((*XLNET_PRESETS, 'xlnet_tiny')))} "
                             f"(or {', '.join(_SAME_SIZE)}).")
        try:
            config = init.config if init else (
                XLNetConfig.from_json_file(cfg.config_file) if cfg.config_file
                else _preset_config(preset))
        except (ValueError, OSError) as e:
            raise SystemExit(f"--config_file={cfg.config_file}: {e}") from None
        if cfg.strategy == "tpu":
            raise SystemExit(
                "--strategy=tpu: XLNet trains on one device, --strategy=mirrored or "
                "--strategy=multi_worker. The memory each replica keeps for its streams (row k "
                "of a batch continues row k of the one before) is not tested on TPUs.")
        if cfg.strategy in ("mirrored", "multi_worker") and config.bi_data:
            raise SystemExit(
                f"--strategy={cfg.strategy} with bi_data=True: each replica's share of the batch "
                "must hold forward and backward rows, which the records lay out for one replica "
                "here. Train bi_data on one device.")
        if cfg.vocab_file:
            from keras_bert_impl.xlnet.xlnet_tokenizer import XLNetTokenizer

            try:
                XLNetTokenizer(cfg.vocab_file, do_lower_case=cfg.do_lower_case)
            except ValueError as e:
                raise SystemExit(f"--vocab_file: {e}") from None
        self.preset = init.typed if init else preset
        self.config = config
        self.schema = self._schema(config)

    @staticmethod
    def read_hf_config(path):
        from keras_bert_impl.xlnet.xlnet_checkpoint import read_xlnet_config

        return read_xlnet_config(path)

    def _schema(self, config):
        """The records' schema: read from a records folder, else from the flags."""
        from tf_records.xlnet.schema import XLNetRecordSchema

        cfg = self.cfg
        if is_tfrecords(cfg.input) and (os.path.isdir(cfg.input) or cfg.input.endswith(".json")):
            from tf_records.manifest import read_manifest

            try:
                manifest = read_manifest(cfg.input)
            except ValueError as e:
                raise SystemExit(f"--input={cfg.input}: {e}") from None
            if manifest["schema"].get("kind") != XLNetRecordSchema.kind:
                raise SystemExit(
                    f"--input={cfg.input} holds {manifest['schema'].get('kind', 'BERT')!r} "
                    "records, not XLNet's (tf_records.create_xlnet_data writes those).")
            schema = XLNetRecordSchema.from_manifest(manifest["schema"])
        else:
            seq_len = cfg.max_seq_length
            try:
                schema = XLNetRecordSchema(
                    seq_len=seq_len, reuse_len=config.reuse_len or seq_len // 2,
                    batch_size=cfg.global_batch_size, num_predict=cfg.max_predictions_per_seq,
                    bi_data=config.bi_data)
            except ValueError as e:
                raise SystemExit(f"XLNet's records from --max_seq_length={seq_len}, "
                                 f"--max_predictions_per_seq={cfg.max_predictions_per_seq}, "
                                 f"--global_batch_size={cfg.global_batch_size}: {e}") from None
        if schema.batch_size != cfg.global_batch_size:
            raise SystemExit(
                f"--global_batch_size={cfg.global_batch_size}, but {cfg.input} holds "
                f"{schema.batch_size} interleaved streams: row k of every batch must continue "
                f"row k of the one before (the memory). Use --global_batch_size="
                f"{schema.batch_size}, or write the records again with that batch.")
        if config.reuse_len and config.reuse_len != schema.reuse_len:
            raise SystemExit(
                f"The model config says reuse_len={config.reuse_len}, the records "
                f"{schema.reuse_len}: the memory caches the records' reused part.")
        if config.bi_data != schema.bi_data:
            raise SystemExit(f"The model config says bi_data={config.bi_data}, the records "
                             f"{schema.bi_data}.")
        if (schema.seq_len - schema.reuse_len) % schema.reuse_len:
            raise SystemExit(
                f"seq_len={schema.seq_len} with reuse_len={schema.reuse_len}: the permutation "
                f"blocks (perm_size = reuse_len) must also divide the other "
                f"{schema.seq_len - schema.reuse_len} tokens. Use an even --max_seq_length (or "
                "a reuse_len that divides it).")
        return schema

    def _tokenizer(self, vocab_file):
        from keras_bert_impl.xlnet.xlnet_tokenizer import XLNetTokenizer

        return XLNetTokenizer(vocab_file, do_lower_case=self.cfg.do_lower_case)

    def prepare_data(self):
        """-> (train records, held-out records or None, spiece.model or None)."""
        cfg = self.cfg
        if is_tfrecords(cfg.input):
            heldout = cfg.heldout_input or None
            if heldout and not is_tfrecords(heldout):
                raise SystemExit("--heldout_input must be TFRecords when --input is.")
            return cfg.input, heldout, cfg.vocab_file or None
        from tf_records.command_line.progress import Reporter
        from tf_records.xlnet.writer import tokenized_documents

        data_dir, train_files, heldout_files = text_sources(cfg)
        vocab_file = cfg.vocab_file or self._learn_vocab(data_dir, train_files)
        tokenizer = self._tokenizer(vocab_file)
        schema = dataclasses.replace(self.schema, sep_id=tokenizer.sep_id,
                                     cls_id=tokenizer.cls_id)
        self.schema = schema
        sources = {}
        for side, files in (("train", train_files), ("heldout", heldout_files)):
            if not files:
                continue
            folder = os.path.join(data_dir, f"{side}_xlnet_records")
            if os.path.exists(os.path.join(folder, "manifest.json")):
                sources[side] = folder  # written by an earlier start of this run
                continue
            start = time.time()
            if side == "train":
                passes = max(1, cfg.dupe_factor)
                documents = _every_pass(files, tokenizer, passes)
                side_schema = schema
            else:
                passes = 1
                documents = list(tokenized_documents(files, tokenizer, Reporter(side)))
                side_schema = _heldout_schema(schema, documents)
                if side_schema is None:
                    say(f"The held-out text is too short for one record of {schema.seq_len} "
                        "tokens: no held-out evaluation.")
                    continue
            manifest = self._write(documents, folder, side_schema, tokenizer, vocab_file,
                                   cfg.seed + (side == "heldout"), Reporter(side))
            sources[side] = folder
            say(f"Wrote {manifest['batches']} {side} batches of {side_schema.batch_size} streams "
                f"x {schema.seq_len} tokens (reuse {schema.reuse_len}, {schema.num_predict} "
                f"predicted; {manifest['documents']} documents, {manifest['tokens']} tokens"
                f"{f', {passes} passes' if passes > 1 else ''}; {time.time() - start:.0f} s) "
                f"-> {folder}")
        return sources["train"], sources.get("heldout"), vocab_file

    def _learn_vocab(self, data_dir, train_files):
        folder = os.path.join(data_dir, "xlnet_vocab")
        path = os.path.join(folder, SPM_FILE)
        if os.path.exists(path):
            return path
        from keras_bert_impl.xlnet.spm_learner import learn_sentencepiece
        from tf_records.command_line.progress import Reporter

        start = time.time()
        try:
            path = learn_sentencepiece(train_files, folder, self.cfg.vocab_size,
                                       do_lower_case=self.cfg.do_lower_case, progress=Reporter())
        except ValueError as e:
            raise SystemExit(f"{e} (a smaller --vocab_size, or more text)") from None
        say(f"Learned a {self.cfg.vocab_size}-piece SentencePiece model "
            f"({'uncased' if self.cfg.do_lower_case else 'cased'}, {time.time() - start:.0f} s) "
            f"-> {path}")
        return path

    def _write(self, documents, folder, schema, tokenizer, vocab_file, seed, progress):
        from tf_records.xlnet.writer import write_xlnet_records

        try:
            return write_xlnet_records(
                documents, folder, schema, tokenizer.vocab_size, tokenizer.is_start_piece,
                [vocab_file], eod_id=tokenizer.eod_id, random_seed=seed, progress=progress)
        except ValueError as e:
            raise SystemExit(f"XLNet records for {folder}: {e}") from None

    def vocab_size(self, train_source, vocab_file):
        if not (os.path.isdir(train_source) or train_source.endswith(".json")):
            if not vocab_file:
                raise SystemExit("XLNet records without a manifest need --vocab_file "
                                 "(spiece.model, for the vocabulary size).")
            return self._tokenizer(vocab_file).vocab_size
        from tf_records.manifest import read_manifest

        manifest = read_manifest(train_source)
        if manifest["schema"].get("kind") != "xlnet":
            raise SystemExit(f"{train_source} does not hold XLNet records "
                             "(tf_records.create_xlnet_data).")
        return manifest["vocab_size"]

    def model_config(self, vocab_size):
        """The resolved `XLNetConfig`: the data's vocabulary, reuse_len and memory."""
        schema = self.schema
        return self.config.replace(vocab_size=vocab_size, reuse_len=schema.reuse_len,
                                   mem_len=self.config.mem_len or schema.reuse_len)

    def build_model(self, vocab_size):
        import tensorflow as tf

        from keras_bert_impl.xlnet import XLNetBackbone
        from keras_bert_impl.xlnet import XLNetPretrainer

        strategy = tf.distribute.get_strategy()
        if isinstance(strategy, tf.distribute.TPUStrategy):
            raise ValueError(f"XLNet's pretraining does not run under {type(strategy).__name__}: "
                             "one device, --strategy=mirrored or --strategy=multi_worker.")
        config = self.model_config(vocab_size)
        if config.bi_data and strategy.num_replicas_in_sync > 1:
            raise ValueError("bi_data=True needs one replica: the records put the forward and "
                             "backward rows of one replica's batch side by side.")
        dtype = "mixed_bfloat16" if self.cfg.mixed_precision else None
        if self.init:
            from keras_bert_impl.xlnet import load_xlnet_pretrainer

            if vocab_size > self.config.vocab_size:
                raise SystemExit(f"The records' vocabulary has {vocab_size} ids; --init_checkpoint="
                                 f"{self.init.typed} embeds {self.config.vocab_size}.")
            config = config.replace(vocab_size=self.config.vocab_size)
            pretrainer = load_xlnet_pretrainer(
                self.init.path, max_batch_size=self.cfg.global_batch_size, dtype=dtype,
                reuse_len=config.reuse_len, mem_len=config.mem_len)
            say(f"From {self.init.typed}: XLNet loaded (reuse_len {config.reuse_len}, mem_len "
                f"{config.mem_len} from the records)")
            return pretrainer, config
        backbone = XLNetBackbone.from_config_object(config, two_stream=True, dtype=dtype)
        # Memory rows for the whole batch in every replica (a replica uses
        # its first B / R): the same shape inside and outside a strategy,
        # so the trained weights copy into a local model for evaluation.
        return XLNetPretrainer(backbone, max_batch_size=self.cfg.global_batch_size), config

    def after_restore(self, model, strategy):
        """After a checkpoint restore: zero the memory under several replicas
        (the checkpoint holds replica 0's copy only; see the module docstring)."""
        if strategy.num_replicas_in_sync > 1:
            model.reset_states()
            say("Memory starts from zeros: a checkpoint keeps one replica's memory only.")

    def dataset(self, source, batch_size, model_config, start_batch=0, input_context=None,
                repeat=True, shuffle=True, length_grouping=0):
        """The streams' batches in order (never shuffled, whatever `shuffle`
        says; every record is `seq_len` long, so no length grouping).

        A `batch_size` below the records' streams (a replica's share) reads
        whole batches and splits each in order: replica r gets the same
        rows every step. With `input_context`'s N pipelines (workers), this
        one keeps its replicas' B / N streams. `start_batch` counts
        batches of `batch_size` of this pipeline.
        """
        del shuffle, length_grouping
        from tf_records.xlnet.reader import xlnet_pretraining_dataset

        schema = None
        if not (os.path.isdir(source) or source.endswith(".json")):
            schema = self.schema  # the original's files: the flags' lengths
        streams = self._streams(source)
        pipelines = input_context.num_input_pipelines if input_context else 1
        if streams % (batch_size * pipelines):
            raise SystemExit(f"{source} holds {streams} streams, which do not split into "
                             f"{pipelines} input pipeline(s) of per-replica batches of "
                             f"{batch_size}.")
        parts = streams // (batch_size * pipelines)  # this pipeline's replicas
        try:
            ds = xlnet_pretraining_dataset(
                source, streams, seed=self.cfg.seed, schema=schema,
                start_batch=start_batch // parts, repeat=repeat, model_config=model_config,
                input_context=input_context)
        except ValueError as e:
            raise SystemExit(str(e)) from None
        if parts > 1:
            ds = ds.rebatch(batch_size).skip(start_batch % parts)
        return ds

    def pipeline_streams(self, source, input_context):
        """What this worker's input pipeline reads, for its first line."""
        streams = self._streams(source)
        rows = streams // input_context.num_input_pipelines
        first = input_context.input_pipeline_id * rows
        return f"keeps streams {first}-{first + rows - 1} of {streams} (reading every record)"

    def _streams(self, source):
        if os.path.isdir(source) or source.endswith(".json"):
            from tf_records.manifest import read_manifest

            return read_manifest(source)["schema"]["batch_size"]
        return self.schema.batch_size

    def evaluate(self, model, model_config, heldout_source, train_source, vocab_file):
        """Held-out permutation-LM accuracy and perplexity against the unigram
        model of the training targets; a few words filled in."""
        from tf_records.xlnet.reader import target_counts
        from training.pretraining.evaluation import fill_in_examples
        from training.pretraining.evaluation import plm_report

        results = {}
        if heldout_source:
            heldout = self.dataset(heldout_source, self._streams(heldout_source), model_config,
                                   repeat=False)
            results = plm_report(model, heldout, target_counts(train_source, model_config.vocab_size,
                                                               self.schema))
        text = heldout_text(self.cfg)
        if vocab_file and self.cfg.fill_mask_examples and text:
            tokenizer = self._tokenizer(vocab_file)
            for masked, truth, guess in fill_in_examples(
                    model, tokenizer, text, self.cfg.fill_mask_examples, self.schema.seq_len,
                    self.cfg.seed):
                say(f"  {masked!r}: <mask> = {guess!r} ({truth!r})")
        return results

    def export(self, model, vocab_file, export_dir):
        from keras_bert_impl.base.json_files import copy_atomic
        from keras_bert_impl.xlnet import save_xlnet_checkpoint
        from keras_bert_impl.xlnet.xlnet_serving import export_xlnet_pretrainer_saved_model

        os.makedirs(export_dir, exist_ok=True)
        save_xlnet_checkpoint(model, export_dir)  # config.json + model.safetensors
        if vocab_file:  # beside the weights, where training.finetune --model=xlnet looks
            copy_atomic(vocab_file, os.path.join(export_dir, SPM_FILE))
            from keras_bert_impl.base.json_files import write_json_atomic

            write_json_atomic(os.path.join(export_dir, "tokenizer_config.json"), {
                "tokenizer_class": "XLNetTokenizer", "do_lower_case": self.cfg.do_lower_case})
        path = os.path.join(export_dir, "pretrainer.keras")
        tmp = os.path.join(export_dir, ".tmp-pretrainer.keras")
        model.save(tmp)
        os.replace(tmp, path)
        if not self.cfg.saved_model:
            return f"Hugging Face xlnet folder {export_dir}; Keras model -> {path}"
        saved = os.path.join(export_dir, "saved_model")
        signatures = export_xlnet_pretrainer_saved_model(
            model, saved, vocab_file, self.cfg.do_lower_case, self.schema.seq_len)
        return (f"Hugging Face xlnet folder {export_dir}; SavedModel (signatures "
                f"{', '.join(signatures)}) -> {saved}; Keras model -> {path}")


def _every_pass(files, tokenizer, passes):
    """The tokenized documents of `files`, `passes` times over, each pass
    with its own progress lines."""
    from tf_records.command_line.progress import Reporter
    from tf_records.xlnet.writer import tokenized_documents

    for number in range(1, passes + 1):
        label = f"train, pass {number}/{passes}" if passes > 1 else "train"
        yield from tokenized_documents(files, tokenizer, Reporter(label))


def _heldout_schema(schema, documents):
    """The held-out records' schema: fewer streams when the text is short
    (each row gets at least 4 records' worth of tokens), or None if it
    cannot fill one record. The pretrainer reads any batch up to its own."""
    tokens = sum(len(sentence) for document in documents for sentence in document)
    tokens += len(documents)  # one <eod> each
    step = 2 if schema.bi_data else 1
    streams = min(schema.batch_size, tokens // (4 * schema.seq_len)) // step * step
    if streams < step:
        if tokens < 2 * schema.seq_len * step:
            return None
        streams = step
    return dataclasses.replace(schema, batch_size=streams, num_cores=1)


RECIPE = XLNetRecipe
