"""The Lesson screen: pages/lesson.py and what only it uses."""
