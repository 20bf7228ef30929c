"""
This machine, what every stage runs on besides its config: the device a knob names (resolve_device), one CPU thread
where results must not depend on the thread count (one_thread), a Hugging Face model a knob names (from_pretrained),
its cores and the processes that share them (extraction's shards: launch_procs; training's runs: fork_map), and its
memory: the bytes a batch allocates, from the model config alone (no weights), against what the device has
free. extract.py refuses a batch that will not fit before a split starts and names the batch_size that fits; the
paper cells' batch_size is the largest that fits one 80 GB GPU (python -m studies.bench --only=memory prints the plan).
"""
import functools
import multiprocessing
import os
import signal
import subprocess
import sys
import time

import torch
from tqdm import tqdm

HERE = os.path.dirname(os.path.abspath(__file__))

# -----------------------------------------------------------------------------
# the device, its threads, the models a knob names


def resolve_device(device, env=None, cuda=None):
    """'auto' -> 'cuda' when a GPU is visible, else 'cpu'; an explicit 'cuda' without one is an error. Under torchrun
    (LOCAL_RANK in the environment) 'cuda' is this rank's own GPU, cuda:LOCAL_RANK, not every rank's cuda:0.
    env, cuda: the environment and whether CUDA is available (default: this process's)."""
    env, cuda = os.environ if env is None else env, torch.cuda.is_available() if cuda is None else cuda
    if device == 'auto':
        device = 'cuda' if cuda else 'cpu'
    if device.startswith('cuda') and not cuda:
        raise SystemExit(f"device={device!r} but CUDA is not available; fix: --device=cpu (or 'auto')")
    return f"cuda:{int(env['LOCAL_RANK'])}" if device == 'cuda' and 'LOCAL_RANK' in env else device


def from_pretrained(cls, key, name, **kw):
    """cls.from_pretrained(name, **kw) (a transformers Auto class) for the knob `key`. A model that cannot be
    loaded (a mistyped id or folder, a hub id with no network and not in the cache, a folder without
    the model's files) is one line naming it and the fix, not transformers' traceback."""
    try:
        return cls.from_pretrained(name, **kw)
    except (OSError, ValueError) as e:
        if isinstance(e, ValueError) and not os.path.isdir(name):  # a ValueError elsewhere is no loading problem
            raise
        where = (f'the folder {name} does not hold a loadable model' if os.path.isdir(name) else
                 f'no folder {name} here, and neither the Hugging Face cache nor the hub (network) gave it')
        raise SystemExit(f"{key}={name!r} cannot be loaded: {where} ({str(e).splitlines()[0][:150]}); fix: a local "
                         "folder with its config.json, weights and tokenizer, or a hub id (spelled right) already in "
                         "the Hugging Face cache (HF_HOME) with HF_HUB_OFFLINE=1 set, so that no network is "
                         "tried") from None


def one_thread(fn):
    """fn on one CPU thread (torch's count restored after). With several, matmuls and reductions split by the thread
    count and round differently, and training keeps another step (1 vs 2 threads on one extraction: step 125 vs 50);
    on one, the same config and extraction give the same checkpoint and scores on any core count."""
    @functools.wraps(fn)
    def on_one(*args, **kwargs):
        n = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            return fn(*args, **kwargs)
        finally:
            torch.set_num_threads(n)
    return on_one


# -----------------------------------------------------------------------------
# the cores and processes: extraction's shards (launch_procs), training's runs (fork_map)


def cpu_cores():
    """The cores this process may run on (its affinity where the OS tells it)."""
    return sorted(os.sched_getaffinity(0)) if hasattr(os, 'sched_getaffinity') else list(range(os.cpu_count() or 1))


def launch_procs(n, done, total, out_dir, threads=0, argv=None, command=None):
    """Run this extraction as n processes on this machine: process i is shard i of n (`--shard=i --num_shards=n`),
    pinned to its share of the cores with `threads` threads (0: that share), its log in {out_dir}/procs/.
    One bar counts the problems extracted, done() of total (store.extracted); command + argv: what runs the
    extraction (None: extract.py, with this process's arguments). Returns when all are done; a failed process stops
    the others and its log's tail is the error."""
    argv = sys.argv[1:] if argv is None else argv
    command = command or [sys.executable, os.path.join(HERE, 'extract.py')]
    cores = cpu_cores()
    share = [cores[i * len(cores) // n:(i + 1) * len(cores) // n] or [cores[i % len(cores)]] for i in range(n)]
    os.makedirs(os.path.join(out_dir, 'procs'), exist_ok=True)
    logs, jobs = [os.path.join(out_dir, 'procs', f'shard{i}.log') for i in range(n)], []
    for i in range(n):
        t = str(threads or len(share[i]))
        cmd = [*command, *argv, f'--shard={i}', f'--num_shards={n}', f'--procs={n}',
               f'--threads={t}']  # a shard never launches processes; procs tells it how many share this machine's RAM
        pin = (lambda c=share[i]: os.sched_setaffinity(0, c)) if hasattr(os, 'sched_setaffinity') else None
        with open(logs[i], 'w') as log:  # the child keeps its own copy of the handle
            jobs.append(subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, preexec_fn=pin,
                                         env={**os.environ, 'OMP_NUM_THREADS': t}))
    bar = tqdm(total=total, initial=done(), desc=f'extract ({n} processes, logs in {out_dir}/procs)', unit='problem')
    try:  # until all are done or one has failed
        while any(j.poll() is None for j in jobs) and all(j.returncode in (None, 0) for j in jobs):
            time.sleep(1)
            bar.update(done() - bar.n)
    finally:
        for j in jobs:
            if j.poll() is None:
                j.terminate()
                j.wait()
        bar.close()
    failed = [i for i, j in enumerate(jobs) if j.returncode != 0]
    if failed:
        tail = open(logs[failed[0]]).read()[-3000:]
        raise SystemExit(f"extraction process {failed[0]} of {n} failed (log {logs[failed[0]]}); its last "
                         f"lines:\n{tail}")


_WORK = None  # fork_map's function and arguments, read by the forked processes (inherited, never pickled)


def _work(i):
    fn, args = _WORK
    return fn(*args[i])


def fork_map(fn, args, procs=0):
    """[fn(*a) for a in args], several at once, each in a forked process (procs; 0 = every one at once, at most 4 a
    core: the cores stay busy to the end). Each process ignores Ctrl-C: the caller stops them and says so in one line
    (configurator.cli), no traceback from each."""
    global _WORK
    n = min(len(args), procs or 4 * len(cpu_cores()))
    if n <= 1:
        return [fn(*a) for a in args]
    _WORK = (fn, args)
    try:
        with multiprocessing.get_context('fork').Pool(n, signal.signal, (signal.SIGINT, signal.SIG_IGN)) as pool:
            return pool.map(_work, range(len(args)), chunksize=1)
    finally:
        _WORK = None


# -----------------------------------------------------------------------------
# memory: what a batch allocates against what is free


def head_dim(config):
    return getattr(config, 'head_dim', None) or config.hidden_size // config.num_attention_heads


LOGIT_CHUNK = 2 ** 24  # re-encoding: vocabulary logits computed at once (tokens x V), 64 MiB in float32
HEADROOM = 0.05  # of the free memory never planned for: allocator fragmentation, cuBLAS workspaces, what is counted
                 # roughly
CARD_80GB = 78 * 2 ** 30  # free on an idle 80 GB GPU (A100 / H100 80GB: 79.1 GiB total, less the CUDA context), before
                          # weights
MAX_ROWS = 256  # the most rows per forward a paper cell takes: the largest bench.py --only=gpu measures
PAPER_SHAPES = {  # the paper's generators, from their config.json (Qwen3 ties embeddings up to 4B, Llama 3.2 does)
    'Qwen/Qwen3-1.7B': dict(model_type='qwen3', hidden_size=2048, intermediate_size=6144, num_hidden_layers=28,
                            num_attention_heads=16, num_key_value_heads=8, head_dim=128, vocab_size=151936,
                            tie_word_embeddings=True, max_position_embeddings=40960, rope_theta=1e6, rms_norm_eps=1e-6),
    'Qwen/Qwen3-4B': dict(model_type='qwen3', hidden_size=2560, intermediate_size=9728, num_hidden_layers=36,
                          num_attention_heads=32, num_key_value_heads=8, head_dim=128, vocab_size=151936,
                          tie_word_embeddings=True, max_position_embeddings=40960, rope_theta=1e6, rms_norm_eps=1e-6),
    'Qwen/Qwen3-8B': dict(model_type='qwen3', hidden_size=4096, intermediate_size=12288, num_hidden_layers=36,
                          num_attention_heads=32, num_key_value_heads=8, head_dim=128, vocab_size=151936,
                          tie_word_embeddings=False, max_position_embeddings=40960, rope_theta=1e6, rms_norm_eps=1e-6),
    'Qwen/Qwen3-14B': dict(model_type='qwen3', hidden_size=5120, intermediate_size=17408, num_hidden_layers=40,
                           num_attention_heads=40, num_key_value_heads=8, head_dim=128, vocab_size=151936,
                           tie_word_embeddings=False, max_position_embeddings=40960, rope_theta=1e6, rms_norm_eps=1e-6),
    'meta-llama/Llama-3.2-1B-Instruct': dict(model_type='llama', hidden_size=2048, intermediate_size=8192,
                                             num_hidden_layers=16, num_attention_heads=32, num_key_value_heads=8,
                                             head_dim=64, vocab_size=128256, tie_word_embeddings=True),
    'meta-llama/Llama-3.2-3B-Instruct': dict(model_type='llama', hidden_size=3072, intermediate_size=8192,
                                             num_hidden_layers=28, num_attention_heads=24, num_key_value_heads=8,
                                             head_dim=128, vocab_size=128256, tie_word_embeddings=True),
    'meta-llama/Llama-3.1-8B-Instruct': dict(model_type='llama', hidden_size=4096, intermediate_size=14336,
                                             num_hidden_layers=32, num_attention_heads=32, num_key_value_heads=8,
                                             head_dim=128, vocab_size=128256, tie_word_embeddings=False),
}


def paper_config(name):
    """The transformers config of a paper generator, built from PAPER_SHAPES (no hub)."""
    from transformers import AutoConfig
    kw = dict(PAPER_SHAPES[name])
    return AutoConfig.for_model(kw.pop('model_type'), **kw)


def n_params(config):
    """The model's parameter count, from its config alone (instantiated on the meta device: no memory)."""
    from transformers import AutoModelForCausalLM
    with torch.device('meta'):
        return sum(p.numel() for p in AutoModelForCausalLM.from_config(config).parameters())


def kv_bytes_per_token(config, dtype):
    """KV-cache bytes one row holds per position: layers x 2 (keys, values) x kv heads x head_dim x dtype bytes."""
    kv = getattr(config, 'num_key_value_heads', None) or config.num_attention_heads
    return config.num_hidden_layers * 2 * kv * head_dim(config) * dtype.itemsize


def decode_bytes(config, dtype, rows, prompt_len, max_new_tokens, n_samples=1, n_layers=1, max_steps=100):
    """Bytes one sample_with_capture batch allocates beyond the weights: `rows` rows (n_samples per prompt) of a
    prompt_len-token prompt. The KV cache preallocated at capacity prompt_len + max_new_tokens + 1; per
    row its tokens, statistics, uniforms, mask and the ring of step states (max_steps=None: every token's state, the
    most the doubling ring can need); each step's float32 logits and the sampler's and token_stats' vocabulary-wide
    temporaries; the decoding forward's activations; and the prefill (its own cache before the copy, activations,
    keys and values repeated per head, the padding mask: at most every row's prompt at once, as at the start).
    torch_compile repeats each layer's keys and values per head at every step."""
    b, V, d, I = dtype.itemsize, config.vocab_size, config.hidden_size, config.intermediate_size
    cap, T = prompt_len + max_new_tokens + 1, max_new_tokens
    S = T + 1 if max_steps is None else max_steps + 1
    kv = kv_bytes_per_token(config, dtype)
    per_row = (cap * kv + (T + 1) * (8 + 3 * 4 + 4) + cap * 8 + S * (n_layers * d * 2 + 8) + n_layers * d * 8
               + V * 4 * 8  # logits, probabilities, log-softmax and its exp, top-k and sort temporaries
               + (4 * d + 3 * I) * b + config.num_attention_heads * cap * 4)  # the step's activations, attention scores
    P = -(-rows // n_samples)
    rep = 2 * config.num_attention_heads * head_dim(config) * b  # one layer's keys and values repeated for every query
                                                                  # head
    prefill = P * prompt_len * (kv + rep + (4 * d + 3 * I) * b) + P * prompt_len ** 2 * 8 + P * V * 4
    return rows * per_row + prefill


def reencode_bytes(config, dtype, rows, length, n_layers=1):
    """Bytes one capture.reencode call allocates beyond the weights: `rows` sequences padded to `length` positions
    (prompt + completion). The selected layers' states and the final one, kept to the end; one layer's activations
    at a time (no KV cache: use_cache=False; keys and values repeated per head); the padding mask [rows, 1, L, L] with
    SDPA's float copy; and one chunk of LOGIT_CHUNK float32 logits with token_stats' temporaries (the LM head runs
    over the completion tokens in chunks, never [rows, T, V] at once)."""
    b, d, I = dtype.itemsize, config.hidden_size, config.intermediate_size
    kv = getattr(config, 'num_key_value_heads', None) or config.num_attention_heads
    qkv = (3 * config.num_attention_heads + 2 * kv) * head_dim(config)  # q, k, v, and k, v repeated for every head
    per_row = length * ((n_layers + 1) * d * b + (4 * d + 3 * I + qkv) * b + 12) + length ** 2 * 5
    return rows * per_row + LOGIT_CHUNK * 4 * 4


def free_bytes(device):
    """Bytes this process can still allocate on `device`: on CUDA the device's free memory plus what torch's
    allocator holds unused; on CPU the RAM the OS reports available (None where it does not say)."""
    if str(device).startswith('cuda'):
        dev = torch.device(device)
        free = torch.cuda.mem_get_info(dev)[0]
        return free + torch.cuda.memory_reserved(dev) - torch.cuda.memory_allocated(dev)
    try:
        with open('/proc/meminfo') as f:
            return next(int(line.split()[1]) * 1024 for line in f if line.startswith('MemAvailable:'))
    except (OSError, StopIteration):
        return None


def budget(free):
    """What a batch may plan to use of `free` bytes: all but HEADROOM."""
    return int(free * (1 - HEADROOM))


def fit_rows(need, budget, hi):
    """The most rows r in [0, hi] with need(r) <= budget (need grows with r)."""
    lo = 0
    while lo < hi:
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if need(mid) <= budget else (lo, mid - 1)
    return lo


def fit_batch_size(config, dtype, splits, max_new_tokens, budget, n_layers=1, max_steps=100, cap=MAX_ROWS):
    """The largest batch_size (rows decoding at once, at most `cap`; a multiple of 8 from 8 up, as matmul kernels tile
    rows) that fits `budget` bytes in every split; splits: [(n_samples, longest prompt in tokens)]. 0: not one row
    fits."""
    r = min(fit_rows(lambda r: decode_bytes(config, dtype, r, prompt_len, max_new_tokens, n, n_layers, max_steps),
                     budget, cap) for n, prompt_len in splits)
    return r - r % 8 if r >= 8 else r
