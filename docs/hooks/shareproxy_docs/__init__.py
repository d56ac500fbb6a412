"""The documentation site's generated pages, each rendered from the one source it documents
when MkDocs builds the site (``docs/hooks/generate.py``), so no page can fall behind the code."""
