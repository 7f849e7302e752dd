"""What every command shares, below both the data writers (`tf_records`)
and the training recipes (`training`): the console (`console`), progress
lines (`progress`) and Keras' start-up trimming (`keras_extras`). It imports
neither Keras nor TensorFlow when imported, so a command can set up its
console first; the library (`keras_bert_impl`) never imports it."""
