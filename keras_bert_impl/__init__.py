"""keras_bert_impl: BERT (Devlin et al. 2018) in Keras 3 / TensorFlow."""

from keras_bert_impl.bert import PRESETS
from keras_bert_impl.bert import BertBackbone
from keras_bert_impl.bert import BertCausalLMPretrainer
from keras_bert_impl.bert import BertClassifier
from keras_bert_impl.bert import BertConfig
from keras_bert_impl.bert import BertFeatureExtractor
from keras_bert_impl.bert import BertMaskedLMPretrainer
from keras_bert_impl.bert import BertMultipleChoice
from keras_bert_impl.bert import BertPretrainer
from keras_bert_impl.bert import BertQuestionAnswerer
from keras_bert_impl.bert import BertTokenTagger
from keras_bert_impl.bert import num_parameters
from keras_bert_impl.bert import preset

__version__ = "0.1.0"
