# Where a step is read (issue 44), on the shop word family, each step stored three ways (extract.py step_kinds): the
# boundary state (the paper's), the mean of the step's token states and the state at its least likely token. Train
# 0-479 x 8, eval 1250-1499 x 8 (config/curve_shop.py's ranges cut to what 2 cores without bf16 extract in about an
# hour: 46 tokens/s per process here). At K = 480 (384 training problems after the 80/20 grouped cut) each read alone,
# each with the step features, and the features-only control, against the best free selector on validation; paired
# intervals between variants on the same candidates.
#   python extract.py config/reads_shop.py && python label.py config/reads_shop.py
#   python curve.py config/reads_shop.py --threads=1
out_dir = 'out/reads_shop'
model = 'smollm2'
dataset = 'words'
word_family = 'shop'
train_range = (0, 479)
eval_range = (1250, 1499)
n_train_samples = 8
n_eval_samples = 8
max_new_tokens = 128
temperature = 0.8
top_p = 0.95
batch_size = 128
layers = [-1]
step_kinds = ['boundary', 'mean', 'least']
sizes = [480]
variants = {'hsrm': {}, 'hsrm_mean': {'step_read': 'mean'}, 'hsrm_least': {'step_read': 'least'},
            'hsrm_stepfeat': {'step_features': True}, 'mean_stepfeat': {'step_read': 'mean', 'step_features': True},
            'least_stepfeat': {'step_read': 'least', 'step_features': True},
            'stepfeat_only': {'verifier_layers': [], 'step_features': True}}  # the control: the features, no states
pairs = [('hsrm_mean', 'hsrm'), ('hsrm_least', 'hsrm'), ('mean_stepfeat', 'hsrm_stepfeat'),
         ('least_stepfeat', 'hsrm_stepfeat'), ('hsrm_stepfeat', 'stepfeat_only')]
seeds = [42, 123, 456]
train_overrides = {'epochs': 20, 'eval_interval': 25}
