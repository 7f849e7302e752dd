import numpy as np
import tensorflow as tf

from keras_bert_impl.bert.bert_tokenizer import BertTokenizer
from tf_records.command_line.progress import Progress
from tf_records.command_line.progress import batch_progress
from tf_records.documents import read_documents

"""After pretraining: held-out masked-LM / NSP accuracy against the
most-frequent-token baseline and fill-in-the-[MASK] examples (BERT);
next-token accuracy and perplexity against the unigram model and greedy
continuations (GPT, BERT's LTR ablation); a biLM's perplexity against the
unigram model (ELMo); permutation-LM accuracy and perplexity against the
unigram model, with and without the memory, and words hidden by the
permutation mask (XLNet)."""


def say(message):
    print(message, flush=True)


def _batches(dataset):
    """Batches in one pass of `dataset`, or None if unknown."""
    count = int(tf.data.experimental.cardinality(dataset))
    return count if count >= 0 else None



def evaluate(model, heldout, train, vocab_size):
    """Held-out masked-LM (and NSP) scores and the most-frequent-token baseline.

    Args:
        model: a compiled BERT pretrainer.
        heldout: one pass of held-out `(x, y, sample_weight)` batches.
        train: one pass of training batches (the baseline's counts).
        vocab_size: int.
    """
    results = model.evaluate(heldout, verbose=0, return_dict=True, callbacks=[
        batch_progress("Held-out evaluation", total=_batches(heldout))])
    # The baseline: always predict the masked token most frequent in training.
    counts = np.zeros(vocab_size, np.int64)
    for _, y, w in train.take(200):
        np.add.at(counts, y["masked_lm"].numpy()[w["masked_lm"].numpy() > 0], 1)
    top = int(counts.argmax())
    hits = total = 0
    for _, y, w in heldout:
        real = w["masked_lm"].numpy() > 0
        hits += int((y["masked_lm"].numpy()[real] == top).sum())
        total += int(real.sum())
    results["baseline_masked_lm_accuracy"] = hits / max(total, 1)
    results["baseline_token_id"] = top
    results["heldout_masked_tokens"] = total
    say(f"Held-out masked-LM accuracy {results['masked_lm_accuracy']:.4f} vs "
        f"{results['baseline_masked_lm_accuracy']:.4f} for always guessing the most "
        f"frequent token"
        + (f"; next-sentence accuracy {results['next_sentence_accuracy']:.4f}"
           if "next_sentence_accuracy" in results else "")
        + f" ({total} masked tokens)")
    return results


def _batch_sums(logits, targets, real, unigram_log_prob, top):
    """One batch's held-out sums, float64 `(5,)`: the model's negative
    log-likelihood, the unigram model's, the model's hits, the most frequent
    token's hits and the real targets, over the `real` positions of `logits`
    `(..., V)` and `targets` `(...)`."""
    peak = logits.max(-1, keepdims=True)
    log_z = np.log(np.exp(logits - peak).sum(-1)) + peak[..., 0]
    target_logit = np.take_along_axis(logits, targets[..., None], -1)[..., 0]
    return np.array([(log_z - target_logit)[real].sum(),
                     -unigram_log_prob[targets[real]].sum(),
                     (logits.argmax(-1) == targets)[real].sum(),
                     (targets[real] == top).sum(),
                     real.sum()], np.float64)


def next_token_report(model, heldout, train, vocab_size, output="lm"):
    """Held-out next-token accuracy and perplexity against the unigram model.

    Perplexity is exp of the mean negative log-likelihood per real target
    token, summed over the whole held-out set (not a mean of batch means).
    The baseline is the unigram distribution of the training targets
    (add-one smoothed): its perplexity, and the accuracy of always guessing
    the most frequent token.

    Args:
        model: a model whose output `output` is `(B, S, V)` next-token logits.
        heldout: one pass of held-out `(x, {"lm": next_ids}, {"lm": weights})`.
        train: one pass of training batches (the unigram counts).
        vocab_size: int.
    """
    counts = np.ones(vocab_size, np.float64)  # add-one
    for _, y, w in train.take(200):
        np.add.at(counts, y[output].numpy()[w[output].numpy() > 0], 1)
    unigram_log_prob = np.log(counts / counts.sum())
    top = int(counts.argmax())
    sums = np.zeros(5)
    meter = Progress("Held-out evaluation", total=_batches(heldout), unit="batches")
    for x, y, w in meter.iterate(heldout):
        logits = np.asarray(model.predict_on_batch(x)[output], np.float64)  # (B, S, V)
        sums += _batch_sums(logits, y[output].numpy(), w[output].numpy() > 0,
                            unigram_log_prob, top)
    nll, unigram_nll, hits, unigram_hits, total = sums
    total = max(int(total), 1)
    results = {
        "next_token_accuracy": hits / total,
        "perplexity": float(np.exp(nll / total)),
        "baseline_next_token_accuracy": unigram_hits / total,
        "baseline_unigram_perplexity": float(np.exp(unigram_nll / total)),
        "heldout_target_tokens": total,
    }
    say(f"Held-out next-token accuracy {results['next_token_accuracy']:.4f} vs "
        f"{results['baseline_next_token_accuracy']:.4f} for always guessing the most frequent "
        f"token; perplexity {results['perplexity']:.1f} vs {results['baseline_unigram_perplexity']:.1f} "
        f"for the unigram model ({total} target tokens)")
    return results


def bilm_report(model, heldout, train_counts):
    """Held-out perplexity of a biLM (`ElmoLanguageModel`) against the unigram model.

    As bilm-tf's `test`: perplexity is exp of the mean over real target
    positions of `0.5 * (NLL_forward + NLL_backward)` (full softmax),
    summed over the whole held-out set; each direction's own perplexity
    too. The model's kept LSTM states are zeroed first, then carried
    through the held-out streams batch after batch, as in training. The
    baseline is the unigram distribution of the training targets (both
    directions, add-one smoothed): the held-out targets' perplexity under it.

    Args:
        model: an `ElmoLanguageModel` (stateful or not).
        heldout: one pass of held-out `(x, y, sample_weight)` batches
            (`tf_records.elmo.reader.elmo_dataset(..., repeat=False)`).
        train_counts: int `(V,)`, how often each id is a training target.
    """
    counts = np.asarray(train_counts, np.float64) + 1.0  # add-one
    unigram_log_prob = np.log(counts / counts.sum())
    model.reset_states()
    nll = {"forward": 0.0, "backward": 0.0}
    unigram_nll = 0.0
    total = 0
    meter = Progress("Held-out evaluation", total=_batches(heldout), unit="batches")
    for x, y, w in meter.iterate(heldout):
        losses = model.token_losses(model.predict_on_batch(x), y)  # full softmax, (B, T) each
        for direction in nll:
            real = w[direction].numpy() > 0
            nll[direction] += float(np.asarray(losses[direction], np.float64)[real].sum())
            unigram_nll -= float(unigram_log_prob[y[direction].numpy()[real]].sum())
        total += int((w["forward"].numpy() > 0).sum())
    model.reset_states()
    total = max(total, 1)
    results = {
        "perplexity": float(np.exp((nll["forward"] + nll["backward"]) / (2 * total))),
        "forward_perplexity": float(np.exp(nll["forward"] / total)),
        "backward_perplexity": float(np.exp(nll["backward"] / total)),
        "baseline_unigram_perplexity": float(np.exp(unigram_nll / (2 * total))),
        "heldout_target_tokens": total,
    }
    say(f"Held-out perplexity {results['perplexity']:.1f} (forward "
        f"{results['forward_perplexity']:.1f}, backward {results['backward_perplexity']:.1f}) vs "
        f"{results['baseline_unigram_perplexity']:.1f} for the unigram model ({total} targets "
        "per direction)")
    return results


def greedy_continuations(model, prompts, max_new_tokens, max_length, extra_inputs=None):
    """Greedy next-token continuations of token-id prompts (a list of lists).

    Runs the model on the growing sequence each step (no key/value cache:
    these are a few short examples after training).
    """
    out = []
    for prompt in prompts:
        ids = list(prompt)
        for _ in range(max_new_tokens):
            if len(ids) >= max_length:
                break
            x = {"input_word_ids": np.array([ids], np.int32),
                 "input_mask": np.ones((1, len(ids)), np.int32)}
            if extra_inputs:
                x.update({k: np.zeros((1, len(ids)), np.int32) for k in extra_inputs})
            logits = model.predict_on_batch(x)
            logits = logits["lm"] if isinstance(logits, dict) else logits
            ids.append(int(np.argmax(logits[0, -1])))
        out.append(ids[len(prompt):])
    return out


def fill_mask_examples(model, vocab_file, heldout_text_files, count, do_lower_case,
                       max_seq_length, seed):
    """A few held-out sentences with one word masked, and the top 3 guesses."""
    tokenizer = BertTokenizer(vocab_file, do_lower_case=do_lower_case)
    rng = np.random.default_rng(seed)
    lines = [line for doc in read_documents(heldout_text_files) for line in doc
             if 8 <= len(line.split()) <= 25]
    shown = []
    for line in rng.permutation(lines)[: count * 4]:
        pieces = tokenizer.tokenize_with_offsets(str(line))
        tokens = [piece for piece, _ in pieces]
        # Whole words of one piece, so the [MASK] stands for a word.
        words = [i for i, t in enumerate(tokens) if t.isalpha() and len(t) > 3
                 and (i + 1 == len(tokens) or not tokens[i + 1].startswith("##"))]
        if not words or len(tokens) + 2 > max_seq_length:
            continue
        i = int(rng.choice(words))
        ids = tokenizer.convert_tokens_to_ids(["[CLS]"] + tokens[:i] + ["[MASK]"] + tokens[i + 1:]
                                              + ["[SEP]"])
        x = {"input_word_ids": np.array([ids], np.int32),
             "input_mask": np.ones((1, len(ids)), np.int32),
             "input_type_ids": np.zeros((1, len(ids)), np.int32),
             "masked_lm_positions": np.array([[i + 1]], np.int32)}
        logits = model.predict_on_batch(x)["masked_lm"][0, 0]
        guesses = tokenizer.convert_ids_to_tokens(np.argsort(-logits)[:3].tolist())
        start, end = pieces[i][1]
        shown.append((f"{line[:start]}[MASK]{line[end:]}", tokens[i], guesses))
        if len(shown) == count:
            break
    return shown


def plm_report(model, heldout, train_counts):
    """Held-out permutation-LM accuracy and perplexity against the unigram model.

    As training reads them: the held-out streams in order with a fresh
    factorization order per record and the memory carried from batch to
    batch (zeroed first and after). Perplexity is exp of the mean negative
    log-likelihood per predicted token over the whole held-out set; the
    same again with the memory zeroed before every batch shows what the
    memory adds. The baseline is the unigram distribution of the training
    targets (add-one smoothed): its perplexity, and the accuracy of always
    guessing the most frequent target.

    Args:
        model: an `XLNetPretrainer`.
        heldout: one pass of held-out `(x, target, target_mask)` batches.
        train_counts: int `(V,)`, how often each id is a training target.
    """
    counts = np.asarray(train_counts, np.float64) + 1.0  # add-one
    unigram_log_prob = np.log(counts / counts.sum())
    top = int(counts.argmax())
    totals = {}
    for memory in (True, False):
        model.reset_states()
        sums = np.zeros(5)
        for x, y, w in heldout:
            if not memory:
                model.reset_states()
            logits = np.asarray(model.predict_on_batch(x), np.float64)  # (B, P, V)
            sums += _batch_sums(logits, y.numpy(), w.numpy() > 0, unigram_log_prob, top)
        nll, unigram_nll, hits, unigram_hits, total = sums
        totals[memory] = (nll, unigram_nll, hits, unigram_hits, max(int(total), 1))
    model.reset_states()
    nll, unigram_nll, hits, unigram_hits, total = totals[True]
    results = {
        "plm_accuracy": hits / total,
        "perplexity": float(np.exp(nll / total)),
        "perplexity_without_memory": float(np.exp(totals[False][0] / total)),
        "baseline_plm_accuracy": unigram_hits / total,
        "baseline_unigram_perplexity": float(np.exp(unigram_nll / total)),
        "heldout_target_tokens": total,
    }
    say(f"Held-out permutation-LM accuracy {results['plm_accuracy']:.4f} vs "
        f"{results['baseline_plm_accuracy']:.4f} for always guessing the most frequent token; "
        f"perplexity {results['perplexity']:.1f} vs {results['baseline_unigram_perplexity']:.1f} "
        f"for the unigram model ({results['perplexity_without_memory']:.1f} with the memory "
        f"zeroed at every batch; {total} predicted tokens)")
    return results


def fill_in_examples(model, tokenizer, text_files, count, seq_len, seed):
    """A few held-out sentences with one single-piece word hidden from every
    position (`perm_mask`) and predicted by the query stream: `(text with
    <mask>, the word, the top guess)`. Inputs as the records: `A <sep>
    <cls>`, here left-padded to `seq_len` (`input_mask` 1 on padding)."""
    rng = np.random.default_rng(seed)
    lines = [line for doc in read_documents(text_files) for line in doc
             if 8 <= len(line.split()) <= 25]
    rows = []
    for line in rng.permutation(lines)[: count * 4]:
        ids = tokenizer.encode(str(line))
        if len(ids) + 2 > seq_len:
            continue
        pieces = [tokenizer.id_to_piece(i) for i in ids]
        # A word of one piece: it starts a word, the next piece does too.
        words = [i for i, p in enumerate(pieces) if p.startswith("\u2581") and len(p) > 4
                 and p[1:].isalpha() and (i + 1 == len(ids) or tokenizer.is_start_piece(ids[i + 1]))]
        if not words:
            continue
        rows.append((ids, int(rng.choice(words)), pieces))
        if len(rows) == count:
            break
    if not rows:
        return []
    n = len(rows)
    word_ids = np.full((n, seq_len), tokenizer.pad_id, np.int32)
    type_ids = np.zeros((n, seq_len), np.int32)
    input_mask = np.ones((n, seq_len), np.float32)
    perm_mask = np.zeros((n, seq_len, seq_len), np.float32)
    target_mapping = np.zeros((n, 1, seq_len), np.float32)
    for r, (ids, i, _) in enumerate(rows):
        row = ids + [tokenizer.sep_id, tokenizer.cls_id]
        start = seq_len - len(row)
        word_ids[r, start:] = row
        type_ids[r, -1] = 2  # <cls>, as the records
        input_mask[r, start:] = 0.0
        perm_mask[r, :, start + i] = 1.0  # no position sees the hidden word
        target_mapping[r, 0, start + i] = 1.0
    model.reset_states()
    logits = np.asarray(model.predict_on_batch({
        "input_word_ids": word_ids, "input_type_ids": type_ids, "input_mask": input_mask,
        "perm_mask": perm_mask, "target_mapping": target_mapping}))  # (n, 1, V)
    model.reset_states()
    shown = []
    for r, (_, i, pieces) in enumerate(rows):
        guess = tokenizer.id_to_piece(int(logits[r, 0].argmax())).replace("\u2581", " ").strip()
        masked = "".join(pieces[:i] + ["\u2581<mask>"] + pieces[i + 1:]).replace("\u2581", " ")
        shown.append((masked.strip(), pieces[i][1:], guess))
    return shown
