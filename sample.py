"""
Use a trained verifier: best-of-N answers for new questions. Each question gets N candidates sampled with capture
(capture.py: extraction's loop, prompt and step rule, so the verifier reads what it was trained on), scored by a
trained checkpoint (model.score_problems: the scores evaluate.py computes), and the pick is printed: its answer and
score, the runner-up answers and (vote=True) the verifier-weighted vote. No labels are needed; where gold answers
are given, each pick is graded (grading.grade). A verifier trained on another generator, layer set, step rule or
prompt than this run would use is refused with the fix; settings not given come from its training extraction. The
verifier is a seed of the config's own run (the runs whose config.json holds the training settings the config files
and train.py's flags give: train.find_runs; --ckpt or --verifier_run for another), of its seeds, each finished. A
question that does not fit its task (the dataset's or word family's template), or shares its numbers with its training
or validation questions (tasks.seen_groups; a benchmark question typed as text, where it is one of its training
problems), is refused (--force=True answers it, marked forced): alone, in one line with the fix and a
question of its task it never saw; in a file or range, listed with why while the others are answered. The examples
below ask questions of the level's held-out part (config/demo.py: synthetic level 2, trained on 0-399, tasks.py's
evaluation part 1225-1898):

    python sample.py config/demo.py --question="Compute 7 + 7 - 2."
    python sample.py config/demo.py --questions_file=my.jsonl --vote=True   # {"question": ..., "id"?, "gold"?} per line
    python sample.py config/demo.py --dataset_range="(1225,1234)"            # held-out problems of the task, graded
    python sample.py config/demo.py --ckpt=out/demo/pools/hsrm.pt --question="Compute 7 + 7 - 2."  # the verifier
                                         # evaluate.py ships: its vote's temperature, groups and training facts inside
    python -m studies.policy sample.py config/demo.py --question="Compute 9 - 2 - 5." --search=beam   # steered
                                         # (studies/policy.py hands run and best_of_n the verifier's policy)

Writes {sample_dir}/picks.jsonl (a row per question), candidates.jsonl (a row per candidate: text, token_ids,
finish, extracted answer, verifier score, free scores; rows extract.py --mode=reencode reads) and config.json. A
later call with the same checkpoint and settings adds its questions to the folder (earlier picks kept, a question
answered before not asked again); other settings are refused; a killed call resumes where it stopped, seeded as it
was. From Python (the CLI runs the same function):

    v, _ = load_verifier('out/demo/verifiers/hsrm_seed42/ckpt.pt'); gen, tok = generator.load_generator('smollm2')
    picks = best_of_n(gen, tok, v, ['Compute 7 + 7 - 2.'], n=8)   # picks[0]['answer'], ['score'], ['runner_up']
"""
import glob
import hashlib
import json
import os
import sys
import time
from collections import Counter

import numpy as np
from tqdm import tqdm

import evaluate
import extract
import tables
import train
from bestofn import choose, choose_temp
from capture import SAMPLER, STEP_RULE, sample_problems, step_table, stored_kinds
from configurator import configure, knobs, split_argv
from generator import check_layers, check_positions, check_weight_dtype, load_generator
from machine import check_between, check_positive, check_writable, cli, resolve_device, set_threads
from model import read_kinds, reads, score_problems
from store import (STEERING, atomic_write_json, atomic_write_json_lines, check_dtype, load_checkpoint, load_problem,
                   read_checkpoint, steering, trainer)
from train import check_fresh, run_state, train_dirs_now, trained_on
from tasks import (GENERATED, batch_prompts, check_unseen, load_problems, new_problem, seen_groups, synth_boundary,
                   synth_problem, synth_space, task_pattern, word_boundary, word_problem, word_space)

# -----------------------------------------------------------------------------
# knobs (options in the comments); config files and --key=value override them
out_dir = 'out/demo'  # the run whose verifier answers
ckpt: str = None  # a ckpt.pt or a glob; None = the seeds of verifier_run, else of the config's own run. Of several,
                  # the highest validation within-AUROC at its kept step (train.py's best_val); ties: first in sorted
                  # path order. Or a shipped verifier (evaluate.py's {out_dir}/pools/hsrm.pt, release/demo/hsrm.pt):
                  # no training run needed on the disk
verifier_run: str = None  # the run whose seeds answer, its folders' name less the seed, e.g. 'hsrm_loss-bce'; None =
                          # the config's own: the runs whose config.json holds the training settings of its config
                          # files and train.py's flags (train.find_runs)
question: str = None  # one question, e.g. 'Compute 7 + 7 - 2.'
force = False  # True: answer (marked forced in picks.jsonl) a question off the verifier's task template or sharing
               # numbers with its training questions (tasks.check_unseen); else it is refused
questions_file: str = None  # a JSONL file, one {"question": str, "id": optional, "gold": optional answer} per line
dataset_range: tuple[int, int] = None  # (lo, hi): dataset problems lo..hi, inclusive, as extract.py's ranges (their
                                       # gold grades the picks)
n_samples = 8  # N candidates per question
vote = False  # True: also the verifier-weighted vote, its temperature chosen on the run's validation (evaluate.py's)
sample_dir: str = None  # where picks.jsonl, candidates.jsonl and config.json go; None = {out_dir}/sample
# None below = as the verifier's training split was extracted (its config.json). The generator and prompt (model,
# layers, dataset, synth_level, word_family, system_prompt, enable_thinking) must be those: another value is refused
model: str = None  # 'smollm2' | hub id | local folder | x.gguf (extract.py's)
layers: list[int] = None  # hidden_states indices kept while sampling
dataset: str = None  # the prompt style (and dataset_range's data): 'synth' | 'words' (a worked example first)
                     # | 'gsm8k' | ...
synth_level: int = None
word_family: str = None
word_split: str = None  # dataset_range: extract.py's word_split (the order of the family's questions, their grouping)
system_prompt: str = None  # the benchmark datasets' system prompt
enable_thinking: bool = None
temperature: float = None  # sampling settings: free to change (the verifier reads the states all the same)
top_p: float = None
max_new_tokens: int = None
data_dir: str = None  # dataset_range: where the dataset is (extract.py's data_dir / data_path / synth_seed /
                      # exclude_ids)
data_path: str = None
synth_seed: int = None
exclude_ids: list = None
seed = 1337  # draws as extract.py's (seed, problem, sample, token): a dataset_range with extraction's seed and n
             # samples exactly its candidates
batch_size = 128  # rows decoding at once, as extract.py's (a speed knob: candidates do not depend on it)
device = 'auto'  # 'auto' | 'cpu' | 'cuda'
dtype: str = None  # the generator's weights: None = the training split's weights_dtype (the states it learnt from)
                   # | 'auto' | 'float16' | 'bfloat16' | 'float32'; another than the training's is refused
threads = 0  # CPU threads for torch; 0 = torch's default
DEFAULTS = knobs(globals())  # the knobs above as a dict

# evaluate.py's knobs (vote temperatures, subsets, DeepConf windows); config files and flags set
# them as for evaluate.py, so a vote's temperature is the one evaluate.py chose for the same checkpoint and N
EVAL = {k: v for k, v in evaluate.DEFAULTS.items() if k in ('vote_temps', 'n_subsets', 'subset_seed', 'val_frac',
                                                            'val_seed', 'eval_batch_size', 'deepconf_window',
                                                            'deepconf_tail')}
# extract.py's defaults fill a setting nobody gave when the verifier's training extraction config is not found
EXTRACT = extract.DEFAULTS
# what the verifier was trained on: these must match (the prompt keys where the dataset uses them) ...
CHECKED = ('model', 'layers', 'dataset', 'synth_level', 'word_family', 'system_prompt', 'enable_thinking', 'max_steps')
# ... these are free, or fixed by the extraction
SETTINGS = CHECKED + ('temperature', 'top_p', 'max_new_tokens', 'conf_topk', 'data_dir', 'data_path', 'synth_seed',
                      'word_split', 'exclude_ids')

# -----------------------------------------------------------------------------
# what a verifier was trained on, and refusing one that would read something else


def load_verifier(path, device='cpu'):
    """(verifier, checkpoint dict) as store.load_checkpoint gives them; the verifier also carries trained_on (its
    training extractions' configs: train.trained_on), from which best_of_n takes its settings and against which it
    checks them."""
    v, ck = load_checkpoint(path, device)
    v.trained_on, v.ckpt_path = trained_on(ck, path), path
    return v, ck


def resolve(given, trained):
    """Every setting: the given value, else the (first) training extraction's, else extract.py's default; and the
    DeepConf windows of the free scores (evaluate.py's keys)."""
    base = trained[0] if trained else {}
    return {**{k: given[k] if given.get(k) is not None else base.get(k, EXTRACT[k]) for k in SETTINGS},
            **{k: given.get(k) or EVAL[k] for k in ('deepconf_window', 'deepconf_tail')}}


def _same(key, a, b):
    if key == 'model' and isinstance(a, str) and isinstance(b, str) and os.path.exists(a) and os.path.exists(b):
        return os.path.realpath(a) == os.path.realpath(b)  # one folder spelled two ways
    return json.loads(json.dumps(a)) == json.loads(json.dumps(b))  # (-1,) is [-1]


def check_match(verifier, s, gen=None, key='ckpt'):
    """Refuse (ValueError, one line with the fix) a verifier that would read something other than it was trained
    on: another generator (its name; its hidden size and depth when gen is given), layer set, step rule, stored
    steps or prompt (dataset style, worked example, system prompt, thinking mode) than settings s. Each key is
    compared with the training extractions' values (pooled splits: any of them)."""
    where = getattr(verifier, 'ckpt_path', 'the verifier')
    trained = getattr(verifier, 'trained_on', [])
    if gen is not None and reads(verifier.spec['kind'], 'states') and verifier.spec['d_gen'] != gen.config.hidden_size:
        was = f" ({trained[0]['model']!r})" if trained else ''
        raise ValueError(f"{key}={where!r} reads states of width d_gen={verifier.spec['d_gen']}, but this generator's "
                         f"hidden size is {gen.config.hidden_size}; fix: the generator it was trained on{was}, or a "
                         f"verifier trained on this generator's states")
    for t in trained:
        if t.get('step_rule', STEP_RULE) != STEP_RULE:
            raise ValueError(f"{key}={where!r} was trained on steps cut by step_rule={t['step_rule']!r} "
                             f"({t['where']}), this code's rule (capture.STEP_RULE) is {STEP_RULE!r}; fix: re-extract "
                             f"and retrain under {STEP_RULE!r}, or run the code version whose rule is "
                             f"{t['step_rule']!r}")
        if gen is not None and t.get('num_hidden_layers') not in (None, gen.config.num_hidden_layers):
            raise ValueError(f"{key}={where!r} was trained on {t['model']!r} with {t['num_hidden_layers']} layers "
                             f"({t['where']}), this generator has {gen.config.num_hidden_layers}; fix: "
                             f"--model={t['model']!r}")
    if gen is not None:
        dt = str(next(gen.parameters()).dtype).removeprefix('torch.')
        check_dtype(trained, dt, where, f"this generator's are {dt}", "load it with dtype='{trained}' (sample.py: "
                    "--dtype=None takes the training split's)", key)
    if not trained:
        return
    style = lambda d: d if d in GENERATED else 'benchmark'  # noqa: E731  (benchmarks share one prompt format)
    for k in CHECKED:
        if (k == 'synth_level' and s['dataset'] != 'synth' or k == 'word_family' and s['dataset'] != 'words'
                or k == 'system_prompt' and s['dataset'] in GENERATED):
            continue  # a key this prompt does not use
        had = [t.get(k) for t in trained if k in t]
        if k == 'dataset':
            ok = not had or any(style(h) == style(s[k]) for h in had)
        else:
            ok = not had or any(_same(k, h, s[k]) for h in had)
        if not ok:
            was = ' / '.join(dict.fromkeys(repr(h) for h in had))
            raise ValueError(f"{k}={s[k]!r}, but {key}={where!r} was trained on {k}={was} ({trained[0]['where']}); "
                             f"fix: --{k}={had[0]!r} (or leave {k} unset), or a verifier trained with {k}={s[k]!r}")


# -----------------------------------------------------------------------------
# best-of-N: sample, score, pick


def as_problem(q, i, s):
    """A question as a problem dict (tasks.py's): a load_problems problem as it is, a string or {question, id?, gold?,
    index?} asked in the prompt style of settings s (index: its position i unless given)."""
    if isinstance(q, dict) and 'meta' in q and 'dataset' in q:
        return q
    q = {'question': q} if isinstance(q, str) else q
    if 'question' not in q:
        raise ValueError(f"question {i} has no 'question' (has {sorted(q)}); fix: {{\"question\": \"...\"}}")
    return new_problem(q['question'], s['dataset'], q.get('index', i), q.get('id'), q.get('gold'), s['synth_level'],
                       s['word_family'])


def best_of_n(model, tok, verifier, questions, n=8, settings=None, vote_temp=None, seed=1337, batch_size=128,
              steer=None):
    """Best-of-n picks for questions (strings, {question, id?, gold?} dicts, or tasks.load_problems problems) by a
    loaded generator (model, tok) and verifier (load_verifier; a store.load_checkpoint one too, unchecked against
    its training extraction), in the questions' order: iter_best_of_n's, collected."""
    picks = list(iter_best_of_n(model, tok, verifier, questions, n, settings, vote_temp, seed, batch_size, steer))
    return sorted(picks, key=lambda p: p['index'])


def iter_best_of_n(model, tok, verifier, questions, n=8, settings=None, vote_temp=None, seed=1337, batch_size=128,
                   steer=None):
    """Yield best-of-n picks as each question's n candidates end. settings: SETTINGS keys; those not given are the
    verifier's training extraction's (verifier.trained_on), else extract.py's defaults; a mismatch with training is a
    ValueError naming it and the fix. The questions are sampled as extraction samples, in one continuous batch of
    batch_size rows, each candidate's draws from seed, its question's index and its sample number alone.
    vote_temp: also the weighted vote at that temperature. steer: a steering policy for the sampling (online pruning
    or search: studies/policy.py's Steering; its verifier is checked as the one that picks).
    -> a pick per question (bestofn.choose), with its candidates and the seconds spent generating since the previous
    pick and verifying it ('seconds': {'generate', 'verify'})."""
    s = resolve(settings or {}, getattr(verifier, 'trained_on', []))
    check_match(verifier, s, model)
    readers = [verifier] + ([steer.verifier] if steer is not None else [])
    if steer is not None:
        check_match(steer.verifier, s, model, 'prune_ckpt / search_ckpt')
    problems = [as_problem(q, i, s) for i, q in enumerate(questions)]
    cfg = {**s, 'seed': seed, 'batch_size': batch_size,
           'step_kinds': stored_kinds({'boundary'} | {k for v in readers for k in read_kinds(v.spec['step_read'])})}
    table, dev = step_table(tok), next(verifier.parameters()).device
    t0 = time.perf_counter()
    for p, _, cs in sample_problems(model, tok, problems, n, cfg, table, steer):
        t1 = time.perf_counter()
        sc = score_problems(verifier, [{'key': p['id'], 'layers': list(s['layers']), 'candidates': cs}], device=dev,
                            where='sampled candidates')[0]
        t0, t2 = time.perf_counter(), t0
        yield {**choose(p, cs, sc, vote_temp, (s['deepconf_window'], s['deepconf_tail'])),
               'seconds': {'generate': t1 - t2, 'verify': t0 - t1}}


# -----------------------------------------------------------------------------
# the CLI: the checkpoint, the questions, the vote's temperature, resumable output


def best_ckpt(pattern, run=None):
    """Of the checkpoints matching pattern (run: only that run's seeds, tables.run_group) of finished runs
    (train.run_state: never an interrupted one), the best (tables.best_seed)."""
    paths = sorted(p for p in glob.glob(pattern) if run is None or tables.run_group(p) == run)
    unfinished = [p for p in paths if run_state(os.path.dirname(p)) == 'unfinished']
    paths = [p for p in paths if p not in unfinished]
    if not paths:
        raise ValueError(f"ckpt={pattern!r} matches no checkpoint" + (
            f" of a finished run ({unfinished[0]} is unfinished: its log.json is not done)" if unfinished else '')
            + f"; fix: train one first ({trainer(pattern)}; a run not done trains again), or --ckpt=<path to a "
            "ckpt.pt>" + (f" (or --verifier_run=<another run's name>: this one is {run!r})" if run else ''))
    return tables.best_seed(paths)


def own_ckpt(cfg):
    """The best (tables.best_seed) of the seeds of the config's own run: its runs found by the training settings
    cfg['train'] holds (train.py's knobs from the same config files and flags; none: its defaults) in their
    config.json (train.find_runs), each of its seeds there and finished."""
    tc = {**train.DEFAULTS, **(cfg.get('train') or {}), 'out_dir': cfg['out_dir']}
    name, runs = train.find_runs(tc)
    seeds = tc['seeds'] or [tc['seed']]
    gone = [s for s in seeds if s not in runs or run_state(runs[s]) != 'done']
    if gone:
        where = runs.get(gone[0]) or os.path.join(cfg['out_dir'], 'verifiers', f'{name}_seed{gone[0]}')
        raise ValueError(f"{where} is missing or unfinished, of the seeds {list(seeds)} the config names for {name}; "
                         "fix: python train.py <config> (it trains every seed that is not finished), or --ckpt=<path "
                         "to a ckpt.pt>")
    return tables.best_seed([os.path.join(runs[s], 'ckpt.pt') for s in seeds])


def vote_temperature(verifier, ck, path, n, cfg, device):
    """The weighted-vote temperature as evaluate.py chooses it for this checkpoint: bestofn.choose_temp over
    vote_temps on the validation problems of its training splits (the checkpoint's val_frac / val_seed /
    max_train_problems), at best-of-n (lowered to the smallest validation pool), scores cached with evaluate.py's; a
    shipped verifier's own (pools.export_verifier: the one evaluate.py chose, at best-of-its n)."""
    if (ck.get('vote') or {}).get('temp') is not None:
        return ck['vote']['temp']
    tc = ck.get('train_config') or {}
    dirs, out = train_dirs_now(tc, path) if tc.get('train_dirs') else [], tc.get('out_dir')
    run = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(path))))  # {out_dir}/verifiers/<run>/ckpt.pt
    if out and os.path.basename(os.path.dirname(os.path.dirname(os.path.abspath(path)))) == 'verifiers' \
            and os.path.realpath(out) != os.path.realpath(run):  # a copied or moved run: its own caches
        out = run
    split = (tc.get('val_frac', cfg['val_frac']), tc.get('val_seed', cfg['val_seed']), tc.get('max_train_problems'))
    vals = [tables.val_splitter(d, n, cfg)(*split) for d in dirs]
    if not dirs or any(v is None for v in vals):
        raise ValueError(f"vote=True chooses the temperature on the validation problems of {path}'s labelled training "
                         f"split ({dirs or 'unknown'}); fix: label it (python label.py <its config>), or --vote=False")
    vn = min(v[2] for v in vals)
    vals = [tables.val_splitter(d, vn, cfg)(*split) if v[2] != vn else v for d, v in zip(dirs, vals)]
    cache = os.path.join(out or os.path.dirname(dirs[0]), 'scores')  # evaluate.py's score cache
    check_writable('out_dir', cache)
    scores = [x for d, (vp, _, _) in zip(dirs, vals)
              for x in tables.cached_scores(verifier, path, vp, d, cache, cfg['eval_batch_size'], device)[0]]
    pool = [q for _, vpool, _ in vals for q in vpool]
    return choose_temp(scores, pool, vn, cfg['vote_temps'], where=f'{path} on validation')


def questions_of(cfg, s):
    """(the problems asked, the ids given them here, not by the user): one question (id '0'), a questions file's rows
    (ids unique, default their line number) or a dataset range (tasks.load_problems, their dataset ids), with the
    settings' prompt style."""
    if cfg['question'] is not None:
        return [new_problem(str(cfg['question']), s['dataset'], 0, None, None, s['synth_level'], s['word_family'],
                            s['word_split'])], {'0'}
    if cfg['dataset_range'] is not None:
        r = cfg['dataset_range']
        if not (isinstance(r, (list, tuple)) and len(r) == 2 and all(isinstance(x, int) for x in r)):
            lo = synth_boundary(s['synth_level'], s['synth_seed']) if s['dataset'] == 'synth' else (word_boundary(
                s['word_family'], s['synth_seed'], s['word_split']) or 0) if s['dataset'] == 'words' else 0
            raise ValueError(f"dataset_range={r!r} must be (lo, hi), inclusive dataset indices; fix: "
                             f"--dataset_range='({lo}, {lo + 9})' (the first of its task's held-out part)")
        return load_problems(s['dataset'], r[0], r[1], s['data_dir'], s['data_path'], s['synth_level'], s['synth_seed'],
                             s['exclude_ids'], s['word_family'], s['word_split']), set()
    path, out, seen, own = cfg['questions_file'], [], set(), set()
    bad = lambda k, what, fix: ValueError(f"questions_file={path!r} line {k + 1} {what}; fix: {fix}")  # noqa: E731
    if not os.path.isfile(path):
        raise ValueError(f"questions_file={path!r} not found; fix: a JSONL file, one {{\"question\": ...}} per line")
    with open(path, 'rb') as f:
        for k, raw in enumerate(f):
            try:
                line = raw.decode('utf-8')
            except UnicodeDecodeError as e:
                raise bad(k, f'is not UTF-8 text (byte {e.start + 1}: {raw[e.start:e.start + 1]!r})',
                          'save the file as UTF-8') from None
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as e:
                raise bad(k, f'is not JSON ({e})', 'one {"question": ...} per line') from None
            if not isinstance(row, dict) or not str(row.get('question', '')).strip():
                raise bad(k, 'has no question', '{"question": "..."} on every line')
            i = str(row.get('id', k))
            if i in seen:
                raise bad(k, f'repeats id {i!r}', 'unique ids (or none: the line number)')
            seen.add(i)
            own |= set() if 'id' in row else {i}
            out.append(new_problem(row['question'], s['dataset'], len(out), i, row.get('gold'), s['synth_level'],
                                   s['word_family'], s['word_split']))
    if not out:
        raise ValueError(f"questions_file={path!r} holds no question; fix: one {{\"question\": ...}} per line")
    return out, own


def unseen_example(s, groups):
    """A question of the verifier's own task and range that it never trained on, for a fix to show: the first of the
    task's held-out part (tasks.synth_boundary, word_boundary; a family split by arithmetic from its start) outside
    the checkpoint's training groups. None for a benchmark."""
    if s['dataset'] == 'synth':
        start = synth_boundary(s['synth_level'], s['synth_seed'])
        end = len(synth_space(s['synth_level'], s['synth_seed']))
        ask = lambda i: synth_problem(i, s['synth_level'], s['synth_seed'])  # noqa: E731
    elif s['dataset'] == 'words':
        start = word_boundary(s['word_family'], s['synth_seed'], s['word_split']) or 0
        end = len(word_space(s['word_family'], s['synth_seed'], s['word_split']))
        ask = lambda i: word_problem(i, s['word_family'], s['synth_seed'], s['word_split'])  # noqa: E731
    else:
        return None
    return next((p['question'] for p in map(ask, range(start, end)) if not seen_groups([p], groups or {})), None)


def as_rows(problems, ck, path):
    """The problems as group_key reads them: a question typed for a benchmark (no dataset row, so no id to group by)
    that is the question of a problem in the checkpoint's training splits (train.train_dirs_now, or the questions a
    shipped verifier holds: pools.export_verifier; text compared with its whitespace collapsed) takes that problem's
    dataset id; the others an id no dataset row has ('typed:<id>'):
    their own id is a line number, which a dataset of index ids (GSM8K) would mistake for its row."""
    norm = lambda q: ' '.join(str(q).split())  # noqa: E731
    want = {norm(p['question']) for p in problems}
    rows = {norm(q): {'id': i} for i, q in (ck.get('questions') or {}).items() if norm(q) in want}  # shipped
    for d in train_dirs_now(ck.get('train_config') or {}, path):
        for f in sorted(glob.glob(os.path.join(d, 'problems', '*.pt'))):
            r = load_problem(f, mmap=True)
            if norm(r['question']) in want:
                rows[norm(r['question'])] = r
    return [{**p, 'id': rows[norm(p['question'])]['id'] if norm(p['question']) in rows else f"typed:{p['id']}"}
            for p in problems]


def refusals(problems, s, ck, path, range_given, trained, example):
    """{id: why} of the questions this verifier will not answer: one that does not fit the task it was trained on (its
    dataset's or word family's template: asked under that task's worked example, it is another task; checked where
    its training extraction is known: trained), or one of its training or validation groups (tasks.seen_groups: a
    synthetic or word question, a dataset range, or a benchmark question typed as text that is one of its training
    problems: as_rows). example: a question it would answer (unseen_example)."""
    out = {}
    pat = task_pattern(s['dataset'], s['synth_level'], s['word_family'])[0] if trained else None
    task = s['dataset'] + (f" level {s['synth_level']}" if s['dataset'] == 'synth' else
                           f" family {s['word_family']}" if s['dataset'] == 'words' else '')
    for p in problems:
        if pat is not None and not pat.fullmatch(p['question'].strip()):
            out[p['id']] = f"does not fit the task {path} was trained on ({task}, e.g. {example!r})"
    if ck.get('groups') is None:
        check_unseen(problems, None, path)  # a checkpoint from before groups were stored: warned, unchecked
    rows = problems if range_given or s['dataset'] in GENERATED else as_rows(problems, ck, path)
    for p, row in zip(problems, rows):
        for _, k, side in seen_groups([row], ck.get('groups') or {}):
            out.setdefault(p['id'], f"shares its numbers (group {k!r}) with {path}'s {side} problems"
                                    + (f", e.g. ask {example!r}" if example else ''))
    return out


def _num(x):
    return float(x) if np.isfinite(x) else None  # JSON has no infinity (an empty candidate's confidence)


def rows_of(pick, indexed):
    """(the picks.jsonl row, the candidates.jsonl rows) of one pick; indexed: rows carry the dataset index (extract.py
    --mode=reencode matches a candidates_file row by index, else by id)."""
    at = {'id': pick['id'], **({'index': pick['index']} if indexed else {})}
    cands = []
    for j, c in enumerate(pick['candidates']):
        cands.append({**at, 'candidate': j, 'text': c['text'], 'token_ids': c['token_ids'].tolist(),
                      'finish': c['finish'], 'answer': c['answer'], 'score': _num(c['score']),
                      'pick': j == pick['candidate'], 'free': {k: _num(v) for k, v in c['free'].items()},
                      **{k: c[k] for k in ('correct', 'row', 'parent', 'inherited') if k in c}})
    return {**at, **{k: v for k, v in pick.items() if k not in ('candidates', 'id', 'index')}}, cands


def show(pick, n):
    """The lines printed for one pick (the first four runner-up answers)."""
    ok = {True: ', correct', False: f", wrong (gold {pick.get('gold')})"}
    tied = f" (tied with {pick['tied'] - 1} more)" if pick['tied'] > 1 else ''
    agree = f", {pick['agree']} of {n} give this answer" if pick['answer'] is not None else ''
    lines = [f"[{pick['id']}] {pick['question']}",
             f"  pick: {pick['answer'] or '(no answer)'}   score {pick['score']:.3f}, candidate {pick['candidate']} of "
             f"{n}{tied}{agree}{ok.get(pick.get('correct'), '')}"]
    if pick['runner_up']:
        lines.append('  runner-up answers: ' + ', '.join(f"{r['answer']} (score {r['score']:.3f}, {r['count']} of {n})"
                                                        for r in pick['runner_up'][:4]))
    if 'vote' in pick:
        v = pick['vote']
        lines.append('  weighted vote: no candidate has an answer' if v is None else
                     f"  weighted vote (T={v['temp']:g}): {v['answer']}, {100 * v['weight']:.0f}% of the weight"
                     f"{ok.get(v.get('correct'), '')}")
    return '\n'.join(lines)


# what may differ between the calls whose picks share a sample_dir: the questions asked (and whether forced), where
# they came from, and records of the call; every other key (checkpoint, N, sampling settings, vote) is the folder's
CALL_KEYS = ('question', 'questions_file', 'questions_sha256', 'dataset_range', 'force', 'verifier_run', 'sample_dir',
             'refused', 'done', 'vote_temp')


def check_sample_dir(sample_dir, config):
    """Refuse (ValueError naming the keys and the fix) a sample_dir whose picks were made with another checkpoint or
    settings (anything but CALL_KEYS): new questions are added to a folder of the same settings, never mixed."""
    paths = [os.path.join(sample_dir, f) for f in ('config.json', 'picks.jsonl')]
    if not all(os.path.exists(p) for p in paths) or not os.path.getsize(paths[1]):
        return
    # the steering policy as each records it (store.steering: a plain folder's old defaults are no policy)
    old, config = ({**{k: v for k, v in c.items() if k not in STEERING}, **steering(c)}
                   for c in (json.load(open(paths[0])), config))
    keys = sorted(k for k in set(old) | set(config) if k not in CALL_KEYS and old.get(k) != config.get(k))
    if keys:
        raise ValueError(f"sample_dir={sample_dir!r} holds picks made with other settings (they differ in "
                         f"{', '.join(keys)}); fix: --sample_dir=<a new dir> keeps both, or the same settings to add "
                         f"questions to it")


def _rows(path):
    out = []
    for line in open(path) if os.path.exists(path) else ():
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:  # a line torn by a kill
            pass
    return out


def answered(sample_dir):
    """(pick rows, their candidate rows) that sample_dir holds whole: a pick counts when every pick of its batch is
    there (a batch's candidates are written before its picks, its picks in one write: a killed call's torn batch is
    asked again, seeded as it was), with the candidates of those picks."""
    picks, cands = (_rows(os.path.join(sample_dir, f)) for f in ('picks.jsonl', 'candidates.jsonl'))
    held = Counter(tuple(r['batch']) for r in picks if 'batch' in r)
    whole = [r for r in picks if 'batch' not in r or held[tuple(r['batch'])] == r['batch'][1]]  # older picks: whole
    ids = {r['id'] for r in whole}
    return whole, [c for c in cands if c['id'] in ids]


def new_ids(todo, taken, own):
    """Give each question to ask an id no pick in the folder holds (taken): an id given here (own: a line number, '0'
    for --question) moves past every id in use; one the user gave is refused with the fix."""
    ids = set(taken) | {p['id'] for p in todo}
    top = max([int(i) for i in ids if str(i).isdigit()], default=-1)
    for p in todo:
        if p['id'] in taken:
            if p['id'] not in own:
                raise ValueError(f"id {p['id']!r} ({p['question'][:60]!r}) is taken in this sample_dir by another "
                                 f"question; fix: another id for it, or --sample_dir=<a new dir>")
            top += 1
            p['id'] = str(top)
        taken = taken | {p['id']}


def checkpoint(cfg):
    """The checkpoint that picks: ckpt, else the best seed of verifier_run, else of the config's own run (own_ckpt)."""
    if cfg['ckpt']:
        return best_ckpt(cfg['ckpt'])
    if cfg['verifier_run']:  # one run's seeds, never every run's
        return best_ckpt(os.path.join(cfg['out_dir'], 'verifiers', glob.escape(cfg['verifier_run']) + '_seed*',
                                      'ckpt.pt'), cfg['verifier_run'])
    return own_ckpt(cfg)


def check_call(cfg):
    """The checks of a call's knobs before any work: one source of questions, sizes, the vote, the device and dtype;
    -> the device (torch's threads set)."""
    set_threads(cfg['threads'])
    given = [k for k in ('question', 'questions_file', 'dataset_range') if cfg[k] is not None]
    if len(given) != 1:
        raise ValueError(f"{' and '.join(given) or 'no question'} given; fix: one of --question='...', "
                         f"--questions_file=<file.jsonl>, --dataset_range='(lo, hi)'")
    check_positive(cfg, EVAL | DEFAULTS, ('n_samples', 'batch_size', 'max_new_tokens', 'eval_batch_size', 'n_subsets'))
    if cfg['vote']:
        evaluate.check_vote_temps(cfg)
    if cfg['vote'] and cfg['n_samples'] == 1:
        raise ValueError("vote=True at n_samples=1: a vote over one candidate is that candidate; fix: --n_samples=8 "
                         "(or more), or --vote=False")
    dev = resolve_device(cfg['device'])
    check_weight_dtype(cfg['dtype'], dev)
    return dev


def checked_settings(cfg, verifier, path, readers):
    """Every setting of the call (resolve), checked against what the verifier was trained on (check_match: before the
    generator is loaded) and extract.py's bounds; every checkpoint that reads the questions (readers: [(path,
    checkpoint dict)]) trained on the data its split dirs hold now (else its picks are a stale run's)."""
    for p, c in readers:
        check_fresh(c, p)
    if not verifier.trained_on:
        print(f"sample.py: {path}'s training extraction config is not found, so the generator, layers and prompt it "
              f"was trained on are unchecked; settings not given are extract.py's defaults")
    s = resolve(cfg, verifier.trained_on)
    check_match(verifier, s)  # the generator's name, layers, prompt: before loading it
    check_between(s, extract.DEFAULTS, extract.SAMPLING)  # as given, else as its training split was sampled
    return s


def screened(problems, cfg, s, readers, trained):
    """The questions asked, less those a reader refuses (refusals; trained: its training extraction is known) unless
    force: -> (the questions to answer, {id: why} refused, the forced questions' texts). Every question refused, and
    not force: a ValueError in one line with the fix; some: they are listed, with why."""
    seen = {side: [k for _, c in readers for k in (c.get('groups') or {}).get(side, [])] for side in ('train', 'val')}
    example = unseen_example(s, seen)
    refused = {}
    for p, c in readers:
        for i, why in refusals(problems, s, c, p, cfg['dataset_range'] is not None, trained, example).items():
            refused.setdefault(i, why)
    # the forced questions, by text: new_ids may give one another id in a folder that holds picks
    forced = {p['question'].strip() for p in problems if p['id'] in refused} if cfg['force'] else set()
    if refused and not cfg['force'] and len(refused) == len(problems):  # nothing left to answer: one line, the fix
        force = ', or --force=True to answer anyway (marked forced in picks.jsonl)'
        unfit = [p for p in problems if refused[p['id']].startswith('does not fit')]
        typed = cfg['dataset_range'] is None and s['dataset'] not in GENERATED  # benchmark questions as text
        for p, c in readers if not unfit else ():  # never a question whose numbers it trained on
            check_unseen(as_rows(problems, c, p) if typed else problems, c.get('groups'), p,
                         force + (f"; a question it never saw: {example!r}" if example else ''))
        p = unfit[0]
        raise ValueError(f"{len(unfit)} question(s) do not fit{refused[p['id']][len('does not fit'):]}, e.g. question "
                         f"{p['id']} ({p['question'][:60]!r}); fix: a question of that form, a verifier trained on its "
                         f"task (--ckpt=...){force}")
    if refused and not cfg['force']:  # the others are answered; these are listed, with why
        print(f"refused {len(refused)} of the {len(problems)} questions (--force=True answers them, marked forced):\n"
              + '\n'.join(f"  [{p['id']}] {p['question'][:60]!r} {refused[p['id']]}"
                          for p in problems if p['id'] in refused))
        problems = [p for p in problems if p['id'] not in refused]
    return problems, refused, forced


def call_config(cfg, s, path, verifier, refused, steer):
    """The folder's config.json of this call (its vote's temperature and done added later): the knobs, the settings,
    the checkpoint and what it trained on, how candidates are cut and drawn, the questions' file hash, the refusals
    and the steering policy."""
    src = cfg['questions_file']
    return {**{k: v for k, v in cfg.items() if k not in ('threads', 'train')}, **s, 'ckpt': path,
            'trained_on': [t['where'] for t in verifier.trained_on], 'step_rule': STEP_RULE, 'sampler': SAMPLER,
            'done': False,
            'questions_sha256': hashlib.sha256(open(src, 'rb').read()).hexdigest() if src else None,
            'refused': {} if cfg['force'] else refused, **(steer.record if steer is not None else {})}


def resumed(sample_dir, problems, own):
    """What sample_dir holds whole (answered) and what is left to ask: -> (its pick rows, their candidate rows, the
    picks of the questions asked that it holds, the questions to ask, each with an id no pick there holds: new_ids).
    A question answered before (by its text) is not asked again."""
    old, cands = answered(sample_dir)
    by_text = {r['question'].strip(): r for r in old}
    done = [by_text[p['question'].strip()] for p in problems if p['question'].strip() in by_text]
    todo = [p for p in problems if p['question'].strip() not in by_text]
    new_ids(todo, {r['id'] for r in old}, own)
    return old, cands, done, todo


def checked_generator(cfg, s, verifier, todo, dev):
    """The generator of settings s, in the weights dtype asked (else the training split's), checked to hold the
    verifier's layers and the positions the prompts of todo and max_new_tokens need: -> (model, tokenizer)."""
    weights = cfg['dtype'] or next((t['weights_dtype'] for t in verifier.trained_on if t.get('weights_dtype')), 'auto')
    gen, tok = load_generator(s['model'], dev, weights)
    check_layers(gen, s['layers'])
    check_positions(getattr(gen.config, 'max_position_embeddings', None), s['max_new_tokens'], max(
        (len(tok(p, add_special_tokens=False).input_ids) for p in batch_prompts(tok, todo, s)), default=0))
    return gen, tok


def print_grades(picks, temp):
    """Where gold answers were given: how many picks (and weighted votes, at temperature temp) are correct."""
    graded = [r for r in picks if 'correct' in r]
    if graded:
        acc = lambda k: sum(bool((r.get(k) or {}).get('correct') if k == 'vote' else r[k])  # noqa: E731
                            for r in graded)
        print(f"graded {len(graded)} of {len(picks)}: the pick is correct on {acc('correct')}"
              + (f", the weighted vote on {acc('vote')}" if temp is not None else ''))


def run(cfg, steer=None):
    """The CLI: picks for the questions asked, printed and written to {sample_dir}; returns the picks rows. steer: a
    steering policy for the sampling (studies/policy.py's command gives it), recorded in the folder's config.json."""
    cfg = {**EVAL, **DEFAULTS, **cfg}
    dev = check_call(cfg)
    path = checkpoint(cfg)
    verifier, ck = load_verifier(path, dev)
    if np.isnan((ck.get('best_val') or {}).get('auroc') or 0.0):  # tables.best_seed ranks it last, all NaN: the first
        print(f"sample.py: warning: {path}'s validation AUROC is NaN: its validation held no problem with both a "
              "correct and a wrong candidate, so its seed was chosen blind and how well it ranks is unknown; fix: "
              "retrain with more validation problems (--val_frac) or samples a problem")
    # every checkpoint that reads the questions (the one that picks, the one that steers): the same checks
    readers = [(path, ck)] + ([(steer.verifier.ckpt_path, read_checkpoint(steer.verifier.ckpt_path, mmap=True))]
                              if getattr(getattr(steer, 'verifier', None), 'ckpt_path', path) != path else [])
    s = checked_settings(cfg, verifier, path, readers)
    problems, own = questions_of(cfg, s)
    problems, refused, forced = screened(problems, cfg, s, readers, bool(verifier.trained_on))
    n = cfg['n_samples']
    config = call_config(cfg, s, path, verifier, refused, steer)
    sample_dir = cfg['sample_dir'] or os.path.join(cfg['out_dir'], 'sample')
    check_writable('sample_dir', sample_dir)  # before any work: the picks go there
    check_sample_dir(sample_dir, json.loads(json.dumps(config, default=str)))  # before any work: never mix settings
    old, cands, done, todo = resumed(sample_dir, problems, own)
    temp = vote_temperature(verifier, ck, path, n, cfg, dev) if cfg['vote'] else None
    gen, tok = checked_generator(cfg, s, verifier, todo, dev)

    config = json.loads(json.dumps({**config, 'vote_temp': temp}, default=str))
    atomic_write_json(config, os.path.join(sample_dir, 'config.json'))
    for name, rows in (('picks', old), ('candidates', cands)):  # rewritten whole: a torn line or a partial batch goes
        atomic_write_json_lines(rows, os.path.join(sample_dir, f'{name}.jsonl'))
    print(f"{len(problems)} question{'s' * (len(problems) != 1)} ({len(done)} done already), best of {n} by {path}"
          + (f", weighted vote at T={temp:g}" if temp is not None else '')
          + (f"; sampled under {steer.describe(n)} by {getattr(steer.verifier, 'ckpt_path', path)}" if steer else ''))
    picks = list(done)
    for r in done:  # the finished ones, as they were printed then
        print(show(r, n))
    bar = tqdm(total=len(todo), desc='best-of-N', unit='question')
    for p in iter_best_of_n(gen, tok, verifier, todo, n, s, temp, cfg['seed'], cfg['batch_size'], steer):
        if p['question'].strip() in forced:  # answered with --force=True though refused otherwise
            p['forced'] = True
        row, cs = rows_of(p, cfg['dataset_range'] is not None)
        for name, rows in (('candidates', cs), ('picks', [row])):
            with open(os.path.join(sample_dir, f'{name}.jsonl'), 'a') as f:  # candidates first (picks name them)
                f.write(''.join(json.dumps(r) + '\n' for r in rows))
        picks.append(row)
        tqdm.write(show(p, n))
        if steer is not None:  # what the policy did: the rows it stopped, those it kept (the pick among them)
            cut = sum(c['finish'] == 'pruned' for c in p['candidates'])
            tqdm.write(f"  steered: {len(p['candidates'])} rows sampled, {cut} stopped at a step, "
                       f"{len(p['candidates']) - cut} kept to the end (the pick is one of them)")
        bar.update(1)
    bar.close()
    atomic_write_json({**config, 'done': True}, os.path.join(sample_dir, 'config.json'))
    print_grades(picks, temp)
    print(f"wrote {sample_dir}/picks.jsonl and candidates.jsonl")
    return picks


def configured(argv):
    """The config of a command line: config files, then --key=value, override the knobs above (another stage's --key
    has a note); the vote's settings are evaluate.py's keys, and 'train' train.py's, whose run picks (own_ckpt)."""
    argv, eval_cfg, train_cfg = split_argv(argv, DEFAULTS, EVAL, train.DEFAULTS)
    return {**{k: eval_cfg[k] for k in EVAL}, **configure(dict(DEFAULTS), argv, DEFAULTS), 'train': train_cfg}


if __name__ == '__main__':
    cli(run, configured(sys.argv[1:]), 'sample.py')
