"""Helpers for testing code that reads model answers: ``answers`` holds a catalogue of the shapes real models answer
in and a scripted model that answers with them."""
