"""The Step by step screen (pages/steps.py): its declared fields."""
