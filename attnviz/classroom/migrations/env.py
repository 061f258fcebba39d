"""Alembic's environment: the migrations run on the connection `db.migrate` opened (inside its
transaction, after its lock), never on a URL of their own."""

from alembic import context

from attnviz.classroom.models import Base

context.configure(
    connection=context.config.attributes["connection"],
    target_metadata=Base.metadata,
    render_as_batch=True,  # SQLite alters a table by copying it; batch mode writes that
)
with context.begin_transaction():
    context.run_migrations()
