"""The real reference engine (torch + transformers): profiler, serving loop, server, client.

Second floor: may import the simulator, never the faces. Filled in by the engine issue.
"""
