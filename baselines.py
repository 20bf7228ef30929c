"""
Baselines HSRM is compared against that need a run of their own, read by evaluate.py (the free ones, the
cheap scorers and DeepConf's confidences, are in scorers.py: they cost nothing and evaluate.py computes them):
- EORM-style text-only verifiers (GPT-2's tokenizer, 512 positions: small 13.80M, large 53.22M; the paper
  says 2.6M / 53.4M): trained by train.py's `train` (as train.py runs it) with verifier='text' on the same problems,
  split, loss and early stopping as HSRM, reading every split through the same tokenizer and position table;
- an off-the-shelf PRM (Qwen2.5-Math-PRM-7B, prm.py), scored once per candidate and cached.

    python baselines.py config/gsm8k_1p7b.py                                  # text verifiers
    python baselines.py config/gsm8k_1p7b.py --text_sizes="['large']" --text_tokenizer=gpt2 --max_tokens=512
    python baselines.py config/gsm8k_1p7b.py --prm_model=Qwen/Qwen2.5-Math-PRM-7B --device=cuda
"""
import os

import torch

import train
from configurator import cli, configure, knobs, resolve_device, split_argv
from prm import score_prm
from store import check_writable, load_split

# -----------------------------------------------------------------------------
# config (options in the comments). The text verifiers take every train.py key from the same config
# file(s) and --key=value flags (data, split, loss, early stopping, seeds, text_tokenizer, max_tokens),
# with the overrides below.
out_dir = 'out/demo'        # the run: trains on {out_dir}/train, writes {out_dir}/verifiers/text_{size}_seed{seed}/
eval_dir = ''               # split the PRM scores; '' = {out_dir}/eval (cache: {eval_dir}/prm_scores.json)
text_sizes = ['small', 'large']  # EORM-style text verifiers: 'small' (d 256, L 1, h 2) | 'large' (d 768, L 2, h 4); [] = none
text_train_overrides = {'lr_schedule': 'cosine', 'warmup_iters': 100}  # the paper's EORM schedule; {} = exactly HSRM's
prm_model: str = None       # None = no PRM; 'Qwen/Qwen2.5-Math-PRM-7B' (hub name or local dir; needs a GPU in practice)
prm_batch_size = 8          # candidates per PRM forward
prm_dtype = 'bfloat16'      # 'bfloat16' | 'float16' | 'float32'
device = 'auto'             # 'auto' | 'cpu' | 'cuda': text-verifier training and the PRM
threads = 0                 # CPU threads for torch; 0 = torch's default (on a busy shared CPU, 1 is often much faster)
# -----------------------------------------------------------------------------
DEFAULTS = knobs(globals())  # the knobs above as a dict

# -----------------------------------------------------------------------------
# the run


def run(cfg, train_cfg):
    """Train the text verifiers (train.run, as train.py runs, one run dir per size and seed; finished runs are
    skipped, a finished run whose config differs is refused unless --overwrite=True), then score the eval
    split with the PRM when prm_model is set."""
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
        score_prm(load_split(eval_dir, labels=False), path, cfg['prm_model'], cfg['prm_batch_size'], cfg['prm_dtype'], dev)
        print(f'PRM step scores of every candidate in {path}')


if __name__ == '__main__':
    import sys
    argv, train_cfg = split_argv(sys.argv[1:], DEFAULTS, train.DEFAULTS)  # train.py's keys for the text verifiers
    config = configure(globals(), argv)  # config files, then --key=value, override the knobs above
    cli(lambda c: run(c, train_cfg), config, 'baselines.py')
