# GSM8K-style word-problem families generated in tasks.py (WORD_FAMILIES: shop, travel, bake, share), each one cell
# out/words_<family>/{train,eval} for the transfer experiment (config/transfer_words.py) and for search (shop):
#   python extract.py config/words.py --word_family=shop --out_dir=out/words_shop --train_range="(0, 639)" \
#       --eval_range="(1000, 1047)" --n_eval_samples=32
#   for f in travel bake share; do python extract.py config/words.py --word_family=$f --out_dir=out/words_$f; done
#   for f in shop travel bake share; do python label.py config/words.py --out_dir=out/words_$f; done
# Sized by the data-need curve (RESULTS.md: on synthetic level 2, HSRM passed the free scorers between 256 and 512
# training problems, measured before the grouped split):
# shop, whose verifiers also steer search (config/search_shop.py), has 640 (512 train + 128 validation) and a
# best-of-N pool of 32 for each of 48 eval problems (N = 1..32); the others 320 each and 144 eval problems x 8
# (SmolLM2 solves 4-8% of their samples: 48 would leave 8-14 problems with a correct candidate), so every
# leave-one-out fold trains on 960-1,280 problems of three families. Two cores extract 4-5 candidates/s here.
out_dir = 'out/words_shop'
model = 'smollm2'
dataset = 'words'
word_family = 'shop'
train_range = (0, 319)
eval_range = (1000, 1143)
n_train_samples = 8
n_eval_samples = 8
max_new_tokens = 128
temperature = 0.8
top_p = 0.95
batch_size = 128
# the in-domain verifiers (config/search_shop.py steers with shop's):
#   python train.py config/words.py --out_dir=out/words_<f>
epochs = 20                    # training steps scale with the data (train.py): the curve's setting
eval_interval = 25
seeds = [42, 123, 456]
text_sizes = []
