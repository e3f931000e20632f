"""memsleuth: measures memory behaviour the right way and explains what it measured."""
__version__ = "0.1.0"
