"""Token tagging from CoNLL-style two-column files (WikiAnn NER): reader ``token_tag_conll``."""
from elmo_plugin.tasks.tagging.token_tag_conll import TokenTagConllReader

__all__ = ["TokenTagConllReader"]
