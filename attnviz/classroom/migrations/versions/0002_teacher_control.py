"""The teacher's control of a class and the limits on one visitor (issue 46).

Classes: `joining_open` (the teacher closes and reopens joining), the joining allowance
(`join_allowance`, `join_allowance_at`: a token bucket per class) and `creator` (a hash of the
visitor who created it: classes per visitor are limited). Students: `visitor` (one browser joins a
class once), `removed_at` (the teacher removed them) and the exercise they are stuck on
(`working_on`, `wrong_tries`, `working_at`: the live view shows a student before they finish). Answers: `shown` (the exercise ended with
the answer shown, not right on a later try).

Revision ID: 0002
Revises: 0001
"""

import sqlalchemy as sa
from alembic import op

# Frozen: this file spells out the columns it adds; it never imports the models.
UTC_TIME = sa.DateTime(timezone=True)  # models.UTCDateTime's column type

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("classes") as batch:
        batch.add_column(sa.Column("joining_open", sa.Boolean(), nullable=False, server_default=sa.true()))
        batch.add_column(sa.Column("join_allowance", sa.Float(), nullable=True))
        batch.add_column(sa.Column("join_allowance_at", UTC_TIME, nullable=True))
        batch.add_column(sa.Column("creator", sa.String(64), nullable=True))
    with op.batch_alter_table("students") as batch:
        batch.add_column(sa.Column("visitor", sa.String(64), nullable=True))
        batch.add_column(sa.Column("removed_at", UTC_TIME, nullable=True))
        batch.add_column(sa.Column("working_on", sa.String(64), nullable=True))
        batch.add_column(sa.Column("wrong_tries", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("working_at", UTC_TIME, nullable=True))
    with op.batch_alter_table("answers") as batch:
        batch.add_column(sa.Column("shown", sa.Boolean(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("answers") as batch:
        batch.drop_column("shown")
    with op.batch_alter_table("students") as batch:
        batch.drop_column("working_at")
        batch.drop_column("wrong_tries")
        batch.drop_column("working_on")
        batch.drop_column("removed_at")
        batch.drop_column("visitor")
    with op.batch_alter_table("classes") as batch:
        batch.drop_column("creator")
        batch.drop_column("join_allowance_at")
        batch.drop_column("join_allowance")
        batch.drop_column("joining_open")
