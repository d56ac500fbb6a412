"""The README's first command: ``shareproxy demo`` runs everything embedded and checks itself."""

import io

from rich.console import Console

from shareproxy.demo import run_demo


def test_demo_finishes_every_record_exactly_once():
    out = io.StringIO()
    assert run_demo(records=300, partitions=3, consumers=3, console=Console(file=out, width=150))
    text = out.getvalue()
    assert "every one of the 300 records was accepted or rejected exactly once" in text
    assert "consumer-3" in text
