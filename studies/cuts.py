"""
One table in its validation cuts, side by side: studies.curve reports of one config run with other --val_seed (the
training/validation cut, the validation problems and every choice made on them drawn again; the candidates and the
evaluation split shared). A row per headline item, in the order config/gsm8k_qwen05_volume.py fixes, a column per cut,
and a last column counting the cuts whose interval lies beyond 0 on each side. The state variant 'chosen' is picked in
each cut by the volume config's rule: the best validation Bo8 (its kept step's, mean over seeds) among chosen_among,
ties by validation AUROC, then their order.

    python -m studies.cuts                       # the K = 2,000 table's cuts 42, 43, 44 (their reports must exist)
    python -m studies.cuts --reports="['out/a/curve.json', 'out/a_v43/curve.json']" --out=out/cuts

Writes {out}.md.
"""
import os

from configurator import configure, knobs
from machine import cli
from studies.curve import read_report
from tables import beyond, fmt_ci

# -----------------------------------------------------------------------------
# knobs (options in the comments); config files and --key=value override them
reports = ['out/gsm8k_qwen05_k2000/curve.json', 'out/gsm8k_qwen05_k2000_v43/curve.json',  # one config's cuts
           'out/gsm8k_qwen05_k2000_v44/curve.json']
hsrm = 'hsrm_k2000'  # the paper's read (final layer, boundary state)
chosen_among = ['hsrm_mean_k2000', 'hsrm_l12_k2000', 'hsrm_l12_mean_k2000']  # the state variants validation picks from
base: str | None = 'stepfeat_only_k2000'  # hsrm - base (what the states add); None: no such row
previous: str | None = 'hsrm_k1000'  # hsrm - the previous K's (still rising?); None: no such row
more_pairs = []  # [(a, b)] more pairs of the reports, a Bo8 and an AUROC row each, numbered 5 (the 16-sample table's
                 # problems against samples: [('hsrm_k2000', 'hsrm_x16')]); [] none
out = 'assets/cuts_gsm8k_qwen05_k2000'  # writes {out}.md
DEFAULTS = knobs(globals())  # the knobs above as a dict

# -----------------------------------------------------------------------------
SAME = ('val_seed', 'out_dir')  # what may differ between the cuts of one table


def load_cuts(paths):
    """[(val_seed, report)] of one config's cuts at one K: the reports must agree on every config key but SAME, on
    their one size and on their evaluation split."""
    cuts = [read_report(p, 'reports') for p in paths]
    first = cuts[0]['config']
    for p, r in zip(paths[1:], cuts[1:]):
        diff = sorted(k for k in set(first) | set(r['config']) if k not in SAME and first.get(k) != r['config'].get(k))
        if diff:
            raise ValueError(f"reports={paths}: {p} differs from {paths[0]} in {diff}; fix: cuts of one config, "
                             f"differing only in {', '.join(SAME)}")
    for p, r in zip(paths, cuts):
        if len(r['sizes']) != 1:
            raise ValueError(f"reports: {p} holds {len(r['sizes'])} sizes; fix: reports of one K (a table's config)")
    evals = {os.path.realpath(os.path.join(r['config']['out_dir'], 'eval')) for r in cuts}
    if len(evals) > 1:
        raise ValueError(f"reports={paths} score different evaluation splits ({sorted(evals)}); fix: cuts whose eval "
                         "dirs are one split (the configs' commands link it)")
    return [(r['config']['val_seed'], r) for r in cuts]


def choose(rows, among):
    """The volume config's rule: best validation Bo8, then validation AUROC, then the order of `among`."""
    return max(among, key=lambda v: (rows[v]['val']['acc'], rows[v]['val'].get('auroc', 0), -among.index(v)))


def cells(report, cfg):
    """{item: (text, sign)} for one cut: a difference's sign is +1 / -1 where its interval excludes 0, else 0; None
    where the item is no difference."""
    s = report['sizes'][0]
    rows = {r['method']: r for r in s['rows']}
    kind = {r['type']: r for r in s['rows']}
    for v in [cfg['hsrm']] + cfg['chosen_among'] + [x for x in (cfg['base'], cfg['previous']) if x]:
        if v not in rows:
            raise ValueError(f"{v!r} is not a row of {report['config']['out_dir']}'s report (it has "
                             f"{sorted(r for r in rows if rows[r]['type'] == 'verifier')}); fix: its variants")
    pairs = {(p['a'], p['b']): p for p in report.get('pairs', [])}

    def vs(r, ref, key='acc'):  # the sign is bold's (tables.beyond), so the tally counts what the table bolds
        d = r.get('vs', {}).get(ref, {})
        return (fmt_ci(d.get(key), d.get(key + '_ci'), key == 'acc', True, r.get('units')),
                beyond(d.get(key + '_ci'), r.get('units')))

    def pair(a, b, key):
        p = pairs.get((a, b))
        if p is None:
            raise ValueError(f"the report has no pair ({a!r}, {b!r}); fix: a config whose pairs name it")
        return fmt_ci(p[key], p[key + '_ci'], key == 'acc', True), beyond(p[key + '_ci'])

    h, hv = rows[cfg['hsrm']], rows[f"{cfg['hsrm']} + weighted vote"]
    c = choose(rows, cfg['chosen_among'])
    cr, cv = rows[c], rows[f'{c} + weighted vote']
    a, a_auroc, paper = kind['free_best_val'], kind['free_best_val_auroc'], kind['free_best_val_single']
    name = lambda r: r['method'].split(': ', 1)[-1]  # noqa: E731  ('Best free selector on validation: <name>')
    out = {
        'training + validation problems': (f"{s['n_train']:,} + {s['n_val']:,}", None),
        # a variant may train on other dirs than the free side's (the 16-sample table: 800 problems x 16)
        "HSRM's own training problems": (f"{h.get('n_train', s['n_train']):,}", None),
        '(a) best free selector on validation: Bo8': (f"{name(a)}: {100 * a['acc']:.1f}", None),
        '(b) majority vote: Bo8': (f"{100 * kind['vote']['acc']:.1f}", None),
        "(c) the paper's reference (best single free scorer, no vote): Bo8": (
            f"{name(paper)}: {100 * paper['acc']:.1f}", None),
        'best free scorer on validation by AUROC: AUROC': (f"{name(a_auroc)}: {a_auroc['auroc']:.3f}", None),
        '1. HSRM + weighted vote - (a)': vs(hv, 'best_free_val'),
        '1. HSRM - (a)': vs(h, 'best_free_val'),
        '1. HSRM AUROC - the best free scorer by AUROC': vs(h, 'best_free_val', 'auroc'),
        '2. HSRM + weighted vote - (b)': vs(hv, 'majority'),
        "3. HSRM - (c)": vs(h, 'paper'),
    }
    shown = [(4, 'HSRM', cfg['hsrm'], cfg['previous'])] + [(5, x, x, y) for x, y in cfg['more_pairs']] + \
        [(6, 'HSRM', cfg['hsrm'], cfg['base'])]
    for i, label, x, y in shown:
        if y:
            out[f"{i}. {label} - {y}: Bo8"] = pair(x, y, 'acc')
            out[f"{i}. {label} - {y}: AUROC"] = pair(x, y, 'auroc')
    out.update({
        '7. chosen on validation (validation Bo8 / reference\'s)': (
            f"{c} ({100 * cr['val']['acc']:.1f} / {100 * a['val']['acc']:.1f})", None),
        '7. chosen - (a)': vs(cr, 'best_free_val'),
        '7. chosen + weighted vote - (a)': vs(cv, 'best_free_val'),
        '7. chosen + weighted vote - (b)': vs(cv, 'majority'),
        '7. chosen AUROC - the best free scorer by AUROC': vs(cr, 'best_free_val', 'auroc'),
    })
    return out


def render(cuts, cfg):
    cols = [cells(r, cfg) for _, r in cuts]
    head = '| Item | ' + ' | '.join(f'cut {v}' for v, _ in cuts) + ' | cuts beyond 0 (+ / -) |'
    lines = [head, '|---|' + '---:|' * (len(cuts) + 1)]
    for item in cols[0]:
        signs = [c[item][1] for c in cols]
        tally = '' if None in signs else f"{signs.count(1)} / {signs.count(-1)}"
        lines.append(f'| {item} | ' + ' | '.join(c[item][0] for c in cols) + f' | {tally} |')
    return '\n'.join(lines) + '\n'


def run(cfg):
    cfg = {**DEFAULTS, **cfg}
    cuts = load_cuts(cfg['reports'])
    md = (f"Cuts of one table ({', '.join(cfg['reports'])}); paired 95% intervals over the evaluation problems and "
          "seeds within each cut, **bold** where the interval excludes 0; the numbers of the headline as "
          "config/gsm8k_qwen05_volume.py orders it.\n\n" + render(cuts, cfg))
    os.makedirs(os.path.dirname(cfg['out']) or '.', exist_ok=True)
    with open(cfg['out'] + '.md', 'w') as f:
        f.write(md)
    print(md)
    return cuts


if __name__ == '__main__':
    cli(run, configure(globals()), 'cuts.py')  # config files, then --key=value, override the knobs above
