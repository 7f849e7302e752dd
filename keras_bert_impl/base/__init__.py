"""What every model family shares, and no family owns (in the spirit of
keras-hub's `models/backbone.py` and `models/task.py`): the checks of
`(B, S)` integer inputs (`sequence_checks`), re-compiling a loaded `.keras`
model (`saved_compile`), the sentence(-pair) classifiers' loss and metrics
(`classifier_defaults`), the task models' `.keras` round trip
(`task_model`) and the fixes of Keras' problems under distribution
strategies (`strategy_fixes`). It imports no family: BERT (`models/`,
`layers/`), GPT, ELMo and XLNet import it.
"""
