"""
The volume curve: a verifier's best-of-N and within-problem AUROC against the training candidates it read, one point
per (curve report, variant, K), read from the reports studies.curve writes (curve.json) for the runs of one evaluation
split: config/gsm8k_qwen05.py's sizes, then config/gsm8k_qwen05_k1000.py, _k2000, _s16 and _k4000 (each its own run,
its variants pooling more training extractions). A point's candidates: its training problems (the 80% cut) times the
samples a problem its training splits hold. Beside it, each point's references: majority vote and the best free
selector on that run's validation (its weighted votes included). Every report must score the same evaluation split.

    python -m studies.volume                     # the points below (their reports must exist)
    python -m studies.volume --points="[('out/gsm8k_qwen05/curve.json', 'hsrm')]" --out=out/volume

Writes {out}.md (the table) and {out}.png (the plot).
"""
import json
import os

from configurator import configure, knobs
from machine import cli
from studies.curve import read_report
from tables import fmt_ci

# -----------------------------------------------------------------------------
# knobs (options in the comments); config files and --key=value override them
# (a curve.json, a variant of it[, a series]): its every K is a point; the plot joins the points of one series (by
# default the variant's samples a problem: 'verifier, 8 samples a problem'), so a pool of more samples or a second
# variant at one K (name it a series, e.g. 'layer 12, step means') stands apart instead of bending the line
points = [('out/gsm8k_qwen05/curve.json', 'hsrm'),
          ('out/gsm8k_qwen05_k1000/curve.json', 'hsrm_k1000'),
          ('out/gsm8k_qwen05_k2000/curve.json', 'hsrm_k2000'),
          ('out/gsm8k_qwen05_s16t/curve.json', 'hsrm_x16'),
          ('out/gsm8k_qwen05_k4000/curve.json', 'hsrm_k4000')]
out = 'assets/volume_gsm8k_qwen05'  # writes {out}.md and {out}.png
votes = True  # also plot each point's weighted vote ('<variant> + weighted vote' rows, where the report has them)
DEFAULTS = knobs(globals())  # the knobs above as a dict

# -----------------------------------------------------------------------------


def samples_of(report, variant):
    """Candidates a training problem of `variant` holds: its train dirs' (the run's own train split by default)
    extraction n_samples, the same for all of them."""
    cfg = report['config']
    dirs = cfg['variants'][variant].get('train_dirs') or [os.path.join(cfg['out_dir'], 'train')]
    ns = set()
    for d in dirs:
        with open(os.path.join(d, 'config.json')) as f:
            ns.add(json.load(f)['n_samples'])
    if len(ns) != 1:
        raise ValueError(f"variant {variant!r} reads train dirs {dirs} holding {sorted(ns)} samples a problem; fix: "
                         "one point per sample count (a variant of its own per pool)")
    return ns.pop()


def volume_points(points_):
    """One dict per (report, variant, K where it has a cell), in the order given: its candidates, problems, samples
    and the rows (the variant's, its weighted vote's, majority vote's, the best free selector on validation)."""
    pts, evals = [], set()
    for point in points_:
        if not isinstance(point, (tuple, list)) or len(point) not in (2, 3):
            raise ValueError(f"points has {point!r}; fix: (a curve.json, a variant of it) or (curve.json, variant, "
                             "series name)")
        path, v = point[:2]
        rep = read_report(path, 'points')
        if v not in rep['config']['variants']:
            raise ValueError(f"points names variant {v!r} of {path}, which has {sorted(rep['config']['variants'])}; "
                             f"fix: a variant of that report")
        evals.add(os.path.realpath(os.path.join(rep['config']['out_dir'], 'eval')))
        n = samples_of(rep, v)
        series = point[2] if len(point) == 3 else f'verifier, {n} samples a problem'
        for s in rep['sizes']:
            rows = {r['method']: r for r in s['rows']}
            if v not in rows:
                continue
            kind = {r['type']: r for r in s['rows']}
            pts.append({'report': path, 'variant': v, 'series': series, 'k': s['k'], 'problems': rows[v]['n_train'],
                        'samples': n, 'candidates': rows[v]['n_train'] * n, 'row': rows[v],
                        'vote': rows.get(f'{v} + weighted vote'), 'majority': kind['vote'],
                        'reference': kind['free_best_val'], 'reference_auroc': kind['free_best_val_auroc']})
    if len(evals) > 1:
        raise ValueError(f"the reports score different evaluation splits ({sorted(evals)}); fix: points of runs whose "
                         "eval dirs are one split (the configs link their run's eval to the cell's)")
    return pts


def render(pts):
    """The table: a row per point, its Bo-N and AUROC with their 95% intervals and Δ against its run's reference."""
    d = lambda r: r.get('vs', {}).get('best_free_val', {})  # noqa: E731
    out = ['| Training candidates (problems x samples) | Variant (report) | Bo8 (%) [95% CI] | '
           'Δ vs best free on val | + weighted vote: Bo8, Δ | Within-AUROC [95% CI] | Δ AUROC vs best free on val | '
           'Majority vote Bo8 |',
           '|---:|---|---:|---:|---:|---:|---:|---:|']
    for p in pts:
        r, v = p['row'], p['vote']
        vs, vv = d(r), d(v) if v else {}
        out.append(f"| {p['candidates']:,} ({p['problems']:,} x {p['samples']}) | {p['variant']} ({p['report']}) | "
                   f"{fmt_ci(r['acc'], r.get('acc_ci'), True)} | "
                   f"{fmt_ci(vs.get('acc'), vs.get('acc_ci'), True, True)} | "
                   + (f"{100 * v['acc']:.1f}, {fmt_ci(vv.get('acc'), vv.get('acc_ci'), True, True)}" if v else '–')
                   + f" | {fmt_ci(r.get('auroc'), r.get('auroc_ci'), False)} | "
                   f"{fmt_ci(vs.get('auroc'), vs.get('auroc_ci'), False, True)} | {100 * p['majority']['acc']:.1f} |")
    return '\n'.join(out) + '\n'


def plot(pts, path, with_votes=True):
    """Bo-N and AUROC against training candidates (log axis), 95% intervals as error bars, a line through each series'
    verifier points (its weighted votes filled squares of its colour); each point's references (majority vote, the
    best free selector on its validation) as open markers at its x."""
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    for ax, m, pct, lab in ((axes[0], 'auroc', 1, 'within-problem AUROC'), (axes[1], 'acc', 100, 'best-of-8 (%)')):
        names = list(dict.fromkeys(p['series'] for p in pts))  # in the order given
        colors = ['tab:red', 'tab:orange', 'tab:green', 'tab:purple', 'tab:brown']
        dodge = {n: 2 ** (0.06 * i) for i, n in enumerate(names)}  # a series' markers a little right of the first's
        series = [(n, 'row', 'o', colors[i % 5], n) for i, n in enumerate(names)]
        if with_votes and m == 'acc':
            series += [(f'{n} + weighted vote', 'vote', 's', colors[i % 5], n) for i, n in enumerate(names)]
        series += [('best free on val', 'reference' if m == 'acc' else 'reference_auroc', 'D', 'tab:blue', None)]
        series += [('majority vote', 'majority', 'v', 'dimgray', None)] if m == 'acc' else []
        for label, key, mk, color, name in series:
            seen = {}  # a reference once per (report, K): the series at one report's K share it
            for p in pts:
                if p.get(key) and p[key].get(m) is not None and name in (None, p['series']):
                    seen.setdefault((p['report'], p['k'], p['series'] if name else None), (p['candidates'], p[key]))
            xy = list(seen.values())
            if not xy:
                continue
            y = [pct * r[m] for _, r in xy]
            err = [[pct * (r[m] - (r.get(f'{m}_ci') or [r[m]] * 2)[0]) for _, r in xy],
                   [pct * ((r.get(f'{m}_ci') or [r[m]] * 2)[1] - r[m]) for _, r in xy]]
            ax.errorbar([x * dodge.get(name, 1) for x, _ in xy], y, yerr=err, fmt=mk, color=color, capsize=3,
                        label=label, mfc=color if key in ('row', 'vote') else 'none',
                        ls='-' if key == 'row' else 'none')
        ax.set_xscale('log', base=2)
        ax.set_xlabel('training candidates (log scale)')
        ax.set_ylabel(lab)
        ax.grid(alpha=0.3)
    handles, labels = axes[1].get_legend_handles_labels()  # the Bo-N panel draws every series: one legend below
    fig.legend(handles, labels, loc='lower center', ncol=3, fontsize=8, frameon=False)
    fig.suptitle('The verifier against its training candidates, 95% intervals (studies.volume)')
    fig.tight_layout(rect=(0, 0.05 + 0.04 * -(-len(labels) // 3), 1, 1))
    fig.savefig(path, dpi=120)
    plt.close(fig)


def run(cfg):
    cfg = {**DEFAULTS, **cfg}
    pts = volume_points(cfg['points'])
    if not pts:
        raise ValueError(f"points={cfg['points']!r} give no point (no K where a variant has a cell); fix: reports of "
                         "finished studies.curve runs")
    md = render(pts)
    os.makedirs(os.path.dirname(cfg['out']) or '.', exist_ok=True)
    with open(cfg['out'] + '.md', 'w') as f:
        f.write(md)
    plot(pts, cfg['out'] + '.png', cfg['votes'])
    print(md)
    return pts


if __name__ == '__main__':
    cli(run, configure(globals()), 'volume.py')  # config files, then --key=value, override the knobs above
