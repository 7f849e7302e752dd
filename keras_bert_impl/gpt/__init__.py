"""OpenAI GPT (Radford et al. 2018), the paper's left-to-right comparison system."""

from keras_bert_impl.gpt.bpe_learner import learn_bpe
from keras_bert_impl.gpt.bpe_learner import write_bpe_files
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
from keras_bert_impl.gpt.gpt_inputs import FineTuningIds
from keras_bert_impl.gpt.gpt_task_models import GptClassifier
from keras_bert_impl.gpt.gpt_task_models import GptMultipleChoice
from keras_bert_impl.gpt.gpt_task_models import GptTokenTagger
from keras_bert_impl.gpt.gpt_tokenizer import GptTokenizer
from keras_bert_impl.gpt.graph_gpt_tokenizer import GraphGptTokenizer
