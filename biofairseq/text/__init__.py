"""Text utilities that the corpus, fine-tuning and report code share: sentence splitting, Markdown tables and the
English of messages."""
