"""
Choosing among N candidates, shared by every stage that scores pools (train's validation, evaluate, steer, transfer,
curve, sample). The free scorers first: what the generator's own per-token statistics say about a candidate, at no
cost (the cheap scorers: log-prob, entropy, length; DeepConf's confidence measures; their combination fitted on
training problems, the combo), baselines in evaluate.py and the studies, and what the residual verifier and the step
features (model.py) start from. Then the best-of-N maths: the metrics of one problem (argmax with ties split,
within-problem AUROC), the pools (answer groups, fixed random N-subsets), the selection rules (argmax, majority and
weighted votes, DeepConf's filtered votes, oracle), the paired bootstrap intervals (over problems or their groups),
and the pick among one new question's candidates (choose: sample.py's answer, graded by grading.py). No knobs, no
files: each stage passes its own. The table built from these (free rows, the reference chosen on validation, score
caches, formatting) is tables.py's; the pools and the table made from them alone, pools.py's.
"""
import math

import numpy as np
import torch

from grading import answers_equal, extract_answer, grade

# -----------------------------------------------------------------------------
# cheap scorers: one float per candidate dict ('logprobs', 'entropies' [T], 'step_pos' [S],
# 'token_ids' [T]); higher = more likely correct. Definitions: paper appendix ("Non-learned scorer
# definitions"). An empty completion (T = 0) has nothing to be confident about: -inf for the
# confidence scores.


def _arr(x):
    return np.asarray(x.float().numpy() if torch.is_tensor(x) else x, dtype=np.float64)


def cumulative_logprob(c):
    lp = _arr(c['logprobs'])
    return float(lp.sum()) if lp.size else -math.inf


def mean_logprob(c):
    lp = _arr(c['logprobs'])
    return float(lp.mean()) if lp.size else -math.inf


def neg_mean_entropy(c):
    h = _arr(c['entropies'])
    return float(-h.mean()) if h.size else -math.inf


def neg_varentropy(c):
    h = _arr(c['entropies'])  # -Var_t(H_t), population variance
    return float(-h.var()) if h.size else -math.inf


def shortest(c):
    return -float(len(c['token_ids']))


def fewest_steps(c):
    # S from step_pos, which extract.py caps at max_steps (100): longer solutions tie there
    return -float(len(c['step_pos']))


def longest(c):
    return float(len(c['token_ids']))


CHEAP_SCORERS = {f.__name__: f for f in (cumulative_logprob, mean_logprob, neg_mean_entropy, neg_varentropy,
                                         shortest, fewest_steps, longest)}


def cheap_scores(problems, name):
    """Scores of scorer `name` for every candidate: list (per problem) of float arrays [N]."""
    if name not in CHEAP_SCORERS:
        raise ValueError(f"cheap scorer {name!r} is not one of {sorted(CHEAP_SCORERS)}")
    f = CHEAP_SCORERS[name]
    return [np.array([f(c) for c in p['candidates']], dtype=np.float64) for p in problems]


# -----------------------------------------------------------------------------
# DeepConf (Fu et al. 2025; facebookresearch/deepconf, deepconf/utils.py): scorers over the per-token
# confidences extract.py stores ('confidences' [T]: minus the mean log-prob of the top-k tokens of the
# untempered distribution). Group confidence = the mean over a sliding window of `window` tokens
# (every full window, as their compute_least_grouped); a trace shorter than the window is one group,
# its mean confidence (their fallback). tail = the mean of the last `tail` tokens. Higher = more
# confident. Their code rounds confidences to 3 decimals; we do not.


def _confs(c):
    if 'confidences' not in c:
        raise ValueError("a candidate has no 'confidences' (extracted before DeepConf token confidences were stored); "
                         "fix: re-extract with the current extract.py (or --mode=reencode on the same completions)")
    return _arr(c['confidences'])


def group_confidences(conf, window):
    """Sliding-window means [T - window + 1] of token confidences [T]; [mean] when T < window; [] when T = 0."""
    conf = np.asarray(conf, dtype=np.float64)
    if conf.size < window:
        return conf[:0] if conf.size == 0 else conf.mean(keepdims=True)
    cs = np.concatenate([[0.0], np.cumsum(conf)])
    return (cs[window:] - cs[:-window]) / window


def deepconf_mean(c, window, tail):
    conf = _confs(c)
    return float(conf.mean()) if conf.size else -math.inf


def deepconf_tail(c, window, tail):
    conf = _confs(c)[-tail:]
    return float(conf.mean()) if conf.size else -math.inf


def deepconf_bottom10(c, window, tail):
    """Mean of the lowest 10% of the group confidences (at least one group), their bottom_window."""
    g = group_confidences(_confs(c), window)
    return float(np.sort(g)[:max(1, int(0.1 * len(g)))].mean()) if g.size else -math.inf


def deepconf_lowest(c, window, tail):
    """The lowest group confidence, their min_window (and the online rule's statistic)."""
    g = group_confidences(_confs(c), window)
    return float(g.min()) if g.size else -math.inf


DEEPCONF_SCORERS = {f.__name__: f for f in (deepconf_mean, deepconf_tail, deepconf_bottom10, deepconf_lowest)}


def has_confidences(problems):
    return all('confidences' in c for p in problems for c in p['candidates'])


def deepconf_scores(problems, name, window=2048, tail=2048):
    """Scores of DeepConf scorer `name` for every candidate: list (per problem) of float arrays [N]."""
    if name not in DEEPCONF_SCORERS:
        raise ValueError(f"DeepConf scorer {name!r} is not one of {sorted(DEEPCONF_SCORERS)}")
    if window < 1 or tail < 1:
        raise ValueError(f"deepconf_window={window}, deepconf_tail={tail}: both count tokens; fix: "
                         "--deepconf_window=2048")
    f = DEEPCONF_SCORERS[name]
    return [np.array([f(c, window, tail) for c in p['candidates']], dtype=np.float64) for p in problems]


# -----------------------------------------------------------------------------
# every free scorer at once: what a residual verifier starts from (model.py, train.py residual=...), and their
# combination, standardized and weighted by a ranking fit on training problems (residual='combo')


def residual_scorers():
    """The free scorers a residual verifier can start from: the cheap scorers above and DeepConf's mean
    token confidence (a trace's mean; a window longer than any trace here)."""
    return {**CHEAP_SCORERS, 'deepconf_mean': lambda c: deepconf_mean(c, 2048, 2048)}


def free_scores(c, window, tail):
    """The free scorers' scores of one candidate (DeepConf's with window and tail tokens)."""
    out = {k: f(c) for k, f in CHEAP_SCORERS.items()}
    if 'confidences' in c:
        out |= {k: f(c, window, tail) for k, f in DEEPCONF_SCORERS.items()}
    return out


def cheap_score(c, name):
    """Free scorer `name` (residual_scorers) of one candidate (or prefix); -inf (an empty trace) -> -1e9."""
    s = float(residual_scorers()[name](c))
    return s if np.isfinite(s) else -1e9


def combo_score(c, norm):
    """The 'combo' free scorer (train.py residual='combo'): every free scorer norm['names'], standardized by the
    training candidates' norm['mean'] / norm['std'] (clipped at +-10: an empty trace's floor), weighted by
    norm['weight'] (combo_fit, learned on the training problems)."""
    z = [(cheap_score(c, k) - m) / s for k, m, s in zip(norm['names'], norm['mean'], norm['std'])]
    return float(np.dot(np.clip(z, -10, 10), norm['weight']))


def combo_fit(problems, l2=1e-3):
    """res_norm of the 'combo' free scorer (combo_score) from training problems: each free scorer's mean and
    std over their candidates, and weights minimizing a pairwise logistic loss over each problem's (correct, wrong)
    pairs (a within-problem ranking, as best-of-N uses; every mixed problem weighs the same) plus l2 * |w|^2.
    Full-batch L-BFGS from 0: deterministic, nothing drawn."""
    names = sorted(residual_scorers())
    X = [np.array([[cheap_score(c, k) for k in names] for c in p['candidates']]) for p in problems]
    flat = np.concatenate(X)
    mean = [float(x[x > -1e9].mean()) if (x > -1e9).any() else 0.0 for x in flat.T]
    std = [float(x[x > -1e9].std()) or 1.0 if (x > -1e9).any() else 1.0 for x in flat.T]
    diffs, wts = [], []
    for p, x in zip(problems, X):
        y = np.array([bool(c['correct']) for c in p['candidates']])
        if y.any() and not y.all():
            z = np.clip((x - mean) / std, -10, 10)
            d = (z[y][:, None] - z[~y][None]).reshape(-1, len(names))
            diffs.append(d)
            wts.append(np.full(len(d), 1.0 / len(d)))
    if not diffs:
        raise ValueError("residual='combo' needs training problems with both a correct and a wrong candidate to learn "
                         "its weights; fix: more samples per problem, or --residual=auto")
    D, W = torch.tensor(np.concatenate(diffs)), torch.tensor(np.concatenate(wts) / len(diffs))
    w = torch.zeros(len(names), dtype=torch.float64, requires_grad=True)
    opt = torch.optim.LBFGS([w], max_iter=200, line_search_fn='strong_wolfe')

    def loss():
        opt.zero_grad()
        l = (W * torch.nn.functional.softplus(-D @ w)).sum() + l2 * (w ** 2).sum()
        l.backward()
        return l
    opt.step(loss)
    return {'names': names, 'mean': mean, 'std': std, 'weight': w.detach().tolist()}


# -----------------------------------------------------------------------------
# metrics (per problem: scores and 0/1 labels of its candidates)


def top_mask(v, axis=-1):
    """True where v ties with the max along axis (to 1e-12 relative; -inf and +inf tie with themselves). NaN is an
    error: a NaN score would silently never (or always) win."""
    v = np.asarray(v, dtype=np.float64)
    if np.isnan(v).any():
        raise ValueError("NaN score; fix: find the scorer that produced it (the caller names it)")
    mx = v.max(axis, keepdims=True)
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


def answer_agreement(pool):
    """Per problem [m]: each candidate's share of its problem's candidates that give its answer (0: no answer), from
    the pool's answer groups. As a best-of-N scorer it picks what majority vote picks (the largest group), so the
    tables take its picks from the vote and only its ranking (within-problem AUROC) from these shares."""
    out = []
    for q in pool:
        g = q['groups']
        share = np.bincount(g[g >= 0], minlength=1) / len(g) if (g >= 0).any() else np.zeros(1)
        out.append(np.where(g >= 0, share[np.maximum(g, 0)], 0.0))
    return out


def subset_index(m, n, n_subsets, seed):
    """[k, n] candidate indices: the whole pool when m == n, else n_subsets random n-subsets."""
    if n == m:
        return np.arange(m)[None, :]
    rng = np.random.default_rng(seed)
    return np.argsort(rng.random((n_subsets, m)), axis=1)[:, :n]


def build_pool(problems, ns, n_subsets, seed, equal):
    """Per problem: 'labels' [m] float, 'groups' [m] int, 'subsets' {n: [k, n]} for n in ns (n <= m), 'stopped'
    [m] bool (candidates ended by online pruning: never selected; grading.grade gives them no answer, so no vote)."""
    return [pool_entry(p['key'], p['index'], [c['correct'] for c in p['candidates']],
                       answer_groups([c.get('answer') for c in p['candidates']], equal),
                       [c.get('finish') == 'pruned' for c in p['candidates']], ns, n_subsets, seed) for p in problems]


def pool_entry(key, index, correct, groups, stopped, ns, n_subsets, seed):
    """One problem's pool (build_pool's) from its candidates' correctness, answer groups and stopped flags [m]: the
    subsets drawn from (seed, index), so a pool rebuilt from stored rows (pools.pool_table) draws the same ones."""
    m = len(correct)
    if m < min(ns):
        raise ValueError(f"problem {key} has {m} candidates but best-of-{min(ns)} needs {min(ns)}; "
                         f"fix: --n_eval=<= {m} or extract more samples")
    return {'key': key, 'labels': np.array([float(c) for c in correct]), 'groups': np.asarray(groups, dtype=np.int64),
            'stopped': np.array(stopped, dtype=bool),
            'subsets': {n: subset_index(m, n, n_subsets, [seed, int(index)]) for n in ns if n <= m}}


# -----------------------------------------------------------------------------
# selection rules on subsets; each gives the expected correctness, ties split evenly. A rule reads a problem's
# candidates at its subsets ([k, n] arrays: values[q['subsets'][n]]) and averages over them; leading axes are more
# problems alike ([B, k, n] -> [B]). The *_sub functions apply a rule to one problem, the *_at ones to every problem
# of a pool at once (a numpy pass per batch of problems alike: _batches).


def best_of_n_rule(s, l, ok):
    """Mean over subsets of best_of_n (its rule: argmax, ties = mean label of the tied) of scores s, labels l [..., k,
    n]; ok False: a stopped candidate, never selected (a subset of stopped candidates only selects nothing: 0)."""
    top = top_mask(np.where(ok, s, -np.inf)) & ok
    return ((top * l).sum(-1) / np.maximum(top.sum(-1), 1)).mean(-1)


def vote_rule(g, l, G, s=None, temp=None, keep=None):
    """Mean over subsets of the vote over answer groups g (-1: no answer; G: the problem's number of groups), labels
    l, scores s and keep (a filter) [..., k, n]: majority vote (s None), or verifier-weighted vote: each candidate adds
    softmax(score / temp) over its subset to its group (temp None: the scores themselves, for a PRM's probabilities).
    Candidates without an answer do not vote, nor do those outside keep; a subset where nobody votes is a uniform
    pick. The winning group's correctness is the mean label of its members; tied groups split."""
    if keep is not None:
        g = np.where(keep, g, -1)
    if G == 0:  # nobody answered: a uniform pick everywhere
        return l.reshape(*l.shape[:-2], -1).mean(-1)
    if g.shape[-1] == 1:  # a subset of one: its candidate, whether it votes or not
        return l.mean(-1).mean(-1)
    if s is None:
        w = np.ones_like(l)
    elif temp is None:
        w = np.maximum(s.astype(np.float64), 0.0)  # probabilities; a -inf (unscored) adds nothing
    else:  # weights relative to the best candidate WITH an answer: one without must not push every voter to 0
        top = np.where(g >= 0, s, -np.inf).max(-1, keepdims=True)
        with np.errstate(over='ignore'):
            w = np.where(g >= 0, np.exp((s - np.where(np.isfinite(top), top, 0.0)) / temp), 0.0)
    # each answer group's weight, votes and right votes [G, ..., k], summed candidate by candidate: one order, however
    # many problems are batched
    ids, gw, cnt, right = np.arange(G).reshape(G, *[1] * (g.ndim - 1)), 0.0, 0.0, 0.0
    for j in range(g.shape[-1]):
        member = g[..., j] == ids
        gw, cnt, right = gw + w[..., j] * member, cnt + member, right + l[..., j] * member
    present = cnt > 0
    top = top_mask(np.where(present, gw, -np.inf), axis=0) & present
    with np.errstate(invalid='ignore', divide='ignore'):
        won = np.ascontiguousarray(np.moveaxis(top * (right / np.maximum(cnt, 1)), 0, -1)).sum(-1)  # [..., k]
        return np.where(present.any(0), won / top.sum(0), l.mean(-1)).mean(-1)


def best_of_n_sub(scores, labels, sub, stopped=None):
    """best_of_n_rule on one problem's subsets sub [k, n] (stopped [m]: candidates never selected)."""
    ok = np.ones(sub.shape, dtype=bool) if stopped is None else ~stopped[sub]
    return float(best_of_n_rule(scores[sub], labels[sub], ok))


def vote_sub(groups, labels, sub, scores=None, temp=None, keep=None):
    """vote_rule on one problem's subsets sub [k, n] (keep [k, n])."""
    return float(vote_rule(groups[sub], labels[sub], int(groups.max()) + 1, None if scores is None else scores[sub],
                           temp, keep))


def _batches(pool, n, columns, width=False, size=2 ** 22):
    """A pool's problems in batches alike, with their values at their n-subsets: yields (problem indices [B], G,
    {name: [B, k, n]}) for columns {name: per-problem arrays [m]}. Alike: as many candidates, subsets of one shape and
    (width) as many answer groups G, so that every sum runs over the elements a problem alone sums, in its order (the
    same numbers to the bit); at most size elements of [B, k, n, G] a batch."""
    keys = [(len(q['labels']), q['subsets'][n].shape) for q in pool]
    for m, (k, _) in dict.fromkeys(keys):
        at = np.array([i for i, x in enumerate(keys) if x == (m, (k, n))])
        flat = np.stack([pool[i]['subsets'][n] for i in at]) + m * np.arange(len(at))[:, None, None]  # [B, k, n]
        vals = {name: np.take(np.concatenate([col[i] for i in at]), flat) for name, col in columns.items()}
        widths = np.stack([pool[i]['groups'] for i in at]).max(1) + 1 if width else np.ones(len(at), dtype=int)
        for G in np.unique(widths):
            alike = np.flatnonzero(widths == G)
            step = max(1, size // (k * n * max(G, 1)))
            for part in (alike[j:j + step] for j in range(0, len(alike), step)):
                yield at[part], int(G), {name: v[part] for name, v in vals.items()}


def best_of_n_at(score_lists, pool, n):
    """best_of_n_sub of every problem of a pool at its n-subsets: [P]."""
    out = np.empty(len(pool))
    for at, _, a in _batches(pool, n, {'s': score_lists, 'l': [q['labels'] for q in pool],
                                       'ok': [~q['stopped'] for q in pool]}):
        out[at] = best_of_n_rule(a['s'], a['l'], a['ok'])
    return out


def votes_at(pool, n, score_lists=None, temp=None, eta=None):
    """vote_sub of every problem of a pool at its n-subsets: [P]. score_lists None: the majority vote; eta: DeepConf's
    filtered vote (filtered_vote_sub, score_lists the confidences)."""
    cols = {'g': [q['groups'] for q in pool], 'l': [q['labels'] for q in pool]}
    out = np.empty(len(pool))
    for at, G, a in _batches(pool, n, cols | ({} if score_lists is None else {'s': score_lists}), width=True):
        keep = None if eta is None else filtered_keep(a['g'], a['s'], eta)
        out[at] = vote_rule(a['g'], a['l'], G, a.get('s'), temp, keep)
    return out


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
    m = per_problem_run({k: best_of_n_at(score_lists, pool, k) for k in ns}, problem_aurocs(score_lists, pool), n)
    if vote:
        m['per_problem']['vote_at'] = {k: votes_at(pool, k, score_lists, temp) for k in ns}
        m['vote_at'] = {k: float(v.mean()) for k, v in m['per_problem']['vote_at'].items()}
    return m


def choose_temp(score_lists, pool, n, temps, where='scores'):
    """Weighted-vote temperature with the best vote accuracy at n on a validation pool (first on ties)."""
    score_lists = check_scores(score_lists, pool, where)
    accs = [float(votes_at(pool, n, score_lists, t).mean()) for t in temps]
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
        at = idx
        if R > 1:  # v: per-problem means over the runs of each distinct run draw [u, P + 1]; draw b reads row row[b]
            runs = np.random.default_rng([seed, R]).integers(0, R, (len(idx), R))
            w, row = np.unique((runs[:, :, None] == np.arange(R)).sum(1).astype(np.float64), axis=0,
                               return_inverse=True)  # [u, R] times each run was drawn
            v = (w @ np.where(ok, v, 0.0)) / (w @ ok)
            ok, at = ~np.isnan(v), row.reshape(-1, 1) * v.shape[1] + idx
        return np.take(np.where(ok, v, 0.0), at).sum(1) / np.take(ok, at).sum(1)


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


def filtered_keep(g, c, eta):
    """DeepConf's offline filter on subsets [..., k, n] of answer groups g and confidences c: among candidates with an
    answer, those whose confidence is >= the (1 - eta) quantile of theirs (numpy's linear percentile, as their
    filter_top_confidence, computed per subset over the candidates with an answer)."""
    has = g >= 0
    c = c.astype(np.float64)
    v = np.sort(np.where(has, c, np.inf), axis=-1)  # those without an answer sort last and are never indexed
    m = has.sum(-1)
    at = (np.maximum(m, 1) - 1) * (1 - eta)  # numpy's 'linear' virtual index
    lo = np.floor(at).astype(int)
    hi = np.minimum(lo + 1, np.maximum(m, 1) - 1)
    a, b = np.take_along_axis(v, lo[..., None], -1)[..., 0], np.take_along_axis(v, hi[..., None], -1)[..., 0]
    t = at - lo
    with np.errstate(invalid='ignore'):
        d = b - a
        thr = np.where(t >= 0.5, b - d * (1 - t), a + d * t)  # numpy's _lerp, so thresholds match np.percentile's
        return has & (c >= thr[..., None])


def filtered_vote_sub(groups, labels, sub, conf, eta):
    """DeepConf's offline vote on each subset: the candidates filtered_keep keeps vote with their confidences as
    weights (answers grouped by our equivalence, not by string). A subset with no answer at all is a uniform pick."""
    return vote_sub(groups, labels, sub, conf, None, filtered_keep(groups[sub], conf[sub], eta))


# -----------------------------------------------------------------------------
# the pick among one new question's candidates (sample.py's best-of-N)


def choose(problem, cands, scores, vote_temp=None, windows=(2048, 2048)):
    """The pick of one question's candidates by their verifier scores: the top score (top_mask; of tied top
    scores the first candidate: evaluate.py's best-of-N counts a tie as the mean of the tied, so the pick is one of
    those it averages), never a candidate stopped by pruning or search (best_of_n_sub's rule). Answers are
    grouped by grading.answers_equal; the runner-ups are the other answers, by their best score. vote_temp: the
    weighted vote (vote_sub's: softmax(score / T) summed per answer, weights taken relative to the best
    answered candidate so that no low T rounds them all to a tie; tied answers go to the one whose best candidate
    scores higher). A gold answer (problem['gold'] not None) grades every candidate (grading.grade). windows:
    DeepConf's (window, tail) of the free scores."""
    s = np.asarray(scores, dtype=np.float64)
    live = np.array([c['finish'] != 'pruned' for c in cands])
    top = top_mask(np.where(live, s, -np.inf)) & live
    j = int(np.flatnonzero(top)[0])
    answers = [extract_answer(c['text'])[0] if c['finish'] != 'pruned' else None for c in cands]
    groups = answer_groups(answers, answers_equal)
    best = {g: max(np.flatnonzero(groups == g), key=lambda i: (s[i], -i)) for g in sorted(set(groups.tolist()) - {-1})}
    pick = {'id': problem['id'], 'index': problem['index'], 'question': problem['question'], 'answer': answers[j],
            'score': float(s[j]), 'candidate': j, 'tied': int(top.sum()),
            'agree': int((groups == groups[j]).sum()) if groups[j] >= 0 else 0,
            'runner_up': [{'answer': answers[i], 'score': float(s[i]), 'count': int((groups == g).sum())}
                          for g, i in sorted(best.items(), key=lambda gi: -s[gi[1]]) if g != groups[j]]}
    if vote_temp is not None:
        pick['vote'] = None
        if best:
            w = np.exp((s - s[groups >= 0].max()) / vote_temp)
            gs = list(best)
            gw = np.array([w[groups == g].sum() for g in gs])
            win = max((g for g, t in zip(gs, top_mask(gw)) if t), key=lambda g: (s[best[g]], -best[g]))
            pick['vote'] = {'answer': answers[best[win]], 'candidate': int(best[win]), 'temp': vote_temp,
                            'weight': float(gw[gs.index(win)] / gw.sum())}
    pick['candidates'] = [{**c, 'answer': a, 'score': float(x), 'free': free_scores(c, *windows)}
                          for c, a, x in zip(cands, answers, s)]
    if problem.get('gold') is not None:
        pick['gold'] = problem['gold']
        for c in pick['candidates']:
            c['correct'] = grade(c['text'], problem['gold'], problem['dataset'], finish=c['finish'],
                                 meta=problem['meta'])['correct']
        pick['correct'] = pick['candidates'][j]['correct']
        if pick.get('vote'):
            pick['vote']['correct'] = pick['candidates'][pick['vote']['candidate']]['correct']
    return pick
