# Where a step is read (issue 44), on the shop word family, stacked on config/curve_shop.py (its data, sampling and
# training): each step stored three ways (extract.py step_kinds), the boundary state (the paper's), the mean of the
# step's token states and the state at its least likely token. Its ranges cut to what 2 cores without bf16 extract in
# about an hour (46 tokens/s per process): train 0-479 x 8, eval 1250-1499 x 8. At K = 480 (384 training problems
# after the 80/20 grouped cut) each read alone, each with the step features, and the features-only control, against
# the best free selector on validation; paired intervals between variants on the same candidates.
#   python extract.py config/curve_shop.py config/reads_shop.py
#   python label.py config/curve_shop.py config/reads_shop.py
#   python -m studies.curve config/curve_shop.py config/reads_shop.py --threads=1
# two more validation draws on the same extraction (val_seed draws the validation cut), run 2026-11-26:
#   for v in 43 44; do mkdir -p out/reads_shop_v$v && ln -sfn $PWD/out/reads_shop/train out/reads_shop_v$v/train \
#     && ln -sfn $PWD/out/reads_shop/eval out/reads_shop_v$v/eval && python -m studies.curve config/curve_shop.py \
#     config/reads_shop.py --out_dir=out/reads_shop_v$v --val_seed=$v --threads=1; done
# (run 2026-11-26 from a standalone copy of these settings; the resolved configs are the same)
out_dir = 'out/reads_shop'
dataset = 'words'  # as config/curve_shop.py: named here too, so this file read alone is a words config
train_range = (0, 479)
eval_range = (1250, 1499)
layers = [-1]
step_kinds = ['boundary', 'mean', 'least']
sizes = [480]
variants = {'hsrm': {}, 'hsrm_mean': {'step_read': 'mean'}, 'hsrm_least': {'step_read': 'least'},
            'hsrm_stepfeat': {'step_features': True}, 'mean_stepfeat': {'step_read': 'mean', 'step_features': True},
            'least_stepfeat': {'step_read': 'least', 'step_features': True},
            'stepfeat_only': {'verifier_layers': [], 'step_features': True}}  # the control: the features, no states
pairs = [('hsrm_mean', 'hsrm'), ('hsrm_least', 'hsrm'), ('mean_stepfeat', 'hsrm_stepfeat'),
         ('least_stepfeat', 'hsrm_stepfeat'), ('hsrm_stepfeat', 'stepfeat_only')]
