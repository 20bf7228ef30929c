"""
The plots: evaluate.py's three (best-of-N against N, accuracy against cost, the AUROC ranking: make_plots) and the
pieces the studies' plots share (the reference rows' styles, interval bars and bands, a figure saved with its legend).
Each draws from a table's rows as tables.py makes them (res: evaluate.py's results); matplotlib is imported only
when a plot is drawn, so a machine without it runs every stage and gets a note instead of the PNGs.
"""
import numpy as np

from generator import generator_name
from tables import fmt_ci, fmt_num, free_name

# -----------------------------------------------------------------------------
# styles and pieces every plot uses

# the plots' rows by type: (colour, line style); the learned verifiers cycle VERIFIER_STYLES (colour, marker)
REF_STYLES = {'single': ('darkgoldenrod', '-.'), 'vote': ('dimgray', '--'), 'oracle': ('k', ':'),
              'free_best_val': ('tab:blue', '-'), 'free_best_test': ('tab:cyan', ':')}
VERIFIER_STYLES = [('tab:red', 'o'), ('tab:green', 's'), ('tab:purple', '^'), ('tab:orange', 'D'), ('tab:brown', 'v')]
FREE_TYPES = ('vote', 'cheap', 'deepconf', 'combo', 'free_vote', 'deepconf_vote')  # every free selector's own row


def _band(ax, x, y, ci, color, ls, label, marker=None, mfc=None, band=True):
    """A line with its 95% interval as a shaded band (y, ci in fractions; drawn in points)."""
    ax.plot(x, [100 * v for v in y], color=color, ls=ls, marker=marker, ms=4, lw=1.6, label=label, mfc=mfc)
    if band and all(c is not None for c in ci):
        ax.fill_between(x, [100 * c[0] for c in ci], [100 * c[1] for c in ci], color=color, alpha=0.12, lw=0)


def plot_title(res, what):
    """What a plot shows, and the run it shows: the generator and its dtype, K (training problems), the seeds."""
    gen = generator_name(res['generator'])
    learned = [r for r in res['rows'] if r['type'] == 'verifier']
    ks = sorted({r['n_train'] for r in learned if r.get('n_train')})
    seeds = sorted({r['n_runs'] for r in learned})
    run = ([f"K = {' / '.join(map(str, ks))} training problems"] if ks else []) + \
        ([f"{' / '.join(map(str, seeds))} seed{'s' if seeds != [1] else ''}"] if seeds else []) + \
        [f"{res['n_problems']} evaluation problems"]
    dtype = f", {res['dtype']}" if res.get('dtype') else ''
    return f"{what}, {res['dataset']}: {gen}{dtype}\n" + ', '.join(run)


def yerr(vals, intervals):
    """matplotlib yerr [2, k] in points from values and their [lo, hi] intervals (None: no bars)."""
    if any(c is None for c in intervals):
        return None
    return 100 * np.maximum(0, np.array([[v - c[0] for v, c in zip(vals, intervals)],
                                         [c[1] - v for v, c in zip(vals, intervals)]]))


def reference_lines(axes, refs):
    """Horizontal lines (point estimate) and bands (95% interval) for rows of reference (single, vote, oracle)."""
    for r in refs:
        col, ls = REF_STYLES[r['type']]
        for i, ax in enumerate(axes):
            ax.axhline(100 * r['acc'], color=col, ls=ls, lw=1, label=r['method'] if i == len(axes) - 1 else None)
            if r.get('acc_ci'):
                ax.axhspan(100 * r['acc_ci'][0], 100 * r['acc_ci'][1], color=col, alpha=0.08, lw=0)


def plot_rows(rows):
    """What the plots draw of the table's rows: the first row of each reference type (REF_STYLES: None where absent),
    the learned verifiers and the PRM, each one's weighted-vote row (or None) and (colour, marker)."""
    one = {t: next((r for r in rows if r['type'] == t), None) for t in REF_STYLES}
    learned = [r for r in rows if r['type'] in ('verifier', 'prm')]
    by_name = {r['method']: r for r in rows}
    vote_of = {r['method']: by_name.get(f"{r['method']} + weighted vote") for r in learned}
    style = {r['method']: VERIFIER_STYLES[i % len(VERIFIER_STYLES)] for i, r in enumerate(learned)}
    return one, learned, vote_of, style


def legend_name(r):
    """A row's name in a legend: the best free selectors say which (a tie of several is their mean) and what they
    are (the reference, optimistic)."""
    if r['type'] in ('free_best_val', 'free_best_test'):
        tied = r.get('tied') or [r['method']]
        pick = free_name(tied[0]) if len(tied) == 1 else f'mean of {len(tied)} tied'
        return (f"Best free on val ({pick}): the reference" if r['type'] == 'free_best_val'
                else f"Best free on test ({pick}): optimistic")
    return 'Oracle pass@N' if r['type'] == 'oracle' else r['method']


def save_plot(fig, ax, path, inside=None):
    """Write fig to path with ax's legend (inside: a corner of the axes for it, else beside them); -> path."""
    import matplotlib.pyplot as plt
    ax.legend(fontsize=7, loc=inside or 'upper left', bbox_to_anchor=None if inside else (1.02, 1.0))
    fig.savefig(path, dpi=150, bbox_inches='tight')  # tight: the outside legend stays in the frame
    plt.close(fig)
    return path


# -----------------------------------------------------------------------------
# evaluate.py's plots: each from its results (res), each where the table has what it shows


def make_plots(res, prefix):
    """{prefix}_bon_vs_n.png, {prefix}_acc_vs_flops.png and {prefix}_auroc.png (plot_bon_vs_n, plot_acc_vs_flops,
    plot_auroc: each where the table has what it shows); a note instead without matplotlib."""
    try:
        import matplotlib
        matplotlib.use('Agg')
        import matplotlib.pyplot  # noqa: F401  (each plot_* draws with it)
    except ImportError:
        return ['plots skipped: matplotlib is not installed (pip install matplotlib)']
    files = [plot(res, prefix) for plot in (plot_bon_vs_n, plot_acc_vs_flops, plot_auroc)]
    return [f'plot: {f}' for f in files if f]


def plot_bon_vs_n(res, prefix):
    """{prefix}_bon_vs_n.png (None with one N): best-of-N against N (the learned verifiers and their weighted votes,
    the best free selector on validation, the table's reference, with its 95% band, and on test, optimistic; majority
    vote, oracle pass@N, single-pass), above each one's paired Δ against the reference (a learned verifier's with its
    95% band)."""
    import matplotlib.pyplot as plt
    ns = res['ns']
    if len(ns) <= 1:
        return None
    one, learned, vote_of, style = plot_rows(res['rows'])
    unit = 'groups' if res.get('bootstrap', {}).get('unit') == 'groups' else 'problems'
    fig, (ax, dx) = plt.subplots(2, 1, figsize=(7, 6.4), sharex=True, gridspec_kw={'height_ratios': [3, 2]})
    for t, r in one.items():
        if r is None:
            continue
        color, ls = REF_STYLES[t]
        if t == 'single':  # one sample: the same at every N
            y, ci = [r['acc']] * len(ns), [r.get('acc_ci')] * len(ns)
        else:
            y, ci = [r['acc_at'][k] for k in ns], [r.get('acc_ci_at', {}).get(k) for k in ns]
        _band(ax, ns, y, ci, color, ls, legend_name(r), band=t == 'free_best_val')  # the others' bands: in the Δ panel
    dx.axhline(0, color=REF_STYLES['free_best_val'][0], lw=1.2)
    deltas = [(one[t], REF_STYLES[t], None, False) for t in ('vote', 'free_best_test') if one[t]]
    for r in learned:
        color, marker = style[r['method']]
        _band(ax, ns, [r['acc_at'][k] for k in ns], [None], color, '-', r['method'], marker, band=False)
        deltas.append((r, (color, '-'), marker, True))
        v = vote_of[r['method']]
        if v:  # its weighted vote: the same colour, dashed, open markers
            _band(ax, ns, [v['acc_at'][k] for k in ns], [None], color, '--', v['method'], marker, 'white', False)
            deltas.append((v, (color, '--'), marker, False))
    for r, (color, ls), marker, band in deltas:  # the paired Δ against the reference, every N
        d = r.get('vs_at', {}).get('best_free_val')
        if d:
            _band(dx, ns, [d['acc'][k] for k in ns], [d['acc_ci'][k] for k in ns], color, ls, None, marker,
                  'white' if ls == '--' and marker else None, band)
    ax.set(xscale='log', ylabel="best-of-N accuracy (%),\nthe reference's 95% band",
           title=plot_title(res, 'Best-of-N'))
    dx.set(xscale='log', xlabel='N (candidates per problem)',
           ylabel=f'Δ vs the reference (pts),\npaired 95% band ({unit} resampled)')
    for a in (ax, dx):
        a.minorticks_off()
        a.set_xticks(ns, [str(k) for k in ns])
        a.grid(alpha=0.25)
    return save_plot(fig, ax, f'{prefix}_bon_vs_n.png')


def plot_acc_vs_flops(res, prefix):
    """{prefix}_acc_vs_flops.png (None without a verifier's FLOPs): best-of-n against the FLOPs a selector adds to
    sampling a problem's n candidates (the verifier scoring them; the free selectors at 0), with what that sampling
    costs the generator."""
    import matplotlib.pyplot as plt
    from matplotlib.ticker import NullLocator
    rows, n, g = res['rows'], res['n_eval'], res.get('generator_cost')
    by_name = {r['method']: r for r in rows}
    cost = [(c, by_name[c['verifier']]) for c in res['cost'] if c['verifier'] in by_name and c.get('flops')]
    if not cost:
        return None
    one, _, vote_of, style = plot_rows(rows)
    gen = n * g['flops'] if g else None  # what sampling a problem's n candidates costs every row
    fig, ax = plt.subplots(figsize=(7, 4.4))
    for t in ('vote', 'free_best_val'):
        if one[t]:
            color, ls = REF_STYLES[t]
            ax.axhline(100 * one[t]['acc'], color=color, ls=ls, lw=1, alpha=0.7)
            if one[t].get('acc_ci') and t == 'free_best_val':
                ax.axhspan(100 * one[t]['acc_ci'][0], 100 * one[t]['acc_ci'][1], color=color, alpha=0.08, lw=0)
    free = [r for r in rows if r['type'] in FREE_TYPES and r['type'] != 'vote']
    ax.plot([0] * len(free), [100 * r['acc'] for r in free], '_', ms=12, color='gray',
            label=f'{len(free)} other free selectors')
    for t, mk in (('vote', 'D'), ('free_best_val', 'o'), ('free_best_test', '*')):
        if one[t]:
            color = REF_STYLES[t][0]
            ax.errorbar([0], [100 * one[t]['acc']], yerr=yerr([one[t]['acc']], [one[t].get('acc_ci')])
                        if t == 'free_best_val' else None, fmt=mk, color=color, ms=7, capsize=3,
                        label=legend_name(one[t]))
    xs = []
    for c, r in cost:
        color, marker = style.get(r['method'], ('tab:gray', 'o'))
        xs.append(n * c['flops'])
        ax.errorbar([xs[-1]], [100 * r['acc']], yerr=yerr([r['acc']], [r.get('acc_ci')]), fmt=marker,
                    color=color, capsize=3, ms=7, label=r['method'])
        v = vote_of.get(r['method'])
        if v:  # its weighted vote: the same cost, an open marker
            ax.plot([xs[-1]], [100 * v['acc']], marker, mfc='white', color=color, ms=7, label=v['method'])
        if gen:
            ax.annotate(f'{100 * xs[-1] / gen:.2g}% of sampling', (xs[-1], 100 * r['acc']), xytext=(6, -10),
                        textcoords='offset points', fontsize=7, color=color)
    if gen:  # the cost every row pays, the free selectors' whole cost
        ax.axvline(gen, color='k', lw=1, ls=':', label=f'the generator sampling {n} candidates: {fmt_num(gen)}')
    lin = 10 ** np.floor(np.log10(min(xs))) / 10  # 0 is a real position: linear below lin, log above
    top = 3 * max(xs + [gen or 0])
    ax.set_xscale('symlog', linthresh=lin, linscale=0.6)
    ax.set_xticks([0] + [10 ** k for k in range(int(np.log10(lin)) + 1, int(np.log10(top)) + 1)])
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set(xlim=(-lin, top), ylabel=f'best-of-{n} accuracy (%), 95% interval',
           xlabel='FLOPs per problem the selector adds to sampling (free selectors: 0)'
           + ('' if gen else f"; the generator's cost unknown here (no config for {res['generator']!r})"),
           title=plot_title(res, 'Accuracy against cost'))
    ax.grid(alpha=0.25)
    return save_plot(fig, ax, f'{prefix}_acc_vs_flops.png')


def plot_auroc(res, prefix):
    """{prefix}_auroc.png (None without a scorer's AUROC): each scorer's within-problem AUROC with its 95% interval,
    the reference's band and chance."""
    import matplotlib.pyplot as plt
    rows = res['rows']
    ranked = [r for r in rows if r['type'] in ('cheap', 'deepconf', 'combo', 'verifier', 'prm')
              and r.get('auroc') is not None and not np.isnan(r['auroc'])]
    if not ranked:
        return None
    style = plot_rows(rows)[3]
    ranked.sort(key=lambda r: r['auroc'])
    ref = next((r for r in rows if r['type'] == 'free_best_val_auroc'), None)
    refs = set((ref or {}).get('tied') or [])
    fig, ax = plt.subplots(figsize=(7, 0.8 + 0.32 * len(ranked)))
    for i, r in enumerate(ranked):
        picked = r.get('scorer') in refs or refs & set(r.get('alike') or [])
        color = style[r['method']][0] if r['method'] in style else 'tab:blue' if picked else 'gray'
        ax.errorbar([r['auroc']], [i], xerr=None if not r.get('auroc_ci') else
                    [[r['auroc'] - r['auroc_ci'][0]], [r['auroc_ci'][1] - r['auroc']]], fmt='o', color=color,
                    capsize=3, ms=5)
        d = r.get('vs', {}).get('best_free_val', {})
        if r['method'] in style and 'auroc_ci' in d:
            ax.annotate(f"Δ vs the reference {fmt_ci(d['auroc'], d['auroc_ci'], False, diff=True).strip('*')}",
                        (r['auroc_ci'][1] if r.get('auroc_ci') else r['auroc'], i), xytext=(6, -3),
                        textcoords='offset points', fontsize=7, color=color)
    if ref and ref.get('auroc_ci'):  # the best free scorer on validation by AUROC
        ax.axvspan(*ref['auroc_ci'], color='tab:blue', alpha=0.10, lw=0, label="the reference's 95% interval")
    ax.axvline(0.5, color='k', ls=':', lw=0.8, label='chance (0.5)')
    tie = ', tied' if len(refs) > 1 else ''
    ax.set_yticks(range(len(ranked)), [r['method'] + (f' (the reference: best on val{tie})'
                                                      if r.get('scorer') in refs else '') for r in ranked],
                  fontsize=7)
    ax.set(xlabel='within-problem AUROC (a correct candidate outscores a wrong one), 95% interval',
           title=plot_title(res, 'Ranking'))
    ax.grid(alpha=0.25, axis='x')
    lo, hi = ax.get_xlim()
    ticks = [t for t in ax.get_xticks() if lo <= t <= min(hi, 1.0)]
    ax.set_xlim(lo, hi + 0.6 * (hi - lo))  # room for the Δ labels right of the top rows, inside the frame
    ax.set_xticks(ticks)  # none past 1, the AUROC's top
    # the legend inside: the low-AUROC rows at the bottom leave that corner free
    return save_plot(fig, ax, f'{prefix}_auroc.png', inside='lower right')
