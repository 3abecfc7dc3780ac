"""The real reference engine (torch + transformers): profiler, serving loop, HTTP server
(``engine/server/``). Its load-generating client is ``clients.measure``.

Second floor: may import the simulator, never the faces. Filled in by the engine issue.
"""
