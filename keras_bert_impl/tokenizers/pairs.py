"""Sentence pairs and sets of choices, as every family packs them."""


def truncate_seq_pair(tokens_a, tokens_b, max_num_tokens):
    """Trims the longer list from its end until both fit, in place.

    The original `_truncate_seq_pair`: one token at a time from whichever
    list is longer (B when equal), so a short A keeps all its tokens.
    """
    while len(tokens_a) + len(tokens_b) > max_num_tokens:
        longer = tokens_a if len(tokens_a) > len(tokens_b) else tokens_b
        longer.pop()


def check_same_count(first, second, first_name, second_name):
    """`ValueError` naming both arguments unless they have one entry per example."""
    if len(first) != len(second):
        raise ValueError(
            f"`{first_name}` and `{second_name}` must have one entry per example. "
            f"Received {len(first)} and {len(second)}.")


def count_choices(contexts, choices):
    """C, the number of choices every example has (checked the same, >= 1)."""
    check_same_count(contexts, choices, "contexts", "choices")
    counts = {len(c) for c in choices}
    if len(counts) > 1 or 0 in counts:
        raise ValueError(
            "Every example needs the same number (>= 1) of choices. "
            f"Received choice counts {sorted(counts)}.")
    return counts.pop() if counts else 1
