"""
The verifier steering generation, measured: verifier-guided search (studies/policy.py: --search=beam|dvts) against
best-of-N on the same problems at equal generated tokens. Best-of-N curves (N = 1..32) come from a plain pool of
the same problems (pool_dir); each search run is a split dir extracted with --search, labelled, whose problems
record generated_tokens (every token the generator ran for the problem, abandoned branches included, shared
prefixes once). Each search row (the runs steered by one checkpoint group, one per seed) is compared at equal
tokens with best-of-N picked by the same checkpoints, with plain HSRM's (ckpts) and with the best free selector
on validation; vote temperatures come from validation for every checkpoint. Intervals are bootstrap draws over
problems and, on each side, over the runs (seeds), as evaluate.py's; by difficulty, a problem's solve rate is
measured on difficulty_samples pool candidates that the by-difficulty best-of-N never scores.

    python -m studies.steer config/search_shop.py

The pruning study (prune=True, below the search code) is the steering policy without branching, replayed on a
finished run's pools: each verifier rule with its threshold chosen on validation (or a calibration split) and
DeepConf's online stop, against no pruning, on the same pools. It reads the run as evaluate.py does (evaluate.py's
keys from the same config files and flags) and writes {out_dir}/prune.md, prune.json and prune.png (prune_on_<run>.*
for another run's eval_dir).

    python -m studies.steer config/prune_synth3.py                    # the config sets prune = True
    python -m studies.steer config/synth_smollm.py --prune=True --calib_dir=out/synth_smollm_calib/eval
"""
import glob
import json
import os
import sys

import numpy as np
import torch

import bestofn as B
import evaluate
import plots
import tables
from bestofn import group_confidences, has_confidences
from configurator import configure, knobs, split_argv
from grading import answers_equal
from machine import check_writable, cli, resolve_device, set_threads
from model import reads
from store import atomic_write_json, load_checkpoint, load_split, problem_files, split_problems
from studies.policy import PRUNE_RULES, replay_deepconf, replay_prune

# -----------------------------------------------------------------------------
# knobs (options in the comments); config files and --key=value override them
# the search study reads the four below, which its config names (config/search_shop.py: the shop study)
out_dir = 'out/search_shop'          # writes steer.* here
pool_dir = ''                        # plain samples of the same problems (best-of-N), e.g. 32 per problem
search_dirs = []                     # globs of labelled search split dirs (studies/policy.py --search=...)
ckpts = []                           # globs of plain HSRM's checkpoints, its best-of-N a reference for every row; a
                                     # search run is scored by the checkpoint that steered it (its config's
                                     # search_ckpt), and compared first with best-of-N picked by those same checkpoints
train_dir = ''                       # its validation split (train.py's) picks the best free selector and vote
                                     # temperatures
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
# the pruning study: the run's keys (out_dir, eval_dir, train_dir, ckpts, n_eval, n_subsets, n_boot, vote_temps,
# deepconf_window, deepconf_etas, ...) are evaluate.py's, read from the same config files and flags; its own:
prune = False                        # True = the pruning study instead of search
prune_rules = ['global', 'relative']  # verifier rules (policy.prune_now): 'global' score threshold | 'relative' margin
                                     # behind the pool's current leader
prune_tolerance = 0.01               # each rule's threshold is chosen on validation: the fewest tokens with validation
                                     # best-of-N at most this much below no pruning
prune_grid = 21                      # thresholds per rule (quantiles of the validation prefix scores), swept for the
                                     # choice and the curves
prune_subsets = 4                    # pools larger than n_eval: simulate on the first this many of the N-subsets
calib_dir = ''                       # '' = thresholds on train_dir's validation split (which also picked the
                                     # checkpoint); a labelled split of other problems (e.g. out/x_calib/eval, extracted
                                     # with train_range=None and a fresh eval_range) = thresholds and vote temperature
                                     # there
deepconf_warmup = 2                  # DeepConf online: the first this many candidates of each pool run in full and set
                                     # its threshold (their code: 16 of 256); must be < n_eval
DEFAULTS = knobs(globals())  # the knobs above as a dict
EVAL_DEFAULTS = evaluate.DEFAULTS  # evaluate.py's knobs (vote temperatures, DeepConf windows)
PRUNE_DEFAULTS = {**EVAL_DEFAULTS,
                  **{k: v for k, v in DEFAULTS.items() if k not in EVAL_DEFAULTS}}  # the pruning study's

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
        out['hsrm'][n] = np.array([[B.best_of_n_sub(s, q['labels'], q['subsets'][n]) for s, q in zip(sc, pool)]
                                   for sc in scores])
        out['hsrm_vote'][n] = np.array([[B.vote_sub(q['groups'], q['labels'], q['subsets'][n], s, t)
                                         for s, q in zip(sc, pool)]
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
            raise ValueError(f"{d} lacks problems {missing[:5]} of the pool; fix: extract the same eval_range as "
                             "pool_dir")
        ps = [probs[k] for k in keys]
        sc = tables.cached_scores(model, cfg['search_ckpt'], ps, d, os.path.join(d, '..', 'scores'), 1024, dev)[0]
        a, v = [], []
        for p, s in zip(ps, sc):
            fin = np.array([c['finish'] != 'pruned' for c in p['candidates']])
            lab = np.array([float(c['correct']) for c in p['candidates']])
            grp = B.answer_groups([c.get('answer') if f else None for c, f in zip(p['candidates'], fin)], answers_equal)
            sub = np.flatnonzero(fin)[None]
            a.append(B.best_of_n_sub(s, lab, sub))
            v.append(B.vote_sub(grp, lab, sub, s, temps(cfg['search_ckpt'])))
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
    idx = B.boot_draws(acc.shape[1], n_boot, seed)
    ba, bt = B.boot_means(acc, idx, seed), B.boot_means(tok, idx, seed)
    rs = seed if paired else seed + 1
    rb = np.stack([B.boot_means(ref[n], idx, rs) for n in ns], 1)
    rt = np.stack([B.boot_means(ref_tok[n], idx, rs) for n in ns], 1)
    eq = np.array([matched(rb[b], rt[b], bt[b]) for b in range(len(idx))])
    at = matched([ref[n].mean() for n in ns], [ref_tok[n].mean() for n in ns], tok.mean())
    return at, float(acc.mean()) - at, B.ci(ba - eq)


def check_study(cfg):
    """The checks before any work: each knob naming the study's data finds some (every one missing named at once: a
    config that is not a search study's sets none of them), out_dir writable. -> (what each found, device)."""
    set_threads(cfg['threads'])
    found = {'pool_dir': glob.glob(os.path.join(cfg['pool_dir'], 'problems', '*.pt')),
             'train_dir': glob.glob(os.path.join(cfg['train_dir'], 'problems', '*.pt')),
             'ckpts': [p for g in cfg['ckpts'] for p in glob.glob(g)],
             'search_dirs': [d for g in cfg['search_dirs'] for d in glob.glob(g)]}
    missing = [k for k, v in found.items() if not v]
    if missing:
        where = ', '.join(f"{k}={cfg[k]!r}" + ('' if cfg[k] else ' (not set)') for k in missing)
        raise ValueError(f"the search study finds nothing at {where}; fix: set {', '.join('--' + k for k in missing)} "
                         "to the study's labelled splits and checkpoints (config/search_shop.py names them, its "
                         f"header the commands), or --prune=True for the pruning study on a finished run")
    check_writable('out_dir', cfg['out_dir'], os.path.join(cfg['out_dir'], 'scores'))
    return found, resolve_device(cfg['device'])


def study_pool(cfg, found):
    """The plain pool of pool_dir: (its problems, the best-of-N sizes it allows, their N-subsets (bestofn.build_pool),
    plain HSRM's checkpoints); difficulty_samples checked against its size, and before any work every checkpoint, the
    search runs' steering ones too, against its problems (none scores its training groups, other states or stale)."""
    problems = load_split(cfg['pool_dir'])
    m = min(len(p['candidates']) for p in problems)
    k = cfg['difficulty_samples']
    if not (isinstance(k, int) and 1 <= k < m):
        raise ValueError(f"difficulty_samples={k!r} with {m} candidates per problem in {cfg['pool_dir']}; fix: "
                         f"--difficulty_samples=<1..{m - 1}> (those measure difficulty, the others are scored)")
    ns = [n for n in cfg['ns'] if n <= m]
    pool = B.build_pool(problems, ns, cfg['n_subsets'], cfg['subset_seed'], answers_equal)
    paths = sorted(set(found['ckpts']))
    steering = {json.load(open(os.path.join(d, 'config.json'))).get('search_ckpt')
                for d in found['search_dirs']} - {None}
    for path in sorted(set(paths) | steering):
        tables.check_checkpoint(problems, cfg['pool_dir'], path)
    return problems, ns, pool, paths


def scorer(cfg, problems, dev):
    """Scores and vote temperatures, each checkpoint's computed once: -> (score(path) -> (its pool scores, its
    weighted-vote temperature chosen on train_dir's validation split), the dict score fills {abs path: that}, the
    validation split (problems, pool, N) as train.py splits it)."""
    vp = load_split(cfg['train_dir'],
                    files=split_problems(problem_files(cfg['train_dir']), cfg['val_frac'], cfg['val_seed'])[1])
    vn = min(8, min(len(p['candidates']) for p in vp))
    vpool = B.build_pool(vp, [vn], cfg['n_subsets'], cfg['subset_seed'], answers_equal)
    scored = {}

    def score(path):
        a = os.path.abspath(path)
        if a not in scored:
            model = load_checkpoint(path, dev)[0]
            sc = tables.cached_scores(model, path, problems, cfg['pool_dir'], os.path.join(cfg['out_dir'], 'scores'),
                                      1024, dev)[0]
            vs = tables.cached_scores(model, path, vp, cfg['train_dir'], os.path.join(cfg['out_dir'], 'scores'), 1024,
                                      dev)[0]
            scored[a] = sc, B.choose_temp(vs, vpool, vn, EVAL_DEFAULTS['vote_temps'],
                                          where=f'{path} on its validation split')
        return scored[a]
    return score, scored, (vp, vpool, vn)


def reference_curves(cfg, problems, pool, ns, paths, score, val):
    """The best-of-N curves every search row is compared with, at every N of the pool: plain HSRM's and its weighted
    vote's and the tokens (bon_curves), the best free selector's on validation (tables.free_rows: every free scorer,
    its weighted vote, the combo fitted on the training split, majority and DeepConf's votes; ties as their mean),
    majority vote's and oracle's. -> (curves, the best free selector's name)."""
    bon = bon_curves(problems, [score(p)[0] for p in paths], pool, ns, [score(p)[1] for p in paths])
    ecfg = {**EVAL_DEFAULTS, **{k: cfg[k] for k in cfg if k in EVAL_DEFAULTS}}
    frows, choice = tables.free_rows(problems, pool, ns, ns[-1], val, ecfg,
                                     tables.fit_combo(cfg['train_dir'], cfg['val_frac'], cfg['val_seed']))
    best = ' / '.join(choice['free_best_val'])
    bon[f'free:{best}'] = next(r for r in frows if r['type'] == 'free_best_val')['per_problem']['acc_at']
    bon['majority'] = {n: np.array([[B.vote_sub(q['groups'], q['labels'], q['subsets'][n]) for q in pool]]) for n in ns}
    bon['oracle'] = {n: np.array([[B.oracle_sub(q['labels'], q['subsets'][n]) for q in pool]]) for n in ns}
    return bon, best


def difficulty_split(cfg, problems, ns):
    """Difficulty from an independent draw: difficulty_samples candidates per problem (drawn by subset_seed) measure
    its solve rate, the rest are scored by bucket. -> {'draw': each problem's permutation (its first k measure),
    'rest': the candidates scored, 'problems' / 'ns' / 'pool': the problems of those alone, the Ns they allow, their
    N-subsets, 'buckets': {name: bool per problem}}."""
    k, m = cfg['difficulty_samples'], min(len(p['candidates']) for p in problems)
    rng = np.random.default_rng(cfg['subset_seed'])
    draw = [rng.permutation(len(p['candidates'])) for p in problems]
    rate = np.array([np.mean([p['candidates'][i]['correct'] for i in d[:k]]) for p, d in zip(problems, draw)])
    rest = [np.sort(d[k:]) for d in draw]
    rprobs = [{**p, 'candidates': [p['candidates'][i] for i in r]} for p, r in zip(problems, rest)]
    rns = [n for n in ns if n <= m - k]
    rpool = B.build_pool(rprobs, rns, cfg['n_subsets'], cfg['subset_seed'], answers_equal)
    lo, hi = cfg['difficulty']
    buckets = {f'hard (solve rate < {lo})': rate < lo, f'medium ({lo}-{hi})': (rate >= lo) & (rate < hi),
               f'easy (>= {hi})': rate >= hi}
    return {'draw': draw, 'rest': rest, 'problems': rprobs, 'ns': rns, 'pool': rpool, 'buckets': buckets}


def search_groups(cfg):
    """The labelled search runs of search_dirs by (search, width, N, steering run name): [(steering checkpoint, split
    dir)], one per seed."""
    groups = {}
    for d in sorted({d for g in cfg['search_dirs'] for d in glob.glob(g)}):
        c = json.load(open(os.path.join(d, 'config.json')))
        if not c.get('search') or not os.path.exists(os.path.join(d, 'labels.json')):
            continue
        name = tables.run_group(c['search_ckpt'])
        groups.setdefault((c['search'], c['search_width'], c['n_samples'], name), []).append(
            (os.path.abspath(c['search_ckpt']), d))
    return groups


def search_numbers(acc, vote, tok, same, bon, best, ns, cfg, paired):
    """A search row's numbers: its accuracy, weighted vote and tokens with their intervals, and its Δ at equal tokens
    (vs_bon) against best-of-N picked by the checkpoints that steered it (same: their bon_curves), by plain HSRM and by
    the best free selector on validation (bon, best: reference_curves'), and against their Bo16. paired: (the
    steering checkpoints are one per run, they are plain HSRM's)."""
    nb, bs = cfg['n_boot'], cfg['boot_seed']
    idx = B.boot_draws(acc.shape[1], nb, bs)
    ba, bv = B.boot_means(acc, idx, bs), B.boot_means(vote, idx, bs)
    row = {'tokens': float(tok.mean()), 'acc': float(acc.mean()), 'acc_ci': B.ci(ba), 'vote': float(vote.mean()),
           'vote_ci': B.ci(bv), 'per_problem': {'acc': acc, 'vote': vote, 'tokens': tok}}
    row['bon_at_tokens'], row['delta_equal_tokens'], row['delta_equal_tokens_ci'] = vs_bon(
        acc, tok, same['hsrm'], bon['tokens'], ns, nb, bs, paired=paired[0])
    for ref, curve in (('plain', bon['hsrm']), ('free', bon[f'free:{best}'])):
        row[f'{ref}_at_tokens'], row[f'delta_{ref}'], row[f'delta_{ref}_ci'] = vs_bon(
            acc, tok, curve, bon['tokens'], ns, nb, bs, paired=ref == 'plain' and paired[1])
    if 16 in ns:
        b16 = B.boot_means(same['hsrm'][16], idx, bs if paired[0] else bs + 1)
        row['delta_bo16'], row['delta_bo16_ci'] = row['acc'] - same['hsrm'][16].mean(), B.ci(ba - b16)
    return row


def difficulty_numbers(acc, tok, rsame, diff, cfg, paired):
    """A search row by difficulty bucket (difficulty_split's): its accuracy there and its Δ at equal tokens against
    best-of-N of the steering checkpoints on the candidates that did not measure difficulty (rsame: their bon_curves
    there). paired: the steering checkpoints are one per run."""
    out = {}
    for bname, sel in diff['buckets'].items():
        if sel.any():
            at, dl, dci = vs_bon(acc[:, sel], tok[:, sel], {k_: v[:, sel] for k_, v in rsame['hsrm'].items()},
                                 {k_: v[sel] for k_, v in rsame['tokens'].items()}, diff['ns'], cfg['n_boot'],
                                 cfg['boot_seed'], paired=paired)
            out[bname] = {'n_problems': int(sel.sum()), 'acc': float(acc[:, sel].mean()), 'bon_at_tokens': at,
                          'delta': dl, 'delta_ci': dci}
    return out


def run(cfg):
    """The search study: a row per search setting and steering run (its seeds), each against best-of-N at equal
    generated tokens; writes {out_dir}/config.json, steer.json, steer.md and steer.png. -> the result dict."""
    cfg = {**DEFAULTS, **cfg}
    found, dev = check_study(cfg)
    problems, ns, pool, paths = study_pool(cfg, found)
    keys, plain = [p['key'] for p in problems], [os.path.abspath(p) for p in paths]
    score, scored, val = scorer(cfg, problems, dev)
    bon, best = reference_curves(cfg, problems, pool, ns, paths, score, val)
    diff = difficulty_split(cfg, problems, ns)
    rows = []
    for (how, width, n, name), runs in sorted(search_groups(cfg).items()):
        dirs = [d for _, d in sorted(runs)]  # in the order of their steering checkpoints
        acc, vote, tok, steer_ckpts = search_point(dirs, keys, dev, lambda p: score(p)[1])
        own = sorted(os.path.abspath(p) for p in steer_ckpts)  # best-of-N picked by the checkpoints that steered
        same = bon_curves(problems, [score(p)[0] for p in own], pool, ns, [score(p)[1] for p in own])
        if own != plain:
            bon[f'hsrm:{name}'], bon[f'hsrm_vote:{name}'] = same['hsrm'], same['hsrm_vote']
        row = {'method': f'{how} N={n} M={width} ({name}, {len(dirs)} seeds)', 'search': how, 'n': n, 'width': width,
               'ckpt_group': name, 'dirs': dirs, 'steer_ckpts': steer_ckpts,
               **search_numbers(acc, vote, tok, same, bon, best, ns, cfg, (len(own) == len(dirs), own == plain))}
        rsame = bon_curves(diff['problems'], [[s[r] for s, r in zip(score(p)[0], diff['rest'])] for p in own],
                           diff['pool'], diff['ns'], [score(p)[1] for p in own])
        row['by_difficulty'] = difficulty_numbers(acc, tok, rsame, diff, cfg, len(own) == len(dirs))
        rows.append(row)
    idx = B.boot_draws(len(problems), cfg['n_boot'], cfg['boot_seed'])
    curves = {k: {'acc': [float(bon[k][n].mean()) for n in ns],
                  'acc_ci': [B.ci(B.boot_means(bon[k][n], idx, cfg['boot_seed'])) for n in ns]}
              for k in bon if k != 'tokens'}
    k = cfg['difficulty_samples']
    res = {'config': cfg, 'pool_dir': cfg['pool_dir'], 'n_problems': len(problems), 'ns': ns, 'best_free_val': best,
           'tokens': [float(bon['tokens'][n].mean()) for n in ns], 'curves': curves, 'rows': rows,
           'temps': {p: t for p, (_, t) in scored.items()}, 'difficulty_ns': diff['ns'],
           'difficulty_draw': {q: d[:k].tolist() for q, d in zip(keys, diff['draw'])},
           'buckets': {b: int(v.sum()) for b, v in diff['buckets'].items()}}
    md = render(res)
    os.makedirs(cfg['out_dir'], exist_ok=True)
    atomic_write_json(cfg, os.path.join(cfg['out_dir'], 'config.json'))
    atomic_write_json(tables.for_json(res), os.path.join(cfg['out_dir'], 'steer.json'))
    with open(os.path.join(cfg['out_dir'], 'steer.md'), 'w') as f:
        f.write(md + plot(res, os.path.join(cfg['out_dir'], 'steer.png')))
    print(md)
    return res


def curve_name(k):
    """A curve's row name: 'hsrm', 'hsrm_vote:<run name>', 'free:<selector>', ..."""
    base, _, group = k.partition(':')
    if base == 'free':
        return f'Best free on validation ({group})'
    name = {'hsrm': 'HSRM', 'hsrm_vote': 'HSRM weighted vote', 'majority': 'Majority vote',
            'oracle': 'Oracle pass@N'}[base]
    return f'{name} ({group})' if group else name


def render(res):
    ns, pct = res['ns'], lambda x: f'{100 * x:.1f}'  # noqa: E731
    out = [f"## Search vs best-of-N at equal generated tokens ({res['n_problems']} problems of {res['pool_dir']})", '',
           '| Best-of-N (pool) | ' + ' | '.join(f'N={n}' for n in ns) + ' |', '|---|' + '---:|' * len(ns),
           '| mean tokens per problem | ' + ' | '.join(f'{t:.0f}' for t in res['tokens']) + ' |']
    for k, c in res['curves'].items():
        out.append(f'| {curve_name(k)} | ' + ' | '.join(tables.fmt_ci(a, i, True)
                                                        for a, i in zip(c['acc'], c['acc_ci'])) + ' |')
    d = lambda r, k: tables.fmt_ci(r[k], r[k + '_ci'], True, diff=True) if k in r else '–'  # noqa: E731
    out += ['', '| Search (steering checkpoint) | Tokens / problem | HSRM pick (%) [95% CI] '
                '| Weighted vote (%) [95% CI] | Same checkpoints\' Bo-N at equal tokens | Δ vs it (pts) '
                '| Δ vs plain HSRM Bo-N (pts) | Δ vs best free on val (pts) | Δ vs same checkpoints\' Bo16 (pts) |',
            '|---|---:|---:|---:|---:|---:|---:|---:|---:|']
    for r in res['rows']:
        out.append(f"| {r['method']} | {r['tokens']:.0f} | {tables.fmt_ci(r['acc'], r['acc_ci'], True)} | "
                   f"{tables.fmt_ci(r['vote'], r['vote_ci'], True)} | {pct(r['bon_at_tokens'])} | "
                   f"{d(r, 'delta_equal_tokens')} | {d(r, 'delta_plain')} | {d(r, 'delta_free')} | "
                   f"{d(r, 'delta_bo16')} |")
    bnames = list(res['buckets'])
    out += ['', '| By difficulty: Δ vs the same checkpoints\' Bo-N at equal tokens (pts) [95% CI] '
                '(search vs Bo-N, %) | ' + ' | '.join(f'{b} ({res["buckets"][b]})' for b in bnames) + ' |',
            '|---|' + '---:|' * len(bnames)]
    for r in res['rows']:
        cells = [r['by_difficulty'].get(b) for b in bnames]
        out.append(f"| {r['method']} | " + ' | '.join(
            f"{tables.fmt_ci(c['delta'], c['delta_ci'], True, diff=True)} ({pct(c['acc'])} vs "
            f"{pct(c['bon_at_tokens'])})"
            if c else '–' for c in cells) + ' |')
    out += ['', 'Best-of-N averages random N-subsets of the pool; tokens are the mean generated per problem (a search '
            "run's generated_tokens: every token the generator ran, abandoned branches included). Search rows average "
            'the runs (seeds) steered by checkpoints of one run name; each run is scored by its own steering '
            'checkpoint '
            "and compared with best-of-N picked by those same checkpoints (HSRM (<run name>) above where they are not "
            "ckpts), plain HSRM's and the best free selector's on validation (every free scorer, its weighted vote, "
            "majority and DeepConf's votes; ties as their mean), interpolated in log tokens at the search's tokens. "
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
        ax.errorbar(res['tokens'], 100 * acc, yerr=plots.yerr(list(acc), ci_),
                    marker='o', ms=3, capsize=2, label=curve_name(k))
    for r in res['rows']:
        ax.errorbar([r['tokens']], [100 * r['acc']], yerr=plots.yerr([r['acc']], [r['acc_ci']]),
                    marker='s' if r['search'] == 'beam' else '^', ms=6, capsize=2, ls='none', label=r['method'])
    ax.set_xscale('log')
    ax.set_xlabel('generated tokens per problem')
    ax.set_ylabel('accuracy (%)')
    ax.legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(path, dpi=130)
    plt.close(fig)
    return f'\n![accuracy vs tokens]({os.path.basename(path)})\n'



# =============================================================================
# the pruning study (prune=True): the steering policy without branching (policy.prune_now), simulated offline
# and exactly on a finished run's pools (policy.replay_prune, replay_deepconf): a stopped row is never selected,
# does not vote, and costs the tokens up to its cut. Every method is scored on the same pools (the first
# prune_subsets N-subsets).


def kept_metrics(kept, sel, labels, groups, weights, temp):
    """(best-of-N, vote) among the kept rows of one pool: argmax of sel; vote with softmax(weights /
    temp) (temp None: the weights themselves). No kept row = no answer = 0."""
    if not kept.any():
        return 0.0, 0.0
    sub = np.flatnonzero(kept)[None, :]
    return B.best_of_n_sub(sel, labels, sub), B.vote_sub(groups, labels, sub, weights, temp)


def prune_curve(sims, thresholds, pid=None):
    """sims(threshold) -> per pool (tokens, full tokens, bon, vote): the curve over thresholds, each
    point {'threshold', 'acc', 'vote', 'tokens' (fraction of no pruning)}; with pid (each pool's problem,
    pool_problems), also the per-problem best-of-N and vote [P] under 'per_problem', for the intervals."""
    out = []
    for th in thresholds:
        r = np.array(sims(th), dtype=np.float64)  # [pools, 4]: tokens, full, bon, vote
        out.append({'threshold': float(th), 'tokens': float(r[:, 0].sum() / max(r[:, 1].sum(), 1)),
                    'acc': float(r[:, 2].mean()), 'vote': float(r[:, 3].mean())})
        if pid is not None:
            cnt = np.bincount(pid)
            out[-1]['per_problem'] = {'acc': np.bincount(pid, r[:, 2]) / cnt, 'vote': np.bincount(pid, r[:, 3]) / cnt}
    return out


def pool_problems(pool, n, k):
    """The problem of each simulated pool, in pool_sims' order (its first k N-subsets)."""
    return np.array([i for i, q in enumerate(pool) for _ in q['subsets'][n][:k]])


def pool_sims(problems, pool, n, k, replay, sel, temp):
    """sims(x) -> per simulated pool (tokens, tokens without pruning, best-of-N, vote), over the first k
    N-subsets of each problem. replay(i, sub, x) -> (kept, tokens) of problem i's rows sub; the kept
    rows are selected by sel[i] and vote with softmax(sel[i] / temp) (temp None: sel[i] as weights)."""
    pools = [(i, sub) for i, q in enumerate(pool) for sub in q['subsets'][n][:k]]

    def sims(x):
        res = []
        for i, sub in pools:
            q = pool[i]
            kept, tok = replay(i, sub, x)
            mask = np.zeros(len(q['labels']), dtype=bool)
            mask[sub[kept]] = True
            full = sum(len(problems[i]['candidates'][j]['token_ids']) for j in sub)
            res.append((tok.sum(), full, *kept_metrics(mask, sel[i], q['labels'], q['groups'], sel[i], temp)))
        return res
    return sims


def verifier_sims(problems, pool, n, k, prefix, rule, temp):
    """sims(threshold) for a verifier rule on a split (prefix: score_prefixes output). Selection and
    the vote use each kept row's full score (its last prefix score)."""
    final = [np.array([x[-1] if len(x) else -np.inf for x in pp]) for pp in prefix]

    def replay(i, sub, th):
        cs = problems[i]['candidates']
        return replay_prune([prefix[i][j] for j in sub], [cs[j]['step_pos'].tolist() for j in sub],
                            [len(cs[j]['token_ids']) for j in sub], th, rule)
    return pool_sims(problems, pool, n, k, replay, final, temp)


def lowest_groups(problems, window):
    """Per problem: each candidate's group confidences (sliding-window means) and its lowest one (-inf if empty)."""
    gc = [[group_confidences(c['confidences'].float().numpy(), window) for c in p['candidates']] for p in problems]
    return gc, [np.array([g.min() if g.size else -np.inf for g in gg]) for gg in gc]


def deepconf_sims(problems, pool, n, k, cfg, warmup):
    """sims(x) for DeepConf online on a split: warmup > 0 = their protocol, x = eta (threshold set
    per pool from its warm-up rows); warmup = 0, x = a global threshold. Selection and vote use the
    lowest group confidence (their vote weight)."""
    w = cfg['deepconf_window']
    gc, lows = lowest_groups(problems, w)

    def replay(i, sub, x):
        th = x
        if warmup:
            warm = lows[i][sub[:warmup]]
            warm = warm[np.isfinite(warm)]
            th = float(np.percentile(warm, 100 * (1 - x))) if warm.size else -np.inf
        return replay_deepconf([gc[i][j] for j in sub], lows[i][sub],
                               [len(problems[i]['candidates'][j]['token_ids']) for j in sub], w, th, warmup)
    return pool_sims(problems, pool, n, k, replay, lows, None)


def choose_threshold(curve, tol):
    """The point with the fewest tokens whose accuracy is at most tol below the curve's no-pruning
    point (its first: thresholds are ordered from no pruning to the most)."""
    ok = [c for c in curve if c['acc'] >= curve[0]['acc'] - tol - 1e-12]
    return min(ok, key=lambda c: c['tokens'])['threshold']


def threshold_grid(values, rule, size):
    """No pruning first, then quantiles of the validation values (global: prefix scores; relative:
    margins behind the pool's best final score), most lenient first."""
    qs = np.quantile(values, np.linspace(0, 1, size))
    if rule in ('global', 'deepconf'):
        return [-np.inf] + sorted(qs.tolist())
    return [np.inf] + sorted(qs.tolist(), reverse=True)


def margins(prefix):
    """Validation margins for the relative rule's grid: best full score of the pool minus each prefix score."""
    out = []
    for pp in prefix:
        best = max((x[-1] for x in pp if len(x)), default=0.0)
        out += [best - v for x in pp for v in x]
    return np.maximum(np.array(out), 0.0)


def at_tolerance(curve, tol):
    """Fewest tokens on a (test) curve with accuracy at most tol below its no-pruning point: optimistic."""
    return min(c['tokens'] for c in curve if c['acc'] >= curve[0]['acc'] - tol - 1e-12)


def prefix_auroc(prefix, pool, max_steps=8):
    """Mean within-problem AUROC of the score after step k = 1..max_steps (fewer steps: the full score)."""
    out = []
    for k in range(max_steps):
        sc = [np.array([x[min(k, len(x) - 1)] if len(x) else -np.inf for x in pp]) for pp in prefix]
        out.append(B.mean_auroc(sc, pool)[0])
    return out


def mean_curve(curves):
    """Seed-averaged curve (the runs of one group share the grid only if they share validation scores,
    so points are averaged by position: no pruning first, then grid quantile order)."""
    return [{key: float(np.mean([c[i][key] for c in curves]))
             for key in ('tokens', 'acc', 'vote')} | {'threshold': None}
            for i in range(min(len(c) for c in curves))]



def prune_row(method, runs, **extra):
    """A table row: mean ± std over its runs (seeds) of each entry, and their per-problem values stacked."""
    r = {'method': method, 'n_runs': len(runs), 'runs': runs, **extra}
    for key in ('acc', 'vote', 'tokens', 'delta', 'tokens_tol_test'):
        r[key], r[key + '_std'] = tables.mean_std([x.get(key) for x in runs])
    r['per_problem'] = {key: np.stack([x['per_problem'][key] for x in runs]) for key in ('acc', 'vote', 'delta')}
    return r


def prune_point(pt, base, **extra):
    """A run's entry at curve point pt, with its difference from the same scorer's no-pruning point base."""
    return {**pt, 'delta': pt['acc'] - base['acc'], **extra,
            'per_problem': {**pt['per_problem'], 'delta': pt['per_problem']['acc'] - base['per_problem']['acc']}}


def verifier_prune(paths, problems, pool, val_split, calib, n, cfg, dirs, dev, out):
    """Each run name's no-pruning row and one row per verifier rule, the threshold chosen per checkpoint on
    validation (or calib, the calibration split), mean ± std over its seeds; appended to out."""
    eval_dir, train_dir, cache_dir = dirs
    k, tol, calib_dir = cfg['prune_subsets'], cfg['prune_tolerance'], cfg['calib_dir'] or train_dir
    pid = pool_problems(pool, n, k)
    groups = {}
    for path in paths:
        groups.setdefault(tables.run_group(path), []).append(path)
    names = tables.row_names(groups)
    for g, gpaths in sorted(groups.items()):
        runs = {r: [] for r in ['none'] + cfg['prune_rules']}
        for path in gpaths:
            model, ck = load_checkpoint(path, dev)
            if not reads(model.kind, 'states'):
                out['notes'].append(f'{g}: not pruned (reads no hidden states)')
                break
            if reads(model.kind, 'tokens') and model.spec['tokenizer']:
                out['notes'].append(f"{g}: not pruned (its text prefixes are not stored for text_tokenizer="
                                    f"{model.spec['tokenizer']!r})")
                break
            tc = ck.get('train_config') or {}
            val = calib or val_split(tc.get('val_frac', cfg['val_frac']), tc.get('val_seed', cfg['val_seed']),
                                     tc.get('max_train_problems'))
            if val is None:
                out['notes'].append(f'{g}: not pruned (no labelled {train_dir}: thresholds are chosen on its '
                                    'validation split)')
                break
            vp, vpool, vn = val
            pre = tables.cached_scores(model, path, problems, eval_dir, cache_dir, cfg['eval_batch_size'], dev,
                                       prefixes=True)[0]
            vpre = tables.cached_scores(model, path, vp, calib_dir, cache_dir, cfg['eval_batch_size'], dev,
                                        prefixes=True)[0]
            vfinal = [np.array([x[-1] if len(x) else -np.inf for x in pp]) for pp in vpre]
            temp = B.choose_temp(vfinal, vpool, vn, cfg['vote_temps'], where=f'{path} on {calib_dir}')
            base = prune_curve(verifier_sims(problems, pool, n, k, pre, 'global', temp), [-np.inf], pid)[0]
            runs['none'].append(prune_point(base, base, ckpt=path, tokens=1.0, prefix_auroc=prefix_auroc(pre, pool)))
            for rule in cfg['prune_rules']:
                vals = np.concatenate([x for pp in vpre for x in pp]) if rule == 'global' else margins(vpre)
                grid = threshold_grid(vals, rule, cfg['prune_grid'])
                vcurve = prune_curve(verifier_sims(vp, vpool, vn, k, vpre, rule, temp), grid)
                th = choose_threshold(vcurve, tol)
                curve = prune_curve(verifier_sims(problems, pool, n, k, pre, rule, temp), grid, pid)
                pt = next(c for c in curve if c['threshold'] == th)
                runs[rule].append(prune_point(pt, base, ckpt=path, tokens_tol_test=at_tolerance(curve, tol),
                                              val_curve=vcurve, curve=curve))
        label = names[g]
        if runs['none']:
            au = [tables.mean_std(a) for a in zip(*[r['prefix_auroc'] for r in runs['none']])]
            out['notes'].append(f'{label}: within-problem AUROC of the prefix score after step 1, 2, ... (a candidate '
                                f'with fewer steps counts with its full score): '
                                + ', '.join(f'{m:.3f}' for m, _ in au))
        for rule, rs in runs.items():
            if rs:
                name = f'{label}, no pruning' if rule == 'none' else f'{label}, {rule} rule'
                out['rows'].append(prune_row(name, rs, group=g, rule=rule))
                if rule != 'none':
                    out['curves'][name] = rs[0]['curve'] if len(rs) == 1 else mean_curve([r['curve'] for r in rs])


def deepconf_prune(problems, pool, val_split, calib, n, cfg, out):
    """DeepConf online against its no-pruning row: -low / -high with their warm-up, and one global threshold
    chosen on validation (or calib); appended to out."""
    k, tol, w, wu = cfg['prune_subsets'], cfg['prune_tolerance'], cfg['deepconf_window'], cfg['deepconf_warmup']
    pid = pool_problems(pool, n, k)
    if not has_confidences(problems):
        out['notes'].append("DeepConf rows left out: the candidates have no 'confidences'; fix: re-extract with the "
                            "current extract.py")
        return
    base = prune_curve(deepconf_sims(problems, pool, n, k, cfg, 0), [-np.inf], pid)[0]
    out['rows'].append(prune_row(f'DeepConf (lowest group, window {w}), no pruning', [prune_point(base, base)],
                                 rule='none'))
    online = deepconf_sims(problems, pool, n, k, cfg, wu)
    etas = sorted({*np.linspace(0.1, 1.0, 10).round(2).tolist(), *cfg['deepconf_etas']}, reverse=True)
    curve = [{**base, 'threshold': None}] + prune_curve(online, etas, pid)  # no pruning first, then eta lenient to
                                                                            # strict
    for eta in cfg['deepconf_etas']:
        pt = next(c for c in curve if c['threshold'] == eta)
        name = {0.1: 'DeepConf-low', 0.9: 'DeepConf-high'}.get(eta, f'DeepConf online eta {eta:g}')
        out['rows'].append(prune_row(f'{name} (eta {eta:g}, warm-up {wu})',
                                     [prune_point(pt, base, tokens_tol_test=at_tolerance(curve, tol))],
                                     rule='deepconf_online', threshold=eta))
    out['curves'][f'DeepConf online (warm-up {wu}, eta swept)'] = curve
    val = calib or val_split(cfg['val_frac'], cfg['val_seed'])
    if val is not None and has_confidences(val[0]):
        vp, vpool, vn = val
        vsims = deepconf_sims(vp, vpool, vn, k, cfg, 0)
        lows = np.concatenate(lowest_groups(vp, w)[1])
        grid = threshold_grid(lows[np.isfinite(lows)], 'deepconf', cfg['prune_grid'])
        th = choose_threshold(prune_curve(vsims, grid), tol)
        curve = prune_curve(deepconf_sims(problems, pool, n, k, cfg, 0), grid, pid)
        pt = next(c for c in curve if c['threshold'] == th)
        where = 'the calibration split' if calib else 'validation'
        out['rows'].append(prune_row(f'DeepConf, global threshold chosen on {where}',
                                     [prune_point(pt, base, tokens_tol_test=at_tolerance(curve, tol))],
                                     rule='deepconf_global', threshold=th))
        out['curves']['DeepConf, global threshold swept'] = curve


def prune_section(paths, problems, pool, val_split, n, cfg, dirs, dev):
    """Simulated online pruning: each verifier rule (threshold chosen on validation per checkpoint;
    rows = mean ± std over a run's seeds) and DeepConf online (-low / -high with warm-up, and a global
    threshold chosen on validation), against no pruning, on the same pools. Returns {'rows', 'curves', 'notes',
    'refs'}."""
    k, calib_dir, calib, out = cfg['prune_subsets'], cfg['calib_dir'], None, {'rows': [], 'curves': {}, 'notes': []}
    if calib_dir:  # a separate calibration split: thresholds see neither the test split nor the checkpoint choice
        if not os.path.exists(os.path.join(calib_dir, 'labels.json')):
            raise ValueError(f"calib_dir={calib_dir!r} holds no labels.json; fix: extract and label that split first "
                             "(python extract.py <config> --out_dir=<x> --train_range=None --eval_range=<fresh "
                             f"problems>; python label.py <config> --out_dir=<x>) or leave calib_dir=''")
        calib = tables.choice_split(calib_dir, n, cfg)
    bad = [r for r in cfg['prune_rules'] if r not in PRUNE_RULES]
    if bad:
        raise ValueError(f"prune_rules={cfg['prune_rules']!r}: {bad} unknown; fix: "
                         f"--prune_rules=\"{list(PRUNE_RULES)}\"")
    wu = cfg['deepconf_warmup']
    if not 0 < wu < n:
        raise ValueError(f"deepconf_warmup={wu} must be in [1, n_eval={n}) (warm-up rows run in full and set the "
                         f"threshold); fix: --deepconf_warmup=2")
    subs = [q['subsets'][n][:k] for q in pool]
    maj = np.array([B.vote_sub(q['groups'], q['labels'], s) for q, s in zip(pool, subs)])
    orc = np.array([B.oracle_sub(q['labels'], s) for q, s in zip(pool, subs)])
    out['refs'] = [{'method': name, 'type': t, 'acc': float(v.mean()), 'per_problem': {'acc': v}}  # on the same pools
                   for name, t, v in (('Majority vote', 'vote', maj), (f'Oracle pass@{n}', 'oracle', orc))]
    verifier_prune(paths, problems, pool, val_split, calib, n, cfg, dirs, dev, out)
    deepconf_prune(problems, pool, val_split, calib, n, cfg, out)
    return out


def prune_run(cfg):
    """The pruning study on a finished run, read as evaluate.py reads it (cfg: evaluate.py's keys and the
    pruning knobs above): writes {out_dir}/prune[_on_<run>].json, .md and .png. Returns the study
    ({'rows', 'refs', 'curves', 'notes'} and the split it ran on)."""
    cfg = {**PRUNE_DEFAULTS, **cfg}
    out_dir, n = cfg['out_dir'], cfg['n_eval']
    eval_dir, train_dir, suffix = tables.run_dirs(cfg)
    check_writable('out_dir', out_dir, os.path.join(out_dir, 'scores'))  # before any work
    dev = resolve_device(cfg['device'])
    if cfg['threads']:
        torch.set_num_threads(cfg['threads'])
    problems = load_split(eval_dir)
    paths, left_out = tables.checkpoint_paths(cfg)  # finished runs
    for path in paths:  # before any work: no checkpoint scores its own training groups, other states or stale
        tables.check_checkpoint(problems, eval_dir, path)
    pool = B.build_pool(problems, [n], cfg['n_subsets'], cfg['subset_seed'], answers_equal)  # evaluate.py's subsets
    if any(q['stopped'].any() for q in pool):
        raise ValueError(f"{eval_dir} was sampled with online pruning (studies/policy.py prune_ckpt): a replay would "
                         f"prune it twice; fix: run the study on a split sampled without pruning")
    res = prune_section(paths, problems, pool, tables.val_splitter(train_dir, n, cfg), n, cfg,
                        (eval_dir, train_dir, os.path.join(out_dir, 'scores')), dev)
    idx = B.boot_draws(len(pool), cfg['n_boot'], cfg['boot_seed'])  # the draws of evaluate.py's table
    for r in res['rows'] + res['refs']:
        r |= {f'{key}_ci': B.ci(B.boot_means(v, idx, cfg['boot_seed'])) for key, v in r['per_problem'].items()}
    res['notes'][:0] = [
        f"Pools: the first {cfg['prune_subsets']} best-of-{n} subsets of each problem, rows sampled together from "
        "token 0 (as extract.py does). A stopped candidate is never selected, does not vote, and costs the tokens up "
        "to its cut. Verifier rules (policy.prune_now) act at step boundaries on the prefix score (score_prefixes), a "
        f"stop after step k costing step_pos[k] + 1 tokens; never all rows of a pool. Selection and vote use the kept "
        f"rows' full scores (vote temperature chosen on validation). Thresholds: chosen per checkpoint on "
        + (f"the calibration split {cfg['calib_dir']}" if cfg['calib_dir'] else f"the validation split of {train_dir}")
        + f" (grid of {cfg['prune_grid']} quantiles of its prefix scores): the fewest tokens with its best-of-N at "
        f"most {100 * cfg['prune_tolerance']:g} pt below no pruning.",
        f"DeepConf online (their protocol): the first {cfg['deepconf_warmup']} rows of each pool run in full and set "
        f"the threshold (percentile 100(1 - eta) of their lowest group confidences; eta 0.1 = DeepConf-low, 0.9 = "
        f"-high); another row stops at the first full {cfg['deepconf_window']}-token window whose mean confidence is "
        f"below it (t + 1 tokens); rows whose lowest group confidence is below it do not vote (warm-up rows too); "
        f"vote and selection by lowest group confidence. The global-threshold variant uses one threshold for every "
        f"pool, chosen where the verifier rules' thresholds are.",
        "On the same pools: " + ', '.join(f"{r['method']} {tables.fmt_ci(r['acc'], r['acc_ci'], True)}"
                                          for r in res['refs'])
        + ". [95% CI] and Δ (against the same checkpoint's no-pruning row, paired by problem and seed) as in the main "
        "table; **bold** where the interval of Δ excludes 0."] + left_out
    res |= {'config': cfg, 'eval_dir': eval_dir, 'dataset': problems[0]['dataset'], 'n_problems': len(problems),
            'n_eval': n}
    prefix = os.path.join(out_dir, 'prune' + suffix)
    md = render_prune(res) + (plot_prune(res, prefix + '.png') if cfg['plots'] else '')
    atomic_write_json(tables.for_json(res), prefix + '.json')
    with open(prefix + '.md', 'w') as f:
        f.write(md)
    print(md)
    return res


def render_prune(res):
    n = res['n_eval']
    tol = 100 * res['config']['prune_tolerance']
    out = [f"### Online pruning (simulated on the evaluation pools, best-of-{n})", '',
           f"Evaluation split `{res['eval_dir']}` ({res['dataset']}): {res['n_problems']} problems.", '',
           f'| Method | Threshold | Bo{n} Acc. (%) [95% CI] | Δ Bo{n} vs no pruning (pts) | Vote Acc. (%) [95% CI] '
           f'| Tokens (% of no pruning) '
           f'| Tokens at ≤{tol:g} pt loss, test sweep (optimistic, %) |', '|---|---:|---:|---:|---:|---:|---:|']
    for r in res['rows']:
        th = [x['threshold'] for x in r['runs'] if x.get('threshold') is not None and r['rule'] != 'none']
        ths = ('per pool (warm-up)' if r['rule'] == 'deepconf_online' else '–' if not th else
               f'{th[0]:.3g}' if len(th) == 1 else f'{np.mean(th):.3g} (mean of {len(th)})')
        seeds = f" ({r['n_runs']} seeds)" if r['n_runs'] > 1 else ''
        d = '–' if r['rule'] == 'none' else tables.fmt_ci(r['delta'], r.get('delta_ci'), True, diff=True)
        out.append(f"| {r['method']}{seeds} | {ths} | {tables.fmt_ci(r['acc'], r.get('acc_ci'), True)} | {d} | "
                   f"{tables.fmt_ci(r['vote'], r.get('vote_ci'), True)} | "
                   f"{tables.fmt(r['tokens'], r['tokens_std'], True)} | "
                   f"{tables.fmt(r.get('tokens_tol_test'), r.get('tokens_tol_test_std'), True)} |")
    out += [''] + [f'- {t}' for t in res['notes']]
    return '\n'.join(out) + '\n'


def plot_prune(res, path):
    """Accuracy against generated tokens for every swept threshold, the chosen points with their 95% intervals."""
    if not res['curves']:
        return ''
    try:
        import matplotlib
        matplotlib.use('Agg')
        import matplotlib.pyplot as plt
    except ImportError:
        return '\n(no plot: matplotlib is not installed)\n'
    n = res['n_eval']
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for ax, key, what in ((axes[0], 'acc', f'best-of-{n}'), (axes[1], 'vote', 'weighted vote')):
        for name, curve in res['curves'].items():
            ax.plot([100 * c['tokens'] for c in curve], [100 * c[key] for c in curve], marker='.', lw=1, label=name)
        for r in res['rows']:  # the operating points chosen on validation (and no pruning), with their intervals
            ax.errorbar([100 * r['tokens']], [100 * r[key]], yerr=plots.yerr([r[key]], [r.get(f'{key}_ci')]), fmt='x',
                        color='k', ms=4, elinewidth=0.8, capsize=2,
                        label='chosen threshold / no pruning, 95% CI' if r is res['rows'][0] else None)
        plots.reference_lines([ax], res['refs'])
        ax.set(xlabel='generated tokens (% of no pruning)', ylabel=f'{what} accuracy (%)',
               title=f"online pruning (simulated), {res['dataset']}")
    axes[1].legend(fontsize=7, loc='upper left', bbox_to_anchor=(1.02, 1.0))
    fig.savefig(path, dpi=150, bbox_inches='tight')  # tight: the outside legend stays in the frame
    plt.close(fig)
    return f'\n![pruning]({os.path.basename(path)})\n'


if __name__ == '__main__':
    _argv, _eval_cfg = split_argv(sys.argv[1:], DEFAULTS, EVAL_DEFAULTS)  # pruning reads the run with evaluate.py's
                                                                          # keys
    config = configure(globals(), _argv)  # config files, then --key=value, override the knobs above
    own = {k: v for k, v in config.items() if k not in EVAL_DEFAULTS}  # the pruning knobs; the run's keys are
                                                                       # evaluate.py's
    cli(lambda c: prune_run({**_eval_cfg, **own}) if c['prune'] else run(c), config, 'steer.py')
