"""Everything the harness does with data an agent could have written: the one place that
opens, reads, writes, lists or runs git over an agent's folder, treating every path, link and
git setting there as hostile.

Modules: ``paths`` (splitting a path an agent gave, and the boundary's error: pure),
``files`` (files opened by handle, one name at a time, never through a link), ``git`` (the
harness's git over an agent's folder, disarmed), ``git_work`` (what an agent changed, read
and recorded with that git), ``confined`` (a command run over an agent's folder inside a
sandbox of its own: the ``metadata:`` commands).
"""
