"""Reading tasks: multiple-choice and minimal-pair files, labelled files and folders, and lmpt-finetune's options."""
