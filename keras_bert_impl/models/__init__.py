"""Functional BERT models built from `keras_bert_impl.layers`."""

from keras_bert_impl.models.bert_backbone import BertBackbone
from keras_bert_impl.models.bert_classifier import BertClassifier
from keras_bert_impl.models.bert_feature_extractor import FEATURES
from keras_bert_impl.models.bert_feature_extractor import BertFeatureExtractor
from keras_bert_impl.models.bert_multiple_choice import BertMultipleChoice
from keras_bert_impl.models.bert_pretrainer import BertMaskedLMPretrainer
from keras_bert_impl.models.bert_pretrainer import BertPretrainer
from keras_bert_impl.models.bert_question_answerer import BertQuestionAnswerer
from keras_bert_impl.models.bert_token_tagger import BertTokenTagger
