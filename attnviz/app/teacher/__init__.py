"""The Teacher screen: create a class, hand it out, watch how it answers (pages/teacher.py and what only it uses)."""
