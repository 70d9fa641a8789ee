"""Downstream yardsticks that rank pre-trained runs across objectives: fine-tuning on labelled tasks
(`lmpt-finetune`, lmpt.downstream.finetuning.finetune) and zero-shot scoring."""
