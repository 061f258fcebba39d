"""A class's own instances of the lessons' exercises (issue 46, point 4).

A lesson's answer key is a function of its seed alone, and a student's link names their seed: had a
class used the public instances, a student could open `/lesson?seed=N` without the class and print
the key for seed N. Inside a class the exercises are those of an instance seed only the server can
compute: an HMAC-SHA256 keyed by the class's stored teacher hash (the SHA-256 of the teacher token,
never shown to a student) over the link's seed, folded into 0 … `MAX_SEED`. Two classes with the same
seed get different instances; what is stored and shown as the seed stays the link's (the student's
sheet number), so nothing in the database changes meaning. No Streamlit here.
"""

from __future__ import annotations

import hashlib
import hmac
from typing import TYPE_CHECKING

from attnviz.classroom.rules import check_code, check_seed
from attnviz.lessons.core import MAX_SEED

if TYPE_CHECKING:
    from attnviz.classroom.store import ClassDB

LABEL = b"attnviz lesson instance "  # what the MAC is over, before the seed: this use and no other


def instance_of(teacher_hash: str, seed: int) -> int:
    """The instance seed of sheet `seed` in the class whose teacher hash (hex) is `teacher_hash`."""
    mac = hmac.new(bytes.fromhex(teacher_hash), LABEL + str(check_seed(seed)).encode(), hashlib.sha256)
    return int.from_bytes(mac.digest()[:8], "big") % (MAX_SEED + 1)


def instance_seed(db: ClassDB, code: str, seed: int) -> int:
    """The seed class `code`'s exercises of sheet `seed` are drawn from (`instance_of` its teacher hash).

    Raises:
        ClassError: a malformed code or seed; AccessDenied: no running class has this code.
    """
    code, seed = check_code(code), check_seed(seed)
    with db._read.begin() as s:  # the package's own reader: ClassDB keeps its lookups private
        teacher_hash = db._running_class(s, code, db.now()).teacher_hash
    return instance_of(teacher_hash, seed)
