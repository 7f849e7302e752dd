"""Numpy ports of the original XLNet `data_utils.py` (our own code, the
original's loops): span masking, the A/B split, `create_tfrecords` and the
reader's local permutation and parser, which the records tests compare
`tf_records.xlnet` with."""

import numpy as np
from xlnet_records_cases import CLS
from xlnet_records_cases import SEP
from xlnet_records_cases import START


def port_sample_mask(is_start, rng, goal, alpha, beta, reverse=False, whole_word=False):
    seg_len = len(is_start)
    mask = np.zeros(seg_len, bool)
    ngrams = np.arange(1, 6)
    pvals = 1.0 / np.arange(1, 6)
    pvals /= pvals.sum(keepdims=True)
    if reverse:
        is_start = np.flip(is_start, 0)
    num_predict = cur_len = 0
    while cur_len < seg_len:
        if goal is not None and num_predict >= goal:
            break
        n = rng.choice(ngrams, p=pvals)
        if goal is not None:
            n = min(n, goal - num_predict)
        ctx_size = (n * alpha) // beta
        l_ctx = rng.integers(ctx_size)
        r_ctx = ctx_size - l_ctx
        beg = cur_len + l_ctx
        while beg < seg_len and not is_start[beg]:
            beg += 1
        if beg >= seg_len:
            break
        end, cnt_ngram = beg + 1, 1
        while end < seg_len:
            # the original reads seg[beg] here; whole words: seg[end] (its pull request 16)
            if is_start[end if whole_word else beg]:
                cnt_ngram += 1
                if cnt_ngram > n:
                    break
            end += 1
        if end >= seg_len:
            break
        if whole_word and goal is not None:  # ours: never past the goal, fewer whole words
            while end - beg > goal - num_predict:
                end -= 1
                while end > beg and not is_start[end]:
                    end -= 1
            if end == beg:
                break
        mask[beg:end] = True
        num_predict += end - beg
        cur_len = end + r_ctx
    while goal is not None and num_predict < goal:
        i = rng.integers(seg_len)
        if not mask[i]:
            mask[i] = True
            num_predict += 1
    return np.flip(mask, 0) if reverse else mask


def port_split_a_and_b(data, sent_ids, begin_idx, tot_len, rng):
    data_len = data.shape[0]
    if begin_idx + tot_len >= data_len:
        return None
    end_idx, cut_points = begin_idx + 1, []
    while end_idx < data_len:
        if sent_ids[end_idx] != sent_ids[end_idx - 1]:
            if end_idx - begin_idx >= tot_len:
                break
            cut_points.append(end_idx)
        end_idx += 1
    a_begin = begin_idx
    if len(cut_points) == 0 or rng.random() < 0.5:
        label = 0
        a_end = end_idx if len(cut_points) == 0 else cut_points[rng.integers(len(cut_points))]
        b_len = max(1, tot_len - (a_end - a_begin))
        b_begin = rng.integers(0, data_len - 1 - b_len, endpoint=True)  # random.randint
        b_end = b_begin + b_len
        while b_begin > 0 and sent_ids[b_begin - 1] == sent_ids[b_begin]:
            b_begin -= 1
        while b_end < data_len - 1 and sent_ids[b_end - 1] == sent_ids[b_end]:
            b_end += 1
    else:
        label = 1
        a_end = cut_points[rng.integers(len(cut_points))]
        b_begin, b_end = a_end, end_idx
    while a_end - a_begin + b_end - b_begin > tot_len:
        if a_end - a_begin > b_end - b_begin:
            a_end -= 1
        else:
            b_end -= 1
    if a_end >= data_len or b_end >= data_len:
        return None
    return (data[a_begin:a_end], data[b_begin:b_end], label,
            data[a_begin + 1:a_end + 1], data[b_begin:b_end + 1])


def port_create_tfrecords(data, sent_ids, schema, seed, whole_word=False):
    """`batchify` + `create_tfrecords` of the original, one replica per core."""
    rng = np.random.default_rng(seed)
    bsz, cores = schema.batch_size, schema.num_cores
    per_core = bsz // cores
    if schema.bi_data:
        steps = len(data) // (bsz // 2)
        fwd = data[:bsz // 2 * steps].reshape(bsz // 2, steps)
        fwd_sent = sent_ids[:bsz // 2 * steps].reshape(bsz // 2, steps)
        fwd = fwd.reshape(cores, 1, per_core // 2, -1)
        fwd_sent = fwd_sent.reshape(cores, 1, per_core // 2, -1)
        data = np.concatenate([fwd, fwd[:, :, :, ::-1]], 1).reshape(bsz, -1)
        sent_ids = np.concatenate([fwd_sent, fwd_sent[:, :, :, ::-1]], 1).reshape(bsz, -1)
    else:
        steps = len(data) // bsz
        data = data[:bsz * steps].reshape(bsz, steps)
        sent_ids = sent_ids[:bsz * steps].reshape(bsz, steps)
    seq_len, reuse_len = schema.seq_len, schema.reuse_len
    sep, cls = np.array([schema.sep_id]), np.array([schema.cls_id])
    records, i = [], 0
    while i + seq_len <= data.shape[1]:
        batch = []
        for idx in range(bsz):
            inp = data[idx, i:i + reuse_len]
            tgt = data[idx, i + 1:i + reuse_len + 1]
            results = port_split_a_and_b(data[idx], sent_ids[idx], i + reuse_len,
                                         seq_len - reuse_len - 3, rng)
            if results is None:
                return records
            a_data, b_data, label, a_target, b_target = results
            reverse = schema.bi_data and (idx // (per_core // 2)) % 2 == 1
            goal_1 = schema.num_predict // 2
            goal_0 = schema.num_predict - goal_1
            mask_0 = port_sample_mask(START[inp], rng, goal_0, schema.mask_alpha,
                                      schema.mask_beta, reverse, whole_word)
            rest = np.concatenate([a_data, sep, b_data, sep, cls])
            mask_1 = port_sample_mask(START[rest], rng, goal_1, schema.mask_alpha,
                                      schema.mask_beta, reverse, whole_word)
            batch.append({
                "input": np.concatenate([inp, rest]),
                "is_masked": np.concatenate([mask_0, mask_1]).astype(int),
                "target": np.concatenate([tgt, a_target, b_target, cls, cls]),
                "seg_id": np.array([0] * (reuse_len + len(a_data)) + [0] + [1] * len(b_data)
                                   + [1] + [2]),
                "label": np.array([label]),
            })
        records += batch
        i += reuse_len
    return records


def port_local_perm(inputs, targets, is_masked, index, sep_id=SEP, cls_id=CLS):
    non_func = ~((inputs == sep_id) | (inputs == cls_id))
    non_mask = ~is_masked & non_func
    masked_or_func = ~non_mask
    rev_index = np.where(non_mask, -1, index)
    target_tokens = masked_or_func & non_func
    self_rev_index = np.where(target_tokens, rev_index, rev_index + 1)
    perm_mask = (self_rev_index[:, None] <= rev_index[None, :]) & masked_or_func
    new_targets = np.concatenate([inputs[:1], targets[:-1]])
    return perm_mask.astype(np.float32), new_targets, target_tokens.astype(np.float32)


def port_parser(record, index_0, index_1, reuse_len, num_predict):
    """The original `get_dataset` parser given the two sampled orders."""
    inputs, target = record["input"], record["target"]
    is_masked = record["is_masked"].astype(bool)
    seq_len = len(inputs)
    pm_0, t_0, tm_0 = port_local_perm(inputs[:reuse_len], target[:reuse_len],
                                      is_masked[:reuse_len], index_0)
    pm_1, t_1, tm_1 = port_local_perm(inputs[reuse_len:], target[reuse_len:],
                                      is_masked[reuse_len:], index_1)
    rest = seq_len - reuse_len
    perm_mask = np.block([[pm_0, np.ones([reuse_len, rest])], [np.zeros([rest, reuse_len]), pm_1]])
    target, target_mask = np.concatenate([t_0, t_1]), np.concatenate([tm_0, tm_1])
    indices = np.flatnonzero(target_mask)
    pad = num_predict - len(indices)
    mapping = np.concatenate([np.eye(seq_len)[indices], np.zeros([pad, seq_len])])
    return {"perm_mask": perm_mask, "target_mapping": mapping,
            "target": np.concatenate([target[indices], np.zeros(pad)]),
            "target_mask": np.concatenate([np.ones(len(indices)), np.zeros(pad)]),
            "input_k": inputs, "input_q": target_mask}
