"""The ``servesim`` command line: the top floor. It imports the others; nothing imports it."""
