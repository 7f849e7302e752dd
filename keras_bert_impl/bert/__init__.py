"""BERT (Devlin et al. 2018): its config and presets, layers, backbone,
pretraining and task models, tokenizers, checkpoint converters and SavedModel
export, as `gpt/`, `elmo/` and `xlnet/` hold theirs. What the families share
is in `keras_bert_impl.base`, `layers`, `speed`, `tokenizers` and
`checkpoints`.
"""

from keras_bert_impl.bert.bert_backbone import INPUT_NAMES
from keras_bert_impl.bert.bert_backbone import BertBackbone
from keras_bert_impl.bert.bert_bilstm_backbone import BertBiLstmBackbone
from keras_bert_impl.bert.bert_classifier import BertClassifier
from keras_bert_impl.bert.bert_config import PRESETS
from keras_bert_impl.bert.bert_config import BertConfig
from keras_bert_impl.bert.bert_config import num_parameters
from keras_bert_impl.bert.bert_config import preset
from keras_bert_impl.bert.bert_embeddings import BertEmbeddings
from keras_bert_impl.bert.bert_feature_backbone import BertFeatureBackbone
from keras_bert_impl.bert.bert_feature_extractor import FEATURES
from keras_bert_impl.bert.bert_feature_extractor import BertFeatureExtractor
from keras_bert_impl.bert.bert_multiple_choice import BertMultipleChoice
from keras_bert_impl.bert.bert_pooler import BertPooler
from keras_bert_impl.bert.bert_preprocessor import BertPreprocessor
from keras_bert_impl.bert.bert_pretrainer import BertCausalLMPretrainer
from keras_bert_impl.bert.bert_pretrainer import BertMaskedLMPretrainer
from keras_bert_impl.bert.bert_pretrainer import BertPretrainer
from keras_bert_impl.bert.bert_question_answerer import BertQuestionAnswerer
from keras_bert_impl.bert.bert_serving import export_saved_model
from keras_bert_impl.bert.bert_token_tagger import BertTokenTagger
from keras_bert_impl.bert.bert_tokenizer import BertTokenizer
from keras_bert_impl.bert.google_checkpoint import load_google_checkpoint
from keras_bert_impl.bert.google_checkpoint import save_google_checkpoint
from keras_bert_impl.bert.graph_bert_tokenizer import GraphBertTokenizer
from keras_bert_impl.bert.hf_checkpoint import load_hf_checkpoint
from keras_bert_impl.bert.hf_checkpoint import save_hf_checkpoint
from keras_bert_impl.bert.keras_hub_preset import keras_hub_preset_vocab
from keras_bert_impl.bert.keras_hub_preset import load_keras_hub_preset
from keras_bert_impl.bert.keras_hub_preset import save_keras_hub_preset
from keras_bert_impl.bert.load_backbone import find_vocab_file
from keras_bert_impl.bert.load_backbone import load_backbone
from keras_bert_impl.bert.masked_lm_head import MaskedLMHead
from keras_bert_impl.bert.next_sentence_head import NextSentenceHead
from keras_bert_impl.bert.wordpiece import WordpieceTokenizer
from keras_bert_impl.bert.wordpiece import load_vocab
