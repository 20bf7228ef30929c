"""
Evaluation: HSRM and every baseline on one evaluation split, side by side, in one table.

    python evaluate.py config/gsm8k_1p7b.py                       # every ckpt under {out_dir}/verifiers/
    python evaluate.py config/gsm8k_1p7b.py --eval_dir=out/olympiadbench_1p7b/eval   # zero-shot transfer

Scores every candidate of {eval_dir} with each checkpoint (batched, cached under {out_dir}/scores/),
adds the free scorers (scorers.py), the PRM's cached scores (baselines.py), majority and verifier-weighted votes,
single-pass and oracle, and writes {out_dir}/results[_<tag>].json and .md (+ plots with matplotlib).
Best-of-N, votes and temperatures are chosen on nothing from the test split except where a row says
"optimistic". Validation choices (vote temperature, best cheap scorer) use the problem-level val split
of {train_dir} (train.py's split_problems, same val_frac / val_seed as training).
"""
import glob
import hashlib
import json
import os
import re
import time

import numpy as np
import torch

from configurator import configure, knobs
from baselines import PRM_7B_ARCH, prm_flops, prm_tokens_estimate
from baselines import prm_reduce as reduce_steps  # the name prm_reduce is this stage's config key
from model import (VERIFIERS, atomic_write_json, cli, count_params, input_lengths, load_checkpoint,
                   load_split, problem_files, reads, resolve_device, score_prefixes, score_problems, top_mask,
                   verifier_flops, within_auroc)
from scorers import CHEAP_SCORERS, DEEPCONF_SCORERS, cheap_scores, deepconf_scores, has_confidences

# -----------------------------------------------------------------------------
# config (options in the comments)
out_dir = 'out/demo'        # the run: scores {out_dir}/eval, reads {out_dir}/verifiers/*/ckpt.pt, writes {out_dir}/results*
eval_dir = ''               # '' = {out_dir}/eval; another run's eval dir = zero-shot transfer (results_on_<run>.*)
train_dir = ''              # '' = {out_dir}/train: its validation split picks vote temperatures and the best cheap scorer
ckpts = []                  # [] = every {out_dir}/verifiers/*/ckpt.pt; else ckpt paths or globs (e.g. another run's verifiers/*/ckpt.pt)
n_eval = 8                  # N of the headline best-of-N
n_scaling = [8, 16, 32, 64] # N-scaling table: the ones the pool allows
n_subsets = 100             # random N-subsets per problem when the pool holds more than N
subset_seed = 0             # seed of those subsets (the same subsets for every method)
n_boot = 2000               # bootstrap draws behind every 95% interval: problems resampled with replacement, the same
                            # draws for every method (so differences are paired); learned verifiers also resample seeds
boot_seed = 0               # seed of those draws
vote_temps = [0.01, 0.03, 0.1, 0.3, 1.0, 3.0, 10.0, 100.0]  # weighted-vote temperature grid (chosen on validation)
val_frac = 0.2              # validation split of train_dir: as train.py's (same meaning, same defaults)
val_seed = 42
prm_reduce = 'last'         # PRM candidate score from its step scores: 'last' (paper) | 'min' | 'prod'
eval_batch_size = 1024      # candidates per scoring batch
device = 'auto'             # 'auto' | 'cpu' | 'cuda'; per-candidate times in the cost table are measured on it
plots = True                # write PNG plots when matplotlib is installed
threads = 0                 # CPU threads for torch; 0 = torch's default (on a busy shared CPU, 1 is often much faster)
deepconf_window = 2048      # DeepConf group confidence: sliding window in tokens (paper: 2048); a trace shorter than it
                            # is one group (its mean confidence) and is never stopped online (their code)
deepconf_tail = 2048        # DeepConf tail confidence: mean over the last this many tokens (paper: 2048)
deepconf_etas = [0.1, 0.9]  # DeepConf keep fractions: offline top-eta filtered votes; online (steer.py's pruning study)
                            # 0.1 = DeepConf-low (threshold at the 90th percentile of warm-up lowest-group confidences),
                            # 0.9 = DeepConf-high (10th)
# -----------------------------------------------------------------------------
DEFAULTS = knobs(globals())  # the knobs above as a dict

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
    [m] bool (candidates ended by online pruning: never selected; label.py gives them no answer, so no vote)."""
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


def choice_split(split_dir, n, cfg, files=None):
    """A labelled split that choices are made on (validation, calibration): (problems, pool, best-of-n), with
    n lowered to its smallest pool."""
    from label import answers_equal
    ps = load_split(split_dir, files=files)
    vn = min(n, min(len(p['candidates']) for p in ps))
    return ps, build_pool(ps, [vn], cfg['n_subsets'], cfg['subset_seed'], answers_equal), vn


def best_of_n_sub(scores, labels, sub, stopped=None):
    """Mean over subsets of best_of_n (model.py's rule: argmax, ties = mean label of the tied). stopped [m]:
    candidates that are never selected (a subset of stopped candidates only selects nothing: 0)."""
    s, l = scores[sub], labels[sub]
    if stopped is None or not stopped.any():
        top = top_mask(s)
        return float(((top * l).sum(1) / top.sum(1)).mean())
    ok = ~stopped[sub]
    top = top_mask(np.where(ok, s, -np.inf)) & ok
    return float(((top * l).sum(1) / np.maximum(top.sum(1), 1)).mean())


def vote_sub(groups, labels, sub, scores=None, temp=None):
    """Majority vote over answer groups (scores None), or verifier-weighted vote: each candidate adds
    softmax(score / temp) over its subset to its group (temp None: the scores themselves, for a PRM's
    probabilities). Candidates without an answer do not vote; a subset where nobody has one is a
    uniform pick. The winning group's correctness is the mean label of its members; tied groups split."""
    g, l = groups[sub], labels[sub]
    G = int(groups.max()) + 1
    if G == 0:
        return float(l.mean())
    if scores is None:
        w = np.ones_like(l)
    elif temp is None:
        w = np.maximum(scores[sub].astype(np.float64), 0.0)  # probabilities; a -inf (unscored) adds nothing
    else:
        s = scores[sub]
        w = np.exp((s - s.max(1, keepdims=True)) / temp)
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
            raise ValueError(f"{where}: problem {q['key']} has NaN scores at candidates {np.flatnonzero(np.isnan(s)).tolist()}; "
                             f"fix: check that scorer (a checkpoint trained to NaN, or NaN in the stored statistics)")
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
    acc = {k: np.array([best_of_n_sub(s, q['labels'], q['subsets'][k], q['stopped']) for s, q in zip(score_lists, pool)])
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
# scoring with caches: a rerun reuses every score already computed for the same checkpoint file


def _slug(path):
    return re.sub(r'[^A-Za-z0-9_.-]+', '_', os.path.normpath(path)).strip('_')


def split_stamp(split_dir):
    """What a split's scores depend on besides the checkpoint, as a hash: its config.json and each problem
    file's name, size and mtime (a re-extraction with the same problem keys changes them)."""
    h = hashlib.sha256()
    if os.path.exists(os.path.join(split_dir, 'config.json')):
        with open(os.path.join(split_dir, 'config.json'), 'rb') as f:
            h.update(f.read())
    for path in problem_files(split_dir):
        st = os.stat(path)
        h.update(f'{os.path.basename(path)} {st.st_size} {st.st_mtime_ns}\n'.encode())
    return h.hexdigest()


def cached_scores(model, ckpt_path, problems, split_dir, cache_dir, batch_size, device, prefixes=False):
    """(scores per problem, seconds per candidate, device) of one checkpoint's model on one split;
    cached in {cache_dir}/{split}/{run}.json, valid while the checkpoint file and the split's files
    (split_stamp) are unchanged. prefixes=True: score_prefixes' per-step scores instead (a list of
    arrays per problem), {run}.prefixes.json."""
    path = os.path.join(cache_dir, _slug(split_dir), _slug(os.path.dirname(ckpt_path)) + ('.prefixes' if prefixes else '') + '.json')
    stamp, split = os.path.getmtime(ckpt_path), split_stamp(split_dir)
    conv = (lambda v: [np.array(x, dtype=np.float64) for x in v]) if prefixes else np.array
    if os.path.exists(path):
        with open(path) as f:
            c = json.load(f)
        if (c['ckpt'] == os.path.abspath(ckpt_path) and c['mtime'] == stamp and c.get('split') == split
                and all(p['key'] in c['scores'] for p in problems)):
            return [conv(c['scores'][p['key']]) for p in problems], c['seconds_per_candidate'], c['device']
    t0 = time.perf_counter()
    scores = (score_prefixes if prefixes else score_problems)(model, problems, batch_size, device, where=split_dir)
    spc = (time.perf_counter() - t0) / sum(len(p['candidates']) for p in problems)
    dev = f'cpu ({torch.get_num_threads()} threads)' if device == 'cpu' else device
    atomic_write_json({'ckpt': os.path.abspath(ckpt_path), 'mtime': stamp, 'split': split, 'seconds_per_candidate': spc,
                       'device': dev, 'scores': {p['key']: [x.tolist() for x in s] if prefixes else s.tolist()
                                                 for p, s in zip(problems, scores)}}, path)
    return scores, spc, dev


# -----------------------------------------------------------------------------
# a run's dirs, checkpoints and validation splits (steer.py's pruning study reads a run the same way)


def run_dirs(cfg):
    """(eval_dir, train_dir, suffix) of a run: suffix '_on_<run>' when eval_dir is another run's (zero-shot
    transfer; results_on_<run>.*), else ''."""
    eval_dir = cfg['eval_dir'] or os.path.join(cfg['out_dir'], 'eval')
    train_dir = cfg['train_dir'] or os.path.join(cfg['out_dir'], 'train')
    transfer = os.path.abspath(eval_dir) != os.path.abspath(os.path.join(cfg['out_dir'], 'eval'))
    return eval_dir, train_dir, f"_on_{_slug(os.path.basename(os.path.dirname(os.path.abspath(eval_dir))))}" if transfer else ''


def checkpoint_paths(cfg):
    """ckpts (paths or globs, e.g. another run's 'out/gsm8k_1p7b/verifiers/*/ckpt.pt'), or every checkpoint of the run."""
    paths = sorted({p for g in cfg['ckpts'] for p in glob.glob(g)} if cfg['ckpts'] else
                   glob.glob(os.path.join(cfg['out_dir'], 'verifiers', '*', 'ckpt.pt')))
    if cfg['ckpts'] and not paths:
        raise ValueError(f"ckpts={cfg['ckpts']} matches no file; fix: run train.py first or correct the paths")
    return paths


def val_splitter(train_dir, n, cfg):
    """val_split(frac, seed, k=None) -> (problems, pool, best-of-n) of train_dir's val split as train.py draws it
    (k: max_train_problems), or None without a labelled train_dir: choices that must not see the test split.
    Each split is built once."""
    from train import split_problems
    splits = {}

    def val_split(frac, seed, k=None):
        if not os.path.exists(os.path.join(train_dir, 'labels.json')):
            return None
        if (frac, seed, k) not in splits:
            splits[frac, seed, k] = choice_split(train_dir, n, cfg, split_problems(problem_files(train_dir), frac, seed, k)[1])
        return splits[frac, seed, k]
    return val_split


def run_group(ckpt_path):
    """Table row a checkpoint belongs to: its run dir's name without the _seed<k> suffix."""
    return re.sub(r'_seed\d+$', '', os.path.basename(os.path.dirname(os.path.abspath(ckpt_path))))


PRETTY = {**{k: v[2] for k, v in VERIFIERS.items()}, 'text_small': 'EORM-style text (small)',
          'text_large': 'EORM-style text (large)'}
CHEAP_PRETTY = {'cumulative_logprob': 'Cumulative log-prob', 'mean_logprob': 'Mean log-prob',
                'neg_mean_entropy': 'Neg. mean entropy', 'neg_varentropy': 'Neg. varentropy',
                'shortest': 'Shortest', 'fewest_steps': 'Fewest steps', 'longest': 'Longest'}


def mean_std(values):
    v = np.array([x for x in values if x is not None and not np.isnan(x)], dtype=np.float64)
    if not len(v):
        return float('nan'), None
    return float(v.mean()), (float(v.std(ddof=1)) if len(v) > 1 else None)


def make_row(method, kind, runs, params=None, **extra):
    """A table row from per-run metric dicts (one per seed): mean and std of each metric, and the runs'
    per-problem values stacked [runs, P] under 'per_problem' (for the intervals)."""
    pp = [r.get('per_problem') for r in runs]
    row = {'method': method, 'type': kind, 'n_runs': len(runs), 'params': params, 'runs': runs, **extra}
    row['acc'], row['acc_std'] = mean_std([r['acc'] for r in runs])
    row['auroc'], row['auroc_std'] = mean_std([r.get('auroc') for r in runs])
    ns = sorted({n for r in runs for n in r.get('acc_at', {})})
    row['acc_at'] = {n: mean_std([r['acc_at'][n] for r in runs])[0] for n in ns}
    row['acc_at_std'] = {n: mean_std([r['acc_at'][n] for r in runs])[1] for n in ns}
    if all(pp):
        row['per_problem'] = {'acc_at': {n: np.stack([p['acc_at'][n] for p in pp]) for n in ns},
                              'auroc': np.stack([p['auroc'] for p in pp]) if all(p['auroc'] is not None for p in pp) else None}
    return row


# -----------------------------------------------------------------------------
# 95% intervals: a paired bootstrap over problems (rows of several runs also resample their seeds)

REFS = {'majority': 'vote', 'best_cheap_val': 'cheap_best_val'}  # differences are taken against these rows (by type)


def boot_draws(n_problems, n_boot, seed):
    """[n_boot, P] problem indices drawn with replacement; the same draws serve every method (paired)."""
    return np.random.default_rng([seed, n_problems]).integers(0, n_problems, (n_boot, n_problems))


def boot_means(values, idx, seed):
    """Bootstrap distribution [B] of the mean of per-problem values [R, P] of R runs (seeds): draw b
    averages the problems idx[b] over R runs drawn with replacement (R > 1; run draws seeded by (seed,
    R), so equal values give an equal distribution). NaN = no value for that problem (the AUROC of an
    all-right or all-wrong pool): left out of the mean."""
    v = np.atleast_2d(np.asarray(values, dtype=np.float64))
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


def add_intervals(rows, n, n_boot, seed):
    """Every row with per-problem values gets acc_ci (best-of-n), acc_ci_at {k: ...} (every N), auroc_ci,
    and under 'vs' its paired difference against each REFS row present: {ref: {'acc', 'acc_ci', 'auroc',
    'auroc_ci'}} (observed difference, and the interval of the differences over the same draws)."""
    rows = [r for r in rows if r.get('per_problem')]
    if not rows:
        return
    idx = boot_draws(rows[0]['per_problem']['acc_at'][n].shape[1], n_boot, seed)
    b = {id(r): {'acc_at': {k: boot_means(v, idx, seed) for k, v in r['per_problem']['acc_at'].items()},
                 'auroc': None if r['per_problem']['auroc'] is None else boot_means(r['per_problem']['auroc'], idx, seed)}
         for r in rows}
    refs = {name: next((r for r in rows if r['type'] == t), None) for name, t in REFS.items()}
    for r in rows:
        br = b[id(r)]
        r['acc_ci'], r['acc_ci_at'] = ci(br['acc_at'][n]), {k: ci(x) for k, x in br['acc_at'].items()}
        r['auroc_ci'], r['vs'] = None if br['auroc'] is None else ci(br['auroc']), {}
        for name, ref in refs.items():
            if ref is not None:
                bf = b[id(ref)]
                r['vs'][name] = {'acc': r['acc'] - ref['acc'], 'acc_ci': ci(br['acc_at'][n] - bf['acc_at'][n])}
                if br['auroc'] is not None and bf['auroc'] is not None:
                    r['vs'][name] |= {'auroc': r['auroc'] - ref['auroc'], 'auroc_ci': ci(br['auroc'] - bf['auroc'])}


def paired_delta(row, ref, n, n_boot, seed):
    """row - ref, best-of-n and (where both have one) AUROC, with intervals over add_intervals' draws (problems, and
    each side's runs): {'acc', 'acc_ci'[, 'auroc', 'auroc_ci']}. For a reference outside REFS (curve.py, transfer.py)."""
    idx = boot_draws(ref['per_problem']['acc_at'][n].shape[1], n_boot, seed)
    b = lambda r, k: boot_means(r['per_problem']['acc_at'][n] if k == 'acc' else r['per_problem']['auroc'], idx, seed)  # noqa: E731
    out = {'acc': row['acc'] - ref['acc'], 'acc_ci': ci(b(row, 'acc') - b(ref, 'acc'))}
    if row['per_problem']['auroc'] is not None and ref['per_problem']['auroc'] is not None:
        out |= {'auroc': row['auroc'] - ref['auroc'], 'auroc_ci': ci(b(row, 'auroc') - b(ref, 'auroc'))}
    return out


def for_json(obj):
    """obj without its 'per_problem' entries (numpy arrays, used for the intervals only)."""
    if isinstance(obj, dict):
        return {k: for_json(v) for k, v in obj.items() if k != 'per_problem'}
    return [for_json(v) for v in obj] if isinstance(obj, (list, tuple)) else obj


# -----------------------------------------------------------------------------
# output: markdown tables laid out like the paper's, and plots


def _fmt(v, sd, pct):
    if v is None or (isinstance(v, float) and np.isnan(v)):
        return '–'
    s = f'{100 * v:.2f}' if pct else f'{v:.3f}'
    return s + (f' ± {100 * sd:.2f}' if pct else f' ± {sd:.3f}') if sd is not None else s


def _ci(v, interval, pct, diff=False):
    """'44.0 [38.2, 49.8]' (pct: points, 1 decimal; else 3 decimals); diff: signed, and bold where the
    interval excludes zero."""
    if v is None or np.isnan(v):
        return '–'
    f = (lambda x: f"{100 * x:{'+' if diff else ''}.1f}") if pct else (lambda x: f"{x:{'+' if diff else ''}.3f}")
    s = f(v) + (f' [{f(interval[0])}, {f(interval[1])}]' if interval else '')
    return f'**{s}**' if diff and interval and (interval[0] > 0 or interval[1] < 0) else s


def _vs(r, ref, key, pct):
    """A row's difference against reference row ref ('ref.' on the reference itself, '–' without one)."""
    if r['type'] == REFS[ref]:
        return 'ref.'
    d = r.get('vs', {}).get(ref, {})
    return _ci(d.get(key), d.get(key + '_ci'), pct, diff=True)


def _num(x, unit='', giga='G'):
    if x is None:
        return '–'
    for div, suf in ((1e12, 'T'), (1e9, giga), (1e6, 'M'), (1e3, 'k')):
        if abs(x) >= div:
            return f'{x / div:.3g}{suf}{unit}'
    return f'{x:.3g}{unit}'


def render_markdown(res):
    n = res['n_eval']
    out = [f"## Best-of-{n} on {res['dataset']} ({res['generator']})", '',
           f"Evaluation split `{res['eval_dir']}`: {res['n_problems']} problems, {res['pool_size']} candidates each"
           + (f"; verifiers trained on `{', '.join(res['trained_on'])}` (zero-shot transfer)" if res['transfer'] else '') + '.',
           '', f'| Method | Params | Bo{n} Acc. (%) [95% CI] | Δ vs majority (pts) | Δ vs best cheap on val (pts) '
           f'| Within-AUROC [95% CI] | Δ AUROC vs best cheap on val |', '|---|---:|---:|---:|---:|---:|---:|']
    for r in res['rows']:
        seeds = f" ({r['n_runs']} seeds)" if r['type'] in ('verifier', 'verifier_vote') and r['n_runs'] > 1 else ''
        out.append(f"| {r['method']}{seeds} | {_num(r['params'], giga='B')} | {_ci(r['acc'], r.get('acc_ci'), True)} "
                   f"| {_vs(r, 'majority', 'acc', True)} | {_vs(r, 'best_cheap_val', 'acc', True)} "
                   f"| {_ci(r.get('auroc'), r.get('auroc_ci'), False)} | {_vs(r, 'best_cheap_val', 'auroc', False)} |")
    out += [''] + [f'{i + 1}. {t}' for i, t in enumerate(res['notes'])]
    ns = res['ns']
    if len(ns) > 1:
        out += ['', '### N-scaling (best-of-N accuracy, %)', '',
                '| Method | ' + ' | '.join(str(k) for k in ns) + ' | Δ |', '|---|' + '---:|' * (len(ns) + 1)]
        for r in res['rows']:
            if r['type'] in ('single', 'cheap', 'deepconf', 'deepconf_vote'):
                continue
            a = [r['acc_at'].get(k) for k in ns]
            d = f'{100 * (a[-1] - a[0]):+.1f}' if None not in (a[0], a[-1]) else '–'
            name = 'Oracle pass@N' if r['type'] == 'oracle' else r['method']
            out.append(f"| {name} | " + ' | '.join(_fmt(x, None, True) for x in a) + f' | {d} |')
    out += ['', '### Verifier cost', '', '| Verifier | Params | Weights (fp16) | Input | FLOPs / candidate '
            '| Time / candidate | Extra generator passes |', '|---|---:|---:|---|---:|---:|---|']
    for c in res['cost']:
        t = f"{1e3 * c['seconds_per_candidate']:.3g} ms ({c['device']})" if c.get('seconds_per_candidate') else '–'
        out.append(f"| {c['verifier']} | {_num(c['params'], giga='B')} | {_num(c['params'] * 2, 'B')} | {c['input']} "
                   f"| {_num(c['flops'])} | {t} | {c['extra_passes']} |")
    return '\n'.join(out) + '\n'


def _yerr(vals, intervals):
    """matplotlib yerr [2, k] in points from values and their [lo, hi] intervals (None: no bars)."""
    if any(c is None for c in intervals):
        return None
    return 100 * np.maximum(0, np.array([[v - c[0] for v, c in zip(vals, intervals)], [c[1] - v for v, c in zip(vals, intervals)]]))


def reference_lines(axes, refs):
    """Horizontal lines (point estimate) and bands (95% interval) for rows of reference (single, vote, oracle)."""
    for r in refs:
        ls, col = {'single': ('-.', 'darkgoldenrod'), 'vote': ('--', 'dimgray'), 'oracle': (':', 'k')}[r['type']]
        for i, ax in enumerate(axes):
            ax.axhline(100 * r['acc'], color=col, ls=ls, lw=1, label=r['method'] if i == len(axes) - 1 else None)
            if r.get('acc_ci'):
                ax.axhspan(100 * r['acc_ci'][0], 100 * r['acc_ci'][1], color=col, alpha=0.08, lw=0)


def make_plots(res, prefix):
    """{prefix}_bon_vs_n.png and {prefix}_acc_vs_flops.png, every accuracy
    with its 95% interval as an error bar (or band); a note instead when matplotlib is missing."""
    try:
        import matplotlib
        matplotlib.use('Agg')
        import matplotlib.pyplot as plt
    except ImportError:
        return ['plots skipped: matplotlib is not installed (pip install matplotlib)']
    files, rows, n = [], res['rows'], res['n_eval']

    def save(fig, name, legend_ax):
        legend_ax.legend(fontsize=7, loc='upper left', bbox_to_anchor=(1.02, 1.0))
        files.append(f'{prefix}_{name}.png')
        fig.savefig(files[-1], dpi=150, bbox_inches='tight')  # tight: the outside legend and long labels stay in the frame
        plt.close(fig)

    if len(res['ns']) > 1:
        fig, ax = plt.subplots(figsize=(6, 4))
        shown = [r for r in rows if r['type'] not in ('cheap', 'deepconf', 'deepconf_vote')]
        for i, r in enumerate(shown):
            y = [r['acc_at'][k] for k in res['ns']]
            x = np.array(res['ns']) * 1.03 ** (i - (len(shown) - 1) / 2)  # side by side on the log axis: bars stay apart
            ax.errorbar(x, [100 * v for v in y], yerr=_yerr(y, [r.get('acc_ci_at', {}).get(k) for k in res['ns']]),
                        marker='o', ms=3, lw=1, capsize=2, label='Oracle pass@N' if r['type'] == 'oracle' else r['method'])
        ax.set(xscale='log', xlabel='N (candidates)', ylabel='accuracy (%), 95% CI',
               title=f"best-of-N, {res['dataset']}")
        ax.minorticks_off()
        ax.set_xticks(res['ns'], [str(k) for k in res['ns']])
        save(fig, 'bon_vs_n', ax)
    by_name = {r['method']: r for r in rows}
    learned = [(c, by_name[c['verifier']]) for c in res['cost'] if c['verifier'] in by_name]
    if learned:
        free = [r for r in rows if r['type'] in ('cheap', 'deepconf')]
        best = next((r['scorer'] for r in rows if r['type'] == 'cheap_best_val'), None)
        fig, (a0, a1) = plt.subplots(1, 2, figsize=(9, 4.5), sharey=True, gridspec_kw={'width_ratios': [2, 3]})
        y = [r['acc'] for r in free]
        a0.errorbar(range(len(free)), [100 * v for v in y], yerr=_yerr(y, [r.get('acc_ci') for r in free]),
                    fmt='o', ms=3, capsize=2, color='k')
        a0.set_xticks(range(len(free)), [r['method'] + (' (chosen on val)' if CHEAP_PRETTY.get(best) == r['method'] else '')
                                         for r in free], rotation=90, fontsize=6)
        a0.set(title='free scorers (0 verifier FLOPs)', ylabel=f'Bo{n} accuracy (%), 95% CI', xlim=(-0.7, len(free) - 0.3))
        for c, r in learned:
            vote = by_name.get(f"{r['method']} + weighted vote")
            h = a1.errorbar([c['flops']], [100 * r['acc']], yerr=_yerr([r['acc']], [r.get('acc_ci')]), fmt='o', capsize=3,
                            label=r['method'])
            if vote:  # the same verifier's weighted vote: same cost, open marker
                a1.errorbar([c['flops'] * 1.15], [100 * vote['acc']], yerr=_yerr([vote['acc']], [vote.get('acc_ci')]),
                            fmt='o', mfc='white', capsize=3, color=h[0].get_color(), label=vote['method'])
        a1.set(xscale='log', xlabel='verifier FLOPs per candidate', title=f"learned verifiers, {res['dataset']}")
        a1.xaxis.set_minor_formatter(plt.NullFormatter())  # labelled minor ticks collide within a decade
        a1.margins(x=0.3)
        reference_lines((a0, a1), [r for r in rows if r['type'] in ('single', 'vote', 'oracle')])
        save(fig, 'acc_vs_flops', a1)
    return [f'plot: {f}' for f in files]


# -----------------------------------------------------------------------------
# rows of the table, one block of methods at a time


def baseline_rows(problems, pool, val_problems, val_pool, ns, n, vn):
    """Single-pass, majority vote, every cheap scorer and the best cheap scorer (validation / test)."""
    single = np.array([q['labels'].mean() for q in pool])
    rows = [make_row('Single-pass (expected accuracy of one sample)', 'single', [per_problem_run({k: single for k in ns}, n=n)])]
    maj = {k: np.array([vote_sub(q['groups'], q['labels'], q['subsets'][k]) for q in pool]) for k in ns}
    rows.append(make_row('Majority vote (extracted answers)', 'vote', [per_problem_run(maj, n=n)]))
    cheap, val_acc = {}, {}
    for name in CHEAP_SCORERS:
        cheap[name] = scored_metrics(cheap_scores(problems, name), pool, ns, where=f'cheap scorer {name}', n=n)
        rows.append(make_row(CHEAP_PRETTY[name], 'cheap', [cheap[name]]))
    if val_pool is not None:
        val_acc = {k: scored_metrics(cheap_scores(val_problems, k), val_pool, [vn], where=f'cheap scorer {k} (validation)')
                   ['acc_at'][vn] for k in CHEAP_SCORERS}
        bv = max(CHEAP_SCORERS, key=lambda k: val_acc[k])
        rows.append(make_row(f'Best cheap scorer on validation: {bv}', 'cheap_best_val', [cheap[bv]], scorer=bv))
    bt = max(CHEAP_SCORERS, key=lambda k: cheap[k]['acc'])
    rows.append(make_row(f'Best cheap scorer on test (optimistic): {bt}', 'cheap_best_test', [cheap[bt]], scorer=bt))
    return rows, val_acc


def prm_rows(eval_dir, problems, pool, ns, n, how):
    """PRM rows from the per-step probabilities baselines.py cached, its cost row and a note when the
    cache is incomplete. Cost: FLOPs of one forward over each candidate's whole PRM input (system prompt,
    question, steps), attention included, as the verifiers' are counted; with the input lengths and
    architecture the cache holds, else estimated (Qwen2.5-Math-PRM-7B's figures when it was not run)."""
    path, prm, rows, note = os.path.join(eval_dir, 'prm_scores.json'), None, [], None
    if os.path.exists(path):
        with open(path) as f:
            prm = json.load(f)
        done = sum(len(prm['steps'].get(p['key'], [])) == len(p['candidates']) for p in problems)
        if done < len(problems):
            note = (f"PRM rows left out: {path} covers {done} of {len(problems)} problems; fix: finish it with "
                    f"`python baselines.py <config> --prm_model={prm['model']}`.")
            prm = None
    if prm:
        sc = [np.array([reduce_steps(st, how) for st in prm['steps'][p['key']]]) for p in problems]
        mt = scored_metrics(sc, pool, ns, None, vote=True, where=path, n=n)
        name = f"{prm['model'].rstrip('/').split('/')[-1]} ({how} step)"
        rows = [make_row(name, 'prm', [mt], params=prm.get('n_params')),
                make_row(f'{name} + weighted vote', 'prm_vote', [per_problem_run(mt['per_problem']['vote_at'], n=n)])]
    arch, tokens = (prm or {}).get('arch') or PRM_7B_ARCH, (prm or {}).get('tokens') or {}
    exact = 'arch' in (prm or {}) and all(len(tokens.get(p['key'], [])) == len(p['candidates']) for p in problems)
    if exact:
        L = [x for p in problems for x in tokens[p['key']]]
    else:
        cands = [c for p in problems for c in p['candidates']]
        tpc = sum(len(c['token_ids']) for c in cands) / max(1, sum(len(c['text']) for c in cands))
        L = [prm_tokens_estimate(p['question'], c['text'], len(c['token_ids']), tpc) for p in problems for c in p['candidates']]
    cost = {'verifier': rows[0]['method'] if prm else 'Qwen2.5-Math-PRM-7B (not run)',
            'params': (prm or {}).get('n_params') or arch['n_params'],
            'input': f"L tokens: system prompt + question + steps (mean {np.mean(L):.0f}{'' if exact else ', estimated'})",
            'flops': float(np.mean([prm_flops(arch, x) for x in L])),
            'seconds_per_candidate': (prm or {}).get('seconds_per_candidate'), 'device': (prm or {}).get('device'),
            'extra_passes': 'generator-scale re-encoding', 'acc': rows[0]['acc'] if prm else None}
    return rows, cost, note


def verifier_rows(paths, problems, pool, val_split, ns, n, cfg, dirs, dev):
    """Score with every checkpoint (cached), one row per run name with mean ± std over its seeds, its
    weighted-vote row, and its cost row. val_split(val_frac, val_seed, k) -> (problems, pool, n) of
    train_dir's validation split as that checkpoint was trained with, or None. dirs: (eval_dir,
    train_dir, cache_dir)."""
    eval_dir, train_dir, cache_dir = dirs
    groups, rows, cost, trained_on = {}, [], [], set()
    for path in paths:
        groups.setdefault(run_group(path), []).append(path)
    for g, gpaths in sorted(groups.items(), key=lambda kv: (kv[0].startswith('hsrm'), kv[0])):  # HSRM last
        runs, arch, voted = [], None, False
        for path in gpaths:
            model, ck = load_checkpoint(path, dev)
            a = (ck['kind'], json.dumps(ck['model_args'], sort_keys=True), ck['layers'], ck['input_steps'])
            if arch is not None and a != arch:
                raise ValueError(f"{gpaths}: runs named {g} hold different verifiers ({arch} vs {a}); fix: give each "
                                 f"configuration its own run dir name")
            arch, tc = a, ck.get('train_config') or {}
            trained_on |= {os.path.abspath(d) for d in tc.get('train_dirs') or []}
            sc, spc, where = cached_scores(model, path, problems, eval_dir, cache_dir, cfg['eval_batch_size'], dev)
            temp, val = None, val_split(tc.get('val_frac', cfg['val_frac']), tc.get('val_seed', cfg['val_seed']),
                                        tc.get('max_train_problems'))
            if val is not None:
                vp, vpool, vn = val
                vs = cached_scores(model, path, vp, train_dir, cache_dir, cfg['eval_batch_size'], dev)[0]
                temp = choose_temp(vs, vpool, vn, cfg['vote_temps'], where=f'{path} on {train_dir}')
            voted = temp is not None
            mt = scored_metrics(sc, pool, ns, temp, vote=voted, where=f'{path} on {eval_dir}', n=n)
            lengths = [input_lengths(c, model.spec) for p in problems for c in p['candidates']]
            runs.append({'ckpt': path, 'seed': tc.get('seed'), 'params': count_params(model), 'temp': temp,
                         'seconds_per_candidate': spc, 'device': where, **mt,
                         'flops': float(np.mean([verifier_flops(model, S, T) for S, T in lengths]))})
        label, kind = PRETTY.get(g, g), arch[0]
        rows.append(make_row(label, 'verifier', runs, params=runs[0]['params'], group=g, verifier_kind=kind))
        if voted:
            rows.append(make_row(f'{label} + weighted vote', 'verifier_vote',
                                 [per_problem_run(r['per_problem']['vote_at'], n=n) for r in runs], group=g))
        # what the last checkpoint of the group actually read (the runs of a group share the input spec)
        spec, inputs = model.spec, []
        if reads(kind, 'states'):
            gc = os.path.join(eval_dir, 'config.json')  # the extraction's cap (None: every step), then the verifier's
            stored = (json.load(open(gc)) if os.path.exists(gc) else {}).get('max_steps', 100)
            cap = min([x for x in (stored, spec.get('max_steps')) if x], default=None)
            inputs.append(f"S {f'≤ {cap}' if cap else '(every step)'} hidden states (mean {np.mean([S for S, _ in lengths]):.1f} read)")
        if reads(kind, 'tokens'):
            full = [len(c['token_ids']) for p in problems for c in p['candidates']] if not spec.get('tokenizer') else \
                [T for _, T in lengths]  # re-tokenized lengths are computed after the cut: count the cut below
            cut = sum(x > spec['max_tokens'] for x in full)
            inputs.append(f"T text tokens (mean {np.mean([T for _, T in lengths]):.0f} read, position table "
                          f"{spec['max_tokens']}" + (f", {cut} longer candidates read their last {spec['max_tokens']}"
                                                     if cut else '') + ')')
        cost.append({'verifier': label, 'params': runs[0]['params'], 'flops': float(np.mean([r['flops'] for r in runs])),
                     'input': ' + '.join(inputs), 'seconds_per_candidate': float(np.mean([r['seconds_per_candidate'] for r in runs])),
                     'device': runs[0]['device'], 'acc': rows[-2 if voted else -1]['acc'],
                     'extra_passes': 'text re-encoding' if reads(kind, 'tokens') else '0'})
    return rows, cost, sorted(trained_on)


# -----------------------------------------------------------------------------
# DeepConf offline: confidence scorers and their top-eta filtered, confidence-weighted votes


def filtered_vote_sub(groups, labels, sub, conf, eta):
    """DeepConf's offline vote on each subset: among candidates with an answer, keep those whose
    confidence is >= the (1 - eta) quantile of theirs (numpy's linear percentile, as their
    filter_top_confidence), then vote with the confidences as weights (answers grouped by our
    equivalence, not by string). A subset with no answer at all is a uniform pick."""
    accs = []
    for row in sub:
        has = row[groups[row] >= 0]
        if not len(has):
            accs.append(float(labels[row].mean()))
            continue
        c = conf[has]
        keep = has[c >= np.percentile(c, 100 * (1 - eta))]
        accs.append(vote_sub(groups, labels, keep[None, :], conf, None))
    return float(np.mean(accs))


def deepconf_rows(problems, pool, ns, n, cfg):
    """Rows for DeepConf's four confidence scorers (best-of-N by each) and its offline votes: weighted
    by the lowest-group confidence over all candidates, and top-eta filtered for bottom-10%, tail and
    lowest-group confidence."""
    w, tl = cfg['deepconf_window'], cfg['deepconf_tail']
    conf = {k: deepconf_scores(problems, k, w, tl) for k in DEEPCONF_SCORERS}
    pretty = {'deepconf_mean': 'mean', 'deepconf_tail': f'tail {tl}', 'deepconf_bottom10': f'bottom-10% group (window {w})',
              'deepconf_lowest': f'lowest group (window {w})'}
    rows = []
    for k, sc in conf.items():
        mt = scored_metrics(sc, pool, ns, where=f'DeepConf {k}', n=n)
        rows.append(make_row(f'DeepConf {pretty[k]} confidence', 'deepconf', [mt]))
    votes = [('deepconf_lowest', 1.0)] + [(k, e) for k in ('deepconf_bottom10', 'deepconf_tail', 'deepconf_lowest')
                                          for e in cfg['deepconf_etas']]
    for k, eta in votes:
        v = {m: np.array([filtered_vote_sub(q['groups'], q['labels'], q['subsets'][m], c, eta)
                          for c, q in zip(conf[k], pool)]) for m in ns}
        name = f'DeepConf vote, {pretty[k]}' + ('' if eta == 1.0 else f', top {100 * eta:g}%')
        rows.append(make_row(name, 'deepconf_vote', [per_problem_run(v, n=n)], eta=eta, scorer=k))
    return rows


# -----------------------------------------------------------------------------
# the run: pools, rows, notes, then results[_on_<run>].{json,md} and plots


def split_config(split_dir):
    """The extraction's config.json of a split dir ({} when it has none)."""
    path = os.path.join(split_dir, 'config.json')
    return json.load(open(path)) if os.path.exists(path) else {}


def table_notes(cfg, sizes, n, train_dir, val):
    """The notes on how the table's pools, votes and validation choices are made."""
    notes = ["Best-of-N: the top-scored candidate's correctness; tied top scores count as the mean correctness of the "
             "tied candidates." + (f" Pools hold {'/'.join(map(str, sizes))} candidates, so best-of-N, votes and N-scaling "
             f"average {cfg['n_subsets']} random N-subsets per problem (seed {cfg['subset_seed']}, the same subsets for "
             f"every method, oracle pass@N included)." if sizes[-1] > n else ''),
             "Votes group the extracted answers by equivalence (label.py's answers_equal); candidates without an answer "
             "do not vote; tied groups count as their mean correctness. The PRM-weighted vote sums PRM probabilities."]
    if val:
        notes.append(f"Validation choices use the val split of {train_dir} ({len(val[0])} problems, val_frac "
                     f"{cfg['val_frac']}, val_seed {cfg['val_seed']}) at best-of-{val[2]}: the best cheap scorer, and the "
                     f"weighted-vote temperature T of each run (softmax(score / T) summed per answer group, T from "
                     f"{cfg['vote_temps']}; a run trained with max_train_problems=K picks T on its own validation "
                     f"problems). 'On test' picks the scorer on the evaluation split: optimistic, as in the paper.")
    else:
        notes.append(f'No labelled {train_dir}: no validation split, so no best-cheap-on-validation row and no weighted votes.')
    return notes


def interval_notes(cfg, rows):
    """The notes on AUROC, the seeds and the intervals."""
    best_val = next((r['scorer'] for r in rows if r['type'] == 'cheap_best_val'), None)
    return ['Within-AUROC: per problem over its whole pool, mean over the problems with both correct and incorrect '
            'candidates. Learned verifiers: mean over seeds, one row per run name (the seed std is acc_std in the '
            'json).',
            f"[95% CI]: percentile bootstrap, {cfg['n_boot']} draws (boot_seed {cfg['boot_seed']}) of the problems with "
            f"replacement, the same draws for every method; a learned verifier's draw also resamples its seeds. Δ: "
            f"paired difference against majority vote and against the best cheap scorer chosen on validation"
            + (f" ({best_val})" if best_val else " (none: no validation split)")
            + ", each with the interval of the paired differences; **bold** where that interval excludes 0."]


def write_results(res, prefix, plots):
    """{prefix}.json and .md (+ plots), written atomically; prints the table."""
    if plots:
        res['notes'] += make_plots(res, prefix)
    md = render_markdown(res)
    atomic_write_json(for_json(res), prefix + '.json')
    with open(f'{prefix}.md.tmp{os.getpid()}', 'w') as f:
        f.write(md)
    os.replace(f'{prefix}.md.tmp{os.getpid()}', prefix + '.md')
    print(md)
    print(f'wrote {prefix}.json and {prefix}.md')


def run(cfg):
    cfg = {**DEFAULTS, **cfg}
    from label import answers_equal
    out_dir, n = cfg['out_dir'], cfg['n_eval']
    eval_dir, train_dir, suffix = run_dirs(cfg)
    dev = resolve_device(cfg['device'])
    if cfg['threads']:
        torch.set_num_threads(cfg['threads'])
    if cfg['prm_reduce'] not in ('last', 'min', 'prod'):
        raise ValueError(f"prm_reduce={cfg['prm_reduce']!r}; fix: --prm_reduce=last (or min, prod)")

    problems = load_split(eval_dir)
    sizes = sorted({len(p['candidates']) for p in problems})
    if n > sizes[0]:
        raise ValueError(f"n_eval={n} but some problems of {eval_dir} hold only {sizes[0]} candidates; fix: --n_eval={sizes[0]}")
    ns = sorted({k for k in cfg['n_scaling'] if k <= sizes[0]} | {n})
    pool = build_pool(problems, ns, cfg['n_subsets'], cfg['subset_seed'], answers_equal)
    # validation pools: problem-level val splits of train_dir, for choices that must not see the test split
    val_split = val_splitter(train_dir, n, cfg)
    val = val_split(cfg['val_frac'], cfg['val_seed'])
    val_problems, val_pool, vn = val or (None, None, None)
    notes = table_notes(cfg, sizes, n, train_dir, val)

    rows, val_acc = baseline_rows(problems, pool, val_problems, val_pool, ns, n, vn)
    if has_confidences(problems):
        rows += deepconf_rows(problems, pool, ns, n, cfg)
        notes.append(f"DeepConf (facebookresearch/deepconf): token confidence = minus the mean top-k log-prob; group = mean "
                     f"over a sliding window of {cfg['deepconf_window']} tokens (a shorter trace is one group, its mean); "
                     f"votes are weighted by the confidence named, over the top-eta fraction of candidates with an answer "
                     f"(eta {cfg['deepconf_etas']}), answers grouped by equivalence.")
    else:
        notes.append("DeepConf rows left out: the candidates have no 'confidences' (an extraction from before they were "
                     "stored); fix: re-extract with the current extract.py.")
    prows, pcost, note = prm_rows(eval_dir, problems, pool, ns, n, cfg['prm_reduce'])
    notes += [note] if note else []
    vrows, vcost, trained_on = verifier_rows(checkpoint_paths(cfg), problems, pool, val_split, ns, n, cfg,
                                             (eval_dir, train_dir, os.path.join(out_dir, 'scores')), dev)
    stopped = sum(int(q['stopped'].sum()) for q in pool)
    if stopped:  # sampled with online pruning (extract.py prune_ckpt): report what it did
        gc = split_config(eval_dir)
        notes.append(f"This split was sampled with online pruning ({gc.get('prune_ckpt')}, {gc.get('prune_rule')} rule, threshold "
                     f"{gc.get('prune_threshold')}): {stopped} of {sum(len(q['labels']) for q in pool)} candidates were stopped "
                     f"({np.mean([len(c['token_ids']) for p in problems for c in p['candidates']]):.1f} tokens per candidate "
                     f"generated). A stopped candidate is never selected, has no answer (no vote) and counts as wrong in "
                     f"single-pass and oracle rows; AUROC is over the candidates that were not stopped.")
    orc = {k: np.array([oracle_sub(q['labels'], q['subsets'][k]) for q in pool]) for k in ns}
    rows += prows + vrows + [make_row(f'Oracle pass@{n}', 'oracle', [per_problem_run(orc, n=n)])]
    add_intervals(rows, n, cfg['n_boot'], cfg['boot_seed'])
    notes += interval_notes(cfg, rows)
    if trained_on and trained_on != [os.path.abspath(train_dir)]:
        notes.append(f'Checkpoints were trained on {trained_on}; validation choices used {train_dir}.')

    res = {'config': cfg, 'eval_dir': eval_dir, 'train_dir': train_dir, 'dataset': problems[0]['dataset'],
           'generator': str(split_config(eval_dir).get('model', '?')), 'n_problems': len(problems), 'pool_size': sizes[0],
           'n_eval': n, 'ns': ns, 'transfer': bool(suffix), 'trained_on': trained_on, 'rows': rows, 'cost': [pcost] + vcost,
           'notes': notes, 'validation': {'n_problems': len(val_problems or []), 'n': vn, 'cheap_acc': val_acc}}
    write_results(res, os.path.join(out_dir, 'results' + suffix), cfg['plots'])
    return res


if __name__ == '__main__':
    config = configure(globals())  # config files, then --key=value, override the knobs above
    cli(run, config, 'evaluate.py')
