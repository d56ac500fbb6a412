"""SQLAlchemy persistence of share-group state: the core's ``ShareStateStore`` on Postgres or
SQLite. The schema comes only from the Alembic migrations in ``migrations/``."""
