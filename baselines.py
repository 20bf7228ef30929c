"""
Baselines HSRM is compared against, all read by evaluate.py:
- cheap scorers: non-learned scores from the generator's own per-token statistics stored by
  extract.py (pure functions below; evaluate.py computes them itself, they cost nothing);
- DeepConf's confidence scorers (mean, tail, bottom-10% group, lowest group) over the stored token
  confidences, for its offline filtered votes and its online early stopping (simulated in evaluate.py);
- EORM-style text-only verifiers (GPT-2's tokenizer, 512 positions: small 13.80M, large 53.22M; the paper
  says 2.6M / 53.4M): trained by train.py's `train` with verifier='text' on the same problems, split, loss
  and early stopping as HSRM, reading every split through the same tokenizer and position table;
- an off-the-shelf PRM (Qwen2.5-Math-PRM-7B), scored once per candidate and cached.

    python baselines.py config/gsm8k_1p7b.py                                  # text verifiers
    python baselines.py config/gsm8k_1p7b.py --text_sizes="['large']" --text_tokenizer=gpt2 --max_tokens=512
    python baselines.py config/gsm8k_1p7b.py --prm_model=Qwen/Qwen2.5-Math-PRM-7B --device=cuda
"""
import json
import math
import os
import time

import numpy as np
import torch

from configurator import apply_config, configure, knobs
from model import atomic_write_json, cli, from_pretrained, load_split, resolve_device

# -----------------------------------------------------------------------------
# config (options in the comments). The text verifiers take every train.py key from the same config
# file(s) and --key=value flags (data, split, loss, early stopping, seeds, text_tokenizer, max_tokens),
# with the overrides below.
out_dir = 'out/demo'        # the run: trains on {out_dir}/train, writes {out_dir}/verifiers/text_{size}_seed{seed}/
eval_dir = ''               # split the PRM scores; '' = {out_dir}/eval (cache: {eval_dir}/prm_scores.json)
text_sizes = ['small', 'large']  # EORM-style text verifiers: 'small' (d 256, L 1, h 2) | 'large' (d 768, L 2, h 4); [] = none
text_train_overrides = {'lr_schedule': 'cosine', 'warmup_iters': 100}  # the paper's EORM schedule; {} = exactly HSRM's
prm_model = None            # None = no PRM; 'Qwen/Qwen2.5-Math-PRM-7B' (hub name or local dir; needs a GPU in practice)
prm_batch_size = 8          # candidates per PRM forward
prm_dtype = 'bfloat16'      # 'bfloat16' | 'float16' | 'float32'
device = 'auto'             # 'auto' | 'cpu' | 'cuda': text-verifier training and the PRM
threads = 0                 # CPU threads for torch; 0 = torch's default (on a busy shared CPU, 1 is often much faster)
# -----------------------------------------------------------------------------
DEFAULTS = knobs(globals())  # the knobs above as a dict

# -----------------------------------------------------------------------------
# cheap scorers: one float per candidate dict ('logprobs', 'entropies' [T], 'step_pos' [S],
# 'token_ids' [T]); higher = more likely correct. Definitions: paper appendix ("Non-learned scorer
# definitions"). An empty completion (T = 0) has nothing to be confident about: -inf for the
# confidence scores.


def _arr(x):
    return np.asarray(x.float().numpy() if torch.is_tensor(x) else x, dtype=np.float64)


def cumulative_logprob(c):
    lp = _arr(c['logprobs'])
    return float(lp.sum()) if lp.size else -math.inf


def mean_logprob(c):
    lp = _arr(c['logprobs'])
    return float(lp.mean()) if lp.size else -math.inf


def neg_mean_entropy(c):
    h = _arr(c['entropies'])
    return float(-h.mean()) if h.size else -math.inf


def neg_varentropy(c):
    h = _arr(c['entropies'])  # -Var_t(H_t), population variance
    return float(-h.var()) if h.size else -math.inf


def shortest(c):
    return -float(len(c['token_ids']))


def fewest_steps(c):
    # S from step_pos, which extract.py caps at max_steps (100): longer solutions tie there
    return -float(len(c['step_pos']))


def longest(c):
    return float(len(c['token_ids']))


CHEAP_SCORERS = {f.__name__: f for f in (cumulative_logprob, mean_logprob, neg_mean_entropy, neg_varentropy,
                                         shortest, fewest_steps, longest)}


def cheap_scores(problems, name):
    """Scores of scorer `name` for every candidate: list (per problem) of float arrays [N]."""
    if name not in CHEAP_SCORERS:
        raise ValueError(f"cheap scorer {name!r} is not one of {sorted(CHEAP_SCORERS)}")
    f = CHEAP_SCORERS[name]
    return [np.array([f(c) for c in p['candidates']], dtype=np.float64) for p in problems]


# -----------------------------------------------------------------------------
# DeepConf (Fu et al. 2025; facebookresearch/deepconf, deepconf/utils.py): scorers over the per-token
# confidences extract.py stores ('confidences' [T]: minus the mean log-prob of the top-k tokens of the
# untempered distribution). Group confidence = the mean over a sliding window of `window` tokens
# (every full window, as their compute_least_grouped); a trace shorter than the window is one group,
# its mean confidence (their fallback). tail = the mean of the last `tail` tokens. Higher = more
# confident. Their code rounds confidences to 3 decimals; we do not.


def _confs(c):
    if 'confidences' not in c:
        raise ValueError("a candidate has no 'confidences' (extracted before DeepConf token confidences were stored); "
                         "fix: re-extract with the current extract.py (or --mode=reencode on the same completions)")
    return _arr(c['confidences'])


def group_confidences(conf, window):
    """Sliding-window means [T - window + 1] of token confidences [T]; [mean] when T < window; [] when T = 0."""
    conf = np.asarray(conf, dtype=np.float64)
    if conf.size < window:
        return conf[:0] if conf.size == 0 else conf.mean(keepdims=True)
    cs = np.concatenate([[0.0], np.cumsum(conf)])
    return (cs[window:] - cs[:-window]) / window


def deepconf_mean(c, window, tail):
    conf = _confs(c)
    return float(conf.mean()) if conf.size else -math.inf


def deepconf_tail(c, window, tail):
    conf = _confs(c)[-tail:]
    return float(conf.mean()) if conf.size else -math.inf


def deepconf_bottom10(c, window, tail):
    """Mean of the lowest 10% of the group confidences (at least one group), their bottom_window."""
    g = group_confidences(_confs(c), window)
    return float(np.sort(g)[:max(1, int(0.1 * len(g)))].mean()) if g.size else -math.inf


def deepconf_lowest(c, window, tail):
    """The lowest group confidence, their min_window (and the online rule's statistic)."""
    g = group_confidences(_confs(c), window)
    return float(g.min()) if g.size else -math.inf


DEEPCONF_SCORERS = {f.__name__: f for f in (deepconf_mean, deepconf_tail, deepconf_bottom10, deepconf_lowest)}


def has_confidences(problems):
    return all('confidences' in c for p in problems for c in p['candidates'])


def deepconf_scores(problems, name, window=2048, tail=2048):
    """Scores of DeepConf scorer `name` for every candidate: list (per problem) of float arrays [N]."""
    if name not in DEEPCONF_SCORERS:
        raise ValueError(f"DeepConf scorer {name!r} is not one of {sorted(DEEPCONF_SCORERS)}")
    if window < 1 or tail < 1:
        raise ValueError(f"deepconf_window={window}, deepconf_tail={tail}: both count tokens; fix: --deepconf_window=2048")
    f = DEEPCONF_SCORERS[name]
    return [np.array([f(c, window, tail) for c in p['candidates']], dtype=np.float64) for p in problems]

# -----------------------------------------------------------------------------
# off-the-shelf PRM (Qwen2.5-Math-PRM-7B usage, from its model card): system prompt, the question as
# the user turn, the steps joined by <extra_0> (and one after the last) as the assistant turn, chat
# template; the model gives 2-class logits per token; the positive-class probability at each
# <extra_0> is that step's score.

PRM_SYSTEM = "Please reason step by step, and put your final answer within \\boxed{}."
PRM_SEP = '<extra_0>'


def split_steps(text):
    """Steps of a completion: blank-line separated chunks (stripped, empties dropped); >= 1 step."""
    steps = [s.strip() for s in text.split('\n\n') if s.strip()]
    return steps or [text.strip()]


def prm_text(tokenizer, question, completion):
    messages = [{'role': 'system', 'content': PRM_SYSTEM}, {'role': 'user', 'content': question},
                {'role': 'assistant', 'content': PRM_SEP.join(split_steps(completion)) + PRM_SEP}]
    return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=False)


def prm_input_ids(tokenizer, question, texts):
    """The PRM's input token ids for each completion in texts (system prompt, question, steps)."""
    return [tokenizer(prm_text(tokenizer, question, t), add_special_tokens=False)['input_ids'] for t in texts]


# PRM cost, counted as model.py counts the verifiers' FLOPs (2 per multiply-add of every matmul, attention
# included; embedding lookups, norms, softmax and the rotary outer product count 0): one forward over its
# whole input of L tokens (system prompt, question, steps) is 2 L W + 4 L^2 d_attn per layer, W = the weights
# of every nn.Linear (attention, MLP, score head), d_attn = heads x head dim; the causal mask does not halve
# it (torch's FLOP counter counts the full L x L products, as for HSRM's encoder). Qwen2.5-Math-PRM-7B from
# its config.json (hidden 3584, FFN 18944, 28 layers, 28 heads of 128 with 4 KV heads, vocab 152064, score
# head 3584 -> 3584 -> 2; no LM head): the nominal figures when it has not run here.
PRM_7B_ARCH = {'linear_params': 6_538_140_672, 'n_layer': 28, 'd_attn': 3584, 'n_params': 7_083_474_946}


def prm_arch(model):
    """PRM_7B_ARCH's figures of a loaded PRM."""
    cfg = model.config
    head_dim = getattr(cfg, 'head_dim', None) or cfg.hidden_size // cfg.num_attention_heads
    return {'linear_params': sum(m.in_features * m.out_features for m in model.modules() if isinstance(m, torch.nn.Linear)),
            'n_layer': cfg.num_hidden_layers, 'd_attn': cfg.num_attention_heads * head_dim,
            'n_params': sum(p.numel() for p in model.parameters())}


def prm_flops(arch, n_tokens):
    """Forward FLOPs of the PRM (arch: PRM_7B_ARCH's keys) on one input of n_tokens tokens."""
    return 2 * n_tokens * arch['linear_params'] + 4 * arch['n_layer'] * n_tokens ** 2 * arch['d_attn']


def prm_tokens_estimate(question, completion, n_tokens, tokens_per_char):
    """PRM input tokens without its tokenizer: the completion's n_tokens (generator tokens), the system
    prompt and question at tokens_per_char, one separator per step and 15 ChatML tokens (3 turns of
    <|im_start|> role \\n ... <|im_end|> \\n)."""
    return n_tokens + round(tokens_per_char * len(PRM_SYSTEM + question)) + len(split_steps(completion)) + 15


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


def prm_reduce(step_probs, how='last'):
    """Candidate score from its step scores: 'last' (the paper's main results), 'min' or 'prod'."""
    if how not in ('last', 'min', 'prod'):
        raise ValueError(f"prm_reduce={how!r}; fix: --prm_reduce=last (or min, prod)")
    if not step_probs:  # the separator was cut off (should not happen: nothing is truncated)
        return -math.inf
    return float(step_probs[-1] if how == 'last' else min(step_probs) if how == 'min' else np.prod(step_probs))


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
    cache['n_params'], cache['arch'], cache['device'] = sum(p.numel() for p in model.parameters()), prm_arch(model), str(device)
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
    """Train the text verifiers (train.py's run, one run dir per size and seed; finished runs are
    skipped), then score the eval split with the PRM when prm_model is set."""
    import train
    cfg = {**DEFAULTS, **cfg}
    dev = resolve_device(cfg['device'])
    if cfg['threads']:
        torch.set_num_threads(cfg['threads'])
    bad = [s for s in cfg['text_sizes'] if s not in ('small', 'large')]
    if bad:
        raise ValueError(f"text_sizes={cfg['text_sizes']!r}: {bad} unknown; fix: --text_sizes=\"['small','large']\"")
    unknown = [k for k in cfg['text_train_overrides'] if k not in train.DEFAULTS]
    if unknown:
        raise ValueError(f"text_train_overrides has keys {unknown} that train.py does not know; fix: use train.py config keys")
    for size in cfg['text_sizes']:
        for s in train_cfg['seeds'] or [train_cfg['seed']]:
            train.run({**train_cfg, **cfg['text_train_overrides'], 'verifier': 'text', 'text_size': size,
                       'out_dir': cfg['out_dir'], 'device': cfg['device'], 'seed': s, 'seeds': None,
                       'run_dir': os.path.join(cfg['out_dir'], 'verifiers', f'text_{size}_seed{s}')})
    if cfg['prm_model']:
        eval_dir = cfg['eval_dir'] or os.path.join(cfg['out_dir'], 'eval')
        path = os.path.join(eval_dir, 'prm_scores.json')
        score_prm(load_split(eval_dir, labels=False), path, cfg['prm_model'], cfg['prm_batch_size'], cfg['prm_dtype'], dev)
        print(f'PRM step scores of every candidate in {path}')


def split_argv(argv):
    """(our argv, the text verifiers' train.py config): train.py's defaults updated by the same config
    files, then by the --key=value flags of train.py keys that are not ours (e.g. --max_iters=2000)."""
    import train
    theirs = [a for a in argv if a.startswith('--') and a[2:].split('=', 1)[0] in set(train.DEFAULTS) - set(DEFAULTS)]
    files = [a for a in argv if not a.startswith('--')]
    return [a for a in argv if a not in theirs], apply_config(dict(train.DEFAULTS), files + theirs, train.DEFAULTS)


if __name__ == '__main__':
    import sys
    argv, train_cfg = split_argv(sys.argv[1:])
    config = configure(globals(), argv)  # config files, then --key=value, override the knobs above
    cli(lambda c: run(c, train_cfg), config, 'baselines.py')
