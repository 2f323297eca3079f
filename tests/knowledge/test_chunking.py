"""The splitter: a short document is one chunk; long ones are packed under the token cap with overlap."""

from __future__ import annotations

from memory.embedder import get_embedder
from memory.knowledge.chunking import split


def count(text: str) -> int:
    return get_embedder().count_tokens(text)


def test_it_keeps_a_short_document_as_one_chunk_spanning_its_stripped_text():
    text = "\n\n  Refunds are possible within 30 days.\n\nThey go to the original card.  \n"

    chunks = split(text)

    assert len(chunks) == 1
    assert chunks[0].text == text.strip()
    assert text[chunks[0].char_start:chunks[0].char_end] == chunks[0].text
    assert chunks[0].token_count == count(text.strip())


def test_it_gives_no_chunk_for_blank_text():
    assert split("  \n\n ") == []


def test_it_packs_paragraphs_under_the_cap_and_every_chunk_is_a_span_of_the_source():
    paragraphs = [f"Paragraph {i} explains step {i} of the deployment runbook in a few plain words." for i in range(40)]
    text = "\n\n".join(paragraphs)

    chunks = split(text, max_tokens=60, overlap_tokens=20)

    assert len(chunks) > 5
    for chunk in chunks:
        assert chunk.token_count <= 60
        assert count(chunk.text) <= 60
        assert text[chunk.char_start:chunk.char_end] == chunk.text
    assert [c.ordinal for c in chunks] == list(range(len(chunks)))
    # Every paragraph is whole in at least one chunk: nothing is cut mid-paragraph here.
    for paragraph in paragraphs:
        assert any(paragraph in c.text for c in chunks)


def test_it_overlaps_consecutive_chunks_without_repeating_a_whole_chunk():
    text = "\n\n".join(f"Fact number {i} is that the value of item {i} equals {i * 7}." for i in range(30))

    chunks = split(text, max_tokens=50, overlap_tokens=20)

    overlapping = [a for a, b in zip(chunks, chunks[1:], strict=False) if b.char_start < a.char_end]
    assert overlapping, "consecutive chunks should share their boundary paragraphs"
    for a, b in zip(chunks, chunks[1:], strict=False):
        assert b.char_start > a.char_start  # progress: never the same chunk again
        assert b.char_end > a.char_end


def test_it_cuts_an_oversized_paragraph_into_sentences_and_an_oversized_sentence_into_words():
    long_paragraph = " ".join(f"Sentence {i} talks about invoices." for i in range(60))
    endless_sentence = " ".join(f"word{i}" for i in range(400))
    text = long_paragraph + "\n\n" + endless_sentence

    chunks = split(text, max_tokens=40, overlap_tokens=0)

    assert all(c.token_count <= 40 for c in chunks)
    assert all(text[c.char_start:c.char_end] == c.text for c in chunks)
    # Sentences of the first paragraph are not cut in the middle.
    assert all(c.text.endswith(".") for c in chunks if c.char_end <= len(long_paragraph))
    covered = "".join(c.text for c in chunks)
    assert "word0" in covered and "word399" in covered
