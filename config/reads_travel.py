# Where a step is read (issue 44), confirmed on a second word family: travel (1,259 distinct questions, chosen before
# any of its results for having more than bake's 1,186), stacked on config/curve_shop.py (its sampling and training).
# Grouped by the numbers alone (extract.py word_split='numbers', as shop's recall split asked): no evaluation question
# shares its numbers with a training or validation one, in any arrangement. Indices 0-857 are the training part,
# 858-1258 the evaluation part. Every step stored three ways, as config/reads_shop.py; the variants are shop's reads,
# its validation's pick with step features, and the features-only control.
#   python extract.py config/curve_shop.py config/reads_travel.py --train_range=None   # the eval split first
#   python extract.py config/curve_shop.py config/reads_travel.py
#   python label.py config/curve_shop.py config/reads_travel.py
#   python -m studies.curve config/curve_shop.py config/reads_travel.py --threads=1
# two more validation draws on the same extraction (val_seed draws the validation cut):
#   for v in 43 44; do mkdir -p out/reads_travel_v$v && ln -sfn $PWD/out/reads_travel/train out/reads_travel_v$v/train \
#     && ln -sfn $PWD/out/reads_travel/eval out/reads_travel_v$v/eval && python -m studies.curve config/curve_shop.py \
#     config/reads_travel.py --out_dir=out/reads_travel_v$v --val_seed=$v --threads=1; done
out_dir = 'out/reads_travel'
dataset = 'words'  # as config/curve_shop.py: named here too, so this file read alone is a words config
word_family = 'travel'
word_split = 'numbers'
train_range = (0, 479)
eval_range = (858, 1107)
layers = [-1]
step_kinds = ['boundary', 'mean', 'least']
sizes = [480]
variants = {'hsrm': {}, 'hsrm_mean': {'step_read': 'mean'}, 'hsrm_least': {'step_read': 'least'},
            'hsrm_stepfeat': {'step_features': True}, 'mean_stepfeat': {'step_read': 'mean', 'step_features': True},
            'stepfeat_only': {'verifier_layers': [], 'step_features': True}}  # the control: the features, no states
pairs = [('hsrm_mean', 'hsrm'), ('hsrm_least', 'hsrm'), ('mean_stepfeat', 'hsrm_stepfeat'),
         ('mean_stepfeat', 'hsrm'), ('hsrm_stepfeat', 'stepfeat_only')]
