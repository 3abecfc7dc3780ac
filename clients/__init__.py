"""Clients of a serving engine: programs that drive a running server over HTTP and record
what they see. ``clients.measure`` is ``servesim measure`` (any OpenAI-compatible
endpoint: ``servesim serve``, vLLM, SGLang).

Third floor, beside ``calibrate``: imports the simulator, never torch, ``engine`` or a face.
"""
