"""
Evaluation: HSRM and every baseline on one evaluation split, side by side, in one table.

    python evaluate.py config/gsm8k_1p7b.py                       # every ckpt under {out_dir}/verifiers/
    python evaluate.py config/gsm8k_1p7b.py --eval_dir=out/olympiadbench_1p7b/eval   # zero-shot transfer

The verifiers the config files and train.py's flags name (train.py's run of those settings at its seeds, found by what
its runs' config.json hold; baselines.py's text verifiers, where the files set text_sizes or one was trained) must be
there and finished, else it stops with the command that trains them; another unfinished run, or a seed the config
does not name, is left out with a note. A checkpoint that trained on the split's groups, on states of another weights
dtype, or on data its split dirs no longer hold (grown, relabelled) is refused (tables.check_checkpoint), and so is a
split whose files do not cover its range (store.check_complete).
Scores every candidate of {eval_dir} with each checkpoint (batched, cached under {out_dir}/scores/),
adds the free scorers (bestofn.py) and the PRM's cached scores (baselines.py), and writes them, with each candidate's
answer, label and text, as the pools {out_dir}/pools[_<tag>]/ (candidates.jsonl.gz, meta.json: pools.POOL_COLUMNS).
The table is made from those files alone (pools.pool_table: majority and verifier-weighted votes, single-pass and
oracle, every interval), so `python pools.py {out_dir}/pools` prints it again in seconds; then
{out_dir}/results[_<tag>].json and .md (+ plots with matplotlib), and the config's own verifier, its seed of best
validation AUROC (sample.py's), as one file sample.py answers with on a clone without the run: pools/hsrm.pt
(pools.export_verifier). Best-of-N, votes and temperatures are chosen on nothing from the test split except where a
row says "optimistic". Validation choices (vote temperatures, the best free selector) use the grouped val split
of {train_dir} (store.split_problems, same val_frac / val_seed as training).

The table's machinery (score caches, a run's dirs, checkpoints and validation splits, the free rows and the reference
chosen on validation, rows with their paired intervals) is tables.py's, which the studies and sample.py share; the
pools and the table made from them alone (the markdown too) are pools.py's; the plots are plots.py's; the best-of-N
maths under both (pools, rules, votes, AUROC, bootstrap) is bestofn.py's. Here: this stage's knobs, the scores of
the PRM and the learned verifiers, the notes and the cost table.
"""
import json
import os
import sys

import numpy as np

import baselines
import train
from bestofn import has_confidences
from configurator import GIVEN, configure, knobs, read_config_file, split_argv
from model import PRM_7B_ARCH, count_params, input_lengths, lm_flops, prm_tokens_estimate, reads, verifier_flops
from model import prm_reduce as reduce_steps  # the name prm_reduce is this stage's config key
from machine import (check_positive, check_writable, cli, git_state, head_dim, n_params, resolve_device,
                     set_threads, shown_path)
from generator import generator_config, generator_name, matmul_shapes
from store import atomic_write_json, load_checkpoint, load_split, problem_files
from tables import (FREE_TIES, MIN_UNITS, best_seed, cached_scores, check_checkpoint, checkpoint_paths, fit_combo,
                    fmt_ci, fmt_num, for_json, free_name, free_scores, row_names, run_dirs, run_group, val_splitter)
from plots import make_plots
from pools import (META_FILE, POOLS_FILE, SHIPPED_FILE, export_verifier, pool_rows, pool_table, read_pools,
                   render_table, scaling_ns, write_pools)

# -----------------------------------------------------------------------------
# config (options in the comments)
out_dir = 'out/demo'        # the run: scores {out_dir}/eval, reads {out_dir}/verifiers/*/ckpt.pt, writes
                            # {out_dir}/results*
eval_dir = ''               # '' = {out_dir}/eval; another run's eval dir = zero-shot transfer (results_on_<run>.*)
train_dir = ''              # '' = {out_dir}/train: its validation split picks vote temperatures and the best free
                            # selector
ckpts: list[str] = []      # [] = every {out_dir}/verifiers/*/ckpt.pt; else ckpt paths or globs (e.g. another run's
                            # verifiers/*/ckpt.pt)
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
answer_agreement = False    # True: answer agreement (each candidate's share of its problem's candidates giving its
                            # answer) among the free scorers; its picks are majority vote's, its ranking its own
ship: str = None            # the run whose seed of best validation AUROC evaluate.py ships as {out_dir}/pools/hsrm.pt
                            # (sample.py's), e.g. 'hsrm_l12_mean'; None = the config's own run, else the run named
                            # 'hsrm', else the first that reads hidden states
index_parts: list = []      # [(name, lo, hi), ...]: dataset index ranges (inclusive) the table is also broken down by,
                            # e.g. an evaluation set grown after a result: the part fixed before it and the part added
# -----------------------------------------------------------------------------
DEFAULTS = knobs(globals())  # the knobs above as a dict

# -----------------------------------------------------------------------------
# output: markdown tables laid out like the paper's (the plots: plots.make_plots)


def render_markdown(res):
    """results.md: the table (pools.render_table, the notes below its main table), then the verifiers' cost."""
    out = [render_table(res, res['notes']).rstrip('\n'), '', '### Verifier cost', '',
           '| Verifier | Params | Weights (fp16) | Input | FLOPs / candidate | Time / candidate '
           '| Extra generator passes |', '|---|---:|---:|---|---:|---:|---|']
    g = res.get('generator_cost')
    if g:
        out.append(f"| Generator {generator_name(g['generator'])} (sampling the candidate: not a verifier) | "
                   f"{fmt_num(g['params'], giga='B')} | {fmt_num(g['params'] * 2, 'B')} | prompt + completion (mean "
                   f"{g['tokens']:.0f} tokens, the prompt's estimated) | {fmt_num(g['flops'])} | – | – |")
    for c in res['cost']:
        t = f"{1e3 * c['seconds_per_candidate']:.3g} ms ({c['device']})" if c.get('seconds_per_candidate') else '–'
        out.append(f"| {c['verifier']} | {fmt_num(c['params'], giga='B')} | {fmt_num(c['params'] * 2, 'B')} | "
                   f"{c['input']} | {fmt_num(c['flops'])} | {t} | {c['extra_passes']} |")
    return '\n'.join(out) + '\n'


# -----------------------------------------------------------------------------
# rows of the table: the PRM and the learned verifiers (the free side is tables.free_rows)


def generator_cost(problems, name):
    """What sampling one candidate costs the generator `name`, counted as the verifiers' and the PRM's FLOPs are: one
    forward over the prompt and the completion (model.lm_flops: the linear layers, LM head included, and
    attention), the prompt's tokens estimated from its characters at the completions' tokens per character.
    {'generator', 'params', 'flops', 'tokens'}, or None without the generator's config."""
    config = generator_config(name)
    if config is None:
        return None
    arch = {'linear_params': sum(o * i * k for o, i, k in matmul_shapes(config)),
            'n_layer': config.num_hidden_layers, 'd_attn': config.num_attention_heads * head_dim(config)}
    cands = [(p, c) for p in problems for c in p['candidates']]
    tpc = sum(len(c['token_ids']) for _, c in cands) / max(1, sum(len(c['text']) for _, c in cands))
    L = [round(tpc * len(p.get('prompt') or p['question'])) + len(c['token_ids']) for p, c in cands]
    return {'generator': name, 'params': n_params(config), 'flops': float(np.mean([lm_flops(arch, x) for x in L])),
            'tokens': float(np.mean(L))}


def prm_column(eval_dir, problems, how):
    """The PRM's candidate scores from the per-step probabilities baselines.py cached, reduced by how (per problem;
    None without a complete cache), its row's name and size ({'method', 'params'}), its cost row and a note when the
    cache is incomplete. Cost: FLOPs of one forward over each candidate's whole PRM input (system prompt, question,
    steps), attention included, as the verifiers' are counted; with the input lengths and architecture the cache
    holds, else estimated (Qwen2.5-Math-PRM-7B's figures when it was not run)."""
    path, prm, sc, info, note = os.path.join(eval_dir, 'prm_scores.json'), None, None, None, None
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
        info = {'method': f"{prm['model'].rstrip('/').split('/')[-1]} ({how} step)", 'params': prm.get('n_params')}
    arch, tokens = (prm or {}).get('arch') or PRM_7B_ARCH, (prm or {}).get('tokens') or {}
    exact = 'arch' in (prm or {}) and all(len(tokens.get(p['key'], [])) == len(p['candidates']) for p in problems)
    if exact:
        L = [x for p in problems for x in tokens[p['key']]]
    else:
        cands = [c for p in problems for c in p['candidates']]
        tpc = sum(len(c['token_ids']) for c in cands) / max(1, sum(len(c['text']) for c in cands))
        L = [prm_tokens_estimate(p['question'], c['text'], len(c['token_ids']), tpc) for p in problems
             for c in p['candidates']]
    cost = {'verifier': info['method'] if prm else 'Qwen2.5-Math-PRM-7B (not run)',
            'params': (prm or {}).get('n_params') or arch['n_params'],
            'input': "L tokens: system prompt + question + steps (mean "
                     f"{np.mean(L):.0f}{'' if exact else ', estimated'})",
            'flops': float(np.mean([lm_flops(arch, x) for x in L])),
            'seconds_per_candidate': (prm or {}).get('seconds_per_candidate'), 'device': (prm or {}).get('device'),
            'extra_passes': 'generator-scale re-encoding', 'acc': None}  # acc: its row's, once the table is made
    return sc, info, cost, note


def verifier_scores(paths, problems, val_split, cfg, dirs, dev):
    """Score with every checkpoint (cached) the evaluation split and its own validation split (val_split(val_frac,
    val_seed, k) -> (problems, pool, n) of train_dir's validation split as that checkpoint was trained with, or None).
    -> (arms: one per run name, HSRM last, as meta.json holds them ({'group', 'method', 'kind', 'params', 'n_train',
    'runs': [{'column', 'ckpt', 'seed', 'params', 'n_train', 'seconds_per_candidate', 'device', 'flops'}]}), scores
    {'eval' / 'val': {column: {problem key: scores}}}, the validation problems scored, a cost row per arm, the split
    dirs they trained on). dirs: (eval_dir, train_dir, cache_dir)."""
    eval_dir, train_dir, cache_dir = dirs
    groups, arms, cost, trained_on, scores, val_problems = {}, [], [], set(), {'eval': {}, 'val': {}}, {}
    for path in paths:
        groups.setdefault(run_group(path), []).append(path)
    names = row_names(groups)
    for g, gpaths in sorted(groups.items(), key=lambda kv: (kv[0].startswith('hsrm'), kv[0])):  # HSRM last
        runs, arch = [], None
        for path in gpaths:
            model, ck = load_checkpoint(path, dev)
            a = (ck['spec']['kind'], json.dumps(ck['model_args'], sort_keys=True), ck['spec']['layers'],
                 ck['spec']['input_steps'])
            if arch is not None and a != arch:
                raise ValueError(f"{gpaths}: runs named {g} hold different verifiers ({arch} vs {a}); fix: give each "
                                 f"configuration its own run dir name")
            arch, tc = a, ck.get('train_config') or {}
            trained_on |= {shown_path(d) for d in train.train_dirs_now(tc, path)}
            col = f"{g}_seed{tc['seed']}" if tc.get('seed') is not None else f'{g}_run{len(runs)}'  # a pool column
            col += f'_{len(scores["eval"])}' if col in scores['eval'] else ''  # one seed twice: another run's
            sc, spc, where = cached_scores(model, path, problems, eval_dir, cache_dir, cfg['eval_batch_size'], dev)
            scores['eval'][col] = {p['key']: s for p, s in zip(problems, sc)}
            val = val_split(tc.get('val_frac', cfg['val_frac']), tc.get('val_seed', cfg['val_seed']),
                            tc.get('max_train_problems'))
            n_train = None  # K: the problems it trained on (its validation problems left out)
            if val is not None:
                vp = val[0]
                n_train = (tc.get('max_train_problems') or len(problem_files(train_dir))) - len(vp)
                vs = cached_scores(model, path, vp, train_dir, cache_dir, cfg['eval_batch_size'], dev)[0]
                scores['val'][col] = {p['key']: s for p, s in zip(vp, vs)}
                val_problems.update({p['key']: p for p in vp})
            lengths = [input_lengths(c, model.spec) for p in problems for c in p['candidates']]
            runs.append({'column': col, 'ckpt': path, 'seed': tc.get('seed'), 'params': count_params(model),
                         'n_train': n_train, 'seconds_per_candidate': spc, 'device': where,
                         'flops': float(np.mean([verifier_flops(model, S, T) for S, T in lengths]))})
        label, kind = names[g], arch[0]
        arms.append({'group': g, 'method': label, 'kind': kind, 'layers': arch[2], 'params': runs[0]['params'],
                     'n_train': runs[0]['n_train'], 'runs': runs})
        # what the last checkpoint of the group actually read (the runs of a group share the input spec)
        spec, inputs = model.spec, []
        if reads(kind, 'states'):
            gc = os.path.join(eval_dir, 'config.json')  # the extraction's cap (None: every step), then the verifier's
            stored = (json.load(open(gc)) if os.path.exists(gc) else {}).get('max_steps', 100)
            cap = min([x for x in (stored, spec.get('max_steps')) if x], default=None)
            inputs.append(f"S {f'≤ {cap}' if cap else '(every step)'} hidden states (mean "
                          f"{np.mean([S for S, _ in lengths]):.1f} read)")
        if reads(kind, 'tokens'):
            full = [len(c['token_ids']) for p in problems for c in p['candidates']] if not spec.get('tokenizer') else \
                [T for _, T in lengths]  # re-tokenized lengths are computed after the cut: count the cut below
            cut = sum(x > spec['max_tokens'] for x in full)
            inputs.append(f"T text tokens (mean {np.mean([T for _, T in lengths]):.0f} read, position table "
                          f"{spec['max_tokens']}" + (f", {cut} longer candidates read their last {spec['max_tokens']}"
                                                     if cut else '') + ')')
        cost.append({'verifier': label, 'params': runs[0]['params'],
                     'flops': float(np.mean([r['flops'] for r in runs])), 'input': ' + '.join(inputs),
                     'seconds_per_candidate': float(np.mean([r['seconds_per_candidate'] for r in runs])),
                     'device': runs[0]['device'], 'acc': None,  # acc: its row's, once the table is made
                     'extra_passes': 'text re-encoding' if reads(kind, 'tokens') else '0'})
    return arms, scores, list(val_problems.values()), cost, sorted(trained_on)


# -----------------------------------------------------------------------------
# the run: pools, rows, notes, then results[_on_<run>].{json,md} and plots


def split_config(split_dir):
    """The extraction's config.json of a split dir ({} when it has none)."""
    path = os.path.join(split_dir, 'config.json')
    return json.load(open(path)) if os.path.exists(path) else {}


def table_notes(cfg, sizes, n, train_dir, val):
    """The notes on how the table's pools, votes and validation choices are made."""
    notes = ["Best-of-N: the top-scored candidate's correctness; tied top scores count as the mean correctness of the "
             "tied candidates." + (f" Pools hold {'/'.join(map(str, sizes))} candidates, so best-of-N, votes and "
                                   "N-scaling "
             f"average {cfg['n_subsets']} random N-subsets per problem (seed {cfg['subset_seed']}, the same subsets "
             f"for every method, oracle pass@N included)." if sizes[-1] > n else ''),
             "Votes group the extracted answers by equivalence (grading.py's answers_equal); candidates without an "
             "answer do not vote; tied groups count as their mean correctness. The PRM-weighted vote sums PRM "
             "probabilities."]
    if val:
        notes.append(f"Validation choices use the val split of {train_dir} ({len(val[0])} problems, val_frac "
                     f"{cfg['val_frac']}, val_seed {cfg['val_seed']}) at best-of-{val[2]}, cut by group "
                     "(tasks.group_key: no validation question shares its numbers with a training one): the "
                     "weighted-vote temperature T of each run and of each free scorer (softmax(score / T) summed per "
                     f"answer group, T from {cfg['vote_temps']}; a run trained with max_train_problems=K picks T on "
                     "its own validation problems), and the best free selector: among majority vote, every free "
                     "scorer (cheap, DeepConf, the combo fitted on the training problems), each one's weighted vote "
                     "and DeepConf's votes, the best validation best-of-N (its AUROC side: the free scorer with the "
                     f"best validation AUROC); tied selectors count as their {FREE_TIES} (a uniform pick among them). "
                     f"'On test' picks on the evaluation split: optimistic, as in the paper.")
    else:
        notes.append(f'No labelled {train_dir}: no validation split, so no best-free-on-validation row and no weighted '
                     'votes.')
    return notes


def interval_notes(cfg, rows, boot):
    """The notes on AUROC, the seeds and the intervals; boot: the bootstrap's unit ('groups' or 'problems'), n_groups,
    n_problems. Where groups were resampled, each learned verifier's Δ against the reference with both intervals."""
    best_val = next((' / '.join(free_name(k) for k in r['tied']) for r in rows if r['type'] == 'free_best_val'), None)
    unit = (f"the evaluation split's {boot['n_groups']} groups (tasks.group_key: questions sharing their numbers are "
            f"one group; a drawn group brings all its problems, {boot['n_problems']} in all)"
            if boot['unit'] == 'groups' else
            "the problems (each its own group, tasks.group_key, so problems are the independent unit)")
    notes = ['Within-AUROC: per problem over its whole pool, mean over the problems with both correct and incorrect '
             'candidates. Learned verifiers: mean over seeds, one row per run name (the seed std is acc_std in the '
             'json).',
             f"[95% CI]: percentile bootstrap, {cfg['n_boot']} draws (boot_seed {cfg['boot_seed']}) of {unit} with "
             "replacement, the same draws for every method; a learned verifier's draw also resamples its seeds. "
             f"Δ: paired difference against majority vote and against the best free selector chosen on validation"
             + (f" ({best_val})" if best_val else " (none: no validation split)")
             + ", each with the interval of the paired differences; **bold** where that interval excludes 0."]
    units = boot['n_groups'] if boot['unit'] == 'groups' else boot['n_problems']
    if units < MIN_UNITS:  # a bootstrap over so few units excludes 0 whenever they all lie on one side
        notes.append(f"No Δ is bold: {units} {boot['unit']} are fewer than {MIN_UNITS}, too few to call a difference "
                     f"beyond (even all {units} on one side is p = {2 / 2 ** units:.3g} by a two-sided sign test, yet "
                     "a bootstrap interval over them then excludes 0); the intervals are shown as computed.")
    for r in rows:
        d = r.get('vs', {}).get('best_free_val', {})
        if r['type'] in ('verifier', 'verifier_vote', 'prm', 'prm_vote') and 'acc_ci_problems' in d:
            both = lambda k, pct: (  # noqa: E731
                f"{fmt_ci(d[k], d[k + '_ci'], pct, diff=True, units=r.get('units'))} resampling groups, "
                f"{fmt_ci(d[k], d[k + '_ci_problems'], pct, diff=True, units=r.get('units_problems'))} resampling "
                "problems")
            notes.append(f"{r['method']} against the best free selector on validation: Bo{cfg['n_eval']} Δ "
                         f"{both('acc', True)}" + (f"; AUROC Δ {both('auroc', False)}" if 'auroc_ci' in d else '')
                         + '.')
    return notes


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


def check_vote_temps(cfg):
    """ValueError naming the value and the fix unless vote_temps is a non-empty list of temperatures > 0 (a weighted
    vote sums softmax(score / T): T = 0 made NaN weights after every score was computed, an empty grid an argmax of
    nothing): before any work, here and in sample.py."""
    temp = lambda t: isinstance(t, (int, float)) and not isinstance(t, bool) and t > 0  # noqa: E731
    good = lambda ts: isinstance(ts, (list, tuple)) and ts and all(map(temp, ts))  # noqa: E731
    ts = cfg['vote_temps']
    if not good(ts):  # the fix: the good temperatures given, else the config files' grid, else the default
        fix = [t for t in ts if temp(t)] or (GIVEN['vote_temps'] if good(GIVEN.get('vote_temps')) else
                                             DEFAULTS['vote_temps'])
        bad = [t for t in ts if not temp(t)]
        raise ValueError(f"vote_temps={ts!r} " + (f"holds {bad[0]!r}, but a temperature must be > 0" if bad else
                                                   "is empty: the weighted vote has no temperature to choose")
                         + f" (softmax(score / T), T chosen on validation); fix: --vote_temps='{list(fix)}'")


def named_runs(argv, out_dir):
    """{run group: (seeds, the command that trains them, {seed: run dir})} of the verifiers a command line (argv: its
    config files and flags) names for out_dir, found by what their runs' config.json hold (train.find_runs): train.py's
    run of the training settings argv gives (one per K of max_train_problems) and baselines.py's text verifiers of each
    of text_sizes, as it trains them, where argv sets text_sizes or one is there; with train.py's seeds. A seed none of
    whose runs is there is at the folder its command would train."""
    key = lambda a: a[2:].split('=', 1)[0] if a.startswith('--') else None  # noqa: E731
    command = lambda stage, knobs: ' '.join([f'python {stage}'] + [  # noqa: E731
        a for a in argv if key(a) is None or key(a) in knobs]) if argv else f'python {stage} <config>'
    _, tc, bc = split_argv(argv, DEFAULTS, train.DEFAULTS, baselines.DEFAULTS)
    tc['out_dir'] = out_dir
    seeds, named = tc['seeds'] or [tc['seed']], {}
    ks = tc['max_train_problems']
    for k in ks if isinstance(ks, list) else [ks]:
        name, runs = train.find_runs({**tc, 'max_train_problems': k})
        named[name] = (seeds, command('train.py', train.DEFAULTS),
                       {s: os.path.join(out_dir, 'verifiers', f'{name}_seed{s}') for s in seeds} | runs)
    given = any(key(a) == 'text_sizes' or key(a) is None and 'text_sizes' in read_config_file(a) for a in argv)
    for size in bc['text_sizes']:
        runs = train.find_runs({**tc, **bc['text_train_overrides'], 'verifier': 'text', 'text_size': size})[1]
        if given or runs:
            named[f'text_{size}'] = (seeds, command('baselines.py', {**train.DEFAULTS, **baselines.DEFAULTS}),
                                     {s: os.path.join(out_dir, 'verifiers', f'text_{size}_seed{s}') for s in seeds}
                                     | runs)
    return named


def check_run(cfg):
    """The checks before any work (the knobs, the folders written) and the run's places: -> (eval_dir, train_dir,
    suffix of the results' names, the pools' dir, device)."""
    set_threads(cfg['threads'])
    check_positive(cfg, DEFAULTS,
                   ('n_eval', 'n_subsets', 'n_boot', 'eval_batch_size', 'deepconf_window', 'deepconf_tail'))
    check_vote_temps(cfg)
    if not all(isinstance(k, int) and not isinstance(k, bool) and k >= 1 for k in cfg['n_scaling']):
        raise ValueError(f"n_scaling={cfg['n_scaling']!r} must hold positive ints (best-of-N's N); fix: "
                         f"--n_scaling='{DEFAULTS['n_scaling']}'")
    eval_dir, train_dir, suffix = run_dirs(cfg)
    pools = os.path.join(cfg['out_dir'], 'pools' + suffix)
    check_writable('out_dir', cfg['out_dir'], os.path.join(cfg['out_dir'], 'scores'), pools)  # the table, caches, pools
    dev = resolve_device(cfg['device'])
    if cfg['prm_reduce'] not in ('last', 'min', 'prod'):
        raise ValueError(f"prm_reduce={cfg['prm_reduce']!r}; fix: --prm_reduce=last (or min, prod)")
    return eval_dir, train_dir, suffix, pools, dev


def eval_problems(cfg, named, eval_dir):
    """The evaluation split and the checkpoints that score it (tables.checkpoint_paths), each checked against it before
    any work (no checkpoint scores its training groups, other states or stale), and n_eval against its pools: ->
    (problems, checkpoint paths, a note per run left out, the pool sizes). Says which N of n_scaling its pools leave
    out."""
    n = cfg['n_eval']
    problems = load_split(eval_dir)
    paths, left_out = checkpoint_paths(cfg, named)
    for path in paths:
        check_checkpoint(problems, eval_dir, path)
    sizes = sorted({len(p['candidates']) for p in problems})
    if n > sizes[0]:
        raise ValueError(f"n_eval={n} but some problems of {eval_dir} hold only {sizes[0]} candidates; fix: "
                         f"--n_eval={sizes[0]}")
    ns = scaling_ns(cfg['n_scaling'], n, sizes[0])
    if over := [k for k in cfg['n_scaling'] if k > sizes[0]]:  # said, never dropped silently
        print(f"n_scaling: N={', '.join(map(str, over))} left out of the N-scaling table: the problems of {eval_dir} "
              f"hold {sizes[0]} candidates (extract.py's n_eval_samples); N={', '.join(map(str, ns))} are scored")
    return problems, paths, left_out, sizes


def confidence_note(cfg, problems):
    """The note on DeepConf's rows: how they are made, or why they are left out."""
    if has_confidences(problems):
        return ("DeepConf (facebookresearch/deepconf): token confidence = minus the mean top-k log-prob; group = "
                f"mean over a sliding window of {cfg['deepconf_window']} tokens (a shorter trace is one group, "
                "its mean); votes are weighted by the confidence named, over the top-eta fraction of candidates "
                f"with an answer (eta {cfg['deepconf_etas']}), answers grouped by equivalence.")
    return ("DeepConf rows left out: the candidates have no 'confidences' (an extraction from before they "
            "were stored); fix: re-extract with the current extract.py.")


def pruning_notes(problems, gc):
    """A note on what online pruning did where the split was sampled with it (extract.py prune_ckpt; gc: the
    extraction's config), else none."""
    stopped = sum(c.get('finish') == 'pruned' for p in problems for c in p['candidates'])
    if not stopped:
        return []
    return [f"This split was sampled with online pruning ({gc.get('prune_ckpt')}, {gc.get('prune_rule')} "
            f"rule, threshold {gc.get('prune_threshold')}): {stopped} of "
            f"{sum(len(p['candidates']) for p in problems)} candidates were stopped "
            f"({np.mean([len(c['token_ids']) for p in problems for c in p['candidates']]):.1f} tokens per "
            "candidate generated). A stopped candidate is never selected, has no answer (no vote) and counts "
            "as wrong in single-pass and oracle rows; AUROC is over the candidates that were not stopped."]


def result_notes(cfg, res, problems, trained_on, train_dir):
    """The notes on the table made (res: pools.pool_table's): no table by part, the intervals (interval_notes),
    rows that stand for several selectors, checkpoints trained on other dirs than validation reads."""
    notes = []
    if not res['breakdown']:
        ds = problems[0]['dataset']
        notes.append(f"No table by part: tasks.problem_kinds gives these {ds} problems no kind with two parts or more"
                     + ('.' if ds in ('synth', 'words') else " (a benchmark problem is its own group, and GSM8K, AIME "
                        "and OlympiadBench rows carry no category)."))
    notes += interval_notes(cfg, res['rows'], res['bootstrap'])
    if any(r.get('alike') for r in res['rows']):
        longest = max(len(c['token_ids']) for p in problems for c in p['candidates'])
        notes.append("A row naming several selectors '... (the same picks here)' stands for one rule on scores "
                     "equal on every candidate, so equal rows (DeepConf's group and tail confidences are "
                     f"the mean confidence when no trace is longer than deepconf_window {cfg['deepconf_window']} and "
                     f"deepconf_tail {cfg['deepconf_tail']}: the longest here has {longest} tokens).")
    if trained_on and trained_on != [shown_path(train_dir)]:
        notes.append(f'Checkpoints were trained on {trained_on}; validation choices used {train_dir}.')
    return notes


def ship_verifier(res, pools, own, best):
    """{pools}/hsrm.pt: the checkpoint best (the seed of the run own that sample.py answers with) as one file with its
    vote's temperature (pools.export_verifier); an earlier run's file removed when best is None."""
    if best:
        r = next(r for row in res['rows'] if row['type'] == 'verifier' and row['group'] == own for r in row['runs']
                 if r['ckpt'] == best)
        export_verifier(best, os.path.join(pools, SHIPPED_FILE),
                        None if r['temp'] is None else {'temp': r['temp'], 'n': r['vote_n']})
    elif os.path.exists(os.path.join(pools, SHIPPED_FILE)):  # an earlier run's: not this table's verifier
        os.remove(os.path.join(pools, SHIPPED_FILE))


def run(cfg, named=None, command=None):
    """The table (results[_on_<run>].json, .md, plots) of the run cfg names, made from its pools ({out_dir}/pools:
    every candidate with every score, pools.pool_table), with the config's verifier shipped there (hsrm.pt). named:
    the verifiers its config files name (named_runs: each must be there and finished; the CLI gives them where config
    files are given and ckpts is not), None: every finished run there. command: the command line (sys.argv), kept in
    the pools' meta.json."""
    cfg = {**DEFAULTS, **cfg}
    eval_dir, train_dir, suffix, pools, dev = check_run(cfg)
    out_dir, n = cfg['out_dir'], cfg['n_eval']
    problems, paths, left_out, sizes = eval_problems(cfg, named, eval_dir)
    # validation: the val split of train_dir, for choices that must not see the test split
    val_split = val_splitter(train_dir, n, cfg)
    val = val_split(cfg['val_frac'], cfg['val_seed'])
    notes = table_notes(cfg, sizes, n, train_dir, val) + left_out

    # the scores: the free ones (the combo fitted on train_dir), the PRM's cached ones, every checkpoint's
    combo = fit_combo(train_dir, cfg['val_frac'], cfg['val_seed']) if val and has_confidences(problems) else None
    notes.append(confidence_note(cfg, problems))
    prm, prm_info, pcost, note = prm_column(eval_dir, problems, cfg['prm_reduce'])
    notes += [note] if note else []
    arms, scores, val_scored, vcost, trained_on = verifier_scores(
        paths, problems, val_split, cfg, (eval_dir, train_dir, os.path.join(out_dir, 'scores')), dev)
    gc = split_config(eval_dir)
    notes += pruning_notes(problems, gc)

    # the pools: every candidate the table reads with every score; the table is made from them as pools.py makes it
    vp = val[0] if val else []
    extra = [p for p in val_scored if p['key'] not in {q['key'] for q in vp}]  # a verifier's own validation problems
    free = lambda ps: free_scores(ps, cfg, combo)  # noqa: E731
    rows = (pool_rows(problems, 'eval', free(problems), scores['eval'], prm, text=True)
            + pool_rows(vp, 'val', free(vp), scores['val']) + pool_rows(extra, 'val_run', free(extra), scores['val']))
    # the verifier shipped: ship, else the config's own run (its seed sample.py uses), else the run named 'hsrm', else
    # the first that reads states (stepfeat_only's kind reads them, its layers none)
    states = [a['group'] for a in arms if reads(a['kind'], 'states') and a['layers']]
    own = cfg['ship'] or (next(iter(named)) if named else 'hsrm' if 'hsrm' in states else next(iter(states), None))
    ship = next((a for a in arms if a['group'] == own), None)
    if cfg['ship'] and ship is None:
        raise ValueError(f"ship={cfg['ship']!r} is not a run of this table; fix: one of {[a['group'] for a in arms]}")
    best = best_seed([r['ckpt'] for r in ship['runs']]) if ship else None
    write_pools(pools, rows, {
        **provenance(command), 'config': cfg, 'dataset': problems[0]['dataset'], 'generator': str(gc.get('model', '?')),
        'generator_name': generator_name(str(gc.get('model', '?'))), 'dtype': gc.get('weights_dtype'),
        'eval_dir': eval_dir, 'train_dir': train_dir, 'transfer': bool(suffix), 'trained_on': trained_on,
        'n': n, 'seeds': {a['group']: [r['seed'] for r in a['runs']] for a in arms},
        'bootstrap': {k: cfg[k] for k in ('n_boot', 'boot_seed')},
        'combo_weights': dict(zip(combo['names'], combo['weight'])) if combo else None, 'prm': prm_info, 'arms': arms,
        'shipped': {'file': SHIPPED_FILE, 'run': own, 'ckpt': best} if best else None})

    # the table, from the pools alone, with its notes and each verifier's cost beside its accuracy
    res = pool_table(*read_pools(pools))
    notes += result_notes(cfg, res, problems, trained_on, train_dir)
    for c in [pcost] + vcost:
        c['acc'] = next((r['acc'] for r in res['rows'] if r['method'] == c['verifier']
                         and r['type'] in ('prm', 'verifier')), None)
    res = {**res, 'config': cfg, 'train_dir': train_dir, 'cost': [pcost] + vcost,
           'generator_cost': generator_cost(problems, str(gc.get('model'))), 'notes': notes}
    write_results(res, os.path.join(out_dir, 'results' + suffix), cfg['plots'])
    ship_verifier(res, pools, own, best)
    wrote = [f'{f} ({os.path.getsize(os.path.join(pools, f)):,} bytes)' for f in (POOLS_FILE, META_FILE, SHIPPED_FILE)
             if os.path.exists(os.path.join(pools, f))]
    print(f"wrote {pools}/: {', '.join(wrote)}; `python pools.py {pools}` prints the table from them")
    return res


def provenance(command):
    """What made a run's pools: the commit (git rev-parse HEAD, and whether files differed from it), the command
    line and the text of its config files."""
    files = [a for a in (command or [])[1:] if not a.startswith('--') and os.path.isfile(a)]
    return {**git_state(), 'command': ' '.join(['python', 'evaluate.py', *command[1:]]) if command else None,
            'config_files': {f: open(f).read() for f in files}}


if __name__ == '__main__':
    # train.py's and baselines.py's flags name the runs it reads (named_runs), checked as those stages take them
    _argv = split_argv(sys.argv[1:], DEFAULTS, train.DEFAULTS, baselines.DEFAULTS)[0]
    config = configure(globals(), _argv)  # config files, then --key=value, override the knobs above
    _files = [a for a in sys.argv[1:] if not a.startswith('--')]
    cli(lambda c: run(c, named_runs(sys.argv[1:], c['out_dir']) if _files and not c['ckpts'] else None, sys.argv),
        config,
        'evaluate.py')
