"""`BertTaskModel`: what every fine-tuning model shares."""

import keras

from keras_bert_impl.base.task_model import TaskModel
from keras_bert_impl.bert.bert_backbone import INPUT_NAMES
from keras_bert_impl.bert.bert_backbone import BertBackbone
from keras_bert_impl.bert.bert_backbone import check_inputs


def backbone_inputs():
    """The three int32 `(B, S)` inputs, under the names TF Serving clients send."""
    return {name: keras.Input(shape=(None,), dtype="int32", name=name) for name in INPUT_NAMES}


def pooled_output(backbone, inputs):
    """`backbone(inputs)["pooled_output"]` `(B, H)`, its last block computing one row.

    The pooler reads [CLS]'s row of the last block's output, so that block
    runs its queries, attention output and feed-forward for that row only
    (keys and values for every row, as usual): at MiniLM's 6 blocks about a
    seventh less work per step, with the same outputs
    (`tests/test_task_models.py`). The backbone's own layers are called, as
    `BertPretrainer` does for its masked rows. A causal backbone (whose
    pooler reads the last non-padding row, and whose blocks take no query
    rows) and backbones of another kind (the BiLSTM one) are called whole.
    """
    if type(backbone) is not BertBackbone or backbone.causal:
        return backbone(inputs)["pooled_output"]
    x = backbone.embeddings(
        backbone.word_embedding(inputs["input_word_ids"]), inputs["input_type_ids"]
    )  # (B, S, H)
    for layer in backbone.encoder_layers[:-1]:
        x = layer(x, inputs["input_mask"])  # (B, S, H)
    cls_row = keras.ops.zeros_like(inputs["input_mask"][:, :1])  # (B, 1)
    x = backbone.encoder_layers[-1](x, inputs["input_mask"], query_positions=cls_row)  # (B, 1, H)
    return backbone.pooler(x)  # (B, H)


def head_initializer(backbone):
    """Truncated normal with the backbone's `initializer_range`, as the original heads."""
    return keras.initializers.TruncatedNormal(stddev=backbone.bert_config.initializer_range)


class BertTaskModel(TaskModel):
    """A backbone plus a small task layer, as a functional Keras model.

    Subclasses build the graph in `__init__` and keep their constructor
    arguments as attributes of the same names (`get_config` returns them).
    The backbone is a nested model, so its weights load from any checkpoint
    format first (`load_hf_checkpoint`, `load_google_checkpoint`).
    """

    # Constructor arguments besides `backbone`, for `get_config`.
    config_names = ()
    # The SavedModel output name of a single-tensor output.
    output_name = "logits"

    @property
    def layers(self):
        """The graph's layers, the backbone as one of them.

        `pooled_output` calls the backbone's own layers rather than the
        backbone, so they are in this model's graph. Listed here as the
        backbone they belong to, in its place, the model keeps the layout it
        had when it called the backbone whole: the weights file's paths
        (`layers/bert_backbone/...`), the order of `weights` and so of the
        optimizer's slots, `summary()` and `get_layer("bert_backbone")`. Files
        saved either way load either way (`tests/test_task_models.py`).
        """
        graph_layers = super().layers
        backbone = self.__dict__.get("backbone")
        if backbone is None or any(layer is backbone for layer in graph_layers):
            return graph_layers
        inner = {id(layer) for layer in backbone._flatten_layers(include_self=False)}
        first = next((i for i, layer in enumerate(graph_layers) if id(layer) in inner), None)
        if first is None:
            return graph_layers
        own = [layer for layer in graph_layers if id(layer) not in inner]
        return own[:first] + [backbone] + own[first:]

    def call(self, inputs, training=None, mask=None):
        check_inputs(inputs, self.backbone.bert_config)
        return super().call(inputs, training=training, mask=mask)

