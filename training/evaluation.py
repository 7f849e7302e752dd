"""After pretraining: held-out masked-LM / NSP accuracy against the
most-frequent-token baseline, and fill-in-the-[MASK] examples."""


def evaluate(model, heldout_source, train_source, batch_size, bert_config):
    """Held-out loss/accuracies and the most-frequent-token baseline."""
    import numpy as np

    from tf_records.reader import pretraining_dataset

    heldout = pretraining_dataset(heldout_source, batch_size, shuffle_buffer=0, repeat=False,
                                  model_config=bert_config)
    results = model.evaluate(heldout, verbose=0, return_dict=True)
    # The baseline: always predict the masked token most frequent in training.
    counts = np.zeros(bert_config.vocab_size, np.int64)
    train = pretraining_dataset(train_source, 256, shuffle_buffer=0, repeat=False,
                                model_config=bert_config)
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
    return results


def fill_mask_examples(model, vocab_file, cfg, heldout_text_files, count):
    """A few held-out sentences with one word masked, and the top 3 guesses."""
    import numpy as np

    from keras_bert_impl.tokenizers import BertTokenizer
    from tf_records.writer import read_documents

    tokenizer = BertTokenizer(vocab_file, do_lower_case=cfg.do_lower_case)
    rng = np.random.default_rng(cfg.seed)
    lines = [line for doc in read_documents(heldout_text_files) for line in doc
             if 8 <= len(line.split()) <= 25]
    shown = []
    for line in rng.permutation(lines)[: count * 4]:
        pieces = tokenizer.tokenize_with_offsets(str(line))
        tokens = [piece for piece, _ in pieces]
        # Whole words of one piece, so the [MASK] stands for a word.
        words = [i for i, t in enumerate(tokens) if t.isalpha() and len(t) > 3
                 and (i + 1 == len(tokens) or not tokens[i + 1].startswith("##"))]
        if not words or len(tokens) + 2 > cfg.max_seq_length:
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
