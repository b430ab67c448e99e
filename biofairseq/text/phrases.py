"""The English of the messages and reports: one way to put an article before a name."""


def with_article(name: str) -> str:
    """'a BERT', 'an ELECTRA': the article before a model family's (or any) name, by its first letter."""
    return f"{'an' if name[0] in 'AEIOU' else 'a'} {name}"
