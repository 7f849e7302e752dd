"""What every command shares, below both the data writers (the rest of
`tf_records`) and the training recipes (`training`): the console
(`console`), progress lines (`progress`) and Keras' start-up trimming
(`keras_extras`). It sits in `tf_records` because the records writers are
its lowest users; it imports nothing else of ours, and neither Keras nor
TensorFlow when imported, so a command can set up its console first. The
library (`keras_bert_impl`) never imports it."""
