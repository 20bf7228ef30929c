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
- an unknown key is an error naming the key and the closest known keys;
- a config file may set keys of any stage (one file serves extract, label, train, evaluate and
  baselines), but a name no stage knows is an error too. Keys of another stage are ignored here.
"""
import ast
import difflib
import functools
import os
import sys

STAGES = ('extract', 'label', 'train', 'evaluate', 'baselines', 'steer', 'transfer', 'curve', 'sample')


def knob_names(path):
    """The knobs of a stage file: top-level lowercase `name = ...` assignments before its first def/class."""
    with open(path) as f:
        tree = ast.parse(f.read())
    names = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            break
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            name = node.targets[0].id
            if not name.startswith('_') and name.islower():
                names.append(name)
    return names


def stage_defaults(stage):
    """{knob: default} of another stage, read from its file (the knobs whose value is a Python literal) without importing it:
    a stage that runs part of another (steer.py --prune reads a run as evaluate.py) takes that stage's knobs, never
    the stage itself."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), stage + '.py')
    with open(path) as f:
        tree = ast.parse(f.read())
    names, out = set(knob_names(path)), {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            break
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and getattr(node.targets[0], 'id', None) in names:
            try:
                out[node.targets[0].id] = ast.literal_eval(node.value)
            except ValueError:  # a default naming a constant (extract.py's system_prompt = MATH_SYSTEM): left out
                pass
    return out


def knobs(g):
    """{name: default} of the stage whose module globals are g (call it right after the knobs)."""
    return {k: g[k] for k in knob_names(g['__file__']) if k in g}


@functools.lru_cache(maxsize=1)  # the stage files parsed once per process
def _all_stage_keys():
    here = os.path.dirname(os.path.abspath(__file__))
    return {k for s in STAGES for k in knob_names(os.path.join(here, s + '.py'))}


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


def _owner(key, source):
    """A command-line key that is another stage's knob (sample.py --lr): name the stage that owns it and what to do."""
    here = os.path.dirname(os.path.abspath(__file__))
    owners = [s for s in STAGES if key in knob_names(os.path.join(here, s + '.py'))]
    if owners:
        me = os.path.basename(sys.argv[0]) if sys.argv[0].endswith('.py') else 'this stage'
        raise SystemExit(f"config error ({source}): --{key} is not a knob of {me}, it is {' and '.join(o + '.py' for o in owners)}'s; "
                         f"fix: set it there (python {owners[0]}.py <config> --{key}=...), then run {me} on what it writes"
                         + (" (--ckpt=<the new run's ckpt.pt>)" if me == 'sample.py' and 'train' in owners else ''))


def apply_config(g, argv, defaults=None):
    """Apply config files, then --key=value overrides, in argv to the dict g; returns the config dict.
    defaults: {key: default} of the knobs g holds (None: read from the stage file g['__file__'])."""
    mine = dict(defaults) if defaults is not None else knobs(g)
    files = [a for a in argv if not a.startswith('--')]
    flags = [a for a in argv if a.startswith('--')]
    everyone = _all_stage_keys() | set(mine) if files else set(mine)
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
            elif k not in everyone:
                _unknown(k, everyone, arg)
    for arg in flags:
        if '=' not in arg:
            raise SystemExit(f"config error: '{arg}' must look like --key=value")
        key, val = arg[2:].split('=', 1)
        if key not in mine:
            _owner(key, 'command line')
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


def configure(g, argv=None):
    """The stage's config: its knobs in g overridden by sys.argv (config files and --key=value)."""
    return apply_config(g, sys.argv[1:] if argv is None else argv)
