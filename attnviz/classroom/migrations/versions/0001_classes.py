"""Classes, students and answers.

Revision ID: 0001
Revises: (none)
"""

import sqlalchemy as sa
from alembic import op

# Frozen: this file spells out the schema it creates; it never imports the models.
UTC_TIME = sa.DateTime(timezone=True)  # models.UTCDateTime's column type

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "classes",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("code", sa.String(6), nullable=False),
        sa.Column("name", sa.String(80), nullable=False),
        sa.Column("lessons", sa.JSON(), nullable=False),
        sa.Column("teacher_hash", sa.String(64), nullable=False),
        sa.Column("created_at", UTC_TIME, nullable=False),
        sa.Column("expires_at", UTC_TIME, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_classes"),
        sa.UniqueConstraint("code", name="uq_classes_code"),
        sa.UniqueConstraint("teacher_hash", name="uq_classes_teacher_hash"),
    )
    op.create_index("ix_classes_expires_at", "classes", ["expires_at"])
    op.create_table(
        "students",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("class_id", sa.Integer(), nullable=False),
        sa.Column("nickname", sa.String(40), nullable=False),
        sa.Column("joined_at", UTC_TIME, nullable=False),
        sa.Column("allowance", sa.Float(), nullable=False),
        sa.Column("allowance_at", UTC_TIME, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_students"),
        sa.ForeignKeyConstraint(
            ["class_id"], ["classes.id"], name="fk_students_class_id_classes", ondelete="CASCADE"
        ),
        sa.UniqueConstraint("class_id", "nickname", name="uq_students_class_id_nickname"),
    )
    op.create_table(
        "answers",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("student_id", sa.Integer(), nullable=False),
        sa.Column("exercise_id", sa.String(64), nullable=False),
        sa.Column("seed", sa.Integer(), nullable=False),
        sa.Column("answer", sa.String(200), nullable=False),
        sa.Column("right_first", sa.Boolean(), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("seconds", sa.Float(), nullable=False),
        sa.Column("answered_at", UTC_TIME, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_answers"),
        sa.ForeignKeyConstraint(
            ["student_id"], ["students.id"], name="fk_answers_student_id_students", ondelete="CASCADE"
        ),
        sa.UniqueConstraint(
            "student_id", "exercise_id", "seed", name="uq_answers_student_id_exercise_id_seed"
        ),
    )


def downgrade() -> None:
    op.drop_table("answers")
    op.drop_table("students")
    op.drop_table("classes")
