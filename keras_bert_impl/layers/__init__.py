"""The Keras layers the Transformer families share (BERT's own embeddings,
pooler and heads are in `keras_bert_impl.bert`; the fast paths in
`keras_bert_impl.speed`)."""

from keras_bert_impl.layers.activations import get_activation
from keras_bert_impl.layers.scalar_mix import ScalarMix
from keras_bert_impl.layers.self_attention import SelfAttention
from keras_bert_impl.layers.tied_word_embedding import TiedWordEmbedding
from keras_bert_impl.layers.transformer_encoder import TransformerEncoder
