"""
Training and scoring speed of the verifiers on CPU, against the machine's own floor.

    python bench_train.py [threads]

bench_training(): a GSM8K-sized synthetic cache (500 problems x 64 candidates x 5..15 steps (mean 10)
x d_gen 2048, fp16), the real train() loop for a few steps and the real score_problems(); compares
with the issue's targets (1000 steps < 5 min on 2 cores; >= 10,000 candidates/s scored) and with the
floor this machine allows: FLOPs / measured matmul GFLOP/s and bytes / measured copy bandwidth.
"""
import os
import time

import torch

from model import build_verifier, count_params, score_problems
import train as T


def _gflops():
    """fp32 matmul GFLOP/s of this machine at torch's thread count (best of a few 2048^3 products)."""
    a, b = torch.randn(2048, 2048), torch.randn(2048, 2048)
    best = 0.0
    for _ in range(5):
        t = time.perf_counter()
        a @ b
        best = max(best, 2 * 2048 ** 3 / (time.perf_counter() - t) / 1e9)
    return best


def _bandwidth():
    """Copy bandwidth GB/s (read + write) on 256 MB."""
    x = torch.empty(64 * 2 ** 20)
    y = torch.empty_like(x)
    best = 0.0
    for _ in range(5):
        t = time.perf_counter()
        y.copy_(x)
        best = max(best, 2 * x.numel() * 4 / (time.perf_counter() - t) / 1e9)
    return best


def synthetic_cache(n_problems=500, n_cands=64, d_gen=2048, seed=0):
    """In-memory problems in the on-disk format (states only what training reads), one fp16 buffer."""
    g = torch.Generator().manual_seed(seed)
    steps = torch.randint(5, 16, (n_problems, n_cands), generator=g)
    buf = torch.empty(int(steps.sum()), d_gen, dtype=torch.float16).normal_(generator=g)
    correct = torch.rand(n_problems, n_cands, generator=g) < torch.rand(n_problems, 1, generator=g)
    problems, at = [], 0
    for i in range(n_problems):
        cands = []
        for j in range(n_cands):
            s = int(steps[i, j])
            cands.append({'states': buf[at:at + s], 'token_ids': torch.zeros(s, dtype=torch.long),
                          'correct': bool(correct[i, j])})
            at += s
        problems.append({'key': f'{i:06d}', 'layers': [-1], 'candidates': cands})
    return problems


def _flops_per_token(model, d_gen, mean_len):
    """Forward FLOPs per step token of an HSRM: projection + encoder matmuls + attention."""
    d = model.proj.out_features
    L = len(model.encoder.layers)
    proj = 2 * d_gen * d
    enc = L * (2 * (4 * d * d + 2 * d * 4 * d) + 4 * mean_len * d)
    return proj, enc


def bench_training(train_steps=6, score_problems_n=40, threads=None):
    """threads: torch CPU threads (None = torch's default, one per core)."""
    t_all = time.time()
    if threads:
        torch.set_num_threads(threads)
    torch.manual_seed(0)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, load average {os.getloadavg()[0]:.1f} "
          f"(other work on these cores slows every number below)")
    gf, bw = _gflops(), _bandwidth()
    print(f"machine: fp32 matmul {gf:.0f} GFLOP/s, copy bandwidth {bw:.1f} GB/s")
    t = time.time()
    probs = synthetic_cache()
    n_tok = sum(len(c['states']) for p in probs for c in p['candidates'])
    print(f"cache: {len(probs)} problems x 64 candidates, {n_tok / len(probs) / 64:.1f} steps mean, d_gen 2048, "
          f"{n_tok * 2048 * 2 / 1e9:.2f} GB fp16 (built in {time.time() - t:.1f}s)")
    tr, va = probs[:480], probs[480:]

    rows = []
    model = build_verifier('hsrm', 2048)
    proj, enc = _flops_per_token(model, 2048, 10)
    for n_train in (None, 16):
        cfg = dict(max_iters=train_steps, eval_interval=10 ** 9, n_train=n_train, early_stop_metric='acc', seed=0)
        _, log = T.train(tr, va, cfg)
        s_step = log['step_time_s'] / train_steps
        toks = 8 * (n_train or 64) * 10  # real step tokens per batch (mean 10 steps)
        flops = toks * (2 * proj + 3 * enc)  # backward: weight grad only for the projection, 2x for the encoder
        byts = toks * 2048 * 2 + count_params(model) * 4 * 12  # fp16 states read once; params/grads/Adam moments
        floor = max(flops / (gf * 1e9), byts / (bw * 1e9))
        rows.append((f"train step, n_train={n_train or 'all (64)'}", f"{s_step * 1e3:.0f} ms", f"{floor * 1e3:.0f} ms",
                     f"{s_step / floor:.1f}x", f"1000 steps {s_step * 1000 / 60:.1f} min (target < 5)"))

    model.eval()
    sp = probs[:score_problems_n]
    n_c = sum(len(p['candidates']) for p in sp)
    score_problems(model, sp[:2])  # warm-up
    t = time.perf_counter()
    score_problems(model, sp)
    dt = time.perf_counter() - t
    n_tok = sum(len(c['states']) for p in sp for c in p['candidates'])
    flops = n_tok * (proj + enc)
    floor = max(flops / (gf * 1e9), n_tok * 2048 * 2 / (bw * 1e9))
    rows.append(("HSRM scoring", f"{n_c / dt:,.0f} cand/s", f"{n_c / floor:,.0f} cand/s", f"{(n_c / floor) / (n_c / dt):.1f}x",
                 f"target >= 10,000 cand/s"))

    w = [max(len(r[i]) for r in rows + [('what', 'measured', 'floor', 'slower by', 'vs target')]) for i in range(5)]
    line = lambda r: '  '.join(x.ljust(w[i]) for i, x in enumerate(r))  # noqa: E731
    print(line(('what', 'measured', 'floor', 'slower by', 'vs target')))
    for r in rows:
        print(line(r))
    print(f"floor = max(FLOPs / {gf:.0f} GFLOP/s, bytes / {bw:.1f} GB/s); FLOPs per step token: projection "
          f"{proj / 1e6:.2f}M + encoder {enc / 1e6:.2f}M forward, so HSRM at 10 steps needs "
          f"{10 * (proj + enc) / 1e6:.0f} MFLOP per candidate: 10,000 cand/s needs {10 * (proj + enc) * 1e4 / 1e9:.0f} GFLOP/s")
    print(f"bench took {time.time() - t_all:.0f}s")


if __name__ == '__main__':
    import sys
    bench_training(threads=int(sys.argv[1]) if len(sys.argv) > 1 else None)
