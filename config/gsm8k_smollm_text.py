# Overrides for the GSM8K text-verifier baseline on CPU: one seed, accuracy early stopping (almost
# no validation problem has both labels with this weak generator).
seeds = [42]
early_stop_metric = 'acc'
text_sizes = ['small']
threads = 1
