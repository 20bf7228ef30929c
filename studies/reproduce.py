"""
Does an extraction made again reproduce a shipped pool? The evaluation candidates of a pools folder (evaluate.py's, as
release/gsm8k_qwen05 ships them: text, answer, label, tokens, steps, how each ended) against the same problems
extracted again on this machine, candidate by candidate, and the shipped verifier (the folder's hsrm.pt) scored on the
new states against its own column in the pool. A candidate's draws depend on the seed, its problem and its sample
alone (counter draws), so on the same CPU kind and dtype the tokens should come back the same; on another (float32
where the pool was bfloat16, another matmul kernel) the table says how much moved, and the per-sample accuracy says
whether it matters. The problems extracted so far are compared: run it while an extraction grows.

    python extract.py config/gsm8k_qwen05.py --train_range=None && python label.py config/gsm8k_qwen05.py
    python -m studies.reproduce                     # release/gsm8k_qwen05 against out/gsm8k_qwen05/eval
    python -m studies.reproduce --pools_dir=out/demo/pools --split_dir=out/demo/eval --out=out/reproduce_demo

Writes {out}.md and {out}.json (the numbers, each differing candidate, and this run's config).
"""
import json
import os

import numpy as np

from configurator import configure, knobs
from extract import RUNS_FILE
from machine import cli, cpu_name, git_state, kernel_settings
from model import score_problems
from store import atomic_write_json, load_checkpoint, load_split, problem_files
from pools import SHIPPED_FILE, read_pools

# -----------------------------------------------------------------------------
# knobs (options in the comments); config files and --key=value override them
pools_dir = 'release/gsm8k_qwen05'  # a pools folder with its shipped verifier: release/gsm8k_qwen05, release/demo
split_dir = 'out/gsm8k_qwen05/eval'  # its evaluation problems extracted again (extract.py with the pool's config;
                                     # label.py for the answers and labels; without labels.json they are not compared)
score_tol = 1e-5  # a shipped verifier's score within this of the pool's counts as the same (other batches pad
                  # differently)
show = 5  # differing candidates printed (all of them go into {out}.json)
out = 'out/reproduce_gsm8k_qwen05'  # writes {out}.md and {out}.json
DEFAULTS = knobs(globals())  # the knobs above as a dict

# -----------------------------------------------------------------------------
FIELDS = ('text', 'tokens', 'steps', 'finish', 'answer', 'correct')  # compared as pool rows name them
LABELLED = ('answer', 'correct')  # from labels.json


def shipped_column(meta, pools_dir):
    """The pool rows' column of the verifier the folder ships (its arm run whose checkpoint it is)."""
    ck = (meta.get('shipped') or {}).get('ckpt')
    col = next((r['column'] for a in meta.get('arms', []) for r in a['runs'] if r['ckpt'] == ck), None)
    if col is None or not os.path.exists(os.path.join(pools_dir, SHIPPED_FILE)):
        raise FileNotFoundError(f"pools_dir={pools_dir!r} ships no verifier ({SHIPPED_FILE} and meta.json's "
                                "'shipped'); fix: a pools folder evaluate.py wrote with a shipped run (--ship=<run>)")
    return col


def candidate_fields(c):
    """A re-extracted candidate as a pool row names it (pools.pool_rows)."""
    return {'text': c['text'], 'tokens': len(c['token_ids']), 'steps': len(c['step_pos']), 'finish': c.get('finish'),
            'answer': c.get('answer'), 'correct': bool(c['correct']) if 'correct' in c else None}


def diverges(a, b):
    """Where two texts part: (character index, a's next 40 characters, b's)."""
    i = next((k for k, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    return i, a[i:i + 40], b[i:i + 40]


def compare(pool, problems, fields):
    """{field: [(problem, sample)] that differ} and the candidates compared: the re-extracted problems' candidates
    against the pool's rows of the same names (pool: {(problem, sample): row})."""
    differ, names = {f: [] for f in fields}, []
    for p in problems:
        for j, c in enumerate(p['candidates']):
            r, mine = pool[p['key'], j], candidate_fields(c)
            names.append((p['key'], j))
            for f in fields:
                if mine[f] != r[f]:
                    differ[f].append((p['key'], j))
    return differ, names


def run(cfg):
    cfg = {**DEFAULTS, **cfg}
    rows, meta = read_pools(cfg['pools_dir'])
    col = shipped_column(meta, cfg['pools_dir'])
    rows = [r for r in rows if r['split'] == 'eval']
    with open(os.path.join(cfg['split_dir'], 'config.json')) as f:
        ext = json.load(f)
    if ext['model'] != meta['generator']:
        raise ValueError(f"split_dir={cfg['split_dir']!r} was extracted with model {ext['model']!r}, the pool's with "
                         f"{meta['generator']!r}; fix: extract with the pool's config (its generator)")
    known = {r['problem'] for r in rows}
    labelled = os.path.exists(os.path.join(cfg['split_dir'], 'labels.json'))
    files = problem_files(cfg['split_dir'], growing=True)  # so far: a growing split is read
    problems = [p for p in load_split(cfg['split_dir'], labels=labelled, files=files) if p['key'] in known]
    if not problems:
        raise FileNotFoundError(f"split_dir={cfg['split_dir']!r} holds none of the pool's {len(known)} evaluation "
                                f"problems ({len(files)} problem files); fix: extract them with the pool's config "
                                "(this study's header)")
    fields = [f for f in FIELDS if labelled or f not in LABELLED]
    pool = {(r['problem'], r['sample']): r for r in rows}
    differ, names = compare(pool, problems, fields)
    model, _ = load_checkpoint(os.path.join(cfg['pools_dir'], SHIPPED_FILE))
    scores = np.concatenate(score_problems(model, problems, where=cfg['split_dir']))
    gap = np.abs(scores - np.array([pool[k]['verifiers'][col] for k in names]))
    moved = set(differ['text'])
    same_text = np.array([k not in moved for k in names])
    off = [k for k, g, s in zip(names, gap, same_text) if s and g > cfg['score_tol']]
    res = {'config': cfg, 'code': git_state(), 'cpu': cpu_name()[0], 'kernels': kernel_settings(), 'extraction': ext,
           'pool_commit': meta['commit'], 'column': col,
           'problems': len(problems), 'pool_problems': len(known), 'candidates': len(names),
           'differ': {f: [list(k) for k in v] for f, v in differ.items()}, 'score_off': [list(k) for k in off],
           'max_score_gap_same_text': float(gap[same_text].max()) if same_text.any() else None,
           'accuracy': ({'pool': float(np.mean([pool[k]['correct'] for k in names])),
                         'again': float(np.mean([c['correct'] for p in problems for c in p['candidates']]))}
                        if labelled else None)}
    n, runs = len(names), os.path.join(cfg['split_dir'], RUNS_FILE)
    runs = [json.loads(x) for x in open(runs)] if os.path.exists(runs) else []
    made = (f"code {', '.join(sorted({str(r.get('commit'))[:7] for r in runs}))} on "
            f"{', '.join(sorted({r['cpu'] for r in runs}))}" if runs else f"its runs not recorded yet, {res['cpu']}")
    md = [f"{cfg['split_dir']} ({len(problems)} of the pool's {len(known)} evaluation problems, {n} candidates; "
          f"extracted with {ext['model']} in {ext['weights_dtype']}, {made}) against {cfg['pools_dir']} (its pools "
          f"written at {meta['commit'][:7]}), compared at {res['code'].get('commit', '?')[:7]}:", '',
          '| Compared | the same | differ |', '|---|---:|---:|']
    md += [f"| {f} | {n - len(differ[f])} | {len(differ[f])} |" for f in fields]
    md.append(f"| shipped verifier's score ({col}) within {cfg['score_tol']:g}, where the text is the same | "
              f"{int(same_text.sum()) - len(off)} | {len(off)} |")
    if ext['weights_dtype'] != meta['dtype']:
        md += ['', f"The pool's weights ran in {meta['dtype']}, these in {ext['weights_dtype']}: another draw, and the "
               f"shipped verifier read states of {meta['dtype']} weights."]
    if res['max_score_gap_same_text'] is not None:
        md += ['', f"Largest score gap where the text is the same: {res['max_score_gap_same_text']:.2e}."]
    if labelled:
        md.append(f"Per-sample accuracy: the pool's {100 * res['accuracy']['pool']:.2f}%, again "
                  f"{100 * res['accuracy']['again']:.2f}%.")
    else:
        md.append(f"{cfg['split_dir']} holds no labels.json: answers and labels not compared (python label.py "
                  "<config>).")
    mine = {(p['key'], j): c['text'] for p in problems for j, c in enumerate(p['candidates'])}
    for k in differ['text'][:cfg['show']]:
        i, a, b = diverges(pool[k]['text'], mine[k])
        md.append(f"- {k[0]} sample {k[1]}: from character {i}, pool {a!r}, again {b!r}")
    md = '\n'.join(md) + '\n'
    os.makedirs(os.path.dirname(cfg['out']) or '.', exist_ok=True)
    atomic_write_json(res, cfg['out'] + '.json')
    with open(cfg['out'] + '.md', 'w') as f:
        f.write(md)
    print(md, end='')
    return res


if __name__ == '__main__':
    cli(run, configure(globals()), 'reproduce.py')  # config files, then --key=value, override the knobs above
