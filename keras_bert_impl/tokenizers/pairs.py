"""Sentence pairs, as every family packs them."""


def truncate_seq_pair(tokens_a, tokens_b, max_num_tokens):
    """Trims the longer list from its end until both fit, in place.

    The original `_truncate_seq_pair`: one token at a time from whichever
    list is longer (B when equal), so a short A keeps all its tokens.
    """
    while len(tokens_a) + len(tokens_b) > max_num_tokens:
        longer = tokens_a if len(tokens_a) > len(tokens_b) else tokens_b
        longer.pop()
