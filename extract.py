"""
Stage 1: sample N solutions per problem with a frozen causal LM and keep, while it decodes, the
hidden state at every reasoning-step boundary (no extra forward pass), plus per-token log-probs
and entropies for the cheap scorers. Writes one .pt file per problem (format: README). The problems and
their prompts come from tasks.py; the step rule, the decoding loop (continuous batching: a row that ends takes the
next candidate) and re-encoding from capture.py; the model, its sampler and its decoding cache from generator.py.

`mode='reencode'` gives pools sampled elsewhere (`candidates_file`, e.g. by vLLM: README "On a GPU") the same states
in one batched teacher-forced pass. Before a split starts, a batch that will not fit the device's free memory is
refused with the batch_size that fits (machine.py's memory model), and the layer selection is checked against this
transformers release at load. Writes are atomic per problem; a re-run resumes (a file that does not load is
extracted again); `shard`/`num_shards` split the problems (under torchrun each rank is a shard on its LOCAL_RANK
GPU); mixing another generator, layers, step rule, sampler, mode, sampling settings or data into a split dir is
refused.

    python extract.py config/demo.py
    python extract.py config/gsm8k_1p7b.py --shard=0 --num_shards=4
    python extract.py config/demo.py --mode=reencode --candidates_file=pool.jsonl
"""
import glob
import json
import os
import shlex
import sys
import time

import torch
from tqdm import tqdm

from capture import (SAMPLER, STEP_RULE, pool_ids, prompt_frame, reencode_problems, sample_problems, step_table,
                     stored_kinds)
from configurator import GIVEN, configure, knobs
from generator import (check_layers, check_positions, check_weight_dtype, load_generator, positions,
                       resolve_dtype)
from machine import (check_between, check_memory, check_positive, check_writable, cli, cpu_cores, cpu_name,
                     git_state, launch_procs, resolve_device, set_threads)
from store import (STEERING, atomic_save, atomic_write_json, done_problems, extracted, generated_tokens,
                   load_problem, lock, steering, update_json_lines)
from tasks import (MATH_SYSTEM, SYNTH_SPLIT, batch_prompts, check_disjoint, check_synth_ranges, check_word_ranges,
                   load_problems, read_candidates_file)

# -----------------------------------------------------------------------------
# knobs (options in the comments); config files and --key=value override them
out_dir = 'out/demo'
model = 'smollm2'  # 'smollm2' (embedded SmolLM2-135M-Instruct) | hub id (Qwen/Qwen3-1.7B) | local folder | x.gguf
dataset = 'synth'  # 'synth' | 'words' | 'gsm8k' | 'math500' | 'aime' | 'olympiadbench'
data_dir: str = None  # folder with <dataset>/<file>.jsonl (e.g. '../shared/data'); None -> the Hugging Face hub
                      # via `datasets`
data_path: str = None  # a JSONL file for `dataset` (overrides data_dir)
exclude_ids = []  # dataset ids left out of the index ranges (the other rows keep their file index), e.g.
                  # OlympiadBench's two
synth_level = 2  # synthetic task: 1 | 2 | 3 | 4 operations (+ or -) on one-digit numbers
word_family = 'shop'  # dataset='words': GSM8K-style word problems generated in tasks.py: 'shop' | 'travel' | 'bake' |
                      # 'share' (WORD_FAMILIES)
word_split = 'arithmetic'  # dataset='words', what disjoint ranges keep apart (tasks.word_space): 'arithmetic' (numbers
                           # may recur) | 'numbers' (grouped by numbers: train below tasks.word_boundary, eval above)
synth_seed = 1337  # the order of the generated questions (synth and words): index i is always the same question
train_range: tuple | None = (0, 7)  # inclusive dataset indices of the verifier-training problems; None skips the split
eval_range: tuple | None = (1225, 1232)  # inclusive indices of the held-out problems; None skips the split (synth:
                                         # eval at or above tasks.synth_boundary, 1225 at level 2; train below it)
n_train_samples = 64  # candidates per training problem (paper: 64)
n_eval_samples = 8  # candidates per evaluation problem (paper: 8)
mode = 'sample'  # 'sample' | 'reencode' (teacher-forced pass over candidates_file)
candidates_file: str = None  # reencode: JSONL, one candidate a line: {index|id, text[, token_ids, finish]}
                             # (tasks.read_candidates_file)
layers = [-1]  # HF hidden_states indices (0 = embeddings, -1 = final layer after norm); [-1,-2,-3,-4] = top-4
max_steps: int | None = 100  # step states stored per candidate: the last max_steps (paper: S <= 100) | None = every
                             # step (thinking traces: train.py's input_steps / max_steps choose which to read)
step_kinds = ['boundary']  # per step (model.STEP_KINDS): 'boundary' (always: the step's last token) + 'mean' (of its
                           # tokens) | 'least' (its least likely token); train.py's step_read picks one
enable_thinking = False  # Qwen3 chat template thinking mode
system_prompt = MATH_SYSTEM  # for the benchmark datasets; the synthetic task uses a worked example instead
max_new_tokens = 256
temperature = 0.7
top_p = 0.9
conf_topk = 20  # DeepConf token confidence: minus the mean log-prob of the top conf_topk tokens (untempered)
batch_size = 128  # rows decoding at once (continuous batching: a row that ends takes the next candidate); the
                 # paper cells: the most that fit one 80 GB GPU (machine.fit_batch_size); reencode: at most this many
device = 'auto'  # 'auto' | 'cpu' | 'cuda'
dtype = 'auto'  # 'auto' (float16 on CUDA; on CPU the faster for this model, measured: generator.measured_cpu_dtype)
                # | 'float16' | 'bfloat16' | 'float32'; recorded per split (weights_dtype): resumes in another refused
torch_compile = False  # True: torch.compile the decoding step over fixed shapes (RESULTS: 4.7x eager on an H200,
                       # no CUDA graphs: the cache write mutates an input); slower on CPU
shard = 0  # this job's shard: every num_shards-th problem of each split, from the shard-th
num_shards = 1  # with torchrun, RANK / WORLD_SIZE set these when num_shards is 1
procs = 0  # processes that split the problems, each pinned to its own cores: 0 = one per core on CPU (bench.py
           # --only=procs), 1 on CUDA | n. Candidates do not depend on it; on CPU each counts on 1 / procs of the RAM
seed = 1337
threads = 0  # CPU threads for torch in each process; 0 = torch's default (with procs > 1: the cores split among them)
DEFAULTS = knobs(globals())  # the knobs above as a dict
# the sampling settings' intervals (machine.check_between), sample.py's too
SAMPLING = {'temperature': (0, None, 'at 0 or below it samples greedily: N identical candidates, nothing for '
                                     'best-of-N to choose'),
            'top_p': (0, 1, None)}

# -----------------------------------------------------------------------------
# the run


def run_split(split, problems, n, cfg, model, tok, table, pool=None, steer=None, room=None, frame=None):
    """Extract this shard's `problems` of one split (every num_shards-th, from the shard-th) into
    {out_dir}/{split}/problems/, skipping finished problems (store.done_problems), each file written as its problem's
    last candidate ends. Sampling runs every problem through one continuous batch of batch_size rows
    (capture.sample_problems); a candidate's draws depend on the seed, its problem's index and its sample number alone,
    so a resumed, sharded or grown run samples what one run over the range would (frame: capture.prompt_frame of the
    dataset's every problem, one for all shards and ranges). Re-encoding (pool:
    tasks.read_candidates_file, then capture.pool_ids) runs a problem's candidates in chunks of at most batch_size rows,
    fewer where `room` bytes (machine.check_memory) hold fewer."""
    split_dir = os.path.join(cfg['out_dir'], split)
    path = lambda p: os.path.join(split_dir, 'problems', f"{p['index']:06d}.pt")  # noqa: E731
    mine = problems[cfg['shard']::cfg['num_shards']]
    done, damaged, short = done_problems(mine, path, n if pool is None else None)
    todo = [p for p in mine if path(p) not in done]
    print(f"{split}: {len(problems)} problems, shard {cfg['shard']}/{cfg['num_shards']} has {len(mine)}, {len(done)} "
          f"done already, {len(todo)} to go{f' ({damaged} of them damaged files that do not load)' if damaged else ''}"
          f"{f' ({len(short)} of them grown to {n} samples)' if short else ''}, {n} samples each")
    if not todo:
        return
    bar, n_tok, t0 = tqdm(total=len(todo), desc=f'extract {split}', unit='problem'), 0, time.time()
    if pool is not None:
        got = reencode_problems(todo, n, cfg, model, tok, table, pool, room)
    else:  # a grown pool samples only its new candidates: those a problem holds stay as they are (counter draws)
        have = {id(p): short.get(path(p), 0) for p in todo}
        got = (x for h in sorted(set(have.values())) for x in sample_problems(
            model, tok, [p for p in todo if have[id(p)] == h], n - h, cfg, table, steer, frame, first_sample=h))
    for p, prompt, new in got:
        cands = (load_problem(path(p))['candidates'] if path(p) in short else []) + new
        atomic_save({**p, 'key': f"{p['index']:06d}", 'prompt': prompt, 'layers': list(cfg['layers']),
                     'candidates': cands, 'generated_tokens': generated_tokens(cands)}, path(p))
        n_tok += generated_tokens(new)
        bar.update(1)
        bar.set_postfix(tok_s=f'{n_tok / (time.time() - t0):.0f}')
    bar.close()


RUNS_FILE = 'extractions.jsonl'  # in each split dir: a line per run that extracted into it (record_run)
STAMP = '%Y-%m-%dT%H:%M:%SZ'  # its lines' started / finished: UTC, time.strftime's format
CHILD = 'HSRM_EXTRACT_CHILD'  # set in the processes a run launches (launch_procs): their run records them


def split_done(c, split, problems, n):
    """How many of a split's `problems` hold their n candidates in {out_dir}/{split} (store.done_problems)."""
    path = lambda p: os.path.join(c['out_dir'], split, 'problems', f"{p['index']:06d}.pt")  # noqa: E731
    return len(done_problems(problems, path, n if c['mode'] == 'sample' else None)[0])


def record_run(c, splits, problems, before, started, weights, ended=True):
    """A line in each split's extractions.jsonl for a run (not a process it launched: the run records them): the
    problems it extracted of its range, with what (the code as the run started, started = (time, git_state); the CPU,
    cores, torch, weights dtype, device) and when, so a split made in chunks, resumes or shards says how each part was
    made. Written as the run starts (ended=False: finished None, the problems done before it), and made whole as it
    ends: a run killed on the way (a session's end) still names the code and machine of the problems it wrote."""
    now = time.time()
    for s, r, n in splits:
        done = split_done(c, s, problems[s], n) if ended else before[s]
        line = {'started': time.strftime(STAMP, time.gmtime(started[0])),
                'finished': time.strftime(STAMP, time.gmtime(now)) if ended else None,
                'seconds': round(now - started[0], 1) if ended else None, 'range': list(r), 'n_samples': n,
                'problems': len(problems[s]), 'before': before[s], 'extracted': done - before[s] if ended else None,
                'done': done, 'shard': c['shard'], 'num_shards': c['num_shards'], **started[1], 'cpu': cpu_name()[0],
                'cores': len(cpu_cores()), 'procs': c['procs'], 'threads': c['threads'], 'torch': torch.__version__,
                'dtype': weights, 'device': c['device'], 'pid': os.getpid(),
                'command': ' '.join(['python', *map(shlex.quote, [os.path.relpath(sys.argv[0]), *sys.argv[1:]])])}
        key = lambda x: (x.get('pid'), x['started'], x['shard'])  # noqa: E731  (this run's line, once it started)

        def put(old):  # this run's line made whole, or added; other runs' lines (shards writing at once) kept
            mine = [key(x) == key(line) for x in old]
            return [line if m else x for m, x in zip(mine, old)] + ([] if any(mine) else [line])
        update_json_lines(os.path.join(c['out_dir'], s, RUNS_FILE), put)


def frame_problems(c, split_problems):
    """The problems whose prompts fix a split's decoding frame (capture.prompt_frame): a dataset file's every row, so
    that each chunk, shard and resume of it decodes in one frame; a generated task's split itself."""
    if c['dataset'] in ('synth', 'words'):
        return split_problems
    return load_problems(c['dataset'], 0, None, c['data_dir'], c['data_path'], exclude_ids=c['exclude_ids'])


def check_resume(split_dir, cfg):
    """Refuse to mix, in one split dir, outputs of different generators, layers, step rules, steering policies
    (store.STEERING), sampling settings or data selection (store.done_problems compares the data itself: a moved
    data_dir is fine). A config.json lacking a key compared here (an older extract.py's) is refused: what it held is
    unknown."""
    path = os.path.join(split_dir, 'config.json')
    if os.path.exists(path) and glob.glob(os.path.join(split_dir, 'problems', '*.pt')):
        old = json.load(open(path))
        if old.get('enable_thinking') and 'think_extract' in old:  # written before </think> positions were stored
            raise SystemExit(f"{split_dir} holds a thinking-mode extraction (think_extract={old['think_extract']!r}) "
                             "made before the </think> position was stored; fix: a new --out_dir, or delete "
                             f"{split_dir}")
        keys = ['model', 'weights_dtype', 'layers', 'step_kinds', 'dataset', 'mode', 'enable_thinking', 'step_rule',
                *(['sampler'] if cfg['mode'] == 'sample' else []),
                'max_steps', 'conf_topk', *(STEERING if steering(old) or steering(cfg) else ()), 'exclude_ids']
        keys += {'synth': ['synth_level', 'synth_seed', 'synth_split'],
                 'words': ['word_family', 'word_split', 'synth_seed']}.get(
            cfg['dataset'], ['system_prompt'])  # the generated tasks have no system prompt
        if cfg['mode'] == 'sample':  # re-encoding samples nothing
            keys += ['temperature', 'top_p', 'max_new_tokens', 'seed', 'n_samples']
        norm = lambda k, v: (sorted(map(str, v)) if k == 'exclude_ids'  # noqa: E731
                             else json.loads(json.dumps(v, default=str)))
        flag = lambda k: {'n_samples': f"n_{cfg.get('split', 'train')}_samples",  # noqa: E731
                          'weights_dtype': 'dtype'}.get(k, k)
        missing = [flag(k) for k in keys if k not in old and k not in STEERING]  # an unsteered split records none
        if missing:
            raise SystemExit(f"{split_dir} holds an extraction whose config.json does not record {', '.join(missing)}"
                             f" (an older extract.py wrote it), so this run cannot resume it; fix: extract into a new "
                             f"--out_dir, or delete {split_dir}")
        for k in keys:
            if k == 'n_samples' and k in old and cfg[k] > old[k]:  # a pool grown: its problems sample the rest
                continue
            if k in old and norm(k, old[k]) != norm(k, cfg.get(k)):
                raise SystemExit(f"{split_dir} holds an extraction with {flag(k)}={old[k]!r}, this run has {flag(k)}="
                                 f"{cfg.get(k)!r}; "
                                 f"fix: a new --out_dir (or {flag(k)}={old[k]!r} to resume this one), or delete "
                                 f"{split_dir}")


def run(config, steer=None, command=None):
    """The CLI (config: the knobs above, as set): every split extracted into {out_dir}/{split}/, each check before any
    work. steer: a steering policy for the eval split's sampling (studies/policy.py's command calls this; its record
    goes into the split's config.json), never the training split's: its candidates need their final labels. command:
    what runs this extraction again in each process of launch_procs (None: this file)."""
    c = dict(config)
    if c['num_shards'] == 1 and 'WORLD_SIZE' in os.environ:  # under torchrun each rank is a shard
        c.update(shard=int(os.environ.get('RANK', 0)), num_shards=int(os.environ['WORLD_SIZE']))
    if not 0 <= c['shard'] < c['num_shards']:
        raise SystemExit(f"shard={c['shard']} must be in [0, num_shards={c['num_shards']}); fix: "
                         f"--shard=0..{c['num_shards'] - 1}")
    if c['mode'] not in ('sample', 'reencode'):
        raise SystemExit(f"mode={c['mode']!r} is unknown; fix: one of sample, reencode")
    if c['max_steps'] is not None and (not isinstance(c['max_steps'], int) or c['max_steps'] < 1):
        raise SystemExit(f"max_steps={c['max_steps']!r} must be a positive int or None (every step); fix: "
                         "--max_steps=100")
    if not c['layers']:  # torch.cat of no state failed after sampling, a config.json already written
        raise SystemExit(f"layers={c['layers']!r} stores no hidden state, which is what the verifiers read; fix: "
                         f"--layers='{GIVEN.get('layers') or DEFAULTS['layers']}' (-1 = the final layer)")
    if not c['train_range'] and not c['eval_range']:
        fix = [f"--{k}={shlex.quote(repr(GIVEN.get(k) or DEFAULTS[k]))}" for k in ('train_range', 'eval_range')]
        raise SystemExit(f"train_range={c['train_range']!r} and eval_range={c['eval_range']!r}: nothing to extract "
                         f"(None skips a split); fix: {fix[0]}, or {fix[1]}, or both")
    if c['mode'] == 'reencode' and not c['candidates_file']:
        raise SystemExit("mode='reencode' needs candidates_file; fix: --candidates_file=pool.jsonl")
    try:
        c['step_kinds'] = stored_kinds(c['step_kinds'])
    except ValueError as e:
        raise SystemExit(str(e))
    cli(lambda x: check_positive(x, DEFAULTS, ('batch_size', 'n_train_samples', 'n_eval_samples', 'max_new_tokens',
                                               'conf_topk')), c, 'extract.py')
    cli(lambda x: check_between(x, DEFAULTS, SAMPLING), c, 'extract.py')
    cli(lambda x: set_threads(x['threads']), c, 'extract.py')
    if not isinstance(c['procs'], int) or c['procs'] < 0:
        raise SystemExit(f"procs={c['procs']!r} must be 0 (one per core) or a positive int; fix: --procs=0")
    out_dir = c['out_dir']
    check_writable('out_dir', out_dir)  # before any work: the splits, their config.json and the process logs go there
    device = c['device'] = resolve_device(c['device'])  # under torchrun: cuda:LOCAL_RANK
    cli(lambda x: check_weight_dtype(x['dtype'], device), c, 'extract.py')
    if device.startswith('cuda:'):
        torch.cuda.set_device(device)  # what allocates without naming a device (CUDA graphs, streams) goes there too
    torch.manual_seed(c['seed'])
    splits = [(s, r, n) for s, r, n in (('train', c['train_range'], c['n_train_samples']),
                                        ('eval', c['eval_range'], c['n_eval_samples'])) if r]
    if c['dataset'] == 'synth':  # splits by operand multiset: train below the level's boundary, eval above it
        check_synth_ranges(c['synth_level'], c['synth_seed'], c['train_range'], c['eval_range'])
        c['synth_split'] = SYNTH_SPLIT
    if c['dataset'] == 'words':  # under word_split='numbers': train below the family's boundary, eval at or above it
        check_word_ranges(c['word_family'], c['synth_seed'], c['word_split'], c['train_range'], c['eval_range'])
    problems = {s: load_problems(c['dataset'], r[0], r[1], c['data_dir'], c['data_path'], c['synth_level'],
                                 c['synth_seed'], c['exclude_ids'], c['word_family'], c['word_split'])
                for s, r, _ in splits}
    if len(problems) == 2:
        check_disjoint(problems['train'], problems['eval'])
    # every core: a process per core (bench.py --only=procs); never more processes than batch_size rows fill, one on
    # CUDA (one GPU)
    n_procs = c['procs'] or (1 if device.startswith('cuda') else len(cpu_cores()))
    n_procs = min(n_procs, max(-(-len(problems[s]) * n // c['batch_size']) for s, _, n in splits)) if splits else 1
    weights = resolve_dtype(c['model'], c['dtype'], device, rows=c['batch_size'])  # 'auto' on a CPU: measured once
                                                                                      # here, the processes take it
    if c['mode'] == 'sample':  # before any process starts, whatever the prompt (exactly once the prompts are tokenized)
        cli(lambda x: check_positions(positions(x['model']), x['max_new_tokens']), c, 'extract.py')
    part = '' if c['num_shards'] == 1 else f"shard{c['shard']}of{c['num_shards']}"  # one run a folder (a shard) at once
    started, before = (time.time(), git_state()), {s: split_done(c, s, problems[s], n) for s, _, n in splits}
    if c['num_shards'] == 1 and n_procs > 1:
        lock(out_dir, 'out_dir', part)
        record_run(c, splits, problems, before, started, weights, ended=False)
        per_split = {s: problems[s] for s, _, _ in splits}
        launch_procs(n_procs, extracted(per_split, out_dir, {s: n for s, _, n in splits}),
                     sum(map(len, per_split.values())), out_dir, c['threads'], sys.argv[1:] + [f'--dtype={weights}'],
                     command, {CHILD: '1'})
        record_run(c, splits, problems, before, started, weights)
        print(f'done: {out_dir}')
        return
    gen_model, tok = load_generator(c['model'], device, weights)
    check_layers(gen_model, c['layers'])
    c.update(d_gen=gen_model.config.hidden_size, num_hidden_layers=gen_model.config.num_hidden_layers,
             weights_dtype=str(next(gen_model.parameters()).dtype).removeprefix('torch.'),
             has_chat_template=bool(getattr(tok, 'chat_template', None)), step_rule=STEP_RULE, sampler=SAMPLER)
    table = step_table(tok)
    pool = pool_ids(read_candidates_file(c['candidates_file']), tok, gen_model, c['candidates_file']) \
        if c['mode'] == 'reencode' else None
    prompt_lens = {s: [len(tok(q, add_special_tokens=False).input_ids) for q in batch_prompts(tok, problems[s], c)]
                   for s, _, _ in splits}
    if pool is None:
        cli(lambda x: check_positions(getattr(gen_model.config, 'max_position_embeddings', None), x['max_new_tokens'],
                                      max((n for ns in prompt_lens.values() for n in ns), default=0)), c, 'extract.py')
    room = check_memory(c, splits, problems, prompt_lens, gen_model, pool)  # every split, before the first starts
    lock(out_dir, 'out_dir', part)
    if not os.environ.get(CHILD):
        record_run(c, splits, problems, before, started, c['weights_dtype'], ended=False)
    for split, _, n in splits:
        split_dir = os.path.join(out_dir, split)
        steered = steer if split == 'eval' else None
        cfg = {**c, 'split': split, 'n_samples': n, **(steered.record if steered else {})}
        check_resume(split_dir, cfg)
        atomic_write_json(cfg, os.path.join(split_dir, 'config.json'))
        try:
            run_split(split, problems[split], n, cfg, gen_model, tok, table, pool, steered, room,
                      prompt_frame(tok, frame_problems(c, problems[split]), cfg) if c['mode'] == 'sample' else None)
        except ValueError as e:  # a steering setting the sampler refuses, or an overflow (each names the fix)
            raise SystemExit(str(e))
    if not os.environ.get(CHILD):
        record_run(c, splits, problems, before, started, c['weights_dtype'])
    print(f'done: {out_dir}')


if __name__ == '__main__':
    cli(run, configure(globals()), 'extract.py')  # config files, then --key=value, override the knobs above
