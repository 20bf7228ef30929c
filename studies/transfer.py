"""
Leave-one-family-out transfer: does a verifier hold up on a task family it never saw? For each family F of
`families` (name -> a cell dir holding labelled train/ and eval/ splits, e.g. out/words_shop from config/words.py),
train every variant (train.py config overrides) on all the OTHER families' train splits at once (balanced batches),
then score F's eval split zero-shot beside every free selector on the same pool (tables.free_rows: cheap and
DeepConf scorers, the free-scorer combo (bestofn.combo_fit: every free scorer standardized, weights learned on the
training families' train splits: a base that travels), each one's weighted vote, majority vote, DeepConf's votes),
the best free selector chosen on the training families' validation split and the best on F itself (optimistic: a
user cannot choose it in advance), single pass, oracle; paired bootstrap intervals (bestofn.py's, the same draws
for every method of a fold), every row also against majority vote and the optimistic best free selector. The variants
named in in_domain are also trained on F's own train split, for reference, each against its zero-shot self (paired).
Runs and score caches are reused: a second call only reports.

    python -m studies.transfer config/transfer_words.py
    python -m studies.transfer config/transfer_words.py --variants="{'hsrm': {}}" --seeds="[42]"
    python -m studies.transfer config/transfer_words.py --folds="['shop', 'travel']" --threads=1 &  # in parallel
    python -m studies.transfer config/transfer_words.py --folds="['bake', 'share']" --threads=1     # (runs reused:
    python -m studies.transfer config/transfer_words.py                                             # a last reports)

Writes {out_dir}/transfer.md, transfer.json, config.json (transfer_<folds>.* for a call with folds); the runs in
{out_dir}/<family>/<variant>[_in_domain]/seed<s>/.
"""
import os

import numpy as np
from tqdm import tqdm

import bestofn as B
import evaluate
import tables
import train as T
from bestofn import combo_fit
from configurator import check_keys, configure, knobs
from grading import answers_equal
from machine import check_positive, check_writable, cli, resolve_device, set_threads
from model import count_params
from store import (atomic_write_json, file_group, load_checkpoint, load_problem, load_split, problem_files,
                   split_problems)
from tasks import check_unseen

# -----------------------------------------------------------------------------
# knobs (options in the comments); config files and --key=value override them
out_dir = 'out/transfer'
families = {}               # name -> cell dir with labelled train/ and eval/ splits, e.g. {'shop': 'out/words_shop',
                            # ...}
folds = []                  # the held-out families this call runs, e.g. ['shop']; [] = every family (the report)
variants = {'hsrm': {}}     # name -> train.py overrides, e.g. {'hsrm_conf': {'step_features': True},
                            # 'hsrm_residual': {'residual': 'auto'}, 'hsrm_combo': {'residual': 'combo'}}
seeds = [42, 123, 456]      # one verifier per seed, per variant and fold
in_domain = ['hsrm']        # variants also trained on the held-out family's own train split (the reference); [] = none
train_overrides = {}        # train.py knobs for every run, e.g. {'max_iters': 300, 'eval_interval': 25}
n_eval = 8                  # best-of-N; pools larger than N average n_subsets random N-subsets (evaluate.py)
n_subsets = 100
subset_seed = 0
n_boot = 2000               # paired bootstrap draws over the held-out problems (and seeds)
boot_seed = 0
val_frac = 0.2              # the training families' validation split (as train.py draws it) chooses the best cheap
                            # scorer
val_seed = 42               # and the weighted-vote temperatures
device = 'auto'             # 'auto' | 'cpu' | 'cuda'
threads = 0                 # CPU threads for torch; 0 = torch's default
overwrite = False           # True: train again in place a finished run whose config or data differs (else refused:
                            # train.py's)
DEFAULTS = knobs(globals())  # the knobs above as a dict
EVAL_DEFAULTS = evaluate.DEFAULTS  # evaluate.py's knobs (vote temperatures, DeepConf windows)

# -----------------------------------------------------------------------------


def check_families(fams, cfg):
    """Every family needs labelled train and eval splits; names and dirs are checked before any training."""
    if len(fams) < 2:
        raise ValueError(f"families={fams!r}: leave-one-out needs at least 2 families; fix: --families=\"{{'a': "
                         f"'out/cell_a', 'b': 'out/cell_b'}}\" (cells from extract.py + label.py)")
    for name, d in fams.items():
        for s in ('train', 'eval'):
            if not os.path.exists(os.path.join(d, s, 'labels.json')):
                raise ValueError(f"families[{name!r}]={d!r} has no labelled {s} split ({d}/{s}/labels.json); fix: "
                                 f"python extract.py <its config> --out_dir={d} && python label.py <its config> "
                                 f"--out_dir={d}")
    unknown = [f for f in cfg['folds'] if f not in fams]
    if unknown:
        raise ValueError(f"folds={cfg['folds']!r} names {unknown}, not among families {list(fams)}; "
                         f"fix: --folds=\"{[f for f in cfg['folds'] if f in fams]}\" (or [] for every family)")
    unknown = [v for v in cfg['in_domain'] if v not in cfg['variants']]
    if unknown:
        raise ValueError(f"in_domain={cfg['in_domain']!r} names {unknown}, not among variants {list(cfg['variants'])}; "
                         f"fix: --in_domain=\"{[v for v in cfg['in_domain'] if v in cfg['variants']]}\"")


def fold_runs(cfg, held):
    """[(row name, run dir, train dirs)] of fold `held`: each variant on the other families, and in domain."""
    others = [os.path.join(d, 'train') for f, d in cfg['families'].items() if f != held]
    out = []
    for v in cfg['variants']:
        out.append((v, os.path.join(cfg['out_dir'], held, v), others))
        if v in cfg['in_domain']:
            out.append((f'{v} (in domain)', os.path.join(cfg['out_dir'], held, f'{v}_in_domain'),
                        [os.path.join(cfg['families'][held], 'train')]))
    return out


def train_fold(cfg, held):
    """Train (or skip, when finished with the same config: train.run's rule) every run of a fold."""
    for name, run_dir, dirs in fold_runs(cfg, held):
        v = name.replace(' (in domain)', '')
        over = cfg['variants'][v]
        c = {**T.DEFAULTS, **cfg['train_overrides'], **over, 'out_dir': run_dir, 'train_dirs': dirs, 'run_dir': run_dir,
             'seeds': list(cfg['seeds']), 'val_frac': cfg['val_frac'], 'val_seed': cfg['val_seed'],
             'device': cfg['device'], 'overwrite': cfg['overwrite']}
        T.run(c, keep_both=f"another --out_dir, or a new variant name in --variants (this one is {v!r})")


def val_split(dirs, cfg, n):
    """The validation problems of these train dirs (each split as train.py splits it) as one pool: (problems, pool,
    n)."""
    probs = []
    for d in dirs:
        files = split_problems(problem_files(d), cfg['val_frac'], cfg['val_seed'])[1]
        for p in load_split(d, files=files):
            p['src'] = d
            probs.append(p)
    vn = min(n, min(len(p['candidates']) for p in probs))
    return probs, B.build_pool(probs, [vn], cfg['n_subsets'], cfg['subset_seed'], answers_equal), vn


def verifier_row(name, run_dir, dirs, problems, pool, eval_dir, cfg, dev):
    """A row (and its weighted-vote row) from one run's seeds, scores cached next to the runs."""
    runs, cache = [], os.path.join(cfg['out_dir'], 'scores')
    vp, vpool, vn = val_split(dirs, cfg, cfg['n_eval'])
    for s in cfg['seeds']:
        path = os.path.join(run_dir, f'seed{s}', 'ckpt.pt')
        tables.check_checkpoint(problems, eval_dir, path)
        model, ck = load_checkpoint(path, dev)
        sc = tables.cached_scores(model, path, problems, eval_dir, cache, 1024, dev)[0]
        vs = []  # validation scores, per training dir (each cached under its own split)
        for d in dirs:
            part = [p for p in vp if p['src'] == d]
            vs += tables.cached_scores(model, path, part, d, cache, 1024, dev)[0]
        temp = B.choose_temp(vs, vpool, vn, EVAL_DEFAULTS['vote_temps'], where=f'{path} on its validation split')
        mt = B.scored_metrics(sc, pool, [cfg['n_eval']], temp, vote=True, where=f'{path} on {eval_dir}',
                              n=cfg['n_eval'])
        runs.append({'ckpt': path, 'seed': s, 'temp': temp, **mt})
    return [tables.make_row(name, 'verifier', runs, params=count_params(model)),
            tables.make_row(f'{name} + weighted vote', 'verifier_vote',
                       [B.per_problem_run(r['per_problem']['vote_at'], n=cfg['n_eval']) for r in runs])]


def evaluate_fold(cfg, held, dev):
    """The fold's rows on the held-out family's eval split, with intervals (tables.add_intervals)."""
    n, eval_dir = cfg['n_eval'], os.path.join(cfg['families'][held], 'eval')
    problems = load_split(eval_dir)
    pool = B.build_pool(problems, [n], cfg['n_subsets'], cfg['subset_seed'], answers_equal)
    others = [os.path.join(d, 'train') for f, d in cfg['families'].items() if f != held]
    # the free side, chosen on the training families' validation split; the combo's weights from their train splits
    vp, vpool, vn = val_split(others, cfg, n)
    tr = [p for d in others
          for p in load_split(d, files=split_problems(problem_files(d), cfg['val_frac'], cfg['val_seed'])[0])]
    ecfg = {**EVAL_DEFAULTS, **{k: cfg[k] for k in cfg if k in EVAL_DEFAULTS}}  # vote temperatures, DeepConf windows
    rows, choice = tables.free_rows(problems, pool, [n], n, (vp, vpool, vn), ecfg, combo_fit(tr))
    for name, run_dir, dirs in fold_runs(cfg, held):
        rows += verifier_row(name, run_dir, dirs, problems, pool, eval_dir, cfg, dev)
    orc = {n: np.array([B.oracle_sub(q['labels'], q['subsets'][n]) for q in pool])}
    rows.append(tables.make_row(f'Oracle pass@{n}', 'oracle', [B.per_problem_run(orc, n=n)]))
    tables.add_intervals(rows, n, cfg['n_boot'], cfg['boot_seed'])
    # the optimistic references: the free selector best on the held-out family itself by best-of-N, the free scorer
    # best there by AUROC (no user can choose either in advance)
    top = [next(r for r in rows if r['type'] == t) for t in ('free_best_test', 'free_best_test_auroc')]
    for r in rows:
        if r.get('per_problem'):
            r['vs']['best_free_test'] = B.paired_vs(r, *top, n, cfg['n_boot'], cfg['boot_seed'])
    # what training on the family itself adds: each in-domain row against the same variant zero-shot (same seeds and
    # problems, paired)
    for v in cfg['in_domain']:
        zero, dom = (next(r for r in rows if r['method'] == m) for m in (v, f'{v} (in domain)'))
        dom['vs']['zero_shot'] = B.paired_delta(dom, zero, n, cfg['n_boot'], cfg['boot_seed'])
    return {'family': held, 'eval_dir': eval_dir, 'n_problems': len(problems), 'best_free_val': choice['free_best_val'],
            'best_free_test': choice['free_best_test'], 'best_free_auroc_test': choice['free_best_test_auroc'],
            'choice': choice, 'trained_on': others, 'rows': rows}


def summary(folds, cfg):
    """Per variant (zero-shot rows) and the free-scorer combo: folds where its AUROC >= the best free scorer's on
    validation, and >= the best free scorer's AUROC on the held-out family (optimistic), its lowest AUROC, and the
    folds where its best-of-N is below the best free selector on validation, the best free scorer on the held-out family
    (optimistic) or majority vote, beyond the interval."""
    out = []
    for v in list(cfg['variants']) + ['combo']:
        ok, ok_test, low, worse = 0, 0, [], {'best_free_val': [], 'best_free_test': [], 'majority': []}
        for f in folds:
            r = next(r for r in f['rows'] if (r['type'] == 'combo' if v == 'combo' else r['method'] == v))
            ok += r['vs'].get('best_free_val', {}).get('auroc', -1) >= 0
            ok_test += r['vs'].get('best_free_test', {}).get('auroc', -1) >= 0
            low.append(r['auroc'])
            for ref, fams in worse.items():
                ci = r['vs'].get(ref, {}).get('acc_ci')
                fams += [f['family']] if ci and ci[1] < 0 else []
        out.append({'variant': v, 'auroc_at_least_best_free_val': ok, 'auroc_at_least_best_free_test': ok_test,
                    'folds': len(folds), 'min_auroc': float(np.min(low)),
                    'bo_n_below_best_free_val': worse['best_free_val'],
                    'bo_n_below_best_free_test': worse['best_free_test'], 'bo_n_below_majority': worse['majority']})
    return out


def render(folds, summ, cfg):
    n = cfg['n_eval']
    out = [f"## Leave-one-family-out transfer (best-of-{n})", '',
           f"Each family's eval split scored by verifiers trained on the other families' train splits (zero-shot), "
           f"{len(cfg['seeds'])} seeds each; `(in domain)`: trained on the family's own train split. The best free "
           f"selector on val is chosen on the training families' validation split among every free selector (majority "
           f"vote, cheap and DeepConf scorers, the combo, each one's weighted vote, DeepConf's votes; ties counted as "
           "their mean), the AUROC column against the free scorer best there by AUROC; the best free on test is "
           "chosen the same way on the held-out family itself (optimistic: no user can choose it in advance); the "
           "free-scorer combo's weights are learned on the training families' train splits. Δ are paired differences "
           f"with 95% bootstrap intervals ({cfg['n_boot']} draws over problems and seeds), **bold** where the interval "
           "excludes 0.", '',
           f'| Held out | Method | Bo{n} Acc. (%) [95% CI] | Δ vs best free on val (pts) | Δ vs best free on '
           'test (pts) | Δ vs majority (pts) | Within-AUROC [95% CI] | Δ AUROC vs best free on val | Δ AUROC vs '
           'best free on test |',
           '|---|---|---:|---:|---:|---:|---:|---:|---:|']
    keep = ('vote', 'cheap', 'free_best_val', 'free_best_val_auroc', 'combo', 'deepconf', 'deepconf_vote', 'free_vote',
            'verifier', 'verifier_vote', 'oracle', 'single')

    def vs(r, key, pct):  # the optimistic reference is not among tables.REFS: formatted here
        d = r.get('vs', {}).get('best_free_test', {})
        ref = r['type'] == ('free_best_test' if key == 'acc' else 'free_best_test_auroc')
        return 'ref.' if ref else tables.fmt_ci(d.get(key), d.get(key + '_ci'), pct, diff=True)
    for f in folds:
        for r in f['rows']:
            if r['type'] not in keep:
                continue
            test, test_au = vs(r, 'acc', True), vs(r, 'auroc', False)
            out.append(f"| {f['family']} ({f['n_problems']}) | {r['method']} | "
                       f"{tables.fmt_ci(r['acc'], r.get('acc_ci'), True)} | "
                       f"{tables.fmt_vs(r, 'best_free_val', 'acc', True)} | {test} | "
                       f"{tables.fmt_vs(r, 'majority', 'acc', True)} | "
                       f"{tables.fmt_ci(r.get('auroc'), r.get('auroc_ci'), False)} | "
                       f"{tables.fmt_vs(r, 'best_free_val', 'auroc', False)} | {test_au} |")
    if cfg['in_domain']:
        out += ['', 'In domain against the same variant zero-shot (same seeds and eval problems, paired):', '',
                f'| Held out | Variant | Δ Bo{n} in domain − zero-shot (pts) | Δ AUROC in domain − zero-shot |',
                '|---|---|---:|---:|']
        for f in folds:
            for v in cfg['in_domain']:
                d = next(r for r in f['rows'] if r['method'] == f'{v} (in domain)')['vs']['zero_shot']
                out.append(f"| {f['family']} | {v} | {tables.fmt_ci(d['acc'], d['acc_ci'], True, diff=True)} "
                           f"| {tables.fmt_ci(d.get('auroc'), d.get('auroc_ci'), False, diff=True)} |")
    out += ['', '| Variant (zero-shot) | Folds with AUROC ≥ best free on val | ≥ best free on test | Lowest AUROC '
            '| Folds with Bo-N below, beyond the interval: best free on val | best free on test | majority |',
            '|---|---:|---:|---:|---|---|---|']
    for s in summ:
        out.append(f"| {s['variant']} | {s['auroc_at_least_best_free_val']} / {s['folds']} | "
                   f"{s['auroc_at_least_best_free_test']} / {s['folds']} | {s['min_auroc']:.3f} "
                   f"| {', '.join(s['bo_n_below_best_free_val']) or 'none'} | "
                   f"{', '.join(s['bo_n_below_best_free_test']) or 'none'} | "
                   f"{', '.join(s['bo_n_below_majority']) or 'none'} |")
    return '\n'.join(out) + '\n'


def run(cfg):
    cfg = {**DEFAULTS, **cfg}
    set_threads(cfg['threads'])
    check_positive(cfg, DEFAULTS, ('n_eval', 'n_subsets', 'n_boot'))
    T.check_distinct(cfg, ('seeds',), DEFAULTS)  # a run each: none, or one twice, is refused
    for v, over in cfg['variants'].items():  # a typo inside a dict knob is refused as a top-level one is
        check_keys(over, T.DEFAULTS, f'variants[{v!r}]')
    check_keys(cfg['train_overrides'], T.DEFAULTS, 'train_overrides')
    check_families(cfg['families'], cfg)
    for held in cfg['folds'] or list(cfg['families']):  # before training: no run will score its own training groups
        ev = [load_problem(f, mmap=True) for f in problem_files(os.path.join(cfg['families'][held], 'eval'))]
        for name, _, dirs in fold_runs(cfg, held):
            check_unseen(ev, {'train': [file_group(f) for d in dirs for f in problem_files(d)]},
                         f"{name} (fold {held}, trained on {', '.join(dirs)})")
    check_writable('out_dir', cfg['out_dir'], os.path.join(cfg['out_dir'], 'scores'))  # runs, caches, the report
    dev = resolve_device(cfg['device'])
    part = '_' + '_'.join(cfg['folds']) if cfg['folds'] else ''  # a part's files beside the whole report's
    atomic_write_json(cfg, os.path.join(cfg['out_dir'], f'config{part}.json'))
    folds = []
    for held in tqdm(cfg['folds'] or list(cfg['families']), desc='folds'):
        train_fold(cfg, held)
        folds.append(evaluate_fold(cfg, held, dev))
    summ = summary(folds, cfg)
    md = render(folds, summ, cfg)
    atomic_write_json(tables.for_json({'config': cfg, 'folds': folds, 'summary': summ}),
                      os.path.join(cfg['out_dir'], f'transfer{part}.json'))
    with open(os.path.join(cfg['out_dir'], f'transfer{part}.md'), 'w') as f:
        f.write(md)
    print(md)
    return folds, summ


if __name__ == '__main__':
    # config files, then --key=value, override the knobs above; another stage's --key names that stage
    config = configure(globals())
    cli(run, config, 'transfer.py')
