"""
The tables' machinery, shared by evaluate.py, pools.py, the studies (studies/) and sample.py: a run's score caches,
dirs, checkpoints and validation splits; the free side (every free selector, and the reference chosen on validation);
rows with their paired 95% intervals; formatting. The pools evaluate.py writes (every candidate with every score) and
the table made from them alone are pools.py's; the plots (evaluate.py's and the pieces the studies share) are
plots.py's; the best-of-N maths under both (pools, rules, votes, AUROC, bootstrap) is bestofn.py's; evaluate.py's
notes and cost table are evaluate.py's.
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

from bestofn import (CHEAP_SCORERS, DEEPCONF_SCORERS, answer_agreement, boot_draws, boot_means, build_pool,
                     cheap_scores, choose_temp, ci, combo_fit, combo_score, deepconf_scores, has_confidences,
                     per_problem_run, problem_aurocs, scored_metrics, votes_at)
from model import VERIFIERS, score_prefixes, score_problems
from store import atomic_write_json, check_dtype, load_split, problem_files, read_checkpoint, split_problems, trainer
from tasks import check_unseen
import train

# -----------------------------------------------------------------------------
# scores and a run's files: score caches, the run's dirs and checkpoints, its validation splits (evaluate.py, the
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
    unchanged. prefixes=True: score_prefixes' per-step scores instead (a list of arrays per problem),
    {run}.prefixes.json."""
    rel = lambda d: slug(os.path.relpath(os.path.abspath(d),  # noqa: E731
                                         os.path.dirname(os.path.abspath(cache_dir)))).replace('..', 'up')
    path = os.path.join(cache_dir, rel(split_dir),
                        rel(os.path.dirname(ckpt_path)) + ('.prefixes' if prefixes else '') + '.json')
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
    suffix = f"_on_{slug(os.path.basename(os.path.dirname(os.path.abspath(eval_dir))))}" if transfer else ''
    return eval_dir, train_dir, suffix


def checkpoint_paths(cfg, named=None):
    """(paths, notes): the checkpoints to score, finished runs only (train.run_state), and a note per run left out.
    ckpts (paths or globs, e.g. another run's 'out/gsm8k_1p7b/verifiers/*/ckpt.pt'): each, an unfinished one refused;
    else every finished run of {out_dir}/verifiers, where named ({run group: (seeds, the command that trains them,
    {seed: run dir} of its runs found, and where the missing seeds would be trained)}, the verifiers the config names)
    must each be there and finished, a missing or unfinished one refused with that command, and a seed of those groups
    the config does not name is left out."""
    if cfg['ckpts']:
        paths = sorted({p for g in cfg['ckpts'] for p in glob.glob(g)})
        if not paths:
            raise ValueError(f"ckpts={cfg['ckpts']} matches no file; fix: run `{trainer(cfg['ckpts'][0])}` first, or "
                             "correct the paths")
        bad = [p for p in paths if train.run_state(os.path.dirname(p)) == 'unfinished']
        if bad:
            raise ValueError(f"ckpts: {bad[0]} is the checkpoint of an unfinished run (its log.json is not done: "
                             f"interrupted){f', and {len(bad) - 1} more' if len(bad) > 1 else ''}; fix: finish it (the "
                             "command that trained it, run again, trains it again), or leave it out of --ckpts")
        return paths, []
    named, paths, notes = named or {}, [], []
    other = {}  # {run dir: its group} of the named groups' seeds the config does not name
    for g, (seeds, command, dirs) in named.items():
        for s in seeds:
            d = dirs[s]
            state = train.run_state(d) if os.path.exists(os.path.join(d, 'ckpt.pt')) else 'missing'
            if state != 'done' and not (state is None and os.path.exists(os.path.join(d, 'ckpt.pt'))):
                raise ValueError(f"{d} is {state if state == 'missing' else 'unfinished (its log.json is not done)'}: "
                                 f"the config names {g} with seeds {list(seeds)}; fix: {command} (it trains every seed "
                                 "that is not finished), then evaluate again")
        other.update({os.path.abspath(d): g for s, d in dirs.items() if s not in seeds})
    for p in sorted(glob.glob(os.path.join(cfg['out_dir'], 'verifiers', '*', 'ckpt.pt'))):
        d = os.path.dirname(p)
        if os.path.abspath(d) in other:
            g = other[os.path.abspath(d)]
            notes.append(f"{d} left out: the config's {g} seeds are {list(named[g][0])}.")
        elif train.run_state(d) == 'unfinished':
            notes.append(f"{d} left out: an unfinished run (its log.json is not done; the command that trained it, run "
                         "again, trains it again).")
        else:
            paths.append(p)
    return paths, notes


def check_checkpoint(problems, split_dir, path, fix=''):
    """What every stage checks before a checkpoint scores a split's problems, one line naming the fix where it fails:
    it never trained or validated on their groups (tasks.check_unseen; fix: a way out the stage adds), the split holds
    states of the weights dtype it was trained on (store.check_dtype), and its training data is still what its split
    dirs hold (train.check_fresh: a grown or relabelled split leaves a stale verifier)."""
    ck = read_checkpoint(path)  # whole: a damaged one is named before any work
    check_unseen(problems, ck.get('groups'), path, fix)
    cfgp = os.path.join(split_dir, 'config.json')
    dtype = json.load(open(cfgp)).get('weights_dtype') if os.path.exists(cfgp) else None
    check_dtype(train.trained_on(ck, path), dtype, path, f'{split_dir} holds states of {dtype} weights',
                'score a split extracted with --dtype={trained} (its states), or a verifier trained on '
                f'{dtype} states', key=None)
    train.check_fresh(ck, path)


def val_splitter(train_dir, n, cfg):
    """val_split(frac, seed, k=None) -> (problems, pool, best-of-n) of train_dir's val split as train.py draws it
    (k: max_train_problems), or None without a labelled train_dir: choices that must not see the test split.
    Each split is built once."""
    splits = {}

    def val_split(frac, seed, k=None):
        if not os.path.exists(os.path.join(train_dir, 'labels.json')):
            return None
        if (frac, seed, k) not in splits:
            splits[frac, seed, k] = choice_split(train_dir, n, cfg,
                                                 split_problems(problem_files(train_dir), frac, seed, k)[1])
        return splits[frac, seed, k]
    return val_split


def run_group(ckpt_path):
    """Table row a checkpoint belongs to: its run dir's name without the _seed<k> suffix (studies.curve's
    <variant>/seed<k>/ runs: the variant's name)."""
    run = os.path.dirname(os.path.abspath(ckpt_path))
    name = os.path.basename(run)
    return os.path.basename(os.path.dirname(run)) if re.fullmatch(r'seed\d+', name) else re.sub(r'_seed\d+$', '', name)


def best_seed(paths):
    """Of finished runs' checkpoints, the one with the highest validation within-problem AUROC at its kept step
    (train.py's best_val; none, or NaN, ranks last), ties to the first in sorted order: the seed sample.py answers
    with, and the one evaluate.py ships."""
    def auroc(p):
        a = (read_checkpoint(p, mmap=True).get('best_val') or {}).get('auroc')
        return -np.inf if a is None or np.isnan(a) else a
    paths = sorted(paths)
    return max(paths, key=auroc) if len(paths) > 1 else paths[0]


# -----------------------------------------------------------------------------
# rows of the table: names, mean and std over seeds, and 95% intervals from a paired bootstrap over problems or their
# groups (rows of several runs also resample their seeds) against the references; the same by part (breakdown)


PRETTY = {**{k: v[2] for k, v in VERIFIERS.items()}, 'text_small': 'EORM-style text (small)',
          'text_large': 'EORM-style text (large)'}


def row_names(groups):
    """{run group: the name of its rows} of a table's {run group: checkpoint paths}. A group train.py named (its folder
    is train.run_name's) is named by the settings that set it apart from the table's other such groups, those they all
    share (the config's schedule, say) left out: a run alone, or the config's own beside its ablations, reads as its
    verifier (hsrm: 'HSRM'), an ablation as e.g. 'hsrm_loss-bce'. A group named otherwise (text_small, a study's
    variant, a run of an older name), or two that would read alike, by its folder (PRETTY's name where it has one)."""
    named = {}
    for g, paths in groups.items():
        ck = read_checkpoint(paths[0], mmap=True)
        tc = ck.get('train_config') or {}
        if 'verifier' in tc and train.run_name(tc, ck['spec']['layers']) == os.path.basename(
                os.path.dirname(paths[0])):
            named[g] = tc
    items = lambda tc: {(k, json.dumps(v)) for k, v in train.settings(tc).items()}  # noqa: E731
    shared = set.intersection(*map(items, named.values())) if named else set()
    apart = {g: train.run_name({**train.DEFAULTS, **{k: json.loads(v) for k, v in items(tc) - shared},
                                'verifier': tc['verifier'], 'seed': 0}).removesuffix('_seed0')
             for g, tc in named.items()}
    names = {}
    for g in groups:
        n = apart.get(g) if list(apart.values()).count(apart.get(g)) == 1 else g
        names[g] = PRETTY.get(n, n)
    return names


DEEPCONF_PRETTY = {'deepconf_mean': 'DeepConf mean confidence', 'deepconf_tail': 'DeepConf tail confidence',
                   'deepconf_bottom10': 'DeepConf bottom-10% group confidence',
                   'deepconf_lowest': 'DeepConf lowest group confidence'}


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
                              'auroc': np.stack([p['auroc'] for p in pp]) if all(p['auroc'] is not None for p in pp)
                              else None}
    return row


# a difference is called beyond (bold) only where its interval resamples at least this many units (groups, or problems
# where each is its own): below it even every unit on one side is no evidence (a two-sided sign test gives 2 / 2^5 =
# 0.0625 at 5 units), yet a bootstrap interval over units all on one side always excludes 0 (4 problems against a
# reference tied at the mean of many selectors: every difference one way, a narrow or zero-width interval)
MIN_UNITS = 6

# differences are taken against these rows (by type): (the best-of-N reference, the AUROC reference). The best free
# selector on validation may be a vote, which ranks nothing: its AUROC side is the free scorer best by validation AUROC.
# The paper's reference is a single scorer: its AUROC side is its own.
REFS = {'majority': ('vote', 'vote'), 'best_free_val': ('free_best_val', 'free_best_val_auroc'),
        'paper': ('free_best_val_single', 'free_best_val_single')}


def add_intervals(rows, n, n_boot, seed, groups=None):
    """Every row with per-problem values gets acc_ci (best-of-n), acc_ci_at {k: ...} (every N), auroc_ci,
    and under 'vs' its paired difference against each REFS row present: {ref: {'acc', 'acc_ci', 'auroc',
    'auroc_ci'}} (observed difference, and the interval of the differences over the same draws; best-of-N against
    the reference's best-of-N row, AUROC against its AUROC row); under 'vs_at' the best-of-N differences at every N:
    {ref: {'acc': {k: ...}, 'acc_ci': {k: ...}}}. groups [P] (tasks.group_key of each problem) or None: where groups
    hold several problems the draws resample groups (bestofn.boot_draws), and each difference in 'vs' also carries
    its problem-resampled interval ('acc_ci_problems', 'auroc_ci_problems'). Each row gets the number of units its
    intervals resampled ('units', and 'units_problems' where groups were): under MIN_UNITS no Δ is bold (fmt_ci)."""
    rows = [r for r in rows if r.get('per_problem')]
    if not rows:
        return
    P = rows[0]['per_problem']['acc_at'][n].shape[1]
    grouped = groups is not None and len(set(groups)) < P
    draws = {'': boot_draws(P, n_boot, seed, groups)} | ({'_problems': boot_draws(P, n_boot, seed)} if grouped else {})
    units = {'': len(set(groups)) if grouped else P, '_problems': P}
    find = lambda t: next((r for r in rows if r['type'] == t), None)  # noqa: E731
    refs = {name: (find(ta), find(tu)) for name, (ta, tu) in REFS.items()}
    for key, w in draws.items():
        b = {id(r): {'acc_at': {k: boot_means(v, w, seed) for k, v in r['per_problem']['acc_at'].items()
                                if key == '' or k == n},
                     'auroc': None if r['per_problem']['auroc'] is None
                     else boot_means(r['per_problem']['auroc'], w, seed)}
             for r in rows}
        for r in rows:
            br = b[id(r)]
            if key == '':
                r['acc_ci'], r['acc_ci_at'] = ci(br['acc_at'][n]), {k: ci(x) for k, x in br['acc_at'].items()}
                r['auroc_ci'], r['vs'], r['vs_at'] = None if br['auroc'] is None else ci(br['auroc']), {}, {}
            r['units' + key] = units[key]
            for name, (ra, ru) in refs.items():
                if ra is not None:
                    d = r['vs'].setdefault(name, {})
                    d['acc'], d['acc_ci' + key] = r['acc'] - ra['acc'], ci(br['acc_at'][n] - b[id(ra)]['acc_at'][n])
                    if key == '':
                        ks = [k for k in br['acc_at'] if k in b[id(ra)]['acc_at']]
                        r['vs_at'][name] = {'acc': {k: r['acc_at'][k] - ra['acc_at'][k] for k in ks},
                                            'acc_ci': {k: ci(br['acc_at'][k] - b[id(ra)]['acc_at'][k]) for k in ks}}
                if ru is not None and br['auroc'] is not None and b[id(ru)]['auroc'] is not None:
                    r['vs'].setdefault(name, {}).update({'auroc': r['auroc'] - ru['auroc'],
                                                         'auroc_ci' + key: ci(br['auroc'] - b[id(ru)]['auroc'])})


def restrict(row, mask, n):
    """A row's method, type and metrics on the problems where mask [P] holds: its per-problem values sliced (best-of-n
    and AUROC), their means recomputed."""
    acc, au = row['per_problem']['acc_at'][n][..., mask], row['per_problem']['auroc']
    au = None if au is None else au[..., mask]
    with warnings.catch_warnings():
        warnings.simplefilter('ignore', RuntimeWarning)  # no problem of the part with both labels: NaN
        auroc = None if au is None else float(np.nanmean(au))
    return {'method': row['method'], 'type': row['type'], 'n_runs': row.get('n_runs', 1), 'acc': float(np.mean(acc)),
            'acc_at': {n: float(np.mean(acc))}, 'auroc': auroc, 'per_problem': {'acc_at': {n: acc}, 'auroc': au}}


# the rows broken down by part (breakdown): the references and the learned verifiers
BREAKDOWN_TYPES = ('vote', 'free_best_val', 'free_best_val_auroc', 'verifier', 'verifier_vote', 'prm', 'prm_vote')


def breakdown(rows, kinds, groups, n, n_boot, seed):
    """The best-of-n differences by part: kinds [P] ({kind: part} of each problem: part_kinds), groups [P] (its
    tasks.group_key) -> {kind: [{'part', 'n_problems', 'n_groups', 'rows': [BREAKDOWN_TYPES rows restricted to the
    part, with add_intervals' intervals and Δ; groups resampled within the part]}]}; a kind with a single part is
    left out (the whole table is that part)."""
    groups = np.asarray(groups)
    out = {}
    for kind in dict.fromkeys(k for ks in kinds for k in ks):
        labels = np.array([ks.get(kind, '(none)') for ks in kinds])
        parts = sorted(set(labels.tolist()))
        if len(parts) < 2:
            continue
        out[kind] = []
        for part in parts:
            mask = labels == part
            sub = [restrict(r, mask, n) for r in rows if r['type'] in BREAKDOWN_TYPES and r.get('per_problem')]
            add_intervals(sub, n, n_boot, seed, groups[mask])
            out[kind].append({'part': part, 'n_problems': int(mask.sum()), 'n_groups': len(set(groups[mask])),
                              'rows': sub})
    return out


def part_kinds(kinds, index, index_parts=()):
    """{kind: part} of one problem the table is broken down by: kinds (tasks.problem_kinds: a synthetic question's
    operator pattern, a word problem's family, ...) and, under the kind 'index range', the index_parts range ([(name,
    lo, hi)]: dataset index ranges, inclusive) its index falls in."""
    return {**kinds, **{'index range': name for name, lo, hi in index_parts if lo <= index <= hi}}


def for_json(obj):
    """obj without its 'per_problem' entries (numpy arrays, used for the intervals only)."""
    if isinstance(obj, dict):
        return {k: for_json(v) for k, v in obj.items() if k != 'per_problem'}
    return [for_json(v) for v in obj] if isinstance(obj, (list, tuple)) else obj


# -----------------------------------------------------------------------------
# the free side: every free selector, and the best of them chosen on validation (the reference)


FREE_TIES = 'mean'  # the tie rule of the validation choices: tied selectors count as their mean (a uniform pick among
                    # them)


def free_scores(problems, cfg, combo=None):
    """{name: per-problem score arrays} of every free scorer: bestofn.py's cheap scorers, DeepConf's four
    confidences (when the candidates store them), and the fitted free-scorer combo (norm from bestofn.combo_fit)."""
    out = {k: cheap_scores(problems, k) for k in CHEAP_SCORERS}
    if has_confidences(problems):
        out |= {k: deepconf_scores(problems, k, cfg['deepconf_window'], cfg['deepconf_tail']) for k in DEEPCONF_SCORERS}
    if combo is not None:
        out['combo'] = [np.array([combo_score(c, combo) for c in p['candidates']]) for p in problems]
    return out


def free_selectors(pool, ns, n, scores, temps, cfg):
    """{name: (type, metrics)} of every free selector on one pool: majority vote, best-of-N by each free scorer,
    each scorer's weighted vote at its temperature temps[name] (None: no vote), DeepConf's filtered votes."""
    out = {'majority vote': ('vote', per_problem_run({k: votes_at(pool, k) for k in ns}, n=n))}
    if cfg.get('answer_agreement'):  # its picks are the vote's (bestofn.answer_agreement), its ranking its own
        out['answer agreement'] = ('agreement', per_problem_run(out['majority vote'][1]['per_problem']['acc_at'],
                                                                problem_aurocs(answer_agreement(pool), pool), n=n))
    for name, sc in scores.items():
        kind = 'deepconf' if name in DEEPCONF_SCORERS else 'combo' if name == 'combo' else 'cheap'
        m = scored_metrics(sc, pool, ns, temps.get(name), vote=temps.get(name) is not None, where=f'free scorer {name}',
                           n=n)
        out[name] = (kind, m)
        if temps.get(name) is not None:
            out[f'{name} + weighted vote'] = ('free_vote',
                                              per_problem_run(m['per_problem']['vote_at'], n=n, temp=temps[name],
                                                              scorer=name))
    conf = {k: scores[k] for k in DEEPCONF_SCORERS if k in scores}
    if conf:
        votes = [('deepconf_lowest', 1.0)] + [(k, e) for k in ('deepconf_bottom10', 'deepconf_tail', 'deepconf_lowest')
                                              for e in cfg['deepconf_etas']]
        for k, eta in votes:
            v = {m: votes_at(pool, m, conf[k], eta=eta) for m in ns}
            name = f"DeepConf vote ({DEEPCONF_PRETTY[k][9:]}" + ('' if eta == 1.0 else f', top {100 * eta:g}%') + ')'
            out[name] = ('deepconf_vote', per_problem_run(v, n=n, scorer=k, eta=eta))
    return out


FREE_PRETTY = {**CHEAP_PRETTY, **DEEPCONF_PRETTY, 'combo': 'Free-scorer combo (fitted on training problems)',
               'majority vote': 'Majority vote (extracted answers)',
               'answer agreement': "Answer agreement (share of candidates with its answer; majority vote's picks)"}


def free_name(key):
    """A free selector's name in the table (free_selectors' key: a scorer, '<scorer> + weighted vote', a vote)."""
    base = key.removesuffix(' + weighted vote')
    return FREE_PRETTY.get(base, base[0].upper() + base[1:]) + key[len(base):]


def _joined(names):
    """One name for several rows alike: their shared first and last words once, the rest joined by ' / '
    ('DeepConf mean / tail confidence')."""
    if len(names) == 1:
        return names[0]
    w = [x.replace('(', '( ').split(' ') for x in names]  # '(' a word of its own: 'vote (' can be shared
    pre = next((i for i in range(min(map(len, w))) if len({tuple(x[:i + 1]) for x in w}) > 1), min(map(len, w)))
    suf = next((i for i in range(min(map(len, w)) - pre) if len({tuple(x[len(x) - i - 1:]) for x in w}) > 1),
               min(map(len, w)) - pre)
    mid = ' / '.join(' '.join(x[pre:len(x) - suf]) for x in w)
    return ' '.join(w[0][:pre] + [mid] + w[0][len(w[0]) - suf:]).replace('( ', '(') + ' (the same picks here)'


def _same_run(a, b):
    """Whether two selectors' metrics give the same row, problem by problem: best-of-N at every N and AUROC."""
    pa, pb = a['per_problem'], b['per_problem']
    if pa['acc_at'].keys() != pb['acc_at'].keys() or (pa['auroc'] is None) != (pb['auroc'] is None):
        return False
    return (all(np.array_equal(pa['acc_at'][k], pb['acc_at'][k]) for k in pa['acc_at'])
            and (pa['auroc'] is None or np.array_equal(pa['auroc'], pb['auroc'], equal_nan=True)))


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
    """bestofn.combo_fit's weights from train_dir's training problems (split_problems' train side: validation left
    out; a list of split dirs: pooled, each cut alike), or None when none of them has both a correct and a wrong
    candidate."""
    tr = [p for d in ([train_dir] if isinstance(train_dir, str) else train_dir)
          for p in load_split(d, files=split_problems(problem_files(d), val_frac, val_seed, k)[0])]
    mixed = any(len({bool(c['correct']) for c in p['candidates']}) == 2 for p in tr)
    return combo_fit(tr) if mixed and has_confidences(tr) else None  # it weighs DeepConf's mean confidence too


def free_rows(problems, pool, ns, n, val, cfg, combo=None):
    """free_rows_of on the problems' free scores (free_scores): val (problems, pool, n) of the validation split or
    None; combo: bestofn.combo_fit's weights from training problems (None: no combo)."""
    combo = combo if has_confidences(problems) else None  # it weighs DeepConf's mean confidence: an old split has none
    val = None if val is None else (free_scores(val[0], cfg, combo), val[1], val[2])
    return free_rows_of(free_scores(problems, cfg, combo), pool, ns, n, val, cfg,
                        None if combo is None else dict(zip(combo['names'], combo['weight'])))


def free_rows_of(scores, pool, ns, n, val, cfg, weights=None):
    """(rows, choice) of the free side, given what the learned verifiers get: single-pass, every free selector
    (free_selectors; each scorer's weighted vote has its temperature chosen on validation from cfg['vote_temps'], as
    a verifier's), and the references. 'free_best_val': the selector with the best validation best-of-N (votes
    included); 'free_best_val_auroc': the scorer with the best validation AUROC (a vote ranks nothing);
    'free_best_val_single': the paper's kind of reference, the single free scorer (a cheap scorer or a DeepConf
    confidence: no vote, no fitted combo) with the best validation best-of-N; ties count as their mean (FREE_TIES).
    'free_best_test' / 'free_best_test_auroc': the same chosen on the evaluation split itself (optimistic: no user can
    choose them in advance). scores: {free scorer: per-problem score arrays} (every free scorer, the combo's under
    'combo': free_scores); val: (its scores, pool, n) on the validation split, or None
    (no weighted votes, no validation reference); weights: the combo's {scorer: weight}, shown in its row. choice:
    what was chosen, the tied names and every selector's validation accuracy and AUROC."""
    single = np.array([q['labels'].mean() for q in pool])
    rows = [make_row('Single-pass (expected accuracy of one sample)', 'single',
                     [per_problem_run({k: single for k in ns}, n=n)])]
    temps, choice = {}, {}
    if val is not None:
        vscores, vpool, vn = val
        temps = {k: choose_temp(v, vpool, vn, cfg['vote_temps'], where=f'free scorer {k} (validation)')
                 for k, v in vscores.items()}
        vsel = {k: m for k, (_, m) in free_selectors(vpool, [vn], vn, vscores, temps, cfg).items()}
        choice = {'val_acc': {k: m['acc'] for k, m in vsel.items()},
                  'val_auroc': {k: m['auroc'] for k, m in vsel.items() if 'auroc' in m}}
    sel = free_selectors(pool, ns, n, scores, temps, cfg)
    # selectors alike: the same rule on scores equal on every candidate (DeepConf's group and tail confidences when no
    # trace is longer than the window), so the same row problem by problem: one row, named after all of them
    same = {k: next(j for j in scores if all(np.array_equal(a, b) for a, b in zip(scores[k], scores[j])))
            for k in scores}
    rule = lambda k, m: (sel[k][0], same.get(m.get('scorer', k), k), m.get('temp'), m.get('eta'))  # noqa: E731
    alike = {}
    for k, (kind, m) in sel.items():
        first = next((f for f in alike if rule(f, sel[f][1]) == rule(k, m) and _same_run(sel[f][1], m)), k)
        alike.setdefault(first, []).append(k)
    name = {k: _joined([free_name(j) for j in ks]) for ks in alike.values() for k in ks}
    for k, ks in alike.items():
        kind, m = sel[k]
        extra = {'weights': weights} if k == 'combo' and weights is not None else {}
        rows.append(make_row(name[k], kind, [m], scorer=k, temp=m.get('temp'), **extra,
                             **({'alike': ks} if len(ks) > 1 else {})))
    scorers = [k for k, (kind, _) in sel.items() if 'auroc' in sel[k][1]]
    pickers = [k for k, (kind, _) in sel.items() if kind != 'agreement']  # agreement picks as the vote: not twice
    singles = [k for k, (kind, _) in sel.items() if kind in ('cheap', 'deepconf')]  # one scorer: no vote, no fit
    picks = {'free_best_test': _best({k: sel[k][1] for k in pickers}, 'acc', ties=True),
             'free_best_test_auroc': _best({k: sel[k][1] for k in scorers}, 'auroc', ties=True)}
    if val is not None:
        picks = {'free_best_val': _best({k: vsel[k] for k in pickers}, 'acc', ties=True),
                 'free_best_val_auroc': _best({k: vsel[k] for k in scorers}, 'auroc', ties=True),
                 'free_best_val_single': _best({k: vsel[k] for k in singles}, 'acc', ties=True), **picks}
    title = {'free_best_val': 'Best free selector on validation',
             'free_best_val_auroc': 'Best free scorer on validation by AUROC',
             'free_best_val_single': "Best single free scorer on validation, no vote (the paper's reference)",
             'free_best_test': 'Best free selector on test (optimistic)',
             'free_best_test_auroc': 'Best free scorer on test by AUROC (optimistic)'}
    for kind, names in picks.items():
        run = sel[names[0]][1] if len(names) == 1 else _mean_run([sel[k][1] for k in names], n)
        rows_ = list(dict.fromkeys(name[k] for k in names))  # the tied rows (alike selectors are one)
        tie = f" (tie: mean of {' / '.join(rows_)})" if len(rows_) > 1 else f': {rows_[0]}'
        rows.append(make_row(title[kind] + tie, kind, [run], scorer=' / '.join(names), tied=names))
        choice[kind] = names
    return rows, choice


# -----------------------------------------------------------------------------
# formatting


def fmt(v, sd, pct):
    if v is None or (isinstance(v, float) and np.isnan(v)):
        return '–'
    s = f'{100 * v:.2f}' if pct else f'{v:.3f}'
    return s + (f' ± {100 * sd:.2f}' if pct else f' ± {sd:.3f}') if sd is not None else s


def beyond(interval, units=None):
    """+1 / -1 where a difference's interval lies above / below 0 and it resampled at least MIN_UNITS units (units
    None: unknown), else 0: what bold means in every table."""
    if not interval or (units is not None and units < MIN_UNITS):
        return 0
    return 1 if interval[0] > 0 else -1 if interval[1] < 0 else 0


def fmt_ci(v, interval, pct, diff=False, units=None):
    """'44.0 [38.2, 49.8]' (pct: points, 1 decimal; else 3 decimals); diff: signed, and bold where the
    interval excludes zero and resampled at least MIN_UNITS units (units: how many it resampled; None: unknown)."""
    if v is None or np.isnan(v):
        return '–'
    f = (lambda x: f"{100 * x:{'+' if diff else ''}.1f}") if pct else (lambda x: f"{x:{'+' if diff else ''}.3f}")
    s = f(v) + (f' [{f(interval[0])}, {f(interval[1])}]' if interval else '')
    return f'**{s}**' if diff and beyond(interval, units) else s


def fmt_vs(r, ref, key, pct):
    """A row's difference against reference row ref ('ref.' on the reference itself, '–' without one)."""
    if r['type'] == REFS[ref][0 if key == 'acc' else 1]:
        return 'ref.'
    d = r.get('vs', {}).get(ref, {})
    return fmt_ci(d.get(key), d.get(key + '_ci'), pct, diff=True, units=r.get('units'))


def fmt_num(x, unit='', giga='G'):
    if x is None:
        return '–'
    for div, suf in ((1e12, 'T'), (1e9, giga), (1e6, 'M'), (1e3, 'k')):
        if abs(x) >= div:
            return f'{x / div:.3g}{suf}{unit}'
    return f'{x:.3g}{unit}'
