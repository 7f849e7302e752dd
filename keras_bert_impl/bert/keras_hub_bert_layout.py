"""keras-hub's `BertBackbone` against ours: each keras-hub variable by its
original Google name (`google_names`, which our model's variables already
have a map to), and the settings both ways (our `BertConfig` from a built
keras-hub model, keras-hub's arguments from ours), refusing with a
`ValueError` what the other side cannot represent. `keras_hub_preset`
reads and writes the folders with them.
"""

import keras
import numpy as np

from keras_bert_impl.bert import google_names
from keras_bert_impl.bert.bert_config import BertConfig
from keras_bert_impl.checkpoints.keras_hub_common import activation_name

# === Variables: keras-hub's <-> original Google names ===


def _heads_to_original(value):  # (H, N, D) -> (H, N*D); (N, D) -> (N*D,)
    return value.reshape(value.shape[0], -1) if value.ndim == 3 else value.reshape(-1)


def _output_to_original(value):  # (N, D, H) -> (N*D, H)
    return value.reshape(-1, value.shape[-1])


def _hub_bert_slots(hub_backbone, hub_head=None):
    """`[(original name, keras-hub variable, to_original)]` for every variable.

    keras-hub's attention keeps heads on their own axis (query kernel
    `(H, N, D)`, output kernel `(N, D, H)`); the original's are `(H, H)`
    with head n in columns `n*D:(n+1)*D`, which is a plain reshape (the
    layout keras-hub's own Hugging Face converter writes). Everything else
    has the original layout already.
    """
    same = None
    slots = [
        ("bert/embeddings/word_embeddings", hub_backbone.token_embedding.embeddings, same),
        ("bert/embeddings/position_embeddings",
         hub_backbone.position_embedding.position_embeddings, same),
        ("bert/embeddings/token_type_embeddings", hub_backbone.segment_embedding.embeddings, same),
        ("bert/embeddings/LayerNorm/gamma", hub_backbone.embeddings_layer_norm.gamma, same),
        ("bert/embeddings/LayerNorm/beta", hub_backbone.embeddings_layer_norm.beta, same),
    ]
    for i, block in enumerate(hub_backbone.transformer_layers):
        p = f"bert/encoder/layer_{i}/"
        attention = block._self_attention_layer
        for name, dense in (("query", attention.query_dense), ("key", attention.key_dense),
                            ("value", attention.value_dense)):
            slots += [(f"{p}attention/self/{name}/kernel", dense.kernel, _heads_to_original),
                      (f"{p}attention/self/{name}/bias", dense.bias, _heads_to_original)]
        slots += [
            (p + "attention/output/dense/kernel", attention.output_dense.kernel,
             _output_to_original),
            (p + "attention/output/dense/bias", attention.output_dense.bias, same),
            (p + "attention/output/LayerNorm/gamma", block._self_attention_layer_norm.gamma, same),
            (p + "attention/output/LayerNorm/beta", block._self_attention_layer_norm.beta, same),
            (p + "intermediate/dense/kernel", block._feedforward_intermediate_dense.kernel, same),
            (p + "intermediate/dense/bias", block._feedforward_intermediate_dense.bias, same),
            (p + "output/dense/kernel", block._feedforward_output_dense.kernel, same),
            (p + "output/dense/bias", block._feedforward_output_dense.bias, same),
            (p + "output/LayerNorm/gamma", block._feedforward_layer_norm.gamma, same),
            (p + "output/LayerNorm/beta", block._feedforward_layer_norm.beta, same),
        ]
    slots += [("bert/pooler/dense/kernel", hub_backbone.pooled_dense.kernel, same),
              ("bert/pooler/dense/bias", hub_backbone.pooled_dense.bias, same)]
    if hub_head is not None:
        m = google_names.MLM_HEAD_PREFIX
        slots += [
            (m + "transform/dense/kernel", hub_head._intermediate_dense.kernel, same),
            (m + "transform/dense/bias", hub_head._intermediate_dense.bias, same),
            (m + "transform/LayerNorm/gamma", hub_head._intermediate_layer_norm.gamma, same),
            (m + "transform/LayerNorm/beta", hub_head._intermediate_layer_norm.beta, same),
            (m + "output_bias", hub_head._bias, same),
        ]
    return slots


# === Settings: keras-hub's <-> our BertConfig ===


def _one(values, what):
    """The one value of a per-layer setting; `ValueError` if layers differ."""
    values = list(values)
    if any(v != values[0] for v in values):
        raise ValueError(f"{what} differs between layers ({sorted(set(values))}); ours has one "
                         "value for every layer.")
    return values[0]


def _bert_config(hub_backbone, config_values, hub_head, source):
    """Our `BertConfig` (and the MLM head's own settings) for a keras-hub model.

    Sizes come from the preset's `config.json`; the activation, epsilon and
    layout from the built layers, which is where keras-hub fixes them.
    Raises `ValueError` naming the field or layer ours cannot represent.
    """
    fields = config_values["config"]
    blocks = hub_backbone.transformer_layers
    if any(block.normalize_first for block in blocks):
        raise ValueError(f"{source}: normalize_first=True (pre-LN) blocks; BERT's are post-LN.")
    hidden_act = _one((activation_name(b.activation, f"{source}: {b.name}'s feed-forward")
                       for b in blocks), f"{source}: the feed-forward activation")
    norms = [hub_backbone.embeddings_layer_norm]
    for block in blocks:
        norms += [block._self_attention_layer_norm, block._feedforward_layer_norm]
    eps = _one((n.epsilon for n in norms), f"{source}: layer_norm_epsilon")
    probe = np.linspace(-4.0, 4.0, 33, dtype=np.float32)
    if not np.allclose(keras.ops.convert_to_numpy(hub_backbone.pooled_dense.activation(probe)),
                       np.tanh(probe), rtol=0, atol=1e-6):
        raise ValueError(f"{source}: pooled_dense's activation is not tanh (BERT's pooler).")
    try:
        config = BertConfig(
            vocab_size=fields["vocabulary_size"],
            hidden_size=fields["hidden_dim"],
            num_hidden_layers=fields["num_layers"],
            num_attention_heads=fields["num_heads"],
            intermediate_size=fields["intermediate_dim"],
            hidden_act=hidden_act,
            hidden_dropout_prob=fields.get("dropout", 0.1),
            attention_probs_dropout_prob=fields.get("dropout", 0.1),
            max_position_embeddings=fields.get("max_sequence_length", 512),
            type_vocab_size=fields.get("num_segments", 2),
            layer_norm_eps=eps,
        )
    except (ValueError, TypeError) as e:
        raise ValueError(f"{source}: {e}") from None
    head = {}
    if hub_head is not None:
        if not hub_backbone.token_embedding.tie_weights:
            raise ValueError(f"{source}: the masked-LM head has its own output table "
                             "(tie_weights=False); ours is the word-embedding table.")
        # keras.activations.get(None) is `linear`: check the values.
        if hub_head.activation is not None and not np.array_equal(
                keras.ops.convert_to_numpy(hub_head.activation(probe)), probe):
            raise ValueError(f"{source}: the masked-LM head has an output activation; ours "
                             "returns logits.")
        head = dict(
            masked_lm_hidden_act=activation_name(
                hub_head.intermediate_activation, f"{source}: mlm_head's intermediate_dense"),
            masked_lm_layer_norm_eps=hub_head.layer_norm_epsilon)
    return config, head


def _hub_bert_kwargs(backbone, allow_gelu_approximation):
    """keras-hub `BertBackbone` arguments for ours; `ValueError` naming the
    field keras-hub cannot represent."""
    config = backbone.bert_config
    if backbone.causal:
        raise ValueError("This BertBackbone is causal (the LTR ablation); keras-hub's "
                         "BertBackbone attends both ways.")
    if config.hidden_act == "relu" or (config.hidden_act == "gelu"
                                       and not allow_gelu_approximation):
        raise ValueError(
            f"hidden_act={config.hidden_act!r}: keras-hub's BertBackbone always computes the "
            "tanh form of GELU (our 'gelu_tanh'; it does so for the Hugging Face BERT "
            "checkpoints it converts, too)."
            + (" Pass allow_gelu_approximation=True to write this exact-GELU model anyway "
               "(keras-hub's outputs then differ from ours by the approximation, ~1e-3)."
               if config.hidden_act == "gelu" else ""))
    if config.layer_norm_eps != 1e-12:
        raise ValueError(f"layer_norm_eps={config.layer_norm_eps!r}: keras-hub's BertBackbone "
                         "fixes it at 1e-12.")
    if config.hidden_dropout_prob != config.attention_probs_dropout_prob:
        raise ValueError(
            f"hidden_dropout_prob={config.hidden_dropout_prob!r} and "
            f"attention_probs_dropout_prob={config.attention_probs_dropout_prob!r} differ; "
            "keras-hub's BertBackbone has one `dropout` for both.")
    return dict(
        vocabulary_size=config.vocab_size, num_layers=config.num_hidden_layers,
        num_heads=config.num_attention_heads, hidden_dim=config.hidden_size,
        intermediate_dim=config.intermediate_size, dropout=config.hidden_dropout_prob,
        max_sequence_length=config.max_position_embeddings,
        num_segments=config.type_vocab_size)
