"""Downstream yardsticks that rank pre-trained runs across objectives, by floor: figure names and statistics; where
examples come from (`sources`, `glue`); the engines that score (`likelihood`, `training`, `finetune`, `floors`,
`control`); what every task and result answers and the one registry (`task`); one module per kind (`kinds/`); then
the records, a run's tasks and the commands (`lmpt-eval`, `lmpt-finetune`, GLUE's suite). docs/layout.md draws it."""
