"""The rows of the Table 5 tasks, made from the default corpus's sentences
(`training.ablation.tasks` writes them as task folders): one function per
task, from documents (lists of sentences) to labelled sentences or pairs,
or for span QA to SQuAD v1.1 articles, drawn with the caller's random
stream; a side with fewer usable rows than asked is refused.
"""

import re

MIN_WORDS, MAX_WORDS = 6, 30  # a sentence for word order and questions
PAIR_MIN_WORDS, PAIR_MAX_WORDS = 4, 30  # each sentence of a pair
PARAGRAPH_SENTENCES = 1  # span QA: a paragraph is one sentence (calibrated)
PAIR_PARAGRAPH_SENTENCES = 2  # answer sentence: the other sentence is the neighbour
MAX_ANSWER_WORDS = 3
QUESTIONS_PER_PARAGRAPH = 2
_ANSWER_WORD = re.compile(r"^([\"'(`]*)([A-Za-z][A-Za-z0-9_]{2,})([\"'),.:;`]*)$")
_STOPWORDS = frozenset("""
    a an the and or but if then else when while for from with without into onto of off on in
    at by to as is are was were be been being has have had do does did not no nor so than that
    this these those there here it its they them their he she his her we our you your which who
    whom whose what where why how all any each every some such can could may might must shall
    should will would also only other more most same very just one two both either neither
    """.split())


def swap_two_words(sentence, rng):
    """`sentence` with two of its words (different ones) swapped, drawn with `rng`."""
    words = sentence.split()
    while True:
        i, j = sorted(rng.sample(range(len(words)), 2))
        if words[i] != words[j]:
            break
    words[i], words[j] = words[j], words[i]
    return " ".join(words)


def _take(items, count, rng, what, side):
    if len(items) < count:
        raise ValueError(f"Only {len(items)} usable {side} {what} in the default corpus; asked "
                         f"for {count}. Ask for fewer.")
    return rng.sample(items, count)


def word_order_rows(documents, count, rng, side="train"):
    """`[(label, sentence)]`: half as written (1), half with two words swapped (0)."""
    seen, sentences = set(), []
    for document in documents:
        for sentence in document:
            words = sentence.split()
            if MIN_WORDS <= len(words) <= MAX_WORDS and len(set(words)) > 1 and (
                    sentence not in seen):
                seen.add(sentence)
                sentences.append(sentence)
    chosen = _take(sentences, count, rng, "sentences", side)
    rows = [(1, s) if k % 2 == 0 else (0, swap_two_words(s, rng)) for k, s in enumerate(chosen)]
    rng.shuffle(rows)
    return rows


def replaced_word_rows(documents, count, rng, side="train"):
    """`[(label, sentence)]`: half as written (1), half with one word replaced
    (0) by a word drawn from the side's own word frequencies (ELECTRA's
    replaced-token detection, asked of the whole sentence)."""
    seen, sentences, words = set(), [], []
    for document in documents:
        for sentence in document:
            split = sentence.split()
            words += split
            if MIN_WORDS <= len(split) <= MAX_WORDS and sentence not in seen:
                seen.add(sentence)
                sentences.append(sentence)
    chosen = _take(sentences, count, rng, "sentences", side)
    rows = []
    for k, sentence in enumerate(chosen):
        if k % 2 == 0:
            rows.append((1, sentence))
            continue
        split = sentence.split()
        i = rng.randrange(len(split))
        while True:
            word = rng.choice(words)  # by frequency: every occurrence is a ticket
            if word.lower() != split[i].lower():
                break
        split[i] = word
        rows.append((0, " ".join(split)))
    rng.shuffle(rows)
    return rows


# The Python Library Reference's chapters "Internet Data Handling" and
# "Internet Protocols and Support" (3.11), by top-level module.
INTERNET_SOURCES = frozenset("""
    email json mailbox mimetypes base64 binascii quopri uu
    webbrowser wsgiref urllib http ftplib poplib imaplib smtplib smtpd uuid socketserver
    xmlrpc ipaddress cgi cgitb nntplib telnetlib
    """.split())


def topic_rows(documents, count, rng, side="train"):
    """`[(label, sentence)]`: half from the library's internet chapters (1,
    `INTERNET_SOURCES`), half from everything else (0); `documents` are
    `(source, sentences)` pairs."""
    seen, groups = set(), {0: [], 1: []}
    for source, sentences in documents:
        for sentence in sentences:
            if MIN_WORDS <= len(sentence.split()) <= MAX_WORDS and sentence not in seen:
                seen.add(sentence)
                groups[int(source in INTERNET_SOURCES)].append(sentence)
    rows = [(1, s) for s in _take(groups[1], (count + 1) // 2, rng, "internet sentences", side)]
    rows += [(0, s) for s in _take(groups[0], count // 2, rng, "other sentences", side)]
    rng.shuffle(rows)
    return rows


def sentence_order_rows(documents, count, rng, side="train"):
    """`[(label, first, second)]`: consecutive sentences in order (1) or swapped (0)."""
    pairs = []
    for document in documents:
        for a, b in zip(document, document[1:]):
            if a != b and all(PAIR_MIN_WORDS <= len(s.split()) <= PAIR_MAX_WORDS
                              for s in (a, b)):
                pairs.append((a, b))
    chosen = _take(pairs, count, rng, "sentence pairs", side)
    rows = [(1, a, b) if k % 2 == 0 else (0, b, a) for k, (a, b) in enumerate(chosen)]
    rng.shuffle(rows)
    return rows


def _answer_spans(words, context_words):
    """`(first, last, text offset in the first word, text)` candidates: runs
    of 1..3 content words, each once in the paragraph, punctuation outside."""
    counts = {}
    for word in context_words:
        match = _ANSWER_WORD.match(word)
        key = (match.group(2) if match else word).lower()
        counts[key] = counts.get(key, 0) + 1
    ok = []
    for word in words:
        match = _ANSWER_WORD.match(word)
        ok.append(bool(match) and match.group(2).lower() not in _STOPWORDS
                  and counts.get(match.group(2).lower()) == 1)
    spans = []
    for first in range(len(words)):
        for last in range(first, min(first + MAX_ANSWER_WORDS, len(words))):
            match = _ANSWER_WORD.match(words[last]) if ok[last] else None
            # Punctuation may stand before the first word and after the last only.
            if not match or (last > first and match.group(1)):
                break
            cores = [_ANSWER_WORD.match(w).group(2) for w in words[first:last + 1]]
            spans.append((first, last, len(_ANSWER_WORD.match(words[first]).group(1)),
                          " ".join(cores)))
            if match.group(3):
                break
    return spans


def _question(words, first, last):
    """The sentence with `words[first..last]` replaced by "what", ending in "?"."""
    head, tail = _ANSWER_WORD.match(words[first]), _ANSWER_WORD.match(words[last])
    asked = words[:first] + [head.group(1) + "what" + tail.group(3)] + words[last + 1:]
    return " ".join(asked).rstrip(" .:;,!?") + "?"


def span_qa_articles(documents, count, rng, side="train", prefix="q"):
    """SQuAD v1.1 `data` with `count` questions (one answer each; None: every
    usable one), numbered in the order they were drawn.

    Paragraphs are runs of up to `PARAGRAPH_SENTENCES` sentences; up to
    `QUESTIONS_PER_PARAGRAPH` questions each, from different sentences.
    """
    candidates = []  # (document, paragraph, questions)
    for d, document in enumerate(documents):
        for p in range(0, len(document), PARAGRAPH_SENTENCES):
            sentences = document[p:p + PARAGRAPH_SENTENCES]
            context = " ".join(sentences)
            context_words = context.split()
            offsets, start = [], 0
            for sentence in sentences:
                offsets.append(start)
                start += len(sentence) + 1
            questions = []
            for sentence, offset in zip(sentences, offsets):
                words = sentence.split()
                if not MIN_WORDS <= len(words) <= MAX_WORDS:
                    continue
                spans = _answer_spans(words, context_words)
                if not spans:
                    continue
                first, last, inner, text = rng.choice(spans)
                answer_start = offset + sum(len(w) + 1 for w in words[:first]) + inner
                assert context[answer_start:answer_start + len(text)] == text  # by construction
                questions.append((_question(words, first, last), text, answer_start))
            if questions:
                rng.shuffle(questions)
                candidates.append((d, context, questions[:QUESTIONS_PER_PARAGRAPH]))
    rng.shuffle(candidates)
    articles, total = {}, 0
    limit = len(candidates) * QUESTIONS_PER_PARAGRAPH if count is None else count
    for d, context, questions in candidates:
        if total >= limit:
            break
        questions = questions[:limit - total]
        qas = [{"id": f"{prefix}{total + k}", "question": question,
                "answers": [{"text": text, "answer_start": answer_start}]}
               for k, (question, text, answer_start) in enumerate(questions)]
        total += len(qas)
        articles.setdefault(d, []).append({"context": context, "qas": qas})
    if count is not None and total < count:
        raise ValueError(f"Only {total} usable {side} questions in the default corpus; asked for "
                         f"{count}. Ask for fewer.")
    return [{"title": f"{side}-{d}", "paragraphs": paragraphs}
            for d, paragraphs in sorted(articles.items())]


def answer_sentence_rows(documents, count, rng, side="train"):
    """`[(label, question, sentence)]` in QNLI's form: a question made from one
    sentence of a paragraph as in span QA (a span replaced by "what"), paired
    with that sentence (1: it holds the answer) or with another sentence of
    the same paragraph (0), half and half."""
    candidates = []  # (question, its sentence, another sentence of the paragraph)
    for document in documents:
        for p in range(0, len(document), PAIR_PARAGRAPH_SENTENCES):
            sentences = document[p:p + PAIR_PARAGRAPH_SENTENCES]
            context_words = " ".join(sentences).split()
            for i, sentence in enumerate(sentences):
                words = sentence.split()
                others = [s for j, s in enumerate(sentences) if j != i and s != sentence
                          and PAIR_MIN_WORDS <= len(s.split()) <= PAIR_MAX_WORDS]
                if not MIN_WORDS <= len(words) <= MAX_WORDS or not others:
                    continue
                spans = _answer_spans(words, context_words)
                if spans:
                    first, last, _, _ = rng.choice(spans)
                    candidates.append((_question(words, first, last), sentence,
                                       rng.choice(others)))
    chosen = _take(candidates, count, rng, "questions with another sentence beside them", side)
    rows = [(1, q, s) if k % 2 == 0 else (0, q, other)
            for k, (q, s, other) in enumerate(chosen)]
    rng.shuffle(rows)
    return rows
