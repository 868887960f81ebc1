"""Sentence sentiment from tab-separated files (NSMC): reader ``sentiment_tsv``."""
from elmo_plugin.tasks.sentiment.sentiment_tsv import SentimentTsvReader

__all__ = ["SentimentTsvReader"]
