"""Keras layers BERT is made of."""

from keras_bert_impl.layers.activations import get_activation
from keras_bert_impl.layers.bert_embeddings import BertEmbeddings
from keras_bert_impl.layers.bert_pooler import BertPooler
from keras_bert_impl.layers.fast_dropout import FastDropout
from keras_bert_impl.layers.fast_layer_norm import FastLayerNormalization
from keras_bert_impl.layers.masked_lm_head import MaskedLMHead
from keras_bert_impl.layers.next_sentence_head import NextSentenceHead
from keras_bert_impl.layers.scalar_mix import ScalarMix
from keras_bert_impl.layers.self_attention import SelfAttention
from keras_bert_impl.layers.tied_word_embedding import TiedWordEmbedding
from keras_bert_impl.layers.transformer_encoder import TransformerEncoder
