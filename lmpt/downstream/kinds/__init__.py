"""The task kinds, one module each holding its `Task` and its `Result` (lmpt.downstream.task): multiple choice
(`choice`), minimal pairs (`pairs`), classification and regression, over what the zero-shot and the fine-tuned kinds
share (`zero_shot`, `fine_tuned`). The registry (lmpt.downstream.task.kinds) imports every module here."""
