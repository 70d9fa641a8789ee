"""Downstream yardsticks that rank pre-trained runs across objectives, by floor: figure names and statistics, reading
tasks (`tasks/`), zero-shot scoring (`zero_shot/`), fine-tuning (`finetuning/`), the task kinds and their registry
(`kinds/`), then the records' codec, scoring after training and the commands (`lmpt-eval`, `lmpt-finetune`)."""
