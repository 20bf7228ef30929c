"""
The free scorers: what the generator's own per-token statistics say about a candidate, at no cost. The
cheap scorers (log-prob, entropy, length) and DeepConf's confidence measures are baselines in evaluate.py
and the studies, and the residual verifier and the step features (model.py) start from them, so they sit
below every stage in a file of their own, with their combination fitted on training problems (the combo).
"""
import math

import numpy as np
import torch

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
