"""SentencePiece tokenizer with lmpt's reserved tokens, trained once per corpus and cached."""
