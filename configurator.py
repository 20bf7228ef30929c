"""
Config overrides, nanoGPT style, without exec. Every stage file starts with its knobs (plain
`name = default` assignments, lowercase, before the first def) and ends with

    if __name__ == '__main__':
        config = configure(globals())   # config files, then --key=value, override the knobs above

    python train.py config/gsm8k_1p7b.py --seed=123 --out_dir=out/x

A positional argument is a config file (plain Python assignments); several stack left to right, and
`--key=value` overrides come last whatever their position. Values are parsed with ast.literal_eval
(falling back to the raw string). Compared to nanoGPT:
- values may contain '=' (`--prompt_suffix=a=b`): only the first '=' splits;
- an int is accepted where the default is a float; a None default takes any type;
- bool defaults accept True/False/true/false/1/0;
- an unknown --key is an error naming the key and the closest known keys;
- a config file may set keys of any stage (one file serves extract, label, train, evaluate and
  baselines): keys of another stage are ignored here, left to the stage that owns them. A stage sees
  only the stages it imports (earlier ones), so a name no stage knows is caught where the keys are
  given (`known`) and, for every committed config, by test_all.
"""
import ast
import difflib
import functools
import os
import sys
import types

import torch


def knobs(g):
    """{name: default} of the stage whose module globals are g, called right after its knobs: every public lowercase
    name bound so far that is not a module, function or class (the imports above the knobs bind only those)."""
    return {k: v for k, v in g.items() if not k.startswith('_') and k.islower() and not callable(v)
            and not isinstance(v, types.ModuleType)}


def _check_type(key, value, default, source):
    if default is None or value is None:
        return value
    if isinstance(default, bool):
        if isinstance(value, str) and value.lower() in ('true', 'false', '1', '0'):
            return value.lower() in ('true', '1')
        if isinstance(value, int) and value in (0, 1) and not isinstance(value, bool):
            return bool(value)
        if not isinstance(value, bool):
            raise SystemExit(f"config error ({source}): {key}={value!r} must be True or False")
        return value
    if isinstance(default, float) and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if isinstance(default, (list, tuple)) and isinstance(value, (list, tuple)):
        return type(default)(value)
    if type(value) is not type(default):
        raise SystemExit(f"config error ({source}): {key}={value!r} is a {type(value).__name__}, "
                         f"but {key} takes a {type(default).__name__} (default {default!r}); "
                         f"fix: --{key}=<{type(default).__name__}>")
    return value


def _unknown(key, known, source):
    close = difflib.get_close_matches(key, sorted(known), n=3, cutoff=0.5)
    hint = f"; did you mean {', '.join(close)}?" if close else f"; known keys: {', '.join(sorted(known))}"
    raise SystemExit(f"config error ({source}): unknown key '{key}'{hint}")


def check_keys(d, defaults, source):
    """A dict knob that holds another stage's knobs (curve.py / transfer.py's variants and train_overrides: train.py's)
    checked as top-level keys are: an unknown key names the closest known ones, a value of the wrong type its type."""
    if not isinstance(d, dict):
        raise SystemExit(f"config error ({source}): {d!r} must be a dict of knobs; fix: e.g. {{'verifier_layers': [-1]}}")
    for k, v in d.items():
        if k not in defaults:
            _unknown(k, defaults, source)
        _check_type(k, v, defaults[k], source)


def check_positive(cfg, defaults, keys):
    """ValueError naming the key and the fix where a count or size that must be a positive int is not (0 rows per batch
    or samples per problem divide by zero, or loop doing nothing); None passes where it is the knob's 'unset'."""
    for k in keys:
        v = cfg.get(k)
        if not (v is None and defaults.get(k) is None or isinstance(v, int) and not isinstance(v, bool) and v >= 1):
            raise ValueError(f"{k}={v!r} must be a positive int; fix: --{k}={defaults.get(k) or 1}")


def _owner(key, owners, source):
    """A command-line key that is another stage's knob (sample.py --lr): name the stage that owns it and what to do.
    owners: {'train.py': its knobs, ...} of the earlier stages the running one imports (it cannot see later ones)."""
    owners = [s for s, ks in (owners or {}).items() if key in ks]
    if owners:
        me = os.path.basename(sys.argv[0]) if sys.argv[0].endswith('.py') else 'this stage'
        raise SystemExit(f"config error ({source}): --{key} is not a knob of {me}, it is {' and '.join(owners)}'s; "
                         f"fix: set it there (python {owners[0]} <config> --{key}=...), then run {me} on what it writes"
                         + (" (--ckpt=<the new run's ckpt.pt>)" if me == 'sample.py' and 'train.py' in owners else ''))


def apply_config(g, argv, defaults=None, known=None, owners=None):
    """Apply config files, then --key=value overrides, in argv to the dict g; returns the config dict.
    defaults: {key: default} of the knobs g holds (None: knobs(g)). known: every key a config file may set (the knobs
    of the stages it serves), a key outside it an error; None: a config file's keys that are not this stage's are left
    to the stages that own them (an earlier stage cannot import the later ones to learn theirs; test_all checks every
    committed config's keys against every stage). owners: _owner's, to name the stage a command-line key belongs to."""
    mine = dict(defaults) if defaults is not None else knobs(g)
    files = [a for a in argv if not a.startswith('--')]
    flags = [a for a in argv if a.startswith('--')]
    everyone = set(known) | set(mine) if known is not None else None
    for arg in files:
        if not os.path.isfile(arg):
            raise SystemExit(f"config error: config file '{arg}' not found; fix: pass a path like config/demo.py")
        ns = {}
        with open(arg) as f:
            exec(f.read(), {}, ns)  # a config file is plain Python assignments
        for k, v in ns.items():
            if k.startswith('_') or callable(v) or type(v).__name__ == 'module':
                continue
            if k in mine:
                g[k] = _check_type(k, v, mine[k], arg)
            elif everyone is not None and k not in everyone:
                _unknown(k, everyone, arg)
    for arg in flags:
        if '=' not in arg:
            raise SystemExit(f"config error: '{arg}' must look like --key=value")
        key, val = arg[2:].split('=', 1)
        if key not in mine:
            _owner(key, owners, 'command line')
            _unknown(key, mine, 'command line')
        try:
            value = ast.literal_eval(val)
        except (SyntaxError, ValueError):
            value = val  # a bare string such as --model=Qwen/Qwen3-1.7B
        g[key] = _check_type(key, value, mine[key], 'command line')
    return {k: g[k] for k in mine}


def split_argv(argv, own, other):
    """(argv for the stage whose defaults are `own`, the config of another stage whose defaults are `other`), for a
    stage that also runs part of another (baselines.py trains as train.py; steer.py --prune reads a run as
    evaluate.py): the other's defaults updated by the same config files and by the --key=value flags of its keys;
    a flag that only the other stage knows is left out of our argv."""
    key = lambda a: a[2:].split('=', 1)[0] if a.startswith('--') else None  # noqa: E731
    files = [a for a in argv if key(a) is None]
    theirs = [a for a in argv if key(a) in other]
    ours = [a for a in argv if key(a) not in set(other) - set(own)]
    return ours, apply_config(dict(other), files + theirs, other)


def configure(g, argv=None, known=None, owners=None):
    """The stage's config: its knobs in g overridden by sys.argv (config files and --key=value); known, owners:
    apply_config's."""
    return apply_config(g, sys.argv[1:] if argv is None else argv, known=known, owners=owners)


# -----------------------------------------------------------------------------
# what a stage runs besides its config: the device a knob names, a model a knob names, bad input as one line, and
# one CPU thread where results must not depend on the thread count


def resolve_device(device, env=None, cuda=None):
    """'auto' -> 'cuda' when a GPU is visible, else 'cpu'; an explicit 'cuda' without one is an error. Under torchrun
    (LOCAL_RANK in the environment) 'cuda' is this rank's own GPU, cuda:LOCAL_RANK, not every rank's cuda:0.
    env, cuda: the environment and whether CUDA is available (default: this process's)."""
    env, cuda = os.environ if env is None else env, torch.cuda.is_available() if cuda is None else cuda
    if device == 'auto':
        device = 'cuda' if cuda else 'cpu'
    if device.startswith('cuda') and not cuda:
        raise SystemExit(f"device={device!r} but CUDA is not available; fix: --device=cpu (or 'auto')")
    return f"cuda:{int(env['LOCAL_RANK'])}" if device == 'cuda' and 'LOCAL_RANK' in env else device


def from_pretrained(cls, key, name, **kw):
    """cls.from_pretrained(name, **kw) (a transformers Auto class) for the knob `key`. A model that cannot be
    loaded (a mistyped id or folder, a hub id with no network and not in the cache, a folder without
    the model's files) is one line naming it and the fix, not transformers' traceback."""
    try:
        return cls.from_pretrained(name, **kw)
    except (OSError, ValueError) as e:
        if isinstance(e, ValueError) and not os.path.isdir(name):  # a ValueError elsewhere is no loading problem
            raise
        where = (f'the folder {name} does not hold a loadable model' if os.path.isdir(name) else
                 f'no folder {name} here, and neither the Hugging Face cache nor the hub (network) gave it')
        raise SystemExit(f"{key}={name!r} cannot be loaded: {where} ({str(e).splitlines()[0][:150]}); fix: a local "
                         f"folder with its config.json, weights and tokenizer, or a hub id (spelled right) already in the "
                         f"Hugging Face cache (HF_HOME) with HF_HUB_OFFLINE=1 set, so that no network is tried") from None


def cli(run, config, name):
    """Run a stage's CLI. Bad input (a ValueError / FileNotFoundError whose message says 'fix:') exits
    with that one line instead of a traceback; anything else is a bug and keeps its traceback."""
    try:
        return run(config)
    except (ValueError, FileNotFoundError) as e:
        if 'fix:' not in str(e):
            raise
        raise SystemExit(f'{name}: {e}') from None


def one_thread(fn):
    """fn on one CPU thread (torch's count restored after). With several, matmuls and reductions split by the thread
    count and round differently, and training keeps another step (1 vs 2 threads on one extraction: step 125 vs 50);
    on one, the same config and extraction give the same checkpoint and scores on any core count."""
    @functools.wraps(fn)
    def on_one(*args, **kwargs):
        n = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            return fn(*args, **kwargs)
        finally:
            torch.set_num_threads(n)
    return on_one
