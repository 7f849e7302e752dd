"""BERT's SavedModel export, at the path the guides have always shown
(`from keras_bert_impl.serving import export_saved_model`); it lives in
`keras_bert_impl.bert.bert_serving`, and what every family's export
shares in `keras_bert_impl.base.saved_model`."""


from keras_bert_impl.bert.bert_serving import export_saved_model

__all__ = ["export_saved_model"]
