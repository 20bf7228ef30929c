# Training-objective ablation: ListMLE (labels give the order, ties broken at random by the seed), 3 seeds.
# python train.py config/gsm8k_1p7b.py config/ablate_loss_listmle.py
loss = 'listmle'
seeds = [42, 123, 456]
