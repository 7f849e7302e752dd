"""Functional BERT models built from `keras_bert_impl.layers`."""

from keras_bert_impl.models.bert_backbone import BertBackbone
from keras_bert_impl.models.bert_pretrainer import BertMaskedLMPretrainer
from keras_bert_impl.models.bert_pretrainer import BertPretrainer
