"""
Config overrides, nanoGPT style. Exec'd by each stage after its config globals:

    python train.py config/gsm8k_1p7b.py --seed=123 --out_dir=out/x

A positional argument is a config file (plain Python assignments); `--key=value` overrides one
global, value parsed with ast.literal_eval (falling back to the raw string). Compared to nanoGPT:
- values may contain '=' (`--prompt_suffix=a=b`): only the first '=' splits;
- an int is accepted where the default is a float; a None default takes any type;
- bool defaults accept True/False/true/false/1/0;
- an unknown key is an error naming the key and the closest known keys;
- a config file may set keys of any stage (one file serves extract, label, train, evaluate and
  baselines), but a name no stage knows is an error too. Keys that belong to another stage are
  ignored here.
"""
import ast
import difflib
import os
import sys


def _stage_keys(path):
    # top-level `name = literal` assignments before the configurator exec in a stage file
    keys = {}
    try:
        tree = ast.parse(open(path).read())
    except (OSError, SyntaxError):
        return keys
    body = tree.body
    for node in tree.body:  # configs may sit under `if __name__ == '__main__':`
        if isinstance(node, ast.If) and 'main' in ast.unparse(node.test):
            body = body + node.body
    for node in body:
        if isinstance(node, ast.Expr) and 'configurator' in ast.unparse(node):
            break
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            name = node.targets[0].id
            if not name.startswith('_') and name.islower():
                try:
                    keys[name] = ast.literal_eval(node.value)
                except ValueError:  # an expression default (e.g. a path): known, its type read at run time
                    keys[name] = None
    return keys


def _all_stage_keys():
    here = os.path.dirname(os.path.abspath(__file__))
    keys = {}
    for stage in ('extract', 'label', 'train', 'evaluate', 'baselines', 'bench'):
        for k, v in _stage_keys(os.path.join(here, stage + '.py')).items():
            keys.setdefault(k, v)
    return keys


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


def apply_config(g, argv):
    """Apply config files and --key=value overrides in argv to the dict of globals g."""
    # this stage's keys: the config globals its file assigns before exec'ing this file
    keys = _stage_keys(g['__file__']) if '__file__' in g else {}
    mine = {k: g[k] for k in keys if k in g}
    everyone = None  # lazily computed union of all stages' keys
    for arg in argv:
        if not arg.startswith('--'):
            if not os.path.isfile(arg):
                raise SystemExit(f"config error: config file '{arg}' not found; fix: pass a path like config/demo.py")
            ns = {}
            exec(open(arg).read(), {}, ns)
            everyone = everyone if everyone is not None else _all_stage_keys()
            for k, v in ns.items():
                if k.startswith('_') or callable(v) or type(v).__name__ == 'module':
                    continue
                if k in mine:
                    g[k] = _check_type(k, v, mine[k], arg)
                elif k not in everyone:
                    _unknown(k, set(everyone) | set(mine), arg)
        else:
            if '=' not in arg:
                raise SystemExit(f"config error: '{arg}' must look like --key=value")
            key, val = arg[2:].split('=', 1)
            if key not in mine:
                _unknown(key, mine, 'command line')
            try:
                value = ast.literal_eval(val)
            except (SyntaxError, ValueError):
                value = val  # a bare string such as --model=Qwen/Qwen3-1.7B
            g[key] = _check_type(key, value, mine[key], 'command line')
    return {k: g[k] for k in mine}


config = apply_config(globals(), sys.argv[1:])
