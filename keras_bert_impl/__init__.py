"""keras_bert_impl: BERT (Devlin et al. 2018) in Keras 3 / TensorFlow."""

from keras_bert_impl.bert_config import PRESETS
from keras_bert_impl.bert_config import BertConfig
from keras_bert_impl.bert_config import num_parameters
from keras_bert_impl.bert_config import preset
from keras_bert_impl.models import BertBackbone
from keras_bert_impl.models import BertCausalLMPretrainer
from keras_bert_impl.models import BertClassifier
from keras_bert_impl.models import BertFeatureExtractor
from keras_bert_impl.models import BertMaskedLMPretrainer
from keras_bert_impl.models import BertMultipleChoice
from keras_bert_impl.models import BertPretrainer
from keras_bert_impl.models import BertQuestionAnswerer
from keras_bert_impl.models import BertTokenTagger

__version__ = "0.1.0"
