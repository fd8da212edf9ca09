"""``python -m indexer.cli`` runs the splitaudit CLI."""

from indexer.cli.main import main

main()
