"""
The verifier steering generation, measured: verifier-guided search (extract.py --search=beam|dvts) against
best-of-N on the same problems at equal generated tokens. Best-of-N curves (N = 1..32) come from a plain pool of
the same problems (pool_dir); each search run is a split dir extracted with --search, labelled, whose problems
record generated_tokens (every token sampled for the problem, abandoned branches included, shared prefixes once).
Accuracy against mean generated tokens per problem, with paired bootstrap intervals over problems (evaluate.py's
draws), overall and by difficulty (the problem's solve rate in the pool). The pruning study on finished pools is
evaluate.py --prune=True.

    python steer.py config/search_shop.py

Writes {out_dir}/steer.md, steer.json, steer.png and config.json.
"""
import glob
import json
import os

import numpy as np
import torch

import evaluate as E
from configurator import configure, knobs
from label import answers_equal
from model import atomic_write_json, cli, load_checkpoint, load_split, problem_files, resolve_device
from scorers import CHEAP_SCORERS, cheap_scores
from train import split_problems

# -----------------------------------------------------------------------------
# knobs (options in the comments); config files and --key=value override them
out_dir = 'out/search_shop'          # writes steer.* here
pool_dir = 'out/words_shop/eval'     # plain samples of the same problems (best-of-N), e.g. 32 per problem
search_dirs = ['out/search_shop/*/eval']  # globs of labelled search split dirs (extract.py --search=...)
ckpts = ['out/words_shop/verifiers/hsrm_seed*/ckpt.pt']  # best-of-N's HSRM (mean over them); a search run is scored
                                     # by the checkpoint that steered it (its config's search_ckpt)
train_dir = 'out/words_shop/train'   # its validation split (train.py's) picks the best cheap scorer and vote temperatures
ns = [1, 2, 4, 8, 16, 32]            # best-of-N sizes (those the pool allows)
n_subsets = 100                      # random N-subsets per problem (evaluate.py's)
subset_seed = 0
n_boot = 2000                        # paired bootstrap draws over problems
boot_seed = 0
val_frac = 0.2
val_seed = 42
difficulty = [0.2, 0.5]              # solve-rate cuts in the pool: hard < 0.2 <= medium < 0.5 <= easy
device = 'auto'
threads = 0
DEFAULTS = knobs(globals())  # the knobs above as a dict

# -----------------------------------------------------------------------------


def run_tokens(p):
    """Tokens generated for one problem: a search run's record, else every candidate's tokens."""
    return p.get('generated_tokens', sum(len(c['token_ids']) for c in p['candidates']))


def bon_curves(problems, scores, pool, ns, temp):
    """Per problem, at each N: HSRM best-of-N, its weighted vote (temperature temp) and the mean tokens of an
    N-subset. scores: list (per ckpt) of per-problem arrays. -> {'hsrm': {N: [P]}, 'hsrm_vote': ..., 'tokens': ...}."""
    out = {k: {} for k in ('hsrm', 'hsrm_vote', 'tokens')}
    lens = [np.array([len(c['token_ids']) for c in p['candidates']]) for p in problems]
    for n in ns:
        out['hsrm'][n] = np.mean([[E.best_of_n_sub(s, q['labels'], q['subsets'][n]) for s, q in zip(sc, pool)]
                                  for sc in scores], 0)
        out['hsrm_vote'][n] = np.mean([[E.vote_sub(q['groups'], q['labels'], q['subsets'][n], s, t) for s, q in zip(sc, pool)]
                                       for sc, t in zip(scores, temp)], 0)
        out['tokens'][n] = np.array([ln[q['subsets'][n]].sum(1).mean() for ln, q in zip(lens, pool)])
    return out


def search_point(dirs, keys, dev, temps):
    """Per problem (in `keys` order), mean over the runs `dirs` (seeds) of: the steering checkpoint's pick among
    the finished candidates, its weighted vote over them (the checkpoint's validation temperature, temps[ckpt];
    1.0 if not among the best-of-N checkpoints), and the generated tokens."""
    acc, vote, tok = [], [], []
    for d in dirs:
        cfg = json.load(open(os.path.join(d, 'config.json')))
        model = load_checkpoint(cfg['search_ckpt'], dev)[0]
        probs = {p['key']: p for p in load_split(d)}
        missing = [k for k in keys if k not in probs]
        if missing:
            raise ValueError(f"{d} lacks problems {missing[:5]} of the pool; fix: extract the same eval_range as pool_dir")
        ps = [probs[k] for k in keys]
        sc = E.cached_scores(model, cfg['search_ckpt'], ps, d, os.path.join(d, '..', 'scores'), 1024, dev)[0]
        a, v = [], []
        for p, s in zip(ps, sc):
            fin = np.array([c['finish'] != 'pruned' for c in p['candidates']])
            lab = np.array([float(c['correct']) for c in p['candidates']])
            grp = E.answer_groups([c.get('answer') if f else None for c, f in zip(p['candidates'], fin)], answers_equal)
            sub = np.flatnonzero(fin)[None]
            a.append(E.best_of_n_sub(s, lab, sub))
            v.append(E.vote_sub(grp, lab, sub, s, temps.get(os.path.abspath(cfg['search_ckpt']), 1.0)))
        acc.append(a), vote.append(v), tok.append([run_tokens(p) for p in ps])
    return np.mean(acc, 0), np.mean(vote, 0), np.mean(tok, 0)


def matched(bon_acc, bon_tok, tokens):
    """Best-of-N accuracy at `tokens` generated tokens: linear in log tokens between the two neighbouring N
    (clamped at the ends). bon_acc, bon_tok: [len(ns)] (one bootstrap draw)."""
    return float(np.interp(np.log(tokens), np.log(bon_tok), bon_acc))


def run(cfg):
    cfg = {**DEFAULTS, **cfg}
    if cfg['threads']:
        torch.set_num_threads(cfg['threads'])
    dev = resolve_device(cfg['device'])
    problems = load_split(cfg['pool_dir'])
    m = min(len(p['candidates']) for p in problems)
    ns = [n for n in cfg['ns'] if n <= m]
    pool = E.build_pool(problems, ns, cfg['n_subsets'], cfg['subset_seed'], answers_equal)
    keys = [p['key'] for p in problems]
    paths = sorted({p for g in cfg['ckpts'] for p in glob.glob(g)})
    if not paths:
        raise ValueError(f"ckpts={cfg['ckpts']} matches no checkpoint; fix: python train.py <the pool's config> first")
    # validation choices on train_dir's val split (as train.py splits it): vote temperatures, the best cheap scorer
    vp = load_split(cfg['train_dir'], files=split_problems(problem_files(cfg['train_dir']), cfg['val_frac'], cfg['val_seed'])[1])
    vn = min(8, min(len(p['candidates']) for p in vp))
    vpool = E.build_pool(vp, [vn], cfg['n_subsets'], cfg['subset_seed'], answers_equal)
    scores, temps = [], []
    for path in paths:
        model = load_checkpoint(path, dev)[0]
        scores.append(E.cached_scores(model, path, problems, cfg['pool_dir'], os.path.join(cfg['out_dir'], 'scores'), 1024, dev)[0])
        vs = E.cached_scores(model, path, vp, cfg['train_dir'], os.path.join(cfg['out_dir'], 'scores'), 1024, dev)[0]
        temps.append(E.choose_temp(vs, vpool, vn, E.DEFAULTS['vote_temps']))
    bon = bon_curves(problems, scores, pool, ns, temps)
    best = max(CHEAP_SCORERS, key=lambda k: E.scored_metrics(cheap_scores(vp, k), vpool, [vn])['acc_at'][vn])
    cs = cheap_scores(problems, best)
    bon[f'cheap:{best}'] = {n: np.array([E.best_of_n_sub(s, q['labels'], q['subsets'][n]) for s, q in zip(cs, pool)]) for n in ns}
    bon['majority'] = {n: np.array([E.vote_sub(q['groups'], q['labels'], q['subsets'][n]) for q in pool]) for n in ns}
    bon['oracle'] = {n: np.array([E.oracle_sub(q['labels'], q['subsets'][n]) for q in pool]) for n in ns}

    groups = {}  # (search, width, N, steering run name) -> split dirs (one per seed)
    for d in sorted({d for g in cfg['search_dirs'] for d in glob.glob(g)}):
        c = json.load(open(os.path.join(d, 'config.json')))
        if not c.get('search') or not os.path.exists(os.path.join(d, 'labels.json')):
            continue
        name = E.run_group(c['search_ckpt'])
        groups.setdefault((c['search'], c['search_width'], c['n_samples'], name), []).append(d)
    idx = E.boot_draws(len(problems), cfg['n_boot'], cfg['boot_seed'])
    boot = lambda v: E.boot_means(np.asarray(v)[None], idx, cfg['boot_seed'])  # noqa: E731  [B]
    bb = {k: np.stack([boot(bon[k][n]) for n in ns], 1) for k in ('hsrm', 'tokens')}  # [B, len(ns)]
    rate = np.array([q['labels'].mean() for q in pool])
    lo, hi = cfg['difficulty']
    buckets = {'all': np.ones(len(pool), bool), f'hard (solve rate < {lo})': rate < lo,
               f'medium ({lo}-{hi})': (rate >= lo) & (rate < hi), f'easy (>= {hi})': rate >= hi}
    rows = []
    for (how, width, n, name), dirs in sorted(groups.items()):
        acc, vote, tok = search_point(dirs, keys, dev, {os.path.abspath(p): t for p, t in zip(paths, temps)})
        ba, bv, bt = boot(acc), boot(vote), boot(tok)
        eq = np.array([matched(bb['hsrm'][b], bb['tokens'][b], bt[b]) for b in range(len(idx))])
        row = {'method': f'{how} N={n} M={width} ({name}, {len(dirs)} seeds)', 'search': how, 'n': n, 'width': width,
               'ckpt_group': name, 'dirs': dirs, 'tokens': float(tok.mean()), 'acc': float(acc.mean()), 'acc_ci': E.ci(ba),
               'vote': float(vote.mean()), 'vote_ci': E.ci(bv),
               'bon_at_tokens': matched([bon['hsrm'][k].mean() for k in ns], [bon['tokens'][k].mean() for k in ns], tok.mean()),
               'delta_equal_tokens_ci': E.ci(ba - eq), 'per_problem': {'acc': acc, 'vote': vote, 'tokens': tok}}
        row['delta_equal_tokens'] = row['acc'] - row['bon_at_tokens']
        if 16 in ns:
            row['delta_bo16'], row['delta_bo16_ci'] = row['acc'] - bon['hsrm'][16].mean(), E.ci(ba - bb['hsrm'][:, ns.index(16)])
        row['by_difficulty'] = {}
        for bname, sel in buckets.items():
            if sel.any():
                at = matched([bon['hsrm'][k][sel].mean() for k in ns], [bon['tokens'][k][sel].mean() for k in ns], tok[sel].mean())
                row['by_difficulty'][bname] = {'n_problems': int(sel.sum()), 'acc': float(acc[sel].mean()), 'bon_at_tokens': at}
        rows.append(row)
    curves = {k: {'acc': [float(bon[k][n].mean()) for n in ns], 'acc_ci': [E.ci(boot(bon[k][n])) for n in ns]}
              for k in bon if k != 'tokens'}
    res = {'config': cfg, 'pool_dir': cfg['pool_dir'], 'n_problems': len(problems), 'ns': ns, 'best_cheap_val': best,
           'tokens': [float(bon['tokens'][n].mean()) for n in ns], 'curves': curves, 'rows': rows,
           'buckets': {k: int(v.sum()) for k, v in buckets.items()}}
    md = render(res)
    os.makedirs(cfg['out_dir'], exist_ok=True)
    atomic_write_json(cfg, os.path.join(cfg['out_dir'], 'config.json'))
    atomic_write_json(E.for_json(res), os.path.join(cfg['out_dir'], 'steer.json'))
    with open(os.path.join(cfg['out_dir'], 'steer.md'), 'w') as f:
        f.write(md + plot(res, os.path.join(cfg['out_dir'], 'steer.png')))
    print(md)
    return res


def render(res):
    ns, pct = res['ns'], lambda x: f'{100 * x:.1f}'  # noqa: E731
    out = [f"## Search vs best-of-N at equal generated tokens ({res['n_problems']} problems of {res['pool_dir']})", '',
           '| Best-of-N (pool) | ' + ' | '.join(f'N={n}' for n in ns) + ' |', '|---|' + '---:|' * len(ns),
           '| mean tokens per problem | ' + ' | '.join(f'{t:.0f}' for t in res['tokens']) + ' |']
    for k, c in res['curves'].items():
        name = {'hsrm': 'HSRM', 'hsrm_vote': 'HSRM weighted vote', 'majority': 'Majority vote',
                'oracle': 'Oracle pass@N'}.get(k) or f"Best cheap on validation ({k.split(':')[-1]})"
        out.append(f'| {name} | ' + ' | '.join(E._ci(a, i, True) for a, i in zip(c['acc'], c['acc_ci'])) + ' |')
    out += ['', '| Search (steering checkpoint) | Tokens / problem | HSRM pick (%) [95% CI] | Weighted vote (%) [95% CI] '
            '| HSRM Bo-N at equal tokens | Δ at equal tokens (pts) | Δ vs HSRM Bo16 (pts) |', '|---|---:|---:|---:|---:|---:|---:|']
    for r in res['rows']:
        d16 = E._ci(r['delta_bo16'], r['delta_bo16_ci'], True, diff=True) if 'delta_bo16' in r else '–'
        out.append(f"| {r['method']} | {r['tokens']:.0f} | {E._ci(r['acc'], r['acc_ci'], True)} | "
                   f"{E._ci(r['vote'], r['vote_ci'], True)} | {pct(r['bon_at_tokens'])} | "
                   f"{E._ci(r['delta_equal_tokens'], r['delta_equal_tokens_ci'], True, diff=True)} | {d16} |")
    bnames = list(res['buckets'])[1:]
    out += ['', '| By difficulty: search pick vs HSRM Bo-N at equal tokens (%) | '
            + ' | '.join(f'{b} ({res["buckets"][b]})' for b in bnames) + ' |', '|---|' + '---:|' * len(bnames)]
    for r in res['rows']:
        cells = [r['by_difficulty'].get(b) for b in bnames]
        out.append(f"| {r['method']} | " + ' | '.join(
            f"{pct(c['acc'])} vs {pct(c['bon_at_tokens'])}" if c else '–' for c in cells) + ' |')
    out += ['', 'Best-of-N averages random N-subsets of the pool; tokens are the mean generated per problem (a search '
            "run's generated_tokens, abandoned branches included). Search rows average the runs (seeds) steered by "
            'checkpoints of one run name; each run is scored by its own steering checkpoint. Δ at equal tokens: the '
            "search pick minus HSRM best-of-N interpolated in log tokens at the search's tokens, per bootstrap draw "
            '(problems resampled, the same draws for all); **bold** where the interval excludes 0.']
    return '\n'.join(out) + '\n'


def plot(res, path):
    try:
        import matplotlib
        matplotlib.use('Agg')
        import matplotlib.pyplot as plt
    except ImportError:
        return '\n(no plot: matplotlib is not installed)\n'
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for k, c in res['curves'].items():
        if k == 'oracle':
            continue
        acc, ci_ = np.array(c['acc']), c['acc_ci']
        ax.errorbar(res['tokens'], 100 * acc, yerr=E._yerr(list(acc), ci_),
                    marker='o', ms=3, capsize=2, label={'hsrm': 'HSRM best-of-N', 'hsrm_vote': 'HSRM weighted vote',
                                                         'majority': 'majority vote'}.get(k, k.replace('cheap:', '')))
    for r in res['rows']:
        ax.errorbar([r['tokens']], [100 * r['acc']], yerr=E._yerr([r['acc']], [r['acc_ci']]),
                    marker='s' if r['search'] == 'beam' else '^', ms=6, capsize=2, ls='none', label=r['method'])
    ax.set_xscale('log')
    ax.set_xlabel('generated tokens per problem')
    ax.set_ylabel('accuracy (%)')
    ax.legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(path, dpi=130)
    plt.close(fig)
    return f'\n![accuracy vs tokens]({os.path.basename(path)})\n'


if __name__ == '__main__':
    config = configure(globals())  # config files, then --key=value, override the knobs above
    cli(run, config, 'steer.py')
