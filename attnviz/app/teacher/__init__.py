"""The Teacher screen: create a class, hand it out, watch how it answers (page.py and what only it uses)."""
