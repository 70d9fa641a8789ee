"""One transformer block assembled into decoder, encoder and encoder-decoder stacks."""
