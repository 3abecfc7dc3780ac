"""The live server: the OpenAI-compatible HTTP layer over a live engine.

``app`` (Starlette routes, disconnect watching), ``answer`` (a completion, a stream or an
error from a request's engine events), ``api`` (request validation, OpenAI shapes and
errors), ``metrics`` (Prometheus text), ``model`` (which model and tokenizer ``servesim
serve`` loads), ``records`` (the server's request records), ``text`` (token ids <-> text),
``live`` (the engine thread), ``live_api`` (what the HTTP layer needs from it, no torch).
"""
