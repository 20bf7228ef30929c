"""
Verifier cost on synthetic pools (the cost table's measured column, without any extraction):
parameters, fp16 weight MB, analytic FLOPs per candidate and measured scoring time per candidate
for HSRM and the small and large text verifiers, at the paper's shapes (d_gen 2048 = Qwen3-1.7B).

    python bench_eval.py            # one table; bench.py calls bench_eval()
"""
import time

import numpy as np
import torch

from evaluate import verifier_flops
from model import build_verifier, count_params, score_problems

# restricted text vocabularies that give the paper's EORM sizes (see model.TextVerifier): small ~2.6M, large ~53.4M
TEXT_VOCAB = {'small': 6_493, 'large': 50_500}


def synthetic_pool(n_problems, n_cands, n_steps, n_tokens, d_gen, vocab_size, seed=0):
    """Problems in the on-disk format (random states, token ids drawn from the vocab ids)."""
    g = torch.Generator().manual_seed(seed)
    return [{'key': f'{i:06d}', 'layers': [-1], 'candidates': [
        {'states': torch.randn(n_steps, d_gen, generator=g).half(), 'step_pos': torch.arange(n_steps),
         'token_ids': torch.randint(0, vocab_size, (n_tokens,), generator=g)} for _ in range(n_cands)]}
        for i in range(n_problems)]


def bench_eval(d_gen=2048, n_steps=20, n_tokens=300, n_problems=2, n_cands=8, repeats=2, batch_size=64,
               device='cpu', seed=0):
    """Rows {verifier, params, fp16_mb, flops, ms_per_candidate, device}: the median of `repeats`
    timed score_problems calls over n_problems x n_cands candidates, after one warm-up call."""
    torch.manual_seed(seed)
    models = {'HSRM': build_verifier('hsrm', d_gen=d_gen)}
    for size, v in TEXT_VOCAB.items():
        models[f'text ({size})'] = build_verifier('text', vocab=list(range(v - 2)), size=size)
    pool = synthetic_pool(n_problems, n_cands, n_steps, n_tokens, d_gen, TEXT_VOCAB['small'] - 2, seed)
    rows = []
    for name, model in models.items():
        score_problems(model, pool[:1], batch_size, device)  # warm-up
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            score_problems(model, pool, batch_size, device)
            times.append(time.perf_counter() - t0)
        n = count_params(model)
        rows.append({'verifier': name, 'params': n, 'fp16_mb': 2 * n / 1e6, 'flops': verifier_flops(model, n_steps, n_tokens),
                     'ms_per_candidate': 1e3 * float(np.median(times)) / (n_problems * n_cands),
                     'device': f'{device} ({torch.get_num_threads()} threads)' if device == 'cpu' else device})
    return rows


def format_rows(rows, n_steps=20, n_tokens=300):
    out = [f'| Verifier (S={n_steps} steps, T={n_tokens} tokens) | Params | fp16 MB | FLOPs / candidate | ms / candidate |',
           '|---|---:|---:|---:|---:|']
    for r in rows:
        out.append(f"| {r['verifier']} | {r['params'] / 1e6:.2f}M | {r['fp16_mb']:.1f} | {r['flops']:.3g} "
                   f"| {r['ms_per_candidate']:.3f} ({r['device']}) |")
    return '\n'.join(out)


if __name__ == '__main__':
    print(format_rows(bench_eval()))
