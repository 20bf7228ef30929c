"""
Evaluation: HSRM and every baseline on one evaluation split, side by side, in one table.

    python evaluate.py config/gsm8k_1p7b.py                       # every ckpt under {out_dir}/verifiers/
    python evaluate.py config/gsm8k_1p7b.py --eval_dir=out/olympiadbench_1p7b/eval   # zero-shot transfer

Scores every candidate of {eval_dir} with each checkpoint (batched, cached under {out_dir}/scores/),
adds the free scorers (scorers.py), the PRM's cached scores (baselines.py, prm.py), majority and verifier-weighted votes,
single-pass and oracle, and writes {out_dir}/results[_<tag>].json and .md (+ plots with matplotlib).
Best-of-N, votes and temperatures are chosen on nothing from the test split except where a row says
"optimistic". Validation choices (vote temperatures, the best free selector) use the grouped val split
of {train_dir} (train.split_problems, same val_frac / val_seed as training).

The table's machinery lives here, and the studies (steer, transfer, curve, sample) import it: score caches, a run's
dirs, checkpoints and validation splits, the free rows and the reference chosen on validation, rows with their paired
intervals, formatting and plots. The best-of-N maths under it (pools, rules, votes, AUROC, bootstrap) is bestofn.py's.
"""
import glob
import hashlib
import json
import os
import re
import time
import warnings
import zipfile

import numpy as np
import torch

from bestofn import (boot_draws, boot_means, build_pool, choose_temp, ci, filtered_vote_sub, oracle_sub, per_problem_run,
                     scored_metrics, vote_sub)
from configurator import check_positive, cli, configure, knobs, resolve_device
from model import (VERIFIERS, combo_fit, combo_score, count_params, input_lengths, reads, score_prefixes,
                   score_problems, verifier_flops)
from prm import PRM_7B_ARCH, prm_flops, prm_tokens_estimate
from prm import prm_reduce as reduce_steps  # the name prm_reduce is this stage's config key
from scorers import CHEAP_SCORERS, DEEPCONF_SCORERS, cheap_scores, deepconf_scores, has_confidences
from store import atomic_write_json, check_writable, load_checkpoint, load_split, problem_files, read_checkpoint
from tasks import check_unseen
from train import split_problems

# -----------------------------------------------------------------------------
# config (options in the comments)
out_dir = 'out/demo'        # the run: scores {out_dir}/eval, reads {out_dir}/verifiers/*/ckpt.pt, writes {out_dir}/results*
eval_dir = ''               # '' = {out_dir}/eval; another run's eval dir = zero-shot transfer (results_on_<run>.*)
train_dir = ''              # '' = {out_dir}/train: its validation split picks vote temperatures and the best free selector
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
# scores and a run's files: score caches, the run's dirs and checkpoints, its validation splits (steer.py's
# pruning study and sample.py read a run the same way)


def choice_split(split_dir, n, cfg, files=None):
    """A labelled split that choices are made on (validation, calibration): (problems, pool, best-of-n), with
    n lowered to its smallest pool."""
    from grading import answers_equal
    ps = load_split(split_dir, files=files)
    vn = min(n, min(len(p['candidates']) for p in ps))
    return ps, build_pool(ps, [vn], cfg['n_subsets'], cfg['subset_seed'], answers_equal), vn


def slug(path):
    return re.sub(r'[^A-Za-z0-9_.-]+', '_', os.path.normpath(path)).strip('_')


def fingerprint(path):
    """A torch.save file's content, cheaply: the name, size and CRC32 of each record its zip directory lists (no tensor
    is read; the same for a copy or a moved file, whatever its mtime)."""
    with zipfile.ZipFile(path) as z:
        return hashlib.sha256(''.join(f"{i.filename.split('/', 1)[-1]} {i.file_size} {i.CRC}\n"
                                      for i in z.infolist()).encode()).hexdigest()


def split_stamp(split_dir):
    """What a split's scores depend on besides the checkpoint, as a hash: its config.json and each problem
    file's name and content (fingerprint: a re-extraction with the same problem keys changes it, a copy does not)."""
    h = hashlib.sha256()
    if os.path.exists(os.path.join(split_dir, 'config.json')):
        with open(os.path.join(split_dir, 'config.json'), 'rb') as f:
            h.update(f.read())
    for path in problem_files(split_dir):
        h.update(f'{os.path.basename(path)} {fingerprint(path)}\n'.encode())
    return h.hexdigest()


def cached_scores(model, ckpt_path, problems, split_dir, cache_dir, batch_size, device, prefixes=False):
    """(scores per problem, seconds per candidate, device) of one checkpoint's model on one split;
    cached in {cache_dir}/{split}/{run}.json, split and run named relative to the dir holding cache_dir (a copied or
    moved run keeps its caches), valid while the checkpoint's and the split's contents (fingerprint, split_stamp) are
    unchanged. prefixes=True: score_prefixes' per-step scores instead (a list of arrays per problem), {run}.prefixes.json."""
    rel = lambda d: slug(os.path.relpath(os.path.abspath(d), os.path.dirname(os.path.abspath(cache_dir)))).replace('..', 'up')  # noqa: E731
    path = os.path.join(cache_dir, rel(split_dir), rel(os.path.dirname(ckpt_path)) + ('.prefixes' if prefixes else '') + '.json')
    stamp, split = fingerprint(ckpt_path), split_stamp(split_dir)
    conv = (lambda v: [np.array(x, dtype=np.float64) for x in v]) if prefixes else np.array
    if os.path.exists(path):
        with open(path) as f:
            c = json.load(f)
        if (c.get('ckpt_fingerprint') == stamp and c.get('split') == split
                and all(p['key'] in c['scores'] for p in problems)):
            return [conv(c['scores'][p['key']]) for p in problems], c['seconds_per_candidate'], c['device']
    t0 = time.perf_counter()
    scores = (score_prefixes if prefixes else score_problems)(model, problems, batch_size, device, where=split_dir)
    spc = (time.perf_counter() - t0) / sum(len(p['candidates']) for p in problems)
    dev = f'cpu ({torch.get_num_threads()} threads)' if device == 'cpu' else device
    atomic_write_json({'ckpt': ckpt_path, 'ckpt_fingerprint': stamp, 'split': split, 'seconds_per_candidate': spc,
                       'device': dev, 'scores': {p['key']: [x.tolist() for x in s] if prefixes else s.tolist()
                                                 for p, s in zip(problems, scores)}}, path)
    return scores, spc, dev


def run_dirs(cfg):
    """(eval_dir, train_dir, suffix) of a run: suffix '_on_<run>' when eval_dir is another run's (zero-shot
    transfer; results_on_<run>.*), else ''."""
    eval_dir = cfg['eval_dir'] or os.path.join(cfg['out_dir'], 'eval')
    train_dir = cfg['train_dir'] or os.path.join(cfg['out_dir'], 'train')
    transfer = os.path.abspath(eval_dir) != os.path.abspath(os.path.join(cfg['out_dir'], 'eval'))
    return eval_dir, train_dir, f"_on_{slug(os.path.basename(os.path.dirname(os.path.abspath(eval_dir))))}" if transfer else ''


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


# -----------------------------------------------------------------------------
# rows of the table: names, mean and std over seeds, and 95% intervals from a paired bootstrap over problems
# (rows of several runs also resample their seeds) against the references


PRETTY = {**{k: v[2] for k, v in VERIFIERS.items()}, 'text_small': 'EORM-style text (small)',
          'text_large': 'EORM-style text (large)'}


DEEPCONF_PRETTY = {'deepconf_mean': 'DeepConf mean confidence', 'deepconf_tail': 'DeepConf tail confidence',
                   'deepconf_bottom10': 'DeepConf bottom-10% group confidence', 'deepconf_lowest': 'DeepConf lowest group confidence'}


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


# differences are taken against these rows (by type): (the best-of-N reference, the AUROC reference). The best free
# selector on validation may be a vote, which ranks nothing: its AUROC side is the free scorer best by validation AUROC.
REFS = {'majority': ('vote', 'vote'), 'best_free_val': ('free_best_val', 'free_best_val_auroc')}


def add_intervals(rows, n, n_boot, seed):
    """Every row with per-problem values gets acc_ci (best-of-n), acc_ci_at {k: ...} (every N), auroc_ci,
    and under 'vs' its paired difference against each REFS row present: {ref: {'acc', 'acc_ci', 'auroc',
    'auroc_ci'}} (observed difference, and the interval of the differences over the same draws; best-of-N against
    the reference's best-of-N row, AUROC against its AUROC row)."""
    rows = [r for r in rows if r.get('per_problem')]
    if not rows:
        return
    idx = boot_draws(rows[0]['per_problem']['acc_at'][n].shape[1], n_boot, seed)
    b = {id(r): {'acc_at': {k: boot_means(v, idx, seed) for k, v in r['per_problem']['acc_at'].items()},
                 'auroc': None if r['per_problem']['auroc'] is None else boot_means(r['per_problem']['auroc'], idx, seed)}
         for r in rows}
    find = lambda t: next((r for r in rows if r['type'] == t), None)  # noqa: E731
    refs = {name: (find(ta), find(tu)) for name, (ta, tu) in REFS.items()}
    for r in rows:
        br = b[id(r)]
        r['acc_ci'], r['acc_ci_at'] = ci(br['acc_at'][n]), {k: ci(x) for k, x in br['acc_at'].items()}
        r['auroc_ci'], r['vs'] = None if br['auroc'] is None else ci(br['auroc']), {}
        for name, (ra, ru) in refs.items():
            if ra is not None:
                r['vs'][name] = {'acc': r['acc'] - ra['acc'], 'acc_ci': ci(br['acc_at'][n] - b[id(ra)]['acc_at'][n])}
            if ru is not None and br['auroc'] is not None and b[id(ru)]['auroc'] is not None:
                r['vs'].setdefault(name, {}).update(auroc=r['auroc'] - ru['auroc'], auroc_ci=ci(br['auroc'] - b[id(ru)]['auroc']))


def for_json(obj):
    """obj without its 'per_problem' entries (numpy arrays, used for the intervals only)."""
    if isinstance(obj, dict):
        return {k: for_json(v) for k, v in obj.items() if k != 'per_problem'}
    return [for_json(v) for v in obj] if isinstance(obj, (list, tuple)) else obj


# -----------------------------------------------------------------------------
# the free side: every free selector, and the best of them chosen on validation (the reference)


FREE_TIES = 'mean'  # the tie rule of the validation choices: tied selectors count as their mean (a uniform pick among them)


def free_scores(problems, cfg, combo=None):
    """{name: per-problem score arrays} of every free scorer: scorers.py's cheap scorers, DeepConf's four
    confidences (when the candidates store them), and the fitted free-scorer combo (norm from model.combo_fit)."""
    out = {k: cheap_scores(problems, k) for k in CHEAP_SCORERS}
    if has_confidences(problems):
        out |= {k: deepconf_scores(problems, k, cfg['deepconf_window'], cfg['deepconf_tail']) for k in DEEPCONF_SCORERS}
    if combo is not None:
        out['combo'] = [np.array([combo_score(c, combo) for c in p['candidates']]) for p in problems]
    return out


def free_selectors(problems, pool, ns, n, scores, temps, cfg):
    """{name: (type, metrics)} of every free selector on one pool: majority vote, best-of-N by each free scorer,
    each scorer's weighted vote at its temperature temps[name] (None: no vote), DeepConf's filtered votes."""
    out = {'majority vote': ('vote', per_problem_run(
        {k: np.array([vote_sub(q['groups'], q['labels'], q['subsets'][k]) for q in pool]) for k in ns}, n=n))}
    for name, sc in scores.items():
        kind = 'deepconf' if name in DEEPCONF_SCORERS else 'combo' if name == 'combo' else 'cheap'
        m = scored_metrics(sc, pool, ns, temps.get(name), vote=temps.get(name) is not None, where=f'free scorer {name}', n=n)
        out[name] = (kind, m)
        if temps.get(name) is not None:
            out[f'{name} + weighted vote'] = ('free_vote', per_problem_run(m['per_problem']['vote_at'], n=n, temp=temps[name]))
    conf = {k: scores[k] for k in DEEPCONF_SCORERS if k in scores}
    if conf:
        votes = [('deepconf_lowest', 1.0)] + [(k, e) for k in ('deepconf_bottom10', 'deepconf_tail', 'deepconf_lowest')
                                              for e in cfg['deepconf_etas']]
        for k, eta in votes:
            v = {m: np.array([filtered_vote_sub(q['groups'], q['labels'], q['subsets'][m], c, eta)
                              for c, q in zip(conf[k], pool)]) for m in ns}
            name = f"DeepConf vote ({DEEPCONF_PRETTY[k][9:]}" + ('' if eta == 1.0 else f', top {100 * eta:g}%') + ')'
            out[name] = ('deepconf_vote', per_problem_run(v, n=n))
    return out


def _best(metrics, key, ties):
    """(names of the best selectors by metric key, within 1e-9), of {name: metrics}; NaN counts as worst."""
    vals = {k: np.nan_to_num(m.get(key, np.nan), nan=-np.inf) for k, m in metrics.items()}
    top = max(vals.values())
    return [k for k, v in vals.items() if v >= top - 1e-9] if ties else [max(vals, key=vals.get)]


def _mean_run(runs, n):
    """The per-problem mean of tied selectors' runs: a uniform pick among them."""
    acc = {k: np.mean([r['per_problem']['acc_at'][k] for r in runs], 0) for k in runs[0]['per_problem']['acc_at']}
    au = [r['per_problem']['auroc'] for r in runs]
    with np.errstate(invalid='ignore'), warnings.catch_warnings():
        warnings.simplefilter('ignore', RuntimeWarning)  # a problem no tied scorer ranks stays NaN
        auroc = np.nanmean(au, 0) if all(a is not None for a in au) else None
    return per_problem_run(acc, auroc, n)


def fit_combo(train_dir, val_frac, val_seed, k=None):
    """model.combo_fit's weights from train_dir's training problems (split_problems' train side: validation left
    out), or None when none of them has both a correct and a wrong candidate."""
    tr = load_split(train_dir, files=split_problems(problem_files(train_dir), val_frac, val_seed, k)[0])
    mixed = any(len({bool(c['correct']) for c in p['candidates']}) == 2 for p in tr)
    return combo_fit(tr) if mixed and has_confidences(tr) else None  # it weighs DeepConf's mean confidence too


def free_rows(problems, pool, ns, n, val, cfg, combo=None):
    """(rows, choice) of the free side, given what the learned verifiers get: single-pass, every free selector
    (free_selectors; each scorer's weighted vote has its temperature chosen on validation from cfg['vote_temps'], as
    a verifier's), and the references. 'free_best_val': the selector with the best validation best-of-N (votes
    included); 'free_best_val_auroc': the scorer with the best validation AUROC (a vote ranks nothing); ties count
    as their mean (FREE_TIES). 'free_best_test' / 'free_best_test_auroc': the same chosen on the evaluation split
    itself (optimistic: no user can choose them in advance). val: (problems, pool, n) of the validation split, or
    None (no weighted votes, no validation reference). combo: model.combo_fit's weights from training problems
    (None: no combo). choice: what was chosen, the tied names and every selector's validation accuracy and AUROC."""
    single = np.array([q['labels'].mean() for q in pool])
    rows = [make_row('Single-pass (expected accuracy of one sample)', 'single', [per_problem_run({k: single for k in ns}, n=n)])]
    combo = combo if has_confidences(problems) else None  # it weighs DeepConf's mean confidence: an old split has none
    scores, temps, choice = free_scores(problems, cfg, combo), {}, {}
    if val is not None:
        vp, vpool, vn = val
        vscores = free_scores(vp, cfg, combo)
        temps = {k: choose_temp(v, vpool, vn, cfg['vote_temps'], where=f'free scorer {k} (validation)') for k, v in vscores.items()}
        vsel = {k: m for k, (_, m) in free_selectors(vp, vpool, [vn], vn, vscores, temps, cfg).items()}
        choice = {'val_acc': {k: m['acc'] for k, m in vsel.items()},
                  'val_auroc': {k: m['auroc'] for k, m in vsel.items() if 'auroc' in m}}
    sel = free_selectors(problems, pool, ns, n, scores, temps, cfg)
    pretty = {**CHEAP_PRETTY, **DEEPCONF_PRETTY, 'combo': 'Free-scorer combo (fitted on training problems)',
              'majority vote': 'Majority vote (extracted answers)'}
    for k, (kind, m) in sel.items():
        name = pretty.get(k, k[0].upper() + k[1:]) if kind != 'free_vote' else f"{pretty.get(k[:-16], k[:-16])} + weighted vote"
        extra = {'weights': dict(zip(combo['names'], combo['weight']))} if k == 'combo' else {}
        rows.append(make_row(name, kind, [m], scorer=k, temp=m.get('temp'), **extra))
    scorers = [k for k, (kind, _) in sel.items() if 'auroc' in sel[k][1]]
    picks = {'free_best_test': _best({k: m for k, (_, m) in sel.items()}, 'acc', ties=True),
             'free_best_test_auroc': _best({k: sel[k][1] for k in scorers}, 'auroc', ties=True)}
    if val is not None:
        picks = {'free_best_val': _best({k: vsel[k] for k in sel}, 'acc', ties=True),
                 'free_best_val_auroc': _best({k: vsel[k] for k in scorers}, 'auroc', ties=True), **picks}
    title = {'free_best_val': 'Best free selector on validation', 'free_best_val_auroc': 'Best free scorer on validation by AUROC',
             'free_best_test': 'Best free selector on test (optimistic)', 'free_best_test_auroc': 'Best free scorer on test by AUROC (optimistic)'}
    for kind, names in picks.items():
        run = sel[names[0]][1] if len(names) == 1 else _mean_run([sel[k][1] for k in names], n)
        tie = f" (tie: mean of {' / '.join(names)})" if len(names) > 1 else f': {names[0]}'
        rows.append(make_row(title[kind] + tie, kind, [run], scorer=' / '.join(names), tied=names))
        choice[kind] = names
    return rows, choice


# -----------------------------------------------------------------------------
# output: markdown tables laid out like the paper's, and plots


def fmt(v, sd, pct):
    if v is None or (isinstance(v, float) and np.isnan(v)):
        return '–'
    s = f'{100 * v:.2f}' if pct else f'{v:.3f}'
    return s + (f' ± {100 * sd:.2f}' if pct else f' ± {sd:.3f}') if sd is not None else s


def fmt_ci(v, interval, pct, diff=False):
    """'44.0 [38.2, 49.8]' (pct: points, 1 decimal; else 3 decimals); diff: signed, and bold where the
    interval excludes zero."""
    if v is None or np.isnan(v):
        return '–'
    f = (lambda x: f"{100 * x:{'+' if diff else ''}.1f}") if pct else (lambda x: f"{x:{'+' if diff else ''}.3f}")
    s = f(v) + (f' [{f(interval[0])}, {f(interval[1])}]' if interval else '')
    return f'**{s}**' if diff and interval and (interval[0] > 0 or interval[1] < 0) else s


def fmt_vs(r, ref, key, pct):
    """A row's difference against reference row ref ('ref.' on the reference itself, '–' without one)."""
    if r['type'] == REFS[ref][0 if key == 'acc' else 1]:
        return 'ref.'
    d = r.get('vs', {}).get(ref, {})
    return fmt_ci(d.get(key), d.get(key + '_ci'), pct, diff=True)


def fmt_num(x, unit='', giga='G'):
    if x is None:
        return '–'
    for div, suf in ((1e12, 'T'), (1e9, giga), (1e6, 'M'), (1e3, 'k')):
        if abs(x) >= div:
            return f'{x / div:.3g}{suf}{unit}'
    return f'{x:.3g}{unit}'


def yerr(vals, intervals):
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


def render_markdown(res):
    n = res['n_eval']
    out = [f"## Best-of-{n} on {res['dataset']} ({res['generator']})", '',
           f"Evaluation split `{res['eval_dir']}`: {res['n_problems']} problems, {res['pool_size']} candidates each"
           + (f"; verifiers trained on `{', '.join(res['trained_on'])}` (zero-shot transfer)" if res['transfer'] else '') + '.',
           '', f'| Method | Params | Bo{n} Acc. (%) [95% CI] | Δ vs majority (pts) | Δ vs best free on val (pts) '
           f'| Within-AUROC [95% CI] | Δ AUROC vs best free on val |', '|---|---:|---:|---:|---:|---:|---:|']
    for r in res['rows']:
        seeds = f" ({r['n_runs']} seeds)" if r['type'] in ('verifier', 'verifier_vote') and r['n_runs'] > 1 else ''
        out.append(f"| {r['method']}{seeds} | {fmt_num(r['params'], giga='B')} | {fmt_ci(r['acc'], r.get('acc_ci'), True)} "
                   f"| {fmt_vs(r, 'majority', 'acc', True)} | {fmt_vs(r, 'best_free_val', 'acc', True)} "
                   f"| {fmt_ci(r.get('auroc'), r.get('auroc_ci'), False)} | {fmt_vs(r, 'best_free_val', 'auroc', False)} |")
    out += [''] + [f'{i + 1}. {t}' for i, t in enumerate(res['notes'])]
    ns = res['ns']
    if len(ns) > 1:
        out += ['', '### N-scaling (best-of-N accuracy, %)', '',
                '| Method | ' + ' | '.join(str(k) for k in ns) + ' | Δ |', '|---|' + '---:|' * (len(ns) + 1)]
        for r in res['rows']:
            if r['type'] in ('single', 'cheap', 'deepconf', 'deepconf_vote', 'combo', 'free_vote'):
                continue
            a = [r['acc_at'].get(k) for k in ns]
            d = f'{100 * (a[-1] - a[0]):+.1f}' if None not in (a[0], a[-1]) else '–'
            name = 'Oracle pass@N' if r['type'] == 'oracle' else r['method']
            out.append(f"| {name} | " + ' | '.join(fmt(x, None, True) for x in a) + f' | {d} |')
    out += ['', '### Verifier cost', '', '| Verifier | Params | Weights (fp16) | Input | FLOPs / candidate '
            '| Time / candidate | Extra generator passes |', '|---|---:|---:|---|---:|---:|---|']
    for c in res['cost']:
        t = f"{1e3 * c['seconds_per_candidate']:.3g} ms ({c['device']})" if c.get('seconds_per_candidate') else '–'
        out.append(f"| {c['verifier']} | {fmt_num(c['params'], giga='B')} | {fmt_num(c['params'] * 2, 'B')} | {c['input']} "
                   f"| {fmt_num(c['flops'])} | {t} | {c['extra_passes']} |")
    return '\n'.join(out) + '\n'


# the plots' reference rows by type: (colour, line style); the learned verifiers cycle VERIFIER_STYLES (colour, marker)
REF_STYLES = {'single': ('darkgoldenrod', '-.'), 'vote': ('dimgray', '--'), 'oracle': ('k', ':'), 'free_best_val': ('tab:blue', '-')}
VERIFIER_STYLES = [('tab:red', 'o'), ('tab:green', 's'), ('tab:purple', '^'), ('tab:orange', 'D'), ('tab:brown', 'v')]


def _band(ax, x, y, ci, color, ls, label, marker=None):
    """A line with its 95% interval as a shaded band (y, ci in fractions; drawn in points)."""
    ax.plot(x, [100 * v for v in y], color=color, ls=ls, marker=marker, ms=4, lw=1.6, label=label)
    if all(c is not None for c in ci):
        ax.fill_between(x, [100 * c[0] for c in ci], [100 * c[1] for c in ci], color=color, alpha=0.12, lw=0)


def make_plots(res, prefix):
    """{prefix}_bon_vs_n.png: best-of-N against N for the learned verifiers, the best free selector on validation (the
    table's reference), majority vote, oracle pass@N and single-pass, each a line with its 95% band; and
    {prefix}_acc_vs_flops.png: best-of-N against verifier FLOPs per candidate, the learned verifiers labelled and the
    references as bands; the free selectors (0 FLOPs) as one unlabelled column. A note instead without matplotlib."""
    try:
        import matplotlib
        matplotlib.use('Agg')
        import matplotlib.pyplot as plt
    except ImportError:
        return ['plots skipped: matplotlib is not installed (pip install matplotlib)']
    files, rows, n = [], res['rows'], res['n_eval']
    refs = [r for t in REF_STYLES for r in rows if r['type'] == t]
    learned = [r for r in rows if r['type'] in ('verifier', 'prm')]
    style = {r['method']: VERIFIER_STYLES[i % len(VERIFIER_STYLES)] for i, r in enumerate(learned)}
    def name(r):
        if r['type'] == 'free_best_val':  # the table's reference; a tie of several is their mean
            tied = r.get('tied') or [r['method']]
            return f"Best free selector on val ({tied[0] if len(tied) == 1 else f'mean of {len(tied)} tied'})"
        return 'Oracle pass@N' if r['type'] == 'oracle' else r['method']

    def save(fig, ax, what):
        ax.legend(fontsize=7, loc='upper left', bbox_to_anchor=(1.02, 1.0))
        files.append(f'{prefix}_{what}.png')
        fig.savefig(files[-1], dpi=150, bbox_inches='tight')  # tight: the outside legend stays in the frame
        plt.close(fig)

    ns = res['ns']
    if len(ns) > 1:
        fig, ax = plt.subplots(figsize=(6.5, 4.2))
        for r in refs:
            color, ls = REF_STYLES[r['type']]
            if r['type'] == 'single':  # one sample: the same at every N
                y, ci = [r['acc']] * len(ns), [r.get('acc_ci')] * len(ns)
            else:
                y, ci = [r['acc_at'][k] for k in ns], [r.get('acc_ci_at', {}).get(k) for k in ns]
            _band(ax, ns, y, ci, color, ls, name(r))
        for r in learned:
            color, marker = style[r['method']]
            _band(ax, ns, [r['acc_at'][k] for k in ns], [r.get('acc_ci_at', {}).get(k) for k in ns], color, '-',
                  r['method'], marker)
        ax.set(xscale='log', xlabel='N (candidates per problem)', ylabel='best-of-N accuracy (%), 95% band',
               title=f"best-of-N, {res['dataset']} ({res['n_problems']} problems)")
        ax.minorticks_off()
        ax.set_xticks(ns, [str(k) for k in ns])
        save(fig, ax, 'bon_vs_n')
    by_name = {r['method']: r for r in rows}
    cost = [(c, by_name[c['verifier']]) for c in res['cost'] if c['verifier'] in by_name and c.get('flops')]
    if cost:
        fig, ax = plt.subplots(figsize=(6.5, 4.2))
        lo, hi = min(c['flops'] for c, _ in cost), max(c['flops'] for c, _ in cost)
        x0 = lo / 30  # the free selectors' column: no verifier FLOPs, drawn left of every verifier on the log axis
        for r in refs:
            color, ls = REF_STYLES[r['type']]
            ax.axhline(100 * r['acc'], color=color, ls=ls, lw=1.4, label=name(r))
            if r.get('acc_ci'):
                ax.axhspan(100 * r['acc_ci'][0], 100 * r['acc_ci'][1], color=color, alpha=0.10, lw=0)
        free = [r for r in rows if r['type'] in ('cheap', 'deepconf', 'combo', 'free_vote', 'deepconf_vote')]
        ax.plot([x0] * len(free), [100 * r['acc'] for r in free], 'o', ms=3, color='lightgray', mec='gray',
                label=f'{len(free)} free selectors (0 verifier FLOPs)')
        for c, r in cost:
            color, marker = style.get(r['method'], ('tab:gray', 'o'))
            ax.errorbar([c['flops']], [100 * r['acc']], yerr=yerr([r['acc']], [r.get('acc_ci')]), fmt=marker, color=color,
                        capsize=3, ms=6, label=r['method'])
            vote = by_name.get(f"{r['method']} + weighted vote")
            if vote:  # the same verifier's weighted vote: same cost, open marker
                ax.plot([c['flops'] * 1.4], [100 * vote['acc']], marker, mfc='white', color=color, ms=6,
                        label=vote['method'])
        ax.set(xscale='log', xlim=(x0 / 3, hi * 5), xlabel='verifier FLOPs per candidate (free selectors: 0)',
               ylabel=f'best-of-{n} accuracy (%), 95% interval', title=f"accuracy vs verifier cost, {res['dataset']}")
        ax.xaxis.set_minor_formatter(plt.NullFormatter())
        save(fig, ax, 'acc_vs_flops')
    return [f'plot: {f}' for f in files]


# -----------------------------------------------------------------------------
# rows of the table: the PRM and the learned verifiers (the free side is free_rows, above)


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
             "Votes group the extracted answers by equivalence (grading.py's answers_equal); candidates without an answer "
             "do not vote; tied groups count as their mean correctness. The PRM-weighted vote sums PRM probabilities."]
    if val:
        notes.append(f"Validation choices use the val split of {train_dir} ({len(val[0])} problems, val_frac "
                     f"{cfg['val_frac']}, val_seed {cfg['val_seed']}) at best-of-{val[2]}, cut by group "
                     f"(tasks.group_key: no validation question shares its numbers with a training one): the weighted-vote "
                     f"temperature T of each run and of each free scorer (softmax(score / T) summed per answer group, T from "
                     f"{cfg['vote_temps']}; a run trained with max_train_problems=K picks T on its own validation "
                     f"problems), and the best free selector: among majority vote, every free scorer (cheap, DeepConf, the "
                     f"combo fitted on the training problems), each one's weighted vote and DeepConf's votes, the best "
                     f"validation best-of-N (its AUROC side: the free scorer with the best validation AUROC); tied "
                     f"selectors count as their {FREE_TIES} (a uniform pick among them). 'On test' picks on the "
                     f"evaluation split: optimistic, as in the paper.")
    else:
        notes.append(f'No labelled {train_dir}: no validation split, so no best-free-on-validation row and no weighted votes.')
    return notes


def interval_notes(cfg, rows):
    """The notes on AUROC, the seeds and the intervals."""
    best_val = next((r['scorer'] for r in rows if r['type'] == 'free_best_val'), None)
    return ['Within-AUROC: per problem over its whole pool, mean over the problems with both correct and incorrect '
            'candidates. Learned verifiers: mean over seeds, one row per run name (the seed std is acc_std in the '
            'json).',
            f"[95% CI]: percentile bootstrap, {cfg['n_boot']} draws (boot_seed {cfg['boot_seed']}) of the problems with "
            f"replacement, the same draws for every method; a learned verifier's draw also resamples its seeds. Δ: "
            f"paired difference against majority vote and against the best free selector chosen on validation"
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
    check_positive(cfg, DEFAULTS, ('n_eval', 'n_subsets', 'n_boot', 'eval_batch_size', 'deepconf_window', 'deepconf_tail'))
    from grading import answers_equal
    out_dir, n = cfg['out_dir'], cfg['n_eval']
    eval_dir, train_dir, suffix = run_dirs(cfg)
    check_writable('out_dir', out_dir, os.path.join(out_dir, 'scores'))  # the table, the score caches: before work
    dev = resolve_device(cfg['device'])
    if cfg['threads']:
        torch.set_num_threads(cfg['threads'])
    if cfg['prm_reduce'] not in ('last', 'min', 'prod'):
        raise ValueError(f"prm_reduce={cfg['prm_reduce']!r}; fix: --prm_reduce=last (or min, prod)")

    problems = load_split(eval_dir)
    paths = checkpoint_paths(cfg)
    for path in paths:  # before any work: no checkpoint scores a problem of its training or validation groups
        check_unseen(problems, read_checkpoint(path).get('groups'), path)
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

    combo = fit_combo(train_dir, cfg['val_frac'], cfg['val_seed']) if val else None
    rows, choice = free_rows(problems, pool, ns, n, val, cfg, combo)
    if has_confidences(problems):
        notes.append(f"DeepConf (facebookresearch/deepconf): token confidence = minus the mean top-k log-prob; group = mean "
                     f"over a sliding window of {cfg['deepconf_window']} tokens (a shorter trace is one group, its mean); "
                     f"votes are weighted by the confidence named, over the top-eta fraction of candidates with an answer "
                     f"(eta {cfg['deepconf_etas']}), answers grouped by equivalence.")
    else:
        notes.append("DeepConf rows left out: the candidates have no 'confidences' (an extraction from before they were "
                     "stored); fix: re-extract with the current extract.py.")
    prows, pcost, note = prm_rows(eval_dir, problems, pool, ns, n, cfg['prm_reduce'])
    notes += [note] if note else []
    vrows, vcost, trained_on = verifier_rows(paths, problems, pool, val_split, ns, n, cfg,
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
           'notes': notes, 'validation': {'n_problems': len(val_problems or []), 'n': vn, **choice}}
    write_results(res, os.path.join(out_dir, 'results' + suffix), cfg['plots'])
    return res


if __name__ == '__main__':
    config = configure(globals())  # config files, then --key=value, override the knobs above
    cli(run, config, 'evaluate.py')
