"""
Evaluation: HSRM and every baseline on one evaluation split, side by side, in one table.

    python evaluate.py config/gsm8k_1p7b.py                       # every ckpt under {out_dir}/verifiers/
    python evaluate.py config/gsm8k_1p7b.py --eval_dir=out/olympiadbench_1p7b/eval   # zero-shot transfer

Scores every candidate of {eval_dir} with each checkpoint (batched, cached under {out_dir}/scores/),
adds the free scorers (scorers.py), the PRM's cached scores (baselines.py, prm.py), majority and verifier-weighted votes,
single-pass and oracle, and writes {out_dir}/results[_<tag>].json and .md (+ plots with matplotlib).
Best-of-N, votes and temperatures are chosen on nothing from the test split except where a row says
"optimistic". Validation choices (vote temperatures, the best free selector) use the grouped val split
of {train_dir} (selection.split_problems, same val_frac / val_seed as training).
"""
import json
import os

import numpy as np
import torch

from configurator import check_positive, configure, knobs
from model import (atomic_write_json, cli, count_params, input_lengths, load_checkpoint, load_split, read_checkpoint, reads,
                   resolve_device, verifier_flops)
from prm import PRM_7B_ARCH, prm_flops, prm_tokens_estimate
from prm import prm_reduce as reduce_steps  # the name prm_reduce is this stage's config key
from scorers import has_confidences
from tasks import check_unseen
from selection import (FREE_TIES, PRETTY, add_intervals, build_pool, cached_scores, checkpoint_paths, choose_temp, fit_combo,
                       fmt, fmt_ci, fmt_num, fmt_vs, for_json, free_rows, make_row, oracle_sub, per_problem_run, reference_lines,
                       run_dirs, run_group, scored_metrics, val_splitter, yerr)

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
# output: markdown tables laid out like the paper's, and plots


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
        shown = [r for r in rows if r['type'] not in ('cheap', 'deepconf', 'deepconf_vote', 'combo', 'free_vote')]
        for i, r in enumerate(shown):
            y = [r['acc_at'][k] for k in res['ns']]
            x = np.array(res['ns']) * 1.03 ** (i - (len(shown) - 1) / 2)  # side by side on the log axis: bars stay apart
            ax.errorbar(x, [100 * v for v in y], yerr=yerr(y, [r.get('acc_ci_at', {}).get(k) for k in res['ns']]),
                        marker='o', ms=3, lw=1, capsize=2, label='Oracle pass@N' if r['type'] == 'oracle' else r['method'])
        ax.set(xscale='log', xlabel='N (candidates)', ylabel='accuracy (%), 95% CI',
               title=f"best-of-N, {res['dataset']}")
        ax.minorticks_off()
        ax.set_xticks(res['ns'], [str(k) for k in res['ns']])
        save(fig, 'bon_vs_n', ax)
    by_name = {r['method']: r for r in rows}
    learned = [(c, by_name[c['verifier']]) for c in res['cost'] if c['verifier'] in by_name]
    if learned:
        free = [r for r in rows if r['type'] in ('vote', 'cheap', 'deepconf', 'combo', 'free_vote', 'deepconf_vote')]
        best = next((r['tied'] for r in rows if r['type'] == 'free_best_val'), [])
        fig, (a0, a1) = plt.subplots(1, 2, figsize=(9, 4.5), sharey=True, gridspec_kw={'width_ratios': [2, 3]})
        y = [r['acc'] for r in free]
        a0.errorbar(range(len(free)), [100 * v for v in y], yerr=yerr(y, [r.get('acc_ci') for r in free]),
                    fmt='o', ms=3, capsize=2, color='k')
        a0.set_xticks(range(len(free)), [r['method'] + (' (chosen on val)' if r.get('scorer', 'majority vote') in best else '')
                                         for r in free], rotation=90, fontsize=6)
        a0.set(title='free scorers (0 verifier FLOPs)', ylabel=f'Bo{n} accuracy (%), 95% CI', xlim=(-0.7, len(free) - 0.3))
        for c, r in learned:
            vote = by_name.get(f"{r['method']} + weighted vote")
            h = a1.errorbar([c['flops']], [100 * r['acc']], yerr=yerr([r['acc']], [r.get('acc_ci')]), fmt='o', capsize=3,
                            label=r['method'])
            if vote:  # the same verifier's weighted vote: same cost, open marker
                a1.errorbar([c['flops'] * 1.15], [100 * vote['acc']], yerr=yerr([vote['acc']], [vote.get('acc_ci')]),
                            fmt='o', mfc='white', capsize=3, color=h[0].get_color(), label=vote['method'])
        a1.set(xscale='log', xlabel='verifier FLOPs per candidate', title=f"learned verifiers, {res['dataset']}")
        a1.xaxis.set_minor_formatter(plt.NullFormatter())  # labelled minor ticks collide within a decade
        a1.margins(x=0.3)
        reference_lines((a0, a1), [r for r in rows if r['type'] in ('single', 'vote', 'oracle')])
        save(fig, 'acc_vs_flops', a1)
    return [f'plot: {f}' for f in files]


# -----------------------------------------------------------------------------
# rows of the table: the PRM and the learned verifiers (the free side is selection.free_rows)


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
