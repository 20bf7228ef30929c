# Verifier-steered search against best-of-N at equal generated tokens, on the 'shop' word family (3 steps and an
# answer line per solution). The best-of-N pool is config/words.py's shop cell (48 eval problems x 32); each shop
# verifier (seed s; plain, and trained on prefixes too) steers its own search runs on the same 48 problems:
#   python extract.py config/words.py --word_family=shop --out_dir=out/words_shop --train_range="(0, 639)" \
#     --n_eval_samples=32
#   python label.py config/words.py --out_dir=out/words_shop
#   python train.py config/words.py --out_dir=out/words_shop
#   python train.py config/words.py --out_dir=out/words_shop --prefix_train=0.5
#   for s in 42 123 456; do for n in 4 8; do for v in hsrm hsrm_prefix_train-0.5; do
#     d=out/search_shop/${v}_beam_n${n}_seed$s
#     python -m studies.policy extract.py config/search_shop.py --search=beam --n_eval_samples=$n --seed=$s \
#       --out_dir=$d --search_ckpt=out/words_shop/verifiers/hsrm_epochs-20_eval_interval-25${v#hsrm}_seed$s/ckpt.pt \
#       && python label.py config/search_shop.py --out_dir=$d
#   done; done; done
#   (DVTS: --search=dvts; N = 16: --n_eval_samples=16)
#   python -m studies.steer config/search_shop.py
out_dir = 'out/search_shop'
model = 'smollm2'
dataset = 'words'
word_family = 'shop'
train_range = None
eval_range = (1000, 1047)
n_eval_samples = 4
max_new_tokens = 128
temperature = 0.8
top_p = 0.95
batch_size = 64
search = 'beam'
search_width = 4
pool_dir = 'out/words_shop/eval'  # steer.py: the best-of-N pool, its training split and plain HSRM's checkpoints
train_dir = 'out/words_shop/train'
ckpts = ['out/words_shop/verifiers/hsrm_epochs-20_eval_interval-25_seed*/ckpt.pt']  # words.py's plain HSRM
search_dirs = ['out/search_shop/*/eval']
difficulty = [0.1, 0.3]  # solve-rate cuts for the by-difficulty rows: SmolLM2 solves 14% of shop's samples, so
                         # steer.py's default [0.2, 0.5] leaves 38 / 6 / 4 problems; these give 26 / 15 / 7
