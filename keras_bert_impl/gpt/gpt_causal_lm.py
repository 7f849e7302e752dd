"""`GptCausalLM`: GPT with its next-token objective, for `model.fit`."""

import keras

from keras_bert_impl.base.backbone import as_backbone
from keras_bert_impl.base.backbone import sequence_inputs
from keras_bert_impl.base.task_defaults import CausalLMDefaults
from keras_bert_impl.base.task_model import TaskModel
from keras_bert_impl.gpt.gpt_backbone import INPUT_NAMES
from keras_bert_impl.gpt.gpt_backbone import check_gpt_inputs

# B=batch, S=sequence, V=vocab


@keras.saving.register_keras_serializable(package="keras_bert_impl")
class GptCausalLM(CausalLMDefaults, TaskModel):
    """OpenAI GPT pretraining: predict every next token (Radford et al. Sec. 3.1).

    One output, `lm` float32 logits `(B, S, V)` from the tied embedding.
    `compile()` with no loss sets the language-model cross-entropy averaged
    over the real targets (sample weight: 1 where the next token is real)
    and the next-token accuracy, so a dataset of
    `(x, {"lm": next_ids}, {"lm": next_mask})` (see `tf_records.gpt.reader`)
    trains with a plain `fit`.

    Args:
        backbone: `GptBackbone`.

    Example:
    >>> lm = GptCausalLM(GptBackbone.from_config_object(gpt_preset("gpt_tiny")))
    >>> lm.compile(optimizer="adamw")
    """

    def __init__(self, backbone, **kwargs):
        backbone = as_backbone(backbone)
        # === Layers ===
        self.backbone = backbone
        # === Functional graph ===
        inputs = sequence_inputs(INPUT_NAMES)
        outputs = {"lm": backbone(inputs)["lm_logits"]}  # (B, S, V)
        super().__init__(inputs=inputs, outputs=outputs, **kwargs)
        self.dtype_policy = backbone.dtype_policy

    def call(self, inputs, training=None, mask=None):
        check_gpt_inputs(inputs, self.backbone.gpt_config)
        return super().call(inputs, training=training, mask=mask)
