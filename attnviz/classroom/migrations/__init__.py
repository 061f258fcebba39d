"""Alembic migrations of the class database (applied by `attnviz.classroom.db.migrate`).

A schema change is a new file in `versions/` whose `down_revision` is the newest one's, written
by hand or drafted by `alembic.autogenerate` against `attnviz.classroom.models`;
tests/classroom/test_migrations.py checks that the migrated schema equals the models.
"""
