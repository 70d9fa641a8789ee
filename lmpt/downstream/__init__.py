"""Downstream yardsticks that rank pre-trained runs across objectives: fine-tuning on labelled tasks
(`lmpt-finetune`, lmpt.downstream.finetune) and zero-shot scoring."""
