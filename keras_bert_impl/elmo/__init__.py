"""ELMo (Peters et al. 2018) as bilm-tf: the paper's feature-based comparison system."""

from keras_bert_impl.elmo.char_ids import batch_char_ids
from keras_bert_impl.elmo.char_ids import char_ids_from_tokens
from keras_bert_impl.elmo.char_ids import token_char_ids
from keras_bert_impl.elmo.character_encoder import CharacterEncoder
from keras_bert_impl.elmo.elmo_backbone import ElmoBackbone
from keras_bert_impl.elmo.elmo_backbone import remove_sentence_boundaries
from keras_bert_impl.elmo.elmo_checkpoint import load_elmo_checkpoint
from keras_bert_impl.elmo.elmo_checkpoint import save_elmo_checkpoint
from keras_bert_impl.elmo.elmo_config import ELMO_PRESETS
from keras_bert_impl.elmo.elmo_config import ElmoConfig
from keras_bert_impl.elmo.elmo_config import elmo_num_parameters
from keras_bert_impl.elmo.elmo_config import elmo_preset
from keras_bert_impl.elmo.elmo_lstm_stack import ElmoLstmStack
from keras_bert_impl.elmo.highway import Highway
from keras_bert_impl.elmo.lstm_projection_cell import LstmProjectionCell
from keras_bert_impl.elmo.lstm_projection_cell import tf1_lstm_weights_from_keras
