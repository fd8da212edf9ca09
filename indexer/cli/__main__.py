"""``python -m splitaudit.indexer.cli`` runs the splitaudit CLI."""

from splitaudit.indexer.cli.main import main

main()
