"""
Best-of-N maths, shared by every stage that scores pools (train's validation, evaluate, steer, transfer, curve,
sample): the metrics of one problem (argmax with ties split, within-problem AUROC), the pools (answer groups, fixed
random N-subsets), the selection rules (argmax, majority and weighted votes, DeepConf's filtered votes, oracle), and
the paired bootstrap intervals (over problems or their groups). No knobs, no files: each stage passes its own. The
table built from these (free rows, the reference chosen on validation, score caches, formatting) is evaluate.py's.
"""
import numpy as np

# -----------------------------------------------------------------------------
# metrics (per problem: scores and 0/1 labels of its candidates)


def top_mask(v):
    """True where v [..., n] ties with the max of its last axis (to 1e-12 relative; -inf and +inf tie
    with themselves). NaN is an error: a NaN score would silently never (or always) win."""
    v = np.asarray(v, dtype=np.float64)
    if np.isnan(v).any():
        raise ValueError("NaN score; fix: find the scorer that produced it (the caller names it)")
    mx = v.max(-1, keepdims=True)
    tol = np.where(np.isfinite(mx), 1e-12 * np.maximum(1.0, np.abs(mx)), 0.0)
    return v >= mx - tol


def best_of_n(scores, labels):
    """Expected correctness of argmax selection; ties split evenly, never 'first wins'."""
    return float(np.asarray(labels, dtype=np.float64)[top_mask(scores)].mean())


def within_auroc(scores, labels):
    """AUROC of one problem's pool (ties count 1/2 whatever the value, -inf included); None when the
    pool is all right or all wrong."""
    scores, labels = np.asarray(scores, dtype=np.float64), np.asarray(labels, dtype=bool)
    if np.isnan(scores).any():
        raise ValueError("NaN score; fix: find the scorer that produced it (the caller names it)")
    pos, neg = scores[labels], scores[~labels]
    if len(pos) == 0 or len(neg) == 0:
        return None
    p, n = pos[:, None], neg[None, :]  # compare, never subtract: -inf - -inf is NaN
    return float((p > n).mean() + 0.5 * (p == n).mean())


def pool_metrics(score_lists, label_lists):
    """Best-of-N accuracy, mean within-problem AUROC (over problems where it is defined), oracle
    pass@N and single-pass accuracy over a list of problems."""
    bon = [best_of_n(s, l) for s, l in zip(score_lists, label_lists)]
    aucs = [a for a in (within_auroc(s, l) for s, l in zip(score_lists, label_lists)) if a is not None]
    return {
        'acc': float(np.mean(bon)) if bon else float('nan'),
        'auroc': float(np.mean(aucs)) if aucs else float('nan'),
        'n_auroc_problems': len(aucs),
        'oracle': float(np.mean([float(np.max(l)) for l in label_lists])) if label_lists else float('nan'),
        'single': float(np.mean([float(np.mean(l)) for l in label_lists])) if label_lists else float('nan'),
        'n_problems': len(label_lists),
    }


# -----------------------------------------------------------------------------
# pool statistics: labels, answer groups and fixed random subsets, built once per split


def answer_groups(answers, equal):
    """Group id per candidate by answer equivalence (equal(a, b) -> bool); -1 = no extracted answer."""
    reps, seen, out = [], {}, []
    for a in answers:
        if a is None or str(a).strip() == '':
            out.append(-1)
            continue
        if a not in seen:
            seen[a] = next((g for g, r in enumerate(reps) if equal(a, r)), len(reps))
            if seen[a] == len(reps):
                reps.append(a)
        out.append(seen[a])
    return np.array(out, dtype=np.int64)


def subset_index(m, n, n_subsets, seed):
    """[k, n] candidate indices: the whole pool when m == n, else n_subsets random n-subsets."""
    if n == m:
        return np.arange(m)[None, :]
    rng = np.random.default_rng(seed)
    return np.argsort(rng.random((n_subsets, m)), axis=1)[:, :n]


def build_pool(problems, ns, n_subsets, seed, equal):
    """Per problem: 'labels' [m] float, 'groups' [m] int, 'subsets' {n: [k, n]} for n in ns (n <= m), 'stopped'
    [m] bool (candidates ended by online pruning: never selected; grading.grade gives them no answer, so no vote)."""
    pool = []
    for p in problems:
        m = len(p['candidates'])
        if m < min(ns):
            raise ValueError(f"problem {p['key']} has {m} candidates but best-of-{min(ns)} needs {min(ns)}; "
                             f"fix: --n_eval=<= {m} or extract more samples")
        pool.append({'key': p['key'], 'labels': np.array([float(c['correct']) for c in p['candidates']]),
                     'groups': answer_groups([c.get('answer') for c in p['candidates']], equal),
                     'stopped': np.array([c.get('finish') == 'pruned' for c in p['candidates']], dtype=bool),
                     'subsets': {n: subset_index(m, n, n_subsets, [seed, int(p['index'])]) for n in ns if n <= m}})
    return pool


# -----------------------------------------------------------------------------
# selection rules on one problem's subsets; each returns the expected correctness, ties split evenly


def best_of_n_sub(scores, labels, sub, stopped=None):
    """Mean over subsets of best_of_n (bestofn.best_of_n's rule: argmax, ties = mean label of the tied). stopped [m]:
    candidates that are never selected (a subset of stopped candidates only selects nothing: 0)."""
    s, l = scores[sub], labels[sub]
    if stopped is None or not stopped.any():
        top = top_mask(s)
        return float(((top * l).sum(1) / top.sum(1)).mean())
    ok = ~stopped[sub]
    top = top_mask(np.where(ok, s, -np.inf)) & ok
    return float(((top * l).sum(1) / np.maximum(top.sum(1), 1)).mean())


def vote_sub(groups, labels, sub, scores=None, temp=None, keep=None):
    """Majority vote over answer groups (scores None), or verifier-weighted vote: each candidate adds
    softmax(score / temp) over its subset to its group (temp None: the scores themselves, for a PRM's
    probabilities). Candidates without an answer do not vote, nor do those outside keep [k, n] (a filter);
    a subset where nobody votes is a uniform pick. The winning group's correctness is the mean label of its
    members; tied groups split."""
    g, l = groups[sub], labels[sub]
    if keep is not None:
        g = np.where(keep, g, -1)
    G = int(groups.max()) + 1
    if G == 0:
        return float(l.mean())
    if scores is None:
        w = np.ones_like(l)
    elif temp is None:
        w = np.maximum(scores[sub].astype(np.float64), 0.0)  # probabilities; a -inf (unscored) adds nothing
    else:  # weights relative to the best candidate WITH an answer: one without must not push every voter to 0
        s = scores[sub]
        top = np.where(g >= 0, s, -np.inf).max(1, keepdims=True)
        with np.errstate(over='ignore'):
            w = np.where(g >= 0, np.exp((s - np.where(np.isfinite(top), top, 0.0)) / temp), 0.0)
    onehot = g[:, :, None] == np.arange(G)  # [k, n, G]
    gw = np.einsum('kn,kng->kg', w, onehot)
    cnt = onehot.sum(1)
    gl = np.einsum('kn,kng->kg', l, onehot) / np.maximum(cnt, 1)
    present = cnt > 0
    top = top_mask(np.where(present, gw, -np.inf)) & present
    with np.errstate(invalid='ignore', divide='ignore'):
        acc = np.where(present.any(1), (top * gl).sum(1) / top.sum(1), l.mean(1))
    return float(acc.mean())


def oracle_sub(labels, sub):
    """pass@n on the same subsets as the selection rules, so no rule can beat it."""
    return float(labels[sub].max(1).mean())


def problem_aurocs(score_lists, pool):
    """Within-problem AUROC per problem [P] (stopped candidates are unlabelled: left out); NaN where the
    pool is all right or all wrong."""
    a = [within_auroc(s[~q['stopped']], q['labels'][~q['stopped']]) for s, q in zip(score_lists, pool)]
    return np.array([np.nan if x is None else x for x in a], dtype=np.float64)


def mean_auroc(score_lists, pool):
    a = problem_aurocs(score_lists, pool)
    a = a[~np.isnan(a)]
    return float(a.mean()) if len(a) else float('nan'), len(a)


def check_scores(score_lists, pool, where):
    """float64 copies of the scores; a NaN is an error naming the scorer (where) and the problem.
    -inf is a valid score (e.g. nothing to score): it ties with other -inf scores."""
    out = [np.asarray(s, dtype=np.float64) for s in score_lists]
    for s, q in zip(out, pool):
        if np.isnan(s).any():
            raise ValueError(f"{where}: problem {q['key']} has NaN scores at candidates "
                             f"{np.flatnonzero(np.isnan(s)).tolist()}; fix: check that scorer (a checkpoint trained to "
                             "NaN, or NaN in the stored statistics)")
    return out


def per_problem_run(acc_at, auroc=None, n=None, **extra):
    """A run's metrics from its per-problem values (acc_at {n: [P]}, auroc [P] with NaN where undefined):
    their means (acc = acc_at[n]), with the values kept under 'per_problem' for the intervals."""
    m = {'acc_at': {k: float(np.mean(v)) for k, v in acc_at.items()}, **extra,
         'per_problem': {'acc_at': acc_at, 'auroc': auroc}}
    if n is not None:
        m['acc'] = m['acc_at'][n]
    if auroc is not None:
        ok = auroc[~np.isnan(auroc)]
        m['auroc'], m['n_auroc_problems'] = (float(ok.mean()) if len(ok) else float('nan')), len(ok)
    return m


def scored_metrics(score_lists, pool, ns, temp=None, vote=False, where='scores', n=None):
    """Best-of-n for n in ns, mean within-problem AUROC over the full pool, and (vote=True) the
    verifier-weighted vote at each n with temperature temp ('vote_at', per problem under
    'per_problem'). where: the scorer, named in errors; n: the headline n ('acc')."""
    score_lists = check_scores(score_lists, pool, where)
    acc = {k: np.array([best_of_n_sub(s, q['labels'], q['subsets'][k], q['stopped'])
                        for s, q in zip(score_lists, pool)])
           for k in ns}
    m = per_problem_run(acc, problem_aurocs(score_lists, pool), n)
    if vote:
        m['per_problem']['vote_at'] = {k: np.array([vote_sub(q['groups'], q['labels'], q['subsets'][k], s, temp)
                                                    for s, q in zip(score_lists, pool)]) for k in ns}
        m['vote_at'] = {k: float(v.mean()) for k, v in m['per_problem']['vote_at'].items()}
    return m


def choose_temp(score_lists, pool, n, temps, where='scores'):
    """Weighted-vote temperature with the best vote accuracy at n on a validation pool (first on ties)."""
    accs = [scored_metrics(score_lists, pool, [n], t, vote=True, where=where)['vote_at'][n] for t in temps]
    return float(temps[int(np.argmax(accs))])


# -----------------------------------------------------------------------------
# 95% intervals: a paired bootstrap over problems, or over their groups (rows of several runs also resample their
# seeds)


def boot_draws(n_problems, n_boot, seed, groups=None):
    """[n_boot, M] problem indices, drawn with replacement; the same draws serve every method (paired). groups [P]
    (tasks.group_key of each problem) or None: problems drawn (M = P); with groups that hold several problems, the
    groups are drawn with replacement and each drawn group brings all its problems (a cluster bootstrap: problems
    sharing their numbers are not independent), a draw's indices padded with P (no problem) to the longest draw."""
    idx = np.random.default_rng([seed, n_problems]).integers(0, n_problems, (n_boot, n_problems))
    if groups is None:
        return idx
    _, gid = np.unique(np.asarray(groups, dtype=str), return_inverse=True)
    G = int(gid.max()) + 1 if len(gid) else 0
    if G == n_problems:  # a group per problem: the problems' draws
        return idx
    members = [np.flatnonzero(gid == g) for g in range(G)]
    draws = [np.concatenate([members[g] for g in gs]) for gs in
             np.random.default_rng([seed, n_problems, G]).integers(0, G, (n_boot, G))]
    out = np.full((n_boot, max(map(len, draws))), n_problems)
    for b, d in enumerate(draws):
        out[b, :len(d)] = d
    return out


def boot_means(values, idx, seed):
    """Bootstrap distribution [B] of the mean of per-problem values [R, P] of R runs (seeds): draw b
    averages the problems idx[b] (boot_draws; index P: none) over R runs drawn with replacement (R > 1; run draws
    seeded by (seed, R), so equal values give an equal distribution). NaN = no value for that problem (the AUROC of
    an all-right or all-wrong pool): left out of the mean."""
    v = np.atleast_2d(np.asarray(values, dtype=np.float64))
    v = np.concatenate([v, np.full((len(v), 1), np.nan)], 1)  # index P: a padded draw's no-problem
    R, ok = len(v), ~np.isnan(v)
    with np.errstate(invalid='ignore', divide='ignore'):
        if R > 1:
            runs = np.random.default_rng([seed, R]).integers(0, R, (len(idx), R))
            w = (runs[:, :, None] == np.arange(R)).sum(1).astype(np.float64)  # [B, R] times each run was drawn
            x = np.take_along_axis((w @ np.where(ok, v, 0.0)) / (w @ ok), idx, 1)
        else:
            x = v[0][idx]
        ok = ~np.isnan(x)
        return np.where(ok, x, 0.0).sum(1) / ok.sum(1)


def ci(boot):
    """95% percentile interval [lo, hi] of a bootstrap distribution; None without a finite draw."""
    b = np.asarray(boot)[np.isfinite(boot)]
    return [float(x) for x in np.percentile(b, [2.5, 97.5])] if len(b) else None


def paired_delta(row, ref, n, n_boot, seed, groups=None):
    """row - ref, best-of-n and (where both have one) AUROC, with intervals over add_intervals' draws (problems or
    their groups, and each side's runs): {'acc', 'acc_ci'[, 'auroc', 'auroc_ci']}. For a reference outside REFS
    (curve.py, transfer.py)."""
    idx = boot_draws(ref['per_problem']['acc_at'][n].shape[1], n_boot, seed, groups)
    per = lambda r, k: r['per_problem']['acc_at'][n] if k == 'acc' else r['per_problem']['auroc']  # noqa: E731
    b = lambda r, k: boot_means(per(r, k), idx, seed)  # noqa: E731
    out = {'acc': row['acc'] - ref['acc'], 'acc_ci': ci(b(row, 'acc') - b(ref, 'acc'))}
    if row['per_problem']['auroc'] is not None and ref['per_problem']['auroc'] is not None:
        out |= {'auroc': row['auroc'] - ref['auroc'], 'auroc_ci': ci(b(row, 'auroc') - b(ref, 'auroc'))}
    return out


def paired_vs(row, ref_acc, ref_auroc, n, n_boot, seed, groups=None):
    """row's paired differences: best-of-n against ref_acc, AUROC against ref_auroc (paired_delta each)."""
    out = {k: v for k, v in paired_delta(row, ref_acc, n, n_boot, seed, groups).items() if k.startswith('acc')}
    return out | {k: v for k, v in paired_delta(row, ref_auroc, n, n_boot, seed, groups).items()
                  if k.startswith('auroc')}


# -----------------------------------------------------------------------------
# DeepConf offline: the top-eta filtered, confidence-weighted votes


def filtered_vote_sub(groups, labels, sub, conf, eta):
    """DeepConf's offline vote on each subset: among candidates with an answer, keep those whose
    confidence is >= the (1 - eta) quantile of theirs (numpy's linear percentile, as their
    filter_top_confidence), then vote with the confidences as weights (answers grouped by our
    equivalence, not by string). A subset with no answer at all is a uniform pick. All subsets at once: the
    percentile is numpy's linear one computed per row over the candidates with an answer."""
    has = groups[sub] >= 0  # [k, n]
    c = conf[sub].astype(np.float64)
    v = np.sort(np.where(has, c, np.inf), axis=1)  # those without an answer sort last and are never indexed
    m = has.sum(1)
    at = (np.maximum(m, 1) - 1) * (1 - eta)  # numpy's 'linear' virtual index
    lo = np.floor(at).astype(int)
    hi = np.minimum(lo + 1, np.maximum(m, 1) - 1)
    a, b = np.take_along_axis(v, lo[:, None], 1)[:, 0], np.take_along_axis(v, hi[:, None], 1)[:, 0]
    t = at - lo
    with np.errstate(invalid='ignore'):
        d = b - a
        thr = np.where(t >= 0.5, b - d * (1 - t), a + d * t)  # numpy's _lerp, so thresholds match np.percentile's
        keep = has & (c >= thr[:, None])
    return vote_sub(groups, labels, sub, conf, None, keep)
