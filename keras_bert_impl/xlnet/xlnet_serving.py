"""`export_xlnet_pretrainer_saved_model`: a trained XLNet pretrainer as a SavedModel for TF Serving."""

import tensorflow as tf

from keras_bert_impl.base.saved_model import save_module_atomic
from keras_bert_impl.base.serving_checks import checked_ids
from keras_bert_impl.base.serving_checks import checked_shape
from keras_bert_impl.base.serving_checks import checked_texts
from keras_bert_impl.base.serving_checks import checked_zero_one
from keras_bert_impl.xlnet.graph_xlnet_tokenizer import GraphXLNetTokenizer
from keras_bert_impl.xlnet.xlnet_backbone import BASE_INPUTS
from keras_bert_impl.xlnet.xlnet_backbone import XLNetBackbone
from keras_bert_impl.xlnet.xlnet_pretrainer import XLNetPretrainer

# B=batch, L=sequence, P=predicted positions


def checked_xlnet_ids(inputs, config, rank=2):
    """XLNet's int inputs of a served request after the checks of
    `serving_checks.checked_ids`: word ids in `[0, vocab_size)`,
    `input_mask` 0 or 1 (1 = padding), one shape, at least one token.
    `input_type_ids` may hold any value: XLNet only compares two segment ids
    for equality (relative segment encoding), and relative positions set
    no longest sequence."""
    return checked_ids({name: inputs[name] for name in BASE_INPUTS}, [None] * rank,
                       {"input_word_ids": (config.vocab_size, "vocab_size"),
                        "input_mask": (2, "0 or 1, 1 = padding")})


def export_xlnet_pretrainer_saved_model(model, export_dir, spm_file=None, do_lower_case=False,
                                        max_seq_length=128):
    """A stateless float32 SavedModel of a trained `XLNetPretrainer`.

    Signatures: `serving_default`: int32 `input_word_ids`, `input_type_ids`
    and `input_mask` `(B, L)` (1 = padding) -> `sequence_output` `(B, L, H)`
    (the content stream) and `last_output` `(B, H)` (its last position,
    where XLNet's `<cls>` sits); `serving_plm`: the same plus float32
    `perm_mask` `(B, L, L)` and `target_mapping` `(B, P, L)` -> `plm_logits`
    `(B, P, V)`; `serving_text` (`text` `(B,)`, given `spm_file`): XLNet's
    tokenizer in the graph, packed `A <sep> <cls>` left-padded to
    `max_seq_length` -> the packed ids and `serving_default`'s outputs. No
    memory: every request starts from none, and no `bi_data` (a model
    pretrained with it serves every row forwards). Requests are checked in the
    graph (`checked_xlnet_ids`; `perm_mask` and `target_mapping` must fit
    the ids' batch and length and hold 0s and 1s, each `target_mapping`
    row one-hot or all zeros); a bad one fails with an
    `InvalidArgumentError` naming the input. An empty batch returns empty
    outputs.

    Returns:
        The names of the signatures written.
    """
    config, backbone, plm = _served_pretrainer(model)
    tokenizer = None
    if spm_file:
        tokenizer = GraphXLNetTokenizer(spm_file, do_lower_case=do_lower_case)
    module = tf.Module()
    module.plm = plm
    module.tokenizer = tokenizer
    ids_spec, float_spec = _input_specs()
    streams = _streams_function(backbone, plm, ids_spec, float_spec)
    signatures = _ids_signatures(config, streams, ids_spec, float_spec)
    if tokenizer is not None:
        signatures["serving_text"] = _text_signature(tokenizer, signatures["serving_default"],
                                                     ids_spec, max_seq_length)
    save_module_atomic(module, export_dir, signatures)
    return sorted(signatures)


def _served_pretrainer(model):
    """`(config, backbone, XLNetPretrainer)`: a stateless float32 copy of
    `model` (no memory, no dropout, no `bi_data`) with its weights."""
    # bi_data off: pretraining's backward half-batch is a data layout, not
    # part of the model; served rows all read forwards, any batch size.
    config = model.backbone.xlnet_config.replace(mem_len=None, reuse_len=None, dropout=0.0,
                                                 bi_data=False)
    backbone = XLNetBackbone.from_config_object(config, two_stream=True, dtype="float32")
    backbone.set_weights(model.backbone.get_weights())  # memory adds no weights
    plm = XLNetPretrainer(backbone)
    plm.lm_bias.assign(model.lm_bias)
    return config, backbone, plm


def _input_specs():
    """`(ids_spec, float_spec)`: the int32 `(B, L)` ids and the float32
    `perm_mask` and `target_mapping` of the signatures."""
    float_spec = {"perm_mask": tf.TensorSpec([None, None, None], tf.float32, name="perm_mask"),
                  "target_mapping": tf.TensorSpec([None, None, None], tf.float32,
                                                  name="target_mapping")}
    ids_spec = {name: tf.TensorSpec([None, None], tf.int32, name=name)
                for name in ("input_word_ids", "input_type_ids", "input_mask")}
    return ids_spec, float_spec


def _streams_function(backbone, plm, ids_spec, float_spec):
    """Both streams as one `tf.function`: `sequence_output` and `plm_logits`."""

    # Both streams, traced once: serving_default and serving_plm call this
    # function (a call op in their graphs) rather than each tracing the
    # backbone (an xlnet_debug export with the text signature, one core,
    # three runs each: 4.50-4.79 s before, 3.32-3.86 s; the same outputs).
    @tf.function(autograph=False, input_signature=[{**ids_spec, **float_spec}])
    def streams(inputs):
        x = {**inputs, "input_mask": tf.cast(inputs["input_mask"], tf.float32)}
        out = backbone(x, training=False)
        logits = backbone.word_embedding(out["query_output"], reverse=True)  # (B, P, V)
        return {"sequence_output": out["sequence_output"],
                "plm_logits": tf.cast(logits, tf.float32) + plm.lm_bias}

    return streams


def _ids_signatures(config, streams, ids_spec, float_spec):
    """`{"serving_default": ..., "serving_plm": ...}`, each checking its
    request and calling `streams`."""

    def content(inputs):
        inputs = checked_xlnet_ids(inputs, config)
        batch, length = tf.shape(inputs["input_word_ids"])[0], tf.shape(inputs["input_word_ids"])[1]
        out = streams({**{name: inputs[name] for name in ids_spec},
                       "perm_mask": tf.zeros([batch, length, length]),
                       # One unused query slot (an all-zero row): the content stream only.
                       "target_mapping": tf.zeros([batch, 1, length])})["sequence_output"]
        return {"sequence_output": out, "last_output": out[:, -1]}  # (B, L, H), (B, H)

    @tf.function(autograph=False, input_signature=[ids_spec])
    def serving_default(inputs):
        return content(inputs)

    @tf.function(autograph=False, input_signature=[
        ids_spec, float_spec["perm_mask"], float_spec["target_mapping"]])
    def serving_plm(inputs, perm_mask, target_mapping):
        inputs = checked_xlnet_ids(inputs, config)
        batch, length = tf.shape(inputs["input_word_ids"])[0], tf.shape(inputs["input_word_ids"])[1]
        perm_mask = checked_shape(perm_mask, "perm_mask", tf.stack([batch, length, length]),
                                  "(batch, length, length) of input_word_ids")
        target_mapping = checked_shape(target_mapping, "target_mapping",
                                       tf.stack([batch, -1, length]),
                                       "(batch, any, length) of input_word_ids")
        perm_mask = checked_zero_one(perm_mask, "perm_mask")
        target_mapping = checked_zero_one(target_mapping, "target_mapping", one_per_row=True)
        out = streams({**{name: inputs[name] for name in ids_spec}, "perm_mask": perm_mask,
                       "target_mapping": target_mapping})
        return {"plm_logits": out["plm_logits"]}  # (B, P, V)

    return {"serving_default": serving_default, "serving_plm": serving_plm}


def _text_signature(tokenizer, serving_default, ids_spec, max_seq_length):
    """`serving_text`: `text` `(B,)` tokenized and packed in the graph, then
    `serving_default`'s outputs of the packed ids."""

    @tf.function(autograph=False, input_signature=[tf.TensorSpec([None], tf.string, name="text")])
    def serving_text(text):
        text = checked_texts({"text": text})["text"]
        packed = tokenizer.pack(tokenizer(text), max_length=max_seq_length)
        # serving_default's trace, called: the backbone is traced once for both.
        return {**packed, **serving_default({name: packed[name] for name in ids_spec})}

    return serving_text
