"""What every model family shares, and no family owns (in the spirit of
keras-hub's `Backbone` and `Task`): the configs' round trip
(`model_config`), the checks of `(B, S)` integer inputs and of positions
(`sequence_checks`), re-compiling a loaded `.keras` model
(`saved_compile`), the compile defaults of the sentence(-pair)
classifiers (`classifier_defaults`) and of taggers, span models, multiple
choice and next-token models (`task_defaults`), the backbones' shared
build (`backbone`), a layer's config from its constructor
(`layer_config`), the task models' `.keras` round trip (`task_model`), the
fixes of Keras' problems under distribution strategies (`strategy_fixes`),
SavedModel saving and request checks (`saved_model`, `serving_checks`),
atomic JSON files (`json_files`) and names kept at an old path
(`lazy_names`). It imports no family: BERT, GPT, ELMo and XLNet import it.
"""
