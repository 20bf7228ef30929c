"""
Stage 1: sample N solutions per problem with a frozen causal LM and keep, while it decodes, the
hidden state at every reasoning-step boundary (no extra forward pass), plus per-token log-probs
and entropies for the cheap scorers. Writes one .pt file per problem (format: README). The problems and
their prompts come from tasks.py; the step rule, the decoding loop and re-encoding from capture.py; the model,
its sampler and its decoding cache from generator.py.

`torch_compile=True` compiles the step over a static cache (a GPU option: slower than eager on CPU).
`mode='reencode'` gives pools sampled elsewhere (`candidates_file`) the same states. Writes are atomic per
problem; a re-run resumes (a file that does not load is extracted again); `shard`/`num_shards` split whole
batches; mixing another generator, layers, step rule, mode, sampling settings or data into a split dir is refused.

    python extract.py config/demo.py
    python extract.py config/gsm8k_1p7b.py --shard=0 --num_shards=4
    python extract.py config/demo.py --mode=reencode --candidates_file=pool.jsonl
"""
import glob
import json
import os
import subprocess
import sys
import time

import torch
from tqdm import tqdm

from configurator import configure, knobs
from capture import STEP_RULE, batch_prompts, generated_tokens, problem_batches, reencode, sample_problems, step_table
from generator import check_layers, load_generator
from model import DAMAGED, SEARCH_RULES, atomic_save, atomic_write_json, load_checkpoint, resolve_device
from tasks import MATH_SYSTEM, load_problems

HERE = os.path.dirname(os.path.abspath(__file__))

# -----------------------------------------------------------------------------
# knobs (options in the comments); config files and --key=value override them
out_dir = 'out/demo'
model = 'smollm2'  # 'smollm2' (embedded SmolLM2-135M-Instruct) | hub id (Qwen/Qwen3-1.7B) | local folder | x.gguf
dataset = 'synth'  # 'synth' | 'words' | 'gsm8k' | 'math500' | 'aime' | 'olympiadbench'
data_dir = None  # folder with <dataset>/<file>.jsonl (e.g. '../shared/data'); None -> the Hugging Face hub via `datasets`
data_path = None  # a JSONL file for `dataset` (overrides data_dir)
exclude_ids = []  # dataset ids left out of the index ranges (the other rows keep their file index), e.g. OlympiadBench's two
synth_level = 2  # synthetic task: 1 | 2 | 3 | 4 operations (+ or -) on one-digit numbers
word_family = 'shop'  # dataset='words': GSM8K-style word problems generated in tasks.py: 'shop' | 'travel' | 'bake' | 'share' (WORD_FAMILIES)
synth_seed = 1337  # the order of the generated questions (synth and words): index i is always the same question
train_range = (0, 7)  # inclusive dataset indices of the verifier-training problems; None skips the split
eval_range = (8, 15)  # inclusive dataset indices of the held-out evaluation problems; None skips the split
n_train_samples = 64  # candidates per training problem (paper: 64)
n_eval_samples = 8  # candidates per evaluation problem (paper: 8)
mode = 'sample'  # 'sample' | 'reencode' (teacher-forced pass over candidates_file)
candidates_file = None  # reencode: JSONL of {index|id, text[, token_ids, finish]}
layers = [-1]  # HF hidden_states indices (0 = embeddings, -1 = final layer after norm); [-1,-2,-3,-4] = top-4
max_steps = 100  # step states stored per candidate: the last max_steps (paper: S <= 100) | None = every step (thinking
                 # traces: train.py's input_steps / max_steps then choose which to read, from one extraction)
enable_thinking = False  # Qwen3 chat template thinking mode
system_prompt = MATH_SYSTEM  # for the benchmark datasets; the synthetic task uses a worked example instead
max_new_tokens = 256
temperature = 0.7
top_p = 0.9
conf_topk = 20  # DeepConf token confidence: minus the mean log-prob of the top conf_topk tokens (untempered)
batch_size = 128  # sequences per forward pass (bench.py --only=procs: 128 fastest on 2 CPU cores); problems per batch = batch_size // n_samples
device = 'auto'  # 'auto' | 'cpu' | 'cuda'
dtype = 'auto'  # 'auto' (float16 on CUDA, float32 on CPU: faster than bfloat16 on CPUs without AMX/avx512_bf16) | 'float16' | 'bfloat16' | 'float32'
torch_compile = False  # True: torch.compile the decoding step over a static KV cache (CUDA graphs on GPU); rows stay in the batch until all finish
prune_ckpt = None  # online pruning of the eval split: a hidden-state verifier checkpoint, e.g. 'out/demo/verifiers/hsrm_seed42/ckpt.pt'; None = off
prune_rule = 'relative'  # 'relative' (stop a row scoring more than prune_threshold behind its pool's best) | 'global' (stop below prune_threshold)
prune_threshold = None  # the rule's threshold; steer.py's pruning table prints the one chosen on validation for each checkpoint
search = None  # verifier-steered search on the eval split: None | 'beam' (N rows, the best N / search_width kept at each
               # step, each continued search_width ways) | 'dvts' (N / search_width independent subtrees, each greedy)
search_ckpt = None  # the hidden-state verifier that steers it, e.g. 'out/words_shop/verifiers/hsrm_seed42/ckpt.pt'
search_width = 4  # M: rows each survivor continues as (divides n_eval_samples); M = 1 samples exactly as search=None
shard = 0  # this job's shard: whole batches of batch_size // n_samples problems, batch b to shard b % num_shards
num_shards = 1  # with torchrun, RANK / WORLD_SIZE set these when num_shards is 1
procs = 0  # processes that split the batches on this machine, each pinned to its own cores: 0 = one per core on CPU (never
           # slower here: bench.py --only=procs), 1 on CUDA | n. Candidates do not depend on it (batches are seeded alone)
seed = 1337
threads = 0  # CPU threads for torch in each process; 0 = torch's default (with procs > 1: the cores split among them)
DEFAULTS = knobs(globals())  # the knobs above as a dict

# -----------------------------------------------------------------------------
# the run


def read_candidates_file(path):
    """Re-encode input: JSONL rows {"index": int (dataset index) or "id": str, "text": str, optional
    "token_ids": [int], "finish": "eos"|"length"}; returns {index or id: [rows]}."""
    if not os.path.isfile(path):
        raise SystemExit(f"candidates_file={path!r} not found; fix: a JSONL of {{index|id, text}} rows")
    pool = {}
    with open(path) as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            row = json.loads(line)
            if 'text' not in row or ('index' not in row and 'id' not in row):
                raise SystemExit(f"candidates_file={path!r} line {n} needs 'text' and 'index' or 'id' (has {sorted(row)})")
            pool.setdefault(row.get('index', row.get('id')), []).append(row)
    return pool


def run_split(split, problems, n, cfg, model, tok, table, pool=None, verifier=None):
    """Extract one split into {out_dir}/{split}/problems/, skipping finished problems (finished()). Problems go
    in fixed batches of batch_size // n, each seeded by the run seed and its first problem, and a batch with
    any file missing or damaged is redone whole (only those files are written): a resumed or sharded run
    samples exactly what one uninterrupted run would."""
    split_dir = os.path.join(cfg['out_dir'], split)
    path = lambda p: os.path.join(split_dir, 'problems', f"{p['index']:06d}.pt")  # noqa: E731
    batches = problem_batches(problems, n, cfg['batch_size'])[cfg['shard']::cfg['num_shards']]
    mine = sum(len(b) for b in batches)
    done, damaged = finished([p for b in batches for p in b], path)
    todo = [b for b in batches if not all(path(p) in done for p in b)]
    n_todo = mine - len(done)
    print(f"{split}: {len(problems)} problems, shard {cfg['shard']}/{cfg['num_shards']} has {mine}, "
          f"{len(done)} done already, {n_todo} to go{f' ({damaged} of them damaged files that do not load)' if damaged else ''}, "
          f"{n} samples each")
    bar, n_tok, t0 = tqdm(total=n_todo, desc=f'extract {split}', unit='problem'), 0, time.time()
    for batch in todo:
        if pool is None:
            prompts, res = sample_problems(model, tok, batch, n, cfg, table, verifier)
        else:
            prompts, res = batch_prompts(tok, batch, cfg), []
            for p, prompt in zip(batch, prompts):
                rows = pool.get(p['index'], pool.get(p['id'], []))
                if not rows:
                    raise SystemExit(f"candidates_file has no rows for problem index {p['index']} / id {p['id']!r}; "
                                     f"fix: restrict the range or add its candidates")
                ids = [r['token_ids'] if 'token_ids' in r else tok(r['text'], add_special_tokens=False).input_ids for r in rows]
                res.append([])
                for j in range(0, len(rows), cfg['batch_size']):
                    res[-1] += reencode(model, tok, [prompt] * len(ids[j:j + cfg['batch_size']]), ids[j:j + cfg['batch_size']],
                                        cfg['layers'], [r.get('finish', 'eos') for r in rows[j:j + cfg['batch_size']]],
                                        table, cfg['max_steps'], cfg['conf_topk'])
        for p, prompt, cands in zip(batch, prompts, res):
            if path(p) in done:
                continue
            key = f"{p['index']:06d}"
            extra = {'generated_tokens': generated_tokens(cands)} if cfg['search'] else {}
            atomic_save({**p, 'key': key, 'prompt': prompt, 'layers': list(cfg['layers']), 'candidates': cands, **extra},
                        path(p))
            n_tok += sum(len(c['token_ids']) for c in cands)
            bar.update(1)
        bar.set_postfix(tok_s=f'{n_tok / (time.time() - t0):.0f}')
    bar.close()


def finished(problems, path):
    """(paths of `problems` already extracted, how many files did not load). A file that does not load (an
    interrupted copy, a full disk) is extracted again; one holding another question or gold than the
    problem at its index means the data source changed (dataset file, exclude_ids, synthetic level or
    seed): an error, since the split would mix two data sets. Files are memory-mapped: their states are
    never read."""
    done, damaged = set(), 0
    for p in problems:
        if not os.path.exists(path(p)):
            continue
        try:
            old = torch.load(path(p), weights_only=True, mmap=True)
        except DAMAGED:
            damaged += 1
            continue
        if (old['question'], old['gold']) != (p['question'], p['gold']):
            raise SystemExit(f"{path(p)} holds {old['dataset']} problem {old['id']!r} ({old['question'][:60]!r}, gold "
                             f"{old['gold']!r}), this run's index {p['index']} is {p['dataset']} problem {p['id']!r} "
                             f"({p['question'][:60]!r}, gold {p['gold']!r}): the data changed (dataset, its file, "
                             f"exclude_ids, synth_level, word_family, synth_seed); fix: a new --out_dir, or the data it was extracted from")
        done.add(path(p))
    return done, damaged


def check_resume(split_dir, cfg):
    """Refuse to mix, in one split dir, outputs of different generators, layers, step rules, pruning, sampling
    settings or data selection (finished() compares the data itself: a moved data_dir is fine). A key its
    config.json lacks (written by an older version) is unknown and not compared."""
    path = os.path.join(split_dir, 'config.json')
    if os.path.exists(path) and glob.glob(os.path.join(split_dir, 'problems', '*.pt')):
        old = json.load(open(path))
        if old.get('enable_thinking') and 'think_extract' in old:  # written before </think> positions were stored
            raise SystemExit(f"{split_dir} holds a thinking-mode extraction (think_extract={old['think_extract']!r}) made "
                             f"before the </think> position was stored; fix: a new --out_dir, or delete {split_dir}")
        keys = ['model', 'layers', 'dataset', 'mode', 'enable_thinking', 'step_rule', 'max_steps', 'conf_topk',
                'prune_ckpt', 'prune_rule', 'prune_threshold', 'search', 'search_ckpt', 'search_width', 'exclude_ids']
        keys += {'synth': ['synth_level', 'synth_seed'], 'words': ['word_family', 'synth_seed']}.get(
            cfg['dataset'], ['system_prompt'])  # the generated tasks have no system prompt
        if cfg['mode'] == 'sample':  # re-encoding samples nothing
            keys += ['temperature', 'top_p', 'max_new_tokens', 'seed', 'n_samples']
        norm = lambda k, v: sorted(map(str, v)) if k == 'exclude_ids' else json.loads(json.dumps(v, default=str))  # noqa: E731
        for k in keys:
            if k in old and norm(k, old[k]) != norm(k, cfg[k]):
                name = f"n_{cfg['split']}_samples" if k == 'n_samples' else k
                raise SystemExit(f"{split_dir} holds an extraction with {name}={old[k]!r}, this run has {name}={cfg[k]!r}; "
                                 f"fix: a new --out_dir (or {name}={old[k]!r} to resume this one), or delete {split_dir}")


def cpu_cores():
    """The cores this process may run on (its affinity where the OS tells it)."""
    return sorted(os.sched_getaffinity(0)) if hasattr(os, 'sched_getaffinity') else list(range(os.cpu_count() or 1))


def launch_procs(n, per_split, out_dir, threads=0, argv=None):
    """Run this extraction as n processes on this machine: process i is shard i of n (`--shard=i --num_shards=n`),
    pinned to its share of the cores with `threads` threads (0: that share), its log in {out_dir}/procs/.
    One bar counts the files the processes write. `per_split`: {split: problems}. Returns when all are done;
    a failed process stops the others and its log's tail is the error."""
    argv = sys.argv[1:] if argv is None else argv
    cores = cpu_cores()
    share = [cores[i * len(cores) // n:(i + 1) * len(cores) // n] or [cores[i % len(cores)]] for i in range(n)]
    os.makedirs(os.path.join(out_dir, 'procs'), exist_ok=True)
    logs, jobs = [os.path.join(out_dir, 'procs', f'shard{i}.log') for i in range(n)], []
    for i in range(n):
        t = str(threads or len(share[i]))
        cmd = [sys.executable, os.path.join(HERE, 'extract.py'), *argv, f'--shard={i}', f'--num_shards={n}', '--procs=1',
               f'--threads={t}']
        pin = (lambda c=share[i]: os.sched_setaffinity(0, c)) if hasattr(os, 'sched_setaffinity') else None
        with open(logs[i], 'w') as log:  # the child keeps its own copy of the handle
            jobs.append(subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, preexec_fn=pin,
                                         env={**os.environ, 'OMP_NUM_THREADS': t}))
    files = lambda: sum(len(glob.glob(os.path.join(out_dir, s, 'problems', '*.pt'))) for s in per_split)  # noqa: E731
    total = sum(per_split.values())
    bar = tqdm(total=total, initial=min(total, files()), desc=f'extract ({n} processes, logs in {out_dir}/procs)', unit='problem')
    try:  # until all are done or one has failed
        while any(j.poll() is None for j in jobs) and all(j.returncode in (None, 0) for j in jobs):
            time.sleep(1)
            bar.update(min(total, files()) - bar.n)
    finally:
        for j in jobs:
            if j.poll() is None:
                j.terminate()
                j.wait()
        bar.close()
    failed = [i for i, j in enumerate(jobs) if j.returncode != 0]
    if failed:
        tail = open(logs[failed[0]]).read()[-3000:]
        raise SystemExit(f"extraction process {failed[0]} of {n} failed (log {logs[failed[0]]}); its last lines:\n{tail}")

if __name__ == '__main__':
    config = configure(globals())  # config files, then --key=value, override the knobs above
    if num_shards == 1 and 'WORLD_SIZE' in os.environ:
        shard, num_shards = int(os.environ.get('RANK', 0)), int(os.environ['WORLD_SIZE'])
        config.update(shard=shard, num_shards=num_shards)
    if not 0 <= shard < num_shards:
        raise SystemExit(f"shard={shard} must be in [0, num_shards={num_shards}); fix: --shard=0..{num_shards - 1}")
    if mode not in ('sample', 'reencode'):
        raise SystemExit(f"mode={mode!r} is unknown; fix: one of sample, reencode")
    if max_steps is not None and (not isinstance(max_steps, int) or max_steps < 1):
        raise SystemExit(f"max_steps={max_steps!r} must be a positive int or None (every step); fix: --max_steps=100")
    if mode == 'reencode' and not candidates_file:
        raise SystemExit("mode='reencode' needs candidates_file; fix: --candidates_file=pool.jsonl")
    if not isinstance(procs, int) or procs < 0:
        raise SystemExit(f"procs={procs!r} must be 0 (one per core) or a positive int; fix: --procs=0")
    device = resolve_device(device)
    config['device'] = device
    if threads:
        torch.set_num_threads(threads)
    torch.manual_seed(seed)
    splits = [(s, r, n) for s, r, n in (('train', train_range, n_train_samples), ('eval', eval_range, n_eval_samples)) if r]
    problems = {s: load_problems(dataset, r[0], r[1], data_dir, data_path, synth_level, synth_seed, exclude_ids, word_family)
                for s, r, _ in splits}
    # every core: a process per core is 1.3x one process on torch's threads at 64 rows, level at 128 (bench.py
    # --only=procs) and never slower; never more processes than batches, and one on CUDA (one GPU)
    n_procs = procs or (1 if device.startswith('cuda') else len(cpu_cores()))
    n_procs = min(n_procs, max(-(-len(problems[s]) // max(1, batch_size // n)) for s, _, n in splits)) if splits else 1
    if num_shards == 1 and n_procs > 1:
        launch_procs(n_procs, {s: len(problems[s]) for s, _, _ in splits}, out_dir, threads)
        print(f'done: {out_dir}')
        raise SystemExit(0)
    gen_model, tok = load_generator(model, device, dtype)
    check_layers(gen_model, layers)
    config.update(d_gen=gen_model.config.hidden_size, num_hidden_layers=gen_model.config.num_hidden_layers,
                  has_chat_template=bool(getattr(tok, 'chat_template', None)), step_rule=STEP_RULE)
    table = step_table(tok)
    pool = read_candidates_file(candidates_file) if mode == 'reencode' else None
    verifier = None
    if search not in (None,) + SEARCH_RULES:
        raise SystemExit(f"search={search!r} is unknown; fix: None, or one of {', '.join(SEARCH_RULES)}")
    if search and prune_ckpt:
        raise SystemExit(f"search={search!r} and prune_ckpt={prune_ckpt!r}: one verifier steers a split; fix: --prune_ckpt=None "
                         f"(search stops rows itself) or --search=None")
    for key, ckpt in (('prune_ckpt', prune_ckpt), ('search_ckpt', search_ckpt if search else None)):
        if not ckpt:  # the training split is never steered: its candidates need their final labels
            continue
        if mode == 'reencode':
            raise SystemExit(f"{key} steers sampling; fix: mode='sample', or {key}=None to re-encode")
        if not os.path.isfile(ckpt):
            raise SystemExit(f"{key}={ckpt!r} not found; fix: train a verifier first (python train.py <config>)")
        verifier = load_checkpoint(ckpt, device)[0]
    if search and verifier is None:
        raise SystemExit(f"search={search!r} needs search_ckpt; fix: --search_ckpt=<verifiers/hsrm_seed42/ckpt.pt>")
    for split, _, n in splits:
        split_dir = os.path.join(out_dir, split)
        cfg = {**config, 'split': split, 'n_samples': n}
        if split != 'eval':
            cfg.update(prune_ckpt=None, prune_threshold=None, search=None, search_ckpt=None)
        check_resume(split_dir, cfg)
        atomic_write_json(cfg, os.path.join(split_dir, 'config.json'))
        try:
            run_split(split, problems[split], n, cfg, gen_model, tok, table, pool, verifier if split == 'eval' else None)
        except ValueError as e:  # a pruning setting the sampler refuses (names the key and the fix)
            raise SystemExit(str(e))
    print(f'done: {out_dir}')
