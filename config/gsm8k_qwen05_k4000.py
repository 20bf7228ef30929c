# The K = 4,000 table of config/gsm8k_qwen05_volume.py (arms, references, choice rule and headline fixed there): every
# arm trained on eight 500-problem extractions pooled, each cut 80/20 by val_seed (3,200 training + 800 validation
# problems x 8 samples = the paper's 32,000 candidates): GSM8K test 0-499, train.jsonl 0-499 and 500-3,499 (vol1-vol6).
# Scored on the cell's 819 evaluation problems, beside the K = 2,000 HSRM trained again here from the same settings
# (headline 4: K = 4,000 - K = 2,000, paired). The free side reads the same pooled cut; answer agreement among its
# scorers. The text verifier (small, baselines.py's schedule) is here, at the largest K only. The paper's ablations,
# which cost training only: the loss (bce, listmle against the pairwise default) and the encoder body (pre-LN,
# norm_first=True, against the paper's post-LN). Committed before any of its candidates was sampled.
#   mkdir -p out/gsm8k_qwen05_k4000 && ln -sfn $PWD/out/gsm8k_qwen05/train out/gsm8k_qwen05_k4000/train \
#     && ln -sfn $PWD/out/gsm8k_qwen05/eval out/gsm8k_qwen05_k4000/eval
#   python -m studies.curve config/gsm8k_qwen05.py config/gsm8k_qwen05_k4000.py --threads=1
# N at evaluation (2 and 4 of the 8 candidates, 100 random subsets a problem; the same checkpoints, nothing retrained;
# vote temperatures chosen at that N), each into its own report:
#   for n in 2 4; do o=out/gsm8k_qwen05_k4000_n$n; mkdir -p $o && for x in train eval curve; do ln -sfn \
#     $PWD/out/gsm8k_qwen05_k4000/$x $o/$x; done && python -m studies.curve config/gsm8k_qwen05.py \
#     config/gsm8k_qwen05_k4000.py --out_dir=$o --n_eval=$n --threads=1 || break; done
# Its two more validation draws, every arm but the text verifier and the ablations (config/gsm8k_qwen05_k4000_draws.py):
#   for v in 43 44; do o=out/gsm8k_qwen05_k4000_v$v; mkdir -p $o && ln -sfn $PWD/out/gsm8k_qwen05/train $o/train \
#     && ln -sfn $PWD/out/gsm8k_qwen05/eval $o/eval && python -m studies.curve config/gsm8k_qwen05.py \
#     config/gsm8k_qwen05_k4000.py config/gsm8k_qwen05_k4000_draws.py --out_dir=$o --val_seed=$v --threads=1 \
#     || break; done
out_dir = 'out/gsm8k_qwen05_k4000'
sizes = [500]  # K of each train dir: 8 x 500 pooled
_k2000 = ['out/gsm8k_qwen05/train', 'out/gsm8k_qwen05_train2/train', 'out/gsm8k_qwen05_vol1/train',
          'out/gsm8k_qwen05_vol2/train']
_k4000 = _k2000 + [f'out/gsm8k_qwen05_vol{i}/train' for i in (3, 4, 5, 6)]
free_dirs = _k4000
answer_agreement = True
variants = {'hsrm_k2000': {'verifier_layers': [-1], 'train_dirs': _k2000},
            'hsrm_k4000': {'verifier_layers': [-1], 'train_dirs': _k4000},
            'hsrm_mean_k4000': {'verifier_layers': [-1], 'step_read': 'mean', 'train_dirs': _k4000},
            'hsrm_l12_k4000': {'verifier_layers': [12], 'train_dirs': _k4000},
            'hsrm_l12_mean_k4000': {'verifier_layers': [12], 'step_read': 'mean', 'train_dirs': _k4000},
            'stepfeat_only_k4000': {'verifier_layers': [], 'step_features': True, 'train_dirs': _k4000},
            'text_small_k4000': {'verifier': 'text', 'text_size': 'small', 'lr_schedule': 'cosine',
                                 'warmup_iters': 100, 'train_dirs': _k4000},
            'hsrm_bce_k4000': {'verifier_layers': [-1], 'loss': 'bce', 'train_dirs': _k4000},
            'hsrm_listmle_k4000': {'verifier_layers': [-1], 'loss': 'listmle', 'train_dirs': _k4000},
            'hsrm_preln_k4000': {'verifier_layers': [-1], 'norm_first': True, 'train_dirs': _k4000}}
pairs = [('hsrm_k4000', 'hsrm_k2000'), ('hsrm_k4000', 'stepfeat_only_k4000'), ('hsrm_k4000', 'text_small_k4000'),
         ('hsrm_mean_k4000', 'hsrm_k4000'), ('hsrm_l12_k4000', 'hsrm_k4000'), ('hsrm_l12_mean_k4000', 'hsrm_k4000'),
         ('hsrm_bce_k4000', 'hsrm_k4000'), ('hsrm_listmle_k4000', 'hsrm_k4000'), ('hsrm_preln_k4000', 'hsrm_k4000')]
