"""XLNet's pretraining recipe for `training.pretrain --model=xlnet`: a
SentencePiece model learned from the text, XLNet's records (`reuse_len`
tokens + A <sep> B <sep> <cls>, span masking, B interleaved streams), the
permutation LM with Transformer-XL memory carried from batch to batch,
held-out permutation-LM accuracy and perplexity against the unigram model,
export.

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

The steps that run TensorFlow: `training.xlnet.pretraining_steps`.
"""

import dataclasses
import os

from tf_records.xlnet.schema import XLNetRecordSchema
from training.pretraining.common import is_tfrecords
from training.pretraining.common import say
from training.pretraining.recipe import PretrainRecipe
from training.pretraining.recipe import has_manifest

# B=batch (streams), L=seq_len, P=num_predict, V=vocab, H=d_model

# The BERT size names of --preset mean the XLNet ones of that shape.
_SAME_SIZE = {"tiny": "xlnet_tiny", "debug": "xlnet_debug", "base": "xlnet_base",
              "large": "xlnet_large"}


def _steps():
    """`training.xlnet.pretraining_steps`, the recipe's steps that run TensorFlow."""
    # lazy: TensorFlow and Keras load after the console starts and the light flag checks
    from training.xlnet import pretraining_steps

    return pretraining_steps


class XLNetRecipe(PretrainRecipe):
    name = "XLNet"
    records_writer = "create_xlnet_data"
    record_kind = "xlnet"
    records_name = "xlnet_records"
    vocab_name = "spiece.model"
    cased_releases = True
    bfloat16_pays = True
    evaluates_at_start = False
    # Its pretrained backbone reads the permutation's inputs and the memory.
    export_formats = ("saved_model",)
    export_refusal = ("XLNet's pretrained backbone takes the permutation's inputs (perm_mask, "
                      "target_mapping) and its memory, which no runtime request carries; "
                      "fine-tune it and export the task model (training.finetune "
                      "--model=xlnet --export_formats=...).")
    flags = PretrainRecipe.flags + ("input", "vocab_file", "strategy", "do_lower_case",
                                    "max_predictions_per_seq", "dupe_factor", "fill_mask_examples")

    def __init__(self, init=None, manifests=None, **values):
        super().__init__(init, manifests, **values)
        flag = self.flag
        steps = _steps()
        preset = _SAME_SIZE.get(flag.preset, flag.preset)
        if not init and not flag.config_file:
            steps.check_preset(flag.preset, preset, _SAME_SIZE)
        config = init.config if init else steps.read_config(flag.config_file, preset)
        if flag.strategy == "tpu":
            raise SystemExit(
                "--strategy=tpu: XLNet trains on one device, --strategy=mirrored or "
                "--strategy=multi_worker. The memory each replica keeps for its streams (row k "
                "of a batch continues row k of the one before) is not tested on TPUs.")
        if flag.strategy in ("mirrored", "multi_worker") and config.bi_data:
            raise SystemExit(
                f"--strategy={flag.strategy} with bi_data=True: each replica's share of the batch "
                "must hold forward and backward rows, which the records lay out for one replica "
                "here. Train bi_data on one device.")
        if flag.vocab_file:
            steps.check_vocab_file(flag.vocab_file, flag.do_lower_case)
        self.preset = init.typed if init else preset
        self.config = config
        self.schema = self._schema(config)

    @staticmethod
    def read_hf_config(path):
        return _steps().read_hf_config(path)

    def _schema(self, config):
        """The records' schema: read from a records folder, else from the flags."""
        flag = self.flag
        if is_tfrecords(flag.input) and has_manifest(flag.input):
            try:
                manifest = self.records_manifest(flag.input)
            except ValueError as e:
                raise SystemExit(f"--input={flag.input}: {e}") from None
            if manifest["schema"].get("kind") != XLNetRecordSchema.kind:
                raise SystemExit(
                    f"--input={flag.input} holds {manifest['schema'].get('kind', 'BERT')!r} "
                    "records, not XLNet's (tf_records.create_xlnet_data writes those).")
            schema = XLNetRecordSchema.from_manifest(manifest["schema"])
        else:
            seq_len = flag.max_seq_length
            try:
                schema = XLNetRecordSchema(
                    seq_len=seq_len, reuse_len=config.reuse_len or seq_len // 2,
                    batch_size=flag.global_batch_size, num_predict=flag.max_predictions_per_seq,
                    bi_data=config.bi_data)
            except ValueError as e:
                raise SystemExit(f"XLNet's records from --max_seq_length={seq_len}, "
                                 f"--max_predictions_per_seq={flag.max_predictions_per_seq}, "
                                 f"--global_batch_size={flag.global_batch_size}: {e}") from None
        if schema.batch_size != flag.global_batch_size:
            raise SystemExit(
                f"--global_batch_size={flag.global_batch_size}, but {flag.input} holds "
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

    def learned_vocab(self, data_dir, train_files):
        flag = self.flag
        return _steps().learned_vocab(os.path.join(data_dir, "xlnet_vocab"), train_files,
                                      flag.vocab_size, flag.do_lower_case)

    def side_writer(self, data_dir, vocab_file, sides):
        """The writer of the records, the schema given the tokenizer's
        `<sep>` and `<cls>` ids."""
        flag = self.flag
        steps = _steps()
        tokenizer = steps.tokenizer(vocab_file, flag.do_lower_case)
        self.schema = dataclasses.replace(self.schema, sep_id=tokenizer.sep_id,
                                          cls_id=tokenizer.cls_id)
        return steps.record_writer(self.schema, tokenizer, vocab_file, flag.dupe_factor, flag.seed)

    def vocab_size(self, train_source, vocab_file, manifest=None):
        if not has_manifest(train_source):
            if not vocab_file:
                raise SystemExit("XLNet records without a manifest need --vocab_file "
                                 "(spiece.model, for the vocabulary size).")
            return _steps().tokenizer(vocab_file, self.flag.do_lower_case).vocab_size
        manifest = manifest or self.records_manifest(train_source)
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
        return _steps().build_model(self.model_config(vocab_size), vocab_size, self.init,
                                    self.config.vocab_size, self.flag.global_batch_size,
                                    self.flag.mixed_precision)

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
        schema = None
        if not has_manifest(source):
            schema = self.schema  # the original's files: the flags' lengths
        streams = self._streams(source)
        pipelines = input_context.num_input_pipelines if input_context else 1
        if streams % (batch_size * pipelines):
            raise SystemExit(f"{source} holds {streams} streams, which do not split into "
                             f"{pipelines} input pipeline(s) of per-replica batches of "
                             f"{batch_size}.")
        parts = streams // (batch_size * pipelines)  # this pipeline's replicas
        return _steps().dataset(
            source, streams, batch_size, parts, start_batch, seed=self.flag.seed, schema=schema,
            repeat=repeat, model_config=model_config, input_context=input_context)

    def pipeline_streams(self, source, input_context):
        """What this worker's input pipeline reads, for its first line."""
        streams = self._streams(source)
        rows = streams // input_context.num_input_pipelines
        first = input_context.input_pipeline_id * rows
        return f"keeps streams {first}-{first + rows - 1} of {streams} (reading every record)"

    def _streams(self, source):
        if has_manifest(source):
            return self.records_manifest(source)["schema"]["batch_size"]
        return self.schema.batch_size

    def evaluate(self, model, model_config, heldout_source, train_source, vocab_file, text):
        """Held-out permutation-LM accuracy and perplexity against the unigram
        model of the training targets; a few words of the held-out `text`
        files (or None) filled in."""
        flag = self.flag
        steps = _steps()
        results = {}
        if heldout_source:
            heldout = self.dataset(heldout_source, self._streams(heldout_source), model_config,
                                   repeat=False, shuffle=False)  # read once, in order
            results = steps.heldout_scores(model, heldout, train_source, model_config.vocab_size,
                                           self.schema)
        if vocab_file and flag.fill_mask_examples and text:
            steps.say_fill_in_examples(model, vocab_file, flag.do_lower_case, text,
                                       flag.fill_mask_examples, self.schema.seq_len, flag.seed)
        return results

    def export(self, model, vocab_file, export_dir):
        flag = self.flag
        return _steps().export(model, vocab_file, export_dir, flag.saved_model, flag.do_lower_case,
                               self.schema.seq_len)


RECIPE = XLNetRecipe


def runtime_tokenizer(vocab_file, do_lower_case):
    """`text_to_ids.py`'s SentencePiece tokenizer beside a runtime export
    of a fine-tuned XLNet (`training.xlnet.finetune`)."""
    name = os.path.basename(vocab_file)
    return ([vocab_file], "from keras_bert_impl.xlnet.xlnet_tokenizer import XLNetTokenizer",
            f"XLNetTokenizer(os.path.join(HERE, {name!r}), do_lower_case={do_lower_case})")
