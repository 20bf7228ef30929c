"""
The generator: the frozen causal LM extract.py samples from (and label.py's judge), loaded from the embedded
SmolLM2 GGUF, a .gguf file, a folder or a hub id; and the machinery that makes its one-token decoding step cost
what the model costs: the top-p sampler (a top-64 prefilter, an exact fall back to the full sort, one uniform
per row and step), the KV cache preallocated once (rows copied for search; on CPU each prompt's keys and values
held once, for all its rows), and SDPA's arithmetic as batched matmuls at one query on CPU. capture.py's loop
(sample_with_capture) is built on these; the method (what a step is, which states are kept, steering) lives there.
What a batch of it allocates: machine.py.
"""
import os
import time

import torch
import transformers
from transformers import AttentionInterface
from transformers.cache_utils import DynamicLayer
from transformers.integrations.sdpa_attention import sdpa_attention_forward

from machine import (EMBEDDED, PAPER_SHAPES, cache_dir, check_writable, cpu_name, from_pretrained, head_dim,
                     keep_freed_memory, kernel_settings, local_model, paper_config)

PINNED_TRANSFORMERS = '5.23.0'  # requirements.txt; check_layers refuses a release that selects hidden states otherwise

# -----------------------------------------------------------------------------
# loading


def load_generator(name, device='cpu', dtype='auto', key='model'):
    """(model, tokenizer) for 'smollm2' (embedded), a .gguf file, a local folder or a hub id (`key`: the knob
    naming it, for errors), its weights in `dtype` (weight_dtype: 'auto' measures this CPU once)."""
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer
    if device.startswith('cuda') and not torch.cuda.is_available():
        raise SystemExit(f"device={device!r} but CUDA is not available; fix: --device=cpu (or 'auto')")
    name = local_model(name, key)
    torch_dtype = weight_dtype(dtype, device, from_pretrained(AutoConfig, key, name) if dtype == 'auto' else None)
    tok = from_pretrained(AutoTokenizer, key, name)
    model = from_pretrained(AutoModelForCausalLM, key, name, dtype=torch_dtype).to(device).eval()
    if device == 'cpu':
        keep_freed_memory()
    if tok.pad_token_id is None:
        tok.pad_token = tok.eos_token
    return model, tok


def resolve_dtype(name, dtype, device, key='model', rows=128):
    """The weights' dtype name `dtype` means for the generator `name` on `device` (measuring 'auto' on a CPU at
    `rows` decoding rows)."""
    from transformers import AutoConfig
    if dtype != 'auto' or str(device).startswith('cuda'):
        return str(weight_dtype(dtype, device)).removeprefix('torch.')
    return measured_cpu_dtype(from_pretrained(AutoConfig, key, local_model(name, key)), rows)


def check_weight_dtype(dtype, device, key='dtype'):
    """ValueError (one line, the fix) for float16 weights on a CPU: CPUs run float16 matmuls far slower than bfloat16
    (SmolLM2's decoding-step matmuls at 128 rows on one thread of an AMX Xeon, step_seconds: 0.98 s against 0.28 s; on
    an AMD EPYC an extraction sampled 5 tokens/s against 26)."""
    if dtype == 'float16' and not str(device).startswith('cuda'):
        raise ValueError(f"{key}='float16' on {device}: CPUs run float16 matmuls several times slower than bfloat16; "
                         f"fix: --{key}=bfloat16, or --{key}=auto (the faster of float32 and bfloat16 on this CPU)")


def nonfinite(dtype, where):
    return ValueError(f"non-finite logits or hidden states while {where} with {str(dtype)[6:]} weights: the model "
                      f"overflows this dtype (float16's range ends at 65,504; Qwen3 was trained in bfloat16), and the "
                      f"samples would be garbage; fix: --dtype=bfloat16")


def positions(name, key='model'):
    """The generator's max_position_embeddings, read from its config (no weights loaded); None where it names none."""
    from transformers import AutoConfig
    return getattr(from_pretrained(AutoConfig, key, local_model(name, key)), 'max_position_embeddings', None)


def check_positions(limit, max_new_tokens, prompt_tokens=None):
    """ValueError (one line, the fix) where the longest prompt (prompt_tokens; None: not tokenized yet, any prompt)
    and max_new_tokens run past the model's positions `limit` (max_position_embeddings; None: none known): past them
    the position encoding is one the model never trained on, and nothing else would stop it."""
    if not limit or max_new_tokens + (prompt_tokens or 1) <= limit:
        return
    if prompt_tokens is None:
        half = 2 ** ((limit // 2).bit_length() - 1)  # room for a prompt of half the positions
        fix = f"--max_new_tokens={half} (at most {limit:,} less the longest prompt's tokens)"
        raise ValueError(f"max_new_tokens={max_new_tokens} runs past the model's {limit:,} positions "
                         f"(max_position_embeddings, shared with the prompt); fix: {fix}")
    raise ValueError(f"max_new_tokens={max_new_tokens} after the longest prompt's {prompt_tokens:,} tokens runs past "
                     f"the model's {limit:,} positions (max_position_embeddings); fix: "
                     f"--max_new_tokens={limit - prompt_tokens}")


# CPU weight dtypes whose samples are established to be as good as float32's (RESULTS.md, Speed,
# "The dtype"): dtype='auto' takes the fastest of them on this machine, measured (measured_cpu_dtype); the first
# is the reference the others are timed against
CPU_KEPT = ('float32', 'bfloat16')
# dtype='auto''s rule on CPU (measured_cpu_dtype), recorded in its cache: a cache made by another rule (or none named:
# version 1, one timing of each dtype) is measured again. rounds: decoding steps timed per dtype, the dtypes taking
# turns; margin: another dtype is taken where the median of its rounds' step over float32's is at most this, else
# float32 (the samples' draw follows the dtype: where the two run about as fast, the reference is kept rather than a
# choice that a measurement could tip either way)
DTYPE_RULE = {'version': 2, 'rounds': 7, 'margin': 0.8}


def matmul_shapes(config):
    """(out, in, calls per decoding step) of a decoder's matmuls: q, k, v, o, gate, up, down per layer, the LM head."""
    d, n = config.hidden_size, config.num_hidden_layers
    q = config.num_attention_heads * head_dim(config)
    kv = (getattr(config, 'num_key_value_heads', None) or config.num_attention_heads) * head_dim(config)
    return [(q, d, n), (kv, d, 2 * n), (d, q, n), (config.intermediate_size, d, 2 * n),
            (d, config.intermediate_size, n), (config.vocab_size, d, 1)]


def step_seconds(shapes, rows, dtype, secs=0.04, head_cut=4096, give_up=None):
    """Seconds one decoding step's matmuls take at `rows` rows in `dtype` on this thread count, each shape timed alone
    (its weight in cache; the LM head on its first head_cut rows, counted at full size). None once past give_up
    seconds (an emulated dtype: its first shapes are enough to rule it out)."""
    total = 0.0
    for o, i, count in shapes:
        w, x = torch.randn(min(o, head_cut), i, dtype=dtype), torch.randn(rows, i, dtype=dtype)
        torch.nn.functional.linear(x, w)
        t, k = time.perf_counter(), 0
        while k < 2 or time.perf_counter() - t < secs:
            torch.nn.functional.linear(x, w)
            k += 1
        total += (time.perf_counter() - t) / k * count * o / min(o, head_cut)
        if give_up is not None and total > give_up:
            return None
    return total


def decode_timer(config, dtype, rows, layers=5, context=256, calls=8):
    """A function timing one decoding step of the sampling loop on this thread for a model of `config`'s shapes in
    `dtype`, at `rows` rows over `context` cached positions: the forward (through decode_attention, the cache read
    whole where the loop reads it whole: not in float32) and the top-p sampler's vocabulary passes (vocab_stats,
    nucleus, draw), run on a randomly initialised copy with `layers` of its layers (all, where it has fewer). Each call
    returns the whole model's step in seconds: the step outside the layers plus the model's layers x the copy's mean
    layer, both timed within the one step (not a difference of two copies' steps, whose noise the layers' multiple
    would amplify). The copy is built and warmed up one step, untimed, at the first call; room for `calls` calls."""
    import copy
    from transformers import AutoModelForCausalLM
    run, marks, whole, cap = {}, {}, dtype != torch.float32, context + calls + 2

    def build():
        c = copy.deepcopy(config)
        c.num_hidden_layers = min(layers, config.num_hidden_layers)
        if getattr(c, 'layer_types', None):
            c.layer_types = c.layer_types[:c.num_hidden_layers]
        torch.manual_seed(0)
        model = AutoModelForCausalLM.from_config(c).to(dtype).eval()
        model.config._attn_implementation = 'decode_sdpa'
        cache, shared = row_cache(model, rows, cap)
        stack = model.model.layers
        stack[0].register_forward_pre_hook(lambda *a: marks.update(into=time.perf_counter()))
        stack[-1].register_forward_hook(lambda *a: marks.update(out=time.perf_counter()))
        run.update(model=model, cache=cache, shared=shared, ids=torch.randint(0, c.vocab_size, (rows,)),
                   w=torch.full((rows,), context), scale=config.num_hidden_layers / len(stack))
        step()  # warms up

    def step():
        shared, w = run['shared'], run['w']
        t = time.perf_counter()
        with torch.no_grad():
            shared['at'][:], shared['n'] = w, cap if whole else int(w.max()) + 1
            mask = (torch.arange(shared['n'])[None] <= w[:, None])[:, None, None]
            logits = run['model'](input_ids=run['ids'][:, None], attention_mask=mask, position_ids=w[:, None],
                                  past_key_values=run['cache'], use_cache=True).logits[:, -1].float()
            vals, top, _, _, zt, _ = vocab_stats(logits, TOPK_PREFILTER, 0.7)
            run['ids'], run['w'] = draw(nucleus(vals, zt, 0.7, 0.9)[0], top, torch.rand(rows)), w + 1
        return time.perf_counter() - t + (run['scale'] - 1) * (marks['out'] - marks['into'])

    return lambda: step() if run else (build(), step())[1]


def measured_cpu_dtype(config, rows=128, log=print):
    """dtype='auto' on CPU: the fastest of CPU_KEPT for this model on this machine, by DTYPE_RULE: a decoding step of
    the sampling loop at `rows` rows (decode_timer: the forward with its attention and elementwise work, and the
    sampler), on one thread as each extraction process runs, timed in rounds: each round times a step of every dtype,
    the order alternating (float32 first, then last), so both see the same load. A dtype's share is the median over
    rounds of its step over float32's in the same round: a load that comes or goes during the measurement changes
    one round's pair, a burst a minority of rounds, and neither moves the median (where one timing of each, one after
    the other, takes the load's side); a load lasting throughout slows both. The smallest share wins if at most
    DTYPE_RULE['margin'], else float32; a dtype is timed no more once past the margin in most rounds (emulated).
    Measured once and cached per CPU model, flags, torch version, kernel settings (kernel_settings), shapes and rows in
    cache_dir()/dtype/ with every round's timings; a cache made by another rule is measured again. A CPU's flags
    predict nothing: avx512_bf16 meant bfloat16 3-6x float32 on AMD Genoa and on Intel with AMX, 0.8x on an Intel
    Xeon without AMX, and an AVX2 EPYC emulates it (0.2x). Returns the dtype's name; logs one line."""
    import hashlib
    import json
    import statistics
    cpu, flags = cpu_name()
    shapes = [list(s) for s in matmul_shapes(config)]
    key = {'cpu': cpu, 'flags': flags, 'torch': torch.__version__, 'kernels': kernel_settings(), 'shapes': shapes,
           'rows': rows, 'kept': list(CPU_KEPT), 'probe': 'decoding step'}
    path = os.path.join(cache_dir(), 'dtype', hashlib.sha256(json.dumps(key).encode()).hexdigest()[:16] + '.json')
    old = ''
    try:
        with open(path) as f:
            got = json.load(f)
        if got.get('key') == key and got.get('choice') in CPU_KEPT:
            if got.get('rule') == DTYPE_RULE:
                log(f"dtype='auto': {got['choice']} ({got['line']}; measured {got['date']}, cached in {path})")
                return got['choice']
            old = (f", replacing the {got['choice']} measured {got.get('date')} by rule "
                   f"{(got.get('rule') or {}).get('version', 1)}")
    except (OSError, ValueError, AttributeError):  # none yet, or damaged: measure again
        pass
    check_writable('HSRM_CACHE', cache_dir())
    ref, n, rounds, margin = CPU_KEPT[0], torch.get_num_threads(), DTYPE_RULE['rounds'], DTYPE_RULE['margin']
    timers = {dt: decode_timer(config, getattr(torch, dt), rows, calls=rounds) for dt in CPU_KEPT}
    steps = {dt: [] for dt in CPU_KEPT}  # seconds, one a round
    past = lambda dt: sum(a > margin * b for a, b in zip(steps[dt], steps[ref]))  # noqa: E731  (rounds lost)
    torch.set_num_threads(1)
    try:
        for r in range(rounds):
            # a dtype past the margin in more than half the rounds has its median past it whatever the rest: it is
            # timed no more (an emulated one costs rounds // 2 + 1 slow steps, not rounds)
            live = [dt for dt in CPU_KEPT[1:] if past(dt) <= rounds // 2]
            if not live:
                break
            for dt in [ref, *live] if r % 2 == 0 else [*live[::-1], ref]:
                steps[dt].append(timers[dt]())
    finally:
        torch.set_num_threads(n)
    del timers
    secs = {dt: statistics.median(s) for dt, s in steps.items()}
    share = {dt: statistics.median(a / b for a, b in zip(steps[dt], steps[ref])) for dt in CPU_KEPT[1:]}
    best = min(share, key=share.get)
    choice = best if share[best] <= margin else ref
    line = (f"{cpu}, torch {torch.__version__}, one thread: a decoding step of this model at {rows} rows, the median "
            f"of {rounds} rounds taking turns: " + ', '.join(f'{dt} {1e3 * s:,.0f} ms' for dt, s in secs.items())
            + ''.join(f', {dt}/{ref} {x:.2f}' + (f' ({len(steps[dt])} rounds: past {margin} in {past(dt)})'
                                                 if len(steps[dt]) < rounds else '') for dt, x in share.items())
            + f"; another dtype is taken at most {margin}, rule {DTYPE_RULE['version']}")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = f'{path}.tmp{os.getpid()}'
    with open(tmp, 'w') as f:
        json.dump({'key': key, 'rule': DTYPE_RULE, 'steps': steps, 'seconds': secs, 'share': share, 'choice': choice,
                   'line': line, 'date': time.strftime('%Y-%m-%d')}, f)
    os.replace(tmp, path)
    log(f"dtype='auto': {choice} ({line}; cached in {path}{old}; --dtype=float32 or bfloat16 forces one)")
    return choice


def weight_dtype(dtype, device, config=None):
    """The torch dtype of the knob `dtype`: 'auto' is float16 on CUDA (the paper's setting; a model that overflows it
    stops with the fix --dtype=bfloat16) and on CPU the fastest of CPU_KEPT measured for `config`'s shapes
    (measured_cpu_dtype; SmolLM2's when None). Log-probs, entropies and confidences are computed in float32 from the
    logits whatever this is."""
    if dtype == 'auto':
        if str(device).startswith('cuda'):
            return torch.float16
        return getattr(torch, measured_cpu_dtype(config or smollm2_config()))
    torch_dtype = {'float16': torch.float16, 'bfloat16': torch.bfloat16, 'float32': torch.float32}.get(dtype)
    if torch_dtype is None:
        raise SystemExit(f"dtype={dtype!r} is unknown; fix: one of auto, float16, bfloat16, float32")
    return torch_dtype


def generator_config(name):
    """The generator's transformers config without its weights: the embedded SmolLM2's, another embedded one's
    conversion cache (machine.local_model's, made by its extraction), a paper generator's (machine.PAPER_SHAPES), or a
    folder's or the Hugging Face cache's config.json; None where there is none here (another .gguf file, a test's
    made-up model name)."""
    if name == 'smollm2':
        return smollm2_config()
    if name in PAPER_SHAPES:
        return paper_config(name)
    from transformers import AutoConfig
    try:
        return AutoConfig.from_pretrained(os.path.join(cache_dir(), EMBEDDED[name]['file'][:-5]) if name in EMBEDDED
                                          else name, local_files_only=True)
    except (OSError, ValueError):
        return None


def generator_name(name):
    """The generator as a reader knows it: the embedded model's name and quantization, a hub id's or folder's last
    part."""
    if name in EMBEDDED:  # its GGUF file: 'SmolLM2-135M-Instruct.Q4_1.gguf' -> 'SmolLM2-135M-Instruct (Q4_1)'
        model, quant = EMBEDDED[name]['file'].removesuffix('.gguf').rsplit('.', 1)
        return f'{model} ({quant})'
    return name.rstrip('/').split('/')[-1]


def smollm2_config():
    """The embedded SmolLM2-135M's shapes (no load)."""
    from transformers import LlamaConfig
    return LlamaConfig(hidden_size=576, intermediate_size=1536, num_hidden_layers=30, num_attention_heads=9,
                       num_key_value_heads=3, vocab_size=49152, tie_word_embeddings=True)


def eos_ids(model, tok):
    ids = {tok.eos_token_id}
    gen_eos = getattr(model.generation_config, 'eos_token_id', None)
    ids |= set(gen_eos) if isinstance(gen_eos, (list, tuple)) else {gen_eos}
    return sorted(i for i in ids if i is not None)


def check_layers(model, layers):
    """layers in range, and this transformers release selecting them as the pinned one does: the states
    hidden_selection asks for must equal output_hidden_states=True's at those indices. A list changed meaning
    between releases (5.17 shifts positive indices by one and leaves the others None, so decoding fails at its first
    step, or captures the wrong layer silently); one short forward at load catches it."""
    n = model.config.num_hidden_layers + 1  # hidden_states: embeddings + one per block
    for l in layers:
        if not -n <= l < n:
            raise SystemExit(f"layers={layers!r}: index {l} is out of range for a model with {n} hidden states "
                             f"(0 = embeddings, -1 = final layer); fix: use indices in [{-n}, {n - 1}]")
    device = next(model.parameters()).device
    ids = torch.arange(1, 9, device=device)[None] % model.config.vocab_size
    with torch.no_grad():
        full = model(input_ids=ids, output_hidden_states=True).hidden_states
        try:
            got = model(input_ids=ids, output_hidden_states=hidden_selection(model, layers)).hidden_states
            same = all(got[l] is not None and torch.allclose(got[l].float(), full[l].float(), rtol=1e-3, atol=1e-3)
                       for l in layers)
        except (TypeError, IndexError):  # e.g. 'NoneType' object is not subscriptable
            same = False
    if not same:
        raise SystemExit(f"transformers {transformers.__version__} selects hidden states by index differently from the "
                         f"release this project pins (output_hidden_states={hidden_selection(model, layers)} does not "
                         f"return output_hidden_states=True's states at layers={list(layers)}); fix: pip install "
                         f"transformers=={PINNED_TRANSFORMERS}")


def hidden_selection(model, layers):
    """The hidden_states indices to compute (HF output_hidden_states accepts a list: the others stay None)."""
    n = model.config.num_hidden_layers + 1
    return sorted({l % n for l in layers})

# -----------------------------------------------------------------------------
# the top-p sampler

TOPK_PREFILTER = 64  # nucleus candidates examined first; the full-vocabulary sort runs only for rows whose top-64 mass
                     # is short of top_p
TOP_CHUNK = 64  # top_logits: the vocabulary is scanned in chunks of this many logits
VOCAB_BYTES = 2 ** 21  # vocab_stats on CPU: rows of float32 logits a chunk, so that a chunk's passes stay in cache
LOG2E, LN2 = 1.4426950408889634, 0.6931471805599453


def top_logits(logits, k, chunk=TOP_CHUNK):
    """logits.topk(k) over the last dim (values and ids, descending; of equal values any id may come first), from
    chunk maxima: the k largest logits lie in the k chunks whose maxima are largest, so one max pass over the
    vocabulary and a top-k over k x chunk candidates stand for a top-k over the vocabulary (2x faster on CPU at
    SmolLM2's 49,152; bench.py --only=dtype). A vocabulary's tail past the last whole chunk is a candidate too."""
    *lead, V = logits.shape
    x = logits.reshape(-1, V)
    n = V // chunk
    if n <= k:  # a small vocabulary: nothing to skip
        v, i = x.topk(min(k, V), -1)
        return v.view(*lead, -1), i.view(*lead, -1)
    body = x[:, :n * chunk].view(len(x), n, chunk)
    top = body.amax(-1).topk(k, -1, sorted=False).indices  # [R, k] chunk numbers
    cand = body.gather(1, top[:, :, None].expand(-1, -1, chunk)).view(len(x), -1)
    v, j = torch.cat([cand, x[:, n * chunk:]], 1).topk(k, -1)
    tail = j >= k * chunk
    i = torch.where(tail, j - k * chunk + n * chunk, top.gather(1, (j // chunk).clamp(max=k - 1)) * chunk + j % chunk)
    return v.view(*lead, k), i.view(*lead, k)


def vocab_stats(logits, k, temperature=1.0):
    """What sampling and the per-token statistics need from logits [..., V] (any float dtype; the arithmetic in
    float32), in few passes over the vocabulary: the k largest logits and their ids, log Z (the untempered
    log-normaliser), the untempered entropy, the tempered normaliser z_t = sum exp((l - max) / temperature) (None
    when temperature <= 0: greedy), and whether the row's logits are all finite (an inf or nan makes sum e (l - max)
    nan). On CPU the rows go in chunks of VOCAB_BYTES, each converted to float32 and passed over while it is in
    cache (SmolLM2's 512 rows x 49,152: the extraction 1.04x on an AMD EPYC).
    -> (vals [..., k] float32, ids, logz, entropy, z_t, finite)"""
    *lead, V = logits.shape
    x = logits.reshape(-1, V)
    step = len(x) if x.is_cuda else max(1, VOCAB_BYTES // (4 * V))
    parts = zip(*(_vocab_stats(x[i:i + step].float(), k, temperature) for i in range(0, len(x), step)))
    return tuple(None if p[0] is None else torch.cat(p).view(*lead, *p[0].shape[1:]) for p in parts)


def _vocab_stats(logits, k, temperature):
    """vocab_stats on float32 logits [rows, V]. Its exponentials are powers of 2 (e^x = 2^(x log2 e)): torch's CPU
    exp2 runs 5-15x its exp (torch 2.13, AVX-512), and the sums agree to float32 rounding."""
    vals, ids = top_logits(logits, k)
    m = vals[..., :1]
    x = (logits - m).mul_(LOG2E)  # (l - max) log2 e
    e = x.exp2()
    z = e.sum(-1)
    s1 = torch.linalg.vecdot(e, x) * LN2  # sum_v e_v (l_v - max): the entropy's term, and nan where a logit is not
    zt = None if temperature <= 0 else z if temperature == 1 else x.mul_(1 / temperature).exp2_().sum(-1)  # finite
    return vals, ids, m[..., 0] + z.log(), z.log() - s1 / z, zt, torch.isfinite(s1)


def full_nucleus(probs, top_p):
    """Top-p by sorting the whole vocabulary: (weights [B, V], ids [B, V]); weights keep the smallest
    prefix (by descending probability) whose mass reaches top_p and are 0 elsewhere."""
    p, ids = probs.sort(dim=-1, descending=True)
    return p.masked_fill(p.cumsum(-1) - p > top_p, 0.0), ids


def nucleus(vals, zt, temperature, top_p):
    """full_nucleus restricted to the k largest logits vals [B, k] (vocab_stats' vals and z_t at `temperature`):
    (weights [B, k], short [B]). Where the top-k mass exceeds top_p the nucleus lies inside the top k, and the
    weights are full_nucleus's probabilities; `short` marks the rows where it does not (the caller uses
    full_nucleus for them)."""
    p = ((vals - vals[:, :1]) / temperature).exp_() / zt[:, None]
    c = p.cumsum(-1)
    return p.masked_fill(c - p > top_p, 0.0), c[:, -1] <= top_p


M64 = (1 << 64) - 1


def splitmix64(x):
    """splitmix64 on 64-bit integers: a bijection whose every output bit depends on every input bit. Python ints, or
    int64 tensors (their products wrap; their right shifts are made logical)."""
    if isinstance(x, int):
        x = (x + 0x9E3779B97F4A7C15) & M64
        x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & M64
        x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & M64
        return x ^ (x >> 31)
    signed = lambda c: c - (1 << 64) if c >> 63 else c  # noqa: E731  (a uint64 constant as int64)
    srl = lambda v, k: (v >> k) & ((1 << (64 - k)) - 1)  # noqa: E731  (logical shift)
    x = x + signed(0x9E3779B97F4A7C15)
    x = (x ^ srl(x, 30)) * signed(0xBF58476D1CE4E5B9)
    x = (x ^ srl(x, 27)) * signed(0x94D049BB133111EB)
    return x ^ srl(x, 31)


def candidate_key(seed, problem, sample):
    """The 32-bit key of one candidate's draws: from the run's seed, its problem's key (a dataset index) and its
    sample number (a search copy: its row number) alone, packed into one 64-bit counter (24, 24 and 16 bits)."""
    return splitmix64(((seed & 0xFFFFFF) << 40) | ((problem & 0xFFFFFF) << 16) | (sample & 0xFFFF)) & 0xFFFFFFFF


def uniforms(keys, t):
    """One uniform in [0, 1) per row (24 bits): row i's draw for its token t[i], splitmix64 of the counter
    (keys[i], t[i]) (keys: candidate_key's, int64 [rows]): no generator state, so a candidate's tokens do not depend
    on the other rows, their order, the process or when it started."""
    x = splitmix64((keys << 32) | t)
    return ((x >> 40) & 0xFFFFFF).float() * 2 ** -24


def draw(weights, ids, u):
    """Inverse-CDF draw per row: ids[j] for the first j whose cumulative weight exceeds u * total (weights
    [B, k] >= 0, ids [B, k] or None for j itself, u [B] uniform in [0, 1): uniforms). A row's draw depends on its
    own u only."""
    c = weights.cumsum(-1)
    j = torch.searchsorted(c, (u * c[:, -1])[:, None], right=True)
    j = torch.minimum(j, (weights > 0).cumsum(-1).argmax(-1, keepdim=True))  # rounding at u ~ 1: the last positive
                                                                             # weight
    return (j if ids is None else ids.gather(-1, j)).squeeze(-1)


def token_stats(logits, tokens, conf_topk=20):
    """Of the untempered distribution at each position (logits [..., V], tokens [...]): the chosen token's
    log-prob, the entropy, and the DeepConf token confidence = minus the mean log-prob of the conf_topk
    most likely tokens. All float32 [...]. The sampler computes the same from the same vocab_stats."""
    vals, _, logz, ent, _, _ = vocab_stats(logits, conf_topk)
    return logits.gather(-1, tokens[..., None]).squeeze(-1).float() - logz, ent, logz - vals[..., :conf_topk].mean(-1)

# -----------------------------------------------------------------------------
# the decoding cache and attention


class RowLayer(DynamicLayer):
    """One layer's keys and values for every decoding row, allocated once ([rows, kv heads, capacity, head_dim]),
    each row at its own length: a row writes its new token at its own column (shared['at']), so it can start over
    with another prompt while the others decode (continuous batching), and a copy of a row (search) is its buffer
    row. The attention reads each row's first shared['n'] columns, masked past the row's own length; zeros at
    allocation, so a masked column's 0 weight times its value stays 0. A slice of the buffer is strided, which torch's
    CPU bmm runs slowly in bfloat16: decode_attention copies it, or the loop reads the whole (shared['n'] = capacity).

    A prompt store (decode_attention's path, slots > 0): the prompts' keys and values sit once per prompt in `slots`
    slots ([slots, kv heads, prompt, head_dim]), shared by that prompt's rows, and a row's own buffer holds only the
    tokens it ran itself: its prompt's last token, then its own."""

    def __init__(self, rows, heads, capacity, head_dim, dtype, device, shared, slots=0, prompt=0):
        super().__init__()
        self.kb = torch.zeros(rows, heads, capacity, head_dim, dtype=dtype, device=device)
        self.vb = torch.zeros_like(self.kb)
        self.pk = torch.zeros(slots, heads, prompt, head_dim, dtype=dtype, device=device) if slots else None
        self.pv = torch.zeros_like(self.pk) if slots else None
        self.shared, self.dtype, self.device, self.is_initialized = shared, dtype, device, True
        self.keys, self.values = self.kb, self.vb

    def update(self, key_states, value_states, *args, **kwargs):
        b, n = key_states.shape[0], self.shared['n']  # the first b rows run (the others wait or are free)
        rows, at = self.shared['rows'][:b], self.shared['at'][:b]
        self.kb[rows, :, at] = key_states[:, :, 0]
        self.vb[rows, :, at] = value_states[:, :, 0]
        return self.kb[:b, :, :n], self.vb[:b, :, :n]

    def get_seq_length(self):
        return self.shared['prompt'] + self.shared['n'] - 1


def row_cache(model, rows, capacity, slots=0, prompt=0):
    """The decoding cache (a DynamicCache of RowLayers) and the dict its layers share: 'at', the write column of each
    running row ([rows], set in place before a forward), 'n' (the columns attention reads), 'rows' (0..rows-1),
    'slots' and 'prompt' (the prompt store's slots and each one's columns: 0 = no store) and 'layers'. With a prompt
    store the caller sets shared['group'] before each forward (prompt_groups). Every layer must attend over the
    whole past (no sliding windows)."""
    from transformers import DynamicCache
    c = model.config
    kinds = set(getattr(c, 'layer_types', None) or ['full_attention'])
    if kinds != {'full_attention'} or getattr(c, 'use_sliding_window', False):
        raise ValueError(f"this model has attention layers of kinds {sorted(kinds)} (sliding windows); the decoding "
                         "loop keeps every row's whole past; fix: a model whose layers all attend over the full past")
    p = next(model.parameters())
    kv = getattr(c, 'num_key_value_heads', None) or c.num_attention_heads
    shared = {'at': torch.zeros(rows, dtype=torch.long, device=p.device), 'n': capacity,
              'rows': torch.arange(rows, device=p.device), 'slots': slots, 'prompt': prompt}
    cache = DynamicCache()
    cache.layers = shared['layers'] = [RowLayer(rows, kv, capacity, head_dim(c), p.dtype, p.device, shared, slots,
                                                prompt) for _ in range(c.num_hidden_layers)]
    return cache, shared


# float32 matmuls on CPU give a row other bits below this many rows (torch 2.13: a separate few-row kernel), so
# decode_attention's prompt matmuls run at least this many (a row's prompt scores do not follow how many rows of its
# prompt are in the batch); the model's own layers still run the batch's rows; bfloat16's rows agree at any count
MIN_ROWS = 4


def prompt_groups(slot):
    """What decode_attention needs to run the rows of each prompt together against their prompt's keys: (slot [b],
    rank [b]: the row's place among its slot's rows, slots: the largest slot + 1, per: the most rows of one slot)."""
    counts = torch.bincount(slot)
    order = torch.argsort(slot, stable=True)
    rank = torch.empty_like(slot)
    rank[order] = torch.arange(len(slot), device=slot.device) - (counts.cumsum(0) - counts)[slot[order]]
    return slot, rank, len(counts), int(counts.max())


def move_rows(cache, src, dst):
    """Cache rows dst become copies of rows src (index tensors; src = dst reordered: a swap)."""
    for layer in cache.layers:
        layer.kb[dst], layer.vb[dst] = layer.kb[src], layer.vb[src]


def put_prompts(cache, rows, prefill, index, lengths, at=0):
    """Cache rows `rows` (with a prompt store: its slots) take the prompts of a left-padded prefill's DynamicCache
    (rows `index` of it, `lengths` tokens each, right-aligned there) at columns at..at+length-1; a one-row prefill
    (index None) goes to every slot of the store."""
    for layer, src in zip(cache.layers, prefill.layers):
        L = src.keys.shape[2]
        k, v = (layer.kb, layer.vb) if layer.pk is None else (layer.pk, layer.pv)
        if index is None:
            k[:, :, at:at + L], v[:, :, at:at + L] = src.keys, src.values
            continue
        for r, i, n in zip(rows, index, lengths):
            if n:
                k[r, :, at:at + n] = src.keys[i, :, L - n:]
                v[r, :, at:at + n] = src.values[i, :, L - n:]


def decode_attention(module, query, key, value, attention_mask, dropout=0.0, scaling=None, row_cache=None,
                     **kwargs):
    """SDPA for one new token per row (CPU decoding), as batched matmuls: the query heads grouped by their key/value
    head ([B, kv heads, group, head_dim]), scores masked where a boolean mask says False (or plus a float mask, as
    SDPA adds one), softmax in float32, then the values. With a prompt store (row_cache: row_cache's shared dict), the
    rows of each prompt run as one matmul against its keys (prompt_groups), then each row against its own columns;
    the mask covers the prompt's columns, then the row's. The same arithmetic as SDPA without its CPU flash kernel's
    per-block work, which costs more than the matmuls at one query (bench.py --only=extract). Anything else goes to
    SDPA."""
    B, H, q_len, hd = query.shape
    G, g = key.shape[1], H // key.shape[1]
    if q_len != 1 or dropout or kwargs.get('softcap'):
        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling,
                                      **kwargs)
    q = query.view(B, G, g, hd)
    if key.dtype != torch.float32 and not key.is_contiguous():  # the columns a row buffer's slice reads, copied: a
        key, value = key.contiguous(), value.contiguous()  # strided bfloat16 operand runs torch's slow bmm on CPU
    s = torch.matmul(q, key.transpose(-1, -2))  # [B, G, group, n]: each row's own columns
    P = row_cache['prompt'] if row_cache and row_cache['slots'] else 0
    if P:
        pk, pv = row_cache['layers'][module.layer_idx].pk, row_cache['layers'][module.layer_idx].pv
        slot, rank, slots, per = row_cache['group']
        if q.dtype == torch.float32:  # at least MIN_ROWS rows a matmul: float32's few-row kernels round otherwise
            per = max(per, -(-MIN_ROWS // g))
        qg = q.new_zeros(slots, G, per, g, hd)  # the rows of each slot side by side
        qg[slot, :, rank] = q
        sp = torch.matmul(qg.view(slots, G, per * g, hd), pk[:slots].transpose(-1, -2))
        s = torch.cat([sp.view(slots, G, per, g, P)[slot, :, rank], s], -1)
    scale = hd ** -0.5 if scaling is None else scaling
    if attention_mask is None:
        s = s.float().mul_(scale)
    else:  # [B, 1, 1, n]: the loop's per-row mask (a row always attends to its own token), as a float32 bias
        bias = attention_mask if attention_mask.dtype != torch.bool else torch.zeros(
            attention_mask.shape, device=s.device).masked_fill_(~attention_mask, torch.finfo().min)
        s = torch.add(bias, s, alpha=scale)  # float32: scaled and masked in one pass
    p = s.softmax(-1).to(value.dtype)
    out = torch.matmul(p[..., P:].contiguous(), value)  # the own columns copied: a strided operand's bmm is slower on
                                                         # CPU, the same bits (checked: 300 random shapes, both dtypes)
    if P:
        pg = p.new_zeros(slots, G, per, g, P)
        pg[slot, :, rank] = p[..., :P]
        out += torch.matmul(pg.view(slots, G, per * g, P), pv[:slots]).view(slots, G, per, g, hd)[slot, :, rank]
    return out.reshape(B, 1, H * hd), None


AttentionInterface.register('decode_sdpa', decode_attention)


def prefill(model, seqs, past=None):
    """One forward over token sequences (left-padded) through the model's body: their keys and values, a
    DynamicCache whose row i holds seqs[i] right-aligned. past: a one-row prefill of tokens every sequence follows
    (a common prefix), its columns first in every row."""
    from transformers import DynamicCache
    device = next(model.parameters()).device
    L = max(map(len, seqs))
    x = torch.zeros(len(seqs), L, dtype=torch.long, device=device)
    mask = torch.zeros(len(seqs), L, dtype=torch.long, device=device)
    for i, q in enumerate(seqs):
        if q:
            x[i, L - len(q):], mask[i, L - len(q):] = torch.tensor(q, device=device), 1
    cache, C = DynamicCache(), past.get_seq_length() if past is not None else 0
    if C:
        for i, layer in enumerate(past.layers):
            cache.update(layer.keys.expand(len(seqs), -1, -1, -1), layer.values.expand(len(seqs), -1, -1, -1), i)
        mask = torch.cat([mask.new_ones(len(seqs), C), mask], 1)
    model.base_model(input_ids=x, attention_mask=mask, position_ids=(mask.cumsum(-1) - 1).clamp(min=0)[:, C:],
                     past_key_values=cache, use_cache=True)
    return cache


def decode_step(model, cache, layers, static, fast=False):
    """The decoding forward, one token per row: (logits [rows, V] in the model's dtype, the layers' states [rows, D]);
    compiled with static=True (CUDA graphs on GPU); fast: through decode_sdpa (SDPA's arithmetic, faster at one query
    on CPU), the model's attention restored after each call (the prefills between them run SDPA)."""
    sel = hidden_selection(model, layers)

    def forward(ids, mask, pos, **extra):
        o = model(input_ids=ids[:, None], attention_mask=mask, position_ids=pos[:, None], past_key_values=cache,
                  use_cache=True, output_hidden_states=sel, **extra)
        return o.logits[:, -1], torch.cat([o.hidden_states[l][:, -1] for l in layers], dim=-1)

    def fast_forward(ids, mask, pos):
        attn, model.config._attn_implementation = model.config._attn_implementation, 'decode_sdpa'
        try:
            return forward(ids, mask, pos, row_cache=cache.layers[0].shared)
        finally:
            model.config._attn_implementation = attn
    if not static:
        return fast_forward if fast else forward
    return torch.compile(forward, mode='reduce-overhead' if next(model.parameters()).device.type == 'cuda'
                         else 'default')
