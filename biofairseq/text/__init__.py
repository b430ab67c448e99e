"""Text utilities that the corpus, fine-tuning and report code share: sentence splitting and Markdown tables."""
