"""
The verifier steering generation, measured: verifier-guided search (extract.py --search=beam|dvts) against
best-of-N on the same problems at equal generated tokens. Best-of-N curves (N = 1..32) come from a plain pool of
the same problems (pool_dir); each search run is a split dir extracted with --search, labelled, whose problems
record generated_tokens (every token the generator ran for the problem, abandoned branches included, shared
prefixes once). Each search row (the runs steered by one checkpoint group, one per seed) is compared at equal
tokens with best-of-N picked by the same checkpoints, with plain HSRM's (ckpts) and with the best cheap scorer
on validation; vote temperatures come from validation for every checkpoint. Intervals are bootstrap draws over
problems and, on each side, over the runs (seeds), as evaluate.py's; by difficulty, a problem's solve rate is
measured on difficulty_samples pool candidates that the by-difficulty best-of-N never scores. The pruning study on finished pools is
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
from baselines import CHEAP_SCORERS, cheap_scores
from configurator import configure, knobs
from label import answers_equal
from model import atomic_write_json, cli, load_checkpoint, load_split, problem_files, resolve_device
from train import split_problems

# -----------------------------------------------------------------------------
# knobs (options in the comments); config files and --key=value override them
out_dir = 'out/search_shop'          # writes steer.* here
pool_dir = 'out/words_shop/eval'     # plain samples of the same problems (best-of-N), e.g. 32 per problem
search_dirs = ['out/search_shop/*/eval']  # globs of labelled search split dirs (extract.py --search=...)
ckpts = ['out/words_shop/verifiers/hsrm_seed*/ckpt.pt']  # plain HSRM's best-of-N (a reference for every row); a
                                     # search run is scored by the checkpoint that steered it (its config's search_ckpt),
                                     # and compared first with best-of-N picked by those same checkpoints
train_dir = 'out/words_shop/train'   # its validation split (train.py's) picks the best cheap scorer and vote temperatures
ns = [1, 2, 4, 8, 16, 32]            # best-of-N sizes (those the pool allows)
n_subsets = 100                      # random N-subsets per problem (evaluate.py's)
subset_seed = 0
n_boot = 2000                        # paired bootstrap draws over problems
boot_seed = 0
val_frac = 0.2
val_seed = 42
difficulty = [0.2, 0.5]              # solve-rate cuts: hard < 0.2 <= medium < 0.5 <= easy
difficulty_samples = 8               # pool candidates per problem (a random draw by subset_seed) that only measure its
                                     # solve rate; the by-difficulty best-of-N scores the others (buckets cut on the
                                     # labels they are scored on would favour search on hard problems by chance alone)
device = 'auto'
threads = 0
DEFAULTS = knobs(globals())  # the knobs above as a dict

# -----------------------------------------------------------------------------


def run_tokens(p):
    """Tokens generated for one problem: a search run's record, else every candidate's tokens."""
    return p.get('generated_tokens', sum(len(c['token_ids']) for c in p['candidates']))


def bon_curves(problems, scores, pool, ns, temp):
    """Per run (checkpoint) and problem, at each N: HSRM best-of-N and its weighted vote (temperature temp[run]),
    and per problem the mean tokens of an N-subset. scores: list (per ckpt) of per-problem arrays.
    -> {'hsrm': {N: [R, P]}, 'hsrm_vote': {N: [R, P]}, 'tokens': {N: [P]}}."""
    out = {k: {} for k in ('hsrm', 'hsrm_vote', 'tokens')}
    lens = [np.array([len(c['token_ids']) for c in p['candidates']]) for p in problems]
    for n in ns:
        out['hsrm'][n] = np.array([[E.best_of_n_sub(s, q['labels'], q['subsets'][n]) for s, q in zip(sc, pool)]
                                   for sc in scores])
        out['hsrm_vote'][n] = np.array([[E.vote_sub(q['groups'], q['labels'], q['subsets'][n], s, t) for s, q in zip(sc, pool)]
                                        for sc, t in zip(scores, temp)])
        out['tokens'][n] = np.array([ln[q['subsets'][n]].sum(1).mean() for ln, q in zip(lens, pool)])
    return out


def search_point(dirs, keys, dev, temps):
    """Per run `dirs` (seeds) and problem (in `keys` order): the steering checkpoint's pick among the finished
    candidates, its weighted vote over them (the checkpoint's validation temperature, temps(ckpt)), and the
    generated tokens. -> (acc [R, P], vote [R, P], tokens [R, P], the runs' steering checkpoints)."""
    acc, vote, tok, ckpts = [], [], [], []
    for d in dirs:
        cfg = json.load(open(os.path.join(d, 'config.json')))
        model = load_checkpoint(cfg['search_ckpt'], dev)[0]
        ckpts.append(cfg['search_ckpt'])
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
            v.append(E.vote_sub(grp, lab, sub, s, temps(cfg['search_ckpt'])))
        acc.append(a), vote.append(v), tok.append([run_tokens(p) for p in ps])
    return np.array(acc), np.array(vote), np.array(tok, dtype=np.float64), ckpts


def matched(bon_acc, bon_tok, tokens):
    """Best-of-N accuracy at `tokens` generated tokens: linear in log tokens between the two neighbouring N
    (clamped at the ends). bon_acc, bon_tok: [len(ns)] (one bootstrap draw)."""
    return float(np.interp(np.log(tokens), np.log(bon_tok), bon_acc))


def vs_bon(acc, tok, ref, ref_tok, ns, n_boot, seed, paired):
    """Search picks (acc, tok: [R, P], per run and problem) against a best-of-N curve (ref {N: [R', P]}, ref_tok
    {N: [P]}) interpolated in log tokens at the search's mean tokens. -> (the curve there, Δ, Δ's 95% interval).
    Each bootstrap draw resamples the problems (the same for both sides) and the runs of each side; paired: run j
    of both sides is one unit (search run j steered by checkpoint j of the curve), else the sides draw apart."""
    idx = E.boot_draws(acc.shape[1], n_boot, seed)
    ba, bt = E.boot_means(acc, idx, seed), E.boot_means(tok, idx, seed)
    rs = seed if paired else seed + 1
    rb = np.stack([E.boot_means(ref[n], idx, rs) for n in ns], 1)
    rt = np.stack([E.boot_means(ref_tok[n], idx, rs) for n in ns], 1)
    eq = np.array([matched(rb[b], rt[b], bt[b]) for b in range(len(idx))])
    at = matched([ref[n].mean() for n in ns], [ref_tok[n].mean() for n in ns], tok.mean())
    return at, float(acc.mean()) - at, E.ci(ba - eq)


def run(cfg):
    cfg = {**DEFAULTS, **cfg}
    if cfg['threads']:
        torch.set_num_threads(cfg['threads'])
    dev = resolve_device(cfg['device'])
    problems = load_split(cfg['pool_dir'])
    m = min(len(p['candidates']) for p in problems)
    k = cfg['difficulty_samples']
    if not (isinstance(k, int) and 1 <= k < m):
        raise ValueError(f"difficulty_samples={k!r} with {m} candidates per problem in {cfg['pool_dir']}; fix: "
                         f"--difficulty_samples=<1..{m - 1}> (those measure difficulty, the others are scored)")
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
    scored = {}  # abs ckpt path -> (pool scores, validation temperature), every checkpoint a row or curve uses

    def score(path):
        a = os.path.abspath(path)
        if a not in scored:
            model = load_checkpoint(path, dev)[0]
            sc = E.cached_scores(model, path, problems, cfg['pool_dir'], os.path.join(cfg['out_dir'], 'scores'), 1024, dev)[0]
            vs = E.cached_scores(model, path, vp, cfg['train_dir'], os.path.join(cfg['out_dir'], 'scores'), 1024, dev)[0]
            scored[a] = sc, E.choose_temp(vs, vpool, vn, E.DEFAULTS['vote_temps'], where=f'{path} on its validation split')
        return scored[a]
    bon = bon_curves(problems, [score(p)[0] for p in paths], pool, ns, [score(p)[1] for p in paths])
    best = max(CHEAP_SCORERS, key=lambda k: E.scored_metrics(cheap_scores(vp, k), vpool, [vn])['acc_at'][vn])
    cs = cheap_scores(problems, best)
    bon[f'cheap:{best}'] = {n: np.array([[E.best_of_n_sub(s, q['labels'], q['subsets'][n]) for s, q in zip(cs, pool)]]) for n in ns}
    bon['majority'] = {n: np.array([[E.vote_sub(q['groups'], q['labels'], q['subsets'][n]) for q in pool]]) for n in ns}
    bon['oracle'] = {n: np.array([[E.oracle_sub(q['labels'], q['subsets'][n]) for q in pool]]) for n in ns}

    # difficulty from an independent draw: k candidates per problem measure it, the rest are scored by bucket
    rng = np.random.default_rng(cfg['subset_seed'])
    draw = [rng.permutation(len(p['candidates'])) for p in problems]
    rate = np.array([np.mean([p['candidates'][i]['correct'] for i in d[:k]]) for p, d in zip(problems, draw)])
    rest = [np.sort(d[k:]) for d in draw]
    rprobs = [{**p, 'candidates': [p['candidates'][i] for i in r]} for p, r in zip(problems, rest)]
    rns = [n for n in ns if n <= m - k]
    rpool = E.build_pool(rprobs, rns, cfg['n_subsets'], cfg['subset_seed'], answers_equal)
    lo, hi = cfg['difficulty']
    buckets = {f'hard (solve rate < {lo})': rate < lo, f'medium ({lo}-{hi})': (rate >= lo) & (rate < hi),
               f'easy (>= {hi})': rate >= hi}

    groups = {}  # (search, width, N, steering run name) -> split dirs (one per seed)
    for d in sorted({d for g in cfg['search_dirs'] for d in glob.glob(g)}):
        c = json.load(open(os.path.join(d, 'config.json')))
        if not c.get('search') or not os.path.exists(os.path.join(d, 'labels.json')):
            continue
        name = E.run_group(c['search_ckpt'])
        groups.setdefault((c['search'], c['search_width'], c['n_samples'], name), []).append(d)
    nb, bs = cfg['n_boot'], cfg['boot_seed']
    rows = []
    for (how, width, n, name), dirs in sorted(groups.items()):
        dirs = sorted(dirs, key=lambda d: os.path.abspath(json.load(open(os.path.join(d, 'config.json')))['search_ckpt']))
        acc, vote, tok, steer_ckpts = search_point(dirs, keys, dev, lambda p: score(p)[1])
        own = sorted(os.path.abspath(p) for p in steer_ckpts)  # best-of-N picked by the checkpoints that steered
        same = bon_curves(problems, [score(p)[0] for p in own], pool, ns, [score(p)[1] for p in own])
        if own != [os.path.abspath(p) for p in paths]:
            bon[f'hsrm:{name}'], bon[f'hsrm_vote:{name}'] = same['hsrm'], same['hsrm_vote']
        idx = E.boot_draws(len(problems), nb, bs)
        ba, bv = E.boot_means(acc, idx, bs), E.boot_means(vote, idx, bs)
        row = {'method': f'{how} N={n} M={width} ({name}, {len(dirs)} seeds)', 'search': how, 'n': n, 'width': width,
               'ckpt_group': name, 'dirs': dirs, 'steer_ckpts': steer_ckpts, 'tokens': float(tok.mean()),
               'acc': float(acc.mean()), 'acc_ci': E.ci(ba), 'vote': float(vote.mean()), 'vote_ci': E.ci(bv),
               'per_problem': {'acc': acc, 'vote': vote, 'tokens': tok}}
        row['bon_at_tokens'], row['delta_equal_tokens'], row['delta_equal_tokens_ci'] = vs_bon(
            acc, tok, same['hsrm'], bon['tokens'], ns, nb, bs, paired=len(own) == len(dirs))
        for ref, curve in (('plain', bon['hsrm']), ('cheap', bon[f'cheap:{best}'])):
            row[f'{ref}_at_tokens'], row[f'delta_{ref}'], row[f'delta_{ref}_ci'] = vs_bon(
                acc, tok, curve, bon['tokens'], ns, nb, bs, paired=ref == 'plain' and own == [os.path.abspath(p) for p in paths])
        if 16 in ns:
            b16 = E.boot_means(same['hsrm'][16], idx, bs if len(own) == len(dirs) else bs + 1)
            row['delta_bo16'], row['delta_bo16_ci'] = row['acc'] - same['hsrm'][16].mean(), E.ci(ba - b16)
        rsame = bon_curves(rprobs, [[s[r] for s, r in zip(score(p)[0], rest)] for p in own], rpool, rns, [score(p)[1] for p in own])
        row['by_difficulty'] = {}
        for bname, sel in buckets.items():
            if sel.any():
                at, dl, dci = vs_bon(acc[:, sel], tok[:, sel], {k_: v[:, sel] for k_, v in rsame['hsrm'].items()},
                                     {k_: v[sel] for k_, v in rsame['tokens'].items()}, rns, nb, bs, paired=len(own) == len(dirs))
                row['by_difficulty'][bname] = {'n_problems': int(sel.sum()), 'acc': float(acc[:, sel].mean()),
                                               'bon_at_tokens': at, 'delta': dl, 'delta_ci': dci}
        rows.append(row)
    idx = E.boot_draws(len(problems), nb, bs)
    curves = {k: {'acc': [float(bon[k][n].mean()) for n in ns], 'acc_ci': [E.ci(E.boot_means(bon[k][n], idx, bs)) for n in ns]}
              for k in bon if k != 'tokens'}
    res = {'config': cfg, 'pool_dir': cfg['pool_dir'], 'n_problems': len(problems), 'ns': ns, 'best_cheap_val': best,
           'tokens': [float(bon['tokens'][n].mean()) for n in ns], 'curves': curves, 'rows': rows,
           'temps': {p: t for p, (_, t) in scored.items()}, 'difficulty_ns': rns,
           'difficulty_draw': {q: d[:k].tolist() for q, d in zip(keys, draw)},
           'buckets': {k: int(v.sum()) for k, v in buckets.items()}}
    md = render(res)
    os.makedirs(cfg['out_dir'], exist_ok=True)
    atomic_write_json(cfg, os.path.join(cfg['out_dir'], 'config.json'))
    atomic_write_json(E.for_json(res), os.path.join(cfg['out_dir'], 'steer.json'))
    with open(os.path.join(cfg['out_dir'], 'steer.md'), 'w') as f:
        f.write(md + plot(res, os.path.join(cfg['out_dir'], 'steer.png')))
    print(md)
    return res


def curve_name(k):
    """A curve's row name: 'hsrm', 'hsrm_vote:<run name>', 'cheap:<scorer>', ..."""
    base, _, group = k.partition(':')
    if base == 'cheap':
        return f'Best cheap on validation ({group})'
    name = {'hsrm': 'HSRM', 'hsrm_vote': 'HSRM weighted vote', 'majority': 'Majority vote', 'oracle': 'Oracle pass@N'}[base]
    return f'{name} ({group})' if group else name


def render(res):
    ns, pct = res['ns'], lambda x: f'{100 * x:.1f}'  # noqa: E731
    out = [f"## Search vs best-of-N at equal generated tokens ({res['n_problems']} problems of {res['pool_dir']})", '',
           '| Best-of-N (pool) | ' + ' | '.join(f'N={n}' for n in ns) + ' |', '|---|' + '---:|' * len(ns),
           '| mean tokens per problem | ' + ' | '.join(f'{t:.0f}' for t in res['tokens']) + ' |']
    for k, c in res['curves'].items():
        out.append(f'| {curve_name(k)} | ' + ' | '.join(E._ci(a, i, True) for a, i in zip(c['acc'], c['acc_ci'])) + ' |')
    d = lambda r, k: E._ci(r[k], r[k + '_ci'], True, diff=True) if k in r else '–'  # noqa: E731
    out += ['', '| Search (steering checkpoint) | Tokens / problem | HSRM pick (%) [95% CI] | Weighted vote (%) [95% CI] '
            '| Same checkpoints\' Bo-N at equal tokens | Δ vs it (pts) | Δ vs plain HSRM Bo-N (pts) '
            '| Δ vs best cheap Bo-N (pts) | Δ vs same checkpoints\' Bo16 (pts) |', '|---|---:|---:|---:|---:|---:|---:|---:|---:|']
    for r in res['rows']:
        out.append(f"| {r['method']} | {r['tokens']:.0f} | {E._ci(r['acc'], r['acc_ci'], True)} | "
                   f"{E._ci(r['vote'], r['vote_ci'], True)} | {pct(r['bon_at_tokens'])} | {d(r, 'delta_equal_tokens')} | "
                   f"{d(r, 'delta_plain')} | {d(r, 'delta_cheap')} | {d(r, 'delta_bo16')} |")
    bnames = list(res['buckets'])
    out += ['', '| By difficulty: Δ vs the same checkpoints\' Bo-N at equal tokens (pts) [95% CI] (search vs Bo-N, %) | '
            + ' | '.join(f'{b} ({res["buckets"][b]})' for b in bnames) + ' |', '|---|' + '---:|' * len(bnames)]
    for r in res['rows']:
        cells = [r['by_difficulty'].get(b) for b in bnames]
        out.append(f"| {r['method']} | " + ' | '.join(
            f"{E._ci(c['delta'], c['delta_ci'], True, diff=True)} ({pct(c['acc'])} vs {pct(c['bon_at_tokens'])})"
            if c else '–' for c in cells) + ' |')
    out += ['', 'Best-of-N averages random N-subsets of the pool; tokens are the mean generated per problem (a search '
            "run's generated_tokens: every token the generator ran, abandoned branches included). Search rows average "
            'the runs (seeds) steered by checkpoints of one run name; each run is scored by its own steering checkpoint '
            "and compared with best-of-N picked by those same checkpoints (HSRM (<run name>) above where they are not "
            "ckpts), plain HSRM's and the best cheap scorer's, interpolated in log tokens at the search's tokens. "
            'Intervals: bootstrap draws over problems and over each side\'s runs (seeds; run j of a search and of its '
            'own checkpoints\' best-of-N drawn together); **bold** where the interval excludes 0. By difficulty: '
            f"a problem's solve rate on {res['config']['difficulty_samples']} pool candidates drawn apart; best-of-N "
            f"there scores the other candidates only (N up to {max(res['difficulty_ns'])})."]
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
                    marker='o', ms=3, capsize=2, label=curve_name(k))
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
