"""
The data-need curve: how much training data does the verifier need before it beats the free scorers?
For each size K of `sizes` (train.py's max_train_problems: a nested draw of K problems of the train split, cut
80/20 into training and validation by val_frac), train every variant (train.py overrides; `epochs` so the steps
follow the data) over `seeds`, and score the same held-out eval split beside the free scorers: every row with a
paired bootstrap interval over problems and seeds (evaluate.py's draws, the same for every method of a size), its
Δ against the best free scorer chosen on that size's validation split, and for the residual form its Δ against
its own base scorer (what the hidden states add on top of it). A log-linear fit of each verifier's AUROC and
best-of-N against K says where a still-rising curve would cross the best free scorer. A variant may train on another
extraction of the same train split (its own `train_dirs`, e.g. 32 samples of fewer problems: config/samples_synth2.py);
it has a cell at each K that extraction holds, scored on the same eval split beside the others. Several train_dirs
pool extractions as train.py does: the cell at K reads K problems of each, each cut 80/20 alike (a second extraction
of more training problems doubles the data at K = 500: config/gsm8k_qwen05_k1000.py).

    python extract.py config/curve_synth2.py && python label.py config/curve_synth2.py
    python -m studies.curve config/curve_synth2.py
    python -m studies.curve config/curve_synth2.py --sizes="[80, 160]" --threads=1 &   # parts train in parallel
    python -m studies.curve config/curve_synth2.py --sizes="[320]" --threads=1          # (reused; the last reports)

Writes {out_dir}/curve.md, curve.json, curve.png, curve_config.json; runs in {out_dir}/curve/K<k>/<variant>/seed<s>/.
"""
import json
import os
import re

import numpy as np
from tqdm import tqdm

import bestofn as B
import evaluate
import tables
import train as T
from bestofn import cheap_score, combo_score
from configurator import check_keys, configure, knobs
from grading import answers_equal
from machine import check_positive, check_writable, cli, resolve_device, set_threads
from model import count_params
from store import (atomic_write_json, file_group, load_checkpoint, load_problem, load_split, problem_files,
                   split_problems)
from tasks import check_unseen, number_key

# -----------------------------------------------------------------------------
# knobs (options in the comments); config files and --key=value override them
out_dir = 'out/curve_synth2'  # an extraction run dir with labelled train/ and eval/ splits
sizes = [80, 160, 320, 640, 1225]  # K: training + validation problems drawn from the train split (nested draws)
variants = {'hsrm': {'verifier_layers': [-1]},  # name -> train.py overrides (verifier_layers None would read every
            'hsrm_top4': {'verifier_layers': [-1, -2, -3, -4]},  # stored layer); the rows of every size; a variant
            'residual': {'residual': 'auto', 'verifier_layers': [-1]}}  # with 'train_dirs': [dir] trains on that other
            # extraction of the same train split (e.g. 32 samples a problem) at each K it holds, on the same eval split;
            # 'train_dirs': [dir, dir2] pools them, K problems of each (train.py's max_train_problems);
            # 'sizes': [K, ...] gives a variant cells at those K only (a fixed-budget cell: config/samples_synth2.py)
seeds = [42, 123, 456]      # one verifier per seed, per variant and size
pairs = []                  # [(a, b), ...]: variant a - variant b at every size, paired over the same problems (e.g. a
                            # variant against its control); 'variant@K' on both sides: those two cells only (e.g. 240
                            # problems x 4 candidates against 120 x 8: ('hsrm_n4@240', 'hsrm@120')); [] = none
train_overrides = {'epochs': 20, 'eval_interval': 25}  # train.py knobs for every run
n_eval = 8                  # best-of-N on the eval split (pools larger than N: n_subsets random N-subsets)
n_subsets = 100
subset_seed = 0
n_boot = 2000               # paired bootstrap draws over the eval problems (and seeds)
boot_seed = 0
val_frac = 0.2              # as train.py: the validation part of each K chooses the best free scorer (best-of-N on it)
free_dirs: list[str] = None  # the split dirs whose K-cut the free side reads (its validation choices, the combo's fit):
                            # None = {out_dir}/train; several = pooled, K of each, as pooled variants read them (so the
                            # free side validates on what they validate on)
val_seed = 42
device = 'auto'             # 'auto' | 'cpu' | 'cuda'
threads = 0                 # CPU threads for torch; 0 = torch's default
answer_agreement = False    # True: answer agreement among the free scorers (evaluate.py's knob: its picks are
                            # majority vote's, its within-problem AUROC its own)
overwrite = False           # True: train again in place a finished run whose config or data differs (else refused:
                            # train.py's)
DEFAULTS = knobs(globals())  # the knobs above as a dict
EVAL_DEFAULTS = evaluate.DEFAULTS  # evaluate.py's knobs (vote temperatures, DeepConf windows)

# -----------------------------------------------------------------------------
# what a selector picks: the candidates it returns, described (why a verifier picks badly)


# per-candidate traits, each the mean over what a selector picks: correct, has an extracted answer, cut at
# max_new_tokens, generated tokens, steps, repetition (the share of non-empty lines repeating an earlier one), and
# an arithmetic slip (a written `a op b = c` with integers that is false: `6 * 6 = 32`)
TRAITS = ['correct', 'answered', 'truncated', 'tokens', 'steps', 'repeated', 'arith_slip']


_EQUATION = re.compile(r'(?<![\d.])(\d+(?:\s*[-+*/x×]\s*\d+)+)\s*=\s*(-?\d+)(?![\d.]\d)')


def arith_slip(text):
    """True when some integer equation written in text (`7 + 7 - 2 = 12`, `6 x 6 = 36`) is false."""
    for lhs, rhs in _EQUATION.findall(text):
        expr = re.sub(r'[x×]', '*', lhs)
        try:
            if abs(eval(expr, {'__builtins__': {}}) - int(rhs)) > 1e-9:  # digits and + - * / only: the regex allows
                                                                         # nothing else
                return True
        except ZeroDivisionError:
            return True
    return False


def candidate_traits(c):
    """[len(TRAITS)] floats of one candidate (as load_split returns it)."""
    text = c.get('text', '')
    lines = [ln.strip() for ln in text.split('\n') if ln.strip()]
    rep = (len(lines) - len(set(lines))) / len(lines) if lines else 0.0
    return np.array([float(c['correct']), float(c.get('answer') not in (None, '')), float(c.get('finish') == 'length'),
                     float(len(c['token_ids'])), float(len(c['step_pos'])), rep, float(arith_slip(text))])


def pick_traits(problems, pool, score_lists, n):
    """{trait: mean over problems and subsets of the best-of-n pick's trait (ties: the mean of the tied)} for one
    scorer; score_lists None: a uniformly random candidate (the base rate the picks depart from)."""
    out = []
    for i, (p, q) in enumerate(zip(problems, pool)):
        t = np.stack([candidate_traits(c) for c in p['candidates']])  # [m, F]
        sub = q['subsets'][n]
        if score_lists is None:
            top = np.ones(sub.shape, dtype=bool)
        else:
            s = np.where(q['stopped'], -np.inf, score_lists[i])[sub]
            top = B.top_mask(s) & ~q['stopped'][sub]
        w = top / np.maximum(top.sum(1, keepdims=True), 1)  # [k, n]
        out.append(np.einsum('kn,knf->f', w, t[sub]) / len(sub))
    return dict(zip(TRAITS, np.mean(out, 0).tolist()))


def traits_rows(problems, pool, named_scores, ns):
    """[{selector, n, trait: mean}] for each named scorer (None: a random candidate, once) at each n in ns."""
    return [{'selector': name, 'n': n, **pick_traits(problems, pool, sc, n)}
            for name, sc in named_scores.items() for n in (ns[-1:] if sc is None else ns)]


def traits_table(rows):
    """Markdown of traits_rows (a random candidate's row shows N = 1: it is the base rate at every N)."""
    head = ['| Selector | N | correct % | answered % | truncated % | tokens | steps | repeated lines % | arithmetic '
            'slip % |',
            '|---|---:|---:|---:|---:|---:|---:|---:|---:|']
    return '\n'.join(head + [f"| {r['selector']} | {1 if r['selector'] == 'random candidate' else r['n']} | "
                             f"{100 * r['correct']:.1f} | "
                              f"{100 * r['answered']:.1f} | {100 * r['truncated']:.1f} | {r['tokens']:.0f} | "
                              f"{r['steps']:.1f} | {100 * r['repeated']:.1f} | {100 * r['arith_slip']:.1f} |"
                             for r in rows])


# -----------------------------------------------------------------------------


def free_side_dirs(cfg):
    return cfg['free_dirs'] or [os.path.join(cfg['out_dir'], 'train')]


def read_report(path, key):
    """A finished run's curve.json (what studies.volume and studies.cuts read); a path with none is one line naming
    the knob (key) and the fix."""
    if not os.path.isfile(path):
        raise ValueError(f"{key} names {path!r}, which does not exist; fix: run its studies.curve command (its "
                         "config's header) first, or leave it out")
    with open(path) as f:
        return json.load(f)


def run_dir(cfg, k, variant):
    return os.path.join(cfg['out_dir'], 'curve', f'K{k}', variant)


def held(cfg):
    """{variant: problems in the train split it reads}: out_dir's, or its own train_dirs (another extraction of the
    same train split, e.g. more samples of fewer problems; several: pooled, counted by the smallest, as train.py takes
    K of each); a variant has a cell at each K it holds."""
    out = {}
    for v, over in cfg['variants'].items():
        dirs = over.get('train_dirs') or [os.path.join(cfg['out_dir'], 'train')]
        out[v] = min(len(problem_files(d)) if os.path.isdir(d) else 0 for d in dirs)  # pooled: K of each
        if not out[v] or out[v] < cfg['sizes'][0]:
            raise ValueError(f"variants[{v!r}] reads train_dirs={dirs!r}: {out[v]} problems"
                             f"{' in the smallest' if len(dirs) > 1 else ''}, fewer than the smallest K "
                             f"{cfg['sizes'][0]} (or not an extracted split dir); fix: labelled split dirs holding "
                             f"at least K problems each (python extract.py ... && python label.py ...), or smaller "
                             f"--sizes")
    return out


def variants_at(cfg, k):
    """The variants with a cell at size k (their train split holds k problems, and k is among their own 'sizes'
    where they name some), in cfg['variants'] order."""
    n_held = held(cfg)
    return [v for v, over in cfg['variants'].items() if n_held[v] >= k and k in over.get('sizes', [k])]


def train_keys(over):
    """A variant's train.py overrides: all but 'sizes' (curve.py's own)."""
    return {key: val for key, val in over.items() if key != 'sizes'}


def train_size(cfg, k):
    """Train (or skip, when finished with the same config: train.run's rule) every variant with a cell at size k."""
    for v in variants_at(cfg, k):
        over = train_keys(cfg['variants'][v])
        T.run({**T.DEFAULTS, **cfg['train_overrides'], **over, 'out_dir': cfg['out_dir'],
               'train_dirs': over.get('train_dirs'), 'run_dir': run_dir(cfg, k, v), 'seeds': list(cfg['seeds']),
               'max_train_problems': k, 'val_frac': cfg['val_frac'], 'val_seed': cfg['val_seed'],
               'device': cfg['device'], 'overwrite': cfg['overwrite']},
              keep_both=f"a new variant name in --variants (this one is {v!r})")


def own_validation(ck, path, cfg, memo):
    """A checkpoint's own validation problems ([(split dir, its problems)], their pool, n), cut as train.py cut them:
    its train dirs where they lie now, its val_frac, val_seed and K, its first n_candidates. Loaded once per cut
    (memo). What its weighted vote's temperature is chosen on, as evaluate.py chooses a verifier's."""
    tc = ck.get('train_config') or {}
    cut = tuple((d, tuple(split_problems(problem_files(d), tc.get('val_frac', cfg['val_frac']),
                                         tc.get('val_seed', cfg['val_seed']), tc.get('max_train_problems'))[1]))
                for d in T.train_dirs_now(tc, path)) + (tc.get('n_candidates'),)
    if cut not in memo:
        parts = [(d, T.first_candidates(load_split(d, files=list(files)), cut[-1])) for d, files in cut[:-1]]
        vp = [p for _, ps in parts for p in ps]
        vn = min(cfg['n_eval'], min(len(p['candidates']) for p in vp))
        memo[cut] = (parts, B.build_pool(vp, [vn], cfg['n_subsets'], cfg['subset_seed'], answers_equal), vn)
    return memo[cut]


def evaluate_size(cfg, k, problems, pool, dev):
    """Rows at size k: every free selector (tables.free_rows: votes, scorers, their weighted votes, the combo
    fitted on this k's training problems), the best on this k's validation split, each variant (its seeds), and
    each residual variant's own base scorer; intervals and Δ (tables.add_intervals, paired_vs)."""
    n, eval_dir, dirs = cfg['n_eval'], os.path.join(cfg['out_dir'], 'eval'), free_side_dirs(cfg)
    cuts = [split_problems(problem_files(d), cfg['val_frac'], cfg['val_seed'], k) for d in dirs]  # K of each
    tr_files, va_files = [f for tr, _ in cuts for f in tr], [f for _, va in cuts for f in va]
    vp = [p for d, (_, va) in zip(dirs, cuts) for p in load_split(d, files=va)]
    vn = min(n, min(len(p['candidates']) for p in vp))
    vpool = B.build_pool(vp, [vn], cfg['n_subsets'], cfg['subset_seed'], answers_equal)
    ecfg = {**EVAL_DEFAULTS, **{key: cfg[key] for key in cfg if key in EVAL_DEFAULTS}}  # vote temperatures, DeepConf
    combo = tables.fit_combo(dirs, cfg['val_frac'], cfg['val_seed'], k)
    rows, choice = tables.free_rows(problems, pool, [n], n, (vp, vpool, vn), ecfg, combo)
    free = tables.free_scores(problems, ecfg, combo)  # what the free side picks, beside the verifiers (picks:
                                                      # traits_table)
    picks = {'random candidate': None, **{f'free: {name}': free[name] for name in
                                          dict.fromkeys(['cumulative_logprob', *choice['free_best_val_auroc']])
                                          if name in free}}
    cache, bases, memo = os.path.join(cfg['out_dir'], 'curve', 'scores'), {}, {}
    for v in variants_at(cfg, k):
        runs, val, votes = [], [], []
        for s in cfg['seeds']:
            path = os.path.join(run_dir(cfg, k, v), f'seed{s}', 'ckpt.pt')
            with open(os.path.join(os.path.dirname(path), 'log.json')) as f:
                log = json.load(f)
            val.append(log['best_val'])  # the kept step's validation metrics: what chooses a variant
            tables.check_checkpoint(problems, eval_dir, path)  # a run trained before (or on other data) is checked too
            model, ck = load_checkpoint(path, dev)
            sc = tables.cached_scores(model, path, problems, eval_dir, cache, 1024, dev)[0]
            parts, vpool, vn = own_validation(ck, path, cfg, memo)  # its weighted vote: temperature chosen there
            vsc = [x for d, ps in parts for x in tables.cached_scores(model, path, ps, d, cache, 1024, dev)[0]]
            temp = B.choose_temp(vsc, vpool, vn, ecfg['vote_temps'], where=f'{path} on its validation problems')
            m = B.scored_metrics(sc, pool, [n], temp, vote=True, where=f'{path} on {eval_dir}', n=n)
            runs.append({'ckpt': path, 'seed': s, 'temp': temp, **m})
            votes.append(B.per_problem_run(m['per_problem']['vote_at'], n=n, temp=temp))
            if s == cfg['seeds'][0]:  # the first seed's picks
                picks[f'{v} (seed {s})'] = sc
            if model.spec.get('residual'):  # its base: a free scorer's name, or 'combo' with its fitted weights
                bases.setdefault(v, set()).add((model.spec['residual'], json.dumps(model.spec.get('res_norm'))))
        rows.append(tables.make_row(v, 'verifier', runs, params=count_params(model), n_train=log['n_train_problems'],
                                    val={m: float(np.mean([x[m] for x in val])) for m in ('acc', 'auroc')}))
        rows.append(tables.make_row(f'{v} + weighted vote', 'verifier_vote', votes, n_train=log['n_train_problems'],
                                    vote_of=v))
    for v, found in bases.items():  # chosen (or fitted) on the training data of this K: the same for every seed
        if len(found) > 1:
            names = sorted({name for name, _ in found})
            raise ValueError(f"variant {v!r} at K={k} chose different base scorers over seeds ({names}); fix: "
                             f"name one, e.g. --variants=\"{{'{v}': {{'residual': '{names[0]}'}}}}\"")
        name, norm = found.pop()
        score = (lambda c: combo_score(c, json.loads(norm))) if name == 'combo' else (lambda c: cheap_score(c, name))
        sc = [np.array([score(c) for c in p['candidates']]) for p in problems]
        rows.append(tables.make_row(f'{v} base: {name}', 'base', [B.scored_metrics(sc, pool, [n], where=name, n=n)],
                                    base_of=v))
    for r in rows:  # the free references' own validation numbers, beside the variants'
        if r['type'] in ('free_best_val', 'free_best_val_auroc', 'free_best_val_single'):
            m, key = ('auroc', 'val_auroc') if r['type'] == 'free_best_val_auroc' else ('acc', 'val_acc')
            r['val'] = {m: float(np.mean([choice[key][t] for t in r['tied']]))}
    tables.add_intervals(rows, n, cfg['n_boot'], cfg['boot_seed'])
    best_test = [next(r for r in rows if r['type'] == t) for t in ('free_best_test', 'free_best_test_auroc')]
    for r in rows:
        if r['type'] == 'base':
            ver = next(x for x in rows if x['method'] == r['base_of'])
            ver['vs']['base'] = B.paired_delta(ver, r, n, cfg['n_boot'], cfg['boot_seed'])
        if r['type'] in ('verifier', 'verifier_vote'):  # against the free selector best on this very split: no user
                                                        # can pick it
            r['vs']['best_free_test'] = B.paired_vs(r, *best_test, n, cfg['n_boot'], cfg['boot_seed'])
    return {'k': k, 'n_train': len(tr_files), 'n_val': len(va_files), 'rows': rows, 'choice': choice,
            'best_free_val': choice['free_best_val'], 'picks': picks,
            'recall': recall_split(cfg, rows, problems, tr_files + va_files)}


def recall_split(cfg, rows, problems, k_files):
    """The eval split in two: questions whose numbers (tasks.number_key: the numbers alone, in any arrangement) some
    problem of this K's training and validation has, and the rest. Word families are grouped by numbers plus answer
    by default, so a question can share its numbers with a training one of another arrangement and answer (never under
    extract.py's word_split='numbers', nor on the synthetic task). Each verifier's Δ against the best free selector on
    validation on each part (paired intervals within the part), and that reference's own Bo-N there.
    -> {'n_seen', 'n_rest', 'ref': {..}, variant: {..}}"""
    n = cfg['n_eval']
    seen_keys = {number_key(load_problem(f, mmap=True)) for f in k_files}  # memory-mapped: the states are never read
    seen = np.array([number_key(p) in seen_keys for p in problems])
    ref = [next(r for r in rows if r['type'] == t) for t in ('free_best_val', 'free_best_val_auroc')]
    out = {'n_seen': int(seen.sum()), 'n_rest': int((~seen).sum()), 'ref': {}}
    for part, mask in (('seen', seen), ('rest', ~seen)):
        if not mask.any():
            continue
        r0 = [tables.restrict(r, mask, n) for r in ref]
        out['ref'][part] = {'acc': r0[0]['acc'], 'auroc': r0[1]['auroc']}
        for r in rows:
            if r['type'] == 'verifier':
                out.setdefault(r['method'], {})[part] = B.paired_vs(tables.restrict(r, mask, n), *r0, n,
                                                                    cfg['n_boot'], cfg['boot_seed'])
    return out


def fit(points, ref):
    """Least-squares y = a + b log2(x) over (x, y) points; the x where it reaches ref (None if it never does, or only
    past 100 times the largest x: a near-flat fit's crossing says nothing), and whether the fit is already at or
    above ref at the largest x."""
    x, y = np.log2([p[0] for p in points]), np.array([p[1] for p in points])
    b, a = np.polyfit(x, y, 1)
    cross = float(2 ** ((ref - a) / b)) if b > 0 and (ref - a) / b <= x[-1] + np.log2(100) else None
    return {'a': float(a), 'b': float(b), 'cross': cross, 'reached': bool(a + b * x[-1] >= ref)}


def summarize(sizes_, cfg):
    """Per variant: the first size whose Δ vs the best free selector on validation excludes 0 (best-of-N, AUROC), the
    log-linear fits with where each reaches the best free selector on the eval split (the optimistic one, at the
    largest K), and each size's paired difference against the size before it (the same evaluation problems; seed j
    of one size drawn with seed j of the other): does it still rise, beyond the interval?"""
    out = {}
    ref = {m: next(r for r in sizes_[-1]['rows'] if r['type'] == t)[m]
           for m, t in (('acc', 'free_best_test'), ('auroc', 'free_best_test_auroc'))}
    for v in cfg['variants']:
        mine = [(s, r) for s in sizes_ for r in s['rows'] if r['method'] == v]  # the sizes where v has a cell
        first = {m: next((r['n_train'] for s, r in mine
                          if (r['vs'].get('best_free_val', {}).get(f'{m}_ci') or [0])[0] > 0), None)
                 for m in ('acc', 'auroc')}
        pts = {m: [(r['n_train'], r[m]) for s, r in mine] for m in ('acc', 'auroc')}
        steps = [{'from': ra['n_train'], 'to': rb['n_train'],
                  **B.paired_delta(rb, ra, cfg['n_eval'], cfg['n_boot'], cfg['boot_seed'])}
                 for (a, ra), (b, rb) in zip(mine, mine[1:])]
        out[v] = {'first_better': first, 'fit': {m: fit(pts[m], ref[m]) for m in pts} if len(mine) > 1 else None,
                  'k_to_k': steps}
    return out


def pair_deltas(sizes_, cfg):
    """For each (a, b) of cfg['pairs']: variant a's rows minus variant b's at each size where both have a cell, or,
    named 'variant@K', at those two sizes, paired over the same eval problems and seeds (B.paired_delta)."""
    def cell(x):  # 'hsrm_n4@240' -> ('hsrm_n4', 240); 'hsrm' -> ('hsrm', None): every size
        v, _, k = x.rpartition('@')
        return (v, int(k)) if v and k.isdigit() else (x, None)
    cells = [(cell(a), cell(b)) for a, b in cfg['pairs']]
    unknown = sorted({v for ab in cells for v, _ in ab} - set(cfg['variants']))
    n_held = {} if unknown else held(cfg)
    mixed = [p for p, ((a, ka), (b, kb)) in zip(cfg['pairs'], cells) if (ka is None) != (kb is None)
             or ka is not None and not ({ka, kb} <= set(cfg['sizes']) and n_held[a] >= ka and n_held[b] >= kb
                                      and ka in cfg['variants'][a].get('sizes', [ka])
                                      and kb in cfg['variants'][b].get('sizes', [kb]))]
    if unknown or mixed:
        raise ValueError(f"pairs={cfg['pairs']!r} name {unknown or mixed}: not variants {sorted(cfg['variants'])}, or "
                         f"cells whose K is missing, not in sizes {cfg['sizes']} or more than the variant's train "
                         f"split holds {n_held}; fix: --pairs=\"[('a', 'b')]\" with a and b among the variants, or "
                         f"[('a@K1', 'b@K2')] with K1 and K2 among the sizes their train splits hold")
    row = lambda s, v: next((r for r in s['rows'] if r['method'] == v), None)  # noqa: E731
    at = {s['k']: s for s in sizes_}
    out = []
    for (a, ka), (b, kb) in cells:
        both = [(s, s) for s in sizes_ if row(s, a) and row(s, b)]
        for sa, sb in (both if ka is None else [(at[ka], at[kb])] if sizes_ else []):
            out.append({'a': a if ka is None else f"{a} ({row(sa, a)['n_train']})", 'b': b if kb is None
                        else f"{b} ({row(sb, b)['n_train']})", 'n_train': sa['n_train'] if ka is None else '-',
                        **B.paired_delta(row(sa, a), row(sb, b), cfg['n_eval'], cfg['n_boot'], cfg['boot_seed'])})
    return out


def _row_cells(r, n):
    pair = lambda d: (f"{tables.fmt_ci(d['acc'], d['acc_ci'], True, diff=True)} / "  # noqa: E731
                      f"{tables.fmt_ci(d.get('auroc'), d.get('auroc_ci'), False, diff=True)}" if d else '')
    val = r.get('val', {})
    vcell = ' / '.join(f'{100 * val[m]:.1f}' if m == 'acc' else f'{val[m]:.3f}' for m in ('acc', 'auroc') if m in val)
    return [vcell, tables.fmt_ci(r['acc'], r.get('acc_ci'), True), tables.fmt_vs(r, 'best_free_val', 'acc', True),
            tables.fmt_vs(r, 'majority', 'acc', True), tables.fmt_vs(r, 'paper', 'acc', True),
            tables.fmt_ci(r.get('auroc'), r.get('auroc_ci'), False), tables.fmt_vs(r, 'best_free_val', 'auroc', False),
            pair(r.get('vs', {}).get('best_free_test')), pair(r.get('vs', {}).get('base'))]


def render(sizes_, summ, cfg, pairs_=()):
    n = cfg['n_eval']
    p = sizes_[0]['rows'][0]['per_problem']['acc_at'][n].shape[1]
    out = [f"## The data-need curve (best-of-{n}, {p} held-out problems)", '',
           "K problems of the train split, training and validation together: cut by group, about "
           f"{1 - cfg['val_frac']:.0%} train the verifiers and {cfg['val_frac']:.0%} validate (choosing the kept step, "
           f"the residual's base and the best free scorer). Verifiers: mean of {len(cfg['seeds'])} seeds. Δ: paired "
           f"differences with 95% bootstrap intervals over problems and seeds ({cfg['n_boot']} draws), **bold** where "
           "the interval excludes 0.", '',
           "References: (a) the best free selector on validation, votes included (the project's); (b) majority vote; "
           "(c) the paper's, the best single free scorer on validation with no vote; (d) the best free selector on the "
           "evaluation problems themselves (optimistic: no one could choose it).", '',
           f"| K | Method | Validation Bo{n} / AUROC | Bo{n} Acc. (%) [95% CI] | Δ vs (a) best free on val (pts) | "
           "Δ vs (b) majority (pts) | Δ vs (c) the paper's reference (pts) | Within-AUROC [95% CI] | "
           "Δ AUROC vs (a) | "
           "Δ vs (d) best free on test, optimistic (pts / AUROC) | Δ vs its base (pts / AUROC) |",
           '|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|']
    keep = ('vote', 'free_best_val', 'free_best_val_auroc', 'free_best_val_single', 'agreement', 'verifier',
            'verifier_vote', 'base')
    for s in sizes_:
        for r in s['rows']:
            if r['type'] in keep:
                out.append(f"| {r.get('n_train', s['n_train'])} | {r['method']} | " + ' | '.join(_row_cells(r, n))
                           + ' |')
    ref, rau = (next(r for r in sizes_[-1]['rows'] if r['type'] == t)
                for t in ('free_best_test', 'free_best_test_auroc'))
    out += ['', f"Best free selector on the eval split itself (optimistic, at the largest K): {ref['scorer']}, "
            f"Bo{n} {100 * ref['acc']:.1f}; best free scorer there by AUROC: {rau['scorer']}, {rau['auroc']:.3f}. The "
            "best free selector on each K's validation split is chosen among every free selector "
            f"(tables.free_rows), ties counted as their mean.", '',
            '| Variant | First K better than the best free scorer on val, beyond the interval (Bo-N / AUROC) | Fit per '
            'doubling of K (Bo-N pts / AUROC) | K where the fit reaches the best free scorer on test (Bo-N / AUROC; '
            'none: never, or past 100x the largest K) |',
            '|---|---|---|---|']
    for v, s in summ.items():
        f, fa = s['first_better'], s['fit']
        cell = lambda x: 'none' if x is None else f'{x:,.0f}'  # noqa: E731
        cross = lambda q: 'reached' if q['reached'] else cell(q['cross'])  # noqa: E731
        out.append(f"| {v} | {cell(f['acc'])} / {cell(f['auroc'])} | "
                   + (f"{100 * fa['acc']['b']:+.1f} / {fa['auroc']['b']:+.3f} | {cross(fa['acc'])} / "
                      f"{cross(fa['auroc'])} |"
                      if fa else '- | - |'))
    out += ['', f"Chosen on validation: at each K the variant with the best validation Bo{n} (its kept step's, mean "
                "over seeds; the next column says whether it also beat the best free selector there), and what it "
                "does on the eval split.",
            '', f'| K | Variant chosen | Validation Bo{n}: variant / best free | '
                'Δ vs best free on val (pts / AUROC) |',
            '|---:|---|---:|---:|']
    for s in sizes_:
        vs_ = [r for r in s['rows'] if r['type'] == 'verifier']
        r = max(vs_, key=lambda x: (x['val']['acc'], x['val']['auroc']))
        fv = next(x for x in s['rows'] if x['type'] == 'free_best_val')['val']['acc']
        out.append(f"| {r['n_train']} | {r['method']} | {100 * r['val']['acc']:.1f} / {100 * fv:.1f} | "
                   f"{tables.fmt_vs(r, 'best_free_val', 'acc', True)} / "
                   f"{tables.fmt_vs(r, 'best_free_val', 'auroc', False)} |")
    steps = [(v, d) for v, s in summ.items() for d in s['k_to_k']]
    if steps:
        out += ['', '| Variant | Training problems, from -> to | Δ Bo-N (pts) [95% CI] | Δ AUROC [95% CI] |',
                '|---|---|---:|---:|']
        out += [f"| {v} | {d['from']} -> {d['to']} | {tables.fmt_ci(d['acc'], d['acc_ci'], True, diff=True)} | "
                f"{tables.fmt_ci(d.get('auroc'), d.get('auroc_ci'), False, diff=True)} |" for v, d in steps]
    rec = sizes_[-1]['recall']
    if rec['n_seen']:
        pair = lambda d: (f"{tables.fmt_ci(d['acc'], d['acc_ci'], True, diff=True)} / "  # noqa: E731
                          f"{tables.fmt_ci(d.get('auroc'), d.get('auroc_ci'), False, diff=True)}")
        ref = lambda part: (f"{100 * rec['ref'][part]['acc']:.1f} / {rec['ref'][part]['auroc']:.3f}"  # noqa: E731
                            if part in rec['ref'] else '-')
        dirs = free_side_dirs(cfg)
        at = f"K = {sizes_[-1]['k']}" + (f" of each of {', '.join(dirs)} (the free side's pooled cut)"
                                          if len(dirs) > 1 else '')
        out += ['', f"Evaluation questions whose numbers a training or validation question at {at} "
                f"also has, in another arrangement ({rec['n_seen']}), and the rest ({rec['n_rest']}): Δ vs the best "
                f"free selector on validation within each part (Bo{n} pts / AUROC; the reference's own Bo{n} / AUROC "
                f"there: {ref('seen')} and {ref('rest')}).", '', '| Variant | numbers seen in training | the rest |',
                '|---|---:|---:|']
        out += [f"| {v} | {pair(rec[v]['seen']) if 'seen' in rec[v] else '-'} | "
                f"{pair(rec[v]['rest']) if 'rest' in rec[v] else '-'} |"
                for v in cfg['variants'] if v in rec]
    else:
        out += ['', f"No evaluation question's numbers occur among the K = {sizes_[-1]['k']} training and validation "
                    "problems."]
    if pairs_:
        out += ['', '| Variant a - variant b | K | Δ Bo-N (pts) [95% CI] | Δ AUROC [95% CI] |',
                '|---|---:|---:|---:|']
        out += [f"| {d['a']} - {d['b']} | {d['n_train']} | {tables.fmt_ci(d['acc'], d['acc_ci'], True, diff=True)} | "
                f"{tables.fmt_ci(d.get('auroc'), d.get('auroc_ci'), False, diff=True)} |" for d in pairs_]
    return '\n'.join(out) + '\n'


def plot(sizes_, cfg, path):
    """AUROC and best-of-N against training problems (log axis), 95% intervals as bands; majority vote, the best
    free selector (AUROC: scorer) on each K's validation and the best on the eval split itself as references."""
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    xs = [s['n_train'] for s in sizes_]
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    for ax, m, pct, lab in ((axes[0], 'auroc', 1, 'within-problem AUROC'),
                            (axes[1], 'acc', 100, f"best-of-{cfg['n_eval']} accuracy (%)")):
        sfx = '_auroc' if m == 'auroc' else ''
        series = [(v, v, '-') for v in cfg['variants']] + [
            ('best free on val (at each K)', 'free_best_val' + sfx, '--'),
            ('best free on test (optimistic)', 'free_best_test' + sfx, '-.')]
        if m == 'acc':
            series.append(('majority vote', 'vote', ':'))
        for label, key, style in series:  # a variant's line runs over the sizes where it has a cell
            xr = [(s['n_train'], r) for s in sizes_
                  for r in [next((r for r in s['rows'] if r['method'] == key or r['type'] == key), None)] if r]
            y = [pct * r[m] for _, r in xr]
            ci = [r.get(f'{m}_ci') or [r[m], r[m]] for _, r in xr]
            line, = ax.plot([x for x, _ in xr], y, style, marker='o' if style == '-' else None, label=label)
            ax.fill_between([x for x, _ in xr], [pct * c[0] for c in ci], [pct * c[1] for c in ci],
                            color=line.get_color(), alpha=0.15)
        ax.set_xscale('log', base=2)
        ax.set_xticks(xs, [str(x) for x in xs])
        ax.minorticks_off()
        ax.set_xlabel('training problems (log scale)')
        ax.set_ylabel(lab)
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8, loc='best')
    axes[1].legend(fontsize=8, loc='best')
    fig.suptitle(f"Data need: {os.path.basename(os.path.normpath(cfg['out_dir']))}, {len(cfg['seeds'])} seeds, 95% "
                 "intervals")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def run(cfg):
    cfg = {**DEFAULTS, **cfg}
    set_threads(cfg['threads'])
    check_positive(cfg, DEFAULTS, ('n_eval', 'n_subsets', 'n_boot'))
    T.check_distinct(cfg, ('seeds',), DEFAULTS)  # a run each: none, or one twice, is refused
    for v, over in cfg['variants'].items():  # a typo inside a dict knob is refused as a top-level one is
        check_keys(train_keys(over), T.DEFAULTS, f'variants[{v!r}]')
        if not set(over.get('sizes', cfg['sizes'])) <= set(cfg['sizes']):
            raise ValueError(f"variants[{v!r}]['sizes']={over['sizes']!r} names a K not in sizes={cfg['sizes']!r}; "
                             f"fix: add it to --sizes, or name only sizes' K")
    check_keys(cfg['train_overrides'], T.DEFAULTS, 'train_overrides')
    if not cfg['sizes'] or sorted(cfg['sizes']) != list(cfg['sizes']):
        raise ValueError(f"sizes={cfg['sizes']!r} must be increasing K values; fix: --sizes=\"[80, 160, 320, 640, "
                         "1225]\"")
    for d in free_side_dirs(cfg):
        n = len(problem_files(d))
        if not 0 < cfg['sizes'][0] <= cfg['sizes'][-1] <= n:  # K counts training + validation problems of a split
            raise ValueError(f"sizes={cfg['sizes']!r} but {d} has {n} problems; fix: --sizes=\"[...]\" with every K in "
                             f"1..{n}, or extract more training problems")
    n_held = held(cfg)  # every variant's train split holds the smallest K
    ev = [load_problem(f, mmap=True) for f in problem_files(os.path.join(cfg['out_dir'], 'eval'))]  # states never read
    for v, over in cfg['variants'].items():  # before training: no variant will score its own training groups
        k = max(x for x in over.get('sizes', cfg['sizes']) if x <= n_held[v])  # nested draws: the largest K holds the
                                                                               # rest
        for d in over.get('train_dirs') or [os.path.join(cfg['out_dir'], 'train')]:
            tr, va = split_problems(problem_files(d), cfg['val_frac'], cfg['val_seed'], k)
            check_unseen(ev, {'train': [file_group(f) for f in tr], 'val': [file_group(f) for f in va]},
                         f"variant {v!r} at K={k} (trained on {d})")
    for d in free_side_dirs(cfg):  # nor the free side's choices
        tr, va = split_problems(problem_files(d), cfg['val_frac'], cfg['val_seed'], cfg['sizes'][-1])
        check_unseen(ev, {'train': [file_group(f) for f in tr], 'val': [file_group(f) for f in va]},
                     f"the free side at K={cfg['sizes'][-1]} (chosen on {d})")
    pair_deltas([], cfg)  # a pair naming no variant, or a cell its train split does not hold, is refused before any
                          # training
    check_writable('out_dir', cfg['out_dir'], os.path.join(cfg['out_dir'], 'curve'))  # its runs, caches and report
    dev = resolve_device(cfg['device'])
    atomic_write_json(cfg, os.path.join(cfg['out_dir'], 'curve_config.json'))
    for k in tqdm(cfg['sizes'], desc='training sizes'):  # every run first: parts can train in parallel (--sizes)
        train_size(cfg, k)
    problems = load_split(os.path.join(cfg['out_dir'], 'eval'))
    pool = B.build_pool(problems, [cfg['n_eval']], cfg['n_subsets'], cfg['subset_seed'], answers_equal)
    sizes_ = [evaluate_size(cfg, k, problems, pool, dev) for k in tqdm(cfg['sizes'], desc='evaluating sizes')]
    summ, pairs_ = summarize(sizes_, cfg), pair_deltas(sizes_, cfg)
    ns = [m for m in (2, 4, 8, 16, 32) if m <= cfg['n_eval']]  # does a pick drift towards some kind of candidate as N
                                                               # grows?
    picks = traits_rows(problems, B.build_pool(problems, ns, cfg['n_subsets'], cfg['subset_seed'], answers_equal),
                          sizes_[-1]['picks'], ns)
    for s in sizes_:
        s.pop('picks')
    md = render(sizes_, summ, cfg,
                pairs_) + (f"\n## What each selector picks at K = {cfg['sizes'][-1]} (best-of-N picks on the eval "
                                      f"split, mean over problems and {cfg['n_subsets']} subsets; curve.TRAITS)\n\n"
                                      f"{traits_table(picks)}\n")
    atomic_write_json(tables.for_json({'config': cfg, 'sizes': sizes_, 'summary': summ, 'pairs': pairs_,
                                       'picks': picks}), os.path.join(cfg['out_dir'], 'curve.json'))
    with open(os.path.join(cfg['out_dir'], 'curve.md'), 'w') as f:
        f.write(md)
    plot(sizes_, cfg, os.path.join(cfg['out_dir'], 'curve.png'))
    print(md)
    return sizes_, summ


if __name__ == '__main__':
    # config files, then --key=value, override the knobs above; another stage's --key names that stage
    config = configure(globals())
    cli(run, config, 'curve.py')
