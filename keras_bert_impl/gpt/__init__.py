"""OpenAI GPT (Radford et al. 2018), the paper's left-to-right comparison system."""

from keras_bert_impl.gpt.gpt_backbone import GptBackbone
from keras_bert_impl.gpt.gpt_backbone import grow_vocabulary
from keras_bert_impl.gpt.gpt_causal_lm import GptCausalLM
from keras_bert_impl.gpt.gpt_checkpoint import load_gpt_checkpoint
from keras_bert_impl.gpt.gpt_checkpoint import save_gpt_checkpoint
from keras_bert_impl.gpt.gpt_config import FINE_TUNING_TOKENS
from keras_bert_impl.gpt.gpt_config import GPT_PRESETS
from keras_bert_impl.gpt.gpt_config import GptConfig
from keras_bert_impl.gpt.gpt_config import gpt_num_parameters
from keras_bert_impl.gpt.gpt_config import gpt_preset
