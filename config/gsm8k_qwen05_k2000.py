# The K = 2,000 table of config/gsm8k_qwen05_volume.py (its arms, references, choice rule and headline are fixed
# there): every arm trained on four 500-problem extractions pooled, each cut 80/20 by val_seed (1,600 training + 400
# validation problems x 8 samples): GSM8K test 0-499 (config/gsm8k_qwen05.py), train.jsonl 0-499
# (config/gsm8k_qwen05_train2.py), train.jsonl 500-999 and 1,000-1,499 (the volume's vol1, vol2). Scored on the cell's
# 819 evaluation problems (test 500-1318), beside the K = 1,000 arms trained again here from the same settings, so that
# K = 2,000 - K = 1,000 is paired over the same problems and seeds. The free side (the references, vote temperatures,
# the combo's fit) reads the same pooled cut. Answer agreement is among the free scorers. Committed before any of its
# candidates was sampled.
#   mkdir -p out/gsm8k_qwen05_k2000 && ln -sfn $PWD/out/gsm8k_qwen05/train out/gsm8k_qwen05_k2000/train \
#     && ln -sfn $PWD/out/gsm8k_qwen05/eval out/gsm8k_qwen05_k2000/eval
#   python -m studies.curve config/gsm8k_qwen05.py config/gsm8k_qwen05_k2000.py --threads=1
# Its two more validation draws (val_seed 43, 44: the K cuts, the validation problems and the free side's choices
# drawn again; the candidates shared):
#   for v in 43 44; do o=out/gsm8k_qwen05_k2000_v$v; mkdir -p $o && ln -sfn $PWD/out/gsm8k_qwen05/train $o/train \
#     && ln -sfn $PWD/out/gsm8k_qwen05/eval $o/eval && python -m studies.curve config/gsm8k_qwen05.py \
#     config/gsm8k_qwen05_k2000.py --out_dir=$o --val_seed=$v --threads=1 || break; done
# The state variant reported is the one with the best validation Bo8 at K = 2,000 (its kept step's, mean over seeds;
# ties: validation AUROC, then the order hsrm_mean, hsrm_l12, hsrm_l12_mean), in each draw.
out_dir = 'out/gsm8k_qwen05_k2000'
sizes = [500]  # K of each train dir: 4 x 500 pooled
_k1000 = ['out/gsm8k_qwen05/train', 'out/gsm8k_qwen05_train2/train']
_k2000 = _k1000 + ['out/gsm8k_qwen05_vol1/train', 'out/gsm8k_qwen05_vol2/train']
free_dirs = _k2000
answer_agreement = True
variants = {'hsrm_k1000': {'verifier_layers': [-1], 'train_dirs': _k1000},
            'hsrm_k2000': {'verifier_layers': [-1], 'train_dirs': _k2000},
            'hsrm_mean_k2000': {'verifier_layers': [-1], 'step_read': 'mean', 'train_dirs': _k2000},
            'hsrm_l12_k2000': {'verifier_layers': [12], 'train_dirs': _k2000},
            'hsrm_l12_mean_k2000': {'verifier_layers': [12], 'step_read': 'mean', 'train_dirs': _k2000},
            'stepfeat_only_k2000': {'verifier_layers': [], 'step_features': True, 'train_dirs': _k2000}}
pairs = [('hsrm_k2000', 'hsrm_k1000'), ('hsrm_k2000', 'stepfeat_only_k2000'), ('hsrm_mean_k2000', 'hsrm_k2000'),
         ('hsrm_l12_k2000', 'hsrm_k2000'), ('hsrm_l12_mean_k2000', 'hsrm_k2000')]
