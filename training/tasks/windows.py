"""Sliding windows over long token sequences, as the original `run_squad.py`.

A sequence longer than a model takes is read in windows of at most
`max_tokens` tokens whose starts are `stride` apart (the original's
`doc_stride`: the step between window starts, not the overlap). A token in
several windows is credited to the one where it has the most context on its
shorter side (the original `_check_is_max_context`), which is how SQuAD
merges windows and how tagging and classification merge them here too.
"""

import dataclasses


@dataclasses.dataclass(frozen=True)
class Window:
    """Tokens `[start, start + length)` of the full sequence."""

    start: int
    length: int

    @property
    def end(self):
        return self.start + self.length


def windows(num_tokens, max_tokens, stride):
    """Windows covering `num_tokens` tokens, as the original's `doc_spans`.

    Each holds at most `max_tokens`; starts advance by `min(length, stride)`;
    the last one ends at the last token. Zero tokens give one empty window
    (so every example still yields one model input).
    """
    if max_tokens < 1:
        raise ValueError(f"`max_tokens` must be >= 1. Received: {max_tokens}.")
    if stride < 1:
        raise ValueError(f"`stride` must be >= 1. Received: {stride}.")
    if num_tokens == 0:
        return [Window(0, 0)]
    spans = []
    start = 0
    while True:
        length = min(num_tokens - start, max_tokens)
        spans.append(Window(start, length))
        if start + length == num_tokens:
            return spans
        start += min(length, stride)


def max_context_window(spans, position):
    """Index of the window where token `position` has the most context.

    Score = min(left context, right context) + 0.01 * window length; the
    first best window wins ties, as the original.
    """
    best_score, best_index = None, None
    for index, span in enumerate(spans):
        if not span.start <= position < span.end:
            continue
        left, right = position - span.start, span.end - 1 - position
        score = min(left, right) + 0.01 * span.length
        if best_score is None or score > best_score:
            best_score, best_index = score, index
    return best_index


def is_max_context(spans, index, position):
    """True when window `index` is token `position`'s max-context window."""
    return max_context_window(spans, position) == index
