# GSM8K-style word-problem families generated in tasks.py (WORD_FAMILIES: shop, travel, bake, share), each one cell
# out/words_<family>/{train,eval} for the transfer experiment (config/transfer_words.py) and for search (shop):
#   for f in shop travel bake share; do python extract.py config/words.py --word_family=$f --out_dir=out/words_$f; done
#   (shop with --n_eval_samples=32: the best-of-N pool the search runs are compared with, N = 1..32)
#   for f in shop travel bake share; do python label.py config/words.py --out_dir=out/words_$f; done
# SmolLM2-135M-Instruct, the worked example of the family shown first; 12 problems x 8 samples solved:
# shop 16%, travel 21%, bake 29%, share 6% of samples (2026-11-24, before the families became one question per
# arithmetic: stale until re-measured).
out_dir = 'out/words_shop'
model = 'smollm2'
dataset = 'words'
word_family = 'shop'
train_range = (0, 63)
eval_range = (1000, 1047)
n_train_samples = 8
n_eval_samples = 8
max_new_tokens = 128
temperature = 0.8
top_p = 0.95
batch_size = 64
# the in-domain verifiers (config/search_shop.py steers with shop's): python train.py config/words.py --out_dir=out/words_<f>
max_iters = 300
eval_interval = 25
seeds = [42, 123, 456]
text_sizes = []
