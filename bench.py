"""
Speed and memory, measured side by side in one run and printed as tables (never asserted in tests).

    python bench.py                  # every section
    python bench.py --only=extract   # one of: extract, label, train, eval
"""
import json
import os
import resource
import subprocess
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, '..', 'shared', 'data')


def table(rows, header):
    w = [max(len(str(x)) for x in col) for col in zip(header, *rows)]
    line = lambda r: '| ' + ' | '.join(str(x).ljust(n) for x, n in zip(r, w)) + ' |'
    print('\n'.join([line(header), '|' + '|'.join('-' * (n + 2) for n in w) + '|'] + [line(r) for r in rows]))


def machine_floor(n=1024, secs=1.0):
    """This machine's fp32 matmul rate (FLOP/s) and copy bandwidth (bytes/s), measured now."""
    a, b = torch.randn(n, n), torch.randn(n, n)
    a @ b
    t, k = time.perf_counter(), 0
    while time.perf_counter() - t < secs:
        a @ b
        k += 1
    flops = 2 * n ** 3 * k / (time.perf_counter() - t)
    x = torch.empty(32 * 2 ** 20 // 4)
    y = torch.empty_like(x)
    t, k = time.perf_counter(), 0
    while time.perf_counter() - t < secs:
        y.copy_(x)
        k += 1
    return flops, 2 * x.numel() * 4 * k / (time.perf_counter() - t)

# -----------------------------------------------------------------------------
# extraction: extract's sampling loop with capture vs plain generate, one subprocess per variant so
# that peak memory (max RSS) is each variant's own


def _extract_worker(variant, n_problems, n_samples, max_new_tokens, dataset):
    from extract import build_prompt, load_generator, load_problems, newline_table, sample_with_capture
    model, tok = load_generator('smollm2')
    probs = (load_problems('gsm8k', 0, n_problems - 1, DATA) if dataset == 'gsm8k'
             else load_problems('synth', 0, n_problems - 1, synth_level=2))
    prompts = [build_prompt(tok, p, 'Please reason step by step.' if dataset == 'gsm8k' else None, False) for p in probs]
    nl = newline_table(tok)
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    torch.manual_seed(0)
    t = time.perf_counter()
    if variant == 'extract':
        res = sample_with_capture(model, tok, prompts, n_samples, [-1], max_new_tokens, 0.8, 0.95, seed=0, nl=nl)
        n_tok = sum(len(c['token_ids']) for cs in res for c in cs)
        n_steps = sum(len(c['step_pos']) for cs in res for c in cs)
    else:
        enc = tok(prompts, return_tensors='pt', padding=True, padding_side='left', add_special_tokens=False)
        out = model.generate(**enc, do_sample=True, temperature=0.8, top_p=0.95, top_k=0, max_new_tokens=max_new_tokens,
                             num_return_sequences=n_samples, pad_token_id=tok.pad_token_id,
                             output_hidden_states=variant == 'generate+hidden', return_dict_in_generate=True)
        new = out.sequences[:, enc.input_ids.shape[1]:]
        eos = torch.tensor(sorted({tok.eos_token_id, model.generation_config.eos_token_id} - {None}))
        ended = torch.isin(new, eos)
        # finished-candidate tokens: up to (not counting) the first EOS
        n_tok = int(torch.where(ended.any(1), ended.float().argmax(1), torch.full((len(new),), new.shape[1])).sum())
        n_steps = 0
    dt = time.perf_counter() - t
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({'tokens': n_tok, 'seconds': dt, 'peak_mb': peak / 1024, 'delta_mb': (peak - base) / 1024, 'steps': n_steps}))


def bench_extract():
    """Embedded model on CPU: tokens/s and peak memory of the three ways to sample, same prompts and batch."""
    n_params = 134.5e6
    flops, bw = machine_floor()
    rows = []
    cases = [('synth', 4, 8, 64), ('gsm8k', 1, 32, 256), ('gsm8k', 4, 8, 128), ('gsm8k', 4, 8, 256)]
    for dataset, n_problems, n_samples, mnt in cases:
        res = {}
        for variant in ('generate', 'generate+hidden', 'extract'):
            out = subprocess.run([sys.executable, __file__, '--worker', variant, str(n_problems), str(n_samples), str(mnt), dataset],
                                 capture_output=True, text=True, cwd=HERE)
            if out.returncode:
                raise RuntimeError(out.stderr[-2000:])
            res[variant] = json.loads(out.stdout.strip().splitlines()[-1])
        g, e = res['generate'], res['extract']
        # floor for decoding: every token's forward reads all weights once per step (memory-bound at
        # small batch) and costs 2 * params FLOPs; the tokens of one batch share the weight read
        floor_s = max(2 * n_params * e['tokens'] / flops, 4 * n_params * mnt / bw)
        rows.append([f'{dataset} {n_problems}x{n_samples}', mnt,
                     f"{g['tokens'] / g['seconds']:.0f}", f"{e['tokens'] / e['seconds']:.0f}",
                     f"{(e['tokens'] / e['seconds']) / (g['tokens'] / g['seconds']):.2f}",
                     f"{e['seconds'] / floor_s:.1f}",
                     f"{g['delta_mb']:.0f}", f"{res['generate+hidden']['delta_mb']:.0f}", f"{e['delta_mb']:.0f}",
                     f"{e['steps'] / max(1, n_problems * n_samples):.1f}"])
    print(f'\nExtraction (SmolLM2-135M, CPU, {torch.get_num_threads()} threads; machine: {flops / 1e9:.0f} GFLOP/s fp32 '
          f'matmul, {bw / 1e9:.1f} GB/s copy). tok/s = finished-candidate tokens (up to EOS) per second.')
    table(rows, ['work (problems x N)', 'max_new', 'generate tok/s', 'extract tok/s', 'extract/generate',
                 'extract / floor', 'generate MB', 'generate+hidden MB', 'extract MB', 'steps/cand'])


if __name__ == '__main__':
    if len(sys.argv) > 1 and sys.argv[1] == '--worker':
        _extract_worker(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), sys.argv[6])
        sys.exit(0)
    only = next((a.split('=', 1)[1] for a in sys.argv[1:] if a.startswith('--only=')), None)
    if only in (None, 'extract'):
        bench_extract()
