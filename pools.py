"""
The pools: every candidate a table reads with every score, as evaluate.py writes them into {out_dir}/pools/
(candidates.jsonl.gz, meta.json, and hsrm.pt: the config's verifier, shipped), and the table made from them alone
(pool_table, render_table: evaluate.py builds its own table through them, so the pools recompute exactly what it
wrote); a verifier shipped as one file (export_verifier), a selector of your own against the table (compare), where
HSRM and majority vote pick differently (disagreements), a README's table checked against the pools
(readme_table_mismatches). The rows, intervals and free side under them are tables.py's.

    python pools.py out/demo/pools     # the table evaluate.py wrote, from its pools alone, in seconds
    python pools.py out/demo/pools --differ=3   # where HSRM and majority vote pick differently: 3 of each way
"""
import gzip
import json
import os
import re

import numpy as np

from bestofn import answer_groups, choose_temp, oracle_sub, paired_vs, per_problem_run, pool_entry, scored_metrics
from store import atomic_save, atomic_write_json, load_problem, problem_files, read_checkpoint
from tables import (MIN_UNITS, add_intervals, breakdown, fmt, fmt_ci, fmt_num, fmt_vs, free_rows_of, make_row,
                    part_kinds)
from tasks import group_key, problem_kinds
import train

POOLS_FILE, META_FILE, SHIPPED_FILE = 'candidates.jsonl.gz', 'meta.json', 'hsrm.pt'

# a pool row's keys (meta.json repeats them for a reader)
POOL_COLUMNS = {
    'split': "'eval': the table's problems; 'val': the validation problems its choices read (the reference, every "
             "weighted vote's temperature); 'val_run': a verifier's own validation problems outside 'val' "
             "(max_train_problems, another val_frac or val_seed)",
    'problem': "the problem's key (its file in the split); (problem, sample) names a candidate",
    'id': "the problem's dataset id", 'index': 'its dataset index',
    'group': 'tasks.group_key: problems a verifier could recall from one another; the bootstrap resamples them',
    'kinds': 'tasks.problem_kinds: the parts the table is broken down by',
    'sample': "the candidate's number in its problem's pool",
    'answer': 'the final answer extracted (null: none)',
    'answer_group': "its answer's class among the problem's answers (grading.answers_equal; -1: no answer): what "
                    "votes count",
    'correct': 'its label (label.py)',
    'finish': "how its sampling ended ('eos', 'length'; 'pruned': stopped, never selected)",
    'tokens': 'tokens generated', 'steps': 'its steps (hidden states a verifier reads)',
    'free': "{free scorer: score} (bestofn.py; 'combo': fitted on the training problems)",
    'verifiers': "{<run>_seed<k>: score} of every learned verifier's seeds (meta.json's arms: each run's table row); "
                 "on validation rows the runs that validated on that problem",
    'prm': "the PRM's score (its step scores reduced by prm_reduce), where evaluate.py found them",
    'text': "the candidate's text (evaluation rows)",
}


def scaling_ns(n_scaling, n, m):
    """The Ns of the N-scaling table: those of n_scaling that pools of m candidates allow, and n."""
    return sorted({k for k in n_scaling if k <= m} | {n})


def pool_rows(problems, split, free, verifiers, prm=None, text=False):
    """The pool rows (POOL_COLUMNS) of one split's labelled problems: free {scorer: per-problem score arrays},
    verifiers {column: {problem key: scores}} (a column without a problem: not scored there), prm per-problem
    scores or None; text: each candidate's text too."""
    from grading import answers_equal
    out = []
    for i, p in enumerate(problems):
        groups = answer_groups([c.get('answer') for c in p['candidates']], answers_equal)
        head = {'split': split, 'problem': p['key'], 'id': p.get('id'), 'index': int(p['index']), 'group': group_key(p),
                'kinds': problem_kinds(p)}
        for j, c in enumerate(p['candidates']):
            row = {**head, 'sample': j, 'answer': c.get('answer'), 'answer_group': int(groups[j]),
                   'correct': bool(c['correct']), 'finish': c.get('finish'), 'tokens': len(c['token_ids']),
                   'steps': len(c['step_pos']), 'free': {k: float(v[i][j]) for k, v in free.items()},
                   'verifiers': {k: float(v[p['key']][j]) for k, v in verifiers.items() if p['key'] in v}}
            out.append(row | ({'prm': float(prm[i][j])} if prm is not None else {})
                       | ({'text': c['text']} if text else {}))
    return out


def write_pools(pools_dir, rows, meta):
    """{pools_dir}/candidates.jsonl.gz (the rows; the same bytes for the same rows: no name or time in the gzip
    header) and meta.json, each atomically."""
    os.makedirs(pools_dir, exist_ok=True)
    path = os.path.join(pools_dir, POOLS_FILE)
    with open(f'{path}.tmp{os.getpid()}', 'wb') as raw, gzip.GzipFile('', 'wb', fileobj=raw, mtime=0) as f:
        f.write(''.join(json.dumps(r) + '\n' for r in rows).encode())
    os.replace(f'{path}.tmp{os.getpid()}', path)
    atomic_write_json({'columns': POOL_COLUMNS, **meta}, os.path.join(pools_dir, META_FILE))


def read_pools(pools_dir):
    """(rows, meta) of a pools folder (write_pools')."""
    for f in (POOLS_FILE, META_FILE):
        if not os.path.exists(os.path.join(pools_dir, f)):
            raise FileNotFoundError(f"pools_dir={pools_dir!r} holds no {f}; fix: the pools folder evaluate.py writes "
                                    "({out_dir}/pools; python evaluate.py <config>)")
    with gzip.open(os.path.join(pools_dir, POOLS_FILE), 'rt', encoding='utf-8') as f:
        rows = [json.loads(line) for line in f]
    with open(os.path.join(pools_dir, META_FILE)) as f:
        return rows, json.load(f)


def _problems(rows, splits):
    """The problems of the splits named in pool rows, in their order: a list of each one's rows by sample."""
    out = {}
    for r in rows:
        if r['split'] in splits:
            out.setdefault(r['problem'], []).append(r)
    return [sorted(rs, key=lambda r: r['sample']) for rs in out.values()]


def _pool(problems, ns, cfg):
    return [pool_entry(rs[0]['problem'], rs[0]['index'], [r['correct'] for r in rs], [r['answer_group'] for r in rs],
                       [r['finish'] == 'pruned' for r in rs], ns, cfg['n_subsets'], cfg['subset_seed'])
            for rs in problems]


def _column(problems, get):
    return [np.array([get(r) for r in rs], dtype=np.float64) for rs in problems]


def pool_table(rows, meta):
    """The table evaluate.py wrote, from its pools alone (read_pools): the free side (free_rows_of: its choices on the
    'val' rows), the PRM's rows, each learned verifier's row over its seeds with its weighted vote (the temperature
    chosen on its validation rows), the oracle, every 95% interval and Δ (add_intervals, groups resampled where they
    hold several problems) and the breakdown by part. -> the results dict evaluate.py writes, less its config, notes
    and cost."""
    cfg = meta['config']
    n, ev, vp = cfg['n_eval'], _problems(rows, ('eval',)), _problems(rows, ('val',))
    sizes = sorted({len(rs) for rs in ev})
    ns = scaling_ns(cfg['n_scaling'], n, sizes[0])
    pool = _pool(ev, ns, cfg)
    free = {k: _column(ev, lambda r: r['free'][k]) for k in ev[0][0]['free']}
    vn = min([n] + [len(rs) for rs in vp]) if vp else None
    val = ({k: _column(vp, lambda r: r['free'][k]) for k in free}, _pool(vp, [vn], cfg), vn) if vp else None
    out, choice = free_rows_of(free, pool, ns, n, val, cfg, meta.get('combo_weights'))
    if meta.get('prm'):
        name = meta['prm']['method']
        m = scored_metrics(_column(ev, lambda r: r['prm']), pool, ns, None, vote=True, where=f'{name} scores', n=n)
        out += [make_row(name, 'prm', [m], params=meta['prm']['params']),
                make_row(f'{name} + weighted vote', 'prm_vote', [per_problem_run(m['per_problem']['vote_at'], n=n)])]
    every_val, vals = _problems(rows, ('val', 'val_run')), {}  # vals: a validation set's (pool, n), built once
    for arm in meta['arms']:
        runs = []
        for run in arm['runs']:
            col, temp, vote_n = run['column'], None, None
            mine = [rs for rs in every_val if col in rs[0]['verifiers']]  # its own validation problems
            if mine:
                at = tuple(rs[0]['problem'] for rs in mine)
                if at not in vals:
                    k = min([n] + [len(rs) for rs in mine])
                    vals[at] = (_pool(mine, [k], cfg), k)
                vpool, vote_n = vals[at]
                temp = choose_temp(_column(mine, lambda r: r['verifiers'][col]), vpool, vote_n, cfg['vote_temps'],
                                   where=f"{run['ckpt']} on validation")
            m = scored_metrics(_column(ev, lambda r: r['verifiers'][col]), pool, ns, temp, vote=temp is not None,
                               where=f"{run['ckpt']} on {meta['eval_dir']}", n=n)
            runs.append({**{k: v for k, v in run.items() if k != 'column'}, 'temp': temp, 'vote_n': vote_n, **m})
        out.append(make_row(arm['method'], 'verifier', runs, params=arm['params'], group=arm['group'],
                            verifier_kind=arm['kind'], n_train=arm['n_train']))
        if runs[-1]['temp'] is not None:
            out.append(make_row(f"{arm['method']} + weighted vote", 'verifier_vote',
                                [per_problem_run(r['per_problem']['vote_at'], n=n) for r in runs], group=arm['group']))
    orc = {k: np.array([oracle_sub(q['labels'], q['subsets'][k]) for q in pool]) for k in ns}
    out.append(make_row(f'Oracle pass@{n}', 'oracle', [per_problem_run(orc, n=n)]))
    groups = [rs[0]['group'] for rs in ev]  # the bootstrap's unit where a group holds several problems
    add_intervals(out, n, cfg['n_boot'], cfg['boot_seed'], groups)
    kinds = [part_kinds(rs[0]['kinds'], rs[0]['index'], cfg['index_parts']) for rs in ev]
    return {**{k: meta[k] for k in ('dataset', 'generator', 'generator_name', 'dtype', 'eval_dir', 'transfer',
                                    'trained_on')},
            'n_problems': len(ev), 'pool_size': sizes[0], 'n_eval': n, 'ns': ns, 'rows': out,
            'bootstrap': {'unit': 'groups' if len(set(groups)) < len(groups) else 'problems',
                          'n_groups': len(set(groups)), 'n_problems': len(ev)},
            'breakdown': breakdown(out, kinds, groups, n, cfg['n_boot'], cfg['boot_seed']),
            'validation': {'n_problems': len(vp), 'n': vn, **choice}}


def render_table(res, notes=()):
    """The table evaluate.py writes (results.md: the main table, notes numbered below it, the N-scaling table, the
    breakdown by part; its cost table is evaluate.py's) as markdown."""
    n = res['n_eval']
    dtype = f", {res['dtype']}" if res.get('dtype') else ''
    out = [f"## Best-of-{n} on {res['dataset']} ({res['generator_name']}{dtype})", '',
           f"Evaluation split `{res['eval_dir']}`: {res['n_problems']} problems, {res['pool_size']} candidates each"
           + (f"; verifiers trained on `{', '.join(res['trained_on'])}` (zero-shot transfer)" if res['transfer']
              else '') + '.',
           '', f'| Method | Params | Bo{n} Acc. (%) [95% CI] | Δ vs majority (pts) | Δ vs best free on val (pts) '
           f"| Δ vs the paper's reference (pts) | Within-AUROC [95% CI] | Δ AUROC vs best free on val |",
           '|---|---:|---:|---:|---:|---:|---:|---:|']
    for r in res['rows']:
        seeds = f" ({r['n_runs']} seeds)" if r['type'] in ('verifier', 'verifier_vote') and r['n_runs'] > 1 else ''
        out.append(f"| {r['method']}{seeds} | {fmt_num(r['params'], giga='B')} | "
                   f"{fmt_ci(r['acc'], r.get('acc_ci'), True)} | {fmt_vs(r, 'majority', 'acc', True)} | "
                   f"{fmt_vs(r, 'best_free_val', 'acc', True)} | {fmt_vs(r, 'paper', 'acc', True)} | "
                   f"{fmt_ci(r.get('auroc'), r.get('auroc_ci'), False)} | "
                   f"{fmt_vs(r, 'best_free_val', 'auroc', False)} |")
    out += [''] + [f'{i + 1}. {t}' for i, t in enumerate(notes)] if notes else []
    ns = res['ns']
    if len(ns) > 1:
        out += ['', '### N-scaling (best-of-N accuracy, %)', '',
                '| Method | ' + ' | '.join(str(k) for k in ns) + ' | Δ |', '|---|' + '---:|' * (len(ns) + 1)]
        for r in res['rows']:
            if r['type'] in ('single', 'cheap', 'deepconf', 'deepconf_vote', 'combo', 'free_vote', 'agreement'):
                continue
            a = [r['acc_at'].get(k) for k in ns]
            d = f'{100 * (a[-1] - a[0]):+.1f}' if None not in (a[0], a[-1]) else '–'
            name = 'Oracle pass@N' if r['type'] == 'oracle' else r['method']
            out.append(f"| {name} | " + ' | '.join(fmt(x, None, True) for x in a) + f' | {d} |')
    for kind, parts in res['breakdown'].items():
        unit = 'groups resampled within the part' if res['bootstrap']['unit'] == 'groups' else 'problems resampled'
        few = [p['part'] for p in parts if p['n_groups'] < MIN_UNITS]
        out += ['', f'### Bo{n} by {kind}', '', f"Each part's rows on its problems alone; Δ paired within the part "
                f"(95% intervals, {unit})" + (f"; none is bold in a part of fewer than {MIN_UNITS} groups ("
                                              f"{', '.join(map(str, few))}: too few to call a difference beyond)"
                                              if few else '') + '.', '',
                f'| {kind[0].upper() + kind[1:]} | Problems (groups) | Method | Bo{n} Acc. (%) [95% CI] '
                '| Δ vs majority (pts) | Δ vs best free on val (pts) |', '|---|---:|---|---:|---:|---:|']
        for part in parts:
            shown = [r for r in part['rows'] if r['type'] != 'free_best_val_auroc']  # the AUROC side: not a Bo-N row
            for i, r in enumerate(shown):
                lead = f"{part['part']} | {part['n_problems']} ({part['n_groups']})" if i == 0 else ' |'
                name = {'vote': 'Majority vote', 'free_best_val': 'Best free selector on validation'}.get(
                    r['type'], r['method'] + (f" ({r['n_runs']} seeds)" if r['n_runs'] > 1 else ''))
                out.append(f"| {lead} | {name} | {fmt_ci(r['acc'], r.get('acc_ci'), True)} | "
                           f"{fmt_vs(r, 'majority', 'acc', True)} | {fmt_vs(r, 'best_free_val', 'acc', True)} |")
    return '\n'.join(out) + '\n'


def export_verifier(path, dest, vote=None):
    """Checkpoint path as one self-contained file dest, which sample.py answers with where no training run is on the
    disk (a fresh clone: --ckpt=dest): its weights, input spec and architecture; the groups it trained and validated
    on (their questions are refused); its training extractions' configs (train.trained_on: the generator, weights
    dtype, layers, step rule and prompt sample.py checks); the questions of its training splits by dataset id (a
    benchmark question typed as text is refused where it is one of them); vote: {'temp', 'n'}, the weighted vote's
    temperature evaluate.py chose on its validation problems at best-of-n. It names no training dir, so nothing on
    the disk is looked up for it (a run of the same name there is not its data)."""
    ck = read_checkpoint(path)
    tc = ck.get('train_config') or {}
    questions = {str(p['id']): p['question'] for d in train.train_dirs_now(tc, path) for p in
                 (load_problem(f, mmap=True) for f in problem_files(d))}
    atomic_save({**ck, 'train_config': {k: v for k, v in tc.items() if k not in ('train_dirs', 'out_dir', 'run_dir',
                                                                                 'data')},
                 'trained_on': train.trained_on(ck, path), 'questions': questions, 'vote': vote, 'shipped_from': path},
                dest)


def compare(pools_dir, scores, name='Your selector', show=True):
    """A selector of your own against a pools folder's table: scores {(problem, sample): float} of every evaluation
    candidate (the pool rows' names; the top score is picked, ties count as their mean) -> its best-of-N accuracy and
    within-AUROC with their 95% intervals, and its paired differences (yours - theirs) against the reference (the best
    free selector on validation; for AUROC the free scorer best there by AUROC) and each learned verifier row (HSRM
    over its seeds), over the table's own bootstrap draws: {'acc', 'acc_ci', 'auroc', 'auroc_ci', 'vs': {row: {'acc',
    'acc_ci', 'auroc', 'auroc_ci'}}}. show: print them as a markdown table."""
    rows, meta = read_pools(pools_dir)
    cfg = meta['config']
    n, ev = cfg['n_eval'], _problems(rows, ('eval',))
    missing = [(r['problem'], r['sample']) for rs in ev for r in rs if (r['problem'], r['sample']) not in scores]
    if missing:
        raise ValueError(f"scores has no score for candidate {missing[0]} ({len(missing)} of the "
                         f"{sum(map(len, ev))} evaluation candidates missing); fix: a float for each, keyed (problem, "
                         "sample) as the pool rows name them")
    res = pool_table(rows, meta)
    sc = _column(ev, lambda r: scores[r['problem'], r['sample']])
    mine = make_row(name, 'yours', [scored_metrics(sc, _pool(ev, [n], cfg), [n], where=name, n=n)])
    groups = [rs[0]['group'] for rs in ev]
    add_intervals([mine], n, cfg['n_boot'], cfg['boot_seed'], groups)
    find = lambda t: next((r for r in res['rows'] if r['type'] == t), None)  # noqa: E731
    seeds = lambda r: f" ({r['n_runs']} seeds)" if r['n_runs'] > 1 else ''  # noqa: E731
    theirs = ([('Best free on validation (the reference)', find('free_best_val'), find('free_best_val_auroc'))]
              if find('free_best_val') else []) + \
        [(r['method'] + seeds(r), r, r) for r in res['rows'] if r['type'] == 'verifier']
    out = {k: mine[k] for k in ('acc', 'acc_ci', 'auroc', 'auroc_ci')} | {'vs': {}}
    for label, ra, ru in theirs:
        out['vs'][label] = paired_vs(mine, ra, ru, n, cfg['n_boot'], cfg['boot_seed'], groups)
    if show:
        unit = 'groups' if len(set(groups)) < len(groups) else 'problems'
        print(f"{name} on the {len(ev)} evaluation problems of {pools_dir} (95% intervals, {cfg['n_boot']} draws of "
              f"the {len(set(groups))} {unit}, paired: the table's own)\n\n"
              f"| Selector | Bo{n} Acc. (%) [95% CI] | Within-AUROC [95% CI] | Yours - it, Bo{n} (pts) "
              "| Yours - it, AUROC |\n|---|---:|---:|---:|---:|\n"
              f"| {name} | {fmt_ci(mine['acc'], mine['acc_ci'], True)} | "
              f"{fmt_ci(mine['auroc'], mine['auroc_ci'], False)} | | |")
        for label, ra, ru in theirs:
            d = out['vs'][label]
            print(f"| {label} | {fmt_ci(ra['acc'], ra.get('acc_ci'), True)} | "
                  f"{fmt_ci(ru.get('auroc'), ru.get('auroc_ci'), False)} | "
                  f"{fmt_ci(d['acc'], d['acc_ci'], True, diff=True, units=len(set(groups)))} | "
                  f"{fmt_ci(d.get('auroc'), d.get('auroc_ci'), False, diff=True, units=len(set(groups)))} |")
    return out


def last_lines(text, k=3, width=110):
    """A candidate's last k non-empty lines joined by ' | ' (where its answer is worked out and stated), cut from the
    left to width."""
    line = ' | '.join([x.strip() for x in (text or '').splitlines() if x.strip()][-k:])
    return line if len(line) <= width else '...' + line[len(line) - width + 3:]


def disagreements(pools_dir, column=None):
    """Where the shipped HSRM seed (column: another verifier column of the pools) and majority vote pick different
    answers on the evaluation problems, counted on the problems where both picks are clean (one top score, one most
    given answer; candidates tied at the top score with one answer, as equal texts are, are one pick; the table counts
    ties as their mean): -> {'counts': {'hsrm right, vote wrong', 'vote right, hsrm wrong', 'other answers, both
    wrong', 'the same answer', 'a tie'}, 'examples': {kind: [problem rows, sorted by sample]}, 'column'}. The examples
    are the problems of the first two kinds, in pool order."""
    rows, meta = read_pools(pools_dir)
    if column is None:
        if not meta.get('shipped'):
            raise ValueError(f"pools_dir={pools_dir!r} ships no verifier (meta.json 'shipped'); fix: column=<a "
                             "verifier column of its rows>")
        column = next(r['column'] for a in meta['arms'] for r in a['runs'] if r['ckpt'] == meta['shipped']['ckpt'])
    counts = dict.fromkeys(('hsrm right, vote wrong', 'vote right, hsrm wrong', 'other answers, both wrong',
                            'the same answer', 'a tie'), 0)
    examples = {k: [] for k in list(counts)[:2]}
    for rs in _problems(rows, ('eval',)):
        if column not in rs[0]['verifiers']:
            raise ValueError(f"column={column!r} is not a verifier column of {pools_dir}; fix: one of "
                             f"{sorted(rs[0]['verifiers'])}")
        sc = np.array([r['verifiers'][column] for r in rs])
        votes = np.bincount([g for g in (r['answer_group'] for r in rs) if g >= 0], minlength=1)
        top, most = np.flatnonzero(sc == sc.max()), np.flatnonzero(votes == votes.max())
        if len({rs[i]['answer_group'] for i in top}) > 1 or len(most) > 1 or votes.max() == 0:
            counts['a tie'] += 1
            continue
        pick, vote = rs[top[0]], next(r for r in rs if r['answer_group'] == most[0])
        kind = ('the same answer' if pick['answer_group'] == most[0] else 'hsrm right, vote wrong' if pick['correct']
                else 'vote right, hsrm wrong' if vote['correct'] else 'other answers, both wrong')
        counts[kind] += 1
        if kind in examples:
            examples[kind].append(rs)
    return {'counts': counts, 'examples': examples, 'column': column}


def show_disagreements(pools_dir, k=3, column=None):
    """disagreements printed: the counts, then k problems of each way with every candidate's answer, label, score
    and last lines (H: HSRM's pick, v: the majority answer's candidates)."""
    d = disagreements(pools_dir, column)
    print(f"HSRM ({d['column']}) against majority vote on the evaluation problems of {pools_dir}: "
          + ', '.join(f'{k} {v}' for k, v in d['counts'].items()))
    for kind, problems in d['examples'].items():
        for rs in problems[:k]:
            sc = [r['verifiers'][d['column']] for r in rs]
            most = np.bincount([g for g in (r['answer_group'] for r in rs) if g >= 0]).argmax()
            print(f"\n{kind}: problem {rs[0]['problem']} (id {rs[0]['id']})")
            for r, s in zip(rs, sc):
                mark = ('H' if s == max(sc) else ' ') + ('v' if r['answer_group'] == most else ' ')
                print(f"  {mark} {'right' if r['correct'] else 'wrong'} {str(r['answer']):>8} {s:+7.3f}  "
                      f"{last_lines(r.get('text'))}")


def _table_at(lines, where):
    """(header cells, {method: cells}) of the first markdown table in lines."""
    at = next((i for i, x in enumerate(lines) if x.startswith('|')), None)
    if at is None:
        raise ValueError(f"{where} holds no markdown table; fix: a table of | Method | ... | rows below it")
    table = []
    for x in lines[at:]:
        if not x.startswith('|'):
            break
        table.append([c.strip() for c in x.strip().strip('|').split('|')])
    return table[0], {r[0]: r for r in table[2:]}


def _bare(name):
    """A row's name without its parenthesized parts ('HSRM (3 seeds)' -> 'HSRM'): a README's shorter name for it."""
    while re.search(r'\([^()]*\)', name):
        name = re.sub(r'\s*\([^()]*\)', '', name)
    return ' '.join(name.split())


def readme_table_mismatches(readme_path, heading, pools_dir):
    """Where the first table below the line heading (e.g. '## What the main job shows') of a README disagrees with
    the table recomputed from pools_dir (pool_table): [one line per disagreement]; [] where every cell it shows is the
    pools' own. Its columns are matched by header, its rows by name: the same, else the one table row of the same
    name without the parenthesized parts ('Best free selector on validation (3 tied, their mean)' is the table's
    'Best free selector on validation (tie: mean of ...)'); a cell is compared as written, bold included."""
    with open(readme_path) as f:
        lines = f.read().splitlines()
    if heading not in lines:
        raise ValueError(f"{readme_path} has no line {heading!r}; fix: the heading line exactly as written there")
    head, shown = _table_at(lines[lines.index(heading) + 1:], f'{readme_path} below {heading!r}')
    cols, mine = _table_at(render_table(pool_table(*read_pools(pools_dir))).splitlines(), pools_dir)
    out = [f"column {c!r} is not in the table of {pools_dir}" for c in head[1:] if c not in cols]
    for method, cells in shown.items():
        same = [m for m in mine if _bare(m) == _bare(method)]
        if method not in mine and len(same) != 1:
            out.append(f"row {method!r}: {'no' if not same else f'{len(same)} ({same})'} rows of that name in the "
                       f"table of {pools_dir}")
            continue
        row = mine[method if method in mine else same[0]]
        for c, cell in zip(head[1:], cells[1:]):
            if c in cols and row[cols.index(c)] != cell:
                out.append(f"row {method!r}, column {c!r}: {cell!r} here, {row[cols.index(c)]!r} from the pools")
    return out


if __name__ == '__main__':
    import sys
    from machine import cli
    args = sys.argv[1:]
    differ = [a for a in args if a.startswith('--differ=')]
    if len(args) - len(differ) != 1 or args[0].startswith('--') or len(differ) > 1:
        raise SystemExit("usage: python pools.py <pools dir> [--differ=K]: the table evaluate.py wrote (results.md's, "
                         "less its notes and cost), recomputed from the pools folder it writes ({out_dir}/pools); "
                         "--differ=K: instead, where HSRM's pick and majority vote's differ, K problems of each way")
    if differ:
        k = differ[0].split('=', 1)[1]
        if not k.isdigit():
            raise SystemExit(f"pools.py: --differ={k} is no count of problems; fix: --differ=3")
        cli(lambda d: show_disagreements(d, int(k)), args[0], 'pools.py')
    else:
        cli(lambda d: print(render_table(pool_table(*read_pools(d))), end=''), args[0], 'pools.py')
