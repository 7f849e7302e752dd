from training import default_corpus
from training.default_corpus import default_documents


def test_documents_are_parsed_once_and_handed_out_as_copies():
    """The second call reuses the first one's parse, and no caller's change
    to its lists reaches another caller; a fresh parse gives the same."""
    default_corpus._documents.cache_clear()
    first = default_documents()
    assert len(first) > 2000 and all(isinstance(d, list) and d for d in first)
    kept = [list(d) for d in first[:3]]
    first[0].append("changed")
    first.append(["extra"])
    again = default_documents()
    assert default_corpus._documents.cache_info().hits == 1  # not parsed again
    assert again[:3] == kept and again[-1] != ["extra"] and len(again) == len(first) - 1
    default_corpus._documents.cache_clear()
    assert default_documents() == again
