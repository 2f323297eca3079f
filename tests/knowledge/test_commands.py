"""manage.py create_access_domain and ingest_documents."""

from __future__ import annotations

import pytest
from django.core.management import CommandError, call_command

from memory.knowledge.models import AccessDomain, Chunk, Document

pytestmark = pytest.mark.django_db

PAGE = """<!doctype html>
<html><head><title>Returns &amp; exchanges</title><style>body { color: red; }</style>
<script>window.tracking = "do-not-index";</script></head>
<body><nav><a href="/">Home</a></nav>
<h1>Returns &amp; exchanges</h1>
<p>Items can be <strong>returned</strong> within <em>30&nbsp;days</em>.</p>
<ul><li>Keep the receipt.</li><li>Use the <a href="/label">prepaid label</a>.</li></ul>
<!-- internal comment -->
</body></html>
"""


def test_create_access_domain_with_subjects_kinds_or_everyone(tenant, capsys):
    call_command("create_access_domain", "--tenant", "acme", "--name", "support", "--subjects", "usr_a,usr_b",
                 "--kinds", "project")
    call_command("create_access_domain", "--tenant", "acme", "--name", "public", "--all-subjects")

    support = AccessDomain.objects.get(name="support")
    assert sorted(support.readers.values_list("external_id", flat=True)) == ["usr_a", "usr_b"]
    assert support.reader_kinds == ["project"]
    assert AccessDomain.objects.get(name="public").all_subjects
    assert "created access domain support" in capsys.readouterr().out


@pytest.mark.parametrize("args", [["--name", "x"], ["--name", "Bad Name", "--all-subjects"],
                                  ["--name", "k", "--kinds", "robot"]])
def test_create_access_domain_refuses_bad_input(tenant, args):
    with pytest.raises(CommandError):
        call_command("create_access_domain", "--tenant", "acme", *args)


def test_create_access_domain_refuses_a_duplicate_name(tenant):
    call_command("create_access_domain", "--tenant", "acme", "--name", "support", "--all-subjects")
    with pytest.raises(CommandError, match="already exists"):
        call_command("create_access_domain", "--tenant", "acme", "--name", "support", "--all-subjects")


def test_ingest_documents_stores_html_as_text_without_markup(tenant, tmp_path, make_domain):
    make_domain(tenant, "help")
    (tmp_path / "returns.html").write_text(PAGE)
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "faq.md").write_text("# FAQ\n\nShipping takes two days.")
    (tmp_path / "notes" / "todo.txt").write_text("Plain text file.")
    (tmp_path / "image.png").write_bytes(b"\x89PNG")  # skipped: not a text format

    call_command("ingest_documents", "--tenant", "acme", "--domain", "help", str(tmp_path))

    page = Document.objects.get(external_id="returns.html")
    assert page.title == "Returns & exchanges"
    assert page.mime_type == "text/html"
    text = "\n".join(Chunk.objects.filter(document=page).order_by("ordinal").values_list("text", flat=True))
    assert text == ("Home\n\nReturns & exchanges\n\nItems can be returned within 30 days.\n\n"
                    "Keep the receipt.\n\nUse the prepaid label.")
    for markup in ("<", ">", "&amp;", "&nbsp;", "color: red", "tracking", "internal comment"):
        assert markup not in text
    assert sorted(Document.objects.values_list("external_id", flat=True)) == [
        "notes/faq.md", "notes/todo.txt", "returns.html"]
    assert Document.objects.get(external_id="notes/todo.txt").title == "todo"


def test_ingest_documents_again_skips_unchanged_files_and_versions_changed_ones(tenant, tmp_path, make_domain,
                                                                                capsys):
    make_domain(tenant, "help")
    (tmp_path / "a.txt").write_text("First text.")
    (tmp_path / "b.txt").write_text("Second text.")
    call_command("ingest_documents", "--tenant", "acme", "--domain", "help", str(tmp_path))
    (tmp_path / "b.txt").write_text("Second text, revised.")

    call_command("ingest_documents", "--tenant", "acme", "--domain", "help", str(tmp_path))

    assert "1 updated, 1 unchanged" in capsys.readouterr().out
    assert dict(Document.objects.values_list("external_id", "version")) == {"a.txt": 1, "b.txt": 2}


def test_ingest_documents_refuses_a_file_with_a_secret_and_stores_the_rest(tenant, tmp_path, make_domain, capsys):
    make_domain(tenant, "help")
    (tmp_path / "ok.txt").write_text("Nothing to hide here.")
    (tmp_path / "leak.txt").write_text("Line one.\nprivate: -----BEGIN RSA PRIVATE KEY-----\nMIIEabc\n")

    with pytest.raises(CommandError, match="1 file"):
        call_command("ingest_documents", "--tenant", "acme", "--domain", "help", str(tmp_path))

    err = capsys.readouterr().err
    assert "leak.txt: secret_detected" in err and "line 2" in err and "MIIE" not in err
    assert list(Document.objects.values_list("external_id", flat=True)) == ["ok.txt"]


def test_ingest_documents_dry_run_stores_nothing(tenant, tmp_path, make_domain):
    make_domain(tenant, "help")
    (tmp_path / "a.md").write_text("Some text.")

    call_command("ingest_documents", "--tenant", "acme", "--domain", "help", str(tmp_path), "--dry-run")

    assert Document.objects.count() == 0


@pytest.mark.parametrize("args", [["--domain", "nope", "."], ["--domain", "help", "/no/such/path"]])
def test_ingest_documents_refuses_unknown_domains_and_paths(tenant, make_domain, args):
    make_domain(tenant, "help")
    with pytest.raises(CommandError):
        call_command("ingest_documents", "--tenant", "acme", *args)


def test_reembed_knowledge_fills_missing_embeddings_and_text_vectors(agent, handbook, capsys):
    from tests.knowledge.conftest import doc_body

    agent.post("/api/v1/documents", doc_body())
    chunk = Chunk.objects.get()
    original = list(chunk.embedding)
    Chunk.objects.update(embedding=None, search_vector=None)

    call_command("reembed_knowledge", "--tenant", "acme")

    chunk.refresh_from_db()
    assert chunk.embedding is not None
    assert max(abs(a - b) for a, b in zip(chunk.embedding, original, strict=True)) < 1e-4
    assert Chunk.objects.filter(search_vector="refund").exists()
    assert "embeddings written: 1" in capsys.readouterr().out
    call_command("reembed_knowledge")
    assert "embeddings written: 0" in capsys.readouterr().out


def test_ingest_documents_embeds_large_files_itself(settings, tenant, tmp_path, make_domain):
    settings.ENGRAM_KNOWLEDGE_SYNC_EMBED_CHUNKS = 1  # the API would leave these to a worker
    make_domain(tenant, "help")
    (tmp_path / "long.md").write_text("\n\n".join(f"Paragraph {i} of the long manual about shipping rules."
                                                  for i in range(60)))

    call_command("ingest_documents", "--tenant", "acme", "--domain", "help", str(tmp_path))

    assert Chunk.objects.count() > 1
    assert not Chunk.objects.filter(embedding__isnull=True).exists()
