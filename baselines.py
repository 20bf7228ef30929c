"""
Baselines HSRM is compared against that need a run of their own, read by evaluate.py (the free ones, the
cheap scorers and DeepConf's confidences, are in bestofn.py: they cost nothing and evaluate.py computes them):
- EORM-style text-only verifiers (GPT-2's tokenizer, 512 positions: small 13.80M, large 53.22M; the paper
  says 2.6M / 53.4M): trained by train.py's `train` (as train.py runs it) with verifier='text' on the same problems,
  split, loss and early stopping as HSRM, reading every split through the same tokenizer and position table;
- an off-the-shelf PRM (Qwen2.5-Math-PRM-7B), scored once per candidate and cached: its loading and per-step scores
  are below; its input format, the candidate score from its step scores and its cost are model.py's.

    python baselines.py config/gsm8k_1p7b.py                                  # text verifiers
    python baselines.py config/gsm8k_1p7b.py --text_sizes="['large']" --text_tokenizer=gpt2 --max_tokens=512
    python baselines.py config/gsm8k_1p7b.py --prm_model=Qwen/Qwen2.5-Math-PRM-7B --device=cuda
"""
import json
import os
import time

import torch

import train
from configurator import configure, knobs, split_argv
from machine import check_writable, cli, from_pretrained, resolve_device, set_threads
from model import PRM_SEP, PRM_SYSTEM, split_steps
from store import atomic_write_json, load_split

# -----------------------------------------------------------------------------
# config (options in the comments). The text verifiers take every train.py key from the same config
# file(s) and --key=value flags (data, split, loss, early stopping, seeds, text_tokenizer, max_tokens),
# with the overrides below.
out_dir = 'out/demo'        # the run: trains on {out_dir}/train, writes {out_dir}/verifiers/text_{size}_seed{seed}/
eval_dir = ''               # split the PRM scores; '' = {out_dir}/eval (cache: {eval_dir}/prm_scores.json)
text_sizes = ['small', 'large']  # EORM-style text verifiers: 'small' (d 256, L 1, h 2) | 'large' (d 768, L 2, h 4); []
                                 # = none
text_train_overrides = {'lr_schedule': 'cosine', 'warmup_iters': 100}  # the paper's EORM schedule; {} = exactly HSRM's
prm_model: str = None       # None = no PRM; 'Qwen/Qwen2.5-Math-PRM-7B' (hub name or local dir; needs a GPU in practice)
prm_batch_size = 8          # candidates per PRM forward
prm_dtype = 'bfloat16'      # 'bfloat16' | 'float16' | 'float32'
device = 'auto'             # 'auto' | 'cpu' | 'cuda': text-verifier training and the PRM
threads = 0                 # CPU threads for torch; 0 = torch's default (on a busy shared CPU, 1 is often much faster)
# -----------------------------------------------------------------------------
DEFAULTS = knobs(globals())  # the knobs above as a dict

# -----------------------------------------------------------------------------
# the off-the-shelf PRM (model.py defines its input, its step scores' reduce and its cost): run here, its per-step
# positive-class probabilities cached for evaluate.py

def prm_text(tokenizer, question, completion):
    messages = [{'role': 'system', 'content': PRM_SYSTEM}, {'role': 'user', 'content': question},
                {'role': 'assistant', 'content': PRM_SEP.join(split_steps(completion)) + PRM_SEP}]
    return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=False)


def prm_input_ids(tokenizer, question, texts):
    """The PRM's input token ids for each completion in texts (system prompt, question, steps)."""
    return [tokenizer(prm_text(tokenizer, question, t), add_special_tokens=False)['input_ids'] for t in texts]


def prm_arch(model):
    """model.PRM_7B_ARCH's figures of a loaded PRM."""
    cfg = model.config
    head_dim = getattr(cfg, 'head_dim', None) or cfg.hidden_size // cfg.num_attention_heads
    return {'linear_params': sum(m.in_features * m.out_features for m in model.modules()
                                 if isinstance(m, torch.nn.Linear)),
            'n_layer': cfg.num_hidden_layers, 'd_attn': cfg.num_attention_heads * head_dim,
            'n_params': sum(p.numel() for p in model.parameters())}


def load_prm(name, dtype='bfloat16', device='cpu'):
    """(model, tokenizer). The hub PRM is a Qwen2ForProcessRewardModel behind trust_remote_code (its
    config's auto_map); a local token-classification checkpoint with a 2-class head (no auto_map)
    loads through AutoModelForTokenClassification. Both return logits [B, T, 2] first."""
    from transformers import AutoConfig, AutoModel, AutoModelForTokenClassification, AutoTokenizer
    if dtype not in ('bfloat16', 'float16', 'float32'):
        raise ValueError(f"prm_dtype={dtype!r}; fix: --prm_dtype=bfloat16 (or float16, float32)")
    cfg = from_pretrained(AutoConfig, 'prm_model', name, trust_remote_code=True)
    cls = AutoModel if 'AutoModel' in (getattr(cfg, 'auto_map', None) or {}) else AutoModelForTokenClassification
    model = from_pretrained(cls, 'prm_model', name, dtype=getattr(torch, dtype), trust_remote_code=True,
                            device_map=device).eval()
    tokenizer = from_pretrained(AutoTokenizer, 'prm_model', name, trust_remote_code=True)
    if tokenizer.convert_tokens_to_ids(PRM_SEP) in (None, tokenizer.unk_token_id):
        raise ValueError(f"prm_model={name!r}: its tokenizer has no {PRM_SEP} token, so it is not a "
                         f"Qwen2.5-Math-PRM-style model; fix: --prm_model=Qwen/Qwen2.5-Math-PRM-7B")
    return model, tokenizer


@torch.no_grad()
def prm_step_probs(model, tokenizer, question, texts, batch_size=8, device='cpu'):
    """Per-step positive-class probabilities for each completion in texts: list of float lists.
    Right padding with an attention mask: a causal model's real positions never see the pads."""
    sep = tokenizer.convert_tokens_to_ids(PRM_SEP)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    ids = prm_input_ids(tokenizer, question, texts)
    out = [None] * len(ids)
    order = sorted(range(len(ids)), key=lambda i: len(ids[i]))  # similar lengths share a batch
    for b in range(0, len(order), batch_size):
        idx = order[b:b + batch_size]
        L = max(len(ids[i]) for i in idx)
        x = torch.full((len(idx), L), pad, dtype=torch.long)
        mask = torch.zeros((len(idx), L), dtype=torch.long)
        for r, i in enumerate(idx):
            x[r, :len(ids[i])] = torch.tensor(ids[i])
            mask[r, :len(ids[i])] = 1
        logits = model(input_ids=x.to(device), attention_mask=mask.to(device))[0]  # [B, L, 2]
        prob = torch.softmax(logits.float(), -1)[..., 1].cpu()
        for r, i in enumerate(idx):
            at = (x[r] == sep) & (mask[r] == 1)
            out[i] = prob[r][at].tolist()
    return out


def score_prm(problems, cache_path, prm_model, batch_size=8, dtype='bfloat16', device='cpu', save_every=16):
    """Score every candidate of problems with the PRM, resumably: per-step probabilities go to
    cache_path ({'model', 'steps': {problem key: [[p per step] per candidate]}, 'tokens': {problem key:
    [input tokens per candidate]}, 'arch': prm_arch}), rewritten atomically every save_every problems.
    Returns the cache dict."""
    from tqdm import tqdm
    cache = {'version': 1, 'model': prm_model, 'steps': {}}
    if os.path.exists(cache_path):
        with open(cache_path) as f:
            cache = json.load(f)
        if cache.get('model') != prm_model:
            raise ValueError(f"{cache_path} holds scores of prm_model={cache.get('model')!r}, not {prm_model!r}; "
                             f"fix: delete it or set --prm_model={cache.get('model')!r}")
    todo = [p for p in problems if len(cache['steps'].get(p['key'], [])) != len(p['candidates'])]
    if not todo:
        return cache
    model, tokenizer = load_prm(prm_model, dtype, device)
    arch = prm_arch(model)
    cache['n_params'], cache['arch'], cache['device'] = arch['n_params'], arch, str(device)
    t0, n = time.time(), 0
    for i, p in enumerate(tqdm(todo, desc='prm')):
        texts = [c['text'] for c in p['candidates']]
        cache['steps'][p['key']] = prm_step_probs(model, tokenizer, p['question'], texts, batch_size, device)
        cache.setdefault('tokens', {})[p['key']] = [len(x) for x in prm_input_ids(tokenizer, p['question'], texts)]
        n += len(p['candidates'])
        if (i + 1) % save_every == 0 or i + 1 == len(todo):
            cache['seconds_per_candidate'] = (time.time() - t0) / n
            atomic_write_json(cache, cache_path)
    return cache


# -----------------------------------------------------------------------------
# the run


def run(cfg, train_cfg):
    """Train the text verifiers (train.run, as train.py runs, one run dir per size and seed; finished runs are
    skipped, a finished run whose config or data differs is refused unless --overwrite=True), then score the eval
    split with the PRM when prm_model is set."""
    cfg = {**DEFAULTS, **cfg}
    set_threads(cfg['threads'])
    dev = resolve_device(cfg['device'])
    bad = [s for s in cfg['text_sizes'] if s not in ('small', 'large')]
    if bad:
        raise ValueError(f"text_sizes={cfg['text_sizes']!r}: {bad} unknown; fix: --text_sizes=\"['small','large']\"")
    unknown = [k for k in cfg['text_train_overrides'] if k not in train.DEFAULTS]
    if unknown:
        raise ValueError(f"text_train_overrides has keys {unknown} that train.py does not know; fix: use train.py "
                         "config keys")
    if cfg['prm_model']:  # its scores go beside the eval split: writable before any text verifier trains
        check_writable('eval_dir', cfg['eval_dir'] or os.path.join(cfg['out_dir'], 'eval'))
    data = train_cfg['train_dirs'] or [os.path.join(cfg['out_dir'], 'train')]
    keep_both = f"--out_dir=<a new dir> --train_dirs=\"{data}\" (the same data, text runs in <a new dir>/verifiers/)"
    for size in cfg['text_sizes']:  # every seed in one call: train.py trains them all at once
        train.run({**train_cfg, **cfg['text_train_overrides'], 'verifier': 'text', 'text_size': size,
                   'out_dir': cfg['out_dir'], 'device': cfg['device'],
                   'run_dir': os.path.join(cfg['out_dir'], 'verifiers', f'text_{size}_seed{{seed}}')}, keep_both)
    if cfg['prm_model']:
        eval_dir = cfg['eval_dir'] or os.path.join(cfg['out_dir'], 'eval')
        path = os.path.join(eval_dir, 'prm_scores.json')
        score_prm(load_split(eval_dir, labels=False), path, cfg['prm_model'], cfg['prm_batch_size'], cfg['prm_dtype'],
                  dev)
        print(f'PRM step scores of every candidate in {path}')


if __name__ == '__main__':
    import sys
    _argv, _train_cfg = split_argv(sys.argv[1:], DEFAULTS, train.DEFAULTS)  # train.py's keys for the text verifiers
    config = configure(globals(), _argv)  # config files, then --key=value, override the knobs above
    cli(lambda c: run(c, _train_cfg), config, 'baselines.py')
