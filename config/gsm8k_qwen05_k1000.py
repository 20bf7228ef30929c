# The K = 1,000 table that config/gsm8k_qwen05.py's rule asks for (HSRM's AUROC rose from K = 250 to 500 beyond its
# interval): the table's verifier arms trained on the two training extractions pooled, 500 problems of each (GSM8K
# test 0-499, the cell's own; GSM8K train.jsonl 0-499, config/gsm8k_qwen05_train2.py), each cut 80/20 by val_seed 42
# as at K = 500: 800 training + 200 validation problems x 8 samples. Scored on the same 819 evaluation problems (test
# 500-1318) beside the same arms at K = 500, trained again here from the same settings, so that every pair is paired
# over the same evaluation problems and seeds. The free side's choices (the reference, vote temperatures, the combo's
# fit) read the same pooled cut (free_dirs): its validation is the verifiers' 200 problems, not the cell's 100, so
# the K = 500 arms here meet a reference that may differ from the K = 500 table's. The text verifier is left out (its
# 3 runs cost an hour at K = 500). The chosen variant is the one validation chose at K = 500 (hsrm_l12_mean); it is
# not chosen again. Stacks on config/gsm8k_qwen05.py (epochs 20, validation every 25 steps, seeds 42 / 123 / 456).
# Committed before any of its runs, and before the extension's extraction finished; reported beside the K = 500
# table, never instead of it.
#   python extract.py config/gsm8k_qwen05.py config/gsm8k_qwen05_train2.py && \
#     python label.py config/gsm8k_qwen05.py config/gsm8k_qwen05_train2.py      # the second extraction, labelled
#   mkdir -p out/gsm8k_qwen05_k1000 && ln -sfn $PWD/out/gsm8k_qwen05/train out/gsm8k_qwen05_k1000/train \
#     && ln -sfn $PWD/out/gsm8k_qwen05/eval out/gsm8k_qwen05_k1000/eval
#   python -m studies.curve config/gsm8k_qwen05.py config/gsm8k_qwen05_k1000.py --threads=1
# Headline, in this order (Bo8 and within-AUROC, paired 95% intervals over problems and seeds; 'beyond' where the
# interval excludes 0, else 'level'): hsrm_k1000 - the reference (the best free selector on the pooled validation);
# hsrm_k1000 - hsrm (does doubling K still help?); hsrm_k1000 - stepfeat_only_k1000; hsrm_l12_mean_k1000 - the
# reference.
out_dir = 'out/gsm8k_qwen05_k1000'
sizes = [500]  # K of each train dir: the pooled arms read 500 + 500
free_dirs = ['out/gsm8k_qwen05/train', 'out/gsm8k_qwen05_train2/train']
_pool = {'train_dirs': free_dirs}
variants = {'hsrm': {'verifier_layers': [-1]}, 'stepfeat_only': {'verifier_layers': [], 'step_features': True},
            'hsrm_l12_mean': {'verifier_layers': [12], 'step_read': 'mean'},
            'hsrm_k1000': {'verifier_layers': [-1], **_pool},
            'stepfeat_only_k1000': {'verifier_layers': [], 'step_features': True, **_pool},
            'hsrm_l12_mean_k1000': {'verifier_layers': [12], 'step_read': 'mean', **_pool}}
pairs = [('hsrm_k1000', 'hsrm'), ('hsrm_k1000', 'stepfeat_only_k1000'), ('stepfeat_only_k1000', 'stepfeat_only'),
         ('hsrm_l12_mean_k1000', 'hsrm_l12_mean')]
