"""Corpus preparation behind preprocess/: cleaning, vocabularies, encoding. Imported only by the commands that need it."""
