"""Redis, behind one seam: every key and stream name, every stream command and Lua script.

The way ``storage/`` owns every SQL statement, this package owns everything dragoman says to
Redis; the packages above call its functions and never build a key or send a command themselves.
"""
