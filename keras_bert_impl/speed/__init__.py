"""CPU speed, kept apart from the math it speeds up: dropout and layer
normalization with fewer ops (`fast_dropout`, `fast_layer_norm`), the
attention heads and the batch's rows as parallel branches
(`head_branches`, `row_branches`) and a pretrainer's batch in slices
(`batch_slices`). Each computes what the plain Keras layer does; the tests
hold them to it. Imports no family.
"""
